//! The event stream a sink sees is well formed.

use tracing::{info_span, trace_span};

use crate::collect::{session_on, Front, FRONTS};

#[test]
fn fields_at_creation_are_on_the_begin_and_later_ones_on_the_end() {
    for front in FRONTS {
        fields_at_creation_are_on_the_begin_and_later_ones_on_the_end_on(front);
    }
}

fn fields_at_creation_are_on_the_begin_and_later_ones_on_the_end_on(front: Front) {
    let (s, seen) = session_on(front, "fields", "trace");
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
    for front in FRONTS {
        every_end_closes_the_innermost_open_span_of_its_thread_on(front);
    }
}

fn every_end_closes_the_innermost_open_span_of_its_thread_on(front: Front) {
    let (s, seen) = session_on(front, "nest", "trace");
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
    for front in FRONTS {
        a_span_still_open_at_the_end_is_closed_and_marked_unclosed_on(front);
    }
}

fn a_span_still_open_at_the_end_is_closed_and_marked_unclosed_on(front: Front) {
    let (s, seen) = session_on(front, "open", "trace");
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
    for front in FRONTS {
        each_thread_is_named_once_before_its_first_span_on(front);
    }
}

fn each_thread_is_named_once_before_its_first_span_on(front: Front) {
    let (s, seen) = session_on(front, "threads", "trace");
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

/// Asks a thread the command left running to record a span, from inside its
/// `finish`: after the capture has taken every thread's last records.
struct AskAtFinish {
    ask: std::sync::mpsc::Sender<()>,
    done: std::sync::mpsc::Receiver<()>,
}

impl trace_core::Sink for AskAtFinish {
    fn name(&self) -> &'static str {
        "ask"
    }
    fn suffix(&self) -> &'static str {
        "ask.txt"
    }
    fn event(
        &mut self,
        _event: &trace_core::Event<'_>,
        _out: &mut dyn std::io::Write,
    ) -> std::io::Result<()> {
        Ok(())
    }
    fn finish(
        &mut self,
        _end: &trace_core::Finish<'_>,
        _out: &mut dyn std::io::Write,
    ) -> std::io::Result<()> {
        self.ask.send(()).unwrap();
        self.done.recv().unwrap();
        Ok(())
    }
}

#[test]
fn records_of_a_thread_left_running_while_the_capture_finishes_are_counted_as_late() {
    for front in FRONTS {
        let dir = tempfile::tempdir().unwrap();
        let config =
            trace_core::Config::from_lookup("T", &[], |n| (n == "T_TRACE_DIR").then(|| dir.path().into()))
                .unwrap()
                .unwrap();
        let (ask_tx, ask_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let sinks: Vec<Box<dyn trace_core::Sink>> =
            vec![Box::new(AskAtFinish { ask: ask_tx, done: done_rx })];
        let s = match front {
            Front::Own => trace_core::Session::start_forwarding(&config, "late", sinks, None),
            Front::Layer => trace_core::Session::start_with_layer(
                &config,
                "late",
                sinks,
                tracing_subscriber::layer::Identity::new(),
            ),
        }
        .unwrap();
        let worker = s.in_scope(|| {
            trace_core::spawn("left-running", move || {
                info_span!("in_time").in_scope(|| ());
                ask_rx.recv().unwrap();
                info_span!("too_late").in_scope(|| ());
                done_tx.send(()).unwrap();
            })
            .unwrap()
        });
        let report = s.finish();
        worker.join().unwrap();
        // At least the enter and the exit of `too_late`.
        assert!(report.late_records >= 2, "{front:?}: {report:?}");
        assert!(!report.is_complete());
        assert!(
            report.warnings().iter().any(|w| w.contains("after the trace finished")),
            "{:?}",
            report.warnings()
        );
        assert!(report.files[0].complete);
    }
}

/// Counts the span begins and ends it is given.
struct BeginsAndEnds(std::sync::Arc<std::sync::Mutex<(u64, u64)>>);

impl trace_core::Sink for BeginsAndEnds {
    fn name(&self) -> &'static str {
        "ends"
    }
    fn suffix(&self) -> &'static str {
        "ends.txt"
    }
    fn event(&mut self, event: &trace_core::Event<'_>, _out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let mut n = self.0.lock().unwrap();
        match event {
            trace_core::Event::SpanBegin { .. } => n.0 += 1,
            trace_core::Event::SpanEnd { .. } => n.1 += 1,
            _ => {}
        }
        Ok(())
    }
    fn finish(
        &mut self,
        _end: &trace_core::Finish<'_>,
        _out: &mut dyn std::io::Write,
    ) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_sink_gets_every_span_as_one_begin_and_one_end() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        trace_core::Config::from_lookup("T", &[], |n| (n == "T_TRACE_DIR").then(|| dir.path().into()))
            .unwrap()
            .unwrap();
    let counts = std::sync::Arc::default();
    let sinks: Vec<Box<dyn trace_core::Sink>> = vec![Box::new(BeginsAndEnds(std::sync::Arc::clone(&counts)))];
    let s = trace_core::Session::start(&config, "ends", sinks).unwrap();
    s.in_scope(|| {
        for _ in 0..3 {
            info_span!("each").in_scope(|| ());
        }
    });
    s.finish();
    assert_eq!(*counts.lock().unwrap(), (3, 3), "(begins, ends) the sink was given");
}
