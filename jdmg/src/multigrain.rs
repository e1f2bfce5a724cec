//! Coarse-grain and multigrain correction phases (McCombs et al. §3 "JDcg", §6 "JDmg",
//! §7 load balancing).
//!
//! The projection phase stays fine grain over all P processes. Before the correction
//! phase, an all-to-all moves each selected Ritz vector xᵢ and residual rᵢ from the
//! fine layout to the row layout of the solve group that will solve its correction
//! equation; each group runs BiCGSTAB in parallel on its own communicator (dot
//! products inside the group only); a reverse all-to-all returns εᵢ. With P = k and
//! one process per group this is JDcg; with groups of several processes, JDmg.
//!
//! Load balancing (§4, §7): the first correction phase runs `maxits` steps to measure
//! rates; afterwards group leaders call `decide(maxits, Fastest)` (the paper's optimal
//! step count, bounded by `maxits`) on the leaders' communicator, the fastest groups
//! receive the extreme-most residuals, and every group iterates until T (leaders call
//! `should_continue` and broadcast the decision inside their group).
//!
//! Hierarchical partitioning (§6, "Multigrain algorithm for MPP's"): when the k solve
//! groups all have g processes, the rows are first split into g coarse parts (the
//! layout of every group: the member at position m of each group owns coarse part m),
//! and each coarse part m into k fine sub-parts, sub-part j owned by the member at
//! position m of group j. The k owners of coarse part m form *all-to-all group* m, and
//! the fine↔group exchanges run inside those groups of k processes instead of over
//! all P. Groups of unequal sizes (clusters of clusters, §6 "Multigrain algorithm for
//! Grids of clusters") keep independent partitionings and a global all-to-all.

use std::time::Instant;

use lblib::lbs::GroupLbs;
use lblib::{Comm, LbsConfig, Method};
use matrices::partition::{GroupPartition, Redistribution, RowPartition};
use matrices::CsrMatrix;
use precond::dist::{DistCsrOperator, DistOptions};
use precond::preconditioners::BoxedPreconditioner;
use serde::{Deserialize, Serialize};

use crate::checkpoint::{Checkpoint, CheckpointRequest, CheckpointSink};
use crate::correction::{steps_rule, time_rule, CorrectionSolver, Equation, Inner, Outcome};
use crate::driver::{build_preconditioner, precond_shift, with_setup};
use crate::jd::{solve_with, CorrectionBackend, CorrectionCtx, Problem};
use crate::optimal_m::{kappa_estimate, optimal_steps_to, DEFAULT_MAXITS_GROUPS};
use crate::params::{InnerStop, JdParams, PrecondChoice};
use crate::repartition::{
    move_rows, Monitor, RateClock, RepartitionParams, RepartitionStats, WaitTimer,
};
use crate::solution::{JdError, Solution, Stats};

/// How solve groups share the correction phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Balance {
    /// Every group runs the inner rule of `JdParams::inner` (no balancing).
    #[default]
    None,
    /// T = time of the fastest group for the phase's optimal m steps (§4,
    /// [`crate::optimal_m`]).
    Fastest,
    /// T = time of the slowest group for m steps.
    Slowest,
}

/// Which processes take part in the fine↔group all-to-alls (McCombs et al. §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AlltoallScope {
    /// One all-to-all-v over all P processes (independent fine and group
    /// partitionings; unequal or user-chosen groups, or `hierarchical: false`).
    #[default]
    Global,
    /// Hierarchical partitioning: all-to-alls inside all-to-all groups of k processes
    /// (the owners of one coarse part), "Multigrain algorithm for MPP's".
    Hierarchical,
}

/// Per-run figures of the multigrain correction phases.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MultigrainStats {
    /// Number of solve groups.
    pub groups: usize,
    /// This process's group.
    pub my_group: usize,
    /// Inner steps done by each group (summed over phases).
    pub group_inner_steps: Vec<u64>,
    /// Latest measured rate (steps per second) of each group, from lblib.
    pub group_rates: Vec<f64>,
    /// The groups' rates at every balanced phase (one row per phase), to follow
    /// changing loads over iterations.
    pub group_rate_history: Vec<Vec<f64>>,
    /// Time limit T of each balanced phase.
    pub time_limits: Vec<f64>,
    /// Seconds spent in the fine↔group all-to-alls.
    pub alltoall_seconds: f64,
    /// Global or hierarchical all-to-alls (§6).
    pub alltoall_scope: AlltoallScope,
    /// Processes taking part in each of this process's all-to-alls (k when
    /// hierarchical, P when global).
    pub alltoall_group_size: usize,
    /// f64 values this process sent to other processes in all fine↔group
    /// exchanges (values it keeps for itself are not counted).
    pub alltoall_values_sent: u64,
    /// [`MultigrainStats::alltoall_values_sent`] summed over all processes.
    pub alltoall_values_sent_total: u64,
    /// Hierarchical scheme: seconds this process waited in the all-to-alls beyond
    /// the quickest member of its all-to-all group (the §4 imbalance metric, traced on
    /// the all-to-all group: these calls are synchronous but not fine-grain
    /// collectives, §7.1). 0 in the global scheme, where the all-to-all is a traced
    /// fine-grain collective.
    pub alltoall_imbalance_seconds: f64,
    /// [`MultigrainStats::alltoall_imbalance_seconds`] summed over all processes.
    pub alltoall_imbalance_seconds_total: f64,
    /// Correction phases run.
    pub phases: usize,
    /// The optimal step count m of every correction phase (McCombs et al. §4), that
    /// of the extreme-most pair; balanced, T is the fastest group's time for m
    /// steps per equation it holds.
    pub optimal_steps: Vec<usize>,
    /// Each group's flexible-phase seconds in every correction phase (one row per
    /// phase; groups without an equation show their idle 0), to set against T.
    pub phase_seconds: Vec<Vec<f64>>,
    /// Which rates the balancer used.
    pub rate_kind: lblib::RateKind,
    /// Start-up SpMV rate of each fine-grain rank (nonzeros per second) that
    /// weighted the rows; empty when rows were split by equal nonzeros.
    pub startup_rates: Vec<f64>,
    /// Fine-grain rows of each rank at the end of the solve (after any
    /// re-partition; the start-up rows are `repartition.events[0].rows_before`).
    pub fine_rows: Vec<usize>,
    /// Memory balancing counters of this process's group leader (zero without
    /// `memory_balance`): samples, thrashing samples, phases cut short.
    pub memory: lblib::memory::MemoryStats,
    /// [`MultigrainStats::memory`] summed over all group leaders.
    pub memory_total: lblib::memory::MemoryStats,
    /// Major page faults of every fine-grain rank during the solve (getrusage).
    pub major_faults: Vec<u64>,
    /// Balancer calls that failed (`lblib::LbError` messages); the phase went on
    /// with the previous decision.
    pub balancer_errors: Vec<String>,
    /// Semi-static re-partitions of the fine rows (Boudet et al. §4.5): count,
    /// seconds, values moved, imbalance before and after each.
    pub repartition: RepartitionStats,
}

impl MultigrainStats {
    /// The §4 %imbalance of a run: the imbalance of the traced fine-grain
    /// collectives (`fine`, the report of the `lblib::Traced` world passed to
    /// [`solve_multigrain`]) plus, with the hierarchical scheme, the waits in the
    /// all-to-all groups, over the total wall-clock time of all processes. Equal to
    /// `fine.imbalance_percent` in the global scheme.
    pub fn imbalance_percent(&self, fine: &lblib::ImbalanceReport) -> f64 {
        if fine.wall_seconds_total > 0.0 {
            100.0 * (fine.imbalance_seconds_total + self.alltoall_imbalance_seconds_total)
                / fine.wall_seconds_total
        } else {
            fine.imbalance_percent
        }
    }
}

/// Moves columns between the fine layout and solve-group layouts with one
/// all-to-all-v per call. `items[i] = (source column, destination group)`.
///
/// Transfers are in fine-grain (world) rank numbering; the exchange runs on a
/// communicator whose rank `c` is world rank `offset + c`: the world itself
/// (`offset` 0, global scheme) or this rank's all-to-all group (hierarchical
/// scheme, McCombs et al. §6, where every transfer stays inside the group).
struct Mover {
    /// fine -> group g, and group g -> fine.
    to_group: Vec<Redistribution>,
    from_group: Vec<Redistribution>,
    /// This process's world rank.
    me: usize,
    /// World rank of rank 0 of the exchange communicator.
    offset: usize,
    /// f64 values sent to other ranks so far.
    values_sent: u64,
    send: Vec<f64>,
    recv: Vec<f64>,
    send_counts: Vec<usize>,
    recv_counts: Vec<usize>,
}

