//! Checks of what a solve returned, recomputed from the eigenvectors (never the
//! solver's own report): true residuals ‖Ax − λx‖ and orthonormality ‖XᵀX − I‖.
#![allow(dead_code)]

use jdmg::Solution;
use matrices::CsrMatrix;

/// Largest true residual norm ‖A x_j − λ_j x_j‖ of the returned pairs.
pub fn true_residuals(a: &CsrMatrix, sol: &Solution) -> Vec<f64> {
    let n = a.nrows();
    let mut ax = vec![0.0; n];
    (0..sol.eigenvalues.len())
        .map(|j| {
            let x = sol.eigenvector(j);
            a.mul_vec(x, &mut ax);
            let lam = sol.eigenvalues[j];
            ax.iter()
                .zip(x)
                .map(|(y, x)| (y - lam * x).powi(2))
                .sum::<f64>()
                .sqrt()
        })
        .collect()
}

/// max |XᵀX − I| over the returned eigenvectors.
pub fn orthonormality_error(sol: &Solution) -> f64 {
    let p = sol.eigenvalues.len();
    let mut worst = 0.0f64;
    for i in 0..p {
        for j in 0..=i {
            let d: f64 = sol
                .eigenvector(i)
                .iter()
                .zip(sol.eigenvector(j))
                .map(|(a, b)| a * b)
                .sum();
            worst = worst.max((d - if i == j { 1.0 } else { 0.0 }).abs());
        }
    }
    worst
}

/// Asserts that every returned pair has a true residual ≤ `bound` and that the
/// eigenvectors are orthonormal to 1e-10 (three copies of one vector would fail).
pub fn assert_pairs(a: &CsrMatrix, sol: &Solution, bound: f64) {
    for (j, r) in true_residuals(a, sol).iter().enumerate() {
        assert!(
            *r <= bound,
            "pair {j}: true residual ‖Ax − λx‖ = {r:e} > {bound:e} (reported {:e})",
            sol.residual_norms[j]
        );
    }
    let o = orthonormality_error(sol);
    assert!(o <= 1e-10, "‖XᵀX − I‖ = {o:e}");
}

/// Whether process `pid` catches every signal of `sigs` (`SigCgt` in
/// `/proc/PID/status`, a hex mask with bit `sig - 1` per signal); false once it is
/// gone. Linux only.
#[cfg(target_os = "linux")]
pub fn catches(pid: u32, sigs: &[libc::c_int]) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .unwrap_or(0);
    sigs.iter().all(|&s| mask & (1u64 << (s - 1)) != 0)
}

/// Waits (up to 10 minutes) until `child` catches every signal of `sigs`: a
/// signal sent after that lands in jdmg's handler whatever the machine's speed.
///
/// # Panics
/// When the child ends first or 10 minutes pass.
#[cfg(target_os = "linux")]
pub fn wait_for_handlers(child: &mut std::process::Child, sigs: &[libc::c_int]) {
    let t = std::time::Instant::now();
    while !catches(child.id(), sigs) {
        if let Ok(Some(s)) = child.try_wait() {
            panic!("jdmg ended ({s}) before catching the signals");
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(600),
            "jdmg did not catch the signals within 10 minutes"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Waits (up to 10 minutes: a lost signal fails rather than hangs) until `child`
/// ends after a signal; its exit code and standard output. The output is one
/// small JSON object at the end, so the pipes cannot fill meanwhile.
///
/// # Panics
/// When the child still runs after 10 minutes.
pub fn wait_after_signal(mut child: std::process::Child) -> (i32, String) {
    let t = std::time::Instant::now();
    while child.try_wait().expect("jdmg runs").is_none() {
        if t.elapsed() > std::time::Duration::from_secs(600) {
            let _ = child.kill();
            panic!("jdmg still runs 10 minutes after the signal");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("jdmg ends");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A = Q diag(values·scale) Qᵀ (row-major, n = values.len()) with Q the product of
/// the Givens rotations `(i, j, angle)`, made exactly symmetric: a matrix with a
/// planted spectrum (multiplicities and clusters as the values say).
pub fn planted(values: &[f64], scale: f64, rotations: &[(usize, usize, f64)]) -> Vec<f64> {
    let n = values.len();
    let mut a = vec![0.0; n * n];
    for (i, v) in values.iter().enumerate() {
        a[i * n + i] = v * scale;
    }
    for &(i, j, t) in rotations {
        let (c, s) = (t.cos(), t.sin());
        // rows i, j, then columns i, j: G A Gᵀ
        for k in 0..n {
            let (x, y) = (a[i * n + k], a[j * n + k]);
            a[i * n + k] = c * x - s * y;
            a[j * n + k] = s * x + c * y;
        }
        for k in 0..n {
            let (x, y) = (a[k * n + i], a[k * n + j]);
            a[k * n + i] = c * x - s * y;
            a[k * n + j] = s * x + c * y;
        }
    }
    for i in 0..n {
        for j in 0..i {
            let m = 0.5 * (a[i * n + j] + a[j * n + i]);
            a[i * n + j] = m;
            a[j * n + i] = m;
        }
    }
    a
}
