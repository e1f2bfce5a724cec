//! Preconditioners: Jacobi, ILU(0), ILUT(p,tau), SPAI/FSAI, block-Jacobi.
