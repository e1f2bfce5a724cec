//! One multigrain run: the solve groups' communicators, operators and
//! balancer, the solver loop with the correction phase in the groups, and the
//! re-partitions the loop asks for (an explicit `Exit::Repartition` of the
//! loop, handled here).

use std::time::Instant;

use lblib::lbs::GroupLbs;
use lblib::{Comm, LbsConfig};
use matrices::partition::{Redistribution, RowPartition};
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
use crate::jd::{local_rows, run_loop, Exit, Hooks, LoopMonitor, Observer, Problem, Spaces};
use crate::optimal_m::DEFAULT_MAXITS_GROUPS;
use crate::params::{JdParams, PrecondChoice};
use crate::repartition::{move_rows, Monitor, Plan, RateClock, RepartitionEvent, WaitTimer};
use crate::setup::{check_matrix, precond_shift, rows, with_setup, RowOperator, Rows, RowsSpec};
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
    let resume = caller.resume;
    let group_params = group_params(params);
    let params = &group_params;
    let np = world.size();
    let me = world.rank();
    check_matrix(a, params)?;
    if let Some(m) = mass {
        crate::setup::check_pair(a, m, params)?;
    }
    let topo = Topology::new(world, base, &mg.groups, mg.hierarchical)?;
    let (ngroups, my_group) = (topo.groups.len(), topo.my_group);
    let n = a.nrows();
    let (layout, rates) = initial_layout(a, world, &topo, resume, mg, params.execution.threads)?;
    let Layout {
        fine,
        groups: group_layouts,
        to_group,
        from_group,
    } = layout;
    let sizes = params.resolve(n)?;
    let side = FineSide {
        a,
        mass,
        world,
        params,
        opts: DistOptions {
            threads: params.execution.threads,
            overlap: false,
            max_block: sizes.max_basis,
        },
    };
    // the correction phases' rates, for re-partitioning
    let clock = if mg.repartition.core_share && world.real_clock() {
        RateClock::with_core_share(world)
    } else {
        RateClock::new(world)
    };
    let mut fine = FineRows::new(&side, fine)?;
    let monitor = repartition_monitor(a, &clock, &topo, &fine.part, mg, np)?;
    let gpart = &group_layouts[my_group];
    let comms = GroupComms::split(base, &topo, np)?;
    let GroupRows {
        k: grows,
        mass: gmass,
    } = group_rows(a, mass, &comms.group, params, gpart.rows())?;
    let setup = grows.setup_seconds;
    let group_nnz = {
        let r = &grows.range;
        let ip = a.indptr();
        (ip[r.end] - ip[r.start]) as f64
    };
    let resolved = params.resolved();
    let lbs = balancer(&comms, mg, resolved.maxits() as f64)?;
    let ng = grows.range.len();
    let mut backend = Backend {
        world,
        rates: &clock,
        group_nnz,
        group: &comms.group,
        a2a: comms.a2a.as_ref(),
        lbs,
        balance: mg.balance,
        rate_kind: mg.rate_kind,
        ngroups,
        my_group,
        mover: new_mover(to_group, from_group, me, comms.offset),
        op: grows.op,
        pc: grows.pc,
        diag: grows.diag,
        nf: fine.part.len(me),
        ng,
        xl: Vec::new(),
        nl: 0,
        corr: CorrectionSolver::new(
            ng,
            resolved.correction.solver,
            params.problem.nev
                + caller.spaces.deflation.len() / n.max(1)
                + params.basis.block.max(8),
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
            alltoall_scope: comms.scope,
            alltoall_group_size: comms.a2a_size,
            rate_kind: mg.rate_kind,
            startup_rates: rates.clone().unwrap_or_default(),
            ..Default::default()
        },
        precond: params.preconditioner.kind,
    };
    // A resumed run: every group needs the locked vectors in its own layout.
    if let Some(ck) = resume {
        lock_resumed(&mut backend, ck);
    }
    solve_and_report(&side, &mut fine, &mut backend, monitor, caller, setup)
}

/// Errors of the groups' set-up (field `groups`).
fn invalid(e: &dyn std::fmt::Display) -> JdError {
    JdError::invalid("groups", e)
}

