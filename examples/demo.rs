//! A synthetic `build` command with the shape of a real one, captured when
//! `CABIN_TRACE_DIR` is set.
//!
//! ```text
//! cargo run --release --example demo -- [--spans N] [--threads N] [--fail] [--no-table]
//! ```
//!
//! Phases (info spans): `resolve` (one debug `resolve_package` span per
//! package, with `requests` and `rounds` fields), `fetch` (`--threads` helper
//! threads, each an info `fetch_worker` span holding one debug `download`
//! span per package, with a `bytes` field),
//! `compile` (one child process, its exit code recorded on the span after it
//! ends) and `link`. Stdout is the command's own result and is the same with
//! and without capture. Under capture it names the files it wrote on stderr,
//! then reads its summary back and prints its top phases there, unless
//! `--no-table` is given: a tool does not read its own summary, so
//! `scripts/bench-e2e.sh` passes it (reading and printing it cost the demo
//! about 0.1 ms).
//!
//! Built with `--features bench-uninstrumented`, it runs the command alone:
//! no capture, and every `tracing` macro compiled out. That is the baseline of
//! `scripts/bench-e2e.sh`.

use std::io::{self, Write};
#[cfg(feature = "bench-uninstrumented")]
use std::process::Stdio;
use std::process::{Command, ExitCode};

use tracing::{debug_span, info, info_span};

// A helper thread records into the capture, if there is one, and so does a
// child's usage.
#[cfg(not(feature = "bench-uninstrumented"))]
use cabin_trace::{run_child, spawn};

/// Without instrumentation, a plain named thread.
#[cfg(feature = "bench-uninstrumented")]
fn spawn<T, F>(name: String, f: F) -> io::Result<std::thread::JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    std::thread::Builder::new().name(name).spawn(f)
}

/// Without instrumentation, a plain run.
#[cfg(feature = "bench-uninstrumented")]
fn run_child(cmd: &mut Command) -> io::Result<std::process::Output> {
    cmd.stdin(Stdio::null()).output()
}

struct Args {
    spans: u64,
    threads: u64,
    fail: bool,
    /// Do not read the summary back to print its table.
    no_table: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { spans: 200, threads: 2, fail: false, no_table: false };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut number = |name: &str| -> Result<u64, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} takes a whole number, e.g. `{name} 100`"))
        };
        match a.as_str() {
            "--spans" => args.spans = number("--spans")?,
            "--threads" => args.threads = number("--threads")?.max(1),
            "--fail" => args.fail = true,
            "--no-table" => args.no_table = true,
            other => {
                return Err(format!(
                    "unknown argument `{other}`; expected --spans N, --threads N, --fail, --no-table"
                ))
            }
        }
    }
    Ok(args)
}

