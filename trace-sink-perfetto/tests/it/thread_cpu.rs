//! Thread CPU time on slices: a counter track per thread, sampled on the
//! begin and end of the spans `<P>_TRACE_CPU` selects, read back through the
//! official schema.

use tracing::{debug_span, info_span};

use crate::support::{capture, dump};

/// Burns `ms` milliseconds of the calling thread's CPU time, by its own clock.
fn spin(ms: u64) {
    let start = trace_core::os::thread_cpu_ns().expect("the thread CPU clock is read here");
    let mut x = 1u64;
    while trace_core::os::thread_cpu_ns().unwrap_or(u64::MAX) - start < ms * 1_000_000 {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

#[test]
fn an_info_slice_has_a_thread_duration_from_its_threads_cpu_counter_and_a_debug_slice_has_none() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _, ()) = capture(dir.path(), "cpu", || {
        info_span!("spin").in_scope(|| spin(20));
        info_span!("sleep").in_scope(|| std::thread::sleep(std::time::Duration::from_millis(20)));
        debug_span!("item").in_scope(|| spin(1));
    });
    let records = dump(&[], &[&path]);
    let slice = |name: &str| {
        records.iter().find(|r| r["kind"] == "slice" && r["name"] == name).unwrap_or_else(|| panic!("{name}"))
    };
    let spun = slice("spin")["thread_dur_ns"].as_i64().expect("a thread duration");
    assert!((20_000_000..22_000_000).contains(&spun), "spinning 20 ms of CPU: {spun} ns");
    let slept = slice("sleep")["thread_dur_ns"].as_i64().expect("a thread duration");
    assert!(slept < 2_000_000, "sleeping 20 ms: {slept} ns of CPU");
    assert!(slice("item").get("thread_dur_ns").is_none(), "a debug span pays for no clock");
    let counters: Vec<_> =
        records.iter().filter(|r| r["kind"] == "counter" && r["track"] == "thread_time").collect();
    assert!(counters.iter().all(|c| c["unit"] == "UNIT_TIME_NS"), "{counters:?}");
    // The begin and end of the two info spans.
    assert_eq!(counters.len(), 4, "{counters:?}");
    assert!(counters.windows(2).all(|w| w[0]["value"].as_i64() <= w[1]["value"].as_i64()), "{counters:?}");
}

#[test]
fn repeated_info_slices_on_two_threads_each_have_a_thread_duration_read_back_by_the_trace_processor() {
    let dir = tempfile::tempdir().unwrap();
    let steps = |n: u64| {
        for i in 0..n {
            // The site is cached after the first begin: the later ones, and
            // their ends, are written from bytes encoded once.
            info_span!("step", i).in_scope(|| spin(1));
        }
    };
    let (path, _, ()) = capture(dir.path(), "cpu-repeated", || {
        steps(4);
        // The capture is this thread's default: the other thread takes it on.
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        std::thread::spawn(move || tracing::dispatcher::with_default(&dispatch, || steps(3)))
            .join()
            .expect("the other thread runs");
        steps(2);
    });
    let records = dump(&[], &[&path]);
    let durations: Vec<_> = records
        .iter()
        .filter(|r| r["kind"] == "slice" && r["name"] == "step")
        .map(|r| r["thread_dur_ns"].as_i64())
        .collect();
    assert_eq!(durations.len(), 9, "{durations:?}");
    // The clock is less than its window (1 ms) ahead of the thread's CPU
    // time, and 20 µs at most behind: the span's end can be a window ahead of
    // its begin, and the spin, ending 1 ms after a reading up to a window
    // ahead, can take a window more. Under 3 ms, then, and the enter's and
    // exit's own CPU.
    assert!(
        durations.iter().all(|d| d.is_some_and(|ns| (1_000_000..3_500_000).contains(&ns))),
        "spinning 1 ms of CPU each: {durations:?}"
    );
    let counters: Vec<_> =
        records.iter().filter(|r| r["kind"] == "counter" && r["track"] == "thread_time").collect();
    assert_eq!(counters.len(), 18, "a begin and an end per slice: {counters:?}");
}
