//! Data-line parsing: one chunk of the body at a time (chunks are parsed in
//! parallel by the caller).

use super::error::{excerpt, MmErrorKind};
use super::header::{MmField, MmSymmetry};

/// What a data line must hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    pub nrows: usize,
    pub ncols: usize,
    /// `true` for coordinate lines (`i j [v]`), `false` for array lines (`v`).
    pub coords: bool,
    pub field: MmField,
    pub symmetry: MmSymmetry,
}

impl Layout {
    /// Fields per data line.
    pub fn fields(&self) -> usize {
        let coords = if self.coords { 2 } else { 0 };
        coords + usize::from(self.field != MmField::Pattern)
    }
}

/// Entries parsed from one chunk: 0-based row/col (empty for arrays) and values.
#[derive(Debug, Default)]
pub(crate) struct Entries {
    pub rows: Vec<u32>,
    pub cols: Vec<u32>,
    pub vals: Vec<f64>,
}

impl Entries {
    pub fn len(&self) -> usize {
        self.vals.len()
    }
}

/// A failure inside a chunk: 0-based line offset from the chunk start.
#[derive(Debug)]
pub(crate) struct ChunkError {
    pub line: usize,
    pub kind: MmErrorKind,
}

#[inline(always)]
fn is_blank(c: u8) -> bool {
    c == b' ' || c == b'\t' || c == b'\r'
}

/// Skips blanks, returns the next token of the current line (empty at the end
/// of the line or of the input).
#[inline(always)]
fn token<'a>(b: &'a [u8], pos: &mut usize) -> &'a [u8] {
    let n = b.len();
    let mut p = *pos;
    while p < n && is_blank(b[p]) {
        p += 1;
    }
    let start = p;
    while p < n && !is_blank(b[p]) && b[p] != b'\n' {
        p += 1;
    }
    *pos = p;
    &b[start..p]
}

fn bad_number(t: &[u8]) -> MmErrorKind {
    MmErrorKind::BadNumber {
        token: excerpt(t, 40),
    }
}

/// Parses a real value: decimal float (`-.5`, `1.5E+03`) or Fortran `1.5D+03`.
#[inline(always)]
pub(crate) fn parse_real(t: &[u8]) -> Result<f64, MmErrorKind> {
    let v = match fast_float2::parse::<f64, _>(t) {
        Ok(v) => v,
        Err(_) => parse_fortran(t)?,
    };
    if v.is_finite() {
        Ok(v)
    } else {
        Err(MmErrorKind::NonFinite {
            token: excerpt(t, 40),
        })
    }
}

#[cold]
fn parse_fortran(t: &[u8]) -> Result<f64, MmErrorKind> {
    let mut buf = [0u8; 128];
    if t.len() > buf.len() || !t.iter().any(|&c| c == b'd' || c == b'D') {
        return Err(bad_number(t));
    }
    for (o, &c) in buf.iter_mut().zip(t) {
        *o = if c == b'd' || c == b'D' { b'e' } else { c };
    }
    fast_float2::parse::<f64, _>(&buf[..t.len()]).map_err(|_| bad_number(t))
}

/// Parses an `integer` field value: optional sign and decimal digits.
fn parse_integer(t: &[u8]) -> Result<f64, MmErrorKind> {
    let (neg, digits) = match t {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, t),
    };
    if digits.is_empty() {
        return Err(bad_number(t));
    }
    let mut v: i64 = 0;
    for &c in digits {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return Err(bad_number(t));
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(i64::from(d)))
            .ok_or_else(|| bad_number(t))?;
    }
    Ok(if neg { -(v as f64) } else { v as f64 })
}

#[inline(always)]
fn skip_blanks(b: &[u8], p: &mut usize) {
    while *p < b.len() && is_blank(b[*p]) {
        *p += 1;
    }
}

/// `true` if position `p` ends a token (blank, newline or end of input).
#[inline(always)]
fn at_delim(b: &[u8], p: usize) -> bool {
    p >= b.len() || is_blank(b[p]) || b[p] == b'\n'
}

/// End of the token starting at `p`.
fn token_end(b: &[u8], mut p: usize) -> usize {
    while !at_delim(b, p) {
        p += 1;
    }
    p
}

