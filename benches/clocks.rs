//! What the capture's two new readings cost on the thread that takes them:
//! the thread CPU clock (read twice per span at the levels `<P>_TRACE_CPU`
//! selects) and one sample of the process's resident memory and CPU (taken
//! by the sampler thread every `<P>_TRACE_SAMPLE` interval). The monotonic
//! clock, which every record reads, is the yardstick.
//!
//! ```text
//! cargo bench -p cabin-trace-benches --bench clocks
//! cargo bench -p cabin-trace-benches --bench clocks -- --test   # the checks, once each
//! ```
//!
//! Each benchmark first checks its answer: the thread CPU clock advances
//! while the thread works, and a sample reads both figures on this platform.

use std::hint::black_box;
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
    let sample = ProcessSampler::new().sample();
    assert!(sample.resident_bytes.is_some_and(|b| b > 0) && sample.cpu_ns.is_some(), "{sample:?}");
}

fn main() {
    check();
    let mut c = support::criterion();
    let mut group = c.benchmark_group("clocks");
    let mut sampler = ProcessSampler::new();
    let cases: [(&str, &mut dyn FnMut() -> u64); 3] = [
        ("monotonic_clock", &mut || os::monotonic_ns()),
        ("thread_cpu_clock", &mut || os::thread_cpu_ns().unwrap_or(0)),
        ("process_sample", &mut || sampler.sample().resident_bytes.unwrap_or(0)),
    ];
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
    group.finish();
    c.final_summary();
    let m = |id: &str| support::median_ns("clocks", id);
    if m("thread_cpu_clock").is_some() {
        support::print_machine();
        let rows: Vec<Vec<String>> = ["monotonic_clock", "thread_cpu_clock", "process_sample"]
            .iter()
            .map(|id| vec![id.to_string(), support::cell(m(id))])
            .collect();
        support::print_table("One reading, ns (median of samples)", &["reading", "ns"], &rows);
    }
}
