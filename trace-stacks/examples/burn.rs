//! Samples this program's main thread while it burns CPU in two functions,
//! then prints the folded stacks and the counts, and writes the samples as a
//! Perfetto trace if given a path.
//!
//! `cargo run --release -p trace-stacks --example burn [-- burn.pftrace]`

use std::time::{Duration, Instant};

#[inline(never)]
fn spin_for(wall: Duration) -> u64 {
    let end = Instant::now() + wall;
    let mut x: u64 = 1;
    while Instant::now() < end {
        for i in 0..10_000 {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
        }
    }
    x
}

#[inline(never)]
fn parse() -> u64 {
    spin_for(Duration::from_millis(60))
}

#[inline(never)]
fn compile() -> u64 {
    spin_for(Duration::from_millis(40))
}

#[cfg(target_os = "linux")]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes one timespec.
    unsafe { libc::clock_gettime(clock, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let sampler = trace_stacks::Sampler::start(Duration::from_millis(1))?;
    let start_time = started.elapsed();
    let added = Instant::now();
    sampler.add_current_thread()?;
    let add_time = added.elapsed();
    std::hint::black_box(parse() ^ compile());
    let finished = Instant::now();
    let stacks = sampler.finish();
    let finish_time = finished.elapsed();
    stacks.write_folded(std::io::stdout(), |_, _| vec!["main".to_string()])?;
    // The clocks the trace relates are Linux's (the only sampler there is).
    #[cfg(target_os = "linux")]
    if let Some(path) = std::env::args_os().nth(1) {
        let mut trace = trace_stacks::perfetto_clock_snapshot(
            clock_ns(libc::CLOCK_BOOTTIME),
            clock_ns(libc::CLOCK_MONOTONIC),
        );
        trace.extend(trace_stacks::perfetto_packets(&stacks, std::process::id(), 1));
        std::fs::write(path, trace)?;
    }
    eprintln!(
        "{:?}; start {start_time:?}, add a thread {add_time:?}, finish {finish_time:?} \
         of which symbolization {:?}; reader CPU {:?}",
        stacks.counts, stacks.symbolization_time, stacks.reader_cpu_time
    );
    Ok(())
}
