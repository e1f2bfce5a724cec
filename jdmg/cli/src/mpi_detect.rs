//! Is this process one rank of an MPI job? Launchers leave their mark in the
//! environment: OpenMPI (`OMPI_COMM_WORLD_SIZE`), MPICH and Intel MPI through
//! PMI (`PMI_SIZE`, `PMI_RANK`) or PMIx (`PMIX_RANK`), MPICH's Hydra
//! (`MPI_LOCALNRANKS`), and Slurm's `srun` (`SLURM_PROCID` with
//! `SLURM_NTASKS` > 1; a lone `srun` task or a batch script is not an MPI job).

/// The launcher found in the environment and the job size it announces
/// (`None` when the launcher does not say).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launcher {
    /// The variable that revealed it.
    pub evidence: &'static str,
    /// Processes in the job, when known.
    pub size: Option<usize>,
}

/// The MPI launcher of this process, read through `var` (the environment in
/// [`detect`]).
pub fn detect_with(var: impl Fn(&str) -> Option<String>) -> Option<Launcher> {
    let num = |k: &str| var(k).and_then(|v| v.trim().parse::<usize>().ok());
    if var("OMPI_COMM_WORLD_SIZE").is_some() {
        return Some(Launcher {
            evidence: "OMPI_COMM_WORLD_SIZE",
            size: num("OMPI_COMM_WORLD_SIZE"),
        });
    }
    for k in ["PMI_SIZE", "PMI_RANK", "PMIX_RANK", "MPI_LOCALNRANKS"] {
        if var(k).is_some() {
            return Some(Launcher {
                evidence: k,
                size: num("PMI_SIZE"),
            });
        }
    }
    match (var("SLURM_PROCID"), num("SLURM_NTASKS")) {
        (Some(_), Some(n)) if n > 1 => Some(Launcher {
            evidence: "SLURM_PROCID",
            size: Some(n),
        }),
        _ => None,
    }
}

/// [`detect_with`] on the process environment.
pub fn detect() -> Option<Launcher> {
    detect_with(|k| std::env::var(k).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(a, _)| *a == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn launchers() {
        assert_eq!(detect_with(env(&[])), None);
        let o = detect_with(env(&[("OMPI_COMM_WORLD_SIZE", "4")])).unwrap();
        assert_eq!(o.size, Some(4));
        let m = detect_with(env(&[("PMI_RANK", "1"), ("PMI_SIZE", "8")])).unwrap();
        assert_eq!((m.evidence, m.size), ("PMI_SIZE", Some(8)));
        assert!(detect_with(env(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "1")])).is_none());
        assert!(detect_with(env(&[("SLURM_PROCID", "0")])).is_none());
        let s = detect_with(env(&[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "16")])).unwrap();
        assert_eq!(s.size, Some(16));
    }
}
