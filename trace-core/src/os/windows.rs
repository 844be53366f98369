//! Windows: thread ids and the performance counter; no process figures.

use std::io;
use std::process::{Child, ExitStatus};

use super::{ChildUsage, Cpu};
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

pub(super) fn cpu_now() -> (Option<Cpu>, Option<Cpu>) {
    (None, None)
}

pub(super) fn self_peak_kib() -> Option<(u64, Since)> {
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

pub(super) fn wait_child(mut child: Child) -> io::Result<(ExitStatus, Option<ChildUsage>)> {
    Ok((child.wait()?, None))
}
