//! Benchmark and experiment harness for jdmg (see `bench/README` sections in the
//! top-level README).
