//! Writes the `reference/` directory that the tests of the real matrices read,
//! beside the 22 SuiteSparse matrices (README, "Tests"):
//!
//! ```text
//! cargo run --release -p matrices --example make_reference -- DIR
//! ```
//!
//! - `reference/<Name>.eig` for 14 of them: the 20 smallest and the 20 largest
//!   eigenvalues, ascending, of the matrix as stored in `DIR/<Name>.mtx`: the
//!   Rayleigh quotients of a dense symmetric eigensolver's vectors (faer).
//!   They agree with LAPACK's `dsyevd` to 1e-15·‖A‖ (the tests allow a few
//!   ε‖A‖).
//! - `reference/gr_30_30.analytic.eig`: the closed form of that matrix's
//!   spectrum, 9 − (1 + 2cos(iπ/31))(1 + 2cos(jπ/31)), i, j = 1..30.
//! - `reference/suitesparse_meta.tsv`: the collection's published size, entry
//!   count, norm and smallest singular value of each matrix (from its pages at
//!   sparse.tamu.edu, 7 digits), which the tests compare the reader with.
//!
//! A matrix missing from `DIR` is an error (exit 1), and so is an existing
//! `reference/` file, unless `--force` is given.

use faer::{Mat, Side};
use matrices::mm::read_matrix_market;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The matrices with an `.eig` file (those of order at most 2,003, and
/// crystm01, a tight cluster).
const WITH_EIGENVALUES: [&str; 14] = [
    "1138_bus", "494_bus", "LF10", "LFAT5", "bcsstk01", "bcsstk02", "bcsstk13", "crystm01",
    "gr_30_30", "lund_a", "lund_b", "mesh1e1", "nasa1824", "nos4",
];

/// How many eigenvalues of each end.
const PER_END: usize = 20;

/// SuiteSparse's published metadata (group/name, n, nnz of the full matrix,
/// positive definite, 2-norm, smallest singular value, condition number).
const META: &str = "\
group/name\tn\tnnz\tposdef\tnorm(=lmax if SPD)\tmin_singular_value(=lmin if SPD)\tcond
HB/bcsstk01\t48\t400\tyes\t3.015179e+09\t3.417268e+03\t8.823363e+05
HB/bcsstk02\t66\t4356\tyes\t1.822575e+04\t4.214074e+00\t4.324971e+03
HB/bcsstk13\t2003\t83883\tyes\t3.114812e+12\t2.843328e+02\t1.095481e+10
HB/bcsstk15\t3948\t117816\tyes\t6.538182e+09\t9.999995e-01\t6.538185e+09
HB/bcsstk16\t4884\t290378\tyes\t4.943166e+09\t9.999966e-01\t4.943183e+09
HB/nos3\t960\t15844\tyes\t6.899040e+02\t1.828839e-02\t3.772359e+04
HB/nos4\t100\t594\tyes\t8.491378e-01\t5.379528e-04\t1.578461e+03
HB/494_bus\t494\t1666\tyes\t3.000514e+04\t1.242238e-02\t2.415411e+06
HB/662_bus\t662\t2474\tyes\t4.008114e+03\t5.047169e-03\t7.941311e+05
HB/1138_bus\t1138\t4054\tyes\t3.014879e+04\t3.516860e-03\t8.572646e+06
HB/gr_30_30\t900\t7744\tyes\t1.195906e+01\t6.146282e-02\t1.945739e+02
HB/lund_a\t147\t2449\tyes\t2.238541e+08\t8.003511e+01\t2.796948e+06
HB/lund_b\t147\t2441\tyes\t7.432299e+03\t2.474424e-01\t3.003648e+04
Pothen/mesh1e1\t48\t306\tyes\t9.134158e+00\t1.740062e+00\t5.249331e+00
Pothen/mesh2e1\t306\t2018\tyes\t3.813006e+02\t1.313160e+00\t2.903687e+02
Oberwolfach/LF10\t18\t82\tyes\t3.331924e+05\t8.642588e-02\t3.855239e+06
Oberwolfach/LFAT5\t14\t46\tyes\t2.145219e+07\t1.499189e-01\t1.430919e+08
Boeing/bcsstk38\t8032\t355460\tyes\t4.042307e+11\t7.327514e-06\t55166149525887384
Boeing/bcsstm34\t588\t24270\tno\t6.833084e+00\t6.028736e-06\t1.133419e+06
Boeing/crystm01\t4875\t105339\tyes\t5.305693e-12\t2.323834e-14\t2.283164e+02
Boeing/msc04515\t4515\t97707\tyes\t3.149237e+10\t1.385637e+04\t2.272772e+06
Boeing/nasa1824\t1824\t39208\tno\t2.121717e+07\t3.601133e+00\t5.891804e+06
";

/// The `PER_END` smallest and `PER_END` largest eigenvalues of the matrix in
/// `path` (the same ones twice when it has fewer than 2·`PER_END`), each
/// ascending, and its order. Each is the Rayleigh quotient of the dense
/// solver's eigenvector with the sparse matrix: the dense values alone are
/// off by up to 1.6e-13·‖A‖ on crystm01, where LAPACK's drivers agree to
/// 2e-15·‖A‖; the quotient's error is the square of the vector's residual
/// over the gap.
fn extreme_eigenvalues(path: &Path) -> Result<(Vec<f64>, Vec<f64>, usize), String> {
    let a = read_matrix_market(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .matrix;
    let n = a.nrows();
    // scaled to entries of order 1 (crystm01's are 1e-12)
    let scale = 1.0
        / a.data()
            .iter()
            .fold(f64::MIN_POSITIVE, |m, v| m.max(v.abs()));
    let mut d = Mat::<f64>::zeros(n, n);
    for i in 0..n {
        let (cols, vals) = a.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            d[(i, j as usize)] = v * scale;
        }
    }
    let eig = d
        .self_adjoint_eigen(Side::Lower)
        .map_err(|e| format!("{}: the dense eigensolver failed: {e:?}", path.display()))?;
    let (values, vectors) = (eig.S().column_vector(), eig.U());
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| values[i].total_cmp(&values[j]));
    let quotient = |k: usize| {
        let x = vectors.col(k);
        let (mut xax, mut xx) = (0.0, 0.0);
        for i in 0..n {
            let (cols, vals) = a.row(i);
            let ax: f64 = cols
                .iter()
                .zip(vals)
                .map(|(&j, &v)| v * x[j as usize])
                .sum();
            xax += x[i] * ax;
            xx += x[i] * x[i];
        }
        xax / xx
    };
    let m = PER_END.min(n);
    let mut small: Vec<f64> = order[..m].iter().map(|&k| quotient(k)).collect();
    let mut large: Vec<f64> = order[n - m..].iter().map(|&k| quotient(k)).collect();
    small.sort_by(f64::total_cmp);
    large.sort_by(f64::total_cmp);
    Ok((small, large, n))
}

