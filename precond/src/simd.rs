//! Run-time choice of instruction set for the solver's own loops.
//!
//! Builds are portable: without `-C target-cpu`, x86_64 code is limited to SSE2,
//! which leaves the plain-Rust loops (SpMV, ILU substitutions, fused vector passes,
//! dots) at two doubles per instruction. [`avx2_dispatch!`](crate::avx2_dispatch)
//! compiles such a loop a second time with AVX2 and FMA enabled and picks that copy
//! at run time when the processor has both ([`avx2_fma`], detected once). Other
//! architectures run the one copy.
//!
//! Results do not depend on the copy taken: Rust never contracts `a * b + c` into a
//! fused multiply-add nor reorders floating-point sums by itself, so the wider
//! instructions compute the same operations in the same order.

/// Whether the processor has AVX2 and FMA (detected on the first call, then cached);
/// always `false` off x86_64.
#[inline]
pub fn avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static DETECTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *DETECTED.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Defines a function that calls an `#[inline(always)]` body, on x86_64 through a
/// copy compiled with `#[target_feature(enable = "avx2,fma")]` when
/// [`simd::avx2_fma`](crate::simd::avx2_fma) says the processor has both, else
/// through the baseline copy.
///
/// ```
/// #[inline(always)]
/// fn sum_body<const K: usize>(x: [&[f64]; K]) -> f64 {
///     x.iter().map(|c| c.iter().sum::<f64>()).sum()
/// }
///
/// precond::avx2_dispatch! {
///     /// The sum of all entries of the `K` slices.
///     fn sum<const K: usize>(x: [&[f64]; K]) -> f64 = sum_body;
/// }
///
/// assert_eq!(sum([&[1.0, 2.0][..], &[3.0][..]]), 6.0);
/// ```
///
/// The body is named by a path (`module::function`, `Type::method` with the
/// receiver as first argument); only `const` generic parameters are supported,
/// and they are passed to the body explicitly. Arguments are plain identifiers.
/// The body must be `#[inline(always)]` (and so should the functions it calls),
/// so that it is compiled inside the AVX2 copy rather than called from it.
#[macro_export]
macro_rules! avx2_dispatch {
    (
        $(#[$attr:meta])*
        $vis:vis fn $name:ident $(<$(const $g:ident : $gt:ty),+ $(,)?>)?
            ($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? = $($body:ident)::+;
    ) => {
        $(#[$attr])*
        #[inline]
        #[allow(clippy::too_many_arguments)]
        $vis fn $name $(<$(const $g: $gt),+>)? ($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx2 $(<$(const $g: $gt),+>)? ($($arg: $ty),*) $(-> $ret)? {
                    $($body)::+ $(::<$($g),+>)? ($($arg),*)
                }
                if $crate::simd::avx2_fma() {
                    // SAFETY: the processor has AVX2 and FMA (checked at run time), the
                    // only requirement of `avx2` beyond its safe signature.
                    return unsafe { avx2 $(::<$($g),+>)? ($($arg),*) };
                }
            }
            $($body)::+ $(::<$($g),+>)? ($($arg),*)
        }
    };
}