impl Mover {
    /// Fine -> groups: column `i` of `x` (fine local length `nf`) goes to group
    /// `dest[i]`; this rank (in group `me_g`) receives into `y` (group local
    /// length `ng`), in item order among the items for its group.
    #[allow(clippy::too_many_arguments)]
    fn scatter<C: Comm + ?Sized>(
        &mut self,
        comm: &C,
        x: &[f64],
        nf: usize,
        dest: &[usize],
        me_g: usize,
        y: &mut [f64],
        ng: usize,
        vecs_per_item: usize,
    ) {
        let plans: Vec<&Redistribution> = dest.iter().map(|&g| &self.to_group[g]).collect();
        let srcs: Vec<usize> = (0..dest.len()).collect();
        let mine: Vec<usize> = dest
            .iter()
            .enumerate()
            .filter(|(_, &g)| g == me_g)
            .map(|(i, _)| i)
            .collect();
        self.values_sent += Self::exchange(
            comm,
            (self.me, self.offset),
            &plans,
            &srcs,
            x,
            nf,
            &mine,
            y,
            ng,
            vecs_per_item,
            (
                &mut self.send,
                &mut self.recv,
                &mut self.send_counts,
                &mut self.recv_counts,
            ),
        );
    }

    /// Groups -> fine: group `src_group[i]` sends item i (its local column number
    /// among its items) back to column i of `y` in the fine layout.
    fn gather<C: Comm + ?Sized>(
        &mut self,
        comm: &C,
        x: &[f64],
        ng: usize,
        src_group: &[usize],
        y: &mut [f64],
        nf: usize,
    ) {
        let plans: Vec<&Redistribution> = src_group.iter().map(|&g| &self.from_group[g]).collect();
        // local column of item i in its group's buffer: its rank among that group's items
        let mut count = vec![0usize; self.from_group.len()];
        let srcs: Vec<usize> = src_group
            .iter()
            .map(|&g| {
                let c = count[g];
                count[g] += 1;
                c
            })
            .collect();
        let all: Vec<usize> = (0..src_group.len()).collect();
        self.values_sent += Self::exchange(
            comm,
            (self.me, self.offset),
            &plans,
            &srcs,
            x,
            ng,
            &all,
            y,
            nf,
            1,
            (
                &mut self.send,
                &mut self.recv,
                &mut self.send_counts,
                &mut self.recv_counts,
            ),
        );
    }

    /// Generic exchange: item i moves column `srcs[i]` (length `nsrc`, `vpi`
    /// vectors per item stored consecutively) along `plans[i]`; received items
    /// listed in `recv_items` are stored consecutively in `y` (length `ndst`).
    /// `(me, offset)`: this process's world rank and the world rank of `comm`'s
    /// rank 0 (every partner of `me` in `plans` is in `offset..offset + comm.size()`).
    /// Returns the number of values sent to other ranks.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn exchange<C: Comm + ?Sized>(
        comm: &C,
        (me, offset): (usize, usize),
        plans: &[&Redistribution],
        srcs: &[usize],
        x: &[f64],
        nsrc: usize,
        recv_items: &[usize],
        y: &mut [f64],
        ndst: usize,
        vpi: usize,
        bufs: (
            &mut Vec<f64>,
            &mut Vec<f64>,
            &mut Vec<usize>,
            &mut Vec<usize>,
        ),
    ) -> u64 {
        let (send, recv, sc, rc) = bufs;
        let np = comm.size();
        // world rank -> rank of `comm`
        let at = |r: usize| {
            debug_assert!(
                (offset..offset + np).contains(&r),
                "transfer partner {r} outside the exchange communicator"
            );
            r - offset
        };
        sc.clear();
        sc.resize(np, 0);
        rc.clear();
        rc.resize(np, 0);
        // Sizes.
        for (i, p) in plans.iter().enumerate() {
            for t in p.sends(me) {
                sc[at(t.dst)] += t.rows.len() * vpi;
            }
            if recv_items.contains(&i) {
                for t in p.recvs(me) {
                    rc[at(t.src)] += t.rows.len() * vpi;
                }
            }
        }
        // Pack by destination rank, items in order.
        let total: usize = sc.iter().sum();
        let sent = (total - sc[at(me)]) as u64;
        send.clear();
        send.resize(total, 0.0);
        let mut off = vec![0usize; np + 1];
        for d in 0..np {
            off[d + 1] = off[d] + sc[d];
        }
        let mut w = off.clone();
        for (i, p) in plans.iter().enumerate() {
            for tr in p.sends(me) {
                let d = at(tr.dst);
                for v in 0..vpi {
                    let col = &x[(srcs[i] * vpi + v) * nsrc..(srcs[i] * vpi + v + 1) * nsrc];
                    let len = tr.rows.len();
                    send[w[d]..w[d] + len]
                        .copy_from_slice(&col[tr.src_offset..tr.src_offset + len]);
                    w[d] += len;
                }
            }
        }
        let rtotal: usize = rc.iter().sum();
        recv.clear();
        recv.resize(rtotal, 0.0);
        comm.all_to_all_v(send, sc, recv, rc);
        let mut roff = vec![0usize; np + 1];
        for s in 0..np {
            roff[s + 1] = roff[s] + rc[s];
        }
        let mut rw = roff.clone();
        for (slot, &i) in recv_items.iter().enumerate() {
            for tr in plans[i].recvs(me) {
                let s = at(tr.src);
                for v in 0..vpi {
                    let col = &mut y[(slot * vpi + v) * ndst..(slot * vpi + v + 1) * ndst];
                    let len = tr.rows.len();
                    col[tr.dst_offset..tr.dst_offset + len]
                        .copy_from_slice(&recv[rw[s]..rw[s] + len]);
                    rw[s] += len;
                }
            }
        }
        sent
    }
}

struct Backend<'g, W, G: Comm> {
    /// The fine-grain communicator.
    world: &'g W,
    /// Where each correction phase's busy time and work are credited, for the
    /// rates of [`crate::repartition`].
    rates: &'g RateClock<'g, W>,
    /// The solve group's communicator, with the time spent in its collectives.
    group: &'g WaitTimer<G>,
    /// Nonzeros of this rank's group rows (the work of one group matvec).
    group_nnz: f64,
    /// This process's all-to-all group (hierarchical scheme, §6), traced for the
    /// imbalance metric; `None`: the exchanges run over `world`.
    a2a: Option<&'g lblib::Traced<G>>,
    lbs: Option<GroupLbs<'g, WaitTimer<G>, G>>,
    balance: Balance,
    rate_kind: lblib::RateKind,
    ngroups: usize,
    my_group: usize,
    mover: Mover,
    op: DistCsrOperator<'g, WaitTimer<G>>,
    pc: Option<BoxedPreconditioner>,
    diag: Vec<f64>,
    nf: usize,
    ng: usize,
    xl: Vec<f64>,
    nl: usize,
    corr: CorrectionSolver,
    decided: bool,
    stats: MultigrainStats,
    precond: PrecondChoice,
}

