//! One perf event per sampled thread: `perf_event_open(2)` with the layout of
//! `struct perf_event_attr` and the constants of `linux/perf_event.h`, and the
//! event's mmap'd ring buffer. The format's constants live here and nowhere
//! else.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, Ordering};
use std::time::Duration;

use crate::error::{StacksError, StacksErrorKind};

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;

const PERF_SAMPLE_TID: u64 = 1 << 1;
const PERF_SAMPLE_TIME: u64 = 1 << 2;
const PERF_SAMPLE_REGS_USER: u64 = 1 << 12;
const PERF_SAMPLE_STACK_USER: u64 = 1 << 13;

// Bits of the attribute's flag word, in the order of the C bitfield.
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const FLAG_WATERMARK: u64 = 1 << 14;
const FLAG_USE_CLOCKID: u64 = 1 << 25;

const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// `_IO('$', 1)`.
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;

/// `PERF_RECORD_LOST`: `{ header, u64 id, u64 lost }`.
pub(crate) const PERF_RECORD_LOST: u32 = 2;
/// `PERF_RECORD_SAMPLE`, laid out by [`SAMPLE_TYPE`].
pub(crate) const PERF_RECORD_SAMPLE: u32 = 9;
/// `PERF_SAMPLE_REGS_ABI_NONE`: the sample has no user registers (it was
/// taken in a kernel thread).
pub(crate) const PERF_SAMPLE_REGS_ABI_NONE: u64 = 0;

/// What each sample holds: `{ u32 pid, tid; u64 time; u64 abi; u64
/// regs[REGS_COUNT]; u64 size; u8 stack[size]; u64 dyn_size }`.
const SAMPLE_TYPE: u64 = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;

/// x86-64's `perf_event_x86_regs`: BP (6), SP (7), IP (8). A sample holds the
/// selected registers in the order of their bits.
const SAMPLE_REGS_USER: u64 = (1 << 6) | (1 << 7) | (1 << 8);
/// How many registers [`SAMPLE_REGS_USER`] selects.
pub(crate) const REGS_COUNT: usize = 3;
/// Indices into a sample's registers.
pub(crate) const REG_BP: usize = 0;
pub(crate) const REG_SP: usize = 1;
pub(crate) const REG_IP: usize = 2;

/// How much of the user stack each sample copies, from the stack pointer up.
/// 32 KiB holds the stacks of ordinary Rust programs from the leaf to the
/// thread's start; deeper ones are counted as not unwound.
pub(crate) const STACK_COPY_BYTES: u32 = 32 * 1024;

/// Data pages of each ring buffer, a power of two: 512 KiB, fifteen samples,
/// so that a reader thread kept off the CPU for a dozen intervals on a busy
/// machine loses none. Smaller buffers are tried when the locked-memory
/// limit refuses it.
const DATA_PAGES: [usize; 4] = [128, 64, 32, 16];

/// `struct perf_event_attr` up to `PERF_ATTR_SIZE_VER5` (112 bytes), which
/// every kernel since 4.1 accepts.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_watermark: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
}

const _: () = assert!(std::mem::size_of::<PerfEventAttr>() == 112);

/// Offsets in `struct perf_event_mmap_page`, the ring buffer's first page.
const DATA_HEAD_OFFSET: usize = 1024;
const DATA_TAIL_OFFSET: usize = 1032;

/// The attribute every sampled thread gets.
fn attribute(interval: Duration, watermark: u32) -> PerfEventAttr {
    PerfEventAttr {
        kind: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_SW_TASK_CLOCK,
        sample_period: interval.as_nanos().clamp(1, u64::MAX as u128) as u64,
        sample_type: SAMPLE_TYPE,
        flags: FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV | FLAG_WATERMARK | FLAG_USE_CLOCKID,
        wakeup_watermark: watermark,
        sample_regs_user: SAMPLE_REGS_USER,
        sample_stack_user: STACK_COPY_BYTES,
        clockid: libc::CLOCK_MONOTONIC,
        ..PerfEventAttr::default()
    }
}

/// One thread's open event and its ring buffer.
pub(crate) struct ThreadEvent {
    fd: OwnedFd,
    ring: RingBuffer,
}

