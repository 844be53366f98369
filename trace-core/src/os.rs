//! The few operating-system facts a capture needs: thread ids, clocks, rusage.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::event::Resources;

/// The calling thread's operating-system id.
pub fn current_tid() -> u64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions and cannot fail.
        unsafe { libc::gettid() as u64 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        use std::sync::atomic::{AtomicU64, Ordering};
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

/// `CLOCK_MONOTONIC` in nanoseconds: the clock `Instant` reads on Linux.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(0)
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Microseconds from this process's start until now, where the OS tells it.
///
/// Linux gives the start in clock ticks since boot (`/proc/self/stat`, field
/// 22), so the figure has the tick's resolution, usually 10 ms.
pub fn startup_us() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        // The process's start never changes: read it once per process.
        static START_US: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
        let start_us = (*START_US.get_or_init(|| {
            let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
            // The command name (field 2) may hold spaces and parentheses: skip past its last ')'.
            let rest = &stat[stat.rfind(')')? + 1..];
            let start_ticks: u64 = rest.split_whitespace().nth(19)?.parse().ok()?;
            // SAFETY: sysconf has no preconditions.
            let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
            (hz > 0).then(|| start_ticks * 1_000_000 / hz as u64)
        }))?;
        let now_us = clock_ns(libc::CLOCK_BOOTTIME)? / 1_000;
        Some(now_us.saturating_sub(start_us))
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// The resolution of [`startup_us`], in microseconds.
pub fn startup_resolution_us() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        1_000_000 / hz as u64
    } else {
        10_000
    }
}

fn usage(who: libc::c_int) -> libc::rusage {
    // SAFETY: an all-zero rusage is valid, and getrusage only writes to it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    unsafe { libc::getrusage(who, &mut ru) };
    ru
}

fn tv_us(tv: libc::timeval) -> u64 {
    tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64
}

fn max_rss_kib(ru: &libc::rusage) -> u64 {
    // Linux reports KiB; macOS reports bytes.
    if cfg!(target_os = "macos") {
        ru.ru_maxrss as u64 / 1024
    } else {
        ru.ru_maxrss as u64
    }
}

/// A reading of `getrusage` for the process and its waited-for children.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage(Resources);

impl Usage {
    /// Reads both now.
    pub fn now() -> Usage {
        let me = usage(libc::RUSAGE_SELF);
        let kids = usage(libc::RUSAGE_CHILDREN);
        Usage(Resources {
            self_user_us: tv_us(me.ru_utime),
            self_system_us: tv_us(me.ru_stime),
            self_max_rss_kib: max_rss_kib(&me),
            children_user_us: tv_us(kids.ru_utime),
            children_system_us: tv_us(kids.ru_stime),
            children_max_rss_kib: max_rss_kib(&kids),
        })
    }

    /// CPU times since `start`; peaks as they are now (a peak has no difference).
    pub fn since(&self, start: &Usage) -> Resources {
        let (a, b) = (&self.0, &start.0);
        Resources {
            self_user_us: a.self_user_us.saturating_sub(b.self_user_us),
            self_system_us: a.self_system_us.saturating_sub(b.self_system_us),
            self_max_rss_kib: a.self_max_rss_kib,
            children_user_us: a.children_user_us.saturating_sub(b.children_user_us),
            children_system_us: a.children_system_us.saturating_sub(b.children_system_us),
            children_max_rss_kib: a.children_max_rss_kib,
        }
    }
}
