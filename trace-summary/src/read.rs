//! Reading a `timings.json` back, and a human view of it.

use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};

use crate::format::{FORMAT_VERSION, OLDEST_READ_VERSION};
use crate::model::Timings;

/// Why a timings file could not be read.
#[non_exhaustive]
#[derive(Debug)]
pub enum ReadError {
    /// The file could not be read.
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not JSON of the expected shape.
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// The file is of another format version.
    Version {
        /// The file.
        path: PathBuf,
        /// The version the file says it is, if it says.
        found: Option<u64>,
        /// The version this reader reads.
        expected: u32,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io { path, source } => write!(f, "{}: cannot be read: {source}", path.display()),
            ReadError::Parse { path, message } => {
                write!(f, "{}: not a timings summary: {message}", path.display())
            }
            ReadError::Version { path, found: Some(v), expected } => write!(
                f,
                "{}: format_version {v} is not supported; this reader reads format_version {expected}",
                path.display()
            ),
            ReadError::Version { path, found: None, expected } => write!(
                f,
                "{}: has no numeric format_version; expected format_version {expected}",
                path.display()
            ),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl Timings {
    /// Reads a `timings.json` of format 3 or 2 (which has no `stacks`: they
    /// read as off). Unknown fields are ignored; any other `format_version`
    /// is refused with an error naming the file and both versions.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Timings, ReadError> {
        let path = path.as_ref();
        let text =
            std::fs::read(path).map_err(|source| ReadError::Io { path: path.to_path_buf(), source })?;
        Self::from_slice(&text, path)
    }

    /// Like [`Timings::from_path`], from bytes already read; `path` names them in errors.
    pub fn from_slice(bytes: &[u8], path: &Path) -> Result<Timings, ReadError> {
        let parse =
            |e: serde_json::Error| ReadError::Parse { path: path.to_path_buf(), message: e.to_string() };
        let value: serde_json::Value = serde_json::from_slice(bytes).map_err(parse)?;
        let found = value.get("format_version").and_then(|v| v.as_u64());
        // Format 3 only adds `stacks` to format 2, which therefore reads too.
        if !found.is_some_and(|v| (u64::from(OLDEST_READ_VERSION)..=u64::from(FORMAT_VERSION)).contains(&v)) {
            return Err(ReadError::Version { path: path.to_path_buf(), found, expected: FORMAT_VERSION });
        }
        serde_json::from_value(value).map_err(parse)
    }

    /// A short table of the `top` span names by total inclusive time.
    pub fn table(&self, top: usize) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}: wall {:.1} ms, {} span names, {} events, trace {}",
            self.command,
            self.wall_us as f64 / 1000.0,
            self.spans.len(),
            self.events,
            if self.trace_complete { "complete" } else { "INCOMPLETE" }
        );
        let _ = writeln!(
            s,
            "{:>12} {:>12} {:>8}  name (target)  [inclusive wall and thread CPU time, summed over threads and nesting]",
            "total ms", "cpu ms", "count"
        );
        for span in self.spans.iter().take(top) {
            let cpu = span
                .total_inclusive_thread_cpu_us
                .map_or_else(|| "-".to_string(), |us| format!("{:.3}", us as f64 / 1000.0));
            let _ = write!(
                s,
                "{:>12.3} {:>12} {:>8}  {} ({})",
                span.total_inclusive_us as f64 / 1000.0,
                cpu,
                span.count,
                span.name,
                span.target
            );
            for (k, v) in &span.field_sums {
                let _ = write!(s, " {k}={v}");
            }
            s.push('\n');
        }
        if self.spans.len() > top {
            let _ = writeln!(s, "{:>12} {:>12} {:>8}  ... {} more", "", "", "", self.spans.len() - top);
        }
        let _ = write!(s, "ninja: {}", self.ninja.status);
        if let Some(a) = self.ninja.actions {
            let _ = write!(s, ", {a} actions");
        }
        if let Some(r) = &self.ninja.reason {
            let _ = write!(s, " ({r})");
        }
        s.push('\n');
        s
    }
}
