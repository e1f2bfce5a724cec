//! The bad-input corpus `testdata/bad/`: every file is rejected with the exact
//! error kind and line, and every file in the directory is covered.

use matrices::mm::MmErrorKind::{self, *};
use matrices::mm::{read_dense_array_bytes, read_matrix_market, read_matrix_market_bytes, MmError};

fn s(x: &str) -> String {
    x.to_string()
}

fn expected() -> Vec<(&'static str, usize, MmErrorKind)> {
    vec![
        ("empty.mtx", 0, Empty),
        ("whitespace_only.mtx", 0, Empty),
        ("no_banner.mtx", 1, MissingBanner { found: s("3 3 1") }),
        (
            "banner_typo.mtx",
            1,
            MissingBanner {
                found: s("%%MatrixMarkt matrix coordinate real general"),
            },
        ),
        (
            "banner_short.mtx",
            1,
            UnknownBanner {
                reason: s(
                    "expected 4 words after %%MatrixMarket (object format field symmetry), found 3",
                ),
            },
        ),
        (
            "unknown_format.mtx",
            1,
            UnknownBanner {
                reason: s("unknown format \"sparse\""),
            },
        ),
        (
            "unknown_field.mtx",
            1,
            UnknownBanner {
                reason: s("unknown field \"float\""),
            },
        ),
        (
            "complex_field.mtx",
            1,
            Unsupported {
                what: s("complex field in a real reader (read it with \
                         matrices::mm::read_complex_matrix_market)"),
            },
        ),
        (
            "hermitian.mtx",
            1,
            Unsupported {
                what: s("hermitian symmetry with a real field (write it as symmetric)"),
            },
        ),
        (
            "vector_object.mtx",
            1,
            Unsupported {
                what: s("object 'vector' (only 'matrix' is read)"),
            },
        ),
        ("missing_size_line.mtx", 3, MissingSizeLine),
        (
            "bad_size_line.mtx",
            3,
            BadSizeLine {
                found: s("3 3"),
                reason: s("expected 3 integers for coordinate format, found 2 words"),
            },
        ),
        (
            "negative_size.mtx",
            2,
            BadSizeLine {
                found: s("3 -3 2"),
                reason: s("\"-3\" is not a non-negative integer"),
            },
        ),
        (
            "not_square_symmetric.mtx",
            2,
            NotSquare { nrows: 3, ncols: 4 },
        ),
        (
            "huge_dimension.mtx",
            2,
            TooLarge {
                size: 5_000_000_000,
                limit: u32::MAX as u64,
            },
        ),
        (
            "too_few_entries.mtx",
            4,
            TooFewEntries {
                declared: 3,
                found: 2,
            },
        ),
        ("too_many_entries.mtx", 5, TooManyEntries { declared: 2 }),
        (
            "index_zero.mtx",
            3,
            IndexOutOfRange {
                row: 0,
                col: 1,
                nrows: 3,
                ncols: 3,
            },
        ),
        (
            "index_past_n.mtx",
            4,
            IndexOutOfRange {
                row: 4,
                col: 1,
                nrows: 3,
                ncols: 3,
            },
        ),
        ("negative_index.mtx", 3, BadNumber { token: s("-1") }),
        ("bad_number.mtx", 3, BadNumber { token: s("abc") }),
        ("nan_value.mtx", 4, NonFinite { token: s("NaN") }),
        ("inf_value.mtx", 3, NonFinite { token: s("-inf") }),
        ("overflow_value.mtx", 3, NonFinite { token: s("1e400") }),
        (
            "truncated_last_line.mtx",
            5,
            TruncatedLine {
                expected: 3,
                found: 2,
            },
        ),
        (
            "missing_value_midfile.mtx",
            4,
            WrongFieldCount {
                expected: 3,
                found: 2,
            },
        ),
        (
            "extra_field.mtx",
            3,
            WrongFieldCount {
                expected: 3,
                found: 4,
            },
        ),
        ("non_utf8_comment.mtx", 2, NonUtf8),
        ("non_utf8_data.mtx", 4, NonUtf8),
        ("skew_diagonal.mtx", 4, SkewDiagonal { index: 2 }),
        ("integer_field_float.mtx", 3, BadNumber { token: s("1.5") }),
        (
            "pattern_with_value.mtx",
            3,
            WrongFieldCount {
                expected: 2,
                found: 3,
            },
        ),
        (
            "array_too_few.mtx",
            5,
            TooFewEntries {
                declared: 4,
                found: 3,
            },
        ),
        (
            "array_two_per_line.mtx",
            3,
            WrongFieldCount {
                expected: 1,
                found: 2,
            },
        ),
        (
            "fortran_bad_exponent.mtx",
            3,
            BadNumber { token: s("1.5D+") },
        ),
        (
            "mirrored_entry.mtx",
            6,
            MirroredEntry {
                row: 1,
                col: 2,
                first_line: 4,
                storage: "symmetric",
            },
        ),
        (
            "too_many_declared.mtx",
            2,
            TooManyDeclared {
                declared: 5,
                max: 4,
                storage: "general",
                nrows: 2,
                ncols: 2,
            },
        ),
        (
            "size_over_u64.mtx",
            2,
            BadSizeLine {
                found: s("3 99999999999999999999999 1"),
                reason: s(
                    "\"99999999999999999999999\" does not fit in 64 bits (dimensions may be at most 4294967295)",
                ),
            },
        ),
    ]
}

