//! Thread CPU time per span (`<P>_TRACE_CPU`): read at enter and exit for
//! the levels it selects, under both front-ends, and never for the others.

use std::time::Duration;

use crate::collect::{session_with, Collected, Front, FRONTS};

/// Burns `ms` milliseconds of the calling thread's CPU time (by its own
/// clock, so that a busy machine only makes it take longer).
fn spin(ms: u64) {
    let start = trace_core::os::thread_cpu_ns().expect("the thread CPU clock is read here");
    let mut x = 1u64;
    while trace_core::os::thread_cpu_ns().unwrap_or(u64::MAX) - start < ms * 1_000_000 {
        for _ in 0..1000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

/// Runs a `work` span at info that spins 30 ms, a `wait` span at info that
/// sleeps 30 ms, and an `item` span at debug, under `front` with `cpu` as
/// `T_TRACE_CPU` (unset when `None`).
fn capture(front: Front, cpu: Option<&str>) -> Collected {
    let mut vars = vec![("T_TRACE_FILTER", "trace")];
    if let Some(cpu) = cpu {
        vars.push(("T_TRACE_CPU", cpu));
    }
    let (session, seen) = session_with(front, "cpu", &vars);
    session.run(|| {
        tracing::info_span!("work").in_scope(|| spin(30));
        tracing::info_span!("wait").in_scope(|| std::thread::sleep(Duration::from_millis(30)));
        tracing::debug_span!("item").in_scope(|| spin(1));
    });
    let _ = session.finish();
    seen
}

/// How far apart two readings of the thread CPU clock may be for the same
/// work: on Windows `GetThreadTimes` moves in steps of the scheduler's tick
/// (15.6 ms, 10 ms under Wine), and a step lands whole on the thread that runs
/// when it comes, so a span's reading can be up to a step more than the work
/// it holds (never less: its enter reads before the spin's first reading, its
/// exit after the last); elsewhere the clock is exact.
const CLOCK_STEP_NS: u64 = if cfg!(windows) { 16_000_000 } else { 0 };

fn cpu_of(seen: &Collected, name: &str) -> Option<u64> {
    let s = seen.lock();
    let end = s.end_cpu.iter().find(|(n, _)| n == name).expect("the span ended");
    let begin = s.begin_cpu.iter().find(|(n, _)| n == name).expect("the span began");
    assert_eq!(begin.1.is_some(), end.1.is_some(), "{name}: a begin's reading goes with its end's");
    end.1
}

#[test]
fn info_spans_carry_their_thread_cpu_time_and_debug_spans_do_not_by_default() {
    for front in FRONTS {
        let seen = capture(front, None);
        let work = cpu_of(&seen, "work").expect("an info span reads the CPU clock");
        let wait = cpu_of(&seen, "wait").expect("an info span reads the CPU clock");
        assert!(
            (30_000_000..33_000_000 + CLOCK_STEP_NS).contains(&work),
            "{front:?}: spinning 30 ms took {work} ns of CPU"
        );
        assert!(wait < 5_000_000 + CLOCK_STEP_NS, "{front:?}: sleeping 30 ms took {wait} ns of CPU");
        assert_eq!(cpu_of(&seen, "item"), None, "{front:?}: a debug span does not pay for the clock");
        assert!(
            cpu_of(&seen, "command").is_some_and(|c| c >= work),
            "{front:?}: the root includes its children"
        );
    }
}

#[test]
fn cpu_off_reads_no_clock_and_cpu_debug_reads_it_for_debug_spans_too() {
    for front in FRONTS {
        let off = capture(front, Some("off"));
        for name in ["command", "work", "wait", "item"] {
            assert_eq!(cpu_of(&off, name), None, "{front:?}: {name}");
        }
        let debug = capture(front, Some("debug"));
        assert!(cpu_of(&debug, "item").is_some(), "{front:?}");
        let error = capture(front, Some("error"));
        assert_eq!(cpu_of(&error, "work"), None, "{front:?}: info is below error");
    }
}
