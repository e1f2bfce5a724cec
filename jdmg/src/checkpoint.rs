//! Checkpoint and restart of a solve (issue #13).
//!
//! A [`Checkpoint`] is the state of one process at the top of an outer
//! iteration: the locked eigenpairs, the basis V, W = AV and the projected
//! matrix H = VᵀAV, the previous Ritz directions kept by the GD+k restart, the
//! new block about to enter the basis, the counters ([`Stats`]) and the
//! position in the stream of random start vectors. A solve resumed from it
//! ([`crate::Solver::resume`]) takes the same
//! steps as the uninterrupted solve would have: the same eigenvalues, and the
//! matvecs already spent are not spent again.
//!
//! A solve writes checkpoints through a [`CheckpointSink`], asked at the top
//! of every outer iteration whether to take one now (every `--checkpoint-every`
//! seconds in `jdmg solve`) or to take a last one and stop (SIGINT, SIGTERM).
//! Under several processes every process saves its own rows; the processes
//! agree on when (one global max per iteration, only when a sink is given).
//!
//! # File format (version [`FORMAT_VERSION`])
//!
//! All integers little-endian:
//!
//! | bytes | content |
//! | --- | --- |
//! | 8 | magic `JDMGCKPT` |
//! | 4 | format version (u32) |
//! | 8 | length L of the metadata (u64) |
//! | L | metadata: JSON (sizes, parameters, counters, exact scalars as bit patterns) |
//! | … | 9 arrays of f64: each a u64 count, then the values (the last holds the \
//! timings and other floats of the metadata, exactly) |
//! | 4 | CRC-32 (IEEE) of every byte before it |
//!
//! Files are written to a temporary name beside the target, synced and renamed
//! ([`Checkpoint::write_atomic`]): a solve killed while writing leaves the
//! previous checkpoint intact.

pub mod set;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use crate::error::CheckpointError;
use crate::params::{JdParams, Target};
use crate::solution::Stats;

/// The 8 bytes every checkpoint file starts with.
pub const MAGIC: [u8; 8] = *b"JDMGCKPT";
/// The checkpoint format this jdmg writes and reads (2: with the operator's
/// fingerprint).
pub const FORMAT_VERSION: u32 = 2;

