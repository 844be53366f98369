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
        records.iter().filter(|r| r["kind"] == "counter" && r["track"] == "thread CPU time").collect();
    assert!(counters.iter().all(|c| c["unit"] == "UNIT_TIME_NS"), "{counters:?}");
    // The begin and end of the two info spans.
    assert_eq!(counters.len(), 4, "{counters:?}");
    assert!(counters.windows(2).all(|w| w[0]["value"].as_i64() <= w[1]["value"].as_i64()), "{counters:?}");
}
