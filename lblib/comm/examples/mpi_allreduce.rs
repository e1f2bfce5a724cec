//! Checks every collective of `MpiComm` under mpirun:
//!
//! ```text
//! cargo build -p lbcomm --features mpi --example mpi_allreduce
//! mpirun --oversubscribe -np 4 target/debug/examples/mpi_allreduce
//! ```
//!
//! Rank 0 prints one summary line; the exit code is non-zero on any mismatch.

use lbcomm::{Comm, ReduceOp};

fn check(failures: &mut Vec<String>, ok: bool, what: &str) {
    if !ok {
        failures.push(what.to_string());
    }
}

/// Rank q's q + 1 copies of q, in rank order.
fn want_gv(n: usize) -> Vec<f64> {
    (0..n)
        .flat_map(|q| std::iter::repeat_n(q as f64, q + 1))
        .collect()
}

fn main() {
    let (universe, world, threading) = lbcomm::mpi::init().expect("MPI initialization");
    let r = world.rank();
    let n = world.size();
    let mut fails = Vec::new();

    let mut s = [r as f64 + 1.0];
    world.all_reduce(&mut s, ReduceOp::Sum);
    let sum = s[0];
    check(
        &mut fails,
        sum == (n * (n + 1) / 2) as f64,
        "all_reduce sum",
    );
    let mut m = [r as f64 + 1.0, -(r as f64)];
    world.all_reduce(&mut m, ReduceOp::Max);
    check(&mut fails, m == [n as f64, 0.0], "all_reduce max");
    let mut m = [r as f64 + 1.0];
    world.all_reduce(&mut m, ReduceOp::Min);
    check(&mut fails, m == [1.0], "all_reduce min");
    let mut u = [r as u64 + 1];
    world.all_reduce_u64(&mut u, ReduceOp::Sum);
    check(
        &mut fails,
        u[0] == (n * (n + 1) / 2) as u64,
        "all_reduce_u64 sum",
    );

    let mut g = vec![0.0; 2 * n];
    world.all_gather(&[r as f64, 2.0 * r as f64], &mut g);
    let want: Vec<f64> = (0..n).flat_map(|q| [q as f64, 2.0 * q as f64]).collect();
    check(&mut fails, g == want, "all_gather");
    let mut gu = vec![0u64; n];
    world.all_gather_u64(&[10 + r as u64], &mut gu);
    check(
        &mut fails,
        gu == (0..n).map(|q| 10 + q as u64).collect::<Vec<_>>(),
        "all_gather_u64",
    );

    let counts: Vec<usize> = (0..n).map(|q| q + 1).collect();
    let mut gv = vec![0.0; counts.iter().sum()];
    world.all_gather_v(&vec![r as f64; r + 1], &counts, &mut gv);
    let want: Vec<f64> = (0..n)
        .flat_map(|q| std::iter::repeat_n(q as f64, q + 1))
        .collect();
    check(&mut fails, gv == want, "all_gather_v");

    let mut b = if r == n - 1 { [3.5, 4.5] } else { [0.0, 0.0] };
    world.broadcast(&mut b, n - 1);
    check(&mut fails, b == [3.5, 4.5], "broadcast");
    let mut bu = if r == 0 { [77u64] } else { [0] };
    world.broadcast_u64(&mut bu, 0);
    check(&mut fails, bu == [77], "broadcast_u64");

    let send_counts: Vec<usize> = (0..n).map(|q| q + 1).collect();
    let send: Vec<f64> = (0..n)
        .flat_map(|q| std::iter::repeat_n((100 * r + q) as f64, q + 1))
        .collect();
    let recv_counts = vec![r + 1; n];
    let mut recv = vec![-1.0; n * (r + 1)];
    world.all_to_all_v(&send, &send_counts, &mut recv, &recv_counts);
    let want: Vec<f64> = (0..n)
        .flat_map(|p| std::iter::repeat_n((100 * p + r) as f64, r + 1))
        .collect();
    check(&mut fails, recv == want, "all_to_all_v");

    // gather_v to the last rank, scatter_v back from it: rank q owns q + 1 values.
    let root = n - 1;
    let total: usize = counts.iter().sum();
    let mut gath = if r == root {
        vec![-1.0; total]
    } else {
        Vec::new()
    };
    world.gather_v(&vec![r as f64; r + 1], &counts, &mut gath, root);
    if r == root {
        check(&mut fails, gath == want_gv(n), "gather_v");
    }
    let send: Vec<f64> = if r == root {
        (0..total).map(|i| i as f64).collect()
    } else {
        Vec::new()
    };
    let mut mine = vec![-1.0; r + 1];
    world.scatter_v(&send, &counts, &mut mine, root);
    let off = r * (r + 1) / 2;
    check(
        &mut fails,
        mine == (off..off + r + 1).map(|i| i as f64).collect::<Vec<_>>(),
        "scatter_v",
    );

    let sub = world.split(r % 2, n - r);
    let members: Vec<usize> = (0..n).filter(|q| q % 2 == r % 2).collect();
    check(&mut fails, sub.size() == members.len(), "split size");
    let pos = members
        .iter()
        .rev()
        .position(|&q| q == r)
        .unwrap_or(usize::MAX);
    check(&mut fails, sub.rank() == pos, "split rank (ordered by key)");
    let mut ss = [r as f64];
    sub.all_reduce(&mut ss, ReduceOp::Sum);
    check(
        &mut fails,
        ss[0] == members.iter().sum::<usize>() as f64,
        "split all_reduce",
    );

    let t0 = world.wtime();
    world.barrier();
    check(&mut fails, world.wtime() >= t0, "wtime monotonic");

    for f in &fails {
        eprintln!("rank {r}: FAILED {f}");
    }
    let mut total = [fails.len() as u64];
    world.all_reduce_u64(&mut total, ReduceOp::Sum);
    if r == 0 {
        println!(
            "mpi_allreduce: ranks={n} sum={sum} expected={} threading={threading:?} failures={}",
            n * (n + 1) / 2,
            total[0]
        );
    }
    drop(sub);
    drop(world);
    drop(universe);
    if total[0] != 0 {
        std::process::exit(1);
    }
}
