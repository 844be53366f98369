//! A command that burns CPU, waits, and grows its memory: what a capture's
//! CPU time per span (`CABIN_TRACE_CPU`) and its memory and CPU counters
//! (`CABIN_TRACE_SAMPLE`) are there to show.
//!
//! ```text
//! CABIN_TRACE_DIR=target/traces cargo run --example resources -- [--cpu-ms N] [--alloc-mib N] [--steps K]
//! ```
//!
//! It runs an info span `spin` that burns `--cpu-ms` milliseconds of its
//! thread's CPU time (50 by default; by the thread's own CPU clock, so a busy
//! machine only makes it take longer), an info span `sleep` that sleeps as
//! long, then, with `--alloc-mib`, an info span `grow` that allocates that
//! many MiB in `--steps` equal steps (10 by default), writing every page of
//! each step and waiting 30 ms after it so that the samples see each level.
//! It prints what it did.

use std::process::ExitCode;
use std::time::Duration;

struct Args {
    cpu_ms: u64,
    alloc_mib: u64,
    steps: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { cpu_ms: 50, alloc_mib: 0, steps: 10 };
    let mut argv = std::env::args().skip(1);
    while let Some(arg) = argv.next() {
        let mut number = |flag: &str| -> Result<u64, String> {
            let value = argv.next().ok_or_else(|| format!("{flag} needs a number"))?;
            value.parse().map_err(|_| format!("{flag} `{value}`: expected a whole number"))
        };
        match arg.as_str() {
            "--cpu-ms" => args.cpu_ms = number("--cpu-ms")?,
            "--alloc-mib" => args.alloc_mib = number("--alloc-mib")?,
            "--steps" => args.steps = number("--steps")?.max(1),
            other => {
                return Err(format!(
                    "unknown argument `{other}`; expected --cpu-ms N, --alloc-mib N, --steps K"
                ))
            }
        }
    }
    Ok(args)
}

/// Burns `ms` milliseconds of the calling thread's CPU time.
fn spin(ms: u64) -> u64 {
    let Some(start) = cabin_trace::os::thread_cpu_ns() else { return 0 };
    let mut x = 1u64;
    while cabin_trace::os::thread_cpu_ns().is_none_or(|now| now - start < ms * 1_000_000) {
        for _ in 0..1000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407));
        }
    }
    x
}

/// Allocates `mib` MiB in `steps` steps, writing every page, and returns it.
fn grow(mib: u64, steps: u64) -> Vec<Vec<u8>> {
    let step_bytes = (mib << 20) / steps;
    let mut held = Vec::new();
    for step in 0..steps {
        let _step = tracing::debug_span!("allocate", step, bytes = step_bytes).entered();
        let mut block = vec![0u8; step_bytes as usize];
        // Pages the kernel has not been asked for are not resident: write each one.
        for page in block.chunks_mut(4096) {
            page[0] = 1;
        }
        held.push(block);
        std::thread::sleep(Duration::from_millis(30));
    }
    held
}

fn command(args: &Args) -> String {
    tracing::info_span!("spin", ms = args.cpu_ms).in_scope(|| std::hint::black_box(spin(args.cpu_ms)));
    tracing::info_span!("sleep", ms = args.cpu_ms)
        .in_scope(|| std::thread::sleep(Duration::from_millis(args.cpu_ms)));
    let held = if args.alloc_mib > 0 {
        tracing::info_span!("grow", mib = args.alloc_mib, steps = args.steps)
            .in_scope(|| grow(args.alloc_mib, args.steps))
    } else {
        Vec::new()
    };
    let bytes: usize = held.iter().map(Vec::len).sum();
    format!("spun {0} ms, slept {0} ms, held {1} MiB\n", args.cpu_ms, bytes >> 20)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match cabin_trace::run("resources", || command(&args)) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
