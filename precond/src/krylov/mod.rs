//! Step-wise Krylov inner solvers: BiCGSTAB, CG, GMRES(m).