/// Next index field of the line, parsed in place; `None` at the end of the
/// line. Indices are unsigned decimal digits, saturating at `u64::MAX` (then
/// reported out of range by the caller).
#[inline(always)]
fn index_field(b: &[u8], pos: &mut usize) -> Result<Option<u64>, MmErrorKind> {
    skip_blanks(b, pos);
    let start = *pos;
    if start >= b.len() || b[start] == b'\n' {
        return Ok(None);
    }
    let mut v: u64 = 0;
    let mut p = start;
    while p < b.len() {
        let d = b[p].wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = v.saturating_mul(10).saturating_add(u64::from(d));
        p += 1;
    }
    if p == start || !at_delim(b, p) {
        return Err(bad_number(&b[start..token_end(b, start)]));
    }
    *pos = p;
    Ok(Some(v))
}

/// Next real field of the line, parsed in place; `None` at the end of the
/// line. Same acceptance as [`parse_real`] (which handles the slow cases).
#[inline(always)]
fn real_field(b: &[u8], pos: &mut usize) -> Result<Option<f64>, MmErrorKind> {
    skip_blanks(b, pos);
    let start = *pos;
    if start >= b.len() || b[start] == b'\n' {
        return Ok(None);
    }
    if let Ok((v, k)) = fast_float2::parse_partial::<f64, _>(&b[start..]) {
        if k > 0 && at_delim(b, start + k) && v.is_finite() {
            *pos = start + k;
            return Ok(Some(v));
        }
    }
    let end = token_end(b, start);
    *pos = end;
    parse_real(&b[start..end]).map(Some)
}

/// Parses every data line of `b` (which starts at a line start) into `out`.
///
/// `limit`: the number of entries after which one more data line is
/// [`MmErrorKind::TooManyEntries`] (`usize::MAX` to disable; `declared` is
/// what the error reports). `ends_file`: `b` ends the file, so a short
/// unterminated last line is [`MmErrorKind::TruncatedLine`].
/// Returns the number of lines in `b` (a final unterminated line counts).
pub(crate) fn parse_chunk(
    b: &[u8],
    lay: &Layout,
    limit: usize,
    declared: usize,
    ends_file: bool,
    out: &mut Entries,
) -> Result<usize, ChunkError> {
    let n = b.len();
    let mut pos = 0usize;
    let mut line = 0usize;
    let expected = lay.fields();
    let skew = lay.symmetry == MmSymmetry::SkewSymmetric;
    while pos < n {
        let line_start = pos;
        while pos < n && is_blank(b[pos]) {
            pos += 1;
        }
        if pos == n {
            return Ok(line + 1);
        }
        let c = b[pos];
        if c == b'\n' {
            pos += 1;
            line += 1;
            continue;
        }
        if c == b'%' {
            let end = memchr::memchr(b'\n', &b[pos..]).map_or(n, |k| pos + k);
            if std::str::from_utf8(&b[line_start..end]).is_err() {
                return Err(ChunkError {
                    line,
                    kind: MmErrorKind::NonUtf8,
                });
            }
            pos = end + 1;
            line += 1;
            continue;
        }
        match data_line(b, &mut pos, lay, expected, skew, ends_file) {
            Ok((r, col, v)) => {
                if out.len() >= limit {
                    return Err(ChunkError {
                        line,
                        kind: MmErrorKind::TooManyEntries { declared },
                    });
                }
                if lay.coords {
                    out.rows.push(r);
                    out.cols.push(col);
                }
                out.vals.push(v);
            }
            Err(kind) => {
                let end = memchr::memchr(b'\n', &b[line_start..]).map_or(n, |k| line_start + k);
                let kind = if std::str::from_utf8(&b[line_start..end]).is_err() {
                    MmErrorKind::NonUtf8
                } else if out.len() >= limit {
                    MmErrorKind::TooManyEntries { declared }
                } else {
                    kind
                };
                return Err(ChunkError { line, kind });
            }
        }
        // `pos` is at the '\n' ending the line, or at the end of the input.
        pos += 1;
        line += 1;
    }
    Ok(line)
}

