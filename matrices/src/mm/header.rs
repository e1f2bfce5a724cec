//! Banner and size-line parsing.

use serde::{Deserialize, Serialize};

use super::error::{excerpt, MmError, MmErrorKind};

/// Storage format word of the banner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MmFormat {
    /// Sparse `i j [value]` triplets.
    Coordinate,
    /// Dense column-major values, one per line.
    Array,
}

/// Field word of the banner (`complex` is read by [`super::read_complex_matrix_market`]
/// only; the real readers reject it as unsupported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MmField {
    /// Floating-point values (`real`, also accepted: `double`).
    Real,
    /// Integer values (stored as `f64`).
    Integer,
    /// No values: every stored entry is 1.0.
    Pattern,
    /// Two values per entry, real and imaginary part.
    Complex,
}

/// Symmetry word of the banner (`hermitian`, with the complex field only, is
/// read by [`super::read_complex_matrix_market`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MmSymmetry {
    /// Every entry stored.
    General,
    /// One triangle stored, `a_ji = a_ij`.
    Symmetric,
    /// Strict triangle stored, `a_ji = -a_ij`, zero diagonal.
    SkewSymmetric,
    /// One triangle stored, `a_ji = conj(a_ij)`, real diagonal (complex field only).
    Hermitian,
}

impl MmFormat {
    /// The banner word.
    pub fn as_str(self) -> &'static str {
        match self {
            MmFormat::Coordinate => "coordinate",
            MmFormat::Array => "array",
        }
    }
}

impl MmField {
    /// The banner word.
    pub fn as_str(self) -> &'static str {
        match self {
            MmField::Real => "real",
            MmField::Integer => "integer",
            MmField::Pattern => "pattern",
            MmField::Complex => "complex",
        }
    }
}

impl MmSymmetry {
    /// The banner word.
    pub fn as_str(self) -> &'static str {
        match self {
            MmSymmetry::General => "general",
            MmSymmetry::Symmetric => "symmetric",
            MmSymmetry::SkewSymmetric => "skew-symmetric",
            MmSymmetry::Hermitian => "hermitian",
        }
    }
}

/// What the banner and size line of a MatrixMarket file declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MmHeader {
    /// Coordinate or array.
    pub format: MmFormat,
    /// Real, integer or pattern.
    pub field: MmField,
    /// General, symmetric or skew-symmetric storage.
    pub symmetry: MmSymmetry,
    /// Declared rows.
    pub nrows: usize,
    /// Declared columns.
    pub ncols: usize,
    /// Entries stored in the file: the declared count for coordinate files,
    /// the implied count (`m*n`, `n(n+1)/2`, `n(n-1)/2`) for array files.
    pub entries: usize,
    /// 1-based line number of the size line.
    pub size_line: usize,
}

/// The line starting at `pos` without its `\n` (and a trailing `\r`), and the
/// position after the newline.
pub(crate) fn next_line(b: &[u8], pos: usize) -> (&[u8], usize) {
    let end = memchr::memchr(b'\n', &b[pos..]).map_or(b.len(), |k| pos + k);
    let mut line = &b[pos..end];
    if let [rest @ .., b'\r'] = line {
        line = rest;
    }
    (line, (end + 1).min(b.len()))
}

/// Largest accepted row/column count (indices are stored as `u32`).
pub(crate) const MAX_DIM: u64 = u32::MAX as u64;

/// Parses the banner, comments and size line of a real (`real`, `integer`,
/// `pattern`) file. Returns the header, the byte offset of the first data line
/// and its 1-based line number. A complex file is
/// [`MmErrorKind::Unsupported`], naming the complex reader.
pub(crate) fn parse_header(b: &[u8]) -> Result<(MmHeader, usize, usize), MmError> {
    let parsed = parse_any_header(b)?;
    if parsed.0.field == MmField::Complex {
        return Err(MmError::new(
            1,
            MmErrorKind::Unsupported {
                what: "complex field in a real reader (read it with \
                       matrices::mm::read_complex_matrix_market)"
                    .to_string(),
            },
        ));
    }
    Ok(parsed)
}

