//! Fuzz target: the MatrixMarket reader must never panic, and the chunked
//! (parallel) path must agree exactly with the single-chunk path.
#![no_main]

use libfuzzer_sys::fuzz_target;
use matrices::mm::{
    read_dense_array_bytes, read_header_bytes, read_matrix_market_bytes,
    read_matrix_market_bytes_in_chunks,
};

fuzz_target!(|data: &[u8]| {
    // A header may legitimately declare up to 4e9 rows; the nrows-sized
    // arrays then need tens of GB, over libFuzzer's malloc limit, and large
    // ones only slow the fuzzer down. Such inputs are covered by the header
    // parser alone.
    if let Ok(h) = read_header_bytes(data) {
        if h.nrows > 1 << 16 {
            return;
        }
    }
    let one = read_matrix_market_bytes(data);
    for parts in [2, 3, 7] {
        let many = read_matrix_market_bytes_in_chunks(data, parts);
        assert_eq!(one, many, "chunked read ({parts} parts) differs");
    }
    let _ = read_dense_array_bytes(data);
});
