//! The operator and preconditioner traits (DESIGN.md, "Style").

/// A linear operator applied to blocks of vectors into caller-owned outputs.
///
/// Implementations size their scratch once at construction; `apply_block` does
/// not allocate. Distributed operators hold their communicator and halo buffers.
pub trait Operator {
    /// Local length of input and output vectors.
    fn nrows(&self) -> usize;
    /// `y = A x` for `k` column-major vectors (`x.len() == y.len() == nrows()*k`).
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize);
    /// `y = A x` for one vector.
    fn apply(&self, x: &[f64], y: &mut [f64]) {
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

/// A preconditioner `z = M^{-1} r` applied to blocks of vectors.
pub trait Preconditioner {
    /// Local length of vectors.
    fn nrows(&self) -> usize;
    /// `z = M^{-1} r` for `k` column-major vectors.
    fn apply_block(&self, r: &[f64], z: &mut [f64], k: usize);
    /// `z = M^{-1} r` for one vector.
    fn apply(&self, r: &[f64], z: &mut [f64]) {
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
    fn apply_block_shifted(&self, r: &[f64], z: &mut [f64], k: usize, shifts: &[f64]) {
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

impl<T: Operator + ?Sized> Operator for &T {
    fn nrows(&self) -> usize {
        (**self).nrows()
    }
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        (**self).apply_block(x, y, k)
    }
    fn work_per_vector(&self) -> f64 {
        (**self).work_per_vector()
    }
}

impl<T: Preconditioner + ?Sized> Preconditioner for &T {
    fn nrows(&self) -> usize {
        (**self).nrows()
    }
    fn apply_block(&self, r: &[f64], z: &mut [f64], k: usize) {
        (**self).apply_block(r, z, k)
    }
    fn is_identity(&self) -> bool {
        (**self).is_identity()
    }
    fn apply_block_shifted(&self, r: &[f64], z: &mut [f64], k: usize, shifts: &[f64]) {
        (**self).apply_block_shifted(r, z, k, shifts)
    }
    fn work_per_vector(&self) -> f64 {
        (**self).work_per_vector()
    }
}
