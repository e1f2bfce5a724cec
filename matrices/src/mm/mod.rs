//! MatrixMarket reading and writing.
//!
//! Reader: coordinate `real | integer | pattern` × `general | symmetric |
//! skew-symmetric`, and dense `array` (`real | integer`); `complex` files
//! (`hermitian` storage too) through [`read_complex_matrix_market`]. Comments and blank
//! lines are allowed anywhere; numbers may be written `-.4755112`, `1.5E+03` or
//! Fortran-style `1.5D+03`. Duplicates are summed and symmetric / skew storage
//! is expanded to full CSR (either triangle may be stored, each entry is
//! mirrored), so SpMV on the result is plain; an entry stored in both
//! triangles, `(i, j)` and `(j, i)`, is a format violation
//! ([`MmErrorKind::MirroredEntry`]).
//!
//! Bounded memory: a size line declaring more entries than the matrix has
//! positions is rejected, and the memory a declared size needs
//! ([`read_bytes_needed`]) is compared with [`available_memory`] before any
//! allocation proportional to it. A first line that is not a banner ends the
//! read at once (`/dev/urandom` is rejected after its first line).
//!
//! Speed: the file is read whole, its body is split at newline boundaries into
//! about two chunks per thread, the chunks are parsed in parallel with
//! `fast-float2`, and the CSR arrays are built by a parallel counting sort.
//! When anything is wrong, the body is parsed again sequentially to report the
//! first failure in file order with its line ([`MmError`]). The reader never
//! panics on any input.
//!
//! Writer: [`write_coordinate`] / [`write_array`] print every value in the
//! shortest form that parses back to the same bits, so `read(write(A)) == A`
//! bit for bit.

mod build;
mod complex;
mod error;
mod header;
pub mod memory;
mod parse;
mod units;
mod write;

use std::fs::File;
use std::io::Read;
use std::path::Path;

use rayon::prelude::*;

pub use complex::{
    read_complex_array_bytes, read_complex_matrix_market, read_complex_matrix_market_bytes,
    write_complex_array, write_complex_coordinate, ComplexMm,
};
pub use error::{MmError, MmErrorKind};
pub use header::{MmField, MmFormat, MmHeader, MmSymmetry};
pub use memory::{available_memory, read_bytes_needed};
pub use write::{
    atomic_temp_path, check_writable, temp_path, write_array, write_array_file, write_coordinate,
    write_coordinate_file, write_file_atomic,
};

use crate::CsrMatrix;
use parse::{parse_chunk, Entries, Layout};

/// A matrix read from a MatrixMarket file, with what its header declared.
#[derive(Debug, Clone, PartialEq)]
pub struct MmMatrix {
    /// Banner and size line of the file.
    pub header: MmHeader,
    /// The full matrix (symmetric storage expanded, duplicates summed).
    pub matrix: CsrMatrix,
}

/// A dense matrix (vectors, eigenvector blocks) in column-major order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DenseArray {
    /// Rows.
    pub nrows: usize,
    /// Columns.
    pub ncols: usize,
    /// `nrows * ncols` values, column-major: entry `(i, j)` is `data[i + j * nrows]`.
    pub data: Vec<f64>,
}

impl DenseArray {
    /// Entry `(i, j)`. Panics if out of range (a contract violation).
    pub fn get(&self, i: usize, j: usize) -> f64 {
        assert!(
            i < self.nrows && j < self.ncols,
            "DenseArray::get out of range"
        );
        self.data[i + j * self.nrows]
    }

