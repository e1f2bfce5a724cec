//! `jdmg._core`: the thin Rust layer under the Python package `jdmg`.
//!
//! The Python side (`python/jdmg/__init__.py`) checks and converts the
//! arguments (SciPy's conventions) and calls [`solve`] here with the matrix as
//! CSR arrays or as a Python callable, the parameters as the JSON of a
//! [`jdmg::JdParams`] (so every library parameter is reachable by its serde
//! name, and a new one needs no change here), and optional start vectors and
//! preconditioner. This layer only calls the library's public API:
//! [`jdmg::Solver`] (named preconditioners, a mass matrix), [`jdmg::solve`] on a
//! [`jdmg::Problem`] (user preconditioners, operators) and
//! [`jdmg::Solver::shift_invert`] (σ with an explicit matrix).
//!
//! The GIL is released while Rust computes ([`Python::detach`]) and taken back
//! for each Python callback. An exception raised by a callback is stored, every
//! later callback is skipped (its output is zero) and the solve is stopped at
//! the end of the outer iteration by the observer; the stored exception is then
//! raised unchanged. The observer also checks for signals (Ctrl-C) once per
//! outer iteration.

use std::ops::ControlFlow;
use std::sync::Mutex;

use jdmg::prelude::*;
use jdmg::Spaces;
use numpy::{PyArray1, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

create_exception!(
    jdmg,
    JdmgError,
    PyRuntimeError,
    "A solve that failed for a reason other than the arguments or the budget (a preconditioner or factorization that could not be built, a breakdown)."
);

/// The first exception raised by a Python callback during a solve.
#[derive(Default)]
struct Failure(Mutex<Option<PyErr>>);

impl Failure {
    fn failed(&self) -> bool {
        self.0.lock().map(|e| e.is_some()).unwrap_or(true)
    }
    fn set(&self, e: PyErr) {
        if let Ok(mut slot) = self.0.lock() {
            slot.get_or_insert(e);
        }
    }
    fn take(&self) -> Option<PyErr> {
        self.0.lock().ok().and_then(|mut e| e.take())
    }
}

/// A Python callable `f(x, k) -> y` on `k` column-major vectors of `n` rows,
/// both flat float64 arrays of n·k values (the Python side reshapes them).
struct Callback<'f> {
    n: usize,
    f: &'f Py<PyAny>,
    failure: &'f Failure,
}

impl Callback<'_> {
    fn call(&self, x: &[f64], y: &mut [f64], k: usize) {
        let m = self.n * k;
        call_block(self.f, self.failure, &x[..m], &mut y[..m], k, 0.0);
    }
}

impl Operator for Callback<'_> {
    fn nrows(&self) -> usize {
        self.n
    }
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        self.call(x, y, k)
    }
}

impl Preconditioner for Callback<'_> {
    fn nrows(&self) -> usize {
        self.n
    }
    fn apply_block(&self, r: &[f64], z: &mut [f64], k: usize) {
        self.call(r, z, k)
    }
}

/// The Python exception of a library error (not the budget ones, which the
/// Python side turns into `NoConvergence`).
fn to_py(e: JdError) -> PyErr {
    match e {
        JdError::InvalidParams { .. }
        | JdError::NotSymmetric { .. }
        | JdError::MassNotPositiveDefinite { .. } => PyValueError::new_err(e.to_string()),
        JdError::NonFinite("matrix") => PyValueError::new_err(e.to_string()),
        e => JdmgError::new_err(e.to_string()),
    }
}

/// The matrix, built.
enum Matrix {
    Csr(CsrMatrix),
    Callable(Py<PyAny>),
}

/// The matrix of a solve: CSR arrays (borrowed from numpy) or a Python callable.
enum Input<'s> {
    Csr(&'s [i64], &'s [i64], &'s [f64]),
    Callable(Py<PyAny>),
}

