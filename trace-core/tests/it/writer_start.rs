//! When the writer thread starts: on the first batch handed over, on a flush,
//! or never, for a command short enough that the finish does its work.

use std::io::{self, Write};

use trace_core::{Config, Event, Finish, Session, Sink};

use crate::collect::session;

/// The name the test harness gives the calling thread.
fn this_thread() -> Option<String> {
    std::thread::current().name().map(str::to_string)
}

#[test]
fn a_short_capture_is_finished_on_the_finishing_thread_with_every_threads_records() {
    let (session, seen) = session("short");
    session.in_scope(|| {
        let workers: Vec<_> = (0..3)
            .map(|t| {
                trace_core::spawn(format!("worker-{t}"), move || {
                    for i in 0..10 {
                        let _s = tracing::info_span!("work", i).entered();
                    }
                })
                .unwrap()
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        let _s = tracing::info_span!("main_work").entered();
        tracing::info!("done");
    });
    let report = session.finish();
    assert!(report.is_complete(), "{:?}", report.warnings());
    let seen = seen.lock();
    assert_eq!(seen.finished_on, this_thread(), "a short capture needs no writer thread");
    assert_eq!(seen.begins.iter().filter(|b| b.1 == "work").count(), 30);
    assert_eq!(seen.ends.iter().filter(|e| e.1 == "work" && !e.3).count(), 30);
    assert_eq!(seen.begins.iter().filter(|b| b.1 == "main_work").count(), 1);
    assert_eq!(seen.instants, 1);
    let names: Vec<&str> = seen.threads.iter().map(|t| t.1.as_str()).collect();
    assert_eq!(names.len(), 4, "the test's thread and three workers: {names:?}");
    for t in 0..3 {
        assert!(names.contains(&format!("worker-{t}").as_str()), "{names:?}");
    }
    assert_eq!(seen.dropped, 0);
}

#[test]
fn a_capture_that_fills_a_batch_starts_the_writer_thread_and_loses_nothing() {
    let (session, seen) = session("long");
    session.in_scope(|| {
        for i in 0..5_000 {
            let _s = tracing::info_span!("work", i).entered();
        }
    });
    let report = session.finish();
    assert!(report.is_complete(), "{:?}", report.warnings());
    let seen = seen.lock();
    assert_eq!(seen.finished_on.as_deref(), Some("trace-writer"));
    assert_eq!(seen.begins.len(), 5_000);
    assert_eq!(seen.ends.iter().filter(|e| !e.3).count(), 5_000);
}

#[test]
fn a_flush_starts_the_writer_thread() {
    let (session, seen) = session("flushed");
    session.in_scope(|| {
        let _s = tracing::info_span!("before").entered();
    });
    session.flush();
    assert_eq!(seen.lock().begins.len(), 1, "the flush waits until the writer has the span");
    session.in_scope(|| {
        let _s = tracing::info_span!("after").entered();
    });
    assert!(session.finish().is_complete());
    let seen = seen.lock();
    assert_eq!(seen.finished_on.as_deref(), Some("trace-writer"));
    let names: Vec<&str> = seen.begins.iter().map(|b| b.1.as_str()).collect();
    assert_eq!(names, ["before", "after"]);
}

/// A sink that panics on its first span.
struct Panics;

impl Sink for Panics {
    fn name(&self) -> &'static str {
        "panics"
    }
    fn suffix(&self) -> &'static str {
        "panics.txt"
    }
    fn event(&mut self, event: &Event<'_>, _out: &mut dyn Write) -> io::Result<()> {
        if matches!(event, Event::SpanBegin { .. }) {
            panic!("a deliberate panic from the test's sink");
        }
        Ok(())
    }
    fn finish(&mut self, _end: &Finish<'_>, _out: &mut dyn Write) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_sink_that_panics_on_the_finishing_thread_leaves_its_file_partial_and_the_caller_running() {
    // With RUST_BACKTRACE set, the panic's report reads the test binary's
    // debug information, tens of MiB, which the flood test would count as its
    // own memory.
    let _heavy = crate::HEAVY.lock();
    let dir = tempfile::tempdir().unwrap();
    let config =
        Config::from_lookup("T", &[], |n| (n == "T_TRACE_DIR").then(|| dir.path().into())).unwrap().unwrap();
    let session = Session::start(&config, "panicky", vec![Box::new(Panics)]).unwrap();
    let answer = session.in_scope(|| {
        let _s = tracing::info_span!("work").entered();
        42
    });
    let report = session.finish();
    assert_eq!(answer, 42);
    assert!(!report.is_complete());
    let file = &report.files[0];
    assert!(!file.complete);
    assert!(file.error.as_deref().unwrap_or("").contains("panicked"), "{file:?}");
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].ends_with(".panics.txt.partial"), "{names:?}");
}
