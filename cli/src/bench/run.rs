//! Running one command once: spawn, reap with `wait4`, keep its trace.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context};
use sha2::{Digest, Sha256};
use trace_compare::samples::{Binary, CommandInfo, Process as Outcome};
use trace_summary::{Timings, SUFFIX};

/// A command ready to run under one label.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// What `samples.json` records of it.
    pub info: CommandInfo,
    /// `NAME=value` words that led the command.
    env: Vec<(String, String)>,
    /// Run through `sh -c` rather than split into words.
    shell: bool,
}

/// True for a leading `NAME=value` word.
fn assignment(word: &str) -> Option<(String, String)> {
    let (name, value) = word.split_once('=')?;
    let mut chars = name.chars();
    let first = chars.next()?;
    let ok =
        (first.is_ascii_alphabetic() || first == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    ok.then(|| (name.to_string(), value.to_string()))
}

/// Splits `command` into words (POSIX shell quoting; leading `NAME=value`
/// words go to the environment) or, with `shell`, keeps it for `sh -c`; and
/// identifies the program it runs.
pub fn prepare(label: &str, command: &str, shell: bool, workdir: Option<&Path>) -> anyhow::Result<Prepared> {
    let words = shlex::split(command).with_context(|| {
        format!("command of `{label}`: `{command}`: unbalanced quotes or a trailing backslash")
    })?;
    let mut env = Vec::new();
    let mut rest = words.as_slice();
    while let Some((name, value)) = rest.first().and_then(|w| assignment(w)) {
        env.push((name, value));
        rest = &rest[1..];
    }
    let Some(program) = rest.first() else {
        bail!("command of `{label}`: `{command}`: expected a program to run, found none");
    };
    let binary = resolve(program, workdir).map(|p| identify(&p)).transpose()?;
    if !shell && binary.is_none() {
        bail!("command of `{label}`: `{program}` is not an executable file nor found on PATH");
    }
    let mut info = CommandInfo::default();
    info.label = label.to_string();
    info.command = command.to_string();
    info.argv = if shell { Vec::new() } else { rest.to_vec() };
    info.binary = binary;
    Ok(Prepared { info, env: if shell { Vec::new() } else { env }, shell })
}

/// `program` as the child would find it: a path (relative to `workdir`) or
/// the first executable of that name on `PATH`.
fn resolve(program: &str, workdir: Option<&Path>) -> Option<PathBuf> {
    if program.contains('/') {
        let p = Path::new(program);
        let p = match workdir {
            Some(w) if p.is_relative() => w.join(p),
            _ => p.to_path_buf(),
        };
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| executable(p))
}

#[cfg(unix)]
fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn executable(p: &Path) -> bool {
    p.is_file()
}

/// A program file's size and SHA-256.
fn identify(path: &Path) -> anyhow::Result<Binary> {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let mut f = std::fs::File::open(&path).with_context(|| format!("{}: cannot be read", path.display()))?;
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf).with_context(|| format!("{}: cannot be read", path.display()))?;
        if n == 0 {
            break;
        }
        size += n as u64;
        hash.update(&buf[..n]);
    }
    let sha256 = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let mut binary = Binary::default();
    binary.path = path.display().to_string();
    binary.size_bytes = size;
    binary.sha256 = sha256;
    Ok(binary)
}

