//! The few operating-system facts a capture needs: thread ids, the monotonic
//! clock, when the tool's image started, and what its process and children
//! used (CPU, peak memory).
//!
//! Each platform answers what it can, and says what it cannot:
//!
//! | fact | Linux | macOS | Windows |
//! | --- | --- | --- | --- |
//! | thread id | `gettid` | a per-process counter | `GetCurrentThreadId` |
//! | monotonic clock | `CLOCK_MONOTONIC` | `CLOCK_MONOTONIC` | `QueryPerformanceCounter` |
//! | image start ([`startup_us`]) | an `.init_array` constructor | a `__mod_init_func` constructor | not read |
//! | process CPU ([`Usage`]) | `getrusage` | `getrusage` | not read |
//! | the tool's peak memory | since the exec: `getrusage`, or `VmHWM` of `/proc/self/status` | `getrusage`: since the exec, or since process creation | not read |
//! | the calling thread's CPU time ([`thread_cpu_ns`]) | `CLOCK_THREAD_CPUTIME_ID` | `CLOCK_THREAD_CPUTIME_ID` | `GetThreadTimes` |
//! | resident memory now ([`ProcessSampler`]) | `/proc/self/statm`, kept open | `task_info(MACH_TASK_BASIC_INFO)` | `K32GetProcessMemoryInfo` |
//! | process CPU now ([`ProcessSampler`]) | `CLOCK_PROCESS_CPUTIME_ID` | `CLOCK_PROCESS_CPUTIME_ID` | `GetProcessTimes` |
//!
//! What is not read is `None`, and [`missing`] says why, for the summary.
//!
//! A process that exec'd (`cargo run` execs the tool after building it)
//! carries what it did before the exec in its `getrusage` totals: its CPU, the
//! peak of its children (rustc), and, on Linux, its own peak memory. So every
//! CPU figure here is a difference of two readings taken inside the tool's
//! image, a child's peak comes only from the children whose wait reported it
//! ([`crate::Handle::child_exited`]), and the tool's own peak is read where
//! the kernel resets it at an exec.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::event::{ProcessSample, Resources, Since};

#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as platform;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as platform;

#[cfg(not(any(unix, windows)))]
compile_error!(
    "trace-core reads clocks and thread ids through Unix or Windows calls; this target has neither"
);

/// The calling thread's operating-system id.
#[inline]
pub fn current_tid() -> u64 {
    platform::current_tid()
}

/// The monotonic clock in nanoseconds: `CLOCK_MONOTONIC` on Unix (the clock
/// `Instant` reads on Linux), the performance counter on Windows. One clock
/// for every process of a machine.
#[inline]
pub fn monotonic_ns() -> u64 {
    platform::monotonic_ns()
}

/// The CPU time (user and system) the calling thread has used, in
/// nanoseconds, read from the operating system's thread clock:
/// `clock_gettime(CLOCK_THREAD_CPUTIME_ID)` on Unix (a system call on
/// Linux: the vDSO does not serve this clock), `GetThreadTimes` on Windows
/// (in steps of the scheduler's tick there). `None` if the system refuses
/// to say. A capture reads it at the enter and exit of the spans
/// `<P>_TRACE_CPU` selects; docs/performance.md gives the cost of one read.
#[inline]
pub fn thread_cpu_ns() -> Option<u64> {
    platform::thread_cpu_ns()
}

/// Reads the process's resident memory and CPU time, again and again: what
/// the sampler thread runs at each `<P>_TRACE_SAMPLE` interval of a capture.
/// It keeps what a reading can reuse (on Linux, `/proc/self/statm` open).
#[derive(Debug)]
pub struct ProcessSampler {
    platform: platform::Sampler,
}

impl ProcessSampler {
    /// A sampler of the calling process.
    pub fn new() -> ProcessSampler {
        ProcessSampler { platform: platform::Sampler::new() }
    }

    /// One reading, stamped with [`monotonic_ns`] as it is taken.
    pub fn sample(&mut self) -> ProcessSample {
        let (resident_bytes, cpu_ns) = self.platform.read();
        ProcessSample { ts: monotonic_ns(), resident_bytes, cpu_ns }
    }
}