/// Parses one data line starting at a non-blank byte; leaves `pos` at its
/// terminating `\n` (or the end of input). Returns 0-based (row, col) and value.
#[inline(always)]
fn data_line(
    b: &[u8],
    pos: &mut usize,
    lay: &Layout,
    expected: usize,
    skew: bool,
    ends_file: bool,
) -> Result<(u32, u32, f64), MmErrorKind> {
    let n = b.len();
    let missing = |found: usize, pos: usize| {
        if pos >= n && ends_file {
            MmErrorKind::TruncatedLine { expected, found }
        } else {
            MmErrorKind::WrongFieldCount { expected, found }
        }
    };
    let (mut i, mut j) = (0u64, 0u64);
    if lay.coords {
        i = match index_field(b, pos)? {
            Some(v) => v,
            None => return Err(missing(0, *pos)),
        };
        j = match index_field(b, pos)? {
            Some(v) => v,
            None => return Err(missing(1, *pos)),
        };
    }
    let v = match lay.field {
        MmField::Pattern => 1.0,
        // Complex files never reach this parser (`parse_header` refuses them).
        MmField::Real | MmField::Complex => match real_field(b, pos)? {
            Some(v) => v,
            None => return Err(missing(expected - 1, *pos)),
        },
        MmField::Integer => {
            let t = token(b, pos);
            if t.is_empty() {
                return Err(missing(expected - 1, *pos));
            }
            parse_integer(t)?
        }
    };
    // Anything else on the line is an extra field.
    let mut extra = 0usize;
    while !token(b, pos).is_empty() {
        extra += 1;
    }
    if extra > 0 {
        return Err(MmErrorKind::WrongFieldCount {
            expected,
            found: expected + extra,
        });
    }
    if !lay.coords {
        return Ok((0, 0, v));
    }
    if i == 0 || j == 0 || i > lay.nrows as u64 || j > lay.ncols as u64 {
        return Err(MmErrorKind::IndexOutOfRange {
            row: i,
            col: j,
            nrows: lay.nrows,
            ncols: lay.ncols,
        });
    }
    if skew && i == j {
        return Err(MmErrorKind::SkewDiagonal { index: i });
    }
    Ok(((i - 1) as u32, (j - 1) as u32, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(parse_real(b"-.4755112").unwrap(), -0.4755112);
        assert_eq!(parse_real(b"1.5E+03").unwrap(), 1500.0);
        assert_eq!(parse_real(b"1.5D+03").unwrap(), 1500.0);
        assert_eq!(parse_real(b"-2.5d-1").unwrap(), -0.25);
        assert!(matches!(
            parse_real(b"nan"),
            Err(MmErrorKind::NonFinite { .. })
        ));
        assert!(matches!(
            parse_real(b"-Infinity"),
            Err(MmErrorKind::NonFinite { .. })
        ));
        assert!(matches!(
            parse_real(b"1e999"),
            Err(MmErrorKind::NonFinite { .. })
        ));
        assert!(matches!(
            parse_real(b"1.5x"),
            Err(MmErrorKind::BadNumber { .. })
        ));
        assert!(matches!(
            parse_real(b"1.5e"),
            Err(MmErrorKind::BadNumber { .. })
        ));
        assert_eq!(parse_integer(b"-17").unwrap(), -17.0);
        assert!(parse_integer(b"1.0").is_err());
        let idx = |t: &[u8]| index_field(t, &mut 0);
        assert_eq!(idx(b"99999999999999999999999 ").unwrap(), Some(u64::MAX));
        assert_eq!(idx(b"  42\n").unwrap(), Some(42));
        assert_eq!(idx(b"  \n").unwrap(), None);
        assert!(idx(b"-1").is_err());
        assert!(idx(b"12x 3").is_err());
        let real = |t: &[u8]| real_field(t, &mut 0);
        assert_eq!(real(b" -.5\t").unwrap(), Some(-0.5));
        assert_eq!(real(b"2.5D+01\n").unwrap(), Some(25.0));
        assert!(matches!(
            real(b"1.0% x"),
            Err(MmErrorKind::BadNumber { .. })
        ));
        assert!(matches!(real(b"inf "), Err(MmErrorKind::NonFinite { .. })));
    }
}