fn dir() -> std::path::PathBuf {
    std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/bad"))
}

#[test]
fn every_bad_file_gives_its_exact_error() {
    let cases = expected();
    assert!(cases.len() >= 20);
    for (file, line, kind) in cases {
        let err = read_matrix_market(dir().join(file)).expect_err(file);
        assert_eq!(err, MmError { line, kind }, "{file}: got {err}");
    }
}

#[test]
fn corpus_has_no_untested_file() {
    let names: Vec<&str> = expected().iter().map(|c| c.0).collect();
    let mut on_disk: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    on_disk.sort();
    assert!(
        on_disk.len() >= 20,
        "corpus has only {} files",
        on_disk.len()
    );
    for f in &on_disk {
        assert!(names.contains(&f.as_str()), "{f} has no expected error");
    }
    assert_eq!(on_disk.len(), names.len());
}

#[test]
fn dense_reader_gives_the_same_errors() {
    // Array-format files fail the same way through the dense reader.
    for (file, line, kind) in expected().into_iter().filter(|c| c.0.starts_with("array_")) {
        let bytes = std::fs::read(dir().join(file)).unwrap();
        assert_eq!(
            read_dense_array_bytes(&bytes).unwrap_err(),
            MmError { line, kind },
            "{file}"
        );
    }
}

#[test]
fn display_names_the_line() {
    let err = read_matrix_market(dir().join("index_zero.mtx")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 3: index (0, 1) out of range for a 3 x 3 matrix (indices are 1-based)"
    );
    assert_eq!(
        read_matrix_market_bytes(b"").unwrap_err().to_string(),
        "empty file"
    );
    let io = read_matrix_market(dir().join("does-not-exist.mtx")).unwrap_err();
    assert_eq!(io.line, 0);
    assert!(matches!(io.kind, Io(_)));
}

#[test]
fn errors_found_in_parallel_chunks_report_the_first_line() {
    // A body above the parallel threshold with a bad value near the end and
    // too many entries: the first problem in file order wins.
    let n = 200_000;
    let mut text = format!("%%MatrixMarket matrix coordinate real general\n{n} {n} {n}\n");
    for i in 1..=n {
        if i == n - 3 {
            text.push_str(&format!("{i} {i} x1.0\n"));
        } else {
            text.push_str(&format!("{i} {i} 1.0\n"));
        }
    }
    let err = read_matrix_market_bytes(text.as_bytes()).unwrap_err();
    assert_eq!(
        err,
        MmError {
            line: 2 + (n - 3),
            kind: BadNumber { token: s("x1.0") }
        }
    );

    let mut text = format!(
        "%%MatrixMarket matrix coordinate real general\n{n} {n} {}\n",
        n - 10
    );
    for i in 1..=n {
        text.push_str(&format!("{i} {i} 1.0\n"));
    }
    let err = read_matrix_market_bytes(text.as_bytes()).unwrap_err();
    assert_eq!(
        err,
        MmError {
            line: 2 + (n - 9),
            kind: TooManyEntries { declared: n - 10 }
        }
    );
}

