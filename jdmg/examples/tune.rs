//! Parameter exploration: `cargo run --release -p jdmg --example tune -- SPEC NEV TOL`
//! prints matvecs and time for several inner-solver settings.
use jdmg::{BasisSettings, CorrectionSettings, PrecondSettings, ProblemSettings};
use jdmg::{JdParams, PrecondChoice, Solver};
use matrices::generate::{generate, GenSpec};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let spec: GenSpec = args
        .get(1)
        .map(|s| s.as_str())
        .unwrap_or("lap3d:20")
        .parse()
        .expect("spec");
    let nev: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(4);
    let tol: f64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1e-8);
    let a = generate(&spec).expect("generate");
    for (maxits, block, mb, rs) in [
        (0usize, 0usize, 24usize, 12usize),
        (0, 0, 32, 12),
        (1, 0, 32, 12),
        (2, 0, 32, 12),
        (3, 0, 32, 12),
        (5, 0, 32, 12),
        (3, 0, 24, 12),
    ] {
        let p = JdParams {
            problem: ProblemSettings {
                nev,
                tol,
                ..Default::default()
            },
            basis: BasisSettings {
                block,
                max_basis: mb,
                restart_size: rs,
                ..Default::default()
            },
            correction: CorrectionSettings {
                maxits: Some(maxits),
                ..Default::default()
            },
            preconditioner: PrecondSettings {
                kind: PrecondChoice::None,
                ..Default::default()
            },
            ..JdParams::default()
        };
        let t = std::time::Instant::now();
        match Solver::new(&a, &p).run() {
            Ok(s) => println!("maxits {maxits:2} block {block} mb {mb:2} rs {rs}: mv {:6} outer {:4} t {:.3}s proj {:.3} corr {:.3} restarts {} {:?}", s.stats.matvecs, s.stats.outer_iterations, t.elapsed().as_secs_f64(), s.stats.projection_seconds, s.stats.correction_seconds, s.stats.restarts, s.eigenvalues),
            Err(e) => println!("maxits {maxits:2} block {block} mb {mb:2} rs {rs}: {e}"),
        }
    }
}
