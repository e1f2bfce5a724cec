//! MatrixMarket writers with exact round-trip of every finite `f64`.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use rayon::prelude::*;

use crate::CsrMatrix;

/// Entries formatted per parallel batch before it is written out.
const BATCH_ENTRIES: usize = 1 << 20;

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Appends `v` in the shortest decimal form that parses back to the same bits
/// (Rust's `{:?}`: `-0.0`, `5e-324`, `1e308`, ...).
#[inline]
fn push_f64(buf: &mut Vec<u8>, v: f64) {
    // Writing to a Vec cannot fail.
    let _ = write!(buf, "{v:?}");
}

/// Checks `a` is square and symmetric with bit-identical mirrored values and
/// no one-sided entries.
fn check_symmetric(a: &CsrMatrix) -> io::Result<()> {
    if a.nrows() != a.ncols() {
        return Err(invalid(format!(
            "symmetric storage needs a square matrix, got {} x {}",
            a.nrows(),
            a.ncols()
        )));
    }
    let bad = (0..a.nrows()).into_par_iter().find_map_first(|i| {
        let (cols, vals) = a.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            let j = j as usize;
            if j == i {
                continue;
            }
            let (cj, vj) = a.row(j);
            match cj.binary_search(&(i as u32)) {
                Ok(p) if vj[p].to_bits() == v.to_bits() => {}
                _ => return Some((i, j)),
            }
        }
        None
    });
    match bad {
        Some((i, j)) => Err(invalid(format!(
            "matrix is not exactly symmetric at ({}, {}); write it as general",
            i + 1,
            j + 1
        ))),
        None => Ok(()),
    }
}

/// Writes `a` as a MatrixMarket `coordinate real` file.
///
/// With `symmetric`, the banner says `symmetric` and only the lower triangle
/// (`i >= j`) is written; otherwise every stored entry (`general`). Entries are
/// written row by row, explicit zeros included, values in shortest round-trip
/// form, so reading the file back gives `a` bit for bit. Rows are formatted in
/// parallel batches.
///
/// # Errors
/// `InvalidInput` if a value is NaN or infinite, or if `symmetric` is asked for
/// a matrix that is not square or not exactly (bitwise, structurally)
/// symmetric; otherwise any error of `w`.
pub fn write_coordinate<W: Write>(mut w: W, a: &CsrMatrix, symmetric: bool) -> io::Result<()> {
    if let Some(p) = a.data().iter().position(|v| !v.is_finite()) {
        return Err(invalid(format!(
            "non-finite value {} at stored entry {p}",
            a.data()[p]
        )));
    }
    if symmetric {
        check_symmetric(a)?;
    }
    let lower = |i: usize| {
        let (cols, _) = a.row(i);
        cols.partition_point(|&c| c as usize <= i)
    };
    let entries: usize = if symmetric {
        (0..a.nrows()).into_par_iter().map(lower).sum()
    } else {
        a.nnz()
    };
    writeln!(
        w,
        "%%MatrixMarket matrix coordinate real {}",
        if symmetric { "symmetric" } else { "general" }
    )?;
    writeln!(w, "% written by jdmg (matrices::mm)")?;
    writeln!(w, "{} {} {}", a.nrows(), a.ncols(), entries)?;

    let indptr = a.indptr();
    let mut r0 = 0usize;
    while r0 < a.nrows() {
        // Rows [r0, r1) hold about BATCH_ENTRIES * threads entries.
        let budget = BATCH_ENTRIES * rayon::current_num_threads().max(1);
        let r1 = indptr
            .partition_point(|&p| p < indptr[r0] + budget)
            .clamp(r0 + 1, a.nrows());
        let step = (r1 - r0)
            .div_ceil(4 * rayon::current_num_threads().max(1))
            .max(1);
        let blocks: Vec<Vec<u8>> = (r0..r1)
            .step_by(step)
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|lo| {
                let hi = (lo + step).min(r1);
                let mut buf = Vec::with_capacity((indptr[hi] - indptr[lo]) * 32);
                for i in lo..hi {
                    let (cols, vals) = a.row(i);
                    let n = if symmetric { lower(i) } else { cols.len() };
                    for (&j, &v) in cols[..n].iter().zip(&vals[..n]) {
                        let _ = write!(buf, "{} {} ", i + 1, j as usize + 1);
                        push_f64(&mut buf, v);
                        buf.push(b'\n');
                    }
                }
                buf
            })
            .collect();
        for b in &blocks {
            w.write_all(b)?;
        }
        r0 = r1;
    }
    w.flush()
}

/// [`write_coordinate`] to `path`, atomically ([`write_file_atomic`]): an
/// interrupted write never leaves a truncated file at `path`.
///
/// # Errors
/// As [`write_coordinate`], plus file creation and rename errors.
pub fn write_coordinate_file(
    path: impl AsRef<Path>,
    a: &CsrMatrix,
    symmetric: bool,
) -> io::Result<()> {
    write_file_atomic(path.as_ref(), |w| write_coordinate(w, a, symmetric))
}

