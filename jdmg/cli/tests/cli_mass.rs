//! `jdmg solve --mass M.mtx` and `--mass-generate` (issue #23, item 1): the
//! generalized problem K x = λ M x from files and from the FEM generator, the
//! eigenvalues against the closed form, M-orthonormal vectors read back, and
//! solve groups and shift-and-invert with M (one process and thread ranks),
//! and the refusals (exit 2 with a message): sizes, symmetry, M not positive
//! definite, a mass matrix for a generator without one.

use std::path::PathBuf;
use std::process::{Command, Output};

use matrices::generate::{fem_pair, generalized_eigenvalues, GenSpec};

fn jdmg(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jdmg"))
        .args(args)
        .output()
        .expect("run jdmg")
}

fn json(out: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().expect("a JSON line")).expect("valid JSON")
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("jdmg-cli-mass-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn mass_generate_matches_the_closed_form() {
    let ex = generalized_eigenvalues(&"fem2d:20".parse::<GenSpec>().unwrap()).unwrap();
    for (ranks, groups) in [("1", None), ("2", None), ("4", Some("2")), ("2", Some("2"))] {
        let mut args = vec![
            "solve",
            "--generate",
            "fem2d:20",
            "--mass-generate",
            "--nev",
            "4",
            "--ranks",
            ranks,
            "--json",
        ];
        if let Some(g) = groups {
            args.extend(["--groups", g, "--balance", "none"]);
        }
        let out = jdmg(&args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let v = json(&out);
        let ev: Vec<f64> = v["eigenvalues"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        for (l, e) in ev.iter().zip(&ex) {
            assert!((l - e).abs() <= 1e-7 * e, "{ranks} ranks: {l} against {e}");
        }
        assert!(v["stats"]["mass_matvecs"].as_u64().unwrap() > 0);
    }
}

#[test]
fn mass_file_gives_m_orthonormal_eigenvectors() {
    let d = dir();
    let (k, m) = fem_pair(&"fem1d:60".parse::<GenSpec>().unwrap()).unwrap();
    let (kp, mp, xp) = (d.join("K.mtx"), d.join("M.mtx"), d.join("X.mtx"));
    matrices::mm::write_coordinate_file(&kp, &k, false).unwrap();
    matrices::mm::write_coordinate_file(&mp, &m, false).unwrap();
    let out = jdmg(&[
        "solve",
        kp.to_str().unwrap(),
        "--mass",
        mp.to_str().unwrap(),
        "--nev",
        "3",
        "--tol",
        "1e-10",
        "--eigenvectors",
        xp.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let x = matrices::mm::read_dense_array(&xp).unwrap();
    let n = k.nrows();
    let mut mx = vec![0.0; n];
    for i in 0..3 {
        m.mul_vec(&x.data[i * n..(i + 1) * n], &mut mx);
        for j in 0..3 {
            let d: f64 = mx
                .iter()
                .zip(&x.data[j * n..(j + 1) * n])
                .map(|(a, b)| a * b)
                .sum();
            let want = if i == j { 1.0 } else { 0.0 };
            assert!((d - want).abs() < 1e-8, "xᵢᵀMxⱼ = {d} ({i}, {j})");
        }
    }
}

#[test]
fn refusals_exit_2_with_a_message() {
    let d = dir();
    let (k, _) = fem_pair(&"fem1d:30".parse::<GenSpec>().unwrap()).unwrap();
    let kp = d.join("K30.mtx");
    matrices::mm::write_coordinate_file(&kp, &k, false).unwrap();
    let n = k.nrows();
    let write = |name: &str, t: &[(usize, usize, f64)], rows: usize| {
        let p = d.join(name);
        let m = matrices::CsrMatrix::from_triplets(rows, rows, t).unwrap();
        matrices::mm::write_coordinate_file(&p, &m, false).unwrap();
        p
    };
    let mut diag: Vec<(usize, usize, f64)> = (0..n).map(|i| (i, i, 1.0)).collect();
    let small = write("small.mtx", &diag[..n - 1], n - 1);
    diag[3].2 = -2.0;
    let negative = write("neg.mtx", &diag, n);
    diag[3].2 = 1.0;
    diag.push((0, 1, 0.5));
    let unsym = write("unsym.mtx", &diag, n);
    // Indefinite with a positive diagonal: tridiag(0.9, 1, 0.9) (eigenvalues
    // 1 + 1.8 cos(jπ/(n+1)) down to −0.79), found through xᵀMx < 0 in the solve.
    let tri: Vec<(usize, usize, f64)> = (0..n)
        .flat_map(|i| {
            let mut v = vec![(i, i, 1.0)];
            if i + 1 < n {
                v.push((i, i + 1, 0.9));
                v.push((i + 1, i, 0.9));
            }
            v
        })
        .collect();
    let indefinite = write("indef.mtx", &tri, n);
    let k = kp.to_str().unwrap();
    for (m, says) in [
        (&indefinite, "not positive definite"),
        (&small, "same size"),
        (&negative, "not positive definite"),
        (&unsym, "not symmetric"),
    ] {
        let out = jdmg(&["solve", k, "--mass", m.to_str().unwrap(), "--nev", "2"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(says), "{}", stderr(&out));
    }
    let args = [
        "solve",
        "--nev",
        "2",
        "--generate",
        "lap2d:10",
        "--mass-generate",
    ];
    let out = jdmg(&args);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    assert!(stderr(&out).contains("mass"), "{}", stderr(&out));
}

/// `--st sinvert --mass-generate` (K − σM factored, λ = σ + 1/ν): the 4
/// eigenvalues of fem2d:20 closest to an interior σ, in order of distance,
/// the pencil's inertia, on one process and on 2 thread ranks; the vectors
/// written by the 2-rank run are M-orthonormal.
#[test]
fn shift_invert_with_a_mass_matrix() {
    let spec: GenSpec = "fem2d:20".parse().unwrap();
    let ex = generalized_eigenvalues(&spec).unwrap();
    let (_, m) = fem_pair(&spec).unwrap();
    // between two distinct eigenvalues past the 20th, nearer the upper one
    let i = (20..ex.len() - 1)
        .find(|&i| ex[i + 1] - ex[i] > 1e-2 * ex[i])
        .unwrap();
    let sigma = ex[i] + 0.6 * (ex[i + 1] - ex[i]);
    let mut want = ex.clone();
    want.sort_by(|a, b| (a - sigma).abs().total_cmp(&(b - sigma).abs()));
    let below = ex.iter().filter(|&&l| l < sigma).count();
    let xp = dir().join("X_sinv.mtx");
    let target = sigma.to_string();
    for ranks in ["1", "2"] {
        let out = jdmg(&[
            "solve",
            "--generate",
            "fem2d:20",
            "--mass-generate",
            "--st",
            "sinvert",
            "--target",
            &target,
            "--nev",
            "2",
            "--tol",
            "1e-11",
            "--ranks",
            ranks,
            "--eigenvectors",
            xp.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let v = json(&out);
        let ev: Vec<f64> = v["eigenvalues"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(ev.len(), 2);
        for (l, e) in ev.iter().zip(&want) {
            assert!((l - e).abs() <= 1e-9 * e, "{ranks} ranks: {l} against {e}");
        }
        assert_eq!(v["stats"]["eigenvalues_below_shift"], below);
        for r in v["residual_norms"].as_array().unwrap() {
            assert!(r.as_f64().unwrap() < 1e-6 * ex[ex.len() - 1], "{r}");
        }
    }
    let x = matrices::mm::read_dense_array(&xp).unwrap();
    let n = m.nrows();
    let mut mx = vec![0.0; n];
    for i in 0..2 {
        m.mul_vec(&x.data[i * n..(i + 1) * n], &mut mx);
        for j in 0..2 {
            let d: f64 = mx
                .iter()
                .zip(&x.data[j * n..(j + 1) * n])
                .map(|(a, b)| a * b)
                .sum();
            let want = if i == j { 1.0 } else { 0.0 };
            assert!((d - want).abs() < 1e-9, "xᵢᵀMxⱼ = {d} ({i}, {j})");
        }
    }
}