/// The [`CsrMatrix`] of n × n CSR arrays (every invariant checked).
fn csr_matrix(
    n: usize,
    indptr: &[i64],
    indices: &[i64],
    data: &[f64],
) -> Result<CsrMatrix, JdError> {
    csr_rect(n, n, indptr, indices, data)
}

/// The [`CsrMatrix`] of nrows × ncols CSR arrays (every invariant checked).
fn csr_rect(
    nrows: usize,
    ncols: usize,
    indptr: &[i64],
    indices: &[i64],
    data: &[f64],
) -> Result<CsrMatrix, JdError> {
    let bad = |what: &str| JdError::invalid("matrix", format!("invalid CSR matrix: {what}"));
    let indptr = indptr
        .iter()
        .map(|&x| usize::try_from(x))
        .collect::<Result<Vec<usize>, _>>()
        .map_err(|_| bad("a negative row pointer"))?;
    let indices = indices
        .iter()
        .map(|&c| u32::try_from(c))
        .collect::<Result<Vec<u32>, _>>()
        .map_err(|_| bad("a column index out of range"))?;
    CsrMatrix::new(nrows, ncols, indptr, indices, data.to_vec()).map_err(|e| bad(&e.to_string()))
}

/// Solves; returns `(status, eigenvalues, eigenvectors, converged,
/// residual_norms, stats_json)`: status 0 converged, 1 the budget ran out or
/// pairs are missing by the inertia count, 2 stopped ([`Outcome`]). Eigenvalues in the library's target order,
/// eigenvectors as one flat array of nev·n values (column-major), empty when
/// `vectors` is false. The CSR matrix is built, and the solve runs, without
/// the GIL.
#[pyfunction(name = "solve")]
#[pyo3(signature = (n, params_json, indptr=None, indices=None, data=None, matvec=None, precond=None, x0=None, deflation=None, sigma=None, vectors=true, mass_indptr=None, mass_indices=None, mass_data=None, mass_matvec=None, interval=None, index_range=None))]
#[allow(clippy::too_many_arguments)]
fn solve_py<'py>(
    py: Python<'py>,
    n: usize,
    params_json: &str,
    indptr: Option<PyReadonlyArray1<'py, i64>>,
    indices: Option<PyReadonlyArray1<'py, i64>>,
    data: Option<PyReadonlyArray1<'py, f64>>,
    matvec: Option<Py<PyAny>>,
    precond: Option<Py<PyAny>>,
    x0: Option<PyReadonlyArray1<'py, f64>>,
    deflation: Option<PyReadonlyArray1<'py, f64>>,
    sigma: Option<f64>,
    vectors: bool,
    mass_indptr: Option<PyReadonlyArray1<'py, i64>>,
    mass_indices: Option<PyReadonlyArray1<'py, i64>>,
    mass_data: Option<PyReadonlyArray1<'py, f64>>,
    mass_matvec: Option<Py<PyAny>>,
    interval: Option<(f64, f64)>,
    index_range: Option<(usize, usize)>,
) -> PyResult<Bound<'py, PyTuple>> {
    let params: JdParams = serde_json::from_str(params_json)
        .map_err(|e| PyValueError::new_err(format!("invalid parameters: {e}")))?;
    let input = match (&indptr, &indices, &data, matvec) {
        (Some(p), Some(i), Some(d), None) => {
            Input::Csr(p.as_slice()?, i.as_slice()?, d.as_slice()?)
        }
        (None, None, None, Some(f)) => Input::Callable(f),
        _ => {
            return Err(PyValueError::new_err(
                "give either the CSR arrays or a matvec callable",
            ))
        }
    };
    let mass_input = match (&mass_indptr, &mass_indices, &mass_data, mass_matvec) {
        (Some(p), Some(i), Some(d), None) => {
            Some(Input::Csr(p.as_slice()?, i.as_slice()?, d.as_slice()?))
        }
        (None, None, None, Some(f)) => Some(Input::Callable(f)),
        (None, None, None, None) => None,
        _ => {
            return Err(PyValueError::new_err(
                "give either the CSR arrays of M or its matvec callable",
            ))
        }
    };
    if sigma.is_some()
        && mass_input.is_some()
        && !(matches!(input, Input::Csr(..)) && matches!(mass_input, Some(Input::Csr(..))))
    {
        return Err(PyValueError::new_err(
            "shift-and-invert with a mass matrix needs A and M as matrices",
        ));
    }
    let spaces = Spaces {
        initial: x0
            .as_ref()
            .map(|x| x.as_slice())
            .transpose()?
            .unwrap_or(&[]),
        deflation: deflation
            .as_ref()
            .map(|x| x.as_slice())
            .transpose()?
            .unwrap_or(&[]),
    };

    let failure = Failure::default();
    let result = py.detach(|| {
        let matrix = match input {
            Input::Csr(p, i, d) => Matrix::Csr(csr_matrix(n, p, i, d)?),
            Input::Callable(f) => Matrix::Callable(f),
        };
        let mass = match mass_input {
            Some(Input::Csr(p, i, d)) => Some(Matrix::Csr(
                csr_matrix(n, p, i, d).map_err(|e| JdError::invalid("mass", e))?,
            )),
            Some(Input::Callable(f)) => Some(Matrix::Callable(f)),
            None => None,
        };
        let mut observer = |_: &IterationEvent| {
            if failure.failed() {
                return ControlFlow::Break(());
            }
            if let Err(e) = Python::attach(|py| py.check_signals()) {
                failure.set(e);
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        };
        let pc = precond.as_ref().map(|f| Callback {
            n,
            f,
            failure: &failure,
        });
        let pc_dyn = pc
            .as_ref()
            .map(|p| p as &(dyn Preconditioner + Send + Sync));
        let range = match (interval, index_range) {
            (Some((lo, hi)), _) => Some(jdmg::slicing::Range::Values(lo, hi)),
            (None, Some((i, j))) => Some(jdmg::slicing::Range::Indices(i, j)),
            (None, None) => None,
        };
        if let Some(range) = range {
            // Every eigenpair in [lo, hi] (or of indices i..=j), certified by
            // inertia (spectrum slicing).
            let Matrix::Csr(a) = &matrix else {
                return Err(JdError::invalid(
                    "subset_by_value",
                    "an interval needs A as a matrix (it factors A - tI)",
                ));
            };
            let solver = jdmg::Solver::new(a, &params);
            let solver = match &mass {
                None => solver,
                Some(Matrix::Csr(m)) => solver.mass(m),
                Some(Matrix::Callable(_)) => {
                    return Err(JdError::invalid(
                        "subset_by_value",
                        "an interval needs M as a matrix (it factors A - tM)",
                    ))
                }
            };
            let slicing = jdmg::slicing::SliceParams::default();
            let solver = match range {
                jdmg::slicing::Range::Values(lo, hi) => solver.interval(lo, hi, slicing),
                jdmg::slicing::Range::Indices(i, j) => solver.indices(i, j, slicing),
            };
            return solver
                .observer(&mut observer)
                .spaces(Spaces {
                    initial: &[],
                    deflation: spaces.deflation,
                })
                .run();
        }
        if let (Some(s), Matrix::Csr(a), Some(Matrix::Csr(m))) = (sigma, &matrix, &mass) {
            // Shift-and-invert on K − σM (the library maps the eigenvalues back).
            if params.problem.target != Target::LargestMagnitude {
                return Err(JdError::invalid(
                    "sigma",
                    "shift-and-invert with a mass matrix finds the eigenvalues closest to \
                     sigma (which='LM')",
                ));
            }
            return jdmg::Solver::new(a, &params)
                .mass(m)
                .shift_invert(s)
                .observer(&mut observer)
                .spaces(spaces)
                .run();
        }
        if let Some(m) = &mass {
            // K x = λ M x: the library's driver for two matrices and a named
            // preconditioner, else a Problem with the mass operator.
            if let (Matrix::Csr(a), Matrix::Csr(m), None) = (&matrix, m, pc_dyn) {
                return jdmg::Solver::new(a, &params)
                    .mass(m)
                    .observer(&mut observer)
                    .spaces(spaces)
                    .run();
            }
            let comm = SelfComm::new();
            let (a_csr, a_call, m_csr, m_call);
            let (a_op, a_diag): (&(dyn Operator + Sync), Option<Vec<f64>>) = match &matrix {
                Matrix::Csr(a) => {
                    jdmg::symmetry::check_symmetric(a, &params)?;
                    a_csr = precond::spmv::CsrOperator::new(a, params.execution.threads)
                        .map_err(|e| JdError::invalid("matrix", e))?;
                    (&a_csr, Some(a.diagonal()))
                }
                Matrix::Callable(f) => {
                    a_call = Callback {
                        n,
                        f,
                        failure: &failure,
                    };
                    (&a_call, None)
                }
            };
            let (m_op, m_diag): (&(dyn Operator + Sync), Option<Vec<f64>>) = match m {
                Matrix::Csr(m) => {
                    jdmg::symmetry::check_symmetric(m, &params)
                        .map_err(|e| JdError::invalid("mass", e))?;
                    m_csr = precond::spmv::CsrOperator::new(m, params.execution.threads)
                        .map_err(|e| JdError::invalid("mass", e))?;
                    (&m_csr, Some(m.diagonal()))
                }
                Matrix::Callable(f) => {
                    m_call = Callback {
                        n,
                        f,
                        failure: &failure,
                    };
                    (&m_call, None)
                }
            };
            let mut pb = Problem::new(a_op, &comm)?
                .with_mass(m_op)?
                .with_initial(spaces.initial)?
                .with_deflation(spaces.deflation)?;
            if let Some(d) = &a_diag {
                pb = pb.with_diagonal(d)?;
            }
            if let Some(d) = &m_diag {
                pb = pb.with_mass_diagonal(d)?;
            }
            if let Some(k) = pc_dyn {
                pb = pb.with_preconditioner(k)?;
            }
            return solve(&pb, &params, Some(&mut observer));
        }
        match (&matrix, sigma) {
            (Matrix::Csr(a), Some(s)) if params.problem.target == Target::LargestMagnitude => {
                jdmg::Solver::new(a, &params)
                    .shift_invert(s)
                    .observer(&mut observer)
                    .spaces(spaces)
                    .run()
            }
            (Matrix::Csr(a), Some(s)) => {
                // Another target of B = (A − σI)⁻¹ (SciPy's `which` with sigma):
                // the solver on B as `Solver::shift_invert` runs it, the eigenvalues
                // θ returned as they are (the Python side maps them back).
                jdmg::symmetry::check_symmetric(a, &params)?;
                let b = jdmg::st::ShiftInvert::new(a, s, params.execution.threads)?;
                let p = jdmg::st::settings_on_b(&params);
                let comm = SelfComm::new();
                let pb = Problem::new(&b, &comm)?
                    .with_initial(spaces.initial)?
                    .with_deflation(spaces.deflation)?;
                solve(&pb, &p, Some(&mut observer))
            }
            (Matrix::Csr(a), None) => match pc_dyn {
                None => jdmg::Solver::new(a, &params)
                    .observer(&mut observer)
                    .spaces(spaces)
                    .run(),
                Some(k) => {
                    jdmg::symmetry::check_symmetric(a, &params)?;
                    let op = precond::spmv::CsrOperator::new(a, params.execution.threads)
                        .map_err(|e| JdError::invalid("matrix", e))?;
                    let diag = a.diagonal();
                    let comm = SelfComm::new();
                    let pb = Problem::new(&op, &comm)?
                        .with_diagonal(&diag)?
                        .with_preconditioner(k)?
                        .with_initial(spaces.initial)?
                        .with_deflation(spaces.deflation)?;
                    solve(&pb, &params, Some(&mut observer))
                }
            },
            (Matrix::Callable(f), _) => {
                let op = Callback {
                    n,
                    f,
                    failure: &failure,
                };
                let comm = SelfComm::new();
                let mut pb = Problem::new(&op, &comm)?
                    .with_initial(spaces.initial)?
                    .with_deflation(spaces.deflation)?;
                if let Some(k) = pc_dyn {
                    pb = pb.with_preconditioner(k)?;
                }
                solve(&pb, &params, Some(&mut observer))
            }
        }
    });
    // A callback's exception (or a signal) first, whatever the solve returned.
    if let Some(e) = failure.take() {
        return Err(e);
    }
    let sol = result.map_err(to_py)?;
    let status = match sol.outcome {
        Outcome::Converged => 0u8,
        Outcome::BudgetSpent | Outcome::Incomplete => 1,
        Outcome::Stopped => 2,
    };
    let stats = serde_json::to_string(&sol.stats)
        .map_err(|e| JdmgError::new_err(format!("statistics: {e}")))?;
    let w = PyArray1::from_vec(py, sol.eigenvalues);
    let v = if vectors {
        PyArray1::from_vec(py, sol.eigenvectors)
    } else {
        PyArray1::from_vec(py, Vec::new())
    };
    let conv = PyArray1::from_vec(py, sol.converged);
    let rn = PyArray1::from_vec(py, sol.residual_norms);
    debug_assert!(v.len() % n.max(1) == 0);
    PyTuple::new(
        py,
        [
            status.into_pyobject(py)?.into_any(),
            w.into_any(),
            v.into_any(),
            conv.into_any(),
            rn.into_any(),
            stats.into_pyobject(py)?.into_any(),
        ],
    )
}