/// The parameters of the run: the caller's, with the solve groups iterating
/// up to the paper's m = 150 (§4) and without a preconditioner (the paper's
/// setting, which the balancing experiments measure) unless told otherwise.
fn group_params(params: &JdParams) -> JdParams {
    let mut group_params = params.clone();
    group_params
        .correction
        .maxits
        .get_or_insert(DEFAULT_MAXITS_GROUPS);
    if group_params.preconditioner.kind == PrecondChoice::Auto {
        group_params.preconditioner.kind = PrecondChoice::None;
    }
    group_params
}

/// The fine and group layouts at the start, and the measured start-up rates
/// (`None` unless measured). Fine rows are weighted by each rank's measured
/// SpMV rate (lblib-style rate-driven allocation) when `mg.rate_weighted_rows`,
/// so that slow ranks get fewer rows; hierarchical: within each coarse part. A
/// resumed run takes the rows of its checkpoints. Collective over `world`.
///
/// # Errors
/// `Checkpoint` when the checkpoints' rows do not tile the matrix; otherwise
/// as the layouts and the rates.
fn initial_layout<W: Comm>(
    a: &CsrMatrix,
    world: &W,
    topo: &Topology,
    resume: Option<&Checkpoint>,
    mg: &MultigrainParams,
    threads: usize,
) -> Result<(Layout, Option<Vec<f64>>), JdError> {
    let hierarchical = topo.shape.is_some();
    match resume {
        Some(ck) => {
            let fine = checkpoint_rows(world, ck, a.nrows())?;
            Ok((layout_of_fine(a, &topo.groups, fine, hierarchical)?, None))
        }
        None => {
            let rates = if mg.rate_weighted_rows {
                Some(measure_rates(a, world, threads)?)
            } else {
                None
            };
            let layout = build_layout(a, &topo.groups, rates.as_deref(), hierarchical)?;
            Ok((layout, rates))
        }
    }
}

/// What this process's fine rows of K (and M) are built from, before and
/// after a re-partition.
struct FineSide<'a, W> {
    a: &'a CsrMatrix,
    mass: Option<&'a CsrMatrix>,
    world: &'a W,
    params: &'a JdParams,
    opts: DistOptions,
}

impl<'a, W: Comm> FineSide<'a, W> {
    /// K's rows of this process under the fine partition `part`.
    ///
    /// # Errors
    /// As [`rows`].
    fn rows(&self, part: &RowPartition) -> Result<Rows<'a, 'a, W>, JdError> {
        let spec = RowsSpec {
            part: Some(part),
            opts: self.opts,
            precond: None,
            field: "groups",
            precond_of: None,
        };
        rows(self.a, self.world, self.params, spec)
    }

    /// M's rows of this process under `part` (as K's); `None` without M.
    ///
    /// # Errors
    /// As [`rows`].
    fn mass_rows(&self, part: &RowPartition) -> Result<Option<Rows<'a, 'a, W>>, JdError> {
        let Some(m) = self.mass else {
            return Ok(None);
        };
        let spec = RowsSpec {
            part: Some(part),
            opts: self.opts,
            precond: None,
            field: "mass",
            precond_of: None,
        };
        rows(m, self.world, self.params, spec).map(Some)
    }
}

/// The fine partition the solver loop runs on and this process's rows of K
/// and M under it (moved by re-partitions).
struct FineRows<'a, W: Comm> {
    part: RowPartition,
    rows: Rows<'a, 'a, W>,
    mass: Option<Rows<'a, 'a, W>>,
}

impl<'a, W: Comm> FineRows<'a, W> {
    /// The rows of `side` under `part`.
    ///
    /// # Errors
    /// As [`rows`].
    fn new(side: &FineSide<'a, W>, part: RowPartition) -> Result<Self, JdError> {
        let rows = side.rows(&part)?;
        let mass = side.mass_rows(&part)?;
        Ok(Self { part, rows, mass })
    }
}

/// Each of the `np` ranks' number of rows under `part`.
fn rows_per_rank(part: &RowPartition, np: usize) -> Vec<usize> {
    (0..np).map(|q| part.len(q)).collect()
}

