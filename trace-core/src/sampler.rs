//! The capture's sampler: a small thread that reads the process's resident
//! memory and CPU time every `<P>_TRACE_SAMPLE` interval and hands each
//! reading to the writer as a [`Msg::Sample`].
//!
//! It takes one sample when it starts, one per interval (on a fixed grid
//! from its start, so a slow reading does not shift the later ones), and
//! one when the capture stops it; the capture joins it before it finishes
//! the writer, so every sample comes before the finish. It never blocks the
//! command: sending into the writer's channel does not wait.

use std::io;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{RecvTimeoutError, Sender};

use crate::buffer::Msg;
use crate::os::ProcessSampler;

/// A running sampler; [`Sampler::stop`] ends and joins it.
pub(crate) struct Sampler {
    /// Dropped to stop the thread.
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Starts a thread sampling every `interval` into `tx`; the error when
    /// the system refuses the thread.
    pub(crate) fn start(interval: Duration, tx: Sender<Msg>) -> io::Result<Sampler> {
        #[cfg(test)]
        if tests::REFUSE_SPAWN.get() {
            return Err(io::Error::other("the test refused the thread"));
        }
        let (stop, stopped) = crossbeam_channel::bounded::<()>(0);
        let thread = std::thread::Builder::new()
            .name("trace-sampler".into())
            // It holds a 128-byte buffer and a few integers.
            .stack_size(64 * 1024)
            .spawn(move || {
                let mut sampler = ProcessSampler::new();
                let start = Instant::now();
                let mut ticks: u32 = 0;
                loop {
                    if tx.send(Msg::Sample(sampler.sample())).is_err() {
                        return;
                    }
                    ticks = ticks.saturating_add(1);
                    let next = start + interval.saturating_mul(ticks);
                    match stopped.recv_deadline(next) {
                        Err(RecvTimeoutError::Timeout) => {}
                        // Stopped: the last sample, at the capture's finish.
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                            let _ = tx.send(Msg::Sample(sampler.sample()));
                            return;
                        }
                    }
                }
            })?;
        Ok(Sampler { stop: Some(stop), thread: Some(thread) })
    }

    /// Stops the thread after its last sample and joins it.
    pub(crate) fn stop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use crate::{Config, Session};

    thread_local! {
        /// Makes the sampler thread fail to start when this thread starts it.
        pub(super) static REFUSE_SPAWN: Cell<bool> = const { Cell::new(false) };
    }

    #[test]
    fn a_sampler_that_cannot_start_leaves_the_capture_running_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::from_lookup("T", &[], |n| (n == "T_TRACE_DIR").then(|| dir.path().into()))
            .unwrap()
            .unwrap();
        REFUSE_SPAWN.set(true);
        let session = Session::start(&config, "refused", Vec::new()).unwrap();
        REFUSE_SPAWN.set(false);
        let answer = session.run(|| tracing::info_span!("phase").in_scope(|| 42));
        let report = session.finish();
        assert_eq!(answer, 42);
        assert_eq!(report.sampler_error.as_deref(), Some("the test refused the thread"));
        assert!(report.is_complete(), "the trace itself is whole");
        let warnings = report.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("no memory and CPU counters"), "{warnings:?}");
        assert!(warnings[0].contains("the test refused the thread"), "{warnings:?}");
    }
}
