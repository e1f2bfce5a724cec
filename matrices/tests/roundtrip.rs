//! Writers round-trip every finite f64 bit for bit; the reader handles every
//! supported banner combination and number spelling.

use matrices::mm::{
    read_dense_array, read_dense_array_bytes, read_matrix_market_bytes, write_array,
    write_array_file, write_coordinate, write_coordinate_file, MmField, MmFormat, MmSymmetry,
};
use matrices::CsrMatrix;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A random finite f64 from uniformly random bits (all exponents).
    fn finite(&mut self) -> f64 {
        loop {
            let v = f64::from_bits(self.next());
            if v.is_finite() {
                return v;
            }
        }
    }
}

const SPECIAL: [f64; 12] = [
    0.0,
    -0.0,
    f64::MIN_POSITIVE,
    5e-324,
    -5e-324,
    2.225073858507201e-308, // largest subnormal
    1e308,
    f64::MAX,
    f64::MIN,
    0.1,
    -1.0 / 3.0,
    123456789012345680000.0,
];

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn random_matrix(rng: &mut Rng, n: usize, m: usize, nnz: usize) -> CsrMatrix {
    let mut t: Vec<(usize, usize, f64)> = Vec::new();
    for k in 0..nnz {
        let v = SPECIAL.get(k).copied().unwrap_or_else(|| rng.finite());
        t.push((
            (rng.next() % n as u64) as usize,
            (rng.next() % m as u64) as usize,
            v,
        ));
    }
    // Unique positions so no duplicate is summed.
    t.sort_by_key(|e| (e.0, e.1));
    t.dedup_by_key(|e| (e.0, e.1));
    CsrMatrix::from_triplets(n, m, &t).unwrap()
}

#[test]
fn coordinate_general_round_trip_is_bit_exact() {
    let mut rng = Rng(7);
    for &(n, m, nnz) in &[
        (1, 1, 1),
        (13, 7, 60),
        (300, 200, 5000),
        (40_000, 50_000, 150_000),
    ] {
        let a = random_matrix(&mut rng, n, m, nnz);
        let mut buf = Vec::new();
        write_coordinate(&mut buf, &a, false).unwrap();
        let back = read_matrix_market_bytes(&buf).unwrap();
        assert_eq!(back.header.symmetry, MmSymmetry::General);
        assert_eq!(back.header.entries, a.nnz());
        let b = back.matrix;
        assert_eq!((b.nrows(), b.ncols()), (n, m));
        assert_eq!(b.indptr(), a.indptr());
        assert_eq!(b.indices(), a.indices());
        assert_eq!(bits(b.data()), bits(a.data()), "values differ for {n}x{m}");
    }
}

#[test]
fn coordinate_symmetric_round_trip_is_bit_exact() {
    let mut rng = Rng(11);
    let n = 500;
    let mut t = Vec::new();
    for i in 0..n {
        t.push((i, i, rng.finite()));
        for _ in 0..3 {
            let j = (rng.next() % n as u64) as usize;
            if j < i {
                let v = rng.finite();
                t.push((i, j, v));
                t.push((j, i, v));
            }
        }
    }
    t.sort_by_key(|e| (e.0, e.1));
    t.dedup_by_key(|e| (e.0, e.1));
    // Keep the pairs consistent after dedup: rebuild from the lower triangle.
    let lower: Vec<_> = t.iter().filter(|e| e.1 <= e.0).copied().collect();
    let mut full = lower.clone();
    full.extend(lower.iter().filter(|e| e.0 != e.1).map(|e| (e.1, e.0, e.2)));
    let a = CsrMatrix::from_triplets(n, n, &full).unwrap();
    let mut buf = Vec::new();
    write_coordinate(&mut buf, &a, true).unwrap();
    let back = read_matrix_market_bytes(&buf).unwrap();
    assert_eq!(back.header.symmetry, MmSymmetry::Symmetric);
    assert_eq!(back.header.entries, lower.len());
    assert_eq!(back.matrix.indices(), a.indices());
    assert_eq!(bits(back.matrix.data()), bits(a.data()));
}

