//! The sampler's one reader thread: waits on every event's ring buffer with
//! `poll`, parses each record and unwinds each sample as it arrives (the
//! stack copies are too large to keep), and hands the unwound samples to the
//! symbolizer thread after each wake-up, until the sampler finishes. It
//! never symbolizes itself: a buffer it does not drain in time loses
//! samples.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::perf_event::{
    ThreadEvent, PERF_RECORD_LOST, PERF_RECORD_SAMPLE, PERF_SAMPLE_REGS_ABI_NONE, REGS_COUNT, REG_BP, REG_IP,
    REG_SP,
};
use super::symbols::{symbolize_until_end, RawSample, Symbolized, ToSymbolizer};
use super::unwinding::StackUnwinder;
use crate::error::{StacksError, StacksErrorKind};
use crate::model::{SampleCounts, Stacks};

/// What the sampling threads and the reader share.
struct Shared {
    /// Events opened by `add_thread`, not yet taken by the reader.
    pending: Mutex<Vec<ThreadEvent>>,
    /// Set by `finish`: the reader disables every event, drains and returns.
    stop: AtomicBool,
    /// An eventfd that wakes the reader from `poll`.
    wake: OwnedFd,
}

impl Shared {
    fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes to an eventfd we own; a full counter only
        // means the reader is already due to wake.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }
}

/// The Linux sampler: the reader thread and the way to hand it events.
pub(crate) struct LinuxSampler {
    interval: Duration,
    shared: Arc<Shared>,
    /// Where the symbolizer thread sends what was collected, at the
    /// reader's end; `None` once received (in a mutex only so that the
    /// sampler is `Sync`: `finish` and `drop` own it).
    collected: Mutex<Option<Receiver<Symbolized>>>,
}

impl LinuxSampler {
    pub(crate) fn start(interval: Duration) -> Result<LinuxSampler, StacksError> {
        if interval.is_zero() || interval.as_nanos() > u64::MAX as u128 {
            return Err(StacksError::new(
                StacksErrorKind::InvalidInterval,
                format!("CPU stacks: the interval {interval:?} is not from 1 ns to 584 years"),
            ));
        }
        // Ask the kernel once now, so that a refusal is known before any
        // thread is added, and said why.
        ThreadEvent::probe(current_tid(), interval)?;
        // SAFETY: eventfd has no memory preconditions.
        let wake = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if wake < 0 {
            return Err(system_error("creating the reader's eventfd", io::Error::last_os_error()));
        }
        let shared = Arc::new(Shared {
            pending: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            // SAFETY: the kernel just returned this descriptor to us.
            wake: unsafe { OwnedFd::from_raw_fd(wake) },
        });
        // Two detached threads: the reader sends its samples to the
        // symbolizer, which sends everything to `finish`; then each frees
        // what it holds while the program goes on.
        let (to_symbolizer, symbolizer_input) = mpsc::channel();
        let (symbolized, collected) = mpsc::channel();
        std::thread::Builder::new()
            .name("trace-stacks-symbols".into())
            .spawn(move || symbolize_until_end(symbolizer_input, symbolized))
            .map_err(|e| system_error("starting the symbolizer thread", e))?;
        let for_reader = Arc::clone(&shared);
        let (ready, reader_ready) = mpsc::channel();
        std::thread::Builder::new()
            .name("trace-stacks".into())
            .spawn(move || read_until_stopped(&for_reader, to_symbolizer, ready))
            .map_err(|e| system_error("starting the reader thread", e))?;
        // No thread is sampled before the reader has the unwind sections of
        // the process's objects and drains the buffers: loading them takes a
        // large binary tens of milliseconds on a busy machine, past what a
        // ring buffer holds. A reader slower than a second is not waited for
        // (its samples past the buffer are lost, and counted).
        let _ = reader_ready.recv_timeout(Duration::from_secs(1));
        Ok(LinuxSampler { interval, shared, collected: Mutex::new(Some(collected)) })
    }

    pub(crate) fn add_thread(&self, tid: u32) -> Result<(), StacksError> {
        let event = ThreadEvent::open(tid, self.interval)?;
        self.shared.pending.lock().unwrap_or_else(|e| e.into_inner()).push(event);
        self.shared.wake();
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Stacks {
        let collected = self.stop_reader();
        let mut stacks = Stacks { interval: self.interval, ..Stacks::default() };
        let Some(collected) = collected else { return stacks };
        stacks.reader_cpu_time = collected.reader_cpu_time;
        stacks.symbolization_time = collected.symbolization_time;
        stacks.counts = SampleCounts {
            taken: collected.samples.len() as u64,
            lost: collected.lost,
            not_unwound: collected.not_unwound,
        };
        stacks.mappings = collected.mappings;
        stacks.frames = collected.frames;
        stacks.samples = collected.samples;
        stacks
    }

    /// Stops the reader and takes what was collected (nothing if the reader
    /// or the symbolizer panicked).
    fn stop_reader(&mut self) -> Option<Symbolized> {
        let collected = self.collected.get_mut().unwrap_or_else(|e| e.into_inner()).take()?;
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake();
        collected.recv().ok()
    }
}

impl Drop for LinuxSampler {
    /// Stops the reader without waiting: the symbolizer's result then has
    /// nobody to go to, and both threads end on their own.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake();
    }
}

pub(crate) fn current_tid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

