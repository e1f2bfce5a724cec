//! The names of the parameters' choices, as a command line or a config file
//! gives them: the serde names (lowercase) of the unit variants of
//! [`ConvTest`], [`PrecondChoice`], [`InnerSolver`], [`Verify`],
//! [`Extraction`] and [`Balance`], with [`FromStr`] for each.
//!
//! ```
//! use jdmg::names::Named;
//! use jdmg::PrecondChoice;
//!
//! assert_eq!("ilu0".parse::<PrecondChoice>().unwrap(), PrecondChoice::Ilu0);
//! assert_eq!(PrecondChoice::Fsai.name(), "fsai");
//! assert!(PrecondChoice::names().any(|n| n == "spai"));
//! assert!("ilu1".parse::<PrecondChoice>().is_err());
//! ```

use std::str::FromStr;

use thiserror::Error;

use crate::multigrain::Balance;
use crate::params::{ConvTest, Extraction, InnerSolver, PrecondChoice, Verify};

/// An enumeration chosen by name.
pub trait Named: Sized + Copy + 'static {
    /// Every variant with its name, in the order of the documentation.
    const ALL: &'static [(Self, &'static str)];

    /// The name of this variant (its serde name).
    fn name(self) -> &'static str;

    /// Every name.
    fn names() -> impl Iterator<Item = &'static str> {
        Self::ALL.iter().map(|(_, n)| *n)
    }
}

/// A name that is none of an enumeration's.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown {what} {given:?}: expected one of {}", expected.join(", "))]
pub struct UnknownName {
    /// What was being named (e.g. "preconditioner").
    pub what: &'static str,
    /// The name given.
    pub given: String,
    /// The names accepted.
    pub expected: Vec<&'static str>,
}

macro_rules! named {
    ($t:ident, $what:literal { $($v:ident = $name:literal),+ $(,)? }) => {
        impl Named for $t {
            const ALL: &'static [(Self, &'static str)] = &[$(($t::$v, $name)),+];

            fn name(self) -> &'static str {
                // exhaustive: a new variant must be named here
                match self {
                    $($t::$v => $name),+
                }
            }
        }

        impl FromStr for $t {
            type Err = UnknownName;

            fn from_str(s: &str) -> Result<Self, UnknownName> {
                Self::ALL
                    .iter()
                    .find(|(_, n)| *n == s)
                    .map(|(v, _)| *v)
                    .ok_or_else(|| UnknownName {
                        what: $what,
                        given: s.to_string(),
                        expected: Self::names().collect(),
                    })
            }
        }
    };
}

named!(ConvTest, "convergence test" { Norm = "norm", Rel = "rel", Abs = "abs", Sqrt = "sqrt" });
named!(PrecondChoice, "preconditioner" {
    Auto = "auto",
    None = "none",
    Jacobi = "jacobi",
    Ilu0 = "ilu0",
    Ilut = "ilut",
    Spai = "spai",
    Fsai = "fsai",
});
named!(InnerSolver, "inner solver" { Auto = "auto", Bicgstab = "bicgstab", Qmrs = "qmrs" });
named!(Verify, "verification" { Auto = "auto", Always = "always", Never = "never" });
named!(Balance, "balancing" { None = "none", Fastest = "fastest", Slowest = "slowest" });
named!(Extraction, "extraction" { Auto = "auto", Ritz = "ritz", Harmonic = "harmonic" });

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name is the variant's serde name and parses back to it.
    fn check<T: Named + FromStr + serde::Serialize + PartialEq + std::fmt::Debug>() {
        for &(v, n) in T::ALL {
            assert_eq!(v.name(), n);
            assert_eq!(serde_json::to_value(v).unwrap(), n);
            assert_eq!(n.parse::<T>().ok(), Some(v));
        }
        assert!("Norm-ish".parse::<T>().is_err());
    }

    #[test]
    fn names_are_the_serde_names() {
        check::<ConvTest>();
        check::<PrecondChoice>();
        check::<InnerSolver>();
        check::<Verify>();
        check::<Balance>();
        check::<Extraction>();
        let e = "x".parse::<Verify>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown verification \"x\": expected one of auto, always, never"
        );
    }
}
