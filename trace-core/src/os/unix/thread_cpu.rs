//! The calling thread's CPU time on Linux x86-64, mostly without a system
//! call.
//!
//! `clock_gettime(CLOCK_THREAD_CPUTIME_ID)` is a system call (the vDSO does
//! not serve it), 0.7-1 µs on a virtual machine. While a thread stays on its
//! processor, though, its CPU time grows exactly as fast as the monotonic
//! clock, which the vDSO does serve (about 30 ns). So a reading is the system
//! call's figure at an anchor plus the monotonic time since, for as long as
//! the thread has not been switched out since the anchor.
//!
//! What tells a switch is a per-thread software perf event
//! (`PERF_COUNT_SW_TASK_CLOCK`, this thread, any processor, the kernel
//! excluded so that `perf_event_paranoid` 2 allows it) and its mapped page
//! (`perf_event_mmap_page`): the kernel rewrites the page, bumping its `lock`
//! sequence count, each time it schedules the event in, which it does when it
//! schedules the thread in (after a sleep, a preemption, a migration). That is
//! what Linux 6.18 does, and what the tests here check; the kernel documents
//! the page's protocol for reading counters, not as a switch counter, hence
//! the check at the end of this paragraph. A reading whose `lock` is the
//! anchor's extrapolates; any other takes a new anchor. The event's own count
//! is not read: without `cap_user_time` (which a kernel whose scheduler clock
//! is a paravirtual clock, as under KVM, does not set) the page's times are as
//! old as its last update. Should a kernel not bump `lock` at every switch in,
//! a thread would be seen using under half of a window's wall time while never
//! switched out; once at least [`STRIKES`] windows, and more than one in
//! [`MISS_RATE`] of the windows judged, looked like that, the process stops
//! extrapolating. A rate and not a count, because a hypervisor that takes the
//! processor away for half a millisecond, unseen by the guest's scheduler,
//! looks the same: one window in a thousand to one in fifty on a shared host
//! (a thread alone, and a thread sharing two processors with a writer), which
//! a count of three turned into system calls for the rest of the process
//! after a few seconds. A kernel that missed switches would show it in the
//! windows where its thread was switched out, a larger share. Where such
//! windows are that frequent for any reason (a thread sharing two loaded
//! processors lost 50-76% of 3 windows in 39 here), extrapolating would
//! overcount them, and the system call is the right answer.
//!
//! Between two switches the monotonic clock also counts time the kernel does
//! not give the thread (interrupts it accounts apart, a hypervisor's steal).
//! So an anchor lasts at most [`WINDOW_NS`] of wall time, and a reading never
//! goes below the one before it: a reading is ahead of the system call's by at
//! most what one window overcounted, and after the next anchor the readings
//! stay put until the thread's CPU time catches up.
//!
//! An anchor pairs the system call's figure with the monotonic time read
//! right after it. CPU time the kernel charges the thread in between (an
//! interrupt, on a kernel without IRQ time accounting; a hypervisor's stall,
//! on a guest without steal accounting) leaves the window's readings behind
//! the system call's, and the next anchor adds it, however long, to whatever
//! span is open then: here 1-5 µs at most anchors, up to 38 µs under load. So
//! the monotonic clock is read before the call too, and a call that took
//! [`ANCHOR_NS`] or more by it is not extrapolated from: a reading is behind
//! the system call's by less than that. (The time before the call as the
//! base would never be behind, but ahead by the call's entry at every anchor,
//! 1.5 µs a switch in a debug build, which adds up over many switches.)
//!
//! A thread opens its event only after [`WARM_READS`] system-call readings,
//! so that a short command, or a thread that reads a few times, pays neither
//! the opening (30-60 µs) nor the event's cost at its switches.
//!
//! Where the event cannot be opened or mapped (`perf_event_paranoid` 3, a
//! seccomp filter, no perf support, the per-user quota of pages that perf
//! maps, one per thread here), the thread reads the system call, and the
//! process remembers it so that no other thread tries again. The mapping
//! holds the event; its descriptor is closed at once, and the page is
//! unmapped when the thread exits. A forked child drops the page it inherited
//! (its parent thread's) and opens its own.
//!
//! The event costs each context switch of its thread kernel time (the `clocks`
//! benchmark's round trip between two threads: 57 against 48 µs here), so a
//! thread that is switched out more often than every fourth reading gives its
//! event back and reads the system call from then on. A thread that holds its
//! event and stops reading keeps paying for it until it exits.

