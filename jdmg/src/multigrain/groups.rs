//! Solve groups: their rank lists (`--groups`), the fine-grain communicator
//! ordered for the hierarchical layout, and the row layouts and transfer
//! plans of a run (McCombs et al. §6).

use lblib::Comm;
use matrices::partition::{GroupPartition, Redistribution, RowPartition};
use matrices::CsrMatrix;

use crate::error::JdError;
use crate::params::JdParams;

/// `(k, g)` when the hierarchical layout of McCombs et al. §6 applies to `groups`: k ≥ 1
/// groups, all of the same size g ≥ 2 (with g = 1, JDcg, it would equal the global
/// scheme).
pub fn hierarchical_shape(groups: &[Vec<usize>]) -> Option<(usize, usize)> {
    let g = groups.first()?.len();
    (g >= 2 && groups.iter().all(|x| x.len() == g)).then_some((groups.len(), g))
}

/// The `key` of each process (indexed by its rank in `base`, the communicator the
/// group lists refer to) for `base.split(0, key)` when creating the fine-grain
/// communicator of [`solve_multigrain`](crate::solve_multigrain).
///
/// Hierarchical layout (`hierarchical` and [`hierarchical_shape`] applies, McCombs et al.
/// §6): fine part `m * k + j` (sub-part j of coarse part m) belongs to the member at
/// position m of group j, so that process gets key `m * k + j`; the k processes with
/// keys `m * k..(m + 1) * k` are all-to-all group m. Otherwise the identity (fine
/// parts in base-rank order). Groups that do not cover `0..P` exactly once (P = total
/// size) also give the identity; [`solve_multigrain`](crate::solve_multigrain) reports them.
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
pub(crate) fn validate_groups(groups: &[Vec<usize>], nranks: usize) -> Result<(), String> {
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
pub(crate) struct Layout {
    pub(crate) fine: RowPartition,
    /// Each group's layout (part q on world rank `groups[g][q]`).
    pub(crate) groups: Vec<GroupPartition>,
    pub(crate) to_group: Vec<Redistribution>,
    pub(crate) from_group: Vec<Redistribution>,
}

/// Builds the fine and group layouts (McCombs et al. §6). `groups` in world numbering;
/// `rates`: per world rank weights of the fine rows (`None`: equal nonzeros).
///
/// * global: fine rows over all P ranks (weighted), each group its own
///   nnz-balanced partition;
/// * `hierarchical`: g nnz-balanced coarse parts shared by all groups, coarse part m
///   split among world ranks `m * k..(m + 1) * k` (weighted); requires
///   `groups[j][m] == m * k + j` (see [`fine_rank_keys`]).
pub(crate) fn build_layout(
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
    let fine = if hierarchical {
        let (_, g) = hierarchical_shape(groups)
            .ok_or_else(|| invalid(&"the hierarchical layout needs groups of equal size ≥ 2"))?;
        let coarse = RowPartition::balanced_by_nnz(a, g).map_err(|e| invalid(&e))?;
        RowPartition::refine_weighted_by_nnz(a, &coarse, weights).map_err(|e| invalid(&e))?
    } else {
        RowPartition::weighted_by_nnz(a, weights).map_err(|e| invalid(&e))?
    };
    layout_of_fine(a, groups, fine, hierarchical)
}

/// The layout of the fine rows `fine` (weighted by [`build_layout`], or those
/// of a checkpoint to resume from): the groups' rows and the transfer plans,
/// built as [`build_layout`] builds them.
///
/// # Errors
/// `InvalidParams` as [`build_layout`], or when `fine` does not refine the
/// hierarchical layout's coarse parts.
pub(crate) fn layout_of_fine(
    a: &CsrMatrix,
    groups: &[Vec<usize>],
    fine: RowPartition,
    hierarchical: bool,
) -> Result<Layout, JdError> {
    let invalid = |e: &dyn std::fmt::Display| JdError::invalid("groups", e);
    let np: usize = groups.iter().map(Vec::len).sum();
    validate_groups(groups, np).map_err(|e| invalid(&e))?;
    if fine.nparts() != np || fine.nrows() != a.nrows() {
        return Err(invalid(&format!(
            "{} fine parts of {} rows for {np} ranks and n = {}",
            fine.nparts(),
            fine.nrows(),
            a.nrows()
        )));
    }
    let group_rows = if hierarchical {
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
        if (0..=g).any(|m| fine.offsets()[m * k] != coarse.offsets()[m]) {
            return Err(invalid(
                &"the fine rows do not refine the hierarchical layout's coarse parts",
            ));
        }
        vec![coarse; k]
    } else {
        groups
            .iter()
            .map(|grp| RowPartition::balanced_by_nnz(a, grp.len()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(&e))?
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
    let k = if params.basis.block == 0 {
        params.problem.nev.min(crate::params::DEFAULT_BLOCK_CAP)
    } else {
        params.basis.block
    };
    parse_groups(spec, base.size(), k)
}

/// The fine-grain communicator of a solve on the processes of `base`: `base`
/// split in the order of [`fine_rank_keys`] for `groups` (base order without
/// groups), every collective first waiting `link_latency` seconds
/// (`lblib::Delayed`: a slow link between solve groups; 0 for none) and traced (`lblib::Traced`: the §4 imbalance, its `report()`). Pass
/// it as the `world` of [`solve_multigrain`](crate::solve_multigrain) (with `base`) or of
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

/// The solve groups of a run in fine-grain (world) numbering, this process's
/// place in them, and the shape of the layout (McCombs et al. §6).
pub(crate) struct Topology {
    /// Each group's world ranks.
    pub groups: Vec<Vec<usize>>,
    /// This process's group.
    pub my_group: usize,
    /// This process's position in its group.
    pub key: usize,
    /// `(k, g)` of the hierarchical layout, `None` for the global scheme.
    pub shape: Option<(usize, usize)>,
}

impl Topology {
    /// Resolves the group lists of `mg` (ranks of `base`) to ranks of `world`
    /// (one all-gather) and checks them: every rank in one group, `world` and
    /// `base` the same processes, `world` ordered by fine part for the
    /// hierarchical layout. Collective over `world`.
    ///
    /// # Errors
    /// `InvalidParams` (field `groups`) naming the problem, on every process.
    pub(crate) fn new<W: Comm, B: Comm>(
        world: &W,
        base: &B,
        groups: &[Vec<usize>],
        hierarchical: bool,
    ) -> Result<Self, JdError> {
        let invalid = |e: &dyn std::fmt::Display| JdError::invalid("groups", e);
        let (np, me) = (world.size(), world.rank());
        if groups.is_empty() {
            return Err(JdError::invalid("groups", "no solve groups"));
        }
        if base.size() != np {
            return Err(invalid(&format!(
                "world has {np} processes, base {}: they must be the same processes",
                base.size()
            )));
        }
        validate_groups(groups, np).map_err(|e| invalid(&format!("solve groups: {e}")))?;
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
        let groups_w: Vec<Vec<usize>> = groups
            .iter()
            .map(|g| g.iter().map(|&b| world_of_base[b]).collect())
            .collect();
        let my_group = groups_w
            .iter()
            .position(|g| g.contains(&me))
            .ok_or_else(|| invalid(&"rank not in any group"))?;
        // Hierarchical layout (§6, MPP's): member m of group j must be fine rank m·k + j.
        let shape = if hierarchical {
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
        // Group communicator ordered like the group's rank list.
        let key = groups_w[my_group]
            .iter()
            .position(|&r| r == me)
            .ok_or_else(|| invalid(&"rank not in its group"))?;
        Ok(Self {
            groups: groups_w,
            my_group,
            key,
            shape,
        })
    }
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
