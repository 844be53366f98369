//! The captures' sampler: one thread for the whole process that reads its
//! resident memory and CPU time every `<P>_TRACE_SAMPLE` interval of each
//! running capture and hands each reading to that capture's writer as a
//! [`Msg::Sample`].
//!
//! A capture takes its first sample itself when it starts and its last when
//! it stops, so a command shorter than one interval never waits for the
//! thread, and every sample comes before the finish. Between the two, the
//! thread samples on a fixed grid from the capture's start (a slow reading
//! does not shift the later ones). The thread is started by the first
//! capture that samples and then parked while no capture runs: starting and
//! joining a thread of its own cost each capture about 100 µs here, more than
//! the rest of a short capture's fixed cost. It never blocks the command:
//! sending into a writer's channel does not wait.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use parking_lot::Mutex;

use crate::buffer::Msg;
use crate::os::ProcessSampler;

/// A capture's place in the sampler's list; [`Sampler::stop`] takes it out.
pub(crate) struct Sampler {
    id: Option<u64>,
    tx: Sender<Msg>,
}

/// One running capture, as the sampler thread sees it.
struct Entry {
    id: u64,
    tx: Sender<Msg>,
    start: Instant,
    interval: Duration,
    /// The next sample is due at `start + interval * ticks`.
    ticks: u32,
}

impl Entry {
    fn due(&self) -> Instant {
        self.start + self.interval.saturating_mul(self.ticks)
    }
}

/// The running captures, and the reader of the process's figures that the
/// thread and the captures' first and last samples share (it keeps a file
/// open).
struct Shared {
    entries: Mutex<Vec<Entry>>,
    reader: Mutex<ProcessSampler>,
    thread: OnceLock<Thread>,
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| Shared {
        entries: Mutex::new(Vec::new()),
        reader: Mutex::new(ProcessSampler::new()),
        thread: OnceLock::new(),
    })
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Sampler {
    /// Takes a capture's first sample into `tx` and has the thread sample
    /// every `interval` after it; the error when the system refuses to start
    /// the thread (the capture then has its first sample only, and no more).
    pub(crate) fn start(interval: Duration, tx: Sender<Msg>) -> io::Result<Sampler> {
        #[cfg(test)]
        if tests::REFUSE_SPAWN.get() {
            return Err(io::Error::other("the test refused the thread"));
        }
        let shared = shared();
        let thread = match shared.thread.get() {
            Some(t) => t.clone(),
            None => start_thread(shared)?,
        };
        let _ = tx.send(Msg::Sample(shared.reader.lock().sample()));
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let entry = Entry { id, tx: tx.clone(), start: Instant::now(), interval, ticks: 1 };
        shared.entries.lock().push(entry);
        thread.unpark();
        Ok(Sampler { id: Some(id), tx })
    }

    /// Takes the capture out of the thread's list, then its last sample.
    pub(crate) fn stop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let shared = shared();
        // Under the lock: once out of the list, the thread sends it nothing more.
        shared.entries.lock().retain(|e| e.id != id);
        let _ = self.tx.send(Msg::Sample(shared.reader.lock().sample()));
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts the process's sampler thread (once: a racing start keeps the first).
#[cold]
fn start_thread(shared: &'static Shared) -> io::Result<Thread> {
    static STARTING: Mutex<()> = parking_lot::const_mutex(());
    let _one = STARTING.lock();
    if let Some(t) = shared.thread.get() {
        return Ok(t.clone());
    }
    let handle = std::thread::Builder::new()
        .name("trace-sampler".into())
        // It holds a few integers and the reader's small buffer.
        .stack_size(64 * 1024)
        .spawn(move || run(shared))?;
    let thread = handle.thread().clone();
    // Never joined: it parks while no capture runs, and ends with the process.
    drop(handle);
    let _ = shared.thread.set(thread.clone());
    Ok(thread)
}

/// The thread's body: the samples that are due, then a sleep until the next.
fn run(shared: &'static Shared) {
    loop {
        let wait = {
            let mut entries = shared.entries.lock();
            let now = Instant::now();
            let mut sample = None;
            for e in entries.iter_mut().filter(|e| e.due() <= now) {
                let reading = *sample.get_or_insert_with(|| shared.reader.lock().sample());
                let _ = e.tx.send(Msg::Sample(reading));
                // The next point of the grid after now.
                while e.due() <= now {
                    e.ticks = e.ticks.saturating_add(1);
                }
            }
            entries.iter().map(Entry::due).min().map(|next| next.saturating_duration_since(Instant::now()))
        };
        match wait {
            Some(d) => std::thread::park_timeout(d),
            None => std::thread::park(),
        }
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