/// The monitor of semi-static re-partitioning (Boudet et al. §4.5) on `clock`,
/// only where rows follow rates (`mg.rate_weighted_rows`, re-partitioning
/// enabled and `np` > 1); `None` otherwise.
///
/// # Errors
/// `InvalidParams` for bad re-partitioning parameters.
fn repartition_monitor<'c, W: Comm>(
    a: &'c CsrMatrix,
    clock: &'c RateClock<'c, W>,
    topo: &'c Topology,
    fine: &RowPartition,
    mg: &MultigrainParams,
    np: usize,
) -> Result<Option<Monitor<'c, W, Layout>>, JdError> {
    if !(mg.rate_weighted_rows && mg.repartition.enabled && np > 1) {
        mg.repartition.validate()?;
        return Ok(None);
    }
    let nnz = fine.nnz_per_part(a).map_err(|e| invalid(&e))?;
    let (gw, hier) = (&topo.groups, topo.shape.is_some());
    let planner: crate::repartition::Planner<'_, Layout> = Box::new(move |w: &[f64]| {
        let l = build_layout(a, gw, Some(w), hier).ok()?;
        Some((l.fine.nnz_per_part(a).ok()?, l))
    });
    let (kind, window) = (mg.rate_kind, mg.rate_window);
    let m = Monitor::new(clock, mg.repartition.clone(), kind, window, nnz, planner)?;
    Ok(Some(m))
}

/// This process's communicators beside the fine-grain one (McCombs et al. §6).
/// Fields in the order they are released (the reverse of their creation).
struct GroupComms<B: Comm> {
    /// The group leaders, ordered by group (the other ranks' split is unused).
    leaders: B,
    /// The all-to-all group of the hierarchical scheme, traced for the
    /// imbalance metric; `None` in the global scheme.
    a2a: Option<lblib::Traced<B>>,
    /// The solve group, ordered like the group's rank list.
    group: WaitTimer<B>,
    is_leader: bool,
    scope: AlltoallScope,
    /// Ranks of the all-to-all exchanges.
    a2a_size: usize,
    /// World rank of rank 0 of the all-to-all exchanges.
    offset: usize,
}

impl<B: Comm> GroupComms<B> {
    /// Splits `base` into this process's solve group, its all-to-all group
    /// when hierarchical (coarse part m's owners, ordered by group) and the
    /// leaders. Collective over `base`.
    ///
    /// # Errors
    /// `InvalidParams` when the all-to-all group has an unexpected shape.
    fn split(base: &B, topo: &Topology, np: usize) -> Result<Self, JdError> {
        let (my_group, key, shape) = (topo.my_group, topo.key, topo.shape);
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
        Ok(Self {
            leaders,
            a2a,
            group,
            is_leader,
            scope,
            a2a_size,
            offset,
        })
    }
}

/// This rank's rows of K and M in its solve group's layout.
struct GroupRows<'g, B: Comm> {
    /// K's rows, with their preconditioner.
    k: Rows<'g, 'g, WaitTimer<B>>,
    /// M's rows (their operator) and M's diagonal on them; `None` without M.
    mass: Option<(RowOperator<'g, 'g, WaitTimer<B>>, Vec<f64>)>,
}

/// This rank's rows of K in its group's layout `part`, with the preconditioner
/// of `params` (with M, a built one approximates K − σ₀M, as on the fine
/// path), and its rows of M. Collective over `group`.
///
/// # Errors
/// As [`rows`] and the shifted pair.
fn group_rows<'g, B: Comm>(
    a: &'g CsrMatrix,
    mass: Option<&'g CsrMatrix>,
    group: &'g WaitTimer<B>,
    params: &JdParams,
    part: &RowPartition,
) -> Result<GroupRows<'g, B>, JdError> {
    let shifted = match mass {
        Some(m) if crate::setup::precond_kind(params).is_some() => Some(
            crate::setup::shifted_pair(a, m, crate::setup::mass_precond_shift(params))?,
        ),
        _ => None,
    };
    let gopts = DistOptions {
        threads: params.execution.threads,
        overlap: false,
        max_block: 1,
    };
    let gspec = RowsSpec {
        part: Some(part),
        opts: gopts,
        precond: match mass {
            None => Some(precond_shift(params, a)),
            Some(_) => shifted.as_ref().map(|_| 0.0),
        },
        field: "groups",
        precond_of: shifted.as_ref(),
    };
    let grows = rows(a, group, params, gspec)?;
    drop(shifted);
    let gmass = match mass {
        Some(m) => {
            let spec = RowsSpec {
                part: Some(part),
                opts: gopts,
                precond: None,
                field: "mass",
                precond_of: None,
            };
            let r = rows(m, group, params, spec)?;
            // No preconditioner: the diagonal is kept.
            Some((r.op, r.diag.unwrap_or_default()))
        }
        None => None,
    };
    Ok(GroupRows {
        k: grows,
        mass: gmass,
    })
}