use std::cell::RefCell;
use std::sync::atomic::{compiler_fence, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Once;

/// The longest an anchor is extrapolated from, in nanoseconds of wall time.
const WINDOW_NS: u64 = 1_000_000;

/// The longest an anchor's system call may take, by the monotonic clock
/// around it, for the anchor to be extrapolated from: 0.7-1 µs as a rule.
const ANCHOR_NS: u64 = 20_000;

/// A thread keeps its event while it reads at least this many times per
/// switch on average, judged every [`JUDGED_SWITCHES`] switches: a switch
/// costs about two system-call readings of kernel time with the event, and
/// each extrapolated reading saves about one.
const READS_PER_SWITCH: u32 = 4;
const JUDGED_SWITCHES: u32 = 256;

/// System-call readings a thread makes before it opens its event: opening
/// costs 30-60 µs, and the event then taxes every switch of the thread, which
/// only a thread that reads often wins back. A short command's threads (a
/// few dozen spans) never open one.
const WARM_READS: u32 = 64;

/// Windows after which the extrapolation may stop for the process: each is
/// one where the thread used under half of the window's wall time while its
/// `lock` said it was never switched out.
const STRIKES: u32 = 3;

/// ... and stops once those windows are more than one in this many of the
/// windows judged (a whole window without a switch).
const MISS_RATE: u64 = 16;

/// Whether `missed` windows out of `judged` say that the kernel does not
/// report the thread's switches.
fn misses_switches(missed: u32, judged: u64) -> bool {
    missed >= STRIKES && u64::from(missed) * MISS_RATE > judged
}

/// Whether the process has stopped extrapolating because of missed switches.
fn stopped() -> bool {
    misses_switches(MISSED.load(Ordering::Relaxed), JUDGED.load(Ordering::Relaxed))
}

const UNTRIED: u8 = 0;
const OPENS: u8 = 1;
const FAILED: u8 = 2;

/// Whether this process's threads open the event.
static PROCESS: AtomicU8 = AtomicU8::new(UNTRIED);
/// Windows that showed a missed switch (see [`STRIKES`]).
static MISSED: AtomicU32 = AtomicU32::new(0);
/// Whole windows without a switch, judged for a missed one.
static JUDGED: AtomicU64 = AtomicU64::new(0);
/// Bumped in a forked child, whose thread inherits its parent thread's map.
static FORKS: AtomicU64 = AtomicU64::new(0);

/// Whether the process still extrapolates (no failure, no missed switches).
#[cfg(test)]
pub(super) fn extrapolates() -> bool {
    PROCESS.load(Ordering::Relaxed) != FAILED && !stopped()
}

/// One thread's state. No destructor of its own, so it stays readable while
/// other thread-locals are destroyed; [`Unmap`] gives the page back.
struct State {
    /// The mapped page; 0 when there is none.
    page: usize,
    /// The event was tried (and is open, given back or failed).
    tried: bool,
    /// [`FORKS`] when the page was mapped.
    forks: u64,
    /// The anchor: the page's `lock`, the thread's CPU and monotonic time.
    anchored: bool,
    seq: u32,
    cpu: u64,
    mono: u64,
    /// The last reading returned, which the next never goes below.
    last: u64,
    reads: u32,
    switches: u32,
    /// System-call readings made before the event was tried ([`WARM_READS`]).
    warming: u32,
    /// Windows of this thread that counted as a missed switch.
    #[cfg(test)]
    missed: u32,
}

thread_local! {
    static STATE: RefCell<State> = const {
        RefCell::new(State {
            page: 0,
            tried: false,
            forks: 0,
            anchored: false,
            seq: 0,
            cpu: 0,
            mono: 0,
            last: 0,
            reads: 0,
            switches: 0,
            warming: 0,
            #[cfg(test)]
            missed: 0,
        })
    };
    static UNMAP: Unmap = const { Unmap };
}

/// Unmaps the thread's page when the thread exits.
struct Unmap;

impl Drop for Unmap {
    fn drop(&mut self) {
        let _ = STATE.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                s.give_back();
            }
        });
    }
}

