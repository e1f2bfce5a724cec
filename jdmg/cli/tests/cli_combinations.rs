//! Every combination of how a solve runs, what it solves, what it looks for and
//! what it is given, through `jdmg solve`: {one process, `--threads 2`,
//! `--ranks 2`, `--ranks 4 --groups 2 --balance none`} × {A x = λ x on lap3d:8, K x = λ M x on
//! the fem3d:8 pair} × {smallest, `--target σ`, `--extraction harmonic`,
//! `--st sinvert`} × {nothing, `--checkpoint`, `--deflate`, `--initial`}, 3
//! eigenpairs each, against dense references (faer's symmetric eigensolver; the
//! pencil through the Cholesky factor of M).
//!
//! A combination either returns the right eigenvalues, with every pair
//! converged and its true residual (recomputed from the vectors written with
//! `--eigenvectors`) within the tolerance, or is one of the refusals of [`REFUSED`] (exit 2 with a message
//! naming the reason). A refusal not on that list, or a listed one that now
//! works, fails the test: the list is the truth of what is missing. (The
//! `mpirun -np 2` runs of the same combinations are in the MPI scenarios.)

use std::path::{Path, PathBuf};
use std::process::Command;

use faer::linalg::solvers::DenseSolveCore;
use faer::{Mat, Side};
use matrices::generate::generate;
use matrices::CsrMatrix;

const NEV: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Serial,
    Threads,
    Ranks,
    Groups,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Pb {
    Standard,
    Pencil,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Want {
    Smallest,
    Target,
    Harmonic,
    Sinvert,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Hook {
    Nothing,
    Checkpoint,
    Deflate,
    Initial,
}

/// The combinations refused, each with a word of the message and why: none.
/// (Shift-and-invert with solve groups runs fine grain over their ranks: its
/// corrections are GD+k steps, nothing for groups to share.)
fn refused(_mode: Mode, _pb: Pb, _want: Want) -> Option<&'static str> {
    None
}

/// The list of refusals, as documentation: kept in step with [`refused`].
const REFUSED: [&str; 0] = [];

fn jdmg() -> Command {
    Command::new(env!("CARGO_BIN_EXE_jdmg"))
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("jdmg-combinations-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn dense(a: &CsrMatrix) -> Mat<f64> {
    let n = a.nrows();
    let mut m = Mat::<f64>::zeros(n, n);
    for i in 0..n {
        let (cols, vals) = a.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            m[(i, j as usize)] += v;
        }
    }
    m
}

/// Eigenvalues (ascending) and eigenvectors (columns; M-orthonormal with M) of A
/// or of the pencil (K, M), by C = L⁻¹ K L⁻ᵀ with M = L Lᵀ.
fn reference(k: &CsrMatrix, m: Option<&CsrMatrix>) -> (Vec<f64>, Mat<f64>) {
    let kd = dense(k);
    match m {
        None => {
            let e = kd.self_adjoint_eigen(Side::Lower).unwrap();
            let w: Vec<f64> = (0..k.nrows()).map(|i| e.S()[i]).collect();
            (w, e.U().to_owned())
        }
        Some(m) => {
            let md = dense(m);
            let l = md.llt(Side::Lower).unwrap().L().to_owned();
            let linv = l.partial_piv_lu().inverse();
            let c = &linv * &kd * linv.transpose();
            let c = Mat::from_fn(c.nrows(), c.ncols(), |i, j| 0.5 * (c[(i, j)] + c[(j, i)]));
            let e = c.self_adjoint_eigen(Side::Lower).unwrap();
            let w: Vec<f64> = (0..k.nrows()).map(|i| e.S()[i]).collect();
            (w, linv.transpose() * e.U())
        }
    }
}

/// ‖a‖₁, the largest absolute column sum (a bound of the 2-norm of a
/// symmetric matrix).
fn norm1(a: &CsrMatrix) -> f64 {
    (0..a.nrows())
        .map(|i| a.row(i).1.iter().map(|v| v.abs()).sum::<f64>())
        .fold(0.0, f64::max)
}

/// Indices of the eigenvalues in the order `want` asks for them (σ for the
/// interior ones).
fn wanted_order(w: &[f64], want: Want, sigma: f64) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..w.len()).collect();
    if want != Want::Smallest {
        idx.sort_by(|&a, &b| (w[a] - sigma).abs().total_cmp(&(w[b] - sigma).abs()));
    }
    idx
}

