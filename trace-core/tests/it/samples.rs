//! The capture's sampler (`<P>_TRACE_SAMPLE`): samples at the interval from
//! the capture's start to its finish, in time order, none when it is off.

use std::time::Duration;

use crate::collect::{session_with, FRONTS};

#[test]
fn samples_come_every_interval_from_the_start_to_the_finish_in_time_order() {
    for front in FRONTS {
        let (session, seen) = session_with(front, "samples", &[("T_TRACE_SAMPLE", "2ms")]);
        let start = trace_core::os::monotonic_ns();
        session.run(|| std::thread::sleep(Duration::from_millis(40)));
        let report = session.finish();
        let end = trace_core::os::monotonic_ns();
        assert_eq!(report.sampler_error, None);
        let s = seen.lock();
        // 40 ms at 2 ms, on a machine that may be slow to wake a thread.
        assert!(s.samples.len() >= 6, "{front:?}: {} samples", s.samples.len());
        assert!(s.samples.windows(2).all(|w| w[0].ts < w[1].ts), "{front:?}: in time order");
        assert!(s.samples[0].ts <= start + 20_000_000, "{front:?}: the first at the start");
        assert!(s.samples.iter().all(|x| x.ts <= end), "{front:?}: none after the finish");
        let last = s.samples.last().unwrap();
        assert!(last.ts >= start + 40_000_000, "{front:?}: the last at the finish");
        assert!(s.samples.iter().all(|x| x.resident_bytes.is_some_and(|b| b > 0) && x.cpu_ns.is_some()));
    }
}

#[test]
fn sampling_off_starts_no_sampler_and_sends_no_sample() {
    let (session, seen) = session_with(FRONTS[0], "samples", &[("T_TRACE_SAMPLE", "off")]);
    session.run(|| std::thread::sleep(Duration::from_millis(15)));
    let report = session.finish();
    assert!(report.sampler_error.is_none() && report.is_complete());
    assert!(seen.lock().samples.is_empty());
}
