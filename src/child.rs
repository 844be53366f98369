//! A child process the command runs: its wait, with what it used, and its
//! `stdout` and `stderr`, read to their ends without letting a child that
//! fills one pipe block on the other: on Unix both on the calling thread,
//! with `poll`, as `Command::output` does; elsewhere `stderr` on a thread of
//! its own.
//!
//! On Unix no thread is started: a thread for each child would cost the
//! command its start and, at its end, a wake-up of the other processor to
//! join it.

use std::io::{self, Read};
use std::process::{Child, ChildStderr, ChildStdout, ExitStatus};

use trace_core::ChildUsage;

/// Waits for `child` to exit, and reads what it used: `wait4` on Unix;
/// elsewhere a plain wait, and no usage.
///
/// The child is consumed: once waited for this way, `std` could not wait for it
/// again. Interrupted waits are retried.
#[cfg(unix)]
pub(crate) fn wait_with_usage(child: Child) -> io::Result<(ExitStatus, Option<ChildUsage>)> {
    use std::os::unix::process::ExitStatusExt;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is valid, and wait4 only writes to it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `ru` are valid and writable; `pid` is our child,
        // which nothing else waits for: `child` is ours and is dropped unwaited.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if rc == pid {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    drop(child);
    let us = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64;
    // Linux reports KiB; macOS reports bytes.
    let max_rss_kib =
        if cfg!(target_vendor = "apple") { ru.ru_maxrss as u64 / 1024 } else { ru.ru_maxrss as u64 };
    let usage = ChildUsage { user_us: us(ru.ru_utime), system_us: us(ru.ru_stime), max_rss_kib };
    Ok((ExitStatus::from_raw(status), Some(usage)))
}

#[cfg(not(unix))]
pub(crate) fn wait_with_usage(mut child: Child) -> io::Result<(ExitStatus, Option<ChildUsage>)> {
    Ok((child.wait()?, None))
}

/// Reads both pipes to their ends. Each pipe's result comes apart, so that
/// the caller can still wait for the child when reading one failed.
pub(crate) fn read_pipes(
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
) -> (io::Result<Vec<u8>>, io::Result<Vec<u8>>) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    match (stdout, stderr) {
        (Some(mut o), None) => (o.read_to_end(&mut out).map(|_| out), Ok(err)),
        (None, Some(mut e)) => (Ok(out), e.read_to_end(&mut err).map(|_| err)),
        (None, None) => (Ok(out), Ok(err)),
        (Some(o), Some(e)) => read_both(o, e),
    }
}

#[cfg(unix)]
fn read_both(mut o: ChildStdout, mut e: ChildStderr) -> (io::Result<Vec<u8>>, io::Result<Vec<u8>>) {
    use std::os::fd::AsRawFd;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    match poll_both(&mut o, &mut e, &mut out, &mut err) {
        // stdout ended: the rest of stderr.
        Ok(true) => {
            let r = set_nonblocking(e.as_raw_fd(), false).and_then(|()| e.read_to_end(&mut err));
            (Ok(out), r.map(|_| err))
        }
        Ok(false) => {
            let r = set_nonblocking(o.as_raw_fd(), false).and_then(|()| o.read_to_end(&mut out));
            (r.map(|_| out), Ok(err))
        }
        Err(error) => {
            let again = io::Error::new(error.kind(), error.to_string());
            (Err(error), Err(again))
        }
    }
}

/// Reads both pipes as far as they can be read without blocking whenever
/// `poll` says one has something, until one ends: true when it was `o`.
#[cfg(unix)]
fn poll_both(
    o: &mut ChildStdout,
    e: &mut ChildStderr,
    out: &mut Vec<u8>,
    err: &mut Vec<u8>,
) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    set_nonblocking(o.as_raw_fd(), true)?;
    set_nonblocking(e.as_raw_fd(), true)?;
    let mut fds = [
        libc::pollfd { fd: o.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: e.as_raw_fd(), events: libc::POLLIN, revents: 0 },
    ];
    loop {
        // SAFETY: `fds` is an array of two valid `pollfd`s, and its length
        // is passed with it.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        if fds[0].revents != 0 && read_available(o, out)? {
            return Ok(true);
        }
        if fds[1].revents != 0 && read_available(e, err)? {
            return Ok(false);
        }
    }
}