impl Default for ProcessSampler {
    fn default() -> Self {
        ProcessSampler::new()
    }
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Microseconds from the start of the tool's image (its exec) until now.
///
/// Where the image start was not recorded (no constructor on this platform),
/// Linux falls back to the process's creation (`/proc/self/stat`), which is
/// earlier than the exec when the process exec'd: [`startup_since`] says which
/// of the two the figure counts from. `None` where neither is known.
pub fn startup_us() -> Option<u64> {
    platform::startup_us()
}

/// What [`startup_us`] counts from; `None` where it is not known.
pub fn startup_since() -> Option<Since> {
    platform::startup_since()
}

/// The resolution of [`startup_us`], in microseconds: 1 from the image start;
/// the kernel's clock tick (usually 10 ms) from the process's creation.
pub fn startup_resolution_us() -> u64 {
    platform::startup_resolution_us()
}

/// Why some process figures are `None` on this platform, or `None` when every
/// figure is read.
pub fn missing() -> Option<&'static str> {
    platform::MISSING
}

/// What one child process used, as its wait reported it
/// ([`crate::Handle::child_exited`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChildUsage {
    /// User CPU time of the child (and of the children it waited for), in microseconds.
    pub user_us: u64,
    /// System CPU time of the child (and of the children it waited for), in microseconds.
    pub system_us: u64,
    /// Peak resident set of the child, or of the largest of the children it
    /// waited for, in KiB.
    pub max_rss_kib: u64,
}

/// The children one capture waited for (see [`crate::Handle::child_exited`]):
/// summed CPU, the largest peak. Lock-free, so a helper thread's wait never
/// waits for another's.
#[derive(Debug, Default)]
pub(crate) struct ChildTotals {
    count: AtomicU64,
    user_us: AtomicU64,
    system_us: AtomicU64,
    max_rss_kib: AtomicU64,
}

impl ChildTotals {
    pub(crate) fn add(&self, child: &ChildUsage) {
        self.user_us.fetch_add(child.user_us, Ordering::Relaxed);
        self.system_us.fetch_add(child.system_us, Ordering::Relaxed);
        self.max_rss_kib.fetch_max(child.max_rss_kib, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Release);
    }
}

/// The CPU totals of one reading, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cpu {
    pub user_us: u64,
    pub system_us: u64,
}

impl Cpu {
    fn minus(self, earlier: Cpu) -> Cpu {
        Cpu {
            user_us: self.user_us.saturating_sub(earlier.user_us),
            system_us: self.system_us.saturating_sub(earlier.system_us),
        }
    }
}

/// A reading of the process's and its waited-for children's CPU, taken at a
/// capture's start and again at its finish.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    /// `None` where the platform does not read it.
    me: Option<Cpu>,
    /// The process's peak resident set in KiB as the same reading gave it
    /// (on Linux, it may be one from before the exec).
    me_peak_kib: Option<u64>,
    children: Option<Cpu>,
}

impl Usage {
    /// Reads both now.
    pub fn now() -> Usage {
        let (me, children) = platform::cpu_now();
        Usage { me: me.map(|(cpu, _)| cpu), me_peak_kib: me.map(|(_, peak)| peak), children }
    }

