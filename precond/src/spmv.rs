//! Shared-memory CSR SpMV and block SpMV (rayon, explicit thread count).