impl<W: Comm, G: Comm> CorrectionBackend for Backend<'_, W, G> {
    fn on_lock(&mut self, x: &[f64], stats: &mut Stats) {
        // every group needs the locked vector in its own layout
        let dest: Vec<usize> = (0..self.ngroups).collect();
        let xs: Vec<f64> = (0..self.ngroups).flat_map(|_| x.iter().copied()).collect();
        let mut y = vec![0.0; self.ng];
        let t0 = Instant::now();
        let (nf, ng, me_g) = (self.nf, self.ng, self.my_group);
        match self.a2a {
            Some(c) => self.mover.scatter(c, &xs, nf, &dest, me_g, &mut y, ng, 1),
            None => {
                self.mover
                    .scatter(self.world, &xs, nf, &dest, me_g, &mut y, ng, 1);
                // a collective over all processes only in the global scheme
                stats.global_sums += 1;
            }
        }
        self.stats.alltoall_seconds += t0.elapsed().as_secs_f64();
        self.xl.extend_from_slice(&y);
        self.nl += 1;
    }

    fn correct_block(
        &mut self,
        ctx: &CorrectionCtx<'_>,
        t: &mut [f64],
        stats: &mut Stats,
    ) -> Vec<usize> {
        let s = ctx.shifts.len();
        let (nf, ng) = (self.nf, self.ng);
        self.stats.phases += 1;
        // §4: each equation's optimal m; the phase's is that of the extreme-most
        // pair, which the fastest group solves.
        let steps: Vec<usize> = (0..s).map(|i| phase_steps(ctx, i)).collect();
        let m_phase = steps.first().copied().unwrap_or(1).max(1);
        self.stats.optimal_steps.push(m_phase);
        // Control phase: T and the groups' ranking (fastest last in `index`).
        let balanced = self.balance != Balance::None && self.lbs.is_some();
        let mut order: Vec<usize> = (0..self.ngroups).collect();
        if balanced && self.decided {
            let lbs = self.lbs.as_mut().expect("balanced");
            let method = if self.balance == Balance::Fastest {
                Method::Fastest
            } else {
                Method::Slowest
            };
            // the fastest group holds ⌈s / groups⌉ equations of m steps each
            let ops = (m_phase * s.div_ceil(self.ngroups)) as f64;
            match lbs.decide_with(ops, method, self.rate_kind) {
                Ok(tl) => self.stats.time_limits.push(tl),
                Err(e) => self.stats.balancer_errors.push(format!("decide: {e}")),
            }
            let ranking = lbs.index().and_then(|i| Ok((i, lbs.rates()?)));
            if let Err(e) = &ranking {
                self.stats.balancer_errors.push(format!("ranking: {e}"));
            }
            if let Ok((idx, rates)) = ranking {
                // leaders are ordered by group id: idx[j] is a group; fastest first
                order = idx.iter().rev().copied().collect();
                let mut gr = vec![0.0; self.ngroups];
                for (&g, &r) in idx.iter().zip(rates) {
                    if g < gr.len() {
                        gr[g] = r;
                    }
                }
                self.stats.group_rate_history.push(gr.clone());
                self.stats.group_rates = gr;
            }
        }
        // Pair i (extreme-most first) goes to the i-th fastest group, round robin.
        let dest: Vec<usize> = (0..s).map(|i| order[i % self.ngroups]).collect();
        let mine: Vec<usize> = (0..s).filter(|&i| dest[i] == self.my_group).collect();
        // x and r travel together: item i = [x_i, r_i].
        let mut xr = vec![0.0; 2 * nf * s];
        for i in 0..s {
            xr[2 * i * nf..(2 * i + 1) * nf].copy_from_slice(&ctx.x[i * nf..(i + 1) * nf]);
            xr[(2 * i + 1) * nf..(2 * i + 2) * nf].copy_from_slice(&ctx.r[i * nf..(i + 1) * nf]);
        }
        let mut gxr = vec![0.0; 2 * ng * mine.len()];
        let t0 = Instant::now();
        match self.a2a {
            Some(c) => self
                .mover
                .scatter(c, &xr, nf, &dest, self.my_group, &mut gxr, ng, 2),
            None => self
                .mover
                .scatter(self.world, &xr, nf, &dest, self.my_group, &mut gxr, ng, 2),
        }
        self.stats.alltoall_seconds += t0.elapsed().as_secs_f64();
        // Flexible phase: this group's equations.
        let mut eps = vec![0.0; ng * mine.len()];
        let mut done_mine = vec![Outcome::default(); mine.len()];
        let t_flex = self.group.wtime();
        if !mine.is_empty() {
            let section = balanced;
            if section {
                // A section already open (a failed earlier phase) is not fatal: the
                // rates of this phase are then those of the open section.
                if let Err(e) = self.lbs.as_mut().expect("balanced").section_start() {
                    self.stats
                        .balancer_errors
                        .push(format!("section_start: {e}"));
                }
            }
            let mut ops = 0usize;
            let nmine = mine.len();
            for (slot, &i) in mine.iter().enumerate() {
                let x = &gxr[2 * slot * ng..(2 * slot + 1) * ng];
                let r = &gxr[(2 * slot + 1) * ng..(2 * slot + 2) * ng];
                let budget_ops = if nmine > 1 {
                    Some((slot + 1) as f64 / nmine as f64)
                } else {
                    None
                };
                done_mine[slot] = self.solve_one(
                    ctx,
                    i,
                    steps[i],
                    x,
                    r,
                    &mut eps[slot * ng..(slot + 1) * ng],
                    section,
                    &mut ops,
                    budget_ops,
                );
            }
            if section {
                match self
                    .lbs
                    .as_mut()
                    .expect("balanced")
                    .section_end(ops.max(1) as f64)
                {
                    Ok(_rate) => self.decided = true,
                    Err(e) => self.stats.balancer_errors.push(format!("section_end: {e}")),
                }
                if let Some(mb) = self
                    .lbs
                    .as_mut()
                    .and_then(|l| l.leader_lbs())
                    .and_then(|l| l.memory_balancer())
                {
                    self.stats.memory = mb.stats();
                }
            }
            if self.stats.group_inner_steps.len() < self.ngroups {
                self.stats.group_inner_steps.resize(self.ngroups, 0);
            }
            self.stats.group_inner_steps[self.my_group] += ops as u64;
        }
        // this group's flexible-phase seconds (its leader's clock, before any wait)
        let flex = self.group.wtime() - t_flex;
        // Back to the fine layout.
        let t0 = Instant::now();
        match self.a2a {
            Some(c) => self.mover.gather(c, &eps, ng, &dest, &mut t[..nf * s], nf),
            None => self
                .mover
                .gather(self.world, &eps, ng, &dest, &mut t[..nf * s], nf),
        }
        self.stats.alltoall_seconds += t0.elapsed().as_secs_f64();
        // Steps per pair and the groups' matvecs and preconditioner applications,
        // known everywhere (one reduction over the world; each group counted once).
        let mut all = vec![0.0; s + 2 + self.ngroups];
        if self.group.rank() == 0 {
            for (slot, &i) in mine.iter().enumerate() {
                let o = &done_mine[slot];
                all[i] = o.steps as f64;
                all[s] += o.matvecs as f64;
                all[s + 1] += o.precond_applies as f64;
            }
            all[s + 2 + self.my_group] = flex;
        }
        self.world.all_reduce(&mut all, lblib::ReduceOp::Sum);
        stats.global_sums += 1;
        self.stats.phase_seconds.push(all[s + 2..].to_vec());
        let total: f64 = all[..s].iter().sum();
        stats.inner_steps += total as u64;
        stats.matvecs += all[s] as u64;
        stats.precond_applications += all[s + 1] as u64;
        all[..s].iter().map(|&v| v as usize).collect()
    }
}

impl<W: Comm, G: Comm> Backend<'_, W, G> {
    /// One correction equation on this group's communicator, by the shared
    /// [`CorrectionSolver`]: in a balanced section the group iterates until T (its
    /// `share` of T when it holds several equations); in the first section, which
    /// measures the rates, it runs the `m` steps of the optimal count; otherwise
    /// the serial rules apply with `m` as the step cap (2^−iter or m steps, or the
    /// time budget).
    #[allow(clippy::too_many_arguments)]
    fn solve_one(
        &mut self,
        ctx: &CorrectionCtx<'_>,
        i: usize,
        m: usize,
        x: &[f64],
        r: &[f64],
        out: &mut [f64],
        section: bool,
        ops: &mut usize,
        share: Option<f64>,
    ) -> Outcome {
        let shift = ctx.shifts[i];
        let inner = match (self.precond, &self.pc) {
            (PrecondChoice::None, _) => Inner::Identity,
            (PrecondChoice::Jacobi, _) => Inner::Diagonal {
                diag: &self.diag,
                shift,
            },
            (_, Some(m)) => Inner::Built(m.as_ref()),
            _ => Inner::Identity,
        };
        let eq = Equation {
            x,
            r,
            shift,
            qmr: None,
        };
        let group = self.group;
        let sums = std::cell::Cell::new(0);
        // the group's products, timed for the rates of re-partitioning
        let op = &Metered {
            op: &self.op,
            group,
            rates: self.rates,
            nnz: self.group_nnz,
        };
        let o = if section && !self.decided {
            // first phase (§4 step 1): a fixed count, timed to measure the rates
            let mut rule = steps_rule(InnerStop::Fixed, m, ctx.rel, ctx.floors[i]);
            self.corr
                .solve(op, group, &self.xl, self.nl, inner, &eq, &mut rule, out)
        } else if section {
            let kind = self.rate_kind;
            let lbs = self.lbs.as_mut().expect("balanced");
            let tl = lbs.time_limit();
            let t_section = group.wtime();
            let ops0 = *ops;
            // adaptive: below the floor a longer solve cannot help the outer test
            // (`fixed` keeps the paper's rule: iterate until T)
            let floor = match ctx.inner {
                InnerStop::Adaptive => ctx.floors[i],
                _ => 0.0,
            };
            let mut rule = |steps: usize, rn: f64, _r0: f64| {
                if rn == 0.0 || (steps > 0 && rn <= floor) {
                    return false;
                }
                let mut c = lbs
                    .should_continue_with((ops0 + steps) as f64, 1.0, kind)
                    .unwrap_or(false);
                if let (Some(frac), Some(tl), true) = (share, tl, c) {
                    // several equations in one section: split T evenly
                    let mut el = [group.wtime() - t_section];
                    group.broadcast(&mut el, 0);
                    c = el[0] < frac * tl;
                }
                c
            };
            self.corr
                .solve(op, group, &self.xl, self.nl, inner, &eq, &mut rule, out)
        } else if let InnerStop::Time { seconds } = ctx.inner {
            let mut rule = time_rule(group, seconds, ctx.maxits, &sums);
            self.corr
                .solve(op, group, &self.xl, self.nl, inner, &eq, &mut rule, out)
        } else {
            let mut rule = steps_rule(ctx.inner, m, ctx.rel, ctx.floors[i]);
            self.corr
                .solve(op, group, &self.xl, self.nl, inner, &eq, &mut rule, out)
        };
        *ops += o.steps;
        // Reductions inside the group are the group's own; `Stats::global_sums`
        // counts the fine-grain (all-process) ones only.
        o
    }
}

