//! MatrixMarket `complex` files: `coordinate complex general | hermitian |
//! symmetric | skew-symmetric` into a [`ComplexCsr`], `array complex general`
//! into column-major `c64` values, and the writers of both.
//!
//! Each data line holds the two parts of a value (`i j re im`, or `re im` in
//! an array). Hermitian storage keeps one triangle and mirrors each entry as
//! its conjugate; its diagonal must be real. The reader is sequential, never
//! panics on any input, and reports the first failure with its line.

use std::io::{self, Write};
use std::path::Path;

use faer::c64;

use super::error::{MmError, MmErrorKind};
use super::header::{next_line, parse_any_header, MmField, MmFormat, MmHeader, MmSymmetry};
use super::parse::parse_real;
use crate::complex::ComplexCsr;

/// A complex matrix read from a MatrixMarket file, with its header.
#[derive(Debug, Clone, PartialEq)]
pub struct ComplexMm {
    /// Banner and size line of the file.
    pub header: MmHeader,
    /// The full matrix (one-triangle storage expanded, duplicates summed).
    pub matrix: ComplexCsr,
}

/// Reads a `coordinate complex` MatrixMarket file.
///
/// # Errors
/// [`MmErrorKind::Io`] if the file cannot be read, otherwise as
/// [`read_complex_matrix_market_bytes`].
pub fn read_complex_matrix_market(path: impl AsRef<Path>) -> Result<ComplexMm, MmError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path)
        .map_err(|e| MmError::new(0, MmErrorKind::Io(format!("{}: {e}", path.display()))))?;
    read_complex_matrix_market_bytes(&bytes)
}

/// The data lines of a complex file: each a list of tokens and its line.
fn data_lines(
    b: &[u8],
    mut pos: usize,
    mut line: usize,
) -> Result<Vec<(usize, Vec<&str>)>, MmError> {
    let mut out = Vec::new();
    while pos < b.len() {
        let (l, next) = next_line(b, pos);
        let l = std::str::from_utf8(l).map_err(|_| MmError::new(line, MmErrorKind::NonUtf8))?;
        let t = l.trim_ascii();
        if !t.is_empty() && !t.starts_with('%') {
            out.push((line, t.split_ascii_whitespace().collect()));
        }
        pos = next;
        line += 1;
    }
    Ok(out)
}

fn value(line: usize, re: &str, im: &str) -> Result<c64, MmError> {
    let part = |t: &str| parse_real(t.as_bytes()).map_err(|k| MmError::new(line, k));
    Ok(c64::new(part(re)?, part(im)?))
}

fn index(line: usize, t: &str) -> Result<u64, MmError> {
    t.parse::<u64>().map_err(|_| {
        MmError::new(
            line,
            MmErrorKind::BadNumber {
                token: t.chars().take(40).collect(),
            },
        )
    })
}

/// Reads a `coordinate complex` MatrixMarket file held in memory. Symmetric,
/// skew-symmetric and Hermitian storage are expanded (Hermitian: aⱼᵢ =
/// conj(aᵢⱼ)).
///
/// # Errors
/// [`MmError`] with the line of the first failure: a real file
/// ([`MmErrorKind::WrongFormat`]), an array file (read it with
/// [`read_complex_array_bytes`]), a line with other than four fields, a bad
/// number or index, a Hermitian diagonal with an imaginary part
/// ([`MmErrorKind::ComplexDiagonal`]), an entry stored in both triangles, or a
/// count that differs from the size line.
pub fn read_complex_matrix_market_bytes(bytes: &[u8]) -> Result<ComplexMm, MmError> {
    let (header, start, line) = parse_any_header(bytes)?;
    check_complex(&header, MmFormat::Coordinate)?;
    let lines = data_lines(bytes, start, line)?;
    let sym = header.symmetry;
    let mut t = Vec::with_capacity(lines.len() * if sym == MmSymmetry::General { 1 } else { 2 });
    let mut seen = std::collections::HashMap::new();
    count_entries(&header, &lines)?;
    for (line, toks) in &lines {
        let line = *line;
        if toks.len() != 4 {
            return Err(MmError::new(
                line,
                MmErrorKind::WrongFieldCount {
                    expected: 4,
                    found: toks.len(),
                },
            ));
        }
        let (i, j) = (index(line, toks[0])?, index(line, toks[1])?);
        if i == 0 || j == 0 || i > header.nrows as u64 || j > header.ncols as u64 {
            return Err(MmError::new(
                line,
                MmErrorKind::IndexOutOfRange {
                    row: i,
                    col: j,
                    nrows: header.nrows,
                    ncols: header.ncols,
                },
            ));
        }
        let v = value(line, toks[2], toks[3])?;
        let (i, j) = (i as usize - 1, j as usize - 1);
        t.push((i, j, v));
        if sym == MmSymmetry::General || i == j {
            if i == j && sym == MmSymmetry::Hermitian && v.im != 0.0 {
                return Err(MmError::new(
                    line,
                    MmErrorKind::ComplexDiagonal {
                        index: i as u64 + 1,
                    },
                ));
            }
            if i == j && sym == MmSymmetry::SkewSymmetric {
                return Err(MmError::new(
                    line,
                    MmErrorKind::SkewDiagonal {
                        index: i as u64 + 1,
                    },
                ));
            }
            continue;
        }
        if let Some(&first_line) = seen.get(&(j, i)) {
            return Err(MmError::new(
                line,
                MmErrorKind::MirroredEntry {
                    row: i as u64 + 1,
                    col: j as u64 + 1,
                    first_line,
                    storage: sym.as_str(),
                },
            ));
        }
        seen.insert((i, j), line);
        let mirror = match sym {
            MmSymmetry::Hermitian => v.conj(),
            MmSymmetry::SkewSymmetric => -v,
            _ => v,
        };
        t.push((j, i, mirror));
    }
    let matrix = ComplexCsr::from_triplets(header.nrows, header.ncols, &t)
        .map_err(|e| MmError::new(header.size_line, MmErrorKind::Implausible(e.to_string())))?;
    Ok(ComplexMm { header, matrix })
}