    /// What the capture that started at `start` used, this being its finish.
    ///
    /// CPU figures are differences from `start`; the children's peak and CPU
    /// are those the capture's helpers waited for (`children`); the tool's peak
    /// is read now; startup and pre-exec CPU come from the image start.
    pub(crate) fn since(&self, start: &Usage, children: &ChildTotals) -> Resources {
        let me = self.me.zip(start.me).map(|(now, then)| now.minus(then));
        let kids = self.children.zip(start.children).map(|(now, then)| now.minus(then));
        let image = platform::image_start_cpu();
        let startup = start.me.zip(image).map(|(then, image)| then.minus(image));
        // Usage is read where waits can report it; elsewhere nothing was waited with usage.
        let waited = kids.map(|_| children.count.load(Ordering::Acquire));
        let (self_max_rss_kib, self_max_rss_since) = match platform::self_peak_kib(self.me_peak_kib) {
            Some((kib, since)) => (Some(kib), Some(since)),
            None => (None, None),
        };
        Resources {
            self_user_us: me.map(|c| c.user_us),
            self_system_us: me.map(|c| c.system_us),
            self_max_rss_kib,
            self_max_rss_since,
            startup_user_us: startup.map(|c| c.user_us),
            startup_system_us: startup.map(|c| c.system_us),
            pre_exec_user_us: image.map(|c| c.user_us),
            pre_exec_system_us: image.map(|c| c.system_us),
            children_user_us: kids.map(|c| c.user_us),
            children_system_us: kids.map(|c| c.system_us),
            waited_children: waited,
            waited_children_user_us: waited.map(|_| children.user_us.load(Ordering::Relaxed)),
            waited_children_system_us: waited.map(|_| children.system_us.load(Ordering::Relaxed)),
            largest_child_max_rss_kib: waited
                .filter(|n| *n > 0)
                .map(|_| children.max_rss_kib.load(Ordering::Relaxed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_totals_sum_cpu_and_keep_the_largest_peak_and_no_child_means_no_peak() {
        let none = Usage::now().since(&Usage::now(), &ChildTotals::default());
        assert_eq!(none.largest_child_max_rss_kib, None);
        assert_eq!(none.waited_children, missing().is_none().then_some(0));
        let totals = ChildTotals::default();
        totals.add(&ChildUsage { user_us: 10, system_us: 1, max_rss_kib: 300 });
        totals.add(&ChildUsage { user_us: 5, system_us: 2, max_rss_kib: 900 });
        totals.add(&ChildUsage { user_us: 1, system_us: 0, max_rss_kib: 100 });
        let r = Usage::now().since(&Usage::now(), &totals);
        if missing().is_some() {
            assert_eq!(r.waited_children, None);
            return;
        }
        assert_eq!(r.waited_children, Some(3));
        assert_eq!((r.waited_children_user_us, r.waited_children_system_us), (Some(16), Some(3)));
        assert_eq!(r.largest_child_max_rss_kib, Some(900), "a peak is the largest, never a sum");
    }

    /// Burns CPU on the calling thread for about `ms` milliseconds of wall time.
    fn spin(ms: u64) {
        let until = std::time::Instant::now() + std::time::Duration::from_millis(ms);
        let mut x = 1u64;
        while std::time::Instant::now() < until {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }

    #[test]
    fn the_thread_cpu_clock_counts_spinning_and_not_sleeping() {
        let before = thread_cpu_ns().expect("the thread CPU clock is read on this platform");
        std::thread::sleep(std::time::Duration::from_millis(30));
        let slept = thread_cpu_ns().unwrap() - before;
        assert!(slept < 5_000_000, "sleeping 30 ms used {slept} ns of CPU");
        // Spin until the clock shows 20 ms: a shared machine may give this
        // thread a fraction of a core only, and some clocks advance in steps
        // (Wine's, read from /proc's clock ticks of 10 ms, showed none after
        // a spin of 30 ms of wall time in a busy CI run).
        let start = thread_cpu_ns().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut spun = 0;
        while spun < 20_000_000 && std::time::Instant::now() < deadline {
            spin(5);
            spun = thread_cpu_ns().unwrap() - start;
        }
        assert!(spun >= 20_000_000, "spinning for 10 s of wall time used only {spun} ns of CPU");
    }

    #[test]
    fn a_process_sample_sees_memory_that_was_touched_and_cpu_that_was_used() {
        let mut sampler = ProcessSampler::new();
        let first = sampler.sample();
        // Every platform this builds for reads both.
        let (Some(rss), Some(cpu)) = (first.resident_bytes, first.cpu_ns) else {
            panic!("a sample of this process read nothing: {first:?}");
        };
        let mut block = vec![0u8; 64 << 20];
        for page in block.chunks_mut(4096) {
            page[0] = 1;
        }
        spin(20);
        let second = sampler.sample();
        std::hint::black_box(&block);
        assert!(second.ts > first.ts);
        let grown = second.resident_bytes.unwrap().saturating_sub(rss);
        assert!(grown > 56 << 20, "touching 64 MiB grew the resident set by {grown} bytes");
        assert!(second.cpu_ns.unwrap() > cpu, "{first:?} then {second:?}");
    }

    #[test]
    fn the_monotonic_clock_does_not_go_back() {
        let mut last = monotonic_ns();
        assert!(last > 0);
        for _ in 0..1000 {
            let now = monotonic_ns();
            assert!(now >= last, "{now} after {last}");
            last = now;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(monotonic_ns() - last >= 2_000_000);
    }
}