/// Reads what `pipe` holds into `to` without blocking: true once it ended.
#[cfg(unix)]
fn read_available(pipe: &mut impl Read, to: &mut Vec<u8>) -> io::Result<bool> {
    // What was read before a `WouldBlock` is kept in `to`.
    match pipe.read_to_end(to) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(unix)]
fn set_nonblocking(fd: libc::c_int, on: bool) -> io::Result<()> {
    // SAFETY: `fcntl` with F_GETFL and F_SETFL reads and sets the flags of
    // `fd`, an open descriptor that the caller owns; no memory is passed.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        let flags = if on { flags | libc::O_NONBLOCK } else { flags & !libc::O_NONBLOCK };
        if libc::fcntl(fd, libc::F_SETFL, flags) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn read_both(mut o: ChildStdout, mut e: ChildStderr) -> (io::Result<Vec<u8>>, io::Result<Vec<u8>>) {
    let stderr_reader = std::thread::Builder::new().name("child-stderr".into()).spawn(move || {
        let mut bytes = Vec::new();
        e.read_to_end(&mut bytes).map(|_| bytes)
    });
    let mut out = Vec::new();
    let read_out = o.read_to_end(&mut out).map(|_| out);
    let err = match stderr_reader {
        Ok(thread) => thread.join().unwrap_or_else(|_| Err(io::Error::other("the stderr reader panicked"))),
        Err(e) => Err(e),
    };
    (read_out, err)
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn a_childs_exit_status_and_cpu_come_from_its_wait() {
        // A shell that burns a little CPU in a loop, then exits with 3.
        let child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exit 3"])
            .spawn()
            .unwrap();
        let (status, usage) = wait_with_usage(child).unwrap();
        assert_eq!(status.code(), Some(3));
        let usage = usage.unwrap();
        assert!(usage.user_us + usage.system_us > 0, "{usage:?}");
        assert!(usage.max_rss_kib > 100, "{usage:?}");
    }

    #[test]
    fn a_child_killed_by_a_signal_says_so() {
        let child = std::process::Command::new("sh").args(["-c", "kill -9 $$"]).spawn().unwrap();
        let (status, _) = wait_with_usage(child).unwrap();
        assert_eq!((status.code(), status.signal()), (None, Some(9)));
    }

    /// The bytes `sh -c script` writes to its stdout and its stderr, read with
    /// [`read_pipes`], and its exit code.
    fn pipes_of(script: &str) -> (Vec<u8>, Vec<u8>, Option<i32>) {
        use std::process::{Command, Stdio};
        let mut child = Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (out, err) = read_pipes(child.stdout.take(), child.stderr.take());
        let status = child.wait().unwrap();
        (out.unwrap(), err.unwrap(), status.code())
    }

    #[test]
    fn both_pipes_are_read_to_their_ends_whichever_the_child_fills_first() {
        // 300,000 bytes on each, more than a pipe holds (64 KiB): a reader
        // that read one pipe to its end before the other would never return.
        let line = "x".repeat(99);
        let big = format!("i=0; while [ $i -lt 3000 ]; do echo {line}; i=$((i+1)); done");
        for script in [
            format!("({big}) >&2; {big}; exit 4"),
            format!("{big}; ({big}) >&2; exit 4"),
            format!("i=0; while [ $i -lt 3000 ]; do echo {line}; echo {line} >&2; i=$((i+1)); done; exit 4"),
        ] {
            let (out, err, code) = pipes_of(&script);
            assert_eq!((out.len(), err.len(), code), (300_000, 300_000, Some(4)), "{script}");
            assert!(out.iter().chain(&err).all(|b| *b == b'x' || *b == b'\n'));
        }
        // One pipe, the other, none.
        assert_eq!(pipes_of("printf out; printf err >&2"), (b"out".to_vec(), b"err".to_vec(), Some(0)));
        assert_eq!(pipes_of("exec >&-; printf err >&2"), (Vec::new(), b"err".to_vec(), Some(0)));
        assert_eq!(pipes_of("exec 2>&-; printf out"), (b"out".to_vec(), Vec::new(), Some(0)));
        assert_eq!(pipes_of("exit 0"), (Vec::new(), Vec::new(), Some(0)));
    }
}