/// The group's balancer (`None` when `mg.balance` is `None`), its first
/// section `first_section_ops` steps long; leaders also balance memory when
/// `mg.memory_balance` asks. Every rank validates the memory parameters
/// (only leaders build a balancer), so that all fail together.
///
/// # Errors
/// `InvalidParams` for bad memory parameters or a balancer that cannot be built.
fn balancer<'g, B: Comm>(
    comms: &'g GroupComms<B>,
    mg: &MultigrainParams,
    first_section_ops: f64,
) -> Result<Option<GroupLbs<'g, WaitTimer<B>, B>>, JdError> {
    let cfg = LbsConfig {
        first_section_ops,
        window: mg.rate_window,
        min_rate_seconds: mg.min_rate_seconds,
    };
    if let Some(mp) = &mg.memory_balance {
        mp.validate().map_err(|e| invalid(&e))?;
    }
    if mg.balance == Balance::None {
        return Ok(None);
    }
    let leaders = if comms.is_leader {
        Some(&comms.leaders)
    } else {
        None
    };
    let mut g = GroupLbs::new(&comms.group, leaders, cfg).map_err(|e| invalid(&e))?;
    if let (Some(mp), Some(l)) = (&mg.memory_balance, g.leader_lbs()) {
        let readings: Box<dyn lblib::SystemReadings + Send> = Box::new(lblib::ProcReadings::new());
        let mb = lblib::MemoryBalancer::new(mp.clone(), readings).map_err(|e| invalid(&e))?;
        l.enable_memory_balancing(mb);
    }
    Ok(Some(g))
}

/// The mover between the fine and the group layouts, nothing sent yet;
/// `offset`: world rank of rank 0 of the all-to-all exchanges.
fn new_mover(
    to_group: Vec<Redistribution>,
    from_group: Vec<Redistribution>,
    me: usize,
    offset: usize,
) -> Mover {
    Mover {
        to_group,
        from_group,
        me,
        offset,
        values_sent: 0,
        send: Vec::new(),
        recv: Vec::new(),
        send_counts: Vec::new(),
        recv_counts: Vec::new(),
    }
}

/// Gives every group the locked vectors of the checkpoint `ck` (this rank's
/// fine rows) in its own layout. Collective.
fn lock_resumed<W: Comm, G: Comm>(backend: &mut Backend<'_, W, G>, ck: &Checkpoint) {
    let nl = ck.n_local;
    let mut scratch = Stats::default();
    for x in ck
        .locked_vectors
        .chunks_exact(nl.max(1))
        .take(ck.locked_values.len())
    {
        backend.lock_vector(x, &mut scratch);
    }
}