/// The state of one process's share of a solve at the top of an outer
/// iteration (see the module documentation). Vectors hold this process's
/// `n_local` rows, column-major; values are in the solver's internal scale
/// (`scale`, a power of two, 1 for matrices with ‖A‖ in [1e-100, 1e100]).
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// Global dimension n.
    pub n_global: usize,
    /// Rows of this process.
    pub n_local: usize,
    /// Global index of this process's first row.
    pub row_offset: usize,
    /// Processes sharing the rows.
    pub nprocs: usize,
    /// This process's rank.
    pub rank: usize,
    /// The parameters of the solve (resolved: `maxits` filled in).
    pub params: JdParams,
    /// Resolved block size k.
    pub block: usize,
    /// Resolved maximum basis size.
    pub max_basis: usize,
    /// Internal scale s of the operator.
    pub scale: f64,
    /// Whether the scale was chosen (after the first block product).
    pub scale_decided: bool,
    /// Current ‖A‖ estimate (scaled).
    pub anorm: f64,
    /// The target in scaled units.
    pub target: Target,
    /// Pairs to lock before the next check (nev, or more during verification).
    pub goal: usize,
    /// Outer iteration at which the current verification pass started.
    pub verifying: Option<usize>,
    /// Random start vectors drawn so far (position in the seeded stream).
    pub random_cols: u64,
    /// Basis repairs done while the basis spans the whole space.
    pub full_repairs: usize,
    /// Counters and timings so far.
    pub stats: Stats,
    /// Locked eigenvalues (scaled), in locking order.
    pub locked_values: Vec<f64>,
    /// Their residual norms (scaled).
    pub locked_residuals: Vec<f64>,
    /// Locked eigenvectors, `n_local` × `locked_values.len()`.
    pub locked_vectors: Vec<f64>,
    /// Basis size m.
    pub basis_size: usize,
    /// Basis V, `n_local` × m.
    pub basis: Vec<f64>,
    /// W = AV (scaled operator), `n_local` × m.
    pub av: Vec<f64>,
    /// H = VᵀAV, m × m column-major.
    pub projected: Vec<f64>,
    /// Rows of the previous Ritz coefficients (GD+k).
    pub prev_rows: usize,
    /// Columns of the previous Ritz coefficients.
    pub prev_cols: usize,
    /// Previous Ritz coefficients, `prev_rows` × `prev_cols`.
    pub prev: Vec<f64>,
    /// Columns of the new block about to be orthogonalized into the basis.
    pub new_block: usize,
    /// The new block, `n_local` × `new_block`.
    pub block_vectors: Vec<f64>,
    /// Fingerprint of the (unscaled) operator A: `[uᵀ A r, ‖A r‖²]` for two
    /// fixed pseudo-random vectors r and u of the global rows (the same on
    /// every process, whatever the layout). A resume recomputes it and refuses
    /// a checkpoint of another matrix of the same size.
    pub operator_fingerprint: [f64; 2],
    /// The mass matrix's fingerprint, as `operator_fingerprint`, for a
    /// generalized problem (K x = λ M x); None for a standard one. A resume
    /// without M, with M for a standard problem's checkpoint, or with another
    /// M, is refused.
    pub mass_fingerprint: Option<[f64; 2]>,
    /// Fingerprint of the span of the deflation vectors Y (orthonormalized):
    /// `[uᵀYYᵀr, ‖Yᵀr‖²]` for the vectors r and u of `operator_fingerprint`,
    /// the same for any basis of the span; None without Y. A resume with
    /// vectors of another span is refused (the count alone is not enough).
    pub deflation_fingerprint: Option<[f64; 2]>,
    /// σ of a shift-and-invert solve ([`crate::Solver::shift_invert`]: the
    /// state is that of B = (A − σI)⁻¹), None for a solve on A itself. A resume
    /// with another σ or another transformation is refused.
    pub shift_invert: Option<f64>,
}

/// The metadata part of the file; exact scalars are kept as bit patterns
/// (JSON number parsing need not round-trip every f64).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Meta {
    n_global: usize,
    n_local: usize,
    row_offset: usize,
    nprocs: usize,
    rank: usize,
    params: JdParams,
    params_sigma_bits: Option<u64>,
    params_anorm_bits: Option<u64>,
    block: usize,
    max_basis: usize,
    scale_bits: u64,
    scale_decided: bool,
    anorm_bits: u64,
    target: Target,
    target_sigma_bits: Option<u64>,
    goal: usize,
    verifying: Option<usize>,
    random_cols: u64,
    full_repairs: usize,
    stats: Stats,
    basis_size: usize,
    prev_rows: usize,
    prev_cols: usize,
    new_block: usize,
    /// Bit patterns of `Checkpoint::mass_fingerprint` (absent: no M).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mass_fingerprint_bits: Option<[u64; 2]>,
    /// Bit patterns of `Checkpoint::deflation_fingerprint` (absent: no Y).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deflation_fingerprint_bits: Option<[u64; 2]>,
    /// Bit pattern of `Checkpoint::shift_invert` (absent: no transformation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shift_invert_bits: Option<u64>,
}

/// CRC-32 (IEEE) of `bytes`.
fn crc(bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(bytes);
    h.finalize()
}

/// Reads little-endian fields of a byte slice, failing with `Malformed`.
struct Reader<'b> {
    b: &'b [u8],
    at: usize,
}