/// Refuses a header that is not complex, or not of the format `want`.
fn check_complex(h: &MmHeader, want: MmFormat) -> Result<(), MmError> {
    if h.field != MmField::Complex {
        return Err(MmError::new(
            1,
            MmErrorKind::WrongFormat {
                expected: "complex",
                found: h.field.as_str(),
            },
        ));
    }
    if h.format != want {
        return Err(MmError::new(
            1,
            MmErrorKind::WrongFormat {
                expected: want.as_str(),
                found: h.format.as_str(),
            },
        ));
    }
    Ok(())
}

/// Checks the number of data lines against the size line.
fn count_entries(h: &MmHeader, lines: &[(usize, Vec<&str>)]) -> Result<(), MmError> {
    if lines.len() > h.entries {
        return Err(MmError::new(
            lines[h.entries].0,
            MmErrorKind::TooManyEntries {
                declared: h.entries,
            },
        ));
    }
    if lines.len() < h.entries {
        return Err(MmError::new(
            lines.last().map_or(h.size_line, |l| l.0),
            MmErrorKind::TooFewEntries {
                declared: h.entries,
                found: lines.len(),
            },
        ));
    }
    Ok(())
}

/// Reads an `array complex general` file (complex vectors, eigenvector
/// blocks): `(nrows, ncols, values)`, column-major.
///
/// # Errors
/// As [`read_complex_matrix_market_bytes`]; a coordinate file or storage
/// other than general is [`MmErrorKind::WrongFormat`] / `Unsupported`.
pub fn read_complex_array_bytes(bytes: &[u8]) -> Result<(usize, usize, Vec<c64>), MmError> {
    let (header, start, line) = parse_any_header(bytes)?;
    check_complex(&header, MmFormat::Array)?;
    if header.symmetry != MmSymmetry::General {
        return Err(MmError::new(
            1,
            MmErrorKind::Unsupported {
                what: format!("{} storage of a complex array", header.symmetry.as_str()),
            },
        ));
    }
    let lines = data_lines(bytes, start, line)?;
    count_entries(&header, &lines)?;
    let mut out = Vec::with_capacity(lines.len());
    for (line, toks) in &lines {
        if toks.len() != 2 {
            return Err(MmError::new(
                *line,
                MmErrorKind::WrongFieldCount {
                    expected: 2,
                    found: toks.len(),
                },
            ));
        }
        out.push(value(*line, toks[0], toks[1])?);
    }
    Ok((header.nrows, header.ncols, out))
}

/// Writes `a` as `coordinate complex general`, or with `hermitian` as
/// `coordinate complex hermitian` (the lower triangle; `a` must be exactly
/// Hermitian), values in shortest round-trip form.
///
/// # Errors
/// `InvalidInput` for a non-finite value, or `hermitian` asked of a matrix
/// that is not exactly Hermitian; otherwise any error of `w`.
pub fn write_complex_coordinate<W: Write>(
    mut w: W,
    a: &ComplexCsr,
    hermitian: bool,
) -> io::Result<()> {
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    if a.re()
        .data()
        .iter()
        .chain(a.im().data())
        .any(|v| !v.is_finite())
    {
        return Err(invalid("non-finite value in the matrix".into()));
    }
    if hermitian && a.hermitian_defect() != 0.0 {
        return Err(invalid(
            "matrix is not exactly Hermitian; write it as general".into(),
        ));
    }
    let keep = |i: usize, j: usize| !hermitian || j <= i;
    let entries: usize = (0..a.nrows())
        .map(|i| a.row(i).0.iter().filter(|&&j| keep(i, j as usize)).count())
        .sum();
    let sym = if hermitian { "hermitian" } else { "general" };
    writeln!(w, "%%MatrixMarket matrix coordinate complex {sym}")?;
    writeln!(w, "% written by jdmg (matrices::mm)")?;
    writeln!(w, "{} {} {entries}", a.nrows(), a.ncols())?;
    for i in 0..a.nrows() {
        let (cols, re, im) = a.row(i);
        for ((&j, r), q) in cols.iter().zip(re).zip(im) {
            if keep(i, j as usize) {
                writeln!(w, "{} {} {r:?} {q:?}", i + 1, j + 1)?;
            }
        }
    }
    w.flush()
}