/// [`parse_header`] for any field, complex included.
pub(crate) fn parse_any_header(b: &[u8]) -> Result<(MmHeader, usize, usize), MmError> {
    let err = |line: usize, kind: MmErrorKind| MmError::new(line, kind);
    if b.iter().all(|c| c.is_ascii_whitespace()) {
        return Err(err(0, MmErrorKind::Empty));
    }
    let (first, mut pos) = next_line(b, 0);
    let first = std::str::from_utf8(first).map_err(|_| err(1, MmErrorKind::NonUtf8))?;
    let mut words = first.split_ascii_whitespace();
    let tag = words.next().unwrap_or("");
    if !tag.eq_ignore_ascii_case("%%MatrixMarket") {
        return Err(err(
            1,
            MmErrorKind::MissingBanner {
                found: excerpt(first.as_bytes(), 80),
            },
        ));
    }
    let words: Vec<String> = words.map(|w| w.to_ascii_lowercase()).collect();
    let unknown = |reason: String| err(1, MmErrorKind::UnknownBanner { reason });
    let unsupported = |what: &str| {
        err(
            1,
            MmErrorKind::Unsupported {
                what: what.to_string(),
            },
        )
    };
    if words.len() != 4 {
        return Err(unknown(format!(
            "expected 4 words after %%MatrixMarket (object format field symmetry), found {}",
            words.len()
        )));
    }
    match words[0].as_str() {
        "matrix" => {}
        "vector" => return Err(unsupported("object 'vector' (only 'matrix' is read)")),
        w => {
            return Err(unknown(format!(
                "unknown object {:?}",
                excerpt(w.as_bytes(), 40)
            )))
        }
    }
    let format = match words[1].as_str() {
        "coordinate" => MmFormat::Coordinate,
        "array" => MmFormat::Array,
        w => {
            return Err(unknown(format!(
                "unknown format {:?}",
                excerpt(w.as_bytes(), 40)
            )))
        }
    };
    let field = match words[2].as_str() {
        "real" | "double" => MmField::Real,
        "integer" => MmField::Integer,
        "pattern" => MmField::Pattern,
        "complex" => MmField::Complex,
        w => {
            return Err(unknown(format!(
                "unknown field {:?}",
                excerpt(w.as_bytes(), 40)
            )))
        }
    };
    let symmetry = match words[3].as_str() {
        "general" => MmSymmetry::General,
        "symmetric" => MmSymmetry::Symmetric,
        "skew-symmetric" => MmSymmetry::SkewSymmetric,
        "hermitian" => MmSymmetry::Hermitian,
        w => {
            return Err(unknown(format!(
                "unknown symmetry {:?}",
                excerpt(w.as_bytes(), 40)
            )))
        }
    };
    if symmetry == MmSymmetry::Hermitian && field != MmField::Complex {
        return Err(unsupported(
            "hermitian symmetry with a real field (write it as symmetric)",
        ));
    }
    if format == MmFormat::Array && field == MmField::Pattern {
        return Err(unsupported("pattern field in array format"));
    }

    // Comments and blank lines up to the size line.
    let mut line = 2usize;
    loop {
        if pos >= b.len() {
            return Err(err(line, MmErrorKind::MissingSizeLine));
        }
        let (l, next) = next_line(b, pos);
        let l = std::str::from_utf8(l).map_err(|_| err(line, MmErrorKind::NonUtf8))?;
        let t = l.trim_ascii();
        if t.is_empty() || t.starts_with('%') {
            pos = next;
            line += 1;
            continue;
        }
        let expected = match format {
            MmFormat::Coordinate => 3,
            MmFormat::Array => 2,
        };
        let bad = |reason: String| {
            err(
                line,
                MmErrorKind::BadSizeLine {
                    found: excerpt(t.as_bytes(), 80),
                    reason,
                },
            )
        };
        let toks: Vec<&str> = t.split_ascii_whitespace().collect();
        if toks.len() != expected {
            return Err(bad(format!(
                "expected {expected} integers for {} format, found {} words",
                format.as_str(),
                toks.len()
            )));
        }
        let mut nums = [0u64; 3];
        for (k, tok) in toks.iter().enumerate() {
            if tok.is_empty() || !tok.bytes().all(|c| c.is_ascii_digit()) {
                return Err(bad(format!(
                    "{:?} is not a non-negative integer",
                    excerpt(tok.as_bytes(), 40)
                )));
            }
            nums[k] = tok.parse::<u64>().map_err(|_| {
                bad(format!(
                    "{:?} does not fit in 64 bits (dimensions may be at most {MAX_DIM})",
                    excerpt(tok.as_bytes(), 40)
                ))
            })?;
        }
        let (nrows, ncols) = (nums[0], nums[1]);
        for d in [nrows, ncols] {
            if d > MAX_DIM {
                return Err(err(
                    line,
                    MmErrorKind::TooLarge {
                        size: d,
                        limit: MAX_DIM,
                    },
                ));
            }
        }
        let (nrows, ncols) = (nrows as usize, ncols as usize);
        if symmetry != MmSymmetry::General && nrows != ncols {
            return Err(err(line, MmErrorKind::NotSquare { nrows, ncols }));
        }
        let entries: u64 = match format {
            MmFormat::Coordinate => nums[2],
            MmFormat::Array => {
                let (m, n) = (nrows as u64, ncols as u64);
                match symmetry {
                    MmSymmetry::General => m.saturating_mul(n),
                    MmSymmetry::Symmetric | MmSymmetry::Hermitian => n.saturating_mul(n + 1) / 2,
                    MmSymmetry::SkewSymmetric => n * n.saturating_sub(1) / 2,
                }
            }
        };
        if format == MmFormat::Coordinate {
            let (m, n) = (nrows as u64, ncols as u64);
            let max = match symmetry {
                MmSymmetry::General => m.saturating_mul(n),
                MmSymmetry::Symmetric | MmSymmetry::Hermitian => n.saturating_mul(n + 1) / 2,
                MmSymmetry::SkewSymmetric => n * n.saturating_sub(1) / 2,
            };
            if entries > max {
                return Err(err(
                    line,
                    MmErrorKind::TooManyDeclared {
                        declared: entries,
                        max,
                        storage: symmetry.as_str(),
                        nrows,
                        ncols,
                    },
                ));
            }
        }
        if entries > usize::MAX as u64 / 2 {
            return Err(err(
                line,
                MmErrorKind::TooLarge {
                    size: entries,
                    limit: usize::MAX as u64 / 2,
                },
            ));
        }
        let header = MmHeader {
            format,
            field,
            symmetry,
            nrows,
            ncols,
            entries: entries as usize,
            size_line: line,
        };
        return Ok((header, next, line + 1));
    }
}
