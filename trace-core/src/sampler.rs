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
