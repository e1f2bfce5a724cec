//! Checks of the factors: backward errors, orthogonality, the serial faer
//! references the distributed factors are compared with, and the solve of
//! `Ax = b` with the factors. Everything here is local to one process and works on
//! whole matrices (gathered with [`super::factor::gather_factors`]).

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::householder::{
    apply_block_householder_sequence_on_the_left_in_place_scratch,
    apply_block_householder_sequence_on_the_left_in_place_with_conj,
    apply_block_householder_sequence_transpose_on_the_left_in_place_with_conj,
};
use faer::linalg::lu::partial_pivoting::factor::{lu_in_place, lu_in_place_scratch};
use faer::linalg::matmul::matmul;
use faer::linalg::qr::no_pivoting::factor::{qr_in_place, qr_in_place_scratch};
use faer::linalg::triangular_solve::{
    solve_unit_lower_triangular_in_place, solve_upper_triangular_in_place,
};
use faer::reborrow::ReborrowMut;
use faer::{Accum, Conj, Mat, MatMut, MatRef, Par};

/// Frobenius norm of a slice.
pub fn frobenius(a: &[f64]) -> f64 {
    a.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// Applies LAPACK transpositions `ipiv` (row `i` swapped with `ipiv[i]`, in
/// order) to the rows of the `n × ncols` column-major `a`.
pub fn apply_row_swaps(a: &mut [f64], n: usize, ipiv: &[usize]) {
    for col in a.chunks_exact_mut(n) {
        for (i, &p) in ipiv.iter().enumerate() {
            col.swap(i, p);
        }
    }
}

/// `‖PA − LU‖_F / ‖A‖_F` for the LU factors `lu` (unit `L` below the diagonal,
/// `U` on and above) and the transpositions `ipiv`, all `n × n` column-major.
pub fn lu_backward_error(a: &[f64], lu: &[f64], ipiv: &[usize], n: usize, par: Par) -> f64 {
    let mut pa = a.to_vec();
    apply_row_swaps(&mut pa, n, ipiv);
    let f = MatRef::from_column_major_slice(lu, n, n);
    let l = Mat::from_fn(n, n, |i, j| match i.cmp(&j) {
        std::cmp::Ordering::Greater => f[(i, j)],
        std::cmp::Ordering::Equal => 1.0,
        std::cmp::Ordering::Less => 0.0,
    });
    let u = Mat::from_fn(n, n, |i, j| if i <= j { f[(i, j)] } else { 0.0 });
    let dst = MatMut::from_column_major_slice_mut(&mut pa, n, n);
    matmul(dst, Accum::Add, &l, &u, -1.0, par);
    frobenius(&pa) / frobenius(a)
}

/// Forms `Q` (`n × n`) from faer's Householder storage `qr` and the `T` factors
/// `t_factors` (`block × n`, faer's `Q_coeff`).
pub fn form_q(qr: &[f64], t_factors: &[f64], n: usize, block: usize, par: Par) -> Mat<f64> {
    let basis = MatRef::from_column_major_slice(qr, n, n);
    let t = MatRef::from_column_major_slice(t_factors, block, n);
    let mut q = Mat::<f64>::identity(n, n);
    let req = apply_block_householder_sequence_on_the_left_in_place_scratch::<f64>(n, block, n);
    let mut mem = MemBuffer::new(req);
    apply_block_householder_sequence_on_the_left_in_place_with_conj(
        basis,
        t,
        Conj::No,
        q.as_mut(),
        par,
        MemStack::new(&mut mem),
    );
    q
}

/// `(‖A − QR‖_F / ‖A‖_F, ‖QᵀQ − I‖_F)` for faer's QR storage.
pub fn qr_errors(
    a: &[f64],
    qr: &[f64],
    t_factors: &[f64],
    n: usize,
    block: usize,
    par: Par,
) -> (f64, f64) {
    let q = form_q(qr, t_factors, n, block, par);
    let f = MatRef::from_column_major_slice(qr, n, n);
    let r = Mat::from_fn(n, n, |i, j| if i <= j { f[(i, j)] } else { 0.0 });
    let mut res = a.to_vec();
    let dst = MatMut::from_column_major_slice_mut(&mut res, n, n);
    matmul(dst, Accum::Add, &q, &r, -1.0, par);
    let back = frobenius(&res) / frobenius(a);
    let mut g = Mat::<f64>::identity(n, n);
    matmul(g.as_mut(), Accum::Add, q.transpose(), &q, -1.0, par);
    let mut orth = 0.0;
    for j in 0..n {
        for i in 0..n {
            orth += g[(i, j)] * g[(i, j)];
        }
    }
    (back, orth.sqrt())
}

/// Serial faer LU with partial pivoting of the `n × n` column-major `a`:
/// returns the factors and the transpositions (LAPACK convention).
pub fn serial_lu(a: &[f64], n: usize, par: Par) -> (Vec<f64>, Vec<usize>) {
    let mut lu = a.to_vec();
    let mut perm = vec![0usize; n];
    let mut perm_inv = vec![0usize; n];
    let mut mem = MemBuffer::new(lu_in_place_scratch::<usize, f64>(
        n,
        n,
        par,
        Default::default(),
    ));
    lu_in_place(
        MatMut::from_column_major_slice_mut(&mut lu, n, n),
        &mut perm,
        &mut perm_inv,
        par,
        MemStack::new(&mut mem),
        Default::default(),
    );
    // perm -> transpositions
    let mut cur: Vec<usize> = (0..n).collect();
    let mut pos: Vec<usize> = (0..n).collect();
    let mut ipiv = vec![0; n];
    for i in 0..n {
        let want = perm[i];
        let j = pos[want];
        ipiv[i] = j;
        let other = cur[i];
        cur.swap(i, j);
        pos[want] = i;
        pos[other] = j;
    }
    (lu, ipiv)
}

/// Serial faer Householder QR of the `n × n` column-major `a` with block size
/// `block`: faer's storage and the `T` factors (`block × n`).
pub fn serial_qr(a: &[f64], n: usize, block: usize, par: Par) -> (Vec<f64>, Vec<f64>) {
    let mut qr = a.to_vec();
    let b = block.min(n).max(1);
    let mut t = vec![0.0; b * n];
    let mut mem = MemBuffer::new(qr_in_place_scratch::<f64>(n, n, b, par, Default::default()));
    qr_in_place(
        MatMut::from_column_major_slice_mut(&mut qr, n, n),
        MatMut::from_column_major_slice_mut(&mut t, b, n),
        par,
        MemStack::new(&mut mem),
        Default::default(),
    );
    (qr, t)
}

/// Solves `Ax = b` with LU factors: `x = U⁻¹ L⁻¹ P b`.
pub fn lu_solve(lu: &[f64], ipiv: &[usize], n: usize, b: &[f64], par: Par) -> Vec<f64> {
    let mut x = b.to_vec();
    apply_row_swaps(&mut x, n, ipiv);
    let f = MatRef::from_column_major_slice(lu, n, n);
    let mut xm = MatMut::from_column_major_slice_mut(&mut x, n, 1);
    solve_unit_lower_triangular_in_place(f, xm.rb_mut(), par);
    solve_upper_triangular_in_place(f, xm, par);
    x
}

/// Solves `Ax = b` with QR factors: `x = R⁻¹ Qᵀ b`.
pub fn qr_solve(
    qr: &[f64],
    t_factors: &[f64],
    n: usize,
    block: usize,
    b: &[f64],
    par: Par,
) -> Vec<f64> {
    let mut x = b.to_vec();
    let basis = MatRef::from_column_major_slice(qr, n, n);
    let t = MatRef::from_column_major_slice(t_factors, block, n);
    let req = apply_block_householder_sequence_on_the_left_in_place_scratch::<f64>(n, block, 1);
    let mut mem = MemBuffer::new(req);
    let mut xm = MatMut::from_column_major_slice_mut(&mut x, n, 1);
    apply_block_householder_sequence_transpose_on_the_left_in_place_with_conj(
        basis,
        t,
        Conj::No,
        xm.rb_mut(),
        par,
        MemStack::new(&mut mem),
    );
    solve_upper_triangular_in_place(basis, xm, par);
    x
}

/// `‖Ax − b‖₂ / (‖A‖_F ‖x‖₂ + ‖b‖₂)`: the normwise backward error of a solve.
pub fn solve_residual(a: &[f64], n: usize, x: &[f64], b: &[f64], par: Par) -> f64 {
    let mut r = b.to_vec();
    let am = MatRef::from_column_major_slice(a, n, n);
    let xm = MatRef::from_column_major_slice(x, n, 1);
    matmul(
        MatMut::from_column_major_slice_mut(&mut r, n, 1),
        Accum::Add,
        am,
        xm,
        -1.0,
        par,
    );
    frobenius(&r) / (frobenius(a) * frobenius(x) + frobenius(b))
}
