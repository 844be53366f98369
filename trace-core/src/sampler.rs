//! The captures' sampler: one thread for the whole process that reads its
//! resident memory and CPU time every `<P>_TRACE_SAMPLE` interval of each
//! running capture and sends each reading to that capture's writer as a
//! [`Msg::Sample`], on a fixed grid from the capture's start.
//!
//! A capture takes its first sample itself when it starts and its last when
//! it stops, so a command shorter than one interval never waits for the
//! thread, and every sample comes before the finish. The first capture that
//! samples starts the thread, and it ends when the last running capture
//! stops: a thread still alive when the process exits delays the exit (it has
//! to be woken on another processor), one that ended at the stop does not.
//! It never blocks the command: sending into a writer's channel never waits.
//!
//! `running` says whether a thread serves the list. It is set before the
//! thread is spawned and cleared by the thread itself, under the list's lock,
//! when it finds the list empty and ends; a capture reads it after putting
//! itself in the list under that lock. So either the ending thread saw the
//! new entry and stays, or the capture sees `false` and starts a new thread.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

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
    /// `None` for an interval so long that the sample would be due past what
    /// an `Instant` holds: never.
    fn due(&self) -> Option<Instant> {
        self.start.checked_add(self.interval.saturating_mul(self.ticks))
    }
}

/// The running captures, and the reader of the process's figures that the
/// thread and the captures' first and last samples share (it keeps a file
/// open).
struct State {
    entries: Vec<Entry>,
    reader: ProcessSampler,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled when a capture joins the list of a running thread, and when
    /// the last one leaves it.
    joined: Condvar,
    /// Whether a thread serves the list: set before it is spawned, cleared by
    /// the thread as it ends (see the module's docs).
    running: AtomicBool,
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| Shared {
        state: Mutex::new(State { entries: Vec::new(), reader: ProcessSampler::new() }),
        joined: Condvar::new(),
        running: AtomicBool::new(false),
    })
}

