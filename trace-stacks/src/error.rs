//! Why sampling could not start or could not take a thread.

use std::fmt;

/// What kind of failure a [`StacksError`] is.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StacksErrorKind {
    /// This platform has no sampler here (only Linux on x86-64 has one).
    Unsupported,
    /// The interval is zero or longer than the sampler can count.
    InvalidInterval,
    /// The kernel refused the perf event: `perf_event_paranoid` above 2, a
    /// seccomp filter (a container's default profile), or missing rights.
    Refused,
    /// The kernel has no perf events (`ENOSYS`, `ENOENT`, `ENODEV`).
    NoPerfEvents,
    /// The thread to sample does not exist (any more).
    NoSuchThread,
    /// The event's ring buffer could not be mapped (the locked-memory limit).
    RingBuffer,
    /// Any other system call failure (the reader thread, the wake-up file).
    System,
}

/// Why the sampler could not start or could not sample a thread. Its
/// `Display` is one line meant for the user as is: what failed, why, and
/// what would make it work.
#[derive(Clone, Debug)]
pub struct StacksError {
    kind: StacksErrorKind,
    message: String,
}

impl StacksError {
    pub(crate) fn new(kind: StacksErrorKind, message: String) -> Self {
        StacksError { kind, message }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> StacksErrorKind {
        self.kind
    }
}

impl fmt::Display for StacksError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StacksError {}