/// A σ in the lower part of the spectrum for which the wanted sets are
/// unambiguous as values: the NEV closest eigenvalues, the leading cluster,
/// and the NEV closest once that cluster is deflated, each end where the next
/// eigenvalue is the same value or clearly farther from σ. Candidates are
/// points between neighbouring distinct values, towards the upper one.
fn pick_sigma(w: &[f64]) -> f64 {
    let scale = w.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let same = |a: f64, b: f64| (a - b).abs() <= 1e-9 * scale;
    // the boundary after the first `count` of the values ordered by distance
    let clear = |s: f64, order: &[usize], count: usize| {
        let (a, b) = (w[order[count - 1]], w[order[count]]);
        same(a, b) || (b - s).abs() - (a - s).abs() > 1e-3 * scale
    };
    let n = w.len();
    for i in n / 8..n / 2 {
        if same(w[i], w[i + 1]) {
            continue;
        }
        let s = w[i] + 0.6 * (w[i + 1] - w[i]);
        let order = wanted_order(w, Want::Target, s);
        let c = leading_cluster(w, &order);
        if clear(s, &order, c) && clear(s, &order, NEV) && clear(s, &order, c + NEV) {
            return s;
        }
    }
    panic!("no σ with unambiguous wanted eigenvalues");
}

/// Writes the columns `cols` of `v` (perturbed by `noise`·a fixed pattern) as
/// a MatrixMarket array.
fn write_block(path: &Path, v: &Mat<f64>, cols: &[usize], noise: f64) {
    let n = v.nrows();
    let mut s = format!(
        "%%MatrixMarket matrix array real general\n{n} {}\n",
        cols.len()
    );
    for (q, &c) in cols.iter().enumerate() {
        for i in 0..n {
            let wiggle = noise * (((i * 7 + q * 13) % 11) as f64 - 5.0) / 5.0;
            s.push_str(&format!("{:e}\n", v[(i, c)] + wiggle));
        }
    }
    std::fs::write(path, s).unwrap();
}

/// The size of the leading cluster of `order` (equal eigenvalues within 1e-9).
fn leading_cluster(w: &[f64], order: &[usize]) -> usize {
    let first = w[order[0]];
    order
        .iter()
        .take_while(|&&i| (w[i] - first).abs() <= 1e-9 * first.abs().max(1.0))
        .count()
}

struct Case<'a> {
    spec: &'a str,
    /// The matrix K (A) and, for the pencil, M.
    k: &'a CsrMatrix,
    m: Option<&'a CsrMatrix>,
    w: &'a [f64],
    v: &'a Mat<f64>,
    sigma: f64,
    pb: Pb,
}