impl ThreadEvent {
    /// Opens the sampling event on thread `tid` of this process and maps its
    /// ring buffer.
    pub(crate) fn open(tid: u32, interval: Duration) -> Result<ThreadEvent, StacksError> {
        // perf_event_open takes any thread of the system the caller may
        // trace; this sampler is for its own process only.
        if std::fs::metadata(format!("/proc/self/task/{tid}")).is_err() {
            return Err(StacksError::new(
                StacksErrorKind::NoSuchThread,
                format!("CPU stacks: no thread {tid} in this process (/proc/self/task/{tid})"),
            ));
        }
        let page = page_size();
        let mut last_error = None;
        for pages in DATA_PAGES {
            // Wake the reader when a quarter of the buffer is full.
            let attr = attribute(interval, (pages * page / 4) as u32);
            let fd = open_event(&attr, tid)?;
            match RingBuffer::map(&fd, pages, page) {
                Ok(ring) => return Ok(ThreadEvent { fd, ring }),
                Err(error) => last_error = Some(error),
            }
        }
        let error = last_error.unwrap_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM));
        Err(StacksError::new(
            StacksErrorKind::RingBuffer,
            format!(
                "CPU stacks: mapping the perf ring buffer of thread {tid} failed ({error}); \
                 the locked-memory limit for perf buffers is exhausted \
                 (`ulimit -l`, sysctl kernel.perf_event_mlock_kb)"
            ),
        ))
    }

    /// Opens the event on the calling thread and closes it at once: whether
    /// the kernel allows this process to sample itself, and if not why.
    /// Maps no buffer (the locked-memory limit is met per thread, later).
    pub(crate) fn probe(tid: u32, interval: Duration) -> Result<(), StacksError> {
        open_event(&attribute(interval, 0), tid).map(drop)
    }

    pub(crate) fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Stops the event, so that no sample arrives after the final drain.
    pub(crate) fn disable(&self) {
        // SAFETY: an ioctl without argument on a perf event we own.
        unsafe { libc::ioctl(self.fd.as_raw_fd(), PERF_EVENT_IOC_DISABLE as _, 0) };
    }

    /// Hands each record now in the ring buffer to `handle` (its type and its
    /// bytes after the 8-byte header), then frees their room.
    pub(crate) fn drain(&mut self, scratch: &mut Vec<u8>, mut handle: impl FnMut(u32, &[u8])) {
        self.ring.drain(scratch, &mut handle);
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as usize
    } else {
        4096
    }
}

fn open_event(attr: &PerfEventAttr, tid: u32) -> Result<OwnedFd, StacksError> {
    // SAFETY: attr is a valid perf_event_attr of the size it states; the
    // kernel copies it and keeps no pointer.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const PerfEventAttr,
            tid as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(refusal(tid, io::Error::last_os_error()));
    }
    // SAFETY: the kernel just returned this descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Says why the kernel refused the event, from what the system shows.
fn refusal(tid: u32, error: io::Error) -> StacksError {
    let paranoid = read_trimmed("/proc/sys/kernel/perf_event_paranoid");
    explain_refusal(tid, &error, paranoid.as_deref(), seccomp_mode().as_deref())
}