/// The solver loop on the fine rows `fine` with the correction phases of
/// `backend`: a re-partition ends it with a snapshot and the plan of the new
/// rows, which are moved before the loop is entered again from the moved
/// state. Then the run's figures, known everywhere, join the solution (with
/// `setup` seconds). Collective.
///
/// # Errors
/// As the solver loop (after the figures are gathered); start, deflation or
/// mass rows that do not fit and a failed re-partition end the run at once.
fn solve_and_report<'a, W: Comm, G: Comm>(
    side: &FineSide<'a, W>,
    fine: &mut FineRows<'a, W>,
    backend: &mut Backend<'_, W, G>,
    mut monitor: Option<Monitor<'_, W, Layout>>,
    caller: Caller<'_, '_>,
    setup: f64,
) -> Result<Solution, JdError> {
    let Caller {
        mut observer,
        mut sink,
        resume,
        mut on_repartition,
        spaces,
    } = caller;
    let (world, params, n) = (side.world, side.params, side.a.nrows());
    use lblib::SystemReadings;
    let mut readings = lblib::ProcReadings::new();
    let faults0 = readings.read().map_or(0, |r| r.major_faults);
    let mut moved: Option<Checkpoint> = None;
    let res = loop {
        let pb = Problem {
            a: &fine.rows.op,
            comm: world,
            n_global: n,
            row_offset: fine.rows.range.start,
            diagonal: fine.rows.diag.as_deref(),
            precond: None,
            spaces: Default::default(),
            mass: None,
            deflate_locked: false,
        };
        let pb = match &fine.mass {
            Some(mr) => pb
                .with_mass(&mr.op)?
                .with_mass_diagonal(mr.diag.as_deref().unwrap_or_default())?,
            None => pb,
        };
        // this process's rows of the start and deflation vectors, in the
        // current fine layout (the start vectors serve the first entry only)
        let initial = local_rows("initial", spaces.initial, n, fine.rows.range.clone())?;
        let deflation = local_rows("deflation", spaces.deflation, n, fine.rows.range.clone())?;
        let pb = pb.with_initial(&initial)?.with_deflation(&deflation)?;
        let hooks = Hooks {
            observer: observer.as_mut().map(|o| &mut **o as Observer<'_>),
            sink: sink.as_mut().map(|s| &mut **s as &mut dyn CheckpointSink),
            resume: moved.as_ref().or(resume),
            backend: Some(&mut *backend),
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
        let state = repartition(side, fine, backend, monitor.as_mut(), plan, &snapshot)?;
        // the caller's watchers, told once the rows have moved
        if let Some(ev) = monitor.as_ref().and_then(|m| m.stats.events.last()) {
            on_repartition.iter_mut().for_each(|f| f(ev));
        }
        moved = Some(state);
    };
    backend.stats.fine_rows = rows_per_rank(&fine.part, world.size());
    if let Some(m) = monitor {
        backend.stats.repartition = m.stats;
    }
    // every process's major page faults during the solve, and the groups' recessions
    let faults = readings.read().map_or(0, |r| r.major_faults) - faults0;
    gather_stats(backend, faults);
    let mgstats = backend.stats.clone();
    with_setup(res, setup).map(|mut s| {
        s.multigrain = Some(mgstats);
        s
    })
}

/// Moves the fine rows to the layout of `plan` (new rows from the measured
/// rates, within each coarse part when hierarchical, in the layout the monitor
/// built to predict the gain): the `snapshot`'s state, K's and M's rows and
/// the backend's exchanges; the monitor records it. Returns the moved state to
/// resume from. Collective over the fine-grain communicator.
///
/// # Errors
/// As the move of the state and the building of the new rows.
fn repartition<'a, W: Comm, G: Comm>(
    side: &FineSide<'a, W>,
    fine: &mut FineRows<'a, W>,
    backend: &mut Backend<'_, W, G>,
    monitor: Option<&mut Monitor<'_, W, Layout>>,
    plan: Plan<Layout>,
    snapshot: &Checkpoint,
) -> Result<Checkpoint, JdError> {
    let (world, np) = (side.world, side.world.size());
    let t0 = Instant::now();
    debug_assert_eq!(plan.weights.len(), np, "one weight per fine rank");
    let new = plan.layout;
    let (state, sent) = move_rows(world, &fine.part, &new.fine, snapshot)?;
    fine.rows = side.rows(&new.fine)?;
    fine.mass = side.mass_rows(&new.fine)?;
    backend.mover.to_group = new.to_group;
    backend.mover.from_group = new.from_group;
    backend.nf = new.fine.len(world.rank());
    let mut total = [sent];
    world.all_reduce_u64(&mut total, lblib::ReduceOp::Sum);
    let nnz = new.fine.nnz_per_part(side.a).map_err(|e| invalid(&e))?;
    let rows = (rows_per_rank(&fine.part, np), rows_per_rank(&new.fine, np));
    let it = state.stats.outer_iterations;
    if let Some(mon) = monitor {
        mon.record(nnz, rows, t0.elapsed().as_secs_f64(), (sent, total[0]), it);
    }
    fine.part = new.fine;
    Ok(state)
}

/// The run's figures known everywhere: every process's major page `faults`
/// during the solve, each group's inner steps, the groups' memory figures and
/// recessions, and the all-to-all waits and values sent. Collective over the
/// fine-grain communicator (and each all-to-all group).
fn gather_stats<W: Comm, G: Comm>(backend: &mut Backend<'_, W, G>, faults: u64) {
    let world = backend.world;
    let is_leader = backend.group.rank() == 0;
    let mut per_rank = vec![0u64; world.size()];
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
    if let Some(rep) = backend.a2a.and_then(|c| c.report().ok()) {
        backend.stats.alltoall_imbalance_seconds = rep
            .per_rank
            .get(backend.my_group)
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
}