/// The re-partitioning monitor and the caller's sink, polled together: both
/// polls run on every process (the monitor's is collective) and the larger
/// request is the answer; both receive every checkpoint.
struct Both<'m, 'c, 'd> {
    monitor: Option<&'m mut dyn CheckpointSink>,
    caller: Option<&'c mut (dyn CheckpointSink + 'd)>,
}

impl CheckpointSink for Both<'_, '_, '_> {
    fn poll(&mut self, stats: &Stats) -> CheckpointRequest {
        let m = self.monitor.as_mut().map(|s| s.poll(stats));
        let c = self.caller.as_mut().map(|s| s.poll(stats));
        // Continue < Save < SaveAndStop
        m.max(c).unwrap_or(CheckpointRequest::Continue)
    }

    fn save(&mut self, checkpoint: &Checkpoint, last: bool) {
        if let Some(s) = self.monitor.as_mut() {
            s.save(checkpoint, last);
        }
        if let Some(s) = self.caller.as_mut() {
            s.save(checkpoint, last);
        }
    }
}

/// A solve group's operator that credits every product to the rates of
/// re-partitioning ([`RateClock::credit`]): its busy seconds (wall time minus the
/// waits of its halo exchange) for the nonzeros of this rank's group rows times
/// the vectors. The time per nonzero of a rank's own products does not change when
/// its fine rows move, nor with the work of the rest of the inner step.
struct Metered<'a, 'g, O, G, W> {
    op: &'a O,
    group: &'a WaitTimer<G>,
    rates: &'a RateClock<'g, W>,
    nnz: f64,
}

impl<O: precond::Operator, G: Comm, W: Comm> precond::Operator for Metered<'_, '_, O, G, W> {
    fn nrows(&self) -> usize {
        self.op.nrows()
    }

    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        let (t0, w0) = (self.group.wtime(), self.group.waited());
        self.op.apply_block(x, y, k);
        let busy = (self.group.wtime() - t0) - (self.group.waited() - w0);
        self.rates.credit(busy, self.nnz * k as f64);
    }
}

/// The inner step count of equation `i` of a phase (McCombs et al. §4): with the
/// adaptive rule the optimal m of [`crate::optimal_m`] for the reduction 2^−iter
/// or, when less is needed, down to the equation's floor (capped by `maxits`);
/// otherwise `maxits`.
fn phase_steps(ctx: &CorrectionCtx<'_>, i: usize) -> usize {
    match ctx.inner {
        InnerStop::Adaptive => {
            let kappa = kappa_estimate(ctx.thetas[i], ctx.ritz, ctx.anorm, ctx.rnorms[i]);
            // 2^−iter, but never below the floor (0.1·tol) where the solve stops
            let floor = ctx.floors[i] / ctx.rnorms[i];
            optimal_steps_to(ctx.rel.max(floor), kappa, ctx.maxits)
        }
        _ => ctx.maxits,
    }
}

/// This rank's fine-grain operator (rows of `fine`, halo plans on `comm`) and
/// the diagonal of its rows. Collective.
fn fine_operator<'c, C: Comm + ?Sized>(
    a: &CsrMatrix,
    fine: &RowPartition,
    comm: &'c C,
    opts: DistOptions,
) -> Result<(DistCsrOperator<'c, C>, Vec<f64>), JdError> {
    let r = fine.range(comm.rank());
    let local = a.row_slice(r.start, r.end);
    let op = DistCsrOperator::new(&local, fine, comm, opts)
        .map_err(|e| JdError::invalid("groups", e))?;
    let diag = (0..local.nrows())
        .map(|i| local.get(i, r.start + i))
        .collect();
    Ok((op, diag))
}

/// Seconds of SpMV timed per rank for the start-up rates: a few scheduler time
/// slices (a 2 ms window fell inside one slice on a shared core and saw a rank
/// sharing its core with busy loops as fast as a rank with a core of its own).
const RATE_WINDOW: f64 = 0.05;

/// Each rank's SpMV rate (nonzeros per second of its clock) on an nnz-balanced
/// share of `a`, known on every rank (one all-gather).
fn measure_rates<W: Comm + ?Sized>(
    a: &CsrMatrix,
    world: &W,
    threads: usize,
) -> Result<Vec<f64>, JdError> {
    use precond::Operator;
    let invalid = |e: &dyn std::fmt::Display| JdError::invalid("groups", e);
    let np = world.size();
    let part = RowPartition::balanced_by_nnz(a, np).map_err(|e| invalid(&e))?;
    let r = part.range(world.rank());
    let local = a.row_slice(r.start, r.end);
    // square local block so that the plain CSR operator applies: use local columns only
    let block = precond::preconditioners::diagonal_block(&local, 0..local.nrows(), r.start)
        .map_err(|e| JdError::Preconditioner(e.to_string()))?;
    let op = precond::spmv::CsrOperator::new(&block, threads).map_err(|e| invalid(&e))?;
    let x = vec![1.0; block.nrows()];
    let mut y = vec![0.0; block.nrows()];
    // all ranks time at once, so that ranks sharing a core see each other
    world.barrier();
    let t0 = world.wtime();
    let mut reps = 0usize;
    // at least 5 products and RATE_WINDOW of this rank's clock: several scheduler
    // time slices, so that a core shared with other work shows its real share
    while reps < 5 || (world.wtime() - t0 < RATE_WINDOW && reps < 100_000) {
        op.apply(&x, &mut y);
        reps += 1;
    }
    let dt = (world.wtime() - t0).max(1e-12);
    let rate = (block.nnz().max(1) * reps) as f64 / dt;
    let mut rates = vec![0.0; np];
    world.all_gather(&[rate], &mut rates);
    Ok(rates)
}

/// The memory balancing parameters of `jdmg solve --memory-balance`: lblib's
/// defaults (20 major faults/s with under half a CPU is thrashing) sampled every
/// 20 ms, two thrashing samples in a row to recede, since correction phases last
/// tens of milliseconds (lblib's default 0.25 s interval would never sample one).
pub fn memory_params() -> lblib::MemoryParams {
    lblib::MemoryParams {
        sample_interval: 0.02,
        consecutive: 2,
        ..lblib::MemoryParams::default()
    }
}