/// Nothing that holds the lock panics; a poisoned lock is used as it is.
fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared.state.lock().unwrap_or_else(PoisonError::into_inner)
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
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        {
            let mut state = lock(shared);
            let _ = tx.send(Msg::Sample(state.reader.sample()));
            let entry = Entry { id, tx: tx.clone(), start: Instant::now(), interval, ticks: 1 };
            state.entries.push(entry);
        }
        let started = match shared.running.load(Ordering::Acquire) {
            true => Ok(false),
            false => start_thread(shared),
        };
        match started {
            // A thread that was just started finds the capture in the list.
            Ok(true) => {}
            // A running one may sleep until another capture's next sample.
            Ok(false) => shared.joined.notify_one(),
            Err(e) => {
                // The first sample is the capture's only one.
                lock(shared).entries.retain(|e| e.id != id);
                return Err(e);
            }
        }
        Ok(Sampler { id: Some(id), tx })
    }

    /// Takes the capture out of the thread's list, then its last sample;
    /// wakes the thread to end if the list is left empty.
    pub(crate) fn stop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let shared = shared();
        let mut state = lock(shared);
        // Under the lock: once out of the list, the thread sends it nothing more.
        state.entries.retain(|e| e.id != id);
        let _ = self.tx.send(Msg::Sample(state.reader.sample()));
        if state.entries.is_empty() {
            shared.joined.notify_one();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts the process's sampler thread, unless a racing start did: whether
/// this call started it.
#[cold]
fn start_thread(shared: &'static Shared) -> io::Result<bool> {
    static STARTING: Mutex<()> = Mutex::new(());
    let _one = STARTING.lock().unwrap_or_else(PoisonError::into_inner);
    if shared.running.load(Ordering::Acquire) {
        return Ok(false);
    }
    // Before the spawn: a thread that ends at once clears it after this.
    shared.running.store(true, Ordering::Release);
    // It holds a few integers and the reader's small buffer.
    // Never joined: it ends by itself once no capture samples.
    let spawned = std::thread::Builder::new().name("trace-sampler".into()).stack_size(64 * 1024).spawn(run);
    if let Err(e) = spawned {
        shared.running.store(false, Ordering::Release);
        return Err(e);
    }
    Ok(true)
}

/// The thread's body: the samples that are due, then a sleep until the next
/// (or until a capture joins or the last one leaves); it returns when it
/// finds the list empty.
fn run() {
    let shared = shared();
    let mut state = lock(shared);
    loop {
        let now = Instant::now();
        let mut sample = None;
        let State { entries, reader } = &mut *state;
        for e in entries.iter_mut().filter(|e| e.due().is_some_and(|due| due <= now)) {
            let reading = *sample.get_or_insert_with(|| reader.sample());
            let _ = e.tx.send(Msg::Sample(reading));
            // The next point of the grid after now.
            while e.due().is_some_and(|due| due <= now) {
                e.ticks = e.ticks.saturating_add(1);
            }
        }
        let next = entries.iter().filter_map(Entry::due).min();
        state = match next {
            Some(next) => {
                let wait = next.saturating_duration_since(Instant::now());
                shared.joined.wait_timeout(state, wait).unwrap_or_else(PoisonError::into_inner).0
            }
            // No capture runs: end, under the lock (see the module's docs).
            None if entries.is_empty() => {
                shared.running.store(false, Ordering::Release);
                return;
            }
            // Only captures whose next sample is due past what an `Instant` holds.
            None => shared.joined.wait(state).unwrap_or_else(PoisonError::into_inner),
        };
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

    /// The sampler threads alive in this process, by their name.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn sampler_threads() -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|name| name.trim() == "trace-sampler")
            .count()
    }

    /// Samples in `rx` so far: the first, the thread's, and (after the stop) the last.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn samples(rx: &crossbeam_channel::Receiver<crate::buffer::Msg>) -> usize {
        rx.try_iter().filter(|m| matches!(m, crate::buffer::Msg::Sample(_))).count()
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    const ALONE: &str = "SAMPLER_THREAD_ENDS_CHILD";

    /// Run by the test below in a process of its own: the sampler thread is
    /// the process's, and other tests' captures would keep it alive.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    #[ignore = "run by the_sampler_thread_ends_with_the_last_capture_and_the_next_one_starts_it_again"]
    fn sampler_thread_ends_child() {
        use std::time::{Duration, Instant};

        use super::Sampler;

        if std::env::var_os(ALONE).is_none() {
            return;
        }
        let interval = Duration::from_millis(1);
        for round in 0..3 {
            let (tx, rx) = crossbeam_channel::unbounded();
            let mut sampler = Sampler::start(interval, tx).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            // It names itself once it runs.
            assert_eq!(sampler_threads(), 1, "round {round}: one thread while a capture runs");
            sampler.stop();
            let n = samples(&rx);
            assert!(n >= 3, "round {round}: {n} samples: the thread's are missing");
            let stopped = Instant::now();
            while sampler_threads() > 0 {
                assert!(stopped.elapsed() < Duration::from_secs(5), "round {round}: the thread did not end");
                std::thread::sleep(Duration::from_millis(1));
            }
            assert!(!super::shared().running.load(std::sync::atomic::Ordering::Acquire));
        }
        // Captures starting and stopping on two threads at once: each that runs
        // for 20 intervals gets the thread's samples, whoever started it.
        let racers: Vec<_> = (0..2)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..30 {
                        let (tx, rx) = crossbeam_channel::unbounded();
                        let mut sampler = Sampler::start(interval, tx).unwrap();
                        std::thread::sleep(Duration::from_millis(if (i + t) % 3 == 0 { 0 } else { 20 }));
                        sampler.stop();
                        let n = samples(&rx);
                        assert!((i + t) % 3 == 0 || n >= 3, "thread {t}, capture {i}: {n} samples");
                    }
                })
            })
            .collect();
        for r in racers {
            r.join().unwrap();
        }
        println!("{ALONE}: checked");
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn the_sampler_thread_ends_with_the_last_capture_and_the_next_one_starts_it_again() {
        // The test above, alone in a child process of this test binary.
        let path = "sampler::tests::sampler_thread_ends_child";
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", path, "--nocapture"])
            .env(ALONE, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && stdout.contains(&format!("{ALONE}: checked")), "{stdout}\n{stderr}");
    }
}
