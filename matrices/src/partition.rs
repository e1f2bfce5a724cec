//! Row partitioning and halo (ghost) plans for distributed SpMV and solve groups.