#[test]
fn writers_reject_what_cannot_round_trip() {
    let a = CsrMatrix::from_triplets(2, 2, &[(0, 1, 1.0), (1, 0, 2.0)]).unwrap();
    let e = write_coordinate(Vec::new(), &a, true).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    // Signed zeros differ in bits: not symmetric for a bit-exact writer.
    let z = CsrMatrix::from_triplets(2, 2, &[(0, 1, 0.0), (1, 0, -0.0)]).unwrap();
    assert!(write_coordinate(Vec::new(), &z, true).is_err());
    let nan = CsrMatrix::from_triplets(1, 1, &[(0, 0, f64::NAN)]).unwrap();
    assert!(write_coordinate(Vec::new(), &nan, false).is_err());
    assert!(write_array(Vec::new(), 2, 2, &[1.0; 3]).is_err());
    assert!(write_array(Vec::new(), 1, 1, &[f64::INFINITY]).is_err());
}

#[test]
fn array_round_trip_is_bit_exact() {
    let mut rng = Rng(3);
    let (m, n) = (1000, 7);
    let mut data: Vec<f64> = (0..m * n).map(|_| rng.finite()).collect();
    data[..SPECIAL.len()].copy_from_slice(&SPECIAL);
    let mut buf = Vec::new();
    write_array(&mut buf, m, n, &data).unwrap();
    let back = read_dense_array_bytes(&buf).unwrap();
    assert_eq!((back.nrows, back.ncols), (m, n));
    assert_eq!(bits(&back.data), bits(&data));
    // The same file through the sparse reader stores every entry.
    let sparse = read_matrix_market_bytes(&buf).unwrap();
    assert_eq!(sparse.header.format, MmFormat::Array);
    assert_eq!(sparse.matrix.nnz(), m * n);
    assert_eq!(sparse.matrix.get(3, 2).to_bits(), data[3 + 2 * m].to_bits());

    // Large enough to take the parallel path, through real files.
    let big: Vec<f64> = (0..300_000).map(|_| rng.finite()).collect();
    let dir = std::env::temp_dir().join(format!("jdmg-mm-rt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("big.mtx");
    write_array_file(&p, 100_000, 3, &big).unwrap();
    let back = read_dense_array(&p).unwrap();
    assert_eq!(bits(&back.data), bits(&big));
    let a = random_matrix(&mut rng, 70_000, 70_000, 200_000);
    let q = dir.join("coo.mtx");
    write_coordinate_file(&q, &a, false).unwrap();
    let b = matrices::mm::read_matrix_market(&q).unwrap().matrix;
    assert_eq!(b.indices(), a.indices());
    assert_eq!(bits(b.data()), bits(a.data()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn reader_accepts_every_supported_spelling() {
    let text = b"%%MatrixMarket matrix coordinate real general\r\n\
        % comment\r\n\
        \r\n\
        3 3 6\r\n\
        1 1 -.5\r\n\
        % a comment between entries\n\
        \n\
        2 2 1.5E+03\n\
        \t3   3\t1.5D+03  \n\
        3 1 -2.5d-1\n\
        1 1 0.25\n\
        1 3 +7";
    let a = read_matrix_market_bytes(text).unwrap();
    assert_eq!(a.header.field, MmField::Real);
    let m = a.matrix;
    assert_eq!(m.nnz(), 5, "duplicate (1,1) summed");
    assert_eq!(m.get(0, 0), -0.25);
    assert_eq!(m.get(1, 1), 1500.0);
    assert_eq!(m.get(2, 2), 1500.0);
    assert_eq!(m.get(2, 0), -0.25);
    assert_eq!(m.get(0, 2), 7.0);
}

#[test]
fn pattern_integer_skew_and_symmetric_arrays() {
    let p = read_matrix_market_bytes(
        b"%%MatrixMarket matrix coordinate pattern symmetric\n3 3 3\n1 1\n2 1\n3 2\n",
    )
    .unwrap();
    assert_eq!(p.header.field, MmField::Pattern);
    assert_eq!(p.matrix.nnz(), 5);
    assert_eq!(p.matrix.get(0, 1), 1.0);
    assert_eq!(p.matrix.get(1, 2), 1.0);

    let i = read_matrix_market_bytes(
        b"%%MatrixMarket matrix coordinate integer general\n2 3 2\n1 3 -12\n2 2 +4\n",
    )
    .unwrap();
    assert_eq!(i.matrix.get(0, 2), -12.0);
    assert_eq!(i.matrix.get(1, 1), 4.0);

    let s = read_matrix_market_bytes(
        b"%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 1.5\n3 2 -2\n",
    )
    .unwrap();
    assert_eq!(s.matrix.get(1, 0), 1.5);
    assert_eq!(s.matrix.get(0, 1), -1.5);
    assert_eq!(s.matrix.get(1, 2), 2.0);
    assert_eq!(s.matrix.nnz(), 4);

    // Symmetric array: lower triangle column by column.
    let d = read_dense_array_bytes(
        b"%%MatrixMarket matrix array real symmetric\n3 3\n1\n2\n3\n4\n5\n6\n",
    )
    .unwrap();
    assert_eq!(d.data, vec![1.0, 2.0, 3.0, 2.0, 4.0, 5.0, 3.0, 5.0, 6.0]);
    let k = read_dense_array_bytes(b"%%MatrixMarket matrix array real skew-symmetric\n2 2\n3\n")
        .unwrap();
    assert_eq!(k.data, vec![0.0, 3.0, -3.0, 0.0]);
    assert_eq!(k.get(0, 1), -3.0);
    let e = read_dense_array_bytes(b"%%MatrixMarket matrix coordinate real general\n1 1 0\n")
        .unwrap_err();
    assert_eq!(e.line, 1);
    // An empty matrix and a matrix with no entries are fine.
    let z =
        read_matrix_market_bytes(b"%%MatrixMarket matrix coordinate real general\n0 0 0").unwrap();
    assert_eq!(z.matrix.nrows(), 0);
}

#[test]
fn parallel_and_sequential_paths_agree_with_unsorted_duplicates() {
    // Entries in scrambled order with duplicates, large enough to be chunked.
    let mut rng = Rng(5);
    let n = 20_000usize;
    let mut text = String::from("%%MatrixMarket matrix coordinate real symmetric\n");
    let mut entries = Vec::new();
    for _ in 0..150_000 {
        let i = (rng.next() % n as u64) as usize;
        let j = (rng.next() % n as u64) as usize;
        let (i, j) = (i.max(j), i.min(j));
        entries.push((i, j, ((rng.next() % 2000) as f64 - 1000.0) / 8.0));
    }
    text.push_str(&format!("{n} {n} {}\n", entries.len()));
    for &(i, j, v) in &entries {
        text.push_str(&format!("{} {} {v}\n", i + 1, j + 1));
    }
    assert!(
        text.len() > 2 << 20,
        "body must exceed the parallel threshold"
    );
    let a = read_matrix_market_bytes(text.as_bytes()).unwrap().matrix;
    // Reference: triplets with mirrored off-diagonals (values are multiples of
    // 1/8 so sums are exact in any order).
    let mut t = Vec::new();
    for &(i, j, v) in &entries {
        t.push((i, j, v));
        if i != j {
            t.push((j, i, v));
        }
    }
    let b = CsrMatrix::from_triplets(n, n, &t).unwrap();
    assert_eq!(a, b);
}

#[test]
fn forced_chunking_gives_identical_results_and_errors() {
    use matrices::mm::read_matrix_market_bytes_in_chunks;
    let ok = b"%%MatrixMarket matrix coordinate real symmetric\n4 4 6\n1 1 2\n2 1 -1\n\n2 2 2\n% c\n3 2 -1\n3 3 2\n4 4 2\n";
    let bad =
        b"%%MatrixMarket matrix coordinate real general\n4 4 3\n1 1 2\n2 1 -1\n3 3 2\n4 4 1\n";
    let short = b"%%MatrixMarket matrix coordinate real general\n4 4 5\n1 1 2\n2 1 -1\n3 3 2\n4 4";
    for text in [&ok[..], &bad[..], &short[..]] {
        let one = read_matrix_market_bytes(text);
        for parts in 1..8 {
            assert_eq!(
                read_matrix_market_bytes_in_chunks(text, parts),
                one,
                "{parts} parts"
            );
        }
    }
    assert_eq!(read_matrix_market_bytes(ok).unwrap().matrix.nnz(), 8);
    assert_eq!(read_matrix_market_bytes(bad).unwrap_err().line, 6);
    assert_eq!(read_matrix_market_bytes(short).unwrap_err().line, 6);
}
