//! The operator and preconditioner traits (DESIGN.md, "Style"), over a
//! [`Scalar`]: `f64` (the default) or `c64` for complex Hermitian problems.

use std::fmt::Debug;
use std::ops::{Add, AddAssign, Mul, MulAssign, Neg, Sub, SubAssign};

use faer::c64;

/// The entries of vectors and matrices: `f64`, or `c64` for complex
/// Hermitian problems. Eigenvalues, shifts and norms stay real (`f64`).
pub trait Scalar:
    Copy
    + Send
    + Sync
    + Default
    + PartialEq
    + Debug
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + 'static
{
    /// The complex conjugate (itself for a real number).
    fn conj(self) -> Self;
    /// The real part.
    fn re(self) -> f64;
    /// |x|².
    fn abs2(self) -> f64;
    /// A real number as a scalar.
    fn from_re(x: f64) -> Self;
    /// x · s for a real s.
    fn scale(self, s: f64) -> Self;
}

impl Scalar for f64 {
    #[inline]
    fn conj(self) -> Self {
        self
    }
    #[inline]
    fn re(self) -> f64 {
        self
    }
    #[inline]
    fn abs2(self) -> f64 {
        self * self
    }
    #[inline]
    fn from_re(x: f64) -> Self {
        x
    }
    #[inline]
    fn scale(self, s: f64) -> Self {
        self * s
    }
}

impl Scalar for c64 {
    #[inline]
    fn conj(self) -> Self {
        c64::new(self.re, -self.im)
    }
    #[inline]
    fn re(self) -> f64 {
        self.re
    }
    #[inline]
    fn abs2(self) -> f64 {
        self.re * self.re + self.im * self.im
    }
    #[inline]
    fn from_re(x: f64) -> Self {
        c64::new(x, 0.0)
    }
    #[inline]
    fn scale(self, s: f64) -> Self {
        c64::new(self.re * s, self.im * s)
    }
}

/// ⟨x, y⟩ = Σ conj(xᵢ)·yᵢ over this process's entries.
pub fn dot<T: Scalar>(x: &[T], y: &[T]) -> T {
    x.iter()
        .zip(y)
        .fold(T::default(), |s, (&a, &b)| s + a.conj() * b)
}

/// A linear operator applied to blocks of vectors of `T` (`f64` unless said)
/// into caller-owned outputs.
///
/// Implementations size their scratch once at construction; `apply_block` does
/// not allocate. Distributed operators hold their communicator and halo buffers.
pub trait Operator<T: Scalar = f64> {
    /// Local length of input and output vectors.
    fn nrows(&self) -> usize;
    /// `y = A x` for `k` column-major vectors (`x.len() == y.len() == nrows()*k`).
    fn apply_block(&self, x: &[T], y: &mut [T], k: usize);
    /// `y = A x` for one vector.
    fn apply(&self, x: &[T], y: &mut [T]) {
        self.apply_block(x, y, 1)
    }
    /// The work of one application to one vector, in 8-byte words of memory
    /// read and written (a CSR product: 1.5 per stored entry, a value and a
    /// 4-byte column index, and 2 per row). Solvers that compare methods by
    /// counted work rather than by measured time weigh the products by it.
    /// Default `10·nrows()`: a sparse operator with about five entries a row.
    fn work_per_vector(&self) -> f64 {
        10.0 * self.nrows() as f64
    }
}

/// A preconditioner `z = M^{-1} r` applied to blocks of vectors of `T`
/// (`f64` unless said).
pub trait Preconditioner<T: Scalar = f64> {
    /// Local length of vectors.
    fn nrows(&self) -> usize;
    /// `z = M^{-1} r` for `k` column-major vectors.
    fn apply_block(&self, r: &[T], z: &mut [T], k: usize);
    /// `z = M^{-1} r` for one vector.
    fn apply(&self, r: &[T], z: &mut [T]) {
        self.apply_block(r, z, 1)
    }
    /// Whether `M⁻¹ = I` (then Krylov solvers skip the copies `z = r`). Default false.
    fn is_identity(&self) -> bool {
        false
    }
    /// The work of one application to one vector, in 8-byte words of memory
    /// read and written, as [`Operator::work_per_vector`] (triangular factors:
    /// 1.5 per stored entry and 3 per row). Default `10·nrows()`.
    fn work_per_vector(&self) -> f64 {
        10.0 * self.nrows() as f64
    }
    /// `z = M(σ_j)^{-1} r_j` for `k` column-major vectors, told the shift σ_j of
    /// each column: the eigensolver calls it with the shift of each correction
    /// equation (A − σ_j I), the current Ritz value θ_j (or the target of an
    /// interior solve while the residual is large), in the units of the
    /// operator it was given (PRIMME's `ShiftsForPreconditioner`). A
    /// preconditioner that can follow the shift (e.g. [`crate::preconditioners::Jacobi`]
    /// with [`follow_shifts`](crate::preconditioners::Jacobi::follow_shifts):
    /// `diag(A) − σ_j`) overrides it; the default ignores the shifts and calls
    /// [`Preconditioner::apply_block`]. `shifts.len() == k`.
    fn apply_block_shifted(&self, r: &[T], z: &mut [T], k: usize, shifts: &[f64]) {
        let _ = shifts;
        self.apply_block(r, z, k)
    }
}

/// `M = I`: no preconditioning.
#[derive(Debug, Clone, Copy)]
pub struct IdentityPreconditioner {
    pub n: usize,
}

impl Preconditioner for IdentityPreconditioner {
    fn nrows(&self) -> usize {
        self.n
    }
    fn apply_block(&self, r: &[f64], z: &mut [f64], _k: usize) {
        z.copy_from_slice(r);
    }
    fn is_identity(&self) -> bool {
        true
    }
    fn work_per_vector(&self) -> f64 {
        0.0
    }
}

impl<S: Scalar, T: Operator<S> + ?Sized> Operator<S> for &T {
    fn nrows(&self) -> usize {
        Operator::<S>::nrows(&**self)
    }
    fn apply_block(&self, x: &[S], y: &mut [S], k: usize) {
        (**self).apply_block(x, y, k)
    }
    fn work_per_vector(&self) -> f64 {
        Operator::<S>::work_per_vector(&**self)
    }
}

impl<S: Scalar, T: Preconditioner<S> + ?Sized> Preconditioner<S> for &T {
    fn nrows(&self) -> usize {
        Preconditioner::<S>::nrows(&**self)
    }
    fn apply_block(&self, r: &[S], z: &mut [S], k: usize) {
        (**self).apply_block(r, z, k)
    }
    fn is_identity(&self) -> bool {
        Preconditioner::<S>::is_identity(&**self)
    }
    fn apply_block_shifted(&self, r: &[S], z: &mut [S], k: usize, shifts: &[f64]) {
        (**self).apply_block_shifted(r, z, k, shifts)
    }
    fn work_per_vector(&self) -> f64 {
        Preconditioner::<S>::work_per_vector(&**self)
    }
}