/// Options of [`solve_multigrain`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MultigrainParams {
    /// Global ranks of each solve group (must cover every rank exactly once).
    pub groups: Vec<Vec<usize>>,
    /// Load balancing of the correction phase. Default `Fastest` (McCombs et al. §4:
    /// T is the fastest group's time; it pays whenever speeds differ).
    pub balance: Balance,
    /// Split the fine-grain rows in proportion to each rank's measured SpMV rate
    /// (otherwise equal nonzeros). Default true. With the hierarchical layout the
    /// rates split each coarse part among its k owners. Timings make the layout,
    /// and so the matvec counts and the last digits, vary from run to run: set it
    /// false for a deterministic solve (`jdmg solve --balance none` does).
    pub rate_weighted_rows: bool,
    /// Hierarchical partitioning when all groups have the same size g ≥ 2
    /// (McCombs et al. §6, "Multigrain algorithm for MPP's"): g coarse parts shared by
    /// all groups, each split into k fine parts, so that the fine↔group all-to-alls
    /// involve only the k owners of one coarse part instead of all P processes. The
    /// fine-grain communicator must then be ordered by [`fine_rank_keys`]. Ignored
    /// (global all-to-all) for groups of unequal sizes. Default true.
    pub hierarchical: bool,
    /// The rates T and the ranking come from (McCombs et al. §5.1): the average over
    /// each group's last flexible section (default), or LBLIB's instantaneous rate
    /// over the last complete window of `rate_window` seconds, better when loads
    /// change within a phase.
    pub rate_kind: lblib::RateKind,
    /// Window of the instantaneous rates, seconds. Default 0.05.
    pub rate_window: f64,
    /// Shortest span a group's rate is measured over (lblib's
    /// `LbsConfig::min_rate_seconds`): early phases of a few milliseconds add up
    /// until they reach it. Default 0.02 s, several scheduler time slices, so
    /// that a group on a core shared with other work shows its real share.
    pub min_rate_seconds: f64,
    /// Memory (anti-thrashing) balancing of the correction phase (McCombs et al. §5,
    /// ref. \[24\]): a group leader whose process takes major page faults while
    /// its CPU idles leaves the phase early. `None` (default): off.
    pub memory_balance: Option<lblib::MemoryParams>,
    /// Semi-static re-partitioning of the fine rows during the solve
    /// (Boudet et al. §2.1, §4.5; [`crate::repartition`]): on by default, active
    /// only with `rate_weighted_rows` (the rows then follow rates measured in the
    /// projection phase, of `rate_kind` over `rate_window`).
    pub repartition: RepartitionParams,
}

impl Default for MultigrainParams {
    fn default() -> Self {
        Self {
            groups: Vec::new(),
            balance: Balance::Fastest,
            rate_weighted_rows: true,
            hierarchical: true,
            rate_kind: lblib::RateKind::Average,
            rate_window: 0.05,
            min_rate_seconds: 0.02,
            memory_balance: None,
            repartition: RepartitionParams::default(),
        }
    }
}

/// `(k, g)` when the hierarchical layout of McCombs et al. §6 applies to `groups`: k ≥ 1
/// groups, all of the same size g ≥ 2 (with g = 1, JDcg, it would equal the global
/// scheme).
pub fn hierarchical_shape(groups: &[Vec<usize>]) -> Option<(usize, usize)> {
    let g = groups.first()?.len();
    (g >= 2 && groups.iter().all(|x| x.len() == g)).then_some((groups.len(), g))
}

/// The `key` of each process (indexed by its rank in `base`, the communicator the
/// group lists refer to) for `base.split(0, key)` when creating the fine-grain
/// communicator of [`solve_multigrain`].
///
/// Hierarchical layout (`hierarchical` and [`hierarchical_shape`] applies, McCombs et al.
/// §6): fine part `m * k + j` (sub-part j of coarse part m) belongs to the member at
/// position m of group j, so that process gets key `m * k + j`; the k processes with
/// keys `m * k..(m + 1) * k` are all-to-all group m. Otherwise the identity (fine
/// parts in base-rank order). Groups that do not cover `0..P` exactly once (P = total
/// size) also give the identity; [`solve_multigrain`] reports them.
pub fn fine_rank_keys(groups: &[Vec<usize>], hierarchical: bool) -> Vec<usize> {
    let p: usize = groups.iter().map(Vec::len).sum();
    let mut keys: Vec<usize> = (0..p).collect();
    if !hierarchical || validate_groups(groups, p).is_err() {
        return keys;
    }
    if let Some((k, _)) = hierarchical_shape(groups) {
        for (j, grp) in groups.iter().enumerate() {
            for (m, &r) in grp.iter().enumerate() {
                keys[r] = m * k + j;
            }
        }
    }
    keys
}

/// Every rank `0..nranks` in exactly one group.
fn validate_groups(groups: &[Vec<usize>], nranks: usize) -> Result<(), String> {
    let mut seen = vec![false; nranks];
    for g in groups {
        for &r in g {
            if r >= nranks || std::mem::replace(&mut seen[r], true) {
                return Err(format!(
                    "rank {r} is out of range or repeated (P = {nranks})"
                ));
            }
        }
    }
    if seen.iter().any(|s| !s) {
        return Err(format!("every rank 0..{nranks} must belong to a group"));
    }
    Ok(())
}

/// Row layouts and transfer plans of one multigrain run, in fine-grain (world) rank
/// numbering: fine part p lives on world rank p.
#[derive(Debug)]
struct Layout {
    fine: RowPartition,
    /// Each group's layout (part q on world rank `groups[g][q]`).
    groups: Vec<GroupPartition>,
    to_group: Vec<Redistribution>,
    from_group: Vec<Redistribution>,
}

/// Builds the fine and group layouts (McCombs et al. §6). `groups` in world numbering;
/// `rates`: per world rank weights of the fine rows (`None`: equal nonzeros).
///
/// * global: fine rows over all P ranks (weighted), each group its own
///   nnz-balanced partition;
/// * `hierarchical`: g nnz-balanced coarse parts shared by all groups, coarse part m
///   split among world ranks `m * k..(m + 1) * k` (weighted); requires
///   `groups[j][m] == m * k + j` (see [`fine_rank_keys`]).
fn build_layout(
    a: &CsrMatrix,
    groups: &[Vec<usize>],
    rates: Option<&[f64]>,
    hierarchical: bool,
) -> Result<Layout, JdError> {
    let invalid = |e: &dyn std::fmt::Display| JdError::invalid("groups", e);
    let np: usize = groups.iter().map(Vec::len).sum();
    validate_groups(groups, np).map_err(|e| invalid(&e))?;
    if let Some(r) = rates {
        if r.len() != np {
            return Err(invalid(&format!("{} rates for {np} ranks", r.len())));
        }
    }
    let ones = vec![1.0; np];
    let weights = rates.unwrap_or(&ones);
    let (fine, group_rows) = if hierarchical {
        let (k, g) = hierarchical_shape(groups)
            .ok_or_else(|| invalid(&"the hierarchical layout needs groups of equal size ≥ 2"))?;
        if groups
            .iter()
            .enumerate()
            .any(|(j, grp)| grp.iter().enumerate().any(|(m, &r)| r != m * k + j))
        {
            return Err(invalid(
                &"the hierarchical layout needs member m of group j on fine rank m·k + j",
            ));
        }
        let coarse = RowPartition::balanced_by_nnz(a, g).map_err(|e| invalid(&e))?;
        let fine =
            RowPartition::refine_weighted_by_nnz(a, &coarse, weights).map_err(|e| invalid(&e))?;
        (fine, vec![coarse; k])
    } else {
        let fine = RowPartition::weighted_by_nnz(a, weights).map_err(|e| invalid(&e))?;
        let rows = groups
            .iter()
            .map(|grp| RowPartition::balanced_by_nnz(a, grp.len()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(&e))?;
        (fine, rows)
    };
    let fine_g = GroupPartition::all(fine.clone());
    let mut out = Layout {
        fine,
        groups: Vec::with_capacity(groups.len()),
        to_group: Vec::with_capacity(groups.len()),
        from_group: Vec::with_capacity(groups.len()),
    };
    for (rows, ranks) in group_rows.into_iter().zip(groups) {
        let gp = GroupPartition::new(rows, ranks.clone(), np).map_err(|e| invalid(&e))?;
        out.to_group
            .push(Redistribution::between(&fine_g, &gp).map_err(|e| invalid(&e))?);
        out.from_group
            .push(Redistribution::between(&gp, &fine_g).map_err(|e| invalid(&e))?);
        out.groups.push(gp);
    }
    Ok(out)
}

/// One solve group per distinct key (e.g. a hash of each rank's host name: one
/// group per cluster node, McCombs et al. §6 "solve groups chosen ... to correspond to
/// the physical boundaries"), groups ordered by their lowest rank.
pub fn groups_by_key(keys: &[u64]) -> Vec<Vec<usize>> {
    let mut groups: Vec<(u64, Vec<usize>)> = Vec::new();
    for (rank, &k) in keys.iter().enumerate() {
        match groups.iter_mut().find(|g| g.0 == k) {
            Some(g) => g.1.push(rank),
            None => groups.push((k, vec![rank])),
        }
    }
    groups.into_iter().map(|g| g.1).collect()
}

/// FNV-1a hash of this machine's host name (from `/proc/sys/kernel/hostname`, else
/// `$HOSTNAME`), for [`groups_by_key`].
pub fn host_key() -> u64 {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_default();
    name.trim().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Parses `--groups`: `equal` (P/k equal groups of consecutive ranks, k = block
/// size), `N` (N equal groups), or explicit rank lists such as `0-3,4-5,6,7`
/// (`host` is resolved by the caller with [`groups_by_key`] and [`host_key`]).
///
/// # Errors
/// `InvalidParams` naming the problem.
pub fn parse_groups(spec: &str, nranks: usize, block: usize) -> Result<Vec<Vec<usize>>, JdError> {
    let bad = |m: String| JdError::invalid("groups", format!("{spec}: {m}"));
    let groups = if spec == "equal" {
        matrices::partition::split_ranks(nranks, block.clamp(1, nranks))
            .map_err(|e| bad(e.to_string()))?
    } else if let Ok(g) = spec.parse::<usize>() {
        matrices::partition::split_ranks(nranks, g).map_err(|e| bad(e.to_string()))?
    } else {
        let mut out = Vec::new();
        for part in spec.split(',') {
            let ranks: Vec<usize> = match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b): (usize, usize) = (
                        a.trim()
                            .parse()
                            .map_err(|_| bad(format!("bad rank '{a}'")))?,
                        b.trim()
                            .parse()
                            .map_err(|_| bad(format!("bad rank '{b}'")))?,
                    );
                    if a > b {
                        return Err(bad(format!("empty range {a}-{b}")));
                    }
                    (a..=b).collect()
                }
                None => vec![part
                    .trim()
                    .parse()
                    .map_err(|_| bad(format!("bad rank '{part}'")))?],
            };
            out.push(ranks);
        }
        out
    };
    validate_groups(&groups, nranks).map_err(bad)?;
    Ok(groups)
}