/// Runs `cmd` once in `workdir` with `trace_var` set to `run_dir/trace`;
/// its stdout and stderr go to files in `run_dir`.
pub fn run(
    cmd: &Prepared,
    workdir: Option<&Path>,
    trace_var: &str,
    run_dir: &Path,
) -> anyhow::Result<Outcome> {
    let trace = run_dir.join("trace");
    std::fs::create_dir_all(&trace).with_context(|| format!("{}: cannot be created", trace.display()))?;
    let log = |name: &str| -> anyhow::Result<Stdio> {
        let p = run_dir.join(name);
        Ok(std::fs::File::create(&p).with_context(|| format!("{}: cannot be created", p.display()))?.into())
    };
    let mut c = if cmd.shell {
        let mut c = Command::new("sh");
        c.arg("-c").arg(&cmd.info.command);
        c
    } else {
        let mut c = Command::new(&cmd.info.argv[0]);
        c.args(&cmd.info.argv[1..]);
        c.envs(cmd.env.iter().map(|(k, v)| (k, v)));
        c
    };
    if let Some(w) = workdir {
        c.current_dir(w);
    }
    c.env(trace_var, &trace).stdin(Stdio::null()).stdout(log("stdout.txt")?).stderr(log("stderr.txt")?);
    let start = Instant::now();
    let child = c
        .spawn()
        .with_context(|| format!("`{}` (label `{}`) cannot start", cmd.info.command, cmd.info.label))?;
    let mut out = reap(child).with_context(|| format!("waiting for `{}`", cmd.info.command))?;
    out.wall_ns = start.elapsed().as_nanos() as u64;
    Ok(out)
}

/// Waits for the child with `wait4`, which also gives its CPU times and peak
/// RSS (the child's and its waited-for descendants').
#[cfg(unix)]
fn reap(child: Child) -> std::io::Result<Outcome> {
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data; wait4 fills it for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: pid is our child, not yet reaped (std never waited for it).
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    // The child is reaped: std's handle must not wait again (dropping it does not).
    drop(child);
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    // Linux reports ru_maxrss in KiB, macOS in bytes.
    let rss = if cfg!(target_os = "macos") { ru.ru_maxrss as u64 / 1024 } else { ru.ru_maxrss as u64 };
    let (exit_code, signal) = if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else if libc::WIFSIGNALED(status) {
        (None, Some(libc::WTERMSIG(status)))
    } else {
        (None, None)
    };
    let mut outcome = Outcome::default();
    outcome.user_us = Some(us(ru.ru_utime));
    outcome.system_us = Some(us(ru.ru_stime));
    outcome.max_rss_kib = Some(rss);
    outcome.exit_code = exit_code;
    outcome.signal = signal;
    Ok(outcome)
}

/// Without `wait4`: the exit status only; CPU and RSS are `null`.
#[cfg(not(unix))]
fn reap(mut child: Child) -> std::io::Result<Outcome> {
    let status = child.wait()?;
    let mut outcome = Outcome::default();
    outcome.exit_code = status.code();
    Ok(outcome)
}

/// Runs the untimed `--prepare` command through `sh -c`; a failure stops the
/// session, since the run after it would not measure what was asked.
pub fn prepare_step(prepare: &str, workdir: Option<&Path>) -> anyhow::Result<()> {
    let mut c = Command::new("sh");
    c.arg("-c").arg(prepare).stdin(Stdio::null()).stdout(Stdio::null());
    if let Some(w) = workdir {
        c.current_dir(w);
    }
    let status = c.status().with_context(|| format!("prepare command `{prepare}` cannot start"))?;
    if !status.success() {
        bail!("prepare command `{prepare}` failed ({status}); expected it to exit with status 0");
    }
    Ok(())
}

/// The run's timings summary, if it wrote one: its file (relative to `base`),
/// the summary, and a note when there is none or more than one.
pub fn timings(run_dir: &Path, base: &Path) -> (Option<String>, Option<Timings>, Option<String>) {
    let trace = run_dir.join("trace");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&trace)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.to_string_lossy().ends_with(SUFFIX))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let Some(first) = files.first() else {
        return (None, None, Some("the run wrote no timings.json".to_string()));
    };
    let rel = first.strip_prefix(base).unwrap_or(first).display().to_string();
    let mut note = (files.len() > 1).then(|| format!("{} timings files; the first is used", files.len()));
    let t = match Timings::from_path(first) {
        Ok(t) => Some(t),
        Err(e) => {
            note = Some(e.to_string());
            None
        }
    };
    (Some(rel), t, note)
}
