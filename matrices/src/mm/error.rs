//! Typed errors of the MatrixMarket reader.

use std::fmt;

use thiserror::Error;

/// A MatrixMarket read failure: the 1-based line where it was found and why.
///
/// `line` is 0 when the failure is not tied to a line (I/O errors, an empty
/// file). [`fmt::Display`] prints `line N: reason` (or just `reason` for line 0).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct MmError {
    /// 1-based line number, 0 when not line-specific.
    pub line: usize,
    /// What went wrong.
    pub kind: MmErrorKind,
}

impl MmError {
    /// Builds an error at `line` (1-based, 0 = not line-specific).
    pub fn new(line: usize, kind: MmErrorKind) -> Self {
        Self { line, kind }
    }
}

impl fmt::Display for MmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.kind)
        } else {
            write!(f, "line {}: {}", self.line, self.kind)
        }
    }
}

/// Every reason the reader rejects an input (one variant per failure).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MmErrorKind {
    /// The file could not be read (message of the underlying I/O error).
    #[error("I/O error: {0}")]
    Io(String),
    /// The file is empty or holds only whitespace.
    #[error("empty file")]
    Empty,
    /// The line holds bytes that are not valid UTF-8.
    #[error("invalid UTF-8 bytes")]
    NonUtf8,
    /// The first line does not start with `%%MatrixMarket`.
    #[error("missing '%%MatrixMarket' banner (first line is {found:?})")]
    MissingBanner {
        /// The first line (cut to 80 characters).
        found: String,
    },
    /// The banner has the wrong number of words or an unknown object, format,
    /// field or symmetry word.
    #[error("unknown banner: {reason}")]
    UnknownBanner {
        /// Which word is wrong.
        reason: String,
    },
    /// A valid MatrixMarket feature this reader does not support (complex
    /// field, hermitian symmetry, vector object, pattern arrays).
    #[error("unsupported MatrixMarket feature: {what}")]
    Unsupported {
        /// The unsupported feature.
        what: String,
    },
    /// The file ends before the size line.
    #[error("missing size line")]
    MissingSizeLine,
    /// The size line does not hold the expected count of non-negative integers
    /// (3 for coordinate, 2 for array).
    #[error("bad size line {found:?}: {reason}")]
    BadSizeLine {
        /// The size line as found (cut to 80 characters).
        found: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Symmetric or skew-symmetric storage declared for a rectangular matrix.
    #[error("symmetric storage needs a square matrix, got {nrows} x {ncols}")]
    NotSquare {
        /// Declared rows.
        nrows: usize,
        /// Declared columns.
        ncols: usize,
    },
    /// A dimension or entry count exceeds what the reader can index
    /// (rows and columns must fit in `u32`).
    #[error("size {size} exceeds the limit {limit}")]
    TooLarge {
        /// The offending size.
        size: u64,
        /// The largest accepted size.
        limit: u64,
    },
    /// A newline-terminated data line has too few or too many fields.
    #[error("expected {expected} fields, found {found}")]
    WrongFieldCount {
        /// Fields per line for this format and field.
        expected: usize,
        /// Fields on the line.
        found: usize,
    },
    /// The last line ends (without a newline) before all of its fields.
    #[error("truncated last line: expected {expected} fields, found {found}")]
    TruncatedLine {
        /// Fields per line for this format and field.
        expected: usize,
        /// Fields present before the end of the file.
        found: usize,
    },
    /// A token that is not a valid index (unsigned decimal) or value (decimal
    /// float, Fortran `D` exponent accepted; integer for `integer` files).
    #[error("not a valid number: {token:?}")]
    BadNumber {
        /// The token (cut to 40 characters).
        token: String,
    },
    /// A value that is NaN or infinite (including overflow such as `1e999`).
    #[error("non-finite value {token:?}")]
    NonFinite {
        /// The token (cut to 40 characters).
        token: String,
    },
    /// A 1-based index that is 0 or past the declared dimensions.
    #[error(
        "index ({row}, {col}) out of range for a {nrows} x {ncols} matrix (indices are 1-based)"
    )]
    IndexOutOfRange {
        /// Row index as written (saturated at `u64::MAX`).
        row: u64,
        /// Column index as written (saturated at `u64::MAX`).
        col: u64,
        /// Declared rows.
        nrows: usize,
        /// Declared columns.
        ncols: usize,
    },
    /// A diagonal entry in skew-symmetric storage (its diagonal is zero by
    /// definition and must not be stored).
    #[error("skew-symmetric storage holds a diagonal entry ({index}, {index})")]
    SkewDiagonal {
        /// The 1-based diagonal index.
        index: u64,
    },
    /// A diagonal entry of Hermitian storage with a nonzero imaginary part
    /// (the diagonal of a Hermitian matrix is real).
    #[error(
        "hermitian storage holds a diagonal entry ({index}, {index}) with a nonzero imaginary part"
    )]
    ComplexDiagonal {
        /// The 1-based diagonal index.
        index: u64,
    },
    /// The file ends before the declared number of entries; the error's line
    /// is the last line of the file.
    #[error("header declares {declared} entries but the file holds {found}")]
    TooFewEntries {
        /// Entries declared by the size line.
        declared: usize,
        /// Entries found.
        found: usize,
    },
    /// A data line past the declared number of entries.
    #[error("more entries than the {declared} declared in the size line")]
    TooManyEntries {
        /// Entries declared by the size line.
        declared: usize,
    },
    /// The declared dimensions need more memory than can be allocated (the
    /// error's line is the size line).
    #[error("cannot allocate {bytes} bytes for the declared dimensions")]
    OutOfMemory {
        /// Bytes requested.
        bytes: u64,
    },
    /// Reading the declared size needs more memory than the machine has
    /// available (see [`crate::mm::available_memory`]); the error's line is the
    /// size line. Nothing proportional to the size was allocated.
    #[error(
        "the declared size needs {} to read, more than the {} available (set {} to change the limit)",
        super::units::human_bytes(*needed),
        super::units::human_bytes(*available),
        super::units::MEMORY_LIMIT_ENV
    )]
    InsufficientMemory {
        /// Bytes the reader would allocate.
        needed: u64,
        /// Bytes available.
        available: u64,
    },
    /// The size line declares far more than the file can hold (the error's
    /// line is the size line; nothing proportional to it was allocated): more
    /// values or entries than the bytes after it can carry, or coordinate
    /// dimensions above [`ROWS_FREE`](crate::mm::ROWS_FREE) with more than
    /// [`ROWS_PER_ENTRY`](crate::mm::ROWS_PER_ENTRY) empty rows per entry.
    #[error("{0}")]
    Implausible(String),
    /// A coordinate size line declaring more entries than the matrix has
    /// positions (`m·n`, `n(n+1)/2` symmetric, `n(n−1)/2` skew-symmetric).
    #[error("{declared} entries declared, but a {storage} {nrows} x {ncols} matrix has at most {max} positions")]
    TooManyDeclared {
        /// Entries declared.
        declared: u64,
        /// Positions the storage has.
        max: u64,
        /// Storage word (general, symmetric, skew-symmetric).
        storage: &'static str,
        /// Declared rows.
        nrows: usize,
        /// Declared columns.
        ncols: usize,
    },
    /// Symmetric or skew-symmetric storage holding both `(i, j)` and its mirror
    /// `(j, i)`: the entry would be stored twice (a format violation, not a
    /// duplicate to sum). The error's line is the second of the two.
    #[error("{storage} storage holds both ({row}, {col}) and its mirror ({col}, {row}) (line {first_line}); store one triangle only")]
    MirroredEntry {
        /// 1-based row of this line's entry.
        row: u64,
        /// 1-based column of this line's entry.
        col: u64,
        /// Line of the mirror entry.
        first_line: usize,
        /// Storage word (symmetric, skew-symmetric).
        storage: &'static str,
    },
    /// [`crate::mm::read_dense_array`] was given a coordinate file.
    #[error("expected {expected} format, the file is {found}")]
    WrongFormat {
        /// The format the function reads.
        expected: &'static str,
        /// The format of the file.
        found: &'static str,
    },
}

/// Cuts `bytes` to at most `max` characters for an error message (lossy UTF-8).
pub(crate) fn excerpt(bytes: &[u8], max: usize) -> String {
    let s = String::from_utf8_lossy(bytes);
    if s.chars().count() <= max {
        s.into_owned()
    } else {
        let mut out: String = s.chars().take(max).collect();
        out.push('…');
        out
    }
}
