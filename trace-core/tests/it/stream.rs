//! The event stream a sink sees is well formed.

use tracing::{info_span, trace_span};

use crate::collect::session;

#[test]
fn fields_at_creation_are_on_the_begin_and_later_ones_on_the_end() {
    let (s, seen) = session("fields");
    s.in_scope(|| {
        let span = info_span!("job", id = 7u64, delta = -3i64, label = "x", done = tracing::field::Empty);
        let _g = span.enter();
        span.record("done", true);
    });
    s.finish();
    let seen = seen.lock();
    let begin = seen.begins.iter().find(|b| b.1 == "job").unwrap();
    assert_eq!(begin.2, r#"id=7u delta=-3 label="x""#);
    let end = seen.ends.iter().find(|e| e.1 == "job").unwrap();
    assert_eq!(end.2, "done=true");
    assert!(!end.3);
}

#[test]
fn every_end_closes_the_innermost_open_span_of_its_thread() {
    let (s, seen) = session("nest");
    s.in_scope(|| {
        info_span!("a").in_scope(|| {
            info_span!("b").in_scope(|| trace_span!("c").in_scope(|| ()));
            info_span!("d").in_scope(|| ());
        })
    });
    s.finish();
    //   a ─────────────────────┐
    //     b ────────┐ d ──┐     │
    //       c ──┐   │     │     │
    assert_eq!(seen.lock().order, ["B a", "B b", "B c", "E c", "E b", "B d", "E d", "E a"]);
}

#[test]
fn a_span_still_open_at_the_end_is_closed_and_marked_unclosed() {
    let (s, seen) = session("open");
    s.in_scope(|| {
        let outer = info_span!("outer").entered();
        std::mem::forget(outer);
    });
    s.finish();
    let seen = seen.lock();
    assert!(seen.finished);
    assert_eq!(seen.ends.len(), 1);
    assert!(seen.ends[0].3, "marked unclosed");
}

#[test]
fn each_thread_is_named_once_before_its_first_span() {
    let (s, seen) = session("threads");
    s.in_scope(|| {
        let h = trace_core::spawn("helper", || {
            for _ in 0..3 {
                info_span!("work").in_scope(|| ());
            }
        })
        .unwrap();
        h.join().unwrap();
        info_span!("main_work").in_scope(|| ());
    });
    s.finish();
    let seen = seen.lock();
    let names: Vec<&str> = seen.threads.iter().map(|t| t.1.as_str()).collect();
    assert_eq!(names.iter().filter(|n| **n == "helper").count(), 1);
    let helper = seen.threads.iter().find(|t| t.1 == "helper").unwrap().0;
    assert_eq!(seen.begins.iter().filter(|b| b.0 == helper).count(), 3);
    assert!(seen.begins.iter().all(|b| b.1 != "work" || b.0 == helper));
}

#[test]
fn events_after_the_capture_finished_go_nowhere_and_do_not_panic() {
    let (s, seen) = session("late");
    let dispatch = s.dispatch().clone();
    s.in_scope(|| info_span!("in_time").in_scope(|| ()));
    s.finish();
    tracing::dispatcher::with_default(&dispatch, || info_span!("too_late").in_scope(|| ()));
    assert!(seen.lock().begins.iter().all(|b| b.1 != "too_late"));
}