/// Writes a column-major `nrows × ncols` block of complex values as
/// `array complex general`.
///
/// # Errors
/// `InvalidInput` if `data.len() != nrows·ncols` or a value is not finite;
/// otherwise any error of `w`.
pub fn write_complex_array<W: Write>(
    mut w: W,
    nrows: usize,
    ncols: usize,
    data: &[c64],
) -> io::Result<()> {
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    if Some(data.len()) != nrows.checked_mul(ncols) {
        return Err(invalid(format!(
            "array has {} values, expected {nrows} x {ncols}",
            data.len()
        )));
    }
    if data.iter().any(|v| !v.re.is_finite() || !v.im.is_finite()) {
        return Err(invalid("non-finite value in the array".into()));
    }
    writeln!(w, "%%MatrixMarket matrix array complex general")?;
    writeln!(w, "% written by jdmg (matrices::mm)")?;
    writeln!(w, "{nrows} {ncols}")?;
    for v in data {
        writeln!(w, "{:?} {:?}", v.re, v.im)?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::complex::MagSpec;

    #[test]
    fn hermitian_file_round_trips_and_expands() {
        let a = "maglap2d:4x3:0.2"
            .parse::<MagSpec>()
            .unwrap()
            .build()
            .unwrap();
        for hermitian in [true, false] {
            let mut buf = Vec::new();
            write_complex_coordinate(&mut buf, &a, hermitian).unwrap();
            let back = read_complex_matrix_market_bytes(&buf).unwrap();
            assert_eq!(back.matrix, a);
            let want = if hermitian {
                MmSymmetry::Hermitian
            } else {
                MmSymmetry::General
            };
            assert_eq!(back.header.symmetry, want);
        }
        let text =
            b"%%MatrixMarket matrix coordinate complex hermitian\n2 2 2\n1 1 2 0\n2 1 1 -3\n";
        let m = read_complex_matrix_market_bytes(text).unwrap().matrix;
        assert_eq!(m.get(0, 1), c64::new(1.0, 3.0));
        assert_eq!(m.get(1, 0), c64::new(1.0, -3.0));
    }

    #[test]
    fn bad_complex_files_name_their_line() {
        let cases: [(&[u8], usize); 6] = [
            (
                b"%%MatrixMarket matrix coordinate complex hermitian\n2 2 1\n1 1 2 1\n",
                3,
            ),
            (
                b"%%MatrixMarket matrix coordinate complex hermitian\n2 2 2\n2 1 1 1\n1 2 1 1\n",
                4,
            ),
            (
                b"%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 2\n",
                3,
            ),
            (
                b"%%MatrixMarket matrix coordinate complex general\n2 2 1\n3 1 2 0\n",
                3,
            ),
            (
                b"%%MatrixMarket matrix coordinate complex general\n2 2 2\n1 1 x 0\n",
                3,
            ),
            (
                b"%%MatrixMarket matrix coordinate complex general\n2 2 2\n1 1 1 0\n",
                3,
            ),
        ];
        for (text, line) in cases {
            let e = read_complex_matrix_market_bytes(text).unwrap_err();
            assert_eq!(e.line, line, "{e}");
        }
        // A real file in the complex reader, and a complex file in the real one.
        let real = b"%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 2\n";
        assert!(read_complex_matrix_market_bytes(real).is_err());
        let cplx = b"%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 2 0\n";
        let e = crate::mm::read_matrix_market_bytes(cplx).unwrap_err();
        assert!(e.to_string().contains("read_complex_matrix_market"), "{e}");
        let herm_real = b"%%MatrixMarket matrix coordinate real hermitian\n1 1 1\n1 1 2\n";
        assert!(crate::mm::read_header_bytes(herm_real).is_err());
    }

    #[test]
    fn complex_arrays_round_trip() {
        let v: Vec<c64> = (0..6)
            .map(|k| c64::new(k as f64 / 3.0, -(k as f64).sqrt()))
            .collect();
        let mut buf = Vec::new();
        write_complex_array(&mut buf, 3, 2, &v).unwrap();
        assert_eq!(read_complex_array_bytes(&buf).unwrap(), (3, 2, v));
    }
}
