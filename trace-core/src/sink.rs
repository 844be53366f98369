//! The `Sink` trait and the checked writer every sink writes through.

use std::io::{self, Write};

use crate::event::{Event, Finish, Start};
use crate::stacks::CpuStacks;

/// A consumer of a capture's events that writes one file, `<stem>.<suffix>`.
///
/// Sinks run on the capture's writer, one call at a time, in the order the
/// capture was given them. The writer is a thread of its own once the command
/// has recorded a batch; for a shorter command every call happens during
/// [`crate::Session::finish`], on the thread that calls it. Either way the
/// calls are in the same order: a sink that reports on the others (the timings
/// summary) goes last and sees their [`crate::FileStatus`] in [`Finish::files`].
///
/// The writer is a [`CheckedWriter`]: after an I/O error it keeps the error and
/// swallows further writes, so a sink may ignore write results (`let _ =`) or use
/// `?`; either way the capture reports the failure and the command goes on.
///
/// ```
/// use std::io::{self, Write};
/// use trace_core::{Event, Finish, Sink, Start};
///
/// /// Counts instants and writes the count at the end.
/// struct CountInstants(u64);
///
/// impl Sink for CountInstants {
///     fn name(&self) -> &'static str { "count" }
///     fn suffix(&self) -> &'static str { "count.txt" }
///     fn event(&mut self, event: &Event<'_>, _out: &mut dyn Write) -> io::Result<()> {
///         if let Event::Instant { .. } = event { self.0 += 1 }
///         Ok(())
///     }
///     fn finish(&mut self, _end: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
///         writeln!(out, "{}", self.0)
///     }
/// }
/// ```
pub trait Sink: Send {
    /// A short name (`chrome`, `perfetto`, `summary`), used in warnings.
    fn name(&self) -> &'static str;
    /// The file name after the stem, without the dot, e.g. `trace.json`.
    fn suffix(&self) -> &'static str;
    /// Called once before the first event.
    fn start(&mut self, start: &Start<'_>, out: &mut dyn Write) -> io::Result<()> {
        let _ = (start, out);
        Ok(())
    }
    /// Called for every event, in order.
    fn event(&mut self, event: &Event<'_>, out: &mut dyn Write) -> io::Result<()>;
    /// Called once after the last event, before [`Sink::finish`]: the
    /// capture's sampled CPU stacks (`<P>_TRACE_STACKS`), or why there are
    /// none. Most sinks ignore them.
    fn stacks(&mut self, stacks: &CpuStacks, out: &mut dyn Write) -> io::Result<()> {
        let _ = (stacks, out);
        Ok(())
    }
    /// Called once after the last event; the file is complete when it returns.
    fn finish(&mut self, end: &Finish<'_>, out: &mut dyn Write) -> io::Result<()>;
}

/// A writer that keeps its first error and drops every later write.
///
/// It never panics and never reports an error to its caller after the first:
/// the error is read once, at the end, with [`CheckedWriter::error`].
///
/// ```
/// use std::io::Write;
/// use trace_core::CheckedWriter;
///
/// let mut w = CheckedWriter::new(Vec::new());
/// w.write_all(b"hello").unwrap();
/// assert!(w.error().is_none());
/// assert_eq!(w.written(), 5);
/// ```
#[derive(Debug)]
pub struct CheckedWriter<W> {
    inner: W,
    error: Option<io::Error>,
    written: u64,
}

impl<W: Write> CheckedWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        CheckedWriter { inner, error: None, written: 0 }
    }

    /// The first error, if any write or flush failed.
    pub fn error(&self) -> Option<&io::Error> {
        self.error.as_ref()
    }

    /// Bytes accepted before the first error.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The wrapped writer.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// Gives back the wrapped writer and the first error.
    pub fn into_parts(self) -> (W, Option<io::Error>) {
        (self.inner, self.error)
    }

    fn keep(&mut self, e: io::Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }
}

impl<W: Write> Write for CheckedWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.error.is_none() {
            match self.inner.write_all(buf) {
                Ok(()) => self.written += buf.len() as u64,
                Err(e) => self.keep(e),
            }
        }
        // Report the bytes as taken either way: the caller must not retry or stop.
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.error.is_none() {
            if let Err(e) = self.inner.flush() {
                self.keep(e);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Accepts `limit` bytes, then fails every write with `ENOSPC`.
    struct Full {
        limit: usize,
        got: Vec<u8>,
        calls_after_full: usize,
    }

    impl Write for Full {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.got.len() >= self.limit {
                self.calls_after_full += 1;
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            let n = buf.len().min(self.limit - self.got.len());
            self.got.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn checked_writer_keeps_the_first_error_and_swallows_the_rest() {
        let mut w = CheckedWriter::new(Full { limit: 4, got: Vec::new(), calls_after_full: 0 });
        w.write_all(b"abc").unwrap();
        w.write_all(b"defg").unwrap();
        w.write_all(b"hij").unwrap();
        w.flush().unwrap();
        assert_eq!(w.error().unwrap().raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(w.written(), 3);
        let (inner, err) = w.into_parts();
        assert_eq!(inner.got, b"abcd");
        assert_eq!(inner.calls_after_full, 1, "no write reaches the inner writer after the first error");
        assert!(err.is_some());
    }
}