impl<'b> Reader<'b> {
    fn take(&mut self, len: usize, what: &str) -> Result<&'b [u8], CheckpointError> {
        let end = self.at.checked_add(len).filter(|&e| e <= self.b.len());
        let Some(end) = end else {
            return Err(CheckpointError::Malformed(format!(
                "{what}: {len} bytes announced, {} left",
                self.b.len() - self.at
            )));
        };
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u64(&mut self, what: &str) -> Result<u64, CheckpointError> {
        let s = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }
    fn f64s(&mut self, what: &str) -> Result<Vec<f64>, CheckpointError> {
        let count = self.u64(what)?;
        let len = usize::try_from(count)
            .ok()
            .and_then(|c| c.checked_mul(8))
            .ok_or_else(|| CheckpointError::Malformed(format!("{what}: {count} values")))?;
        let s = self.take(len, what)?;
        Ok(s.chunks_exact(8)
            .map(|c| {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                f64::from_le_bytes(a)
            })
            .collect())
    }
}

fn put_f64s(out: &mut Vec<u8>, v: &[f64]) {
    out.extend_from_slice(&(v.len() as u64).to_le_bytes());
    out.reserve(8 * v.len());
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

impl Checkpoint {
    /// The file contents (see the module documentation for the layout).
    pub fn to_bytes(&self) -> Vec<u8> {
        let sigma = match self.target {
            Target::Closest(s) => Some(s.to_bits()),
            _ => None,
        };
        let meta = Meta {
            n_global: self.n_global,
            n_local: self.n_local,
            row_offset: self.row_offset,
            nprocs: self.nprocs,
            rank: self.rank,
            params: self.params.clone(),
            params_sigma_bits: match self.params.problem.target {
                Target::Closest(s) => Some(s.to_bits()),
                _ => None,
            },
            params_anorm_bits: self.params.problem.anorm.map(f64::to_bits),
            block: self.block,
            max_basis: self.max_basis,
            scale_bits: self.scale.to_bits(),
            scale_decided: self.scale_decided,
            anorm_bits: self.anorm.to_bits(),
            target: self.target,
            target_sigma_bits: sigma,
            goal: self.goal,
            verifying: self.verifying,
            random_cols: self.random_cols,
            full_repairs: self.full_repairs,
            stats: self.stats.clone(),
            basis_size: self.basis_size,
            prev_rows: self.prev_rows,
            prev_cols: self.prev_cols,
            new_block: self.new_block,
            mass_fingerprint_bits: self.mass_fingerprint.map(|f| f.map(f64::to_bits)),
            deflation_fingerprint_bits: self.deflation_fingerprint.map(|f| f.map(f64::to_bits)),
            shift_invert_bits: self.shift_invert.map(f64::to_bits),
        };
        // Serializing plain structs of numbers, strings and enums cannot fail;
        // a non-finite float (refused by JSON) would only come from a Stats
        // timing, which is finite.
        let json = serde_json::to_vec(&meta).unwrap_or_default();
        let scalars = self.scalars();
        let arrays: [&[f64]; 9] = [
            &self.locked_values,
            &self.locked_residuals,
            &self.locked_vectors,
            &self.basis,
            &self.av,
            &self.projected,
            &self.prev,
            &self.block_vectors,
            &scalars,
        ];
        let payload: usize = arrays.iter().map(|a| 8 + 8 * a.len()).sum();
        let mut out = Vec::with_capacity(24 + json.len() + payload + 4);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(json.len() as u64).to_le_bytes());
        out.extend_from_slice(&json);
        for a in arrays {
            put_f64s(&mut out, a);
        }
        let c = crc(&out);
        out.extend_from_slice(&c.to_le_bytes());
        out
    }

    /// Decodes file contents written by [`Checkpoint::to_bytes`].
    ///
    /// # Errors
    /// `BadMagic` when the data does not start with [`MAGIC`], `Version` for
    /// another format version, `Checksum` when the CRC-32 does not match (a
    /// flipped or missing byte), `Malformed` when the content does not decode
    /// or its array sizes disagree with its dimensions.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, CheckpointError> {
        if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
            return Err(CheckpointError::BadMagic);
        }
        if bytes.len() < 24 {
            return Err(CheckpointError::Malformed(format!(
                "{} bytes: truncated header",
                bytes.len()
            )));
        }
        let mut v = [0u8; 4];
        v.copy_from_slice(&bytes[8..12]);
        let found = u32::from_le_bytes(v);
        if found != FORMAT_VERSION {
            return Err(CheckpointError::Version {
                found,
                expected: FORMAT_VERSION,
            });
        }
        let (body, tail) = bytes.split_at(bytes.len() - 4);
        v.copy_from_slice(tail);
        let stored = u32::from_le_bytes(v);
        let computed = crc(body);
        if stored != computed {
            return Err(CheckpointError::Checksum { stored, computed });
        }
        let mut r = Reader { b: body, at: 12 };
        let len = r.u64("metadata length")?;
        let len = usize::try_from(len)
            .map_err(|_| CheckpointError::Malformed(format!("metadata of {len} bytes")))?;
        let json = r.take(len, "metadata")?;
        let meta: Meta = serde_json::from_slice(json)
            .map_err(|e| CheckpointError::Malformed(format!("metadata: {e}")))?;
        let locked_values = r.f64s("locked values")?;
        let locked_residuals = r.f64s("locked residuals")?;
        let locked_vectors = r.f64s("locked vectors")?;
        let basis = r.f64s("basis")?;
        let av = r.f64s("AV")?;
        let projected = r.f64s("projected matrix")?;
        let prev = r.f64s("previous Ritz coefficients")?;
        let block_vectors = r.f64s("new block")?;
        let scalars = r.f64s("scalars")?;
        if r.at != body.len() {
            return Err(CheckpointError::Malformed(format!(
                "{} bytes after the last array",
                body.len() - r.at
            )));
        }
        let target = match (meta.target, meta.target_sigma_bits) {
            (Target::Closest(_), Some(b)) => Target::Closest(f64::from_bits(b)),
            (t, _) => t,
        };
        let mut params = meta.params;
        if let (Target::Closest(_), Some(b)) = (params.problem.target, meta.params_sigma_bits) {
            params.problem.target = Target::Closest(f64::from_bits(b));
        }
        if let (Some(_), Some(b)) = (params.problem.anorm, meta.params_anorm_bits) {
            params.problem.anorm = Some(f64::from_bits(b));
        }
        let mut ck = Checkpoint {
            n_global: meta.n_global,
            n_local: meta.n_local,
            row_offset: meta.row_offset,
            nprocs: meta.nprocs,
            rank: meta.rank,
            params,
            block: meta.block,
            max_basis: meta.max_basis,
            scale: f64::from_bits(meta.scale_bits),
            scale_decided: meta.scale_decided,
            anorm: f64::from_bits(meta.anorm_bits),
            target,
            goal: meta.goal,
            verifying: meta.verifying,
            random_cols: meta.random_cols,
            full_repairs: meta.full_repairs,
            stats: meta.stats,
            locked_values,
            locked_residuals,
            locked_vectors,
            basis_size: meta.basis_size,
            basis,
            av,
            projected,
            prev_rows: meta.prev_rows,
            prev_cols: meta.prev_cols,
            prev,
            new_block: meta.new_block,
            block_vectors,
            operator_fingerprint: [f64::NAN; 2],
            mass_fingerprint: meta.mass_fingerprint_bits.map(|b| b.map(f64::from_bits)),
            deflation_fingerprint: meta
                .deflation_fingerprint_bits
                .map(|b| b.map(f64::from_bits)),
            shift_invert: meta.shift_invert_bits.map(f64::from_bits),
        };
        ck.set_scalars(&scalars)?;
        ck.check_shapes()?;
        Ok(ck)
    }

    /// The floats of the metadata that JSON might round (timings, tolerances),
    /// stored exactly in the last array; NaN for an absent value.
    fn scalars(&self) -> Vec<f64> {
        let s = &self.stats;
        let p = &self.params;
        let mut v = vec![
            s.projection_seconds,
            s.correction_seconds,
            s.setup_seconds,
            s.wall_seconds,
            s.anorm_estimate,
            s.scale,
            p.problem.tol,
            p.preconditioner.ilut_drop,
            p.preconditioner.shift.unwrap_or(f64::NAN),
            match p.correction.stop {
                crate::params::InnerStop::Time { seconds } => seconds,
                _ => f64::NAN,
            },
            self.operator_fingerprint[0],
            self.operator_fingerprint[1],
            s.spmv_seconds,
            s.precond_seconds,
            s.dense_seconds,
        ];
        v.extend(s.phases.values());
        v
    }

    /// Puts back the floats of [`Checkpoint::scalars`] (15 from files written
    /// before `Stats::phases`, whose step times then stay as the JSON had them).
    ///
    /// # Errors
    /// `Malformed` when `v` has the wrong length.
    fn set_scalars(&mut self, v: &[f64]) -> Result<(), CheckpointError> {
        let (v, phases) = match v.len() {
            21 => v.split_at(15),
            _ => (v, &[][..]),
        };
        let &[proj, corr, setup, wall, anorm_est, scale, tol, drop, shift, secs, fp0, fp1, spmv, prec, dense] =
            v
        else {
            return Err(CheckpointError::Malformed(format!(
                "{} scalars, expected 21 (or 15)",
                v.len()
            )));
        };
        if let Ok(ph) = <[f64; 6]>::try_from(phases) {
            self.stats.phases = crate::solution::PhaseSeconds::from_values(ph);
        }
        self.stats.spmv_seconds = spmv;
        self.stats.precond_seconds = prec;
        self.stats.dense_seconds = dense;
        let s = &mut self.stats;
        s.projection_seconds = proj;
        s.correction_seconds = corr;
        s.setup_seconds = setup;
        s.wall_seconds = wall;
        s.anorm_estimate = anorm_est;
        s.scale = scale;
        let p = &mut self.params;
        p.problem.tol = tol;
        p.preconditioner.ilut_drop = drop;
        if p.preconditioner.shift.is_some() {
            p.preconditioner.shift = Some(shift);
        }
        if let crate::params::InnerStop::Time { seconds } = &mut p.correction.stop {
            *seconds = secs;
        }
        self.operator_fingerprint = [fp0, fp1];
        Ok(())
    }

    /// Checks that every array has the size its dimensions give, and that the
    /// sizes, scale and counters are possible (a file with a valid checksum
    /// but made up contents must not crash the solve).
    ///
    /// # Errors
    /// `Malformed` naming the first array of the wrong size, or the rest.
    fn check_shapes(&self) -> Result<(), CheckpointError> {
        let n = self.n_local;
        let nl = self.locked_values.len();
        let m = self.basis_size;
        let bad = |what: &str, got: usize, want: Option<usize>| {
            if want == Some(got) {
                Ok(())
            } else {
                Err(CheckpointError::Malformed(format!(
                    "{what} holds {got} values, its dimensions give {}",
                    want.map_or("too many".to_string(), |w| w.to_string())
                )))
            }
        };
        bad("locked residuals", self.locked_residuals.len(), Some(nl))?;
        bad(
            "locked vectors",
            self.locked_vectors.len(),
            n.checked_mul(nl),
        )?;
        bad("basis", self.basis.len(), n.checked_mul(m))?;
        bad("AV", self.av.len(), n.checked_mul(m))?;
        bad("projected matrix", self.projected.len(), m.checked_mul(m))?;
        bad(
            "previous Ritz coefficients",
            self.prev.len(),
            self.prev_rows.checked_mul(self.prev_cols),
        )?;
        bad(
            "new block",
            self.block_vectors.len(),
            n.checked_mul(self.new_block),
        )?;
        let sane = self.nprocs >= 1
            && self.rank < self.nprocs
            && self.n_local <= self.n_global
            && self
                .row_offset
                .checked_add(self.n_local)
                .is_some_and(|e| e <= self.n_global)
            && self.block >= 1
            && m <= self.max_basis
            && self.new_block <= self.block
            && self.prev_cols <= self.block
            && self.prev_rows <= self.max_basis
            && nl <= self.n_global
            && self.scale.is_finite()
            && self.scale > 0.0
            && self.anorm.is_finite()
            && self.anorm >= 0.0
            && match self.target {
                Target::Closest(s) => s.is_finite(),
                _ => true,
            };
        // Counters far below overflow (the solve adds to them).
        const BIG: u64 = 1 << 52;
        let st = &self.stats;
        let counters = [
            st.matvecs,
            st.inner_steps,
            st.precond_applications,
            st.global_sums,
            st.outer_iterations as u64,
            st.restarts as u64,
            self.random_cols,
            self.goal as u64,
            self.verifying.unwrap_or(0) as u64,
            self.full_repairs as u64,
            st.replaced_vectors as u64,
            st.verification_passes as u64,
            st.missed_copies as u64,
            st.locked as u64,
            st.maxits as u64,
            st.inner_stops.steps,
            st.inner_stops.linear,
            st.inner_stops.stagnation,
            st.inner_stops.ritz,
            st.inner_stops.converged,
            st.inner_stops.reduced,
            st.inner_stops.breakdown,
        ];
        let sane = sane
            && counters.iter().all(|&c| c < BIG)
            && self.locked_values.iter().all(|v| v.is_finite())
            && self.locked_residuals.iter().all(|v| v.is_finite())
            && self.operator_fingerprint.iter().all(|v| v.is_finite());
        if !sane {
            return Err(CheckpointError::Malformed(
                "inconsistent dimensions (ranks, rows, block or basis sizes), scale or counters"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Writes the checkpoint to `path` atomically: to a temporary file beside
    /// it, synced, then renamed over `path` (the previous checkpoint stays
    /// whole until the rename).
    ///
    /// # Errors
    /// `Io` with the path when the file cannot be written.
    pub fn write_atomic(&self, path: &Path) -> Result<(), CheckpointError> {
        let bytes = self.to_bytes();
        matrices::mm::write_file_atomic(path, |w| std::io::Write::write_all(w, &bytes)).map_err(
            |source| CheckpointError::Io {
                path: path.to_path_buf(),
                source,
            },
        )
    }

    /// Reads a checkpoint written by [`Checkpoint::write_atomic`].
    ///
    /// # Errors
    /// `Io` when the file cannot be read, else as [`Checkpoint::from_bytes`].
    pub fn read(path: &Path) -> Result<Self, CheckpointError> {
        let bytes = std::fs::read(path).map_err(|source| CheckpointError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_bytes(&bytes)
    }

    /// Checks that this checkpoint can resume a solve of global dimension
    /// `n_global` on `nprocs` processes, this one being `rank` with `n_local`
    /// rows from `row_offset`, with `params`. Parameters that shape the
    /// state must be equal (nev, block and basis sizes, target, seed, locking,
    /// inner solver, verification, extraction); the tolerance, the budgets, the inner step
    /// cap and the preconditioner may change.
    ///
    /// # Errors
    /// `Mismatch` naming the first difference.
    pub fn check_compatible(
        &self,
        n_global: usize,
        nprocs: usize,
        rank: usize,
        n_local: usize,
        row_offset: usize,
        params: &JdParams,
    ) -> Result<(), CheckpointError> {
        fn differ<T: std::fmt::Debug + PartialEq>(
            what: &str,
            ck: T,
            cur: T,
        ) -> Result<(), CheckpointError> {
            if ck == cur {
                Ok(())
            } else {
                Err(CheckpointError::Mismatch {
                    what: what.to_string(),
                    checkpoint: format!("{ck:?}"),
                    current: format!("{cur:?}"),
                })
            }
        }
        differ("the matrix dimension n", self.n_global, n_global)?;
        differ("the number of processes", self.nprocs, nprocs)?;
        differ("the rank", self.rank, rank)?;
        differ("this rank's row count", self.n_local, n_local)?;
        differ("this rank's first row", self.row_offset, row_offset)?;
        let p = &self.params;
        differ("nev", p.problem.nev, params.problem.nev)?;
        differ("the target", p.problem.target, params.problem.target)?;
        differ("the seed", p.basis.seed, params.basis.seed)?;
        differ("locking", p.basis.locking, params.basis.locking)?;
        differ(
            "the inner solver",
            p.correction.solver,
            params.correction.solver,
        )?;
        differ("verify", p.problem.verify, params.problem.verify)?;
        differ(
            "restart_keep_previous",
            p.basis.restart_keep_previous,
            params.basis.restart_keep_previous,
        )?;
        differ("the convergence test", p.problem.conv, params.problem.conv)?;
        differ("anorm", p.problem.anorm, params.problem.anorm)?;
        differ(
            "the extraction",
            p.basis.extraction,
            params.basis.extraction,
        )?;
        Ok(())
    }
}

/// What a [`CheckpointSink`] asks for at the top of an outer iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CheckpointRequest {
    /// Go on without a checkpoint.
    Continue,
    /// Take a checkpoint, then go on.
    Save,
    /// Take a checkpoint, then stop: the solve returns the pairs converged so
    /// far with [`crate::Outcome::Stopped`].
    SaveAndStop,
}

/// Receives checkpoints during a solve.
pub trait CheckpointSink {
    /// Asked at the top of every outer iteration but the first (and the first
    /// after a resume) with the counters so far. Under several processes the
    /// largest request of all processes is granted on every one (one global
    /// max per iteration), so time-based answers may differ between processes.
    fn poll(&mut self, stats: &Stats) -> CheckpointRequest;
    /// Receives this process's state; `last` is true when the solve stops
    /// right after (a `SaveAndStop` request or an observer's stop). Errors are
    /// the sink's to report: the solve goes on.
    fn save(&mut self, checkpoint: &Checkpoint, last: bool);
}

/// Checkpointing options of [`crate::Solver::checkpointing`]: both default to
/// none (then the solve is exactly one without checkpoints).
#[derive(Default)]
pub struct Checkpointing<'c> {
    /// Start from this state instead of random vectors. It must be this
    /// process's checkpoint of the same problem, process count and parameters
    /// (see [`Checkpoint::check_compatible`]).
    pub resume: Option<&'c Checkpoint>,
    /// Where to send checkpoints. Collective: give one on every process or on
    /// none.
    pub sink: Option<&'c mut dyn CheckpointSink>,
}

/// The file of `rank` among `nprocs` processes for the checkpoint path
/// `path`: `path` itself on one process, else `path.rank<r>` (e.g.
/// `state.ckpt.rank3`).
pub fn rank_path(path: &Path, rank: usize, nprocs: usize) -> PathBuf {
    if nprocs <= 1 {
        return path.to_path_buf();
    }
    let mut s = path.as_os_str().to_os_string();
    s.push(format!(".rank{rank}"));
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::ProblemSettings;

    fn sample() -> Checkpoint {
        let n = 5;
        Checkpoint {
            n_global: 10,
            n_local: n,
            row_offset: 5,
            nprocs: 2,
            rank: 1,
            params: JdParams {
                problem: ProblemSettings {
                    target: Target::Closest(0.1),
                    ..Default::default()
                },
                ..JdParams::default()
            },
            block: 2,
            max_basis: 6,
            scale: 0.25,
            scale_decided: true,
            anorm: 1.0 / 3.0,
            target: Target::Closest(0.1 / 3.0),
            goal: 4,
            verifying: Some(7),
            random_cols: 9,
            full_repairs: 1,
            stats: Stats {
                matvecs: 42,
                outer_iterations: 8,
                ..Stats::default()
            },
            locked_values: vec![0.1],
            locked_residuals: vec![1e-12],
            locked_vectors: (0..n).map(|i| i as f64 / 7.0).collect(),
            basis_size: 2,
            basis: (0..2 * n).map(|i| (i as f64).sin()).collect(),
            av: (0..2 * n).map(|i| (i as f64).cos()).collect(),
            projected: vec![1.0, 0.5, 0.5, std::f64::consts::PI],
            prev_rows: 2,
            prev_cols: 1,
            prev: vec![0.6, 0.8],
            new_block: 1,
            block_vectors: (0..n).map(|i| -(i as f64).sqrt()).collect(),
            operator_fingerprint: [3.5, 1.0 / 7.0],
            mass_fingerprint: None,
            deflation_fingerprint: Some([0.25, 3.0]),
            shift_invert: Some(0.5),
        }
    }

    #[test]
    fn round_trip_is_exact() {
        let ck = sample();
        let back = Checkpoint::from_bytes(&ck.to_bytes()).unwrap();
        assert_eq!(back, ck);
        assert_eq!(back.anorm.to_bits(), ck.anorm.to_bits());
    }

    #[test]
    fn corruption_is_refused() {
        let bytes = sample().to_bytes();
        for at in [30, bytes.len() / 2, bytes.len() - 20, bytes.len() - 1] {
            let mut b = bytes.clone();
            b[at] ^= 0x10;
            assert!(
                matches!(
                    Checkpoint::from_bytes(&b),
                    Err(CheckpointError::Checksum { .. })
                ),
                "flip at {at}"
            );
        }
        assert!(matches!(
            Checkpoint::from_bytes(&bytes[..bytes.len() - 9]),
            Err(CheckpointError::Checksum { .. })
        ));
        assert!(matches!(
            Checkpoint::from_bytes(b"hello world, not a checkpoint"),
            Err(CheckpointError::BadMagic)
        ));
        let mut b = bytes.clone();
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        assert!(matches!(
            Checkpoint::from_bytes(&b),
            Err(CheckpointError::Version {
                found: 1,
                expected: 2
            })
        ));
    }

    /// Every truncation and every single-byte change of a checkpoint is an
    /// error, never a panic nor a different checkpoint.
    #[test]
    fn every_truncation_and_byte_change_is_an_error() {
        let bytes = sample().to_bytes();
        for len in 0..bytes.len() {
            assert!(
                Checkpoint::from_bytes(&bytes[..len]).is_err(),
                "length {len}"
            );
        }
        for at in 0..bytes.len() {
            for x in [0x01u8, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[at] ^= x;
                assert!(Checkpoint::from_bytes(&b).is_err(), "byte {at} ^ {x:#x}");
            }
        }
    }

    /// A file with a valid checksum but impossible contents is `Malformed`.
    #[test]
    fn made_up_contents_are_refused() {
        let mut ck = sample();
        ck.stats.matvecs = u64::MAX;
        assert!(matches!(
            Checkpoint::from_bytes(&ck.to_bytes()),
            Err(CheckpointError::Malformed(_))
        ));
        let mut ck = sample();
        ck.basis.pop();
        assert!(matches!(
            Checkpoint::from_bytes(&ck.to_bytes()),
            Err(CheckpointError::Malformed(m)) if m.contains("basis")
        ));
        let mut ck = sample();
        ck.rank = 2;
        assert!(matches!(
            Checkpoint::from_bytes(&ck.to_bytes()),
            Err(CheckpointError::Malformed(_))
        ));
    }

    #[test]
    fn rank_paths() {
        let p = Path::new("/tmp/x.ckpt");
        assert_eq!(rank_path(p, 0, 1), p);
        assert_eq!(rank_path(p, 3, 4), Path::new("/tmp/x.ckpt.rank3"));
    }
}
