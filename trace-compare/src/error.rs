//! The errors of reading and comparing samples.

use std::fmt;
use std::path::PathBuf;

/// What kind of input was refused.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A file or directory could not be read.
    Io,
    /// A file is not JSON, or not of the shape expected.
    Format,
    /// A file is of a format version this reader does not read.
    Version,
    /// A value is NaN or infinite.
    NonFinite,
    /// A label, group or option names nothing that exists, or is out of range.
    Argument,
}

/// Why input was refused: names the file (when there is one), the place in it
/// (a field path such as `results[1].times[3]`, or a line), what was found and
/// what was expected.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    path: Option<PathBuf>,
    place: String,
    found: String,
    expected: String,
}

impl Error {
    /// An error of `kind` at `place` (a field path or line), with what was
    /// found and what was expected.
    pub fn new(
        kind: ErrorKind,
        place: impl Into<String>,
        found: impl Into<String>,
        expected: impl Into<String>,
    ) -> Error {
        Error { kind, path: None, place: place.into(), found: found.into(), expected: expected.into() }
    }

    /// An error whose message says it all (it already names its file).
    pub fn message(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, path: None, place: String::new(), found: message.into(), expected: String::new() }
    }

    /// The same error, naming the file it is about.
    pub fn in_file(mut self, path: impl Into<PathBuf>) -> Error {
        self.path = Some(path.into());
        self
    }

    /// What kind of input was refused.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The file the error is about, when there is one.
    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = &self.path {
            write!(f, "{}: ", p.display())?;
        }
        if !self.place.is_empty() {
            write!(f, "{}: ", self.place)?;
        }
        if self.expected.is_empty() {
            f.write_str(&self.found)
        } else {
            write!(f, "found {}; expected {}", self.found, self.expected)
        }
    }
}

impl std::error::Error for Error {}

/// Refuses a NaN or infinite value at `place`.
pub(crate) fn finite(value: f64, place: impl FnOnce() -> String) -> Result<f64, Error> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(Error::new(ErrorKind::NonFinite, place(), value.to_string(), "a finite number"))
    }
}