/// Writes a dense column-major `nrows x ncols` block as a MatrixMarket
/// `array real general` file, one value per line in shortest round-trip form.
///
/// # Errors
/// `InvalidInput` if `data.len() != nrows * ncols` or a value is NaN or
/// infinite; otherwise any error of `w`.
pub fn write_array<W: Write>(mut w: W, nrows: usize, ncols: usize, data: &[f64]) -> io::Result<()> {
    if Some(data.len()) != nrows.checked_mul(ncols) {
        return Err(invalid(format!(
            "array has {} values, expected {nrows} x {ncols}",
            data.len()
        )));
    }
    if let Some(p) = data.iter().position(|v| !v.is_finite()) {
        return Err(invalid(format!(
            "non-finite value {} at position {p}",
            data[p]
        )));
    }
    writeln!(w, "%%MatrixMarket matrix array real general")?;
    writeln!(w, "% written by jdmg (matrices::mm)")?;
    writeln!(w, "{nrows} {ncols}")?;
    for batch in data.chunks(BATCH_ENTRIES * 4) {
        let blocks: Vec<Vec<u8>> = batch
            .par_chunks(BATCH_ENTRIES / 4)
            .map(|vals| {
                let mut buf = Vec::with_capacity(vals.len() * 24);
                for &v in vals {
                    push_f64(&mut buf, v);
                    buf.push(b'\n');
                }
                buf
            })
            .collect();
        for b in &blocks {
            w.write_all(b)?;
        }
    }
    w.flush()
}

/// [`write_array`] to `path`, atomically ([`write_file_atomic`]).
///
/// # Errors
/// As [`write_array`], plus file creation and rename errors.
pub fn write_array_file(
    path: impl AsRef<Path>,
    nrows: usize,
    ncols: usize,
    data: &[f64],
) -> io::Result<()> {
    write_file_atomic(path.as_ref(), |w| write_array(w, nrows, ncols, data))
}

/// The temporary name beside `path` that [`write_file_atomic`] writes to:
/// `.NAME.tmp.PID` in the same directory (so the final rename stays on one
/// file system).
pub fn temp_path(path: &Path) -> std::path::PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    path.with_file_name(format!(".{name}.tmp.{}", std::process::id()))
}

/// The temporary file [`write_file_atomic`] will write for `path` (beside the
/// file a symbolic link points to); `None` when `path` is written in place (a
/// device, FIFO or socket). For a caller that must remove it on a signal.
///
/// # Errors
/// Reading `path`'s metadata or resolving its link.
pub fn atomic_temp_path(path: &Path) -> io::Result<Option<std::path::PathBuf>> {
    Ok(atomic_target(path)?.map(|t| temp_path(&t)))
}

/// Writes a file atomically: `write` fills a buffered temporary file beside
/// `path` ([`temp_path`]), which is flushed, synced and renamed over `path`.
/// Readers of `path` see the old file or the complete new one, never a
/// truncated one; on any error the temporary file is removed and `path` is
/// untouched. A symbolic link is followed (its target is replaced, the link
/// kept); a device, FIFO or socket (`/dev/null`, `/dev/stdout`) is written in
/// place.
///
/// # Errors
/// Creating, writing, syncing or renaming the temporary file, or `write`'s
/// own error.
pub fn write_file_atomic(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let target = match atomic_target(path)? {
        Some(t) => t,
        None => {
            // a device, FIFO or socket (`/dev/null`, `/dev/stdout`): written in place
            let mut w = BufWriter::new(std::fs::OpenOptions::new().write(true).open(path)?);
            write(&mut w)?;
            return w.flush();
        }
    };
    let path = target.as_path();
    let tmp = temp_path(path);
    let result = (|| {
        let mut w = BufWriter::new(File::create(&tmp)?);
        write(&mut w)?;
        w.flush()?;
        w.get_ref().sync_all()?;
        drop(w);
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Checks that [`write_file_atomic`] can later write `path`, by creating and
/// removing its temporary file now (before long work whose result would be
/// lost). Also refuses a `path` that is a directory.
///
/// # Errors
/// The creation error of the temporary file (missing directory, permission),
/// or `IsADirectory`.
pub fn check_writable(path: &Path) -> io::Result<()> {
    if path.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "is a directory",
        ));
    }
    match atomic_target(path)? {
        Some(target) => {
            let tmp = temp_path(&target);
            File::create(&tmp)?;
            std::fs::remove_file(&tmp)
        }
        None => std::fs::OpenOptions::new().write(true).open(path).map(drop),
    }
}

/// Where [`write_file_atomic`] renames its temporary file: `path` itself, or
/// the file a symbolic link points to (the link stays a link); `None` when
/// `path` is a device, FIFO or socket, which is written in place (renaming
/// over `/dev/null` would replace the device).
fn atomic_target(path: &Path) -> io::Result<Option<std::path::PathBuf>> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => Ok(None),
        Ok(_) => Ok(Some(std::fs::canonicalize(path)?)),
        // missing: created by the rename (a dangling link is written through)
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Some(path.to_path_buf())),
        Err(e) => Err(e),
    }
}