/// The smallest then the largest, ascending, after a comment line.
fn eig_file(name: &str, small: &[f64], large: &[f64]) -> String {
    let mut s = format!(
        "# {name}: {PER_END} smallest then {PER_END} largest eigenvalues (ascending), \
         dense symmetric eigenvectors (faer), Rayleigh quotients with the .mtx file\n"
    );
    for v in small.iter().chain(large) {
        let _ = writeln!(s, "{v}");
    }
    s
}

/// The closed-form spectrum of HB/gr_30_30, ascending.
fn gr_30_30_analytic() -> String {
    let c: Vec<f64> = (1..=30)
        .map(|i| 1.0 + 2.0 * (f64::from(i) * std::f64::consts::PI / 31.0).cos())
        .collect();
    let mut ev: Vec<f64> = c
        .iter()
        .flat_map(|&x| c.iter().map(move |&y| 9.0 - x * y))
        .collect();
    ev.sort_by(f64::total_cmp);
    let mut s = String::from(
        "# analytic: lambda = 9 - (1+2cos(i*pi/31))(1+2cos(j*pi/31)), i,j=1..30 \
         (HB/gr_30_30 = 9-point stencil, 8 on diag, -1 off)\n",
    );
    for v in ev {
        let _ = writeln!(s, "{v}");
    }
    s
}

fn write_new(path: &Path, text: &str, force: bool) -> Result<(), String> {
    if path.exists() && !force {
        return Err(format!("{} exists (--force replaces it)", path.display()));
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn run(dir: &Path, force: bool) -> Result<(), String> {
    let names: Vec<&str> = META
        .lines()
        .skip(1)
        .filter_map(|l| l.split('\t').next()?.rsplit('/').next())
        .collect();
    let missing: Vec<&&str> = names
        .iter()
        .filter(|n| !dir.join(format!("{n}.mtx")).is_file())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{}: missing {missing:?}.mtx (README, \"Tests\", says where to get them)",
            dir.display()
        ));
    }
    let out = dir.join("reference");
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    write_new(&out.join("suitesparse_meta.tsv"), META, force)?;
    write_new(
        &out.join("gr_30_30.analytic.eig"),
        &gr_30_30_analytic(),
        force,
    )?;
    for name in WITH_EIGENVALUES {
        let (small, large, n) = extreme_eigenvalues(&dir.join(format!("{name}.mtx")))?;
        let text = eig_file(name, &small, &large);
        write_new(&out.join(format!("{name}.eig")), &text, force)?;
        println!(
            "{name}: n = {n}, eigenvalues {:.6e} .. {:.6e}",
            small[0],
            large[large.len() - 1]
        );
    }
    println!("wrote {}", out.display());
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let force = args.iter().any(|a| a == "--force");
    let dirs: Vec<&String> = args.iter().filter(|a| *a != "--force").collect();
    let [dir] = dirs.as_slice() else {
        eprintln!("usage: make_reference DIR [--force]   (DIR holds the 22 <Name>.mtx files)");
        return ExitCode::from(2);
    };
    match run(&PathBuf::from(dir), force) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("make_reference: {e}");
            ExitCode::FAILURE
        }
    }
}
