//! One multigrain run: the solve groups' communicators, operators and
//! balancer, the solver loop with the correction phase in the groups, and the
//! re-partitions the loop asks for (an explicit `Exit::Repartition` of the
//! loop, handled here).

use std::time::Instant;

use lblib::lbs::GroupLbs;
use lblib::{Comm, LbsConfig};
use matrices::partition::RowPartition;
use matrices::CsrMatrix;
use precond::dist::DistOptions;

use super::backend::Backend;
use super::groups::{build_layout, layout_of_fine, Layout, Topology};
use super::mover::Mover;
use super::params::{Balance, MultigrainParams};
use super::stats::{AlltoallScope, MultigrainStats};
use crate::checkpoint::{Checkpoint, CheckpointError, CheckpointSink};
use crate::correction::CorrectionSolver;
use crate::error::JdError;
use crate::jd::{
    local_rows, run_loop, CorrectionBackend, Exit, Hooks, LoopMonitor, Observer, Problem, Spaces,
};
use crate::optimal_m::DEFAULT_MAXITS_GROUPS;
use crate::params::{JdParams, PrecondChoice};
use crate::repartition::{move_rows, Monitor, Plan, RateClock, RepartitionEvent, WaitTimer};
use crate::setup::{check_matrix, precond_shift, rows, with_setup, Rows, RowsSpec};
use crate::solution::{Solution, Stats};

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

/// The fine rows of the checkpoints to resume from, one part per rank of
/// `world` (one all-gather).
///
/// # Errors
/// `Checkpoint` when the processes' rows do not tile 0..n in rank order.
fn checkpoint_rows<W: Comm>(world: &W, ck: &Checkpoint, n: usize) -> Result<RowPartition, JdError> {
    let np = world.size();
    let mut all = vec![0u64; 2 * np];
    world.all_gather_u64(&[ck.row_offset as u64, ck.n_local as u64], &mut all);
    let mut offsets = vec![0usize];
    for p in 0..np {
        let (start, len) = (all[2 * p] as usize, all[2 * p + 1] as usize);
        if start != offsets[p] {
            return Err(CheckpointError::Mismatch {
                what: format!("the first row of rank {p}"),
                checkpoint: start.to_string(),
                current: format!("{} (after the rows of the lower ranks)", offsets[p]),
            }
            .into());
        }
        offsets.push(start + len);
    }
    if offsets[np] != n {
        return Err(CheckpointError::Mismatch {
            what: "the rows of all ranks".into(),
            checkpoint: offsets[np].to_string(),
            current: n.to_string(),
        }
        .into());
    }
    RowPartition::from_offsets(offsets).map_err(|e| JdError::invalid("groups", e))
}

/// The caller's hooks of a multigrain run (see [`crate::Solver`]).
pub(crate) struct Caller<'h, 'r> {
    /// Sees every outer iteration.
    pub observer: Option<Observer<'h>>,
    /// Receives checkpoints (this process's fine rows).
    pub sink: Option<&'h mut dyn CheckpointSink>,
    /// This process's checkpoint to resume from.
    pub resume: Option<&'h Checkpoint>,
    /// Told of every re-partition, once its rows have moved.
    pub on_repartition: Vec<&'r mut dyn FnMut(&RepartitionEvent)>,
    /// Start and deflation vectors (global rows, as [`crate::Solver::spaces`]).
    pub spaces: Spaces<'h>,
}