fn system_error(what: &str, error: io::Error) -> StacksError {
    StacksError::new(StacksErrorKind::System, format!("CPU stacks: {what} failed ({error})"))
}

/// The reader thread's loop: unwinds the samples as they arrive and sends
/// them to the symbolizer thread after each wake-up.
fn read_until_stopped(shared: &Shared, symbolizer: Sender<ToSymbolizer>, ready: Sender<()>) {
    let mut unwinder = StackUnwinder::new();
    let _ = ready.send(());
    let mut state = RecordState::default();
    // How many of the unwinder's objects the symbolizer has.
    let mut objects_sent = 0;
    let mut send = |unwinder: &StackUnwinder, samples: Vec<RawSample>| {
        let objects = &unwinder.objects().list()[objects_sent..];
        if !objects.is_empty() || !samples.is_empty() {
            objects_sent += objects.len();
            let _ = symbolizer.send(ToSymbolizer::Batch { objects: objects.to_vec(), samples });
        }
    };
    send(&unwinder, Vec::new());
    // Each event, and whether its thread still runs.
    let mut events: Vec<(ThreadEvent, bool)> = Vec::new();
    let mut poll_fds: Vec<libc::pollfd> = Vec::new();
    loop {
        events.extend(shared.pending.lock().unwrap_or_else(|e| e.into_inner()).drain(..).map(|e| (e, true)));
        if shared.stop.load(Ordering::Acquire) {
            break;
        }
        poll_fds.clear();
        poll_fds.push(libc::pollfd { fd: shared.wake.as_raw_fd(), events: libc::POLLIN, revents: 0 });
        let live: Vec<usize> = (0..events.len()).filter(|&i| events[i].1).collect();
        poll_fds.extend(live.iter().map(|&i| libc::pollfd {
            fd: events[i].0.raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }));
        // SAFETY: poll_fds is a valid array of its length.
        let ready = unsafe { libc::poll(poll_fds.as_mut_ptr(), poll_fds.len() as libc::nfds_t, -1) };
        if ready < 0 {
            // EINTR (a signal of the program's own) is retried at once; any
            // other failure (ENOMEM) after a pause, rather than spinning.
            if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                std::thread::sleep(Duration::from_millis(10));
            }
            continue;
        }
        if poll_fds[0].revents != 0 {
            let mut count = [0u8; 8];
            // SAFETY: reads 8 bytes into a buffer of 8 bytes.
            unsafe { libc::read(shared.wake.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) };
        }
        for (slot, &i) in poll_fds[1..].iter().zip(&live) {
            if slot.revents == 0 {
                continue;
            }
            let (event, running) = &mut events[i];
            state.drain(event, &mut unwinder);
            // The thread exited: its buffer holds nothing more to wait for.
            if slot.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                *running = false;
            }
        }
        send(&unwinder, std::mem::take(&mut state.samples));
    }
    for (event, _) in &mut events {
        event.disable();
        state.drain(event, &mut unwinder);
    }
    send(&unwinder, std::mem::take(&mut state.samples));
    let _ = symbolizer.send(ToSymbolizer::End {
        lost: state.lost,
        not_unwound: state.not_unwound,
        reader_cpu_time: thread_cpu_time(),
    });
    // Then the events and the unwinder are freed, with no one waiting.
}

/// The calling thread's CPU time so far.
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes one timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// What the reader accumulates from the records.
#[derive(Default)]
struct RecordState {
    samples: Vec<RawSample>,
    lost: u64,
    not_unwound: u64,
    scratch: Vec<u8>,
}

impl RecordState {
    fn drain(&mut self, event: &mut ThreadEvent, unwinder: &mut StackUnwinder) {
        let RecordState { samples, lost, not_unwound, scratch } = self;
        event.drain(scratch, |kind, body| match kind {
            PERF_RECORD_SAMPLE => {
                if let Some(sample) = parse_sample(body, unwinder) {
                    if !sample.unwound {
                        *not_unwound += 1;
                    }
                    samples.push(sample);
                }
            }
            PERF_RECORD_LOST => *lost += read_u64(body, 8).unwrap_or(0),
            _ => {}
        });
    }
}

fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// Parses a `PERF_RECORD_SAMPLE` body (see `SAMPLE_TYPE`) and unwinds it.
fn parse_sample(body: &[u8], unwinder: &mut StackUnwinder) -> Option<RawSample> {
    let tid = u32::from_ne_bytes(body.get(4..8)?.try_into().ok()?);
    let time_ns = read_u64(body, 8)?;
    let abi = read_u64(body, 16)?;
    let mut at = 24;
    let mut sample = RawSample { tid, time_ns, addresses: Vec::new(), unwound: false };
    if abi == PERF_SAMPLE_REGS_ABI_NONE {
        return Some(sample);
    }
    let mut regs = [0u64; REGS_COUNT];
    for reg in &mut regs {
        *reg = read_u64(body, at)?;
        at += 8;
    }
    let size = read_u64(body, at)? as usize;
    at += 8;
    let copied = body.get(at..at.checked_add(size)?)?;
    let dyn_size = if size > 0 { read_u64(body, at + size)? as usize } else { 0 };
    let stack = &copied[..dyn_size.min(size)];
    sample.unwound = unwinder.unwind(regs[REG_IP], regs[REG_SP], regs[REG_BP], stack, &mut sample.addresses);
    Some(sample)
}