/// Calls the Python callable `f(x, k) -> y` on `k` column-major vectors
/// (flat float64 arrays; `y.len()` values expected back). A raised exception
/// is stored in `failure`; then, and on every later call, `y` is filled with
/// `fill` (0: the solve's observer stops it; NaN: it stops on `NonFinite`).
fn call_block(f: &Py<PyAny>, failure: &Failure, x: &[f64], y: &mut [f64], k: usize, fill: f64) {
    if failure.failed() {
        y.fill(fill);
        return;
    }
    let r = Python::attach(|py| -> PyResult<()> {
        let xa = PyArray1::from_slice(py, x);
        let out = f.bind(py).call1((xa, k))?;
        let ya: PyReadonlyArray1<f64> = out.extract()?;
        let ys = ya.as_slice()?;
        if ys.len() != y.len() {
            return Err(PyValueError::new_err(format!(
                "a callback returned {} values for {k} vectors of {} rows",
                ys.len(),
                y.len() / k.max(1)
            )));
        }
        y.copy_from_slice(ys);
        Ok(())
    });
    if let Err(e) = r {
        y.fill(fill);
        failure.set(e);
    }
}

/// A = (matvec, rmatvec) as Python callables.
struct RectCallbacks<'f> {
    nrows: usize,
    ncols: usize,
    matvec: &'f Py<PyAny>,
    rmatvec: &'f Py<PyAny>,
    failure: &'f Failure,
}

