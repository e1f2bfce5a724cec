//! The fine↔group all-to-alls of the correction phase (McCombs et al. §6).

use lblib::Comm;
use matrices::partition::Redistribution;

/// Moves columns between the fine layout and solve-group layouts with one
/// all-to-all-v per call. `items[i] = (source column, destination group)`.
///
/// Transfers are in fine-grain (world) rank numbering; the exchange runs on a
/// communicator whose rank `c` is world rank `offset + c`: the world itself
/// (`offset` 0, global scheme) or this rank's all-to-all group (hierarchical
/// scheme, McCombs et al. §6, where every transfer stays inside the group).
pub(super) struct Mover {
    /// fine -> group g, and group g -> fine.
    pub(super) to_group: Vec<Redistribution>,
    pub(super) from_group: Vec<Redistribution>,
    /// This process's world rank.
    pub(super) me: usize,
    /// World rank of rank 0 of the exchange communicator.
    pub(super) offset: usize,
    /// f64 values sent to other ranks so far.
    pub(super) values_sent: u64,
    pub(super) send: Vec<f64>,
    pub(super) recv: Vec<f64>,
    pub(super) send_counts: Vec<usize>,
    pub(super) recv_counts: Vec<usize>,
}

impl Mover {
    /// Fine -> groups: column `i` of `x` (fine local length `nf`) goes to group
    /// `dest[i]`; this rank (in group `me_g`) receives into `y` (group local
    /// length `ng`), in item order among the items for its group.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn scatter<C: Comm + ?Sized>(
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
    pub(super) fn gather<C: Comm + ?Sized>(
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