/// The solve groups of a `jdmg solve --groups` spec over the processes of
/// `base`: `host` gives one group per host (an all-gather of [`host_key`]:
/// collective), anything else is [`parse_groups`] with the block size of
/// `params` (`block`, or min(nev, [`crate::params::DEFAULT_BLOCK_CAP`]) when
/// 0).
///
/// # Errors
/// As [`parse_groups`], the same on every process.
pub fn groups_on<B: Comm + ?Sized>(
    spec: &str,
    base: &B,
    params: &JdParams,
) -> Result<Vec<Vec<usize>>, JdError> {
    if spec == "host" {
        let mut keys = vec![0u64; base.size()];
        base.all_gather_u64(&[host_key()], &mut keys);
        return Ok(groups_by_key(&keys));
    }
    let k = if params.block == 0 {
        params.nev.min(crate::params::DEFAULT_BLOCK_CAP)
    } else {
        params.block
    };
    parse_groups(spec, base.size(), k)
}

/// The fine-grain communicator of a solve on the processes of `base`: `base`
/// split in the order of [`fine_rank_keys`] for `groups` (base order without
/// groups), every collective first waiting `link_latency` seconds
/// (`lblib::Delayed`: a slow link between solve groups; 0 for none) and traced (`lblib::Traced`: the §4 imbalance, its `report()`). Pass
/// it as the `world` of [`solve_multigrain`] (with `base`) or of
/// [`crate::solve_distributed`]; the solve groups' own collectives, on
/// communicators split from `base`, are neither delayed nor traced.
/// Collective.
pub fn fine_world<B: Comm>(
    base: &B,
    groups: Option<&[Vec<usize>]>,
    hierarchical: bool,
    link_latency: f64,
) -> lblib::Traced<lblib::Delayed<B>> {
    let key = match groups {
        Some(g) => fine_rank_keys(g, hierarchical)
            .get(base.rank())
            .copied()
            .unwrap_or(base.rank()),
        None => base.rank(),
    };
    lblib::Traced::new(lblib::Delayed::new(base.split(0, key), link_latency))
}

/// Multigrain (or coarse-grain, one process per group) block JD: fine-grain
/// projection over `world`, correction equations solved by solve groups.
///
/// `world` carries the fine-grain collectives (wrap it in `lblib::Traced` to
/// measure imbalance); `base` must be the same set of processes and is used to
/// create the group, leader and all-to-all-group communicators (so that
/// intra-group calls are not traced, as in the paper §7.1). The group lists of
/// `mg.groups` are `base` ranks. Create `world` as
/// `base.split(0, fine_rank_keys(&mg.groups, mg.hierarchical)[base.rank()])`: with
/// the hierarchical layout (McCombs et al. §6, equal groups) fine part `m * k + j`
/// belongs to member m of group j, so `world` must be ordered by fine part; in the
/// global scheme any order is accepted. Collective.
///
/// # Errors
/// As [`crate::solve_distributed`], plus `InvalidParams` for bad groups, for `world`
/// and `base` of different processes, or for a `world` not ordered as the
/// hierarchical layout needs.
pub fn solve_multigrain<W: Comm, B: Comm>(
    a: &CsrMatrix,
    world: &W,
    base: &B,
    params: &JdParams,
    mg: &MultigrainParams,
) -> Result<Solution, JdError> {
    solve_multigrain_with_sink(a, world, base, params, mg, None)
}