/// A little deterministic CPU work, so spans have a width.
fn work(seed: u64, rounds: u64) -> u64 {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for _ in 0..rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

fn resolve(n: u64) -> u64 {
    let _phase = info_span!("resolve", packages = n).entered();
    let mut digest = 0u64;
    for i in 0..n {
        let _pkg = debug_span!("resolve_package", index = i, requests = 1u64, rounds = i % 3).entered();
        digest = digest.wrapping_add(work(i, 200 + 100 * (i % 3)));
    }
    digest
}

/// The bytes package `i` "downloads".
fn bytes_of(i: u64) -> u64 {
    (i * 37) % 1000 + 1
}

fn fetch(n: u64, threads: u64) -> u64 {
    let _phase = info_span!("fetch", threads).entered();
    let helpers: Vec<_> = (0..threads)
        .map(|t| {
            spawn(format!("fetch-{t}"), move || {
                // No `worker` field: the lane's name (`fetch-N`) says which
                // worker this is, and a field that differs from one worker to
                // the next would make a viewer that keys frames by name and
                // args (speedscope) show the same work as different frames.
                let _worker = info_span!("fetch_worker").entered();
                let mut total = 0;
                for i in (t..n).step_by(threads as usize) {
                    let bytes = bytes_of(i);
                    let _dl = debug_span!("download", index = i, bytes).entered();
                    std::hint::black_box(work(i, bytes));
                    total += bytes;
                }
                total
            })
        })
        .collect();
    helpers.into_iter().map(|h| h.expect("spawn a fetch thread").join().expect("fetch thread")).sum()
}

fn compile(n: u64) -> Result<u64, String> {
    let _phase = info_span!("compile").entered();
    let span = info_span!("run_compiler", units = n, exit_code = tracing::field::Empty);
    let _g = span.enter();
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the demo's own binary: {e}"))?;
    // A real child process, drawn on the capture's `children` lane with its
    // own CPU time and peak memory.
    let output =
        run_child(Command::new(exe).arg("--child-compile").arg(n.to_string()).env_remove("CABIN_TRACE_DIR"))
            .map_err(|e| format!("running the compiler: {e}"))?;
    let (status, out) = (output.status, String::from_utf8_lossy(&output.stdout).into_owned());
    span.record("exit_code", status.code().unwrap_or(-1));
    if !status.success() {
        return Err(format!("the compiler failed: {status}"));
    }
    out.trim().parse().map_err(|_| format!("the compiler printed `{}`, expected a number", out.trim()))
}

fn link(units: u64, fail: bool) -> Result<(), String> {
    let _phase = info_span!("link").entered();
    if fail {
        return Err(format!("link failed: undefined reference in unit {}", units / 2));
    }
    info!(units, "linked");
    Ok(())
}

/// The command itself: its result is what it prints on stdout.
fn build(args: &Args) -> Result<String, String> {
    let digest = resolve(args.spans);
    let bytes = fetch(args.spans, args.threads);
    let objects = compile(args.spans)?;
    link(objects, args.fail)?;
    Ok(format!(
        "resolved {} packages (digest {digest:016x})\nfetched {bytes} bytes on {} threads\ncompiled {objects} units\nlinked\n",
        args.spans, args.threads
    ))
}

/// Runs the command, under capture when `CABIN_TRACE_DIR` is set, and says
/// what the capture wrote. `Err` is the exit code of a refused configuration.
#[cfg(not(feature = "bench-uninstrumented"))]
fn run(args: &Args) -> Result<Result<String, String>, ExitCode> {
    let capture = match cabin_trace::Capture::from_env(cabin_trace::CABIN_PREFIX) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return Err(ExitCode::from(2));
        }
    };
    if !capture.is_enabled() {
        eprintln!("demo: capture is off; set CABIN_TRACE_DIR=<dir> to write a trace of this run");
    }
    let (result, report) = match capture.run_with_report("build", || build(args)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return Err(ExitCode::from(2));
        }
    };
    if let Some(report) = report {
        for f in &report.files {
            if f.complete {
                eprintln!("demo: wrote {}", f.path.display());
            }
        }
        let summary = report.files.iter().find(|f| f.complete && f.sink == "summary");
        if let Some(summary) = summary.filter(|_| !args.no_table) {
            if let Ok(t) = cabin_trace::Timings::from_path(&summary.path) {
                eprint!("{}", t.table(8));
            }
        }
    }
    Ok(result)
}

/// The baseline of the end-to-end benchmark (`--features bench-uninstrumented`):
/// the command alone, with no capture and every `tracing` macro compiled out.
#[cfg(feature = "bench-uninstrumented")]
fn run(args: &Args) -> Result<Result<String, String>, ExitCode> {
    Ok(build(args))
}

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1);
    if argv.next().as_deref() == Some("--child-compile") {
        // The child: a stand-in compiler that does some work and prints its count.
        let n: u64 = argv.next().and_then(|v| v.parse().ok()).unwrap_or(0);
        let units = (0..n).filter(|i| work(*i, 50).is_multiple_of(2)).count() + 1;
        println!("{units}");
        return ExitCode::SUCCESS;
    }
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match run(&args) {
        Ok(result) => result,
        Err(code) => return code,
    };
    match result {
        Ok(out) => {
            // The command's own output; a closed stdout is not the capture's business.
            let _ = io::stdout().write_all(out.as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
