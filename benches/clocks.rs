//! What the capture's two new readings cost on the thread that takes them:
//! the thread CPU clock (read twice per span at the levels `<P>_TRACE_CPU`
//! selects) and one sample of the process's resident memory and CPU (taken
//! by the sampler thread every `<P>_TRACE_SAMPLE` interval). The monotonic
//! clock, which every record reads, is the yardstick. The capture reads the
//! thread CPU clock with the system call `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`
//! (`trace_core::os::thread_cpu_ns`), which is also timed directly.
//!
//! The round trip of one byte between two threads that never read the clock,
//! and between two that have read it, checks that reading it leaves no cost
//! at the threads' context switches.
//!
//! ```text
//! cargo bench -p cabin-trace-benches --bench clocks
//! cargo bench -p cabin-trace-benches --bench clocks -- --test   # the checks, once each
//! ```
//!
//! Each benchmark first checks its answer: the thread CPU clock advances
//! while the thread works, and a sample reads both figures on this platform.

use std::hint::black_box;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cabin_trace::os::{self, ProcessSampler};

mod support;

fn check() {
    let before = os::thread_cpu_ns().expect("the thread CPU clock is read on this platform");
    let until = Instant::now() + Duration::from_millis(5);
    while Instant::now() < until {
        black_box(0);
    }
    assert!(os::thread_cpu_ns().unwrap() > before, "the thread CPU clock advances while the thread works");
    #[cfg(unix)]
    {
        // The capture's reading and the system call agree over work and sleep.
        let (ours, kernel) = (os::thread_cpu_ns().unwrap(), thread_cpu_syscall_ns());
        let until = Instant::now() + Duration::from_millis(20);
        while Instant::now() < until {
            black_box(0);
        }
        std::thread::sleep(Duration::from_millis(20));
        let (ours, kernel) = (os::thread_cpu_ns().unwrap() - ours, thread_cpu_syscall_ns() - kernel);
        assert!(
            ours.abs_diff(kernel) <= (kernel / 50).max(1_000_000),
            "{ours} ns read, {kernel} ns by the system call"
        );
    }
    let sample = ProcessSampler::new().sample();
    assert!(sample.resident_bytes.is_some_and(|b| b > 0) && sample.cpu_ns.is_some(), "{sample:?}");
}

/// The thread CPU clock as the system call reads it.
#[cfg(unix)]
fn thread_cpu_syscall_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `iters` round trips of a message between two fresh threads, timed on one
/// of them; with `reading`, both read the thread CPU clock first.
fn round_trips(iters: u64, reading: bool) -> Duration {
    let (to_peer, peer_gets) = mpsc::sync_channel::<u64>(0);
    let (to_driver, driver_gets) = mpsc::sync_channel::<u64>(0);
    let peer = std::thread::spawn(move || {
        if reading {
            black_box(os::thread_cpu_ns());
        }
        while let Ok(n) = peer_gets.recv() {
            if to_driver.send(n + 1).is_err() {
                break;
            }
        }
    });
    let driver = std::thread::spawn(move || {
        if reading {
            black_box(os::thread_cpu_ns());
        }
        let trip = |n: u64| {
            to_peer.send(n).expect("the peer takes it");
            driver_gets.recv().expect("the peer answers")
        };
        let mut n = 0;
        for _ in 0..100 {
            n = trip(n);
        }
        let start = Instant::now();
        for _ in 0..iters {
            n = trip(n);
        }
        let total = start.elapsed();
        assert_eq!(n, iters + 100, "every message came back");
        total
    });
    let total = driver.join().expect("the driver thread");
    peer.join().expect("the peer thread");
    total
}

fn main() {
    check();
    let mut c = support::criterion();
    let mut group = c.benchmark_group("clocks");
    let mut sampler = ProcessSampler::new();
    let mut cases: Vec<(&str, &mut dyn FnMut() -> u64)> = Vec::new();
    let mut monotonic = || os::monotonic_ns();
    cases.push(("monotonic_clock", &mut monotonic));
    #[cfg(unix)]
    let mut syscall = thread_cpu_syscall_ns;
    #[cfg(unix)]
    cases.push(("thread_cpu_syscall", &mut syscall));
    let mut thread_cpu = || os::thread_cpu_ns().unwrap_or(0);
    cases.push(("thread_cpu_clock", &mut thread_cpu));
    let mut sample = || sampler.sample().resident_bytes.unwrap_or(0);
    cases.push(("process_sample", &mut sample));
    for (id, read) in cases {
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(read());
                }
                let total = start.elapsed();
                support::record("clocks", id, iters, total);
                total
            })
        });
    }
    for (id, reading) in [("round_trip_plain", false), ("round_trip_reading", true)] {
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let total = round_trips(iters, reading);
                support::record("clocks", id, iters, total);
                total
            })
        });
    }
    group.finish();
    c.final_summary();
    let m = |id: &str| support::median_ns("clocks", id);
    if m("thread_cpu_clock").is_some() {
        support::print_machine();
        // Each row: the median, and its ratio to the table's first row.
        let table = |title: &str, column: &str, ids: &[&str]| {
            let rows: Vec<Vec<String>> = ids
                .iter()
                .map(|id| vec![id.to_string(), support::cell(m(id)), support::ratio(m(id), m(ids[0]))])
                .collect();
            support::print_table(title, &[column, "ns", &format!("/ {}", ids[0])], &rows);
        };
        table(
            "One reading, ns (median of samples)",
            "reading",
            &["thread_cpu_syscall", "thread_cpu_clock", "monotonic_clock", "process_sample"],
        );
        table(
            "One round trip between two threads (two context switches or more), ns",
            "threads",
            &["round_trip_plain", "round_trip_reading"],
        );
    }
}