    /// Column `j` as a slice. Panics if `j >= ncols`.
    pub fn column(&self, j: usize) -> &[f64] {
        &self.data[j * self.nrows..(j + 1) * self.nrows]
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, MmError> {
    std::fs::read(path)
        .map_err(|e| MmError::new(0, MmErrorKind::Io(format!("{}: {e}", path.display()))))
}

/// Reads a MatrixMarket file (coordinate or array) into CSR.
///
/// Array files become CSR matrices that store every entry, zeros included.
///
/// # Errors
/// [`MmErrorKind::Io`] if the file cannot be read, otherwise as
/// [`read_matrix_market_bytes`].
pub fn read_matrix_market(path: impl AsRef<Path>) -> Result<MmMatrix, MmError> {
    read_streaming(path.as_ref(), STREAM_BLOCK)
}

/// Bytes read per block by the streaming reader.
const STREAM_BLOCK: usize = 32 << 20;

/// Appends up to `block` bytes of `f` to `buf`; `true` at end of file.
fn read_block(f: &mut File, buf: &mut Vec<u8>, block: usize, path: &Path) -> Result<bool, MmError> {
    let n = f
        .by_ref()
        .take(block as u64)
        .read_to_end(buf)
        .map_err(|e| MmError::new(0, MmErrorKind::Io(format!("{}: {e}", path.display()))))?;
    Ok(n < block)
}

/// Coordinate files are read in blocks of `block` bytes through two reused
/// buffers: while one block's complete lines are parsed (in parallel chunks),
/// the next block is read. This avoids holding (and page-faulting in) the
/// whole file. Array files, and any input with a problem, go through the
/// in-memory reader, which reports the first error with its line.
fn read_streaming(path: &Path, block: usize) -> Result<MmMatrix, MmError> {
    let full = || read_matrix_market_bytes(&read_file(path)?);
    let mut f = File::open(path)
        .map_err(|e| MmError::new(0, MmErrorKind::Io(format!("{}: {e}", path.display()))))?;
    let mut cur: Vec<u8> = Vec::new();
    let mut eof;
    // Header: read until the size line is complete (or the file ends). An
    // error on a complete line is final: more bytes cannot change it.
    let (header, body_start) = loop {
        eof = read_block(&mut f, &mut cur, block, path)?;
        if eof {
            let (h, start, _) = header::parse_header(&cur)?;
            break (h, start);
        }
        match header::parse_header(&cur) {
            Ok((h, start, _)) if cur[start - 1] == b'\n' => break (h, start),
            Ok(_) => {}
            Err(e) => {
                if e.line > 0 && memchr::memchr_iter(b'\n', &cur).take(e.line).count() >= e.line {
                    return Err(e);
                }
            }
        }
    };
    // Over the memory available: refused with both figures. Under it, a
    // size the file cannot hold is still refused. A pipe or device has no
    // length: its body is not bounded beforehand.
    let len = match f.metadata() {
        Ok(m) if m.is_file() => m.len(),
        _ => u64::MAX,
    };
    check_memory(&header)?;
    check_plausible(&header, len.saturating_sub(body_start as u64))?;
    if header.format != MmFormat::Coordinate {
        return full();
    }
    let lay = layout(&header);
    let threads = rayon::current_num_threads().max(1);
    let mut chunks: Vec<Entries> = Vec::new();
    let mut found = 0usize;
    let mut next: Vec<u8> = Vec::new();
    let mut start = body_start;
    loop {
        // Complete lines of `cur` are parsed; the tail starts the next buffer.
        let end = if eof {
            cur.len()
        } else {
            memchr::memrchr(b'\n', &cur[start..]).map_or(start, |k| start + k + 1)
        };
        next.clear();
        next.extend_from_slice(&cur[end..]);
        let piece = &cur[start..end];
        let parts = if piece.len() < PARALLEL_MIN_BYTES {
            1
        } else {
            2 * threads
        };
        let (parsed, read) = rayon::join(
            || parse_pieces(&header, &lay, piece, parts, eof),
            || {
                if eof {
                    Ok(true)
                } else {
                    read_block(&mut f, &mut next, block, path)
                }
            },
        );
        match parsed {
            Some(mut c) => {
                found += c.iter().map(Entries::len).sum::<usize>();
                chunks.append(&mut c);
            }
            None => return full(),
        }
        if found > header.entries {
            return full();
        }
        if eof {
            break;
        }
        eof = read?;
        std::mem::swap(&mut cur, &mut next);
        start = 0;
    }
    if found != header.entries || mirrored_pair(header.symmetry, &chunks).is_some() {
        return full();
    }
    drop((cur, next));
    let matrix = build::assemble(header.nrows, header.ncols, header.symmetry, &chunks)
        .map_err(|kind| MmError::new(header.size_line, kind))?;
    Ok(MmMatrix { header, matrix })
}

/// Parses `piece` (complete lines) in `parts` parallel chunks; `None` on any
/// problem (the caller then diagnoses sequentially).
fn parse_pieces(
    h: &MmHeader,
    lay: &Layout,
    piece: &[u8],
    parts: usize,
    ends_file: bool,
) -> Option<Vec<Entries>> {
    let pieces = split_chunks(piece, parts.max(1));
    let last = pieces.len() - 1;
    pieces
        .par_iter()
        .enumerate()
        .map(|(k, p)| {
            let lines = memchr::memchr_iter(b'\n', p).count() + 1;
            let cap = lines.min(h.entries.saturating_add(1));
            let mut e = Entries {
                rows: Vec::with_capacity(if lay.coords { cap } else { 0 }),
                cols: Vec::with_capacity(if lay.coords { cap } else { 0 }),
                vals: Vec::with_capacity(cap),
            };
            parse_chunk(
                p,
                lay,
                usize::MAX,
                h.entries,
                ends_file && k == last,
                &mut e,
            )
            .ok()?;
            Some(e)
        })
        .collect()
}

/// Parses the content of a MatrixMarket file held in memory (see
/// [`read_matrix_market`]).
///
/// # Errors
/// An [`MmError`] naming the first problem in file order and its line: empty
/// input, bad/unknown/unsupported banner, bad size line, malformed or
/// non-finite numbers, indices 0 or past the dimensions, wrong field counts, a
/// truncated last line, too few or too many entries, invalid UTF-8.
pub fn read_matrix_market_bytes(bytes: &[u8]) -> Result<MmMatrix, MmError> {
    read_bytes(bytes, None)
}

/// [`read_matrix_market_bytes`] with the body split into `parts` chunks
/// whatever its size (normally only bodies above 1 MiB are split). The result
/// must equal [`read_matrix_market_bytes`]'s; this exists so tests and the
/// fuzzer can exercise the parallel path on small inputs.
///
/// # Errors
/// As [`read_matrix_market_bytes`].
pub fn read_matrix_market_bytes_in_chunks(bytes: &[u8], parts: usize) -> Result<MmMatrix, MmError> {
    read_bytes(bytes, Some(parts.max(1)))
}

fn read_bytes(bytes: &[u8], parts: Option<usize>) -> Result<MmMatrix, MmError> {
    let (header, body_start, body_line) = header::parse_header(bytes)?;
    check_memory(&header)?;
    check_plausible(&header, (bytes.len() - body_start) as u64)?;
    let body = &bytes[body_start..];
    let matrix = match header.format {
        MmFormat::Coordinate => {
            let chunks = parse_body(&header, body, body_line, parts)?;
            if let Some((first, second, row, col)) = mirrored_pair(header.symmetry, &chunks) {
                return Err(MmError::new(
                    data_line(body, body_line, second),
                    MmErrorKind::MirroredEntry {
                        row,
                        col,
                        first_line: data_line(body, body_line, first),
                        storage: header.symmetry.as_str(),
                    },
                ));
            }
            build::assemble(header.nrows, header.ncols, header.symmetry, &chunks)
                .map_err(|kind| MmError::new(header.size_line, kind))?
        }
        MmFormat::Array => {
            let dense = dense_from_chunks(&header, parse_body(&header, body, body_line, parts)?);
            dense_to_csr(&dense)
        }
    };
    Ok(MmMatrix { header, matrix })
}

/// Rows (or columns) a coordinate file may declare whatever its entries.
pub const ROWS_FREE: usize = 1 << 22;
/// Beyond [`ROWS_FREE`], rows (or columns) a coordinate file may declare per
/// entry: the row arrays (24 bytes a row) must stay near the size of the data.
pub const ROWS_PER_ENTRY: usize = 16;

/// Refuses a size line that the `body` bytes after it cannot fulfil, before
/// anything proportional to it is allocated ([`MmErrorKind::Implausible`] at
/// the size line): an array needs at least 2 bytes a value, a coordinate
/// entry at least 4 (`1 1\n`), and coordinate dimensions beyond
/// [`ROWS_FREE`] at most [`ROWS_PER_ENTRY`] per declared entry (a 60-byte
/// file declaring 1e9 × 1e9 with one entry read for 50 s at 15 GB).
fn check_plausible(h: &MmHeader, body: u64) -> Result<(), MmError> {
    let refuse = |msg: String| Err(MmError::new(h.size_line, MmErrorKind::Implausible(msg)));
    let (m, n) = (h.nrows as u64, h.ncols as u64);
    match h.format {
        MmFormat::Array => {
            let values = match h.symmetry {
                MmSymmetry::General => m.saturating_mul(n),
                // the strict lower triangle
                MmSymmetry::SkewSymmetric => m.saturating_mul(m.saturating_sub(1)) / 2,
                // the lower triangle
                _ => m.saturating_mul(m.saturating_add(1)) / 2,
            };
            if values.saturating_mul(2) > body.saturating_add(2) {
                return refuse(format!(
                    "the size line declares a {m} x {n} array ({values} values), but only {body} bytes follow it (at least 2 per value)"
                ));
            }
        }
        MmFormat::Coordinate => {
            let e = h.entries as u64;
            if e.saturating_mul(4) > body.saturating_add(4) {
                return refuse(format!(
                    "the size line declares {e} entries, but only {body} bytes follow it (at least 4 per entry)"
                ));
            }
            let dim = h.nrows.max(h.ncols);
            if dim > ROWS_FREE && dim / ROWS_PER_ENTRY > h.entries {
                return refuse(format!(
                    "the size line declares {m} x {n} with {e} entries: beyond {ROWS_FREE} rows, at most {ROWS_PER_ENTRY} rows per entry (the row arrays alone would take {})",
                    memory::human_bytes((dim as u64).saturating_mul(24))
                ));
            }
        }
    }
    Ok(())
}

/// Refuses a header whose size needs more memory than is available
/// ([`MmErrorKind::InsufficientMemory`] at the size line).
fn check_memory(h: &MmHeader) -> Result<(), MmError> {
    let needed = read_bytes_needed(h);
    match available_memory() {
        Some(available) if needed > available => Err(MmError::new(
            h.size_line,
            MmErrorKind::InsufficientMemory { needed, available },
        )),
        _ => Ok(()),
    }
}

/// In symmetric or skew storage, the first entry (in file order) whose mirror
/// was also stored: `(index of the mirror, index of the entry, row, col)`,
/// 0-based entry indices, 1-based row and column. `None` for general storage
/// or when each position is stored in one triangle only. Costs a sort of the
/// smaller triangle's entries, and nothing when one triangle is empty.
fn mirrored_pair(sym: MmSymmetry, chunks: &[Entries]) -> Option<(usize, usize, u64, u64)> {
    if sym == MmSymmetry::General {
        return None;
    }
    let entries = || {
        chunks
            .iter()
            .flat_map(|c| c.rows.iter().zip(&c.cols))
            .enumerate()
            .map(|(k, (&i, &j))| (k, i, j))
    };
    let (lower, upper) = entries().fold((0usize, 0usize), |(l, u), (_, i, j)| {
        (l + usize::from(i > j), u + usize::from(i < j))
    });
    if lower == 0 || upper == 0 {
        return None;
    }
    // keys (max, min) of the smaller triangle with their entry index
    let small_is_lower = lower <= upper;
    let in_small = |i: u32, j: u32| if small_is_lower { i > j } else { i < j };
    let key = |i: u32, j: u32| (u64::from(i.max(j)) << 32) | u64::from(i.min(j));
    let mut small: Vec<(u64, usize)> = entries()
        .filter(|&(_, i, j)| i != j && in_small(i, j))
        .map(|(k, i, j)| (key(i, j), k))
        .collect();
    small.sort_unstable();
    let mut best: Option<(usize, usize, u64, u64)> = None;
    for (k, i, j) in entries().filter(|&(_, i, j)| i != j && !in_small(i, j)) {
        let q = key(i, j);
        let p = small.partition_point(|e| e.0 < q);
        if let Some(&(kk, ks)) = small.get(p) {
            if kk == q {
                let (first, second) = (ks.min(k), ks.max(k));
                if best.is_none_or(|b| second < b.1) {
                    let (r, c) = if second == k { (i, j) } else { (j, i) };
                    best = Some((first, second, u64::from(r) + 1, u64::from(c) + 1));
                }
            }
        }
    }
    best
}

/// 1-based file line of the `k`-th (0-based) data line of `body`, whose first
/// line is `body_line` (blank and `%` lines are not data lines).
fn data_line(body: &[u8], body_line: usize, k: usize) -> usize {
    let mut seen = 0usize;
    for (off, l) in body.split(|&c| c == b'\n').enumerate() {
        let t = l.trim_ascii_start();
        if t.is_empty() || t[0] == b'%' {
            continue;
        }
        if seen == k {
            return body_line + off;
        }
        seen += 1;
    }
    body_line
}

/// Reads only the banner and size line of `bytes` (complex files too).
///
/// # Errors
/// The header failures of [`read_matrix_market_bytes`].
pub fn read_header_bytes(bytes: &[u8]) -> Result<MmHeader, MmError> {
    header::parse_any_header(bytes).map(|h| h.0)
}

/// Whether the MatrixMarket file at `path` declares the complex field (its
/// first 64 KiB are read for the header; an unreadable file or header gives
/// false, leaving the message to the reader that follows).
pub fn is_complex_file(path: &Path) -> bool {
    let mut head = Vec::new();
    let read = std::fs::File::open(path).and_then(|f| f.take(1 << 16).read_to_end(&mut head));
    read.is_ok() && read_header_bytes(&head).is_ok_and(|h| h.field == MmField::Complex)
}

/// Reads a dense `array` file (general, symmetric or skew-symmetric storage,
/// expanded) into a column-major [`DenseArray`].
///
/// # Errors
/// [`MmErrorKind::WrongFormat`] (line 1) for a coordinate file, otherwise as
/// [`read_matrix_market`].
pub fn read_dense_array(path: impl AsRef<Path>) -> Result<DenseArray, MmError> {
    read_dense_array_bytes(&read_file(path.as_ref())?)
}

/// [`read_dense_array`] on bytes held in memory.
///
/// # Errors
/// As [`read_dense_array`].
pub fn read_dense_array_bytes(bytes: &[u8]) -> Result<DenseArray, MmError> {
    let (header, body_start, body_line) = header::parse_header(bytes)?;
    if header.format != MmFormat::Array {
        return Err(MmError::new(
            1,
            MmErrorKind::WrongFormat {
                expected: "array",
                found: "coordinate",
            },
        ));
    }
    let chunks = parse_body(&header, &bytes[body_start..], body_line, None)?;
    Ok(dense_from_chunks(&header, chunks))
}

/// Bodies smaller than this are parsed as one chunk.
const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// Splits `body` into about `parts` pieces, each ending just after a newline
/// (the last one at the end of the body).
fn split_chunks(body: &[u8], parts: usize) -> Vec<&[u8]> {
    let mut out = Vec::with_capacity(parts);
    let mut start = 0usize;
    for k in 1..parts {
        let target = body.len() / parts * k;
        if target <= start {
            continue;
        }
        match memchr::memchr(b'\n', &body[target..]) {
            Some(off) => {
                let end = target + off + 1;
                out.push(&body[start..end]);
                start = end;
            }
            None => break,
        }
    }
    out.push(&body[start..]);
    out
}

fn layout(h: &MmHeader) -> Layout {
    Layout {
        nrows: h.nrows,
        ncols: h.ncols,
        coords: h.format == MmFormat::Coordinate,
        field: h.field,
        symmetry: h.symmetry,
    }
}

/// Parses the data lines, in parallel chunks when the body is large.
fn parse_body(
    h: &MmHeader,
    body: &[u8],
    body_line: usize,
    forced_parts: Option<usize>,
) -> Result<Vec<Entries>, MmError> {
    let lay = layout(h);
    let parts = if let Some(p) = forced_parts {
        p
    } else if body.len() < PARALLEL_MIN_BYTES {
        1
    } else {
        (2 * rayon::current_num_threads())
            .clamp(2, 64)
            .min(body.len() / (PARALLEL_MIN_BYTES / 2))
    };
    if let Some(chunks) = parse_pieces(h, &lay, body, parts, true) {
        let found: usize = chunks.iter().map(Entries::len).sum();
        if found == h.entries {
            return Ok(chunks);
        }
    }
    Err(diagnose(h, &lay, body, body_line))
}

/// Re-parses the body sequentially to find the first failure in file order.
#[cold]
fn diagnose(h: &MmHeader, lay: &Layout, body: &[u8], body_line: usize) -> MmError {
    let mut e = Entries::default();
    match parse_chunk(body, lay, h.entries, h.entries, true, &mut e) {
        Err(ce) => MmError::new(body_line + ce.line, ce.kind),
        Ok(lines) => {
            // Only a shortfall remains possible here.
            let last_line = if lines > 0 {
                body_line + lines - 1
            } else {
                body_line - 1
            };
            MmError::new(
                last_line,
                MmErrorKind::TooFewEntries {
                    declared: h.entries,
                    found: e.len(),
                },
            )
        }
    }
}

/// Expands the parsed values of an array file into a full column-major array.
fn dense_from_chunks(h: &MmHeader, chunks: Vec<Entries>) -> DenseArray {
    let (m, n) = (h.nrows, h.ncols);
    let vals = chunks.into_iter().flat_map(|c| c.vals);
    let data = match h.symmetry {
        MmSymmetry::General => vals.collect(),
        sym => {
            let mut data = vec![0.0; m * n];
            let skew = sym == MmSymmetry::SkewSymmetric;
            let mut it = vals;
            for j in 0..n {
                let first = if skew { j + 1 } else { j };
                for i in first..n {
                    let v = it.next().unwrap_or(0.0);
                    data[i + j * m] = v;
                    data[j + i * m] = if skew { -v } else { v };
                }
            }
            data
        }
    };
    DenseArray {
        nrows: m,
        ncols: n,
        data,
    }
}

/// A CSR matrix storing every entry of a dense array.
fn dense_to_csr(a: &DenseArray) -> CsrMatrix {
    let (m, n) = (a.nrows, a.ncols);
    let indptr: Vec<usize> = (0..=m).map(|i| i * n).collect();
    let mut indices = Vec::with_capacity(m * n);
    let mut data = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            indices.push(j as u32);
            data.push(a.data[i + j * m]);
        }
    }
    CsrMatrix::from_parts_unchecked(m, n, indptr, indices, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The streaming reader agrees with the in-memory reader (results and
    /// errors) for every block size, including blocks that cut the banner,
    /// the size line and data lines.
    #[test]
    fn streaming_matches_in_memory_for_all_block_sizes() {
        let mut inputs: Vec<Vec<u8>> = vec![
            b"%%MatrixMarket matrix coordinate real symmetric\n% c\n\n4 4 6\n1 1 2\n2 1 -1\n\n2 2 2\n% mid\n3 2 -1\n3 3 2\n4 4 2\n".to_vec(),
            b"%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 1.5\n1 1 2.5\n2 1 -.5".to_vec(),
            b"%%MatrixMarket matrix coordinate pattern general\n3 3 2\n3 1\n1 3\n".to_vec(),
            b"%%MatrixMarket matrix array real general\n2 1\n1.0\n2.0\n".to_vec(),
        ];
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/bad");
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        inputs.extend(names.iter().map(|p| std::fs::read(p).unwrap()));
        let tmp = std::env::temp_dir().join(format!("jdmg-mm-stream-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        for (k, bytes) in inputs.iter().enumerate() {
            let p = tmp.join(format!("{k}.mtx"));
            std::fs::write(&p, bytes).unwrap();
            let want = read_matrix_market_bytes(bytes);
            for block in [1, 2, 3, 7, 16, 64, 1 << 20] {
                assert_eq!(read_streaming(&p, block), want, "input {k}, block {block}");
            }
        }
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
