//! The export's error: what failed, naming the file or URL.

use std::fmt;

/// What kind of failure an [`ExportError`] is.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The arguments or variables do not say what to do (no files, no endpoint).
    Usage,
    /// An input file could not be read.
    Read,
    /// An input file is not OTLP/JSON, a timings summary or a comparison.
    Parse,
    /// The receiver could not be reached (refused, reset, unknown host).
    Transport,
    /// The receiver did not answer within the timeout.
    Timeout,
    /// The receiver answered with a failure status.
    Status,
    /// The output could not be written.
    Write,
}

/// An export that failed. Its `Display` is one line naming the file or URL,
/// what happened and, for a receiver's refusal, the HTTP status.
#[derive(Clone, Debug)]
pub struct ExportError {
    kind: ErrorKind,
    message: String,
    url: Option<String>,
    status: Option<u16>,
}

impl ExportError {
    pub(crate) fn new(kind: ErrorKind, message: String) -> Self {
        ExportError { kind, message, url: None, status: None }
    }

    pub(crate) fn with_url(mut self, url: &str) -> Self {
        self.url = Some(url.to_string());
        self
    }

    pub(crate) fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// What kind of failure it is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The URL posted to, for a failure to send.
    pub fn url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    /// The receiver's status, when it answered with a failure.
    pub fn status(&self) -> Option<u16> {
        self.status
    }
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExportError {}