/// The error for `error`, given `kernel.perf_event_paranoid` and the
/// `Seccomp:` mode of this process where they could be read.
fn explain_refusal(
    tid: u32,
    error: &io::Error,
    paranoid: Option<&str>,
    seccomp: Option<&str>,
) -> StacksError {
    let head = format!("CPU stacks: perf_event_open on thread {tid} failed ({error})");
    match error.raw_os_error().unwrap_or(0) {
        libc::EACCES | libc::EPERM => {
            let why = match (paranoid.and_then(|p| p.parse::<i32>().ok()), seccomp) {
                (Some(level), _) if level > 2 => format!(
                    "kernel.perf_event_paranoid is {level}; sampling one's own threads in user \
                     space needs 2 or less (sysctl kernel.perf_event_paranoid=2)"
                ),
                (_, Some(mode)) if mode != "0" => format!(
                    "a seccomp filter is active on this process (Seccomp: {mode} in \
                     /proc/thread-self/status), as under a container's default profile: allow \
                     perf_event_open"
                ),
                (level, _) => format!(
                    "kernel.perf_event_paranoid is {} and no seccomp filter is active: \
                     a security module or a missing capability refuses perf events",
                    level.map_or("unreadable".to_string(), |l| l.to_string())
                ),
            };
            StacksError::new(StacksErrorKind::Refused, format!("{head}: {why}"))
        }
        libc::ENOSYS | libc::ENOENT | libc::ENODEV | libc::EOPNOTSUPP => StacksError::new(
            StacksErrorKind::NoPerfEvents,
            format!("{head}: this kernel has no software perf events (CONFIG_PERF_EVENTS)"),
        ),
        libc::ESRCH => StacksError::new(
            StacksErrorKind::NoSuchThread,
            format!("{head}: no thread {tid} in this process"),
        ),
        _ => StacksError::new(StacksErrorKind::System, head),
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// The `Seccomp:` field of the calling thread's status (0 none, 1 strict, 2
/// filter): a filter is a thread's, and the thread that opens the event is
/// the one it judges.
fn seccomp_mode() -> Option<String> {
    let status = std::fs::read_to_string("/proc/thread-self/status").ok()?;
    status.lines().find_map(|l| l.strip_prefix("Seccomp:")).map(|v| v.trim().to_string())
}

/// A perf event's ring buffer: one metadata page, then `2^n` data pages.
struct RingBuffer {
    base: *mut u8,
    mapped_len: usize,
    data_offset: usize,
    data_len: usize,
}

// SAFETY: the mapping is owned by this value alone; the kernel is the other
// side of the protocol, synchronised through data_head and data_tail.
unsafe impl Send for RingBuffer {}

impl RingBuffer {
    fn map(fd: &OwnedFd, data_pages: usize, page: usize) -> io::Result<RingBuffer> {
        let mapped_len = (data_pages + 1) * page;
        // SAFETY: a new shared mapping of the event's buffer; nothing else
        // aliases it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(RingBuffer { base: base.cast(), mapped_len, data_offset: page, data_len: data_pages * page })
    }

    fn drain(&mut self, scratch: &mut Vec<u8>, handle: &mut impl FnMut(u32, &[u8])) {
        // SAFETY (all pointer reads below): offsets stay inside the mapping;
        // data_head is written by the kernel and read once, after which
        // the bytes before it are stable until data_tail moves past them.
        let head_ptr = unsafe { self.base.add(DATA_HEAD_OFFSET) } as *const u64;
        let tail_ptr = unsafe { self.base.add(DATA_TAIL_OFFSET) } as *mut u64;
        let head = unsafe { head_ptr.read_volatile() };
        fence(Ordering::Acquire);
        let mut tail = unsafe { tail_ptr.read_volatile() };
        let data = unsafe { std::slice::from_raw_parts(self.base.add(self.data_offset), self.data_len) };
        while tail + 8 <= head {
            let start = (tail % self.data_len as u64) as usize;
            // Records are 8-byte aligned, so a header never wraps.
            let header = &data[start..start + 8];
            let kind = u32::from_ne_bytes([header[0], header[1], header[2], header[3]]);
            let size = u16::from_ne_bytes([header[6], header[7]]) as usize;
            if size < 8 || tail + size as u64 > head {
                break;
            }
            let body_start = (start + 8) % self.data_len;
            let body_len = size - 8;
            if body_start + body_len <= self.data_len {
                handle(kind, &data[body_start..body_start + body_len]);
            } else {
                let first = self.data_len - body_start;
                scratch.clear();
                scratch.extend_from_slice(&data[body_start..]);
                scratch.extend_from_slice(&data[..body_len - first]);
                handle(kind, scratch);
            }
            tail += size as u64;
        }
        fence(Ordering::Release);
        unsafe { tail_ptr.write_volatile(tail) };
    }
}

impl Drop for RingBuffer {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.mapped_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_its_cause_from_the_paranoid_level_and_the_seccomp_mode() {
        let eacces = || io::Error::from_raw_os_error(libc::EACCES);
        // The error, perf_event_paranoid, the Seccomp mode; the kind and what it says.
        type Case = (io::Error, Option<&'static str>, Option<&'static str>, StacksErrorKind, &'static str);
        let cases: [Case; 6] = [
            (eacces(), Some("3"), Some("0"), StacksErrorKind::Refused, "perf_event_paranoid is 3"),
            (eacces(), Some("4"), Some("2"), StacksErrorKind::Refused, "needs 2 or less"),
            (
                io::Error::from_raw_os_error(libc::EPERM),
                Some("2"),
                Some("2"),
                StacksErrorKind::Refused,
                "a seccomp filter is active",
            ),
            (eacces(), Some("1"), Some("0"), StacksErrorKind::Refused, "missing capability"),
            (
                io::Error::from_raw_os_error(libc::ENOSYS),
                None,
                None,
                StacksErrorKind::NoPerfEvents,
                "no software perf events",
            ),
            (
                io::Error::from_raw_os_error(libc::EINVAL),
                None,
                None,
                StacksErrorKind::System,
                "thread 42 failed",
            ),
        ];
        for (error, paranoid, seccomp, kind, says) in cases {
            let refusal = explain_refusal(42, &error, paranoid, seccomp);
            assert_eq!(refusal.kind(), kind, "{refusal}");
            assert!(refusal.to_string().contains(says), "{refusal} should say {says}");
            assert!(refusal.to_string().contains("thread 42"), "{refusal}");
        }
    }
}
