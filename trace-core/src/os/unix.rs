//! Linux and macOS: `getrusage`, `clock_gettime`, and a constructor
//! that runs when the tool's image starts.

use std::sync::atomic::{AtomicU64, Ordering};

use super::Cpu;
use crate::event::Since;

pub(super) const MISSING: Option<&str> = None;

pub(super) fn current_tid() -> u64 {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // SAFETY: gettid has no preconditions and cannot fail.
        unsafe { libc::gettid() as u64 }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        thread_local!(static TID: u64 = NEXT.fetch_add(1, Ordering::Relaxed));
        TID.with(|t| *t)
    }
}

fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

pub(super) fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(0)
}

#[inline]
pub(super) fn thread_cpu_ns() -> Option<u64> {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// What repeated samples of the process reuse.
#[derive(Debug)]
pub(super) struct Sampler {
    /// `/proc/self/statm`, read again from its start for each sample: the
    /// kernel regenerates it on every read, and keeping it open saves the
    /// open and close of each sample.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    statm: Option<std::fs::File>,
    #[cfg(any(target_os = "linux", target_os = "android"))]
    page_bytes: u64,
}

impl Sampler {
    pub(super) fn new() -> Sampler {
        Sampler {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            statm: std::fs::File::open("/proc/self/statm").ok(),
            #[cfg(any(target_os = "linux", target_os = "android"))]
            // SAFETY: sysconf has no preconditions.
            page_bytes: u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096),
        }
    }

    /// The resident set in bytes and the process's CPU time in nanoseconds.
    pub(super) fn read(&mut self) -> (Option<u64>, Option<u64>) {
        (self.resident_bytes(), clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID))
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn resident_bytes(&mut self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        // `size resident shared text lib data dt`, in pages.
        let mut buf = [0u8; 128];
        let n = self.statm.as_ref()?.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(buf.get(..n)?).ok()?;
        let pages: u64 = text.split_ascii_whitespace().nth(1)?.parse().ok()?;
        Some(pages * self.page_bytes)
    }

    #[cfg(target_vendor = "apple")]
    fn resident_bytes(&mut self) -> Option<u64> {
        // SAFETY: an all-zero mach_task_basic_info is valid, and task_info
        // writes at most `count` integers of it.
        let mut info: libc::mach_task_basic_info = unsafe { std::mem::zeroed() };
        let mut count = libc::MACH_TASK_BASIC_INFO_COUNT;
        // SAFETY: `info` and `count` are valid and writable; the task port is
        // this process's own, which needs no deallocation.
        #[allow(deprecated)]
        let rc = unsafe {
            libc::task_info(
                libc::mach_task_self(),
                libc::MACH_TASK_BASIC_INFO,
                (&mut info as *mut libc::mach_task_basic_info).cast(),
                &mut count,
            )
        };
        (rc == libc::KERN_SUCCESS).then_some(info.resident_size)
    }

    #[cfg(not(any(target_os = "linux", target_os = "android", target_vendor = "apple")))]
    fn resident_bytes(&mut self) -> Option<u64> {
        None
    }
}

fn rusage(who: libc::c_int) -> Option<libc::rusage> {
    // SAFETY: an all-zero rusage is valid, and getrusage only writes to it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    (unsafe { libc::getrusage(who, &mut ru) } == 0).then_some(ru)
}

fn tv_us(tv: libc::timeval) -> u64 {
    tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64
}

fn cpu(ru: &libc::rusage) -> Cpu {
    Cpu { user_us: tv_us(ru.ru_utime), system_us: tv_us(ru.ru_stime) }
}

fn max_rss_kib(ru: &libc::rusage) -> u64 {
    // Linux reports KiB; macOS reports bytes.
    if cfg!(target_vendor = "apple") {
        ru.ru_maxrss as u64 / 1024
    } else {
        ru.ru_maxrss as u64
    }
}

/// The process's CPU and peak resident set (in KiB, as `getrusage` has it),
/// and its waited-for children's CPU: one call for each.
pub(super) fn cpu_now() -> (Option<(Cpu, u64)>, Option<Cpu>) {
    (
        rusage(libc::RUSAGE_SELF).map(|r| (cpu(&r), max_rss_kib(&r))),
        rusage(libc::RUSAGE_CHILDREN).map(|r| cpu(&r)),
    )
}

/// The tool's peak resident set, from `peak` (the `getrusage` figure of
/// [`cpu_now`], read at the finish) when that is the tool's own.
pub(super) fn self_peak_kib(peak: Option<u64>) -> Option<(u64, Since)> {
    let peak = peak?;
    // getrusage's peak keeps the one from before an exec. Above the value the
    // image started with, it was reached by the tool itself: the usual case,
    // which needs no system call of its own.
    if image_start_ns().is_some() && peak > IMAGE_START_MAX_RSS_KIB.load(Ordering::Relaxed) {
        return Some((peak, Since::ImageStart));
    }
    // Otherwise the address space's own high-water mark, which an exec starts
    // afresh.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Some(kib) = status_hwm_kib() {
        return Some((kib, Since::ImageStart));
    }
    Some((peak, Since::ProcessCreation))
}