impl jdmg::RectOperator for RectCallbacks<'_> {
    fn nrows(&self) -> usize {
        self.nrows
    }
    fn ncols(&self) -> usize {
        self.ncols
    }
    fn apply(&self, x: &[f64], y: &mut [f64], k: usize) {
        call_block(self.matvec, self.failure, x, y, k, f64::NAN)
    }
    fn apply_transpose(&self, x: &[f64], y: &mut [f64], k: usize) {
        call_block(self.rmatvec, self.failure, x, y, k, f64::NAN)
    }
}

/// Singular triplets; returns `(status, values, u, v, converged,
/// residual_norms, stats_json)`: status 0 converged, 1 not (the triplets
/// reached). Values in the library's target order; u (nrows·k) and v
/// (ncols·k) column-major, empty when `vectors` is false. Runs without the
/// GIL.
#[pyfunction(name = "svds")]
#[pyo3(signature = (nrows, ncols, params_json, indptr=None, indices=None, data=None, matvec=None, rmatvec=None, vectors=true))]
#[allow(clippy::too_many_arguments)]
fn svds_py<'py>(
    py: Python<'py>,
    nrows: usize,
    ncols: usize,
    params_json: &str,
    indptr: Option<PyReadonlyArray1<'py, i64>>,
    indices: Option<PyReadonlyArray1<'py, i64>>,
    data: Option<PyReadonlyArray1<'py, f64>>,
    matvec: Option<Py<PyAny>>,
    rmatvec: Option<Py<PyAny>>,
    vectors: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let params: jdmg::SvdParams = serde_json::from_str(params_json)
        .map_err(|e| PyValueError::new_err(format!("invalid parameters: {e}")))?;
    let csr = match (&indptr, &indices, &data) {
        (Some(p), Some(i), Some(d)) => Some((p.as_slice()?, i.as_slice()?, d.as_slice()?)),
        (None, None, None) => None,
        _ => return Err(PyValueError::new_err("give all three CSR arrays")),
    };
    let failure = Failure::default();
    let result = py.detach(|| match (csr, &matvec, &rmatvec) {
        (Some((p, i, d)), None, None) => {
            let a = csr_rect(nrows, ncols, p, i, d)?;
            jdmg::svds(&a, &params)
        }
        (None, Some(mv), Some(rmv)) => {
            let op = RectCallbacks {
                nrows,
                ncols,
                matvec: mv,
                rmatvec: rmv,
                failure: &failure,
            };
            jdmg::svds_operator(&op, &params)
        }
        _ => Err(
            JdError::invalid("matrix", "give either the CSR arrays or matvec and rmatvec").into(),
        ),
    });
    if let Some(e) = failure.take() {
        return Err(e);
    }
    let sol = match result {
        Ok(s) => s,
        Err(jdmg::SvdError::Solve(e)) => return Err(to_py(e)),
        Err(e @ jdmg::SvdError::NotConverged(_)) => return Err(JdmgError::new_err(e.to_string())),
    };
    let status = u8::from(!sol.is_converged());
    let stats = serde_json::to_string(&sol.stats)
        .map_err(|e| JdmgError::new_err(format!("statistics: {e}")))?;
    let (u, v) = if vectors {
        (sol.u, sol.v)
    } else {
        (Vec::new(), Vec::new())
    };
    PyTuple::new(
        py,
        [
            status.into_pyobject(py)?.into_any(),
            PyArray1::from_vec(py, sol.values).into_any(),
            PyArray1::from_vec(py, u).into_any(),
            PyArray1::from_vec(py, v).into_any(),
            PyArray1::from_vec(py, sol.converged).into_any(),
            PyArray1::from_vec(py, sol.residual_norms).into_any(),
            stats.into_pyobject(py)?.into_any(),
        ],
    )
}

/// The library's default parameters, as JSON (the Python side documents and
/// checks its keyword arguments against them).
#[pyfunction]
fn default_params() -> PyResult<String> {
    serde_json::to_string(&JdParams::default())
        .map_err(|e| JdmgError::new_err(format!("parameters: {e}")))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(solve_py, m)?)?;
    m.add_function(wrap_pyfunction!(svds_py, m)?)?;
    m.add_function(wrap_pyfunction!(default_params, m)?)?;
    m.add("JdmgError", m.py().get_type::<JdmgError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
