//! Windows: thread ids and the performance counter; no process figures.

use super::Cpu;
use crate::event::Since;

pub(super) const MISSING: Option<&str> =
    Some("process CPU, peak memory, children's usage and the image start are not read on Windows");

pub(super) fn current_tid() -> u64 {
    // SAFETY: GetCurrentThreadId has no preconditions and cannot fail.
    u64::from(unsafe { windows_sys::Win32::System::Threading::GetCurrentThreadId() })
}

pub(super) fn monotonic_ns() -> u64 {
    use std::sync::OnceLock;
    use windows_sys::Win32::System::Performance::{QueryPerformanceCounter, QueryPerformanceFrequency};
    static FREQUENCY: OnceLock<u64> = OnceLock::new();
    let frequency = *FREQUENCY.get_or_init(|| {
        let mut f = 0i64;
        // SAFETY: `f` is a valid, writable i64; the call cannot fail since Windows XP.
        unsafe { QueryPerformanceFrequency(&mut f) };
        f.max(1) as u64
    });
    let mut count = 0i64;
    // SAFETY: as above.
    unsafe { QueryPerformanceCounter(&mut count) };
    (u128::from(count as u64) * 1_000_000_000 / u128::from(frequency)) as u64
}

/// A `FILETIME` span (100 ns units) in nanoseconds.
fn filetime_ns(t: &windows_sys::Win32::Foundation::FILETIME) -> u64 {
    ((u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime)).saturating_mul(100)
}

const NO_TIME: windows_sys::Win32::Foundation::FILETIME =
    windows_sys::Win32::Foundation::FILETIME { dwLowDateTime: 0, dwHighDateTime: 0 };

pub(super) fn thread_cpu_ns() -> Option<u64> {
    use windows_sys::Win32::System::Threading::{GetCurrentThread, GetThreadTimes};
    let (mut created, mut exited, mut kernel, mut user) = (NO_TIME, NO_TIME, NO_TIME, NO_TIME);
    // SAFETY: the pseudo-handle of the current thread needs no closing; the
    // four FILETIMEs are valid and writable.
    let ok = unsafe { GetThreadTimes(GetCurrentThread(), &mut created, &mut exited, &mut kernel, &mut user) };
    (ok != 0).then(|| filetime_ns(&kernel) + filetime_ns(&user))
}

/// What repeated samples of the process reuse: nothing on Windows.
#[derive(Debug)]
pub(super) struct Sampler;

impl Sampler {
    pub(super) fn new() -> Sampler {
        Sampler
    }

    /// The working set in bytes and the process's CPU time in nanoseconds.
    pub(super) fn read(&mut self) -> (Option<u64>, Option<u64>) {
        use windows_sys::Win32::System::ProcessStatus::{K32GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS};
        use windows_sys::Win32::System::Threading::{GetCurrentProcess, GetProcessTimes};
        // SAFETY: an all-zero PROCESS_MEMORY_COUNTERS is valid; `cb` says its size.
        let mut counters: PROCESS_MEMORY_COUNTERS = unsafe { std::mem::zeroed() };
        counters.cb = std::mem::size_of::<PROCESS_MEMORY_COUNTERS>() as u32;
        // SAFETY: the pseudo-handle of the current process needs no closing;
        // `counters` is valid, writable and of the size given.
        let ok = unsafe { K32GetProcessMemoryInfo(GetCurrentProcess(), &mut counters, counters.cb) };
        let resident = (ok != 0).then_some(counters.WorkingSetSize as u64);
        let (mut created, mut exited, mut kernel, mut user) = (NO_TIME, NO_TIME, NO_TIME, NO_TIME);
        // SAFETY: as above; the four FILETIMEs are valid and writable.
        let ok = unsafe {
            GetProcessTimes(GetCurrentProcess(), &mut created, &mut exited, &mut kernel, &mut user)
        };
        let cpu = (ok != 0).then(|| filetime_ns(&kernel) + filetime_ns(&user));
        (resident, cpu)
    }
}

pub(super) fn cpu_now() -> (Option<(Cpu, u64)>, Option<Cpu>) {
    (None, None)
}

pub(super) fn self_peak_kib(_peak: Option<u64>) -> Option<(u64, Since)> {
    None
}

pub(super) fn image_start_cpu() -> Option<Cpu> {
    None
}

pub(super) fn startup_since() -> Option<Since> {
    None
}

pub(super) fn startup_us() -> Option<u64> {
    None
}

pub(super) fn startup_resolution_us() -> u64 {
    0
}