/// Multigrain (or coarse-grain, one process per group) block JD: fine-grain
/// projection over `world`, correction equations solved by the solve groups
/// of `mg` (ranks of `base`), with the caller's observer, checkpoint sink and
/// checkpoint to resume from (see [`crate::Solver::groups`]). A checkpoint
/// holds this rank's fine rows: a resumed run takes the fine rows of the
/// checkpoints (whatever re-partitions moved them to) instead of measuring
/// rates. With a mass matrix M (K x = λ M x, K = `a`) the fine-grain
/// projection keeps M's fine rows (M-orthonormal basis, as
/// [`crate::Problem::with_mass`]) and every solve group M's rows in its own
/// layout, with M·X_locked: its correction equations are
/// (I − MQQᵀ)(K − θM)(I − QQᵀM) t = −r, as on the fine-grain path
/// ([`crate::correction`]). Collective.
///
/// # Errors
/// See [`crate::Solver::groups`].
pub(crate) fn run<W: Comm, B: Comm>(
    a: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    world: &W,
    base: &B,
    params: &JdParams,
    mg: &MultigrainParams,
    caller: Caller<'_, '_>,
) -> Result<Solution, JdError> {
    let Caller {
        mut observer,
        mut sink,
        resume,
        mut on_repartition,
        spaces,
    } = caller;
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
    check_matrix(a, params)?;
    if let Some(m) = mass {
        crate::setup::check_pair(a, m, params)?;
    }
    let topo = Topology::new(world, base, &mg.groups, mg.hierarchical)?;
    let (ngroups, my_group, key, shape) = (topo.groups.len(), topo.my_group, topo.key, topo.shape);
    let n = a.nrows();
    // Fine rows weighted by each rank's measured SpMV rate (lblib-style rate-driven
    // allocation), so that slow ranks get fewer rows; hierarchical: within each
    // coarse part. A resumed run takes the rows of its checkpoints.
    let (layout, rates) = match resume {
        Some(ck) => {
            let fine = checkpoint_rows(world, ck, n)?;
            (
                layout_of_fine(a, &topo.groups, fine, shape.is_some())?,
                None,
            )
        }
        None => {
            let rates = if mg.rate_weighted_rows {
                Some(measure_rates(a, world, params.threads)?)
            } else {
                None
            };
            let layout = build_layout(a, &topo.groups, rates.as_deref(), shape.is_some())?;
            (layout, rates)
        }
    };
    let Layout {
        mut fine,
        groups: group_layouts,
        to_group,
        from_group,
    } = layout;
    let sizes = params.resolve(n)?;
    let fopts = DistOptions {
        threads: params.threads,
        overlap: false,
        max_block: sizes.max_basis,
    };
    let fine_spec = |part: &RowPartition| -> Result<Rows<'_, '_, W>, JdError> {
        let spec = RowsSpec {
            part: Some(part),
            opts: fopts,
            precond: None,
            field: "groups",
            precond_of: None,
        };
        rows(a, world, params, spec)
    };
    // M's fine rows (same partition as K's)
    let fine_mass = |part: &RowPartition| -> Result<Option<Rows<'_, '_, W>>, JdError> {
        let Some(m) = mass else {
            return Ok(None);
        };
        let spec = RowsSpec {
            part: Some(part),
            opts: fopts,
            precond: None,
            field: "mass",
            precond_of: None,
        };
        rows(m, world, params, spec).map(Some)
    };
    // the correction phases' rates, for re-partitioning
    let clock = RateClock::new(world);
    let mut frows = fine_spec(&fine)?;
    let mut mfrows = fine_mass(&fine)?;
    // semi-static re-partitioning (Boudet et al. §4.5): only where rows follow rates
    let mut monitor = if mg.rate_weighted_rows && mg.repartition.enabled && np > 1 {
        let nnz = fine.nnz_per_part(a).map_err(|e| invalid(&e))?;
        let (gw, hier) = (&topo.groups, shape.is_some());
        let planner: crate::repartition::Planner<'_, Layout> = Box::new(move |w: &[f64]| {
            let l = build_layout(a, gw, Some(w), hier).ok()?;
            Some((l.fine.nnz_per_part(a).ok()?, l))
        });
        let (kind, window) = (mg.rate_kind, mg.rate_window);
        let m = Monitor::new(&clock, mg.repartition.clone(), kind, window, nnz, planner)?;
        Some(m)
    } else {
        mg.repartition.validate()?;
        None
    };
    let gpart = &group_layouts[my_group];
    // Group communicator ordered like the group's rank list; leaders ordered by group.
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
    // with M, a built preconditioner approximates K − σ₀M (as on the fine path)
    let shifted = match mass {
        Some(m) if crate::setup::precond_kind(params).is_some() => Some(
            crate::setup::shifted_pair(a, m, crate::setup::mass_precond_shift(params))?,
        ),
        _ => None,
    };
    let gopts = DistOptions {
        threads: params.threads,
        overlap: false,
        max_block: 1,
    };
    let gspec = RowsSpec {
        part: Some(gpart.rows()),
        opts: gopts,
        precond: match mass {
            None => Some(precond_shift(params, a)),
            Some(_) => shifted.as_ref().map(|_| 0.0),
        },
        field: "groups",
        precond_of: shifted.as_ref(),
    };
    let grows = rows(a, &group, params, gspec)?;
    drop(shifted);
    let gmass = match mass {
        Some(m) => {
            let spec = RowsSpec {
                part: Some(gpart.rows()),
                opts: gopts,
                precond: None,
                field: "mass",
                precond_of: None,
            };
            let r = rows(m, &group, params, spec)?;
            // No preconditioner: the diagonal is kept.
            Some((r.op, r.diag.unwrap_or_default()))
        }
        None => None,
    };
    let setup = grows.setup_seconds;
    let group_nnz = {
        let r = &grows.range;
        let ip = a.indptr();
        (ip[r.end] - ip[r.start]) as f64
    };
    let resolved = params.resolved();
    let cfg = LbsConfig {
        first_section_ops: resolved.maxits() as f64,
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
    let ng = grows.range.len();
    let mut backend = Backend {
        world,
        rates: &clock,
        group_nnz,
        group: &group,
        a2a: a2a.as_ref(),
        lbs,
        balance: mg.balance,
        rate_kind: mg.rate_kind,
        ngroups,
        my_group,
        mover: Mover {
            to_group,
            from_group,
            me,
            offset,
            values_sent: 0,
            send: Vec::new(),
            recv: Vec::new(),
            send_counts: Vec::new(),
            recv_counts: Vec::new(),
        },
        op: grows.op,
        pc: grows.pc,
        diag: grows.diag,
        nf: fine.len(me),
        ng,
        xl: Vec::new(),
        nl: 0,
        corr: CorrectionSolver::new(
            ng,
            resolved.inner_solver,
            params.nev + spaces.deflation.len() / n.max(1) + params.block.max(8),
        ),
        mass: gmass,
        bxl_raw: Vec::new(),
        bxl: Vec::new(),
        decided: false,
        deflated: false,
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
    // A resumed run: every group needs the locked vectors in its own layout.
    if let Some(ck) = resume {
        let nl = ck.n_local;
        let mut scratch = Stats::default();
        for x in ck
            .locked_vectors
            .chunks_exact(nl.max(1))
            .take(ck.locked_values.len())
        {
            backend.on_lock(x, &mut scratch);
        }
    }
    use lblib::SystemReadings;
    let mut readings = lblib::ProcReadings::new();
    let faults0 = readings.read().map_or(0, |r| r.major_faults);
    let rows_of = |p: &RowPartition| (0..np).map(|q| p.len(q)).collect::<Vec<usize>>();
    // One solver loop; a re-partition ends it with a snapshot and the plan of
    // the new rows, which are moved before the loop is entered again from the
    // moved state.
    let mut moved: Option<Checkpoint> = None;
    let res = loop {
        let pb = Problem {
            a: &frows.op,
            comm: world,
            n_global: n,
            row_offset: frows.range.start,
            diagonal: frows.diag.as_deref(),
            precond: None,
            spaces: Default::default(),
            mass: None,
            deflate_locked: false,
        };
        let pb = match &mfrows {
            Some(mr) => pb
                .with_mass(&mr.op)?
                .with_mass_diagonal(mr.diag.as_deref().unwrap_or_default())?,
            None => pb,
        };
        // this process's rows of the start and deflation vectors, in the
        // current fine layout (the start vectors serve the first entry only)
        let initial = local_rows("initial", spaces.initial, n, frows.range.clone())?;
        let deflation = local_rows("deflation", spaces.deflation, n, frows.range.clone())?;
        let pb = pb.with_initial(&initial)?.with_deflation(&deflation)?;
        let hooks = Hooks {
            observer: observer.as_mut().map(|o| &mut **o as Observer<'_>),
            sink: sink.as_mut().map(|s| &mut **s as &mut dyn CheckpointSink),
            resume: moved.as_ref().or(resume),
            backend: Some(&mut backend),
            monitor: monitor
                .as_mut()
                .map(|m| m as &mut dyn LoopMonitor<Plan = Plan<Layout>>),
            shift: None,
        };
        let (plan, snapshot) = match run_loop(&pb, params, hooks) {
            Ok(Exit::Solved(s)) => break Ok(s),
            Err(e) => break Err(e),
            Ok(Exit::Repartition { plan, snapshot }) => (plan, snapshot),
        };
        // new rows from the measured rates (within each coarse part when
        // hierarchical), in the layout the monitor built to predict the gain
        let t0 = Instant::now();
        debug_assert_eq!(plan.weights.len(), np, "one weight per fine rank");
        let new = plan.layout;
        let (state, sent) = move_rows(world, &fine, &new.fine, &snapshot)?;
        frows = fine_spec(&new.fine)?;
        mfrows = fine_mass(&new.fine)?;
        backend.mover.to_group = new.to_group;
        backend.mover.from_group = new.from_group;
        backend.nf = new.fine.len(me);
        let mut total = [sent];
        world.all_reduce_u64(&mut total, lblib::ReduceOp::Sum);
        let nnz = new.fine.nnz_per_part(a).map_err(|e| invalid(&e))?;
        let rows = (rows_of(&fine), rows_of(&new.fine));
        let it = state.stats.outer_iterations;
        if let Some(mon) = monitor.as_mut() {
            mon.record(nnz, rows, t0.elapsed().as_secs_f64(), (sent, total[0]), it);
            if let Some(ev) = mon.stats.events.last() {
                on_repartition.iter_mut().for_each(|f| f(ev));
            }
        }
        fine = new.fine;
        moved = Some(state);
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