/// `VmHWM` of `/proc/self/status`, in KiB.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn status_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    line.strip_suffix("kB")?.trim().parse().ok()
}

// The image start: a constructor the loader runs before `main` (and before any
// other Rust code of this image) records the monotonic clock, the CPU the
// process had used until then (what it did before its exec) and its peak
// resident set then (the peak from before the exec, if it exec'd).

static IMAGE_START_NS: AtomicU64 = AtomicU64::new(0);
static IMAGE_START_USER_US: AtomicU64 = AtomicU64::new(0);
static IMAGE_START_SYSTEM_US: AtomicU64 = AtomicU64::new(0);
static IMAGE_START_MAX_RSS_KIB: AtomicU64 = AtomicU64::new(0);

#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
extern "C" fn at_image_start() {
    if let Some(ru) = rusage(libc::RUSAGE_SELF) {
        let c = cpu(&ru);
        IMAGE_START_USER_US.store(c.user_us, Ordering::Relaxed);
        IMAGE_START_SYSTEM_US.store(c.system_us, Ordering::Relaxed);
        IMAGE_START_MAX_RSS_KIB.store(max_rss_kib(&ru), Ordering::Relaxed);
    }
    // Stored last, with release: a reader that sees the time sees the CPU too.
    IMAGE_START_NS.store(monotonic_ns(), Ordering::Release);
}

#[cfg(any(target_os = "linux", target_os = "android"))]
#[used]
#[link_section = ".init_array"]
static AT_IMAGE_START: extern "C" fn() = at_image_start;

#[cfg(target_vendor = "apple")]
#[used]
#[link_section = "__DATA,__mod_init_func"]
static AT_IMAGE_START: extern "C" fn() = at_image_start;

/// The monotonic time the image started, if the constructor ran.
fn image_start_ns() -> Option<u64> {
    // A linker takes an object out of a static library only when something
    // refers to it: this reference keeps the constructor's object (and so the
    // constructor) in every binary that reads the figures.
    #[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
    std::hint::black_box(&AT_IMAGE_START);
    Some(IMAGE_START_NS.load(Ordering::Acquire)).filter(|ns| *ns != 0)
}

pub(super) fn image_start_cpu() -> Option<Cpu> {
    image_start_ns()?;
    Some(Cpu {
        user_us: IMAGE_START_USER_US.load(Ordering::Relaxed),
        system_us: IMAGE_START_SYSTEM_US.load(Ordering::Relaxed),
    })
}

pub(super) fn startup_since() -> Option<Since> {
    if image_start_ns().is_some() {
        Some(Since::ImageStart)
    } else {
        process_start_us().map(|_| Since::ProcessCreation)
    }
}

pub(super) fn startup_us() -> Option<u64> {
    if let Some(start) = image_start_ns() {
        return Some(monotonic_ns().saturating_sub(start) / 1_000);
    }
    let start_us = process_start_us()?;
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let now_us = clock_ns(libc::CLOCK_BOOTTIME)? / 1_000;
        Some(now_us.saturating_sub(start_us))
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = start_us;
        None
    }
}

pub(super) fn startup_resolution_us() -> u64 {
    if image_start_ns().is_some() {
        return 1;
    }
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        1_000_000 / hz as u64
    } else {
        10_000
    }
}

/// The process's creation on `CLOCK_BOOTTIME`, in microseconds (Linux:
/// `/proc/self/stat`, in clock ticks since boot).
fn process_start_us() -> Option<u64> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // The process's start never changes: read it once per process.
        static START_US: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
        *START_US.get_or_init(|| {
            let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
            // The command name (field 2) may hold spaces and parentheses: skip past its last ')'.
            let rest = &stat[stat.rfind(')')? + 1..];
            let start_ticks: u64 = rest.split_whitespace().nth(19)?.parse().ok()?;
            // SAFETY: sysconf has no preconditions.
            let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
            (hz > 0).then(|| start_ticks * 1_000_000 / hz as u64)
        })
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        None
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;

    #[test]
    fn the_peak_read_from_proc_status_is_the_one_it_shows() {
        let whole = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = whole.lines().find_map(|l| l.strip_prefix("VmHWM:")).unwrap();
        let expected: u64 = line.trim().strip_suffix("kB").unwrap().trim().parse().unwrap();
        // The peak only grows, and nothing here touches much memory in between.
        let read = status_hwm_kib().expect("VmHWM is read");
        assert!(read >= expected && read < expected + 4096, "{read} KiB against {expected} KiB");
    }
}