/// Both triangles of a symmetric file may be used, but never for the same
/// position: the mirrored pair is reported at its second line whichever
/// triangle comes first, in the sequential and in the parallel parse.
#[test]
fn mirrored_entries_are_a_format_violation() {
    let text =
        "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 3\n1 3 4.0\n2 1 1.0\n3 1 -4.0\n";
    let err = read_matrix_market_bytes(text.as_bytes()).unwrap_err();
    assert_eq!(
        err,
        MmError {
            line: 5,
            kind: MirroredEntry {
                row: 3,
                col: 1,
                first_line: 3,
                storage: "skew-symmetric"
            }
        }
    );
    assert!(err.to_string().contains("store one triangle only"), "{err}");
    assert_eq!(
        matrices::mm::read_matrix_market_bytes_in_chunks(text.as_bytes(), 3).unwrap_err(),
        err
    );
    // mixed triangles without a shared position are accepted and mirrored
    let ok =
        "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n2 1 -1.0\n2 3 -1.0\n2 2 2.0\n";
    let m = read_matrix_market_bytes(ok.as_bytes()).unwrap().matrix;
    assert_eq!(m.nnz(), 5);
    // a duplicate inside one triangle is still summed (general MatrixMarket rule)
    let dup =
        "%%MatrixMarket matrix coordinate real symmetric\n2 2 3\n2 1 -1.0\n2 1 -1.0\n1 1 2.0\n";
    let m = read_matrix_market_bytes(dup.as_bytes()).unwrap().matrix;
    assert_eq!(m.nnz(), 3);
}

/// Issue 22: a 78-byte file declaring 1e9 × 1e9 with one entry read for 50 s
/// at 15 GB whenever the machine had that much available. The size line is
/// now checked against the bytes after it and the declared entries before
/// anything proportional to it is allocated; small files stay readable.
#[test]
fn sizes_the_file_cannot_hold_are_refused_at_the_size_line() {
    use matrices::mm::{read_matrix_market, read_matrix_market_bytes, MmErrorKind};
    let cases = [
        (
            "%%MatrixMarket matrix coordinate real symmetric\n200000000 200000000 1\n1 1 1\n",
            "200000000 x 200000000 with 1 entries",
        ),
        (
            "%%MatrixMarket matrix array real general\n3000 3000\n1\n",
            "3000 x 3000 array (9000000 values), but only 2 bytes",
        ),
        (
            "%%MatrixMarket matrix coordinate real general\n100000 100000 1000000\n1 1 1\n",
            "1000000 entries, but only 6 bytes",
        ),
    ];
    let dir = std::env::temp_dir().join(format!("jdmg-plausible-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (k, (text, words)) in cases.iter().enumerate() {
        let p = dir.join(format!("m{k}.mtx"));
        std::fs::write(&p, text).unwrap();
        for err in [
            read_matrix_market_bytes(text.as_bytes()).unwrap_err(),
            read_matrix_market(&p).unwrap_err(),
        ] {
            assert_eq!(err.line, 2, "{err}");
            match err.kind {
                MmErrorKind::Implausible(_) => assert!(err.to_string().contains(words), "{err}"),
                // A machine with less available memory than the row arrays
                // refuses on that ground first (both before allocating).
                MmErrorKind::InsufficientMemory { .. } if k == 0 => {}
                _ => panic!("{err}"),
            }
        }
    }
    // 4M rows (the free allowance) with one entry, and zero rows beside
    // entries, are still read.
    let ok = "%%MatrixMarket matrix coordinate real symmetric\n4194304 4194304 1\n1 1 1\n";
    assert_eq!(
        read_matrix_market_bytes(ok.as_bytes())
            .unwrap()
            .matrix
            .nrows(),
        4194304
    );
    let _ = std::fs::remove_dir_all(&dir);
}
