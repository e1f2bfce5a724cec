//! The report of one solve, as `jdmg solve --json` prints it and as harnesses
//! (bench's `grid`) read it back: a serde struct whose JSON keys are the
//! command's.

use serde::{Deserialize, Deserializer, Serialize};

use crate::multigrain::{Balance, MultigrainStats};
use crate::params::JdParams;
use crate::solution::{Outcome, Solution, Stats};

/// How a solve ran over several processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunMode {
    /// Fine grain: the rows of A and of every vector split over all processes.
    Fine,
    /// Solve groups ([`crate::solve_multigrain`]).
    Multigrain,
}

/// Where a resumed solve started: the checkpoint's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumedFrom {
    /// Outer iterations done before the checkpoint.
    pub outer_iterations: usize,
    /// Matvecs spent before the checkpoint.
    pub matvecs: u64,
}

/// One solve's results and figures: the object `jdmg solve --json` prints.
/// The optional fields are absent from the JSON when `None`: `mode` and the
/// imbalance are those of runs over several processes, `groups`, `balance`
/// and `multigrain` of solve groups, `resumed_from` of resumed solves.
///
/// Printed with [`SolveReport::to_json`] (keys in alphabetical order at every
/// level); read back with serde_json, where a `null` number (JSON has no NaN)
/// of the top-level figures reads as NaN.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SolveReport {
    /// The matrix: its file, or `generated SPEC`.
    pub source: String,
    /// Dimension of the matrix.
    pub n: usize,
    /// Stored entries of the matrix.
    pub nnz: usize,
    /// Eigenpairs asked for.
    pub nev: usize,
    /// Eigenvalues (or estimates, see `converged_each`), in target order.
    #[serde(deserialize_with = "floats_or_nan")]
    pub eigenvalues: Vec<f64>,
    /// True residual norms ‖Ax − λx‖.
    #[serde(deserialize_with = "floats_or_nan")]
    pub residual_norms: Vec<f64>,
    /// Whether the solve finished with all `nev` pairs converged.
    pub converged: bool,
    /// How the solve ended.
    #[serde(default)]
    pub outcome: Outcome,
    /// Whether each pair passed the convergence test.
    pub converged_each: Vec<bool>,
    /// Matvecs (`stats.matvecs`).
    pub matvecs: u64,
    /// Outer iterations (`stats.outer_iterations`).
    pub outer_iterations: usize,
    /// Seconds of the solve (`stats.wall_seconds`).
    #[serde(deserialize_with = "float_or_nan")]
    pub wall_seconds: f64,
    /// Processes (or thread ranks) of the solve.
    pub nprocs: usize,
    /// The parameters as given (before the solver's defaults).
    pub params: JdParams,
    /// Counters and timings.
    pub stats: Stats,
    /// Fine grain or solve groups; absent for a single process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<RunMode>,
    /// The solve groups' ranks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<Vec<usize>>>,
    /// The balancing of the solve groups' correction phases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balance: Option<Balance>,
    /// The solve groups' figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multigrain: Option<MultigrainStats>,
    /// The §4 imbalance of the fine-grain collectives, percent (with solve
    /// groups, plus the waits in the all-to-all groups:
    /// [`MultigrainStats::imbalance_percent`]); `null` in JSON when not finite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imbalance_percent: Option<f64>,
    /// The tracer's report behind `imbalance_percent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imbalance: Option<lblib::ImbalanceReport>,
    /// The checkpoint a resumed solve started from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_from: Option<ResumedFrom>,
}

impl SolveReport {
    /// The report of `sol`, a solution of the `n` × `n` matrix `source` with
    /// `nnz` entries on `nprocs` processes with `params`, whatever its
    /// outcome. The optional fields are `None`.
    pub fn new(
        source: impl Into<String>,
        n: usize,
        nnz: usize,
        nprocs: usize,
        params: &JdParams,
        sol: &Solution,
    ) -> Self {
        // an interval solve wants its count by inertia, not nev
        let wanted = sol.stats.interval.map_or(params.problem.nev, |iv| iv.count);
        let converged = sol.is_converged()
            && sol.converged.iter().all(|&c| c)
            && sol.eigenvalues.len() == wanted;
        Self {
            source: source.into(),
            n,
            nnz,
            nev: params.problem.nev,
            eigenvalues: sol.eigenvalues.clone(),
            residual_norms: sol.residual_norms.clone(),
            converged,
            outcome: sol.outcome,
            converged_each: sol.converged.clone(),
            matvecs: sol.stats.matvecs,
            outer_iterations: sol.stats.outer_iterations,
            wall_seconds: sol.stats.wall_seconds,
            nprocs,
            params: params.clone(),
            stats: sol.stats.clone(),
            mode: None,
            groups: None,
            balance: None,
            multigrain: None,
            imbalance_percent: None,
            imbalance: None,
            resumed_from: None,
        }
    }

    /// The report as one line of JSON, keys in alphabetical order at every
    /// level (non-finite numbers are `null`).
    pub fn to_json(&self) -> String {
        serde_json::to_value(self)
            .map(|v| v.to_string())
            .unwrap_or_default()
    }
}

/// A number, or NaN for `null` (how JSON writes non-finite numbers).
fn float_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Numbers, NaN for each `null`.
fn floats_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    let v = Vec::<Option<f64>>::deserialize(d)?;
    Ok(v.into_iter().map(|x| x.unwrap_or(f64::NAN)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::ProblemSettings;

    fn solution() -> Solution {
        Solution {
            eigenvalues: vec![1.0, 2.0],
            outcome: Outcome::BudgetSpent,
            residual_norms: vec![1e-9, f64::NAN],
            converged: vec![true, false],
            stats: Stats {
                matvecs: 40,
                outer_iterations: 3,
                wall_seconds: 0.5,
                ..Stats::default()
            },
            ..Solution::default()
        }
    }

    #[test]
    fn json_round_trip_keeps_keys_and_reads_null_as_nan() {
        let params = JdParams {
            problem: ProblemSettings {
                nev: 2,
                ..Default::default()
            },
            ..JdParams::default()
        };
        let mut r = SolveReport::new("generated lap3d:4", 64, 288, 2, &params, &solution());
        assert!(!r.converged);
        assert_eq!(r.outcome, Outcome::BudgetSpent);
        r.mode = Some(RunMode::Fine);
        r.imbalance_percent = Some(f64::NAN);
        let text = r.to_json();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "converged",
                "converged_each",
                "eigenvalues",
                "imbalance_percent",
                "matvecs",
                "mode",
                "n",
                "nev",
                "nnz",
                "nprocs",
                "outcome",
                "outer_iterations",
                "params",
                "residual_norms",
                "source",
                "stats",
                "wall_seconds"
            ]
        );
        assert_eq!(v["mode"], "fine");
        assert_eq!(v["outcome"], "budget_spent");
        let back: SolveReport = serde_json::from_str(&text).unwrap();
        assert!(back.residual_norms[1].is_nan());
        assert_eq!(back.imbalance_percent, None);
        assert_eq!(back.eigenvalues, r.eigenvalues);
        assert_eq!(back.stats, r.stats);
        assert_eq!(back.params, r.params);
        assert_eq!(back.outcome, Outcome::BudgetSpent);
    }
}