/// [`solve_multigrain`] with a [`CheckpointSink`] polled at the top of every
/// outer iteration, as in [`crate::solve_distributed_resumable`]: the largest
/// request over all processes is granted, so that a `SaveAndStop` on one
/// process (a signal, say) stops every process at the same iteration with
/// [`JdError::Stopped`] and the pairs converged so far. The checkpoints it
/// receives are of the current fine rows, which re-partitioning may change, so
/// they are for stopping, not for resuming. A stop asked in the iteration where
/// the solve re-partitions is granted at the next poll (a sink that keeps asking
/// is obeyed one outer iteration later). Collective: give a sink on every
/// process or on none.
///
/// # Errors
/// As [`solve_multigrain`].
pub fn solve_multigrain_with_sink<W: Comm, B: Comm>(
    a: &CsrMatrix,
    world: &W,
    base: &B,
    params: &JdParams,
    mg: &MultigrainParams,
    mut sink: Option<&mut dyn CheckpointSink>,
) -> Result<Solution, JdError> {
    let invalid = |e: &dyn std::fmt::Display| JdError::invalid("groups", e);
    // §4: solve groups iterate up to the paper's m = 150 unless told otherwise
    let mut group_params = params.clone();
    group_params.maxits.get_or_insert(DEFAULT_MAXITS_GROUPS);
    // ... and, unless told otherwise, without a preconditioner (the paper's setting,
    // which the balancing experiments measure).
    if group_params.precond == PrecondChoice::Auto {
        group_params.precond = PrecondChoice::None;
    }
    let params = &group_params;
    let np = world.size();
    let me = world.rank();
    if a.nrows() != a.ncols() {
        return Err(JdError::invalid("matrix", "the matrix must be square"));
    }
    crate::symmetry::check_symmetric(a, params)?;
    if mg.groups.is_empty() {
        return Err(JdError::invalid("groups", "no solve groups"));
    }
    if base.size() != np {
        return Err(invalid(&format!(
            "world has {np} processes, base {}: they must be the same processes",
            base.size()
        )));
    }
    validate_groups(&mg.groups, np).map_err(|e| invalid(&format!("solve groups: {e}")))?;
    // Which base rank is each world rank (one all-gather): group lists are base
    // ranks, layouts and transfers world ranks.
    let mut gathered = vec![0.0; np];
    world.all_gather(&[base.rank() as f64], &mut gathered);
    let mut world_of_base = vec![usize::MAX; np];
    for (w, &b) in gathered.iter().enumerate() {
        let b = b as usize;
        if b >= np || world_of_base[b] != usize::MAX {
            return Err(invalid(
                &"world and base are not the same processes (base ranks repeat over world)",
            ));
        }
        world_of_base[b] = w;
    }
    let groups_w: Vec<Vec<usize>> = mg
        .groups
        .iter()
        .map(|g| g.iter().map(|&b| world_of_base[b]).collect())
        .collect();
    let ngroups = mg.groups.len();
    let my_group = groups_w
        .iter()
        .position(|g| g.contains(&me))
        .ok_or_else(|| invalid(&"rank not in any group"))?;
    // Hierarchical layout (§6, MPP's): member m of group j must be fine rank m·k + j.
    let shape = if mg.hierarchical {
        hierarchical_shape(&groups_w)
    } else {
        None
    };
    if let Some((k, _)) = shape {
        let ordered = groups_w
            .iter()
            .enumerate()
            .all(|(j, g)| g.iter().enumerate().all(|(m, &w)| w == m * k + j));
        if !ordered {
            return Err(invalid(
                &"the hierarchical multigrain layout (McCombs et al. §6) needs the fine-grain \
                  communicator ordered by fine part: create it with base.split(0, \
                  fine_rank_keys(&groups, true)[base.rank()]), or set hierarchical = false",
            ));
        }
    }
    let n = a.nrows();
    // Fine rows weighted by each rank's measured SpMV rate (lblib-style rate-driven
    // allocation), so that slow ranks get fewer rows; hierarchical: within each
    // coarse part.
    let rates = if mg.rate_weighted_rows {
        Some(measure_rates(a, world, params.threads)?)
    } else {
        None
    };
    let layout = build_layout(a, &groups_w, rates.as_deref(), shape.is_some())?;
    let mut fine = layout.fine;
    let sizes = params.resolve(n)?;
    let fopts = DistOptions {
        threads: params.threads,
        overlap: false,
        max_block: sizes.max_basis,
    };
    // the correction phases' rates, for re-partitioning
    let clock = RateClock::new(world);
    let (mut fop, mut fdiag) = fine_operator(a, &fine, world, fopts)?;
    // semi-static re-partitioning (Boudet et al. §4.5): only where rows follow rates
    let mut monitor = if mg.rate_weighted_rows && mg.repartition.enabled && np > 1 {
        let nnz = fine.nnz_per_part(a).map_err(|e| invalid(&e))?;
        let (gw, hier) = (&groups_w, shape.is_some());
        let planner: crate::repartition::Planner<'_> = Box::new(move |w: &[f64]| {
            let l = build_layout(a, gw, Some(w), hier).ok()?;
            l.fine.nnz_per_part(a).ok()
        });
        let (kind, window) = (mg.rate_kind, mg.rate_window);
        let m = Monitor::new(&clock, mg.repartition.clone(), kind, window, nnz, planner)?;
        Some(m)
    } else {
        mg.repartition.validate()?;
        None
    };
    let gpart = &layout.groups[my_group];
    // Group communicator ordered like the group's rank list; leaders ordered by group.
    let key = groups_w[my_group]
        .iter()
        .position(|&r| r == me)
        .ok_or_else(|| invalid(&"rank not in its group"))?;
    let group = WaitTimer::new(base.split(my_group, key));
    // All-to-all group m = the owners of coarse part m, ordered by group (§6).
    let a2a = shape.map(|_| lblib::Traced::new(base.split(key, my_group)));
    if let (Some(c), Some((k, _))) = (&a2a, shape) {
        if c.size() != k || c.rank() != my_group {
            return Err(invalid(
                &"all-to-all group communicator has an unexpected shape",
            ));
        }
    }
    let (scope, a2a_size, offset) = match shape {
        Some((k, _)) => (AlltoallScope::Hierarchical, k, key * k),
        None => (AlltoallScope::Global, np, 0),
    };
    let is_leader = group.rank() == 0;
    let leaders = base.split(if is_leader { 0 } else { 1 }, my_group);
    let grange = gpart.rows().range(group.rank());
    let glocal = a.row_slice(grange.start, grange.end);
    let gopts = DistOptions {
        threads: params.threads,
        overlap: false,
        max_block: 1,
    };
    let gop =
        DistCsrOperator::new(&glocal, gpart.rows(), &group, gopts).map_err(|e| invalid(&e))?;
    let gdiag: Vec<f64> = (0..glocal.nrows())
        .map(|i| glocal.get(i, grange.start + i))
        .collect();
    let t0 = Instant::now();
    let gblock = precond::preconditioners::diagonal_block(&glocal, 0..glocal.nrows(), grange.start)
        .map_err(|e| JdError::Preconditioner(e.to_string()))?;
    let gpc = build_preconditioner(params, &gblock, precond_shift(params, a))?;
    let setup = t0.elapsed().as_secs_f64();
    let cfg = LbsConfig {
        first_section_ops: params.resolved().maxits() as f64,
        window: mg.rate_window,
        min_rate_seconds: mg.min_rate_seconds,
    };
    // every rank validates (only leaders build a balancer): all fail together
    if let Some(mp) = &mg.memory_balance {
        mp.validate().map_err(|e| invalid(&e))?;
    }
    let lbs = if mg.balance != Balance::None {
        let mut g = GroupLbs::new(&group, if is_leader { Some(&leaders) } else { None }, cfg)
            .map_err(|e| invalid(&e))?;
        if let (Some(mp), Some(l)) = (&mg.memory_balance, g.leader_lbs()) {
            let readings: Box<dyn lblib::SystemReadings + Send> =
                Box::new(lblib::ProcReadings::new());
            let mb = lblib::MemoryBalancer::new(mp.clone(), readings).map_err(|e| invalid(&e))?;
            l.enable_memory_balancing(mb);
        }
        Some(g)
    } else {
        None
    };
    let ng = glocal.nrows();
    let mut backend = Backend {
        world,
        rates: &clock,
        group_nnz: glocal.nnz() as f64,
        group: &group,
        a2a: a2a.as_ref(),
        lbs,
        balance: mg.balance,
        rate_kind: mg.rate_kind,
        ngroups,
        my_group,
        mover: Mover {
            to_group: layout.to_group,
            from_group: layout.from_group,
            me,
            offset,
            values_sent: 0,
            send: Vec::new(),
            recv: Vec::new(),
            send_counts: Vec::new(),
            recv_counts: Vec::new(),
        },
        op: gop,
        pc: gpc,
        diag: gdiag,
        nf: fine.len(me),
        ng,
        xl: Vec::new(),
        nl: 0,
        corr: CorrectionSolver::new(
            ng,
            crate::params::InnerSolver::Bicgstab,
            params.nev + params.block.max(8),
        ),
        decided: false,
        stats: MultigrainStats {
            groups: ngroups,
            my_group,
            group_inner_steps: vec![0; ngroups],
            alltoall_scope: scope,
            alltoall_group_size: a2a_size,
            rate_kind: mg.rate_kind,
            startup_rates: rates.clone().unwrap_or_default(),
            ..Default::default()
        },
        precond: params.precond,
    };
    use lblib::SystemReadings;
    let mut readings = lblib::ProcReadings::new();
    let faults0 = readings.read().map_or(0, |r| r.major_faults);
    let rows_of = |p: &RowPartition| (0..np).map(|q| p.len(q)).collect::<Vec<usize>>();
    // One solver loop; a re-partition stops it with a snapshot, moves the rows and
    // enters it again from the moved state.
    let mut resume: Option<crate::checkpoint::Checkpoint> = None;
    let res = loop {
        let pb = Problem {
            a: &fop,
            comm: world,
            n_global: n,
            row_offset: fine.range(me).start,
            diagonal: Some(&fdiag),
            precond: None,
            spaces: Default::default(),
            mass: None,
        };
        let mut both = Both {
            monitor: monitor.as_mut().map(|m| m as &mut dyn CheckpointSink),
            caller: sink.as_deref_mut(),
        };
        let any = both.monitor.is_some() || both.caller.is_some();
        let ck = crate::checkpoint::Checkpointing {
            resume: resume.as_ref(),
            sink: any.then_some(&mut both as &mut dyn CheckpointSink),
        };
        let res = solve_with(&pb, params, None, Some(&mut backend), ck);
        let Some((mon, h)) = monitor
            .as_mut()
            .and_then(|m| m.take_handover().map(|h| (m, h)))
        else {
            break res;
        };
        // the solve stopped (Err(Stopped)) to re-partition: new rows from the
        // measured rates (within each coarse part when hierarchical)
        let t0 = Instant::now();
        let new = build_layout(a, &groups_w, Some(&h.weights), shape.is_some())?;
        let (moved, sent) = move_rows(world, &fine, &new.fine, &h.snapshot)?;
        (fop, fdiag) = fine_operator(a, &new.fine, world, fopts)?;
        backend.mover.to_group = new.to_group;
        backend.mover.from_group = new.from_group;
        backend.nf = new.fine.len(me);
        let mut total = [sent];
        world.all_reduce_u64(&mut total, lblib::ReduceOp::Sum);
        let nnz = new.fine.nnz_per_part(a).map_err(|e| invalid(&e))?;
        let rows = (rows_of(&fine), rows_of(&new.fine));
        let it = moved.stats.outer_iterations;
        mon.record(nnz, rows, t0.elapsed().as_secs_f64(), (sent, total[0]), it);
        fine = new.fine;
        resume = Some(moved);
    };
    backend.stats.fine_rows = rows_of(&fine);
    if let Some(m) = monitor {
        backend.stats.repartition = m.stats;
    }
    // every process's major page faults during the solve, and the groups' recessions
    let faults = readings.read().map_or(0, |r| r.major_faults) - faults0;
    let mut per_rank = vec![0u64; np];
    world.all_gather_u64(&[faults], &mut per_rank);
    backend.stats.major_faults = per_rank;
    // Per-group steps known everywhere.
    let mut gs: Vec<f64> = backend
        .stats
        .group_inner_steps
        .iter()
        .map(|&v| v as f64)
        .collect();
    if !is_leader {
        gs.iter_mut().for_each(|v| *v = 0.0);
    }
    // Waits in the all-to-all groups (collective over each group).
    if let Some(rep) = a2a.as_ref().and_then(|c| c.report().ok()) {
        backend.stats.alltoall_imbalance_seconds = rep
            .per_rank
            .get(my_group)
            .map_or(0.0, |r| r.imbalance_seconds);
    }
    // and the values sent and waits of every process (counts exact in f64 below 2^53)
    let mem = if is_leader {
        backend.stats.memory
    } else {
        lblib::memory::MemoryStats::default()
    };
    gs.extend([mem.samples, mem.thrashing_samples, mem.recessions].map(|v| v as f64));
    gs.push(backend.stats.alltoall_imbalance_seconds);
    gs.push(backend.mover.values_sent as f64);
    world.all_reduce(&mut gs, lblib::ReduceOp::Sum);
    backend.stats.alltoall_values_sent_total = gs.pop().unwrap_or(0.0) as u64;
    backend.stats.alltoall_imbalance_seconds_total = gs.pop().unwrap_or(0.0);
    backend.stats.memory_total = lblib::memory::MemoryStats {
        recessions: gs.pop().unwrap_or(0.0) as u64,
        thrashing_samples: gs.pop().unwrap_or(0.0) as u64,
        samples: gs.pop().unwrap_or(0.0) as u64,
    };
    backend.stats.group_inner_steps = gs.iter().map(|&v| v as u64).collect();
    backend.stats.alltoall_values_sent = backend.mover.values_sent;
    let mgstats = backend.stats.clone();
    with_setup(res, setup).map(|mut s| {
        s.multigrain = Some(mgstats);
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use matrices::generate::{generate, GenSpec};

    fn lap3d(n: usize) -> CsrMatrix {
        let spec: GenSpec = format!("lap3d:{n}").parse().expect("spec");
        generate(&spec).expect("matrix")
    }

    /// Values each world rank sends to other ranks per vector when every group
    /// receives one vector, and the set of partners of each rank.
    fn sends_per_rank(l: &Layout, np: usize) -> (Vec<usize>, Vec<Vec<usize>>) {
        let mut vals = vec![0; np];
        let mut partners = vec![Vec::new(); np];
        for t in l.to_group.iter().flat_map(|p| p.transfers()) {
            if t.src != t.dst {
                vals[t.src] += t.rows.len();
            }
        }
        for t in l
            .to_group
            .iter()
            .chain(&l.from_group)
            .flat_map(|p| p.transfers())
        {
            if t.src != t.dst && !partners[t.src].contains(&t.dst) {
                partners[t.src].push(t.dst);
            }
        }
        (vals, partners)
    }

    #[test]
    fn fine_rank_keys_order_members_by_coarse_part() {
        // P = 6, k = 2, g = 3: member m of group j gets key m*k + j
        let groups = vec![vec![0, 1, 2], vec![3, 4, 5]];
        assert_eq!(fine_rank_keys(&groups, true), vec![0, 2, 4, 1, 3, 5]);
        assert_eq!(fine_rank_keys(&groups, false), vec![0, 1, 2, 3, 4, 5]);
        // P = 6, k = 3, g = 2
        let g3 = vec![vec![0, 1], vec![2, 3], vec![4, 5]];
        assert_eq!(fine_rank_keys(&g3, true), vec![0, 3, 1, 4, 2, 5]);
        // unequal groups, one process per group, invalid lists: identity
        assert_eq!(
            fine_rank_keys(&[vec![0, 1, 2], vec![3]], true),
            vec![0, 1, 2, 3]
        );
        assert_eq!(fine_rank_keys(&[vec![1], vec![0]], true), vec![0, 1]);
        assert_eq!(fine_rank_keys(&[vec![0, 0]], true), vec![0, 1]);
        assert_eq!(
            fine_rank_keys(&[vec![0, 7], vec![1, 2]], true),
            vec![0, 1, 2, 3]
        );
        assert_eq!(hierarchical_shape(&g3), Some((3, 2)));
        assert_eq!(hierarchical_shape(&[vec![0], vec![1]]), None);
        assert_eq!(hierarchical_shape(&[]), None);
    }

    #[test]
    fn hierarchical_layout_tiles_coarse_parts_in_proportion() {
        let a = lap3d(8);
        let (k, g) = (2, 3);
        // world numbering: member m of group j is rank m*k + j
        let groups: Vec<Vec<usize>> = (0..k)
            .map(|j| (0..g).map(|m| m * k + j).collect())
            .collect();
        let rates = [1.0, 3.0, 2.0, 2.0, 1.0, 1.0];
        let l = build_layout(&a, &groups, Some(&rates), true).expect("layout");
        let coarse = RowPartition::balanced_by_nnz(&a, g).expect("coarse");
        // every group uses the same coarse partition
        for gp in &l.groups {
            assert_eq!(gp.rows(), &coarse);
        }
        let ip = a.indptr();
        let nnz = |r: std::ops::Range<usize>| (ip[r.end] - ip[r.start]) as f64;
        for m in 0..g {
            let c = coarse.range(m);
            // the k sub-parts tile coarse part m exactly
            assert_eq!(l.fine.offsets()[m * k], c.start);
            assert_eq!(l.fine.offsets()[(m + 1) * k], c.end);
            // nonzeros in proportion to the owners' rates (within one row of 7)
            let w: f64 = rates[m * k..(m + 1) * k].iter().sum();
            for j in 0..k {
                let want = nnz(c.clone()) * rates[m * k + j] / w;
                let got = nnz(l.fine.range(m * k + j));
                assert!((got - want).abs() <= 7.0, "part {m},{j}: {got} vs {want}");
            }
        }
        // every transfer stays inside an all-to-all group {m*k .. m*k + k}
        for plan in l.to_group.iter().chain(&l.from_group) {
            for t in plan.transfers() {
                assert_eq!(t.src / k, t.dst / k, "transfer {t:?} leaves its group");
            }
        }
        // each rank keeps its rows for its own group and sends them whole to the
        // k - 1 other members of its all-to-all group
        let (vals, partners) = sends_per_rank(&l, k * g);
        for p in 0..k * g {
            assert_eq!(vals[p], (k - 1) * l.fine.len(p), "rank {p}");
            assert_eq!(partners[p], vec![p ^ 1], "rank {p}");
        }
        // a world not ordered by fine part is refused
        let consecutive = vec![vec![0, 1, 2], vec![3, 4, 5]];
        assert!(matches!(
            build_layout(&a, &consecutive, None, true),
            Err(JdError::InvalidParams { .. })
        ));
        assert!(matches!(
            build_layout(&a, &[vec![0, 1, 2], vec![3]], None, true),
            Err(JdError::InvalidParams { .. })
        ));
    }

    #[test]
    fn global_layout_talks_to_more_ranks_and_sends_more() {
        let a = lap3d(8);
        let (k, g) = (2usize, 3usize);
        let np = k * g;
        let hier_groups: Vec<Vec<usize>> = (0..k)
            .map(|j| (0..g).map(|m| m * k + j).collect())
            .collect();
        let h = build_layout(&a, &hier_groups, None, true).expect("hierarchical");
        let glob = build_layout(&a, &[vec![0, 1, 2], vec![3, 4, 5]], None, false).expect("global");
        // global: independent partitionings, fine part p on rank p of all P
        assert_eq!(glob.fine, RowPartition::balanced_by_nnz(&a, np).unwrap());
        let (vh, ph) = sends_per_rank(&h, np);
        let (vg, pg) = sends_per_rank(&glob, np);
        let (th, tg): (usize, usize) = (vh.iter().sum(), vg.iter().sum());
        // hierarchical: every rank sends n/6 ≈ 85 rows; global about 10/6 n in total
        assert!(th * 3 < tg * 2, "hierarchical {th} vs global {tg}");
        assert!(ph.iter().all(|p| p.len() == k - 1));
        assert!(pg.iter().any(|p| p.len() > k - 1), "{pg:?}");
        // and some global transfer crosses what would be all-to-all groups
        assert!(glob
            .to_group
            .iter()
            .flat_map(|p| p.transfers())
            .any(|t| t.src / k != t.dst / k));
    }
}
