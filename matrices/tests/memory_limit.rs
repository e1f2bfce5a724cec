//! The reader refuses a declared size that needs more memory than is available,
//! before allocating it. Own test binary: it sets `JDMG_MEMORY_LIMIT`, which
//! every read in the process sees.

use matrices::mm::memory::{read_bytes_needed, MEMORY_LIMIT_ENV};
use matrices::mm::{
    read_header_bytes, read_matrix_market, read_matrix_market_bytes, MmError, MmErrorKind,
};

#[test]
fn declared_size_over_the_memory_limit_is_refused_with_the_figures() {
    // 1 MiB cap: below any machine's available memory, so the cap is the figure
    std::env::set_var(MEMORY_LIMIT_ENV, "1M");
    // five entries, but 4e9 rows: 96 GB of row arrays
    let text = "%%MatrixMarket matrix coordinate real symmetric\n% five entries\n4000000000 4000000000 5\n1 1 1\n2 2 1\n3 3 1\n4 4 1\n5 5 1\n";
    let needed = read_bytes_needed(&read_header_bytes(text.as_bytes()).unwrap());
    assert_eq!(needed, 24 * 4_000_000_001 + 5 * 16 + 10 * 12);
    let want = MmError {
        line: 3,
        kind: MmErrorKind::InsufficientMemory {
            needed,
            available: 1 << 20,
        },
    };
    assert_eq!(read_matrix_market_bytes(text.as_bytes()).unwrap_err(), want);
    let dir = std::env::temp_dir().join(format!("jdmg-memlimit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("big.mtx");
    std::fs::write(&p, text).unwrap();
    let err = read_matrix_market(&p).unwrap_err();
    assert_eq!(err, want);
    assert_eq!(
        err.to_string(),
        "line 3: the declared size needs 89.4 GiB to read, more than the 1.0 MiB available (set JDMG_MEMORY_LIMIT to change the limit)"
    );
    // a small matrix fits under the same cap
    let small = "%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n1 1 2\n2 1 -1\n";
    assert_eq!(
        read_matrix_market_bytes(small.as_bytes())
            .unwrap()
            .matrix
            .nnz(),
        3
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
