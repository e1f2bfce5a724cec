//! jdmg: block Jacobi-Davidson for large sparse symmetric eigenproblems
//! (`seeds/003`, §3), in fine-grain, coarse-grain and multigrain modes.
