//! What `samples.json` records of the machine.

use trace_compare::samples::Machine;

/// The machine this runs on; fields the system does not tell are `None`.
pub fn describe() -> Machine {
    let mut machine = Machine::default();
    machine.cpu_model = cpu_model();
    machine.cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    machine.os = std::env::consts::OS.to_string();
    machine.os_release = os_release();
    machine.kernel = kernel();
    machine.arch = std::env::consts::ARCH.to_string();
    machine.load_average_start = load_average();
    machine
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

fn os_release() -> Option<String> {
    let text = std::fs::read_to_string("/etc/os-release").ok()?;
    text.lines().find_map(|l| l.strip_prefix("PRETTY_NAME=")).map(|v| v.trim_matches('"').to_string())
}

#[cfg(unix)]
fn kernel() -> Option<String> {
    // SAFETY: uname fills the zeroed struct; its fields are NUL-terminated.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return None;
        }
        let release = std::ffi::CStr::from_ptr(u.release.as_ptr());
        Some(release.to_string_lossy().into_owned())
    }
}

#[cfg(not(unix))]
fn kernel() -> Option<String> {
    None
}

/// The 1-minute load average.
#[cfg(unix)]
pub fn load_average() -> Option<f64> {
    let mut avg = [0f64; 1];
    // SAFETY: getloadavg writes at most `1` value into the array.
    let n = unsafe { libc::getloadavg(avg.as_mut_ptr(), 1) };
    (n == 1).then_some(avg[0])
}

/// The 1-minute load average (not known here).
#[cfg(not(unix))]
pub fn load_average() -> Option<f64> {
    None
}