/// Runs one combination; `Err` with what went wrong.
fn run_one(case: &Case<'_>, mode: Mode, want: Want, hook: Hook, d: &Path) -> Result<(), String> {
    let tag = format!("{mode:?}-{:?}-{want:?}-{hook:?}", case.pb);
    let mut c = jdmg();
    c.args([
        "solve",
        "--generate",
        case.spec,
        "--nev",
        "3",
        "--tol",
        "1e-10",
    ]);
    // a fixed inner solver: `auto` switches between methods on measured time
    c.args(["--seed", "2", "--inner-solver", "qmrs", "--quiet", "--json"]);
    if case.pb == Pb::Pencil {
        c.arg("--mass-generate");
    }
    match mode {
        Mode::Serial => {}
        Mode::Threads => {
            c.args(["--threads", "2"]);
        }
        Mode::Ranks => {
            c.args(["--ranks", "2"]);
        }
        Mode::Groups => {
            // balanced groups take timed steps (the flexible phase): not here,
            // where two runs must take the same path
            c.args(["--ranks", "4", "--groups", "2", "--balance", "none"]);
        }
    }
    let sigma = case.sigma.to_string();
    match want {
        Want::Smallest => {}
        Want::Target => {
            c.args(["--target", &sigma]);
        }
        Want::Harmonic => {
            c.args(["--target", &sigma, "--extraction", "harmonic"]);
        }
        Want::Sinvert => {
            c.args(["--target", &sigma, "--st", "sinvert"]);
        }
    }
    // The expected eigenvalues: the wanted ones, less the deflated.
    let order = wanted_order(case.w, want, case.sigma);
    let deflated = match hook {
        Hook::Deflate => leading_cluster(case.w, &order),
        _ => 0,
    };
    let mut expect: Vec<f64> = order[deflated..deflated + NEV]
        .iter()
        .map(|&i| case.w[i])
        .collect();
    expect.sort_by(f64::total_cmp);
    let ckpt = d.join(format!("{tag}.ckpt"));
    let vectors = d.join(format!("{tag}-x.mtx"));
    c.arg("--eigenvectors").arg(&vectors);
    match hook {
        Hook::Nothing => {}
        Hook::Checkpoint => {
            c.arg("--checkpoint")
                .arg(&ckpt)
                .args(["--checkpoint-every", "0"]);
        }
        Hook::Deflate => {
            let f = d.join(format!("{tag}-y.mtx"));
            write_block(&f, case.v, &order[..deflated], 0.0);
            c.arg("--deflate").arg(&f);
        }
        Hook::Initial => {
            let f = d.join(format!("{tag}-x0.mtx"));
            write_block(&f, case.v, &order[..NEV], 1e-2);
            c.arg("--initial").arg(&f);
        }
    }
    let out = c.output().map_err(|e| format!("{tag}: {e}"))?;
    let code = out.status.code().unwrap_or(-1);
    let err = String::from_utf8_lossy(&out.stderr);
    if let Some(word) = refused(mode, case.pb, want) {
        return if code == 2 && err.contains(word) {
            Ok(())
        } else {
            Err(format!(
                "{tag}: listed as refused ({word}), got exit {code}: {err}"
            ))
        };
    }
    if code != 0 {
        return Err(format!("{tag}: exit {code}: {err}"));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("{tag}: {e}"))?;
    let mut got: Vec<f64> = v["eigenvalues"]
        .as_array()
        .ok_or(format!("{tag}: no eigenvalues"))?
        .iter()
        .map(|x| x.as_f64().unwrap_or(f64::NAN))
        .collect();
    got.sort_by(f64::total_cmp);
    let scale = case.w.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let right = got.len() == NEV
        && got
            .iter()
            .zip(&expect)
            .all(|(g, e)| (g - e).abs() <= 1e-7 * scale);
    let converged = v["converged"].as_bool() == Some(true)
        && v["converged_each"]
            .as_array()
            .is_some_and(|c| c.iter().all(|x| x.as_bool() == Some(true)));
    if !right || !converged {
        return Err(format!(
            "{tag}: got {got:?} (converged {converged}), expected {expect:?}"
        ));
    }
    // What is returned: ‖Kx − λMx‖ ≤ tol·(‖K‖₁ + |λ|·‖M‖₁)·‖x‖ for every pair,
    // recomputed from the vectors written (M = I for A x = λ x).
    let x = matrices::mm::read_dense_array(&vectors).map_err(|e| format!("{tag}: {e}"))?;
    let mut raw: Vec<f64> = v["eigenvalues"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| e.as_f64().unwrap_or(f64::NAN))
        .collect();
    raw.truncate(x.ncols);
    let n = case.k.nrows();
    let (kn, mn) = (norm1(case.k), case.m.map_or(1.0, norm1));
    for (j, &lam) in raw.iter().enumerate() {
        let xj = &x.data[j * n..(j + 1) * n];
        let mut kx = vec![0.0; n];
        case.k.mul_vec(xj, &mut kx);
        let mut mx = xj.to_vec();
        if let Some(m) = case.m {
            m.mul_vec(xj, &mut mx);
        }
        let r = kx
            .iter()
            .zip(&mx)
            .map(|(a, b)| (a - lam * b).powi(2))
            .sum::<f64>()
            .sqrt();
        let xn = xj.iter().map(|v| v * v).sum::<f64>().sqrt();
        let bound = 1e-10 * (kn + lam.abs() * mn) * xn;
        if r.is_nan() || r > bound {
            return Err(format!(
                "{tag}: pair {j} (λ = {lam}): true residual {r:e} > {bound:e}"
            ));
        }
    }
    if hook == Hook::Checkpoint {
        let first = match mode {
            Mode::Serial | Mode::Threads => ckpt.clone(),
            Mode::Ranks => jdmg::checkpoint::rank_path(&ckpt, 0, 2),
            Mode::Groups => jdmg::checkpoint::rank_path(&ckpt, 0, 4),
        };
        if !first.exists() {
            return Err(format!("{tag}: no checkpoint {}", first.display()));
        }
    }
    Ok(())
}

#[test]
fn every_combination_returns_the_right_eigenvalues_or_a_listed_refusal() {
    let d = dir();
    let lap = generate(&"lap3d:8".parse().unwrap()).unwrap();
    let k = generate(&"fem3d:8".parse().unwrap()).unwrap();
    let m = generate(&"fem3d:8:mass".parse().unwrap()).unwrap();
    let (wl, vl) = reference(&lap, None);
    let (wk, vk) = reference(&k, Some(&m));
    let cases = [
        Case {
            spec: "lap3d:8",
            k: &lap,
            m: None,
            w: &wl,
            v: &vl,
            sigma: pick_sigma(&wl),
            pb: Pb::Standard,
        },
        Case {
            spec: "fem3d:8",
            k: &k,
            m: Some(&m),
            w: &wk,
            v: &vk,
            sigma: pick_sigma(&wk),
            pb: Pb::Pencil,
        },
    ];
    let mut failures = Vec::new();
    let (mut right, mut refusals) = (0, 0);
    for case in &cases {
        for mode in [Mode::Serial, Mode::Threads, Mode::Ranks, Mode::Groups] {
            for want in [Want::Smallest, Want::Target, Want::Harmonic, Want::Sinvert] {
                for hook in [
                    Hook::Nothing,
                    Hook::Checkpoint,
                    Hook::Deflate,
                    Hook::Initial,
                ] {
                    match run_one(case, mode, want, hook, &d) {
                        Ok(()) if refused(mode, case.pb, want).is_some() => refusals += 1,
                        Ok(()) => right += 1,
                        Err(e) => failures.push(e),
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&d);
    eprintln!(
        "combinations: {right} right, {refusals} refused as listed ({REFUSED:?}), {} failed",
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(right + refusals, 128);
}