fn page_bytes() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

fn syscall_ns() -> Option<u64> {
    #[cfg(test)]
    if let Some(reading) = tests::simulated_cpu() {
        return reading;
    }
    super::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

#[inline]
fn monotonic_ns() -> u64 {
    #[cfg(test)]
    if let Some(ns) = tests::simulated_monotonic() {
        return ns;
    }
    super::monotonic_ns()
}

/// The calling thread's CPU time in nanoseconds (see the module docs).
#[inline]
pub(super) fn read() -> Option<u64> {
    STATE
        .try_with(|s| match s.try_borrow_mut() {
            Ok(mut s) => s.read(),
            // A signal handler that interrupted a reading of this thread.
            Err(_) => syscall_ns(),
        })
        .unwrap_or_else(|_| syscall_ns())
}

impl State {
    #[inline]
    fn read(&mut self) -> Option<u64> {
        if self.page == 0 {
            return self.read_without_page();
        }
        let now = monotonic_ns();
        compiler_fence(Ordering::SeqCst);
        // Read after the clock: a switch before the clock's read bumped it.
        let seq = self.lock();
        let since = now.saturating_sub(self.mono);
        if self.anchored
            && seq == self.seq
            && since < WINDOW_NS
            && FORKS.load(Ordering::Relaxed) == self.forks
        {
            self.reads = self.reads.saturating_add(1);
            return Some(self.keep(self.cpu + since));
        }
        self.reanchor(seq, now)
    }

    /// The page's sequence count; its word 2 (`version`, `compat_version`,
    /// then `lock`).
    #[inline]
    fn lock(&self) -> u32 {
        // SAFETY: `page` is a live read-only mapping of at least one page,
        // which the kernel writes: a volatile read of its aligned third word.
        unsafe { std::ptr::read_volatile((self.page as *const u32).add(2)) }
    }

    fn keep(&mut self, reading: u64) -> u64 {
        self.last = self.last.max(reading);
        self.last
    }

    fn read_without_page(&mut self) -> Option<u64> {
        if self.warming < WARM_READS {
            self.warming += 1;
        } else if !self.tried && PROCESS.load(Ordering::Relaxed) != FAILED && !stopped() {
            self.tried = true;
            if self.open() {
                return self.reanchor(self.lock(), monotonic_ns());
            }
        }
        let reading = syscall_ns()?;
        Some(self.keep(reading))
    }

    /// A new anchor, after the one before ended at `seq` and `now`.
    fn reanchor(&mut self, seq: u32, now: u64) -> Option<u64> {
        if FORKS.load(Ordering::Relaxed) != self.forks {
            // A forked child: the page counts the parent's thread.
            self.give_back();
            self.tried = false;
            return self.read_without_page();
        }
        if stopped() {
            // Another thread saw the kernel miss switches.
            self.give_back();
            return self.read_without_page();
        }
        let switched = !self.anchored || seq != self.seq;
        let before = self.lock();
        compiler_fence(Ordering::SeqCst);
        // Around the call: CPU time charged to the thread after its reading
        // leaves the anchor's readings behind by as much (see the module docs).
        let called = monotonic_ns();
        let cpu = syscall_ns();
        let mono = monotonic_ns();
        compiler_fence(Ordering::SeqCst);
        let after = self.lock();
        let Some(cpu) = cpu else {
            self.anchored = false;
            return None;
        };
        if self.anchored && !switched {
            // A whole window without a switch: the thread had the processor
            // all along, unless the kernel did not say it was switched out.
            let wall = now.saturating_sub(self.mono);
            let judged = JUDGED.fetch_add(1, Ordering::Relaxed) + 1;
            if cpu.saturating_sub(self.cpu) < wall / 2 {
                #[cfg(test)]
                {
                    self.missed += 1;
                }
                if misses_switches(MISSED.fetch_add(1, Ordering::Relaxed) + 1, judged) {
                    self.give_back();
                    return Some(self.keep(cpu));
                }
            }
        }
        // An odd count is a rewrite under way; a changed one, a switch during the call.
        // ... and a slow call, CPU time charged after its reading.
        self.anchored =
            before == after && before.is_multiple_of(2) && mono.saturating_sub(called) < ANCHOR_NS;
        (self.seq, self.cpu, self.mono) = (before, cpu, mono);
        if switched {
            self.switches += 1;
            if self.switches >= JUDGED_SWITCHES {
                if self.reads < READS_PER_SWITCH * JUDGED_SWITCHES {
                    self.give_back();
                }
                (self.reads, self.switches) = (0, 0);
            }
        }
        Some(self.keep(cpu))
    }

    /// Opens and maps the event; `false`, and the process told, if either fails.
    fn open(&mut self) -> bool {
        // The page goes back when the thread exits: register that first, or
        // not at all once the thread is being torn down.
        if UNMAP.try_with(|_| ()).is_err() {
            return false;
        }
        static AT_FORK: Once = Once::new();
        AT_FORK.call_once(|| {
            // SAFETY: the handler only bumps an atomic, which is async-signal-safe.
            unsafe { libc::pthread_atfork(None, None, Some(forked)) };
        });
        let attr = Attr {
            kind: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<Attr>() as u32,
            config: PERF_COUNT_SW_TASK_CLOCK,
            flags: EXCLUDE_KERNEL | EXCLUDE_HV,
            ..Attr::default()
        };
        // SAFETY: `attr` is a valid perf_event_attr of the size it states;
        // pid 0 and cpu -1 are this thread on any processor, no group.
        let fd = unsafe {
            libc::syscall(libc::SYS_perf_event_open, &attr as *const Attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC)
        };
        let Ok(fd) = libc::c_int::try_from(fd) else {
            PROCESS.store(FAILED, Ordering::Relaxed);
            return false;
        };
        if fd < 0 {
            PROCESS.store(FAILED, Ordering::Relaxed);
            return false;
        }
        // SAFETY: maps the event's first page (its control page, no data
        // pages) read-only from an fd we own.
        let page = unsafe {
            libc::mmap(std::ptr::null_mut(), page_bytes(), libc::PROT_READ, libc::MAP_SHARED, fd, 0)
        };
        // The mapping keeps the event; the descriptor is not needed, nor
        // taken from the tool's limit for the thread's life.
        // SAFETY: `fd` is ours and closed once.
        unsafe { libc::close(fd) };
        if page == libc::MAP_FAILED {
            PROCESS.store(FAILED, Ordering::Relaxed);
            return false;
        }
        PROCESS.store(OPENS, Ordering::Relaxed);
        self.page = page as usize;
        self.forks = FORKS.load(Ordering::Relaxed);
        (self.anchored, self.reads, self.switches) = (false, 0, 0);
        true
    }

    /// Unmaps the page, if any; the thread reads the system call from then on.
    fn give_back(&mut self) {
        if self.page != 0 {
            // SAFETY: `page` is the mapping `open` made, unmapped once.
            unsafe { libc::munmap(self.page as *mut libc::c_void, page_bytes()) };
        }
        (self.page, self.anchored, self.tried) = (0, false, true);
    }
}

extern "C" fn forked() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

// The leading fields of `struct perf_event_attr` (its first published size,
// PERF_ATTR_SIZE_VER0): the kernel takes a shorter attribute as one with the
// later fields zero.
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const EXCLUDE_KERNEL: u64 = 1 << 5;
const EXCLUDE_HV: u64 = 1 << 6;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

#[repr(C)]
#[derive(Default)]
struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// The bit fields: `disabled` is bit 0, `exclude_kernel` bit 5, `exclude_hv` bit 6.
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const _: () = assert!(std::mem::size_of::<Attr>() == 64);

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::time::{Duration, Instant};

    /// A thread that runs all the time, its wall and CPU clocks in step,
    /// which the clocks of this module read instead of the kernel's on the
    /// thread that sets it.
    #[derive(Clone, Copy)]
    struct Simulated {
        wall: u64,
        cpu: u64,
        /// Charged to the thread, wall and CPU time, right after the next
        /// system call's reading: an interrupt, or a hypervisor's stall that
        /// the guest does not account as steal.
        stall: u64,
    }

    /// What a clock read costs the simulated thread.
    const READ_NS: u64 = 100;

    thread_local!(static SIMULATED: Cell<Option<Simulated>> = const { Cell::new(None) });

    fn simulate(f: impl FnOnce(&mut Simulated)) -> Option<Simulated> {
        SIMULATED.with(|c| {
            let mut sim = c.get()?;
            f(&mut sim);
            c.set(Some(sim));
            Some(sim)
        })
    }

    /// The thread runs for `ns`.
    fn run(ns: u64) -> Simulated {
        simulate(|s| (s.wall, s.cpu) = (s.wall + ns, s.cpu + ns)).expect("a simulated thread")
    }

    pub(super) fn simulated_monotonic() -> Option<u64> {
        simulate(|s| (s.wall, s.cpu) = (s.wall + READ_NS, s.cpu + READ_NS)).map(|s| s.wall)
    }

    pub(super) fn simulated_cpu() -> Option<Option<u64>> {
        let mut reading = 0;
        simulate(|s| {
            (s.wall, s.cpu) = (s.wall + READ_NS, s.cpu + READ_NS);
            reading = s.cpu;
            (s.wall, s.cpu, s.stall) = (s.wall + s.stall, s.cpu + s.stall, 0);
        })?;
        Some(Some(reading))
    }

    #[test]
    fn cpu_time_charged_to_the_thread_right_after_an_anchors_system_call_is_not_put_into_a_later_span() {
        std::thread::spawn(|| {
            // A page whose `lock` never moves: the thread is never switched
            // out. Mapped, as the event's is, for a state that gives it back.
            // SAFETY: a fresh private anonymous mapping, zeroed by the kernel.
            let page = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    page_bytes(),
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(page, libc::MAP_FAILED, "mmap");
            let mut state = STATE.with(|s| State {
                page: page as usize,
                forks: FORKS.load(Ordering::Relaxed),
                ..*s.borrow()
            });
            SIMULATED.with(|c| c.set(Some(Simulated { wall: 1 << 40, cpu: 1 << 20, stall: 0 })));
            let mut read = || {
                let kernel = run(0).cpu;
                let reading = state.read().unwrap();
                assert!(
                    reading + ANCHOR_NS > kernel,
                    "{reading} read, {kernel} ns of CPU before the reading: a stalled anchor extrapolated"
                );
                (reading, kernel)
            };
            read();
            run(2 * WINDOW_NS);
            // The next anchor's system call: 2.5 ms charged to the thread right after it.
            simulate(|s| s.stall = 2_500_000);
            read();
            run(100_000);
            // A span of 1 ms of CPU, past the end of the window.
            let (begin, kernel_begin) = read();
            for _ in 0..10 {
                run(100_000);
                read();
            }
            let (end, kernel_end) = read();
            let (span, kernel) = (end - begin, kernel_end - kernel_begin);
            assert!(
                span <= kernel + WINDOW_NS,
                "{span} ns read over a span, {kernel} ns by the system call: more than a window ahead"
            );
            state.give_back();
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_few_windows_stolen_by_a_hypervisor_do_not_stop_the_extrapolation_and_a_kernel_that_misses_switches_does(
    ) {
        // A shared host under load: about one window in a thousand.
        assert!(!misses_switches(3, 3_000));
        assert!(!misses_switches(40, 40_000));
        // Fewer than the strikes, whatever the rate.
        assert!(!misses_switches(STRIKES - 1, 1));
        // A kernel that does not bump `lock` at a switch in: the windows of a
        // thread that blocks now and then, a large share of them.
        assert!(misses_switches(STRIKES, 10));
        assert!(misses_switches(100, 1_000));
        // The boundary: more than one in MISS_RATE.
        assert!(!misses_switches(STRIKES, u64::from(STRIKES) * MISS_RATE));
        assert!(misses_switches(STRIKES, u64::from(STRIKES) * MISS_RATE - 1));
    }

    fn spin(d: Duration) {
        let until = Instant::now() + d;
        let mut x = 1u64;
        while Instant::now() < until {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }

    fn has_page() -> bool {
        STATE.with(|s| s.borrow().page != 0)
    }

    /// The system-call readings a thread makes before it opens its event.
    fn warm() {
        for _ in 0..WARM_READS {
            std::hint::black_box(read());
        }
    }

    #[test]
    fn readings_stay_within_an_anchors_call_behind_the_system_calls_and_a_window_ahead_beside_a_competing_thread(
    ) {
        // Both on one processor, so that they take each other's turns and
        // leave the others to the other tests.
        let last = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let hog = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                set_cpu(last);
                while !stop.load(Ordering::Relaxed) {
                    spin(Duration::from_millis(1));
                }
            })
        };
        let (behind, ahead, opened) = std::thread::spawn(move || {
            set_cpu(last);
            warm();
            read();
            let opened = has_page();
            let (mut behind, mut ahead) = (0i64, 0i64);
            let until = Instant::now() + Duration::from_millis(300);
            while Instant::now() < until {
                for _ in 0..20 {
                    std::hint::black_box(read());
                }
                // The system call's reading before ours and after it.
                let (kernel, reading, kernel_after) =
                    (syscall_ns().unwrap(), read().unwrap(), syscall_ns().unwrap());
                behind = behind.max(kernel as i64 - reading as i64);
                ahead = ahead.max(reading as i64 - kernel_after as i64);
            }
            (behind, ahead, opened)
        })
        .join()
        .unwrap();
        stop.store(true, Ordering::Relaxed);
        hog.join().unwrap();
        note_fallback(opened);
        assert!(behind < ANCHOR_NS as i64, "a reading {behind} ns behind the system call's before it");
        assert!(ahead < WINDOW_NS as i64, "a reading {ahead} ns ahead of the system call's after it");
    }

    #[test]
    fn a_thread_that_reads_a_few_times_only_never_opens_an_event() {
        let (few, many) = std::thread::spawn(|| {
            warm();
            let few = has_page();
            read();
            (few, has_page())
        })
        .join()
        .unwrap();
        assert!(!few, "the event was opened before {WARM_READS} readings");
        // Only a process that no longer opens events may leave it closed.
        assert!(many || !extrapolates(), "no event after {WARM_READS} readings");
        note_fallback(many);
    }

    /// The two clocks' advance over `work`, on a thread of its own (a fresh
    /// state, whatever other tests did to theirs).
    fn both_over(work: impl FnOnce() + Send + 'static) -> (u64, u64, bool) {
        std::thread::spawn(move || {
            warm();
            let (fast, kernel) = (read().unwrap(), syscall_ns().unwrap());
            let opened = has_page();
            work();
            let (fast_end, kernel_end) = (read().unwrap(), syscall_ns().unwrap());
            (fast_end - fast, kernel_end - kernel, opened)
        })
        .join()
        .unwrap()
    }

    fn assert_close(fast: u64, kernel: u64, what: &str) {
        let tolerance = (kernel / 50).max(1_000_000);
        assert!(fast.abs_diff(kernel) <= tolerance, "{what}: {fast} ns read, {kernel} ns by the system call");
    }

    /// Says why a thread had no event, when it had none: the system refused
    /// it, or the process stopped opening them after windows that looked like
    /// missed switches (on a shared virtual machine, time the host took from
    /// the processor looks the same), from this test's threads or another's.
    fn note_fallback(opened: bool) {
        if opened {
            return;
        }
        let why = match PROCESS.load(Ordering::Relaxed) {
            FAILED => "this system refused the perf event".to_string(),
            _ if stopped() => format!(
                "the process stopped opening perf events after {} of {} windows looked like missed switches",
                MISSED.load(Ordering::Relaxed),
                JUDGED.load(Ordering::Relaxed)
            ),
            _ => "the thread had no perf event".to_string(),
        };
        eprintln!("{why}; the reading compared is the system call's own");
    }

    fn own_missed() -> u32 {
        STATE.with(|s| s.borrow().missed)
    }

    #[test]
    fn spinning_and_sleeping_read_what_the_kernel_says_within_a_millisecond_or_two_percent() {
        let (fast, kernel, opened) = both_over(|| {
            spin(Duration::from_millis(50));
            std::thread::sleep(Duration::from_millis(50));
        });
        note_fallback(opened);
        assert_close(fast, kernel, "50 ms of spinning and 50 ms of sleep");
        // A shared machine may give the thread a fraction of a core only.
        assert!(kernel > 10_000_000 && kernel < 60_000_000, "{kernel} ns");
    }

    #[test]
    fn short_sleeps_inside_a_window_are_seen_as_switches_and_not_counted_as_cpu() {
        std::thread::spawn(|| {
            warm();
            read();
            let opened = has_page();
            let (mut fast, mut kernel) = (0, 0);
            for _ in 0..200 {
                let (f, k) = (read().unwrap(), syscall_ns().unwrap());
                std::thread::sleep(Duration::from_micros(200));
                let (f_end, k_end) = (read().unwrap(), syscall_ns().unwrap());
                (fast, kernel) = (fast + f_end - f, kernel + k_end - k);
                spin(Duration::from_micros(20));
                for _ in 0..2 * READS_PER_SWITCH {
                    std::hint::black_box(read());
                }
            }
            // Counted as CPU, the sleeps would add up to 40 ms or more.
            assert!(
                fast.abs_diff(kernel) < 1_000_000,
                "across 200 sleeps: {fast} ns read, {kernel} ns by the system call"
            );
            // Taken for missed switches, every sleep would count until the
            // process stopped opening events (three of them, or fewer if
            // other threads' windows had counted too).
            let missed = own_missed();
            assert!(missed < STRIKES, "{missed} of the sleeps were taken for missed switches");
            if extrapolates() {
                assert!(has_page(), "the thread gave its event back though its sleeps were seen");
            }
            note_fallback(opened && has_page());
        })
        .join()
        .unwrap();
    }

    fn set_cpu(cpu: usize) -> bool {
        // SAFETY: an all-zero cpu_set_t is an empty set; CPU_SET writes in bounds.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
        }
    }

    #[test]
    fn readings_never_go_back_across_yields_sleeps_and_migrations() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (fast, kernel, opened) = both_over(move || {
            let mut last = read().unwrap();
            for i in 0..3_000 {
                if i % 100 == 0 && cpus > 1 {
                    // Moves the thread to another processor.
                    assert!(set_cpu((i / 100) % 2), "sched_setaffinity");
                }
                if i % 10 == 0 {
                    std::thread::sleep(Duration::from_micros(50));
                } else {
                    // SAFETY: sched_yield has no preconditions.
                    unsafe { libc::sched_yield() };
                }
                for _ in 0..20 {
                    let now = read().unwrap();
                    assert!(now >= last, "{now} after {last}");
                    last = now;
                }
                spin(Duration::from_micros(10));
            }
        });
        note_fallback(opened);
        assert_close(fast, kernel, "yields, sleeps and migrations");
    }

    #[test]
    fn a_thread_switched_out_more_often_than_it_reads_gives_its_event_back() {
        let kept = std::thread::spawn(|| {
            warm();
            read();
            let opened = has_page();
            for _ in 0..JUDGED_SWITCHES + 8 {
                std::thread::sleep(Duration::from_micros(20));
                std::hint::black_box(read());
            }
            (opened, has_page())
        })
        .join()
        .unwrap();
        note_fallback(kept.0);
        assert!(!kept.1, "a thread that reads once per sleep kept its event");
        // And one that reads often between switches keeps it.
        let busy = std::thread::spawn(|| {
            warm();
            for _ in 0..JUDGED_SWITCHES + 8 {
                std::thread::sleep(Duration::from_micros(20));
                for _ in 0..2 * READS_PER_SWITCH {
                    std::hint::black_box(read());
                }
            }
            has_page()
        })
        .join()
        .unwrap();
        assert_eq!(
            busy,
            kept.0 && extrapolates(),
            "a thread that reads often between switches keeps its event"
        );
    }

    /// Refuses `perf_event_open` (`EACCES`) to the calling thread and the
    /// threads it starts from now on, as a container's seccomp profile does.
    fn refuse_perf_events() {
        let stmt = |code: u32, k: u32| libc::sock_filter { code: code as u16, jt: 0, jf: 0, k };
        let mut program = [
            // The system call's number is the first word of `seccomp_data`.
            stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
            libc::sock_filter {
                code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
                jt: 0,
                jf: 1,
                k: libc::SYS_perf_event_open as u32,
            },
            stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ERRNO | libc::EACCES as u32),
            stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
        ];
        let prog = libc::sock_fprog { len: program.len() as u16, filter: program.as_mut_ptr() };
        // SAFETY: `prog` points at a valid filter program for the duration of the call.
        unsafe {
            assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0, "PR_SET_NO_NEW_PRIVS");
            assert_eq!(
                libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &prog as *const libc::sock_fprog
                ),
                0,
                "PR_SET_SECCOMP"
            );
        }
    }

    const REFUSED: &str = "TRACE_CORE_TEST_PERF_REFUSED";

    /// Run by the test below in a process of its own, so that the refusal it
    /// records stays out of the other tests' process.
    #[test]
    #[ignore = "run by where_perf_events_are_refused_every_thread_reads_the_system_call"]
    fn refused_perf_events() {
        if std::env::var_os(REFUSED).is_none() {
            return;
        }
        refuse_perf_events();
        let (fast, kernel, opened) = both_over(|| spin(Duration::from_millis(20)));
        assert!(!opened, "the event opened under a filter that refuses it");
        assert_eq!(PROCESS.load(Ordering::Relaxed), FAILED, "the process did not remember the refusal");
        assert_close(fast, kernel, "the system call's readings");
        // A later thread does not try again.
        let tried = std::thread::spawn(|| {
            warm();
            (read().is_some(), STATE.with(|s| s.borrow().tried))
        })
        .join()
        .unwrap();
        assert_eq!(tried, (true, false), "(read, tried to open) on a later thread");
        println!("{REFUSED}: checked");
    }

    #[test]
    fn where_perf_events_are_refused_every_thread_reads_the_system_call() {
        crate::test_child::run_alone("os::unix::thread_cpu::tests::refused_perf_events", REFUSED);
    }
}
