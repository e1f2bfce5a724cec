//! Distributed SpMV over `lblib::Comm` using halo plans from `matrices::partition`.
