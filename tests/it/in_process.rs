//! Captures in one process: repeated, concurrent, on reused threads, and with
//! the tool's own logging composed in.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};

use cabin_trace::{Capture, Config};
use tracing::info_span;
use tracing_subscriber::Layer;

use crate::chrome_output::{check, Slice};

fn capture_into(dir: &Path) -> Capture {
    let config = Config::from_lookup("TEST", cabin_trace::FORMATS, |name| {
        (name == "TEST_TRACE_DIR").then(|| dir.into())
    })
    .unwrap();
    Capture::from_config(config)
}

/// Runs `f` under a capture into `dir` and returns the Chrome trace's slices.
fn captured(
    dir: &Path,
    command: &str,
    f: impl FnOnce(),
) -> (std::collections::BTreeMap<u64, String>, Vec<Slice>) {
    let ((), report) = capture_into(dir).run_with_report(command, f).unwrap();
    let report = report.unwrap();
    assert!(report.is_complete(), "{:?}", report.warnings());
    let trace = report.files.iter().find(|f| f.sink == "chrome").unwrap();
    check(&trace.path, Some(std::process::id() as u64))
}

fn names(slices: &[Slice]) -> Vec<&str> {
    let mut v: Vec<&str> = slices.iter().map(|s| s.name.as_str()).filter(|n| *n != "command").collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn repeated_sessions_in_one_thread_each_capture_their_own_command() {
    let dir = tempfile::tempdir().unwrap();
    let (_, first) = captured(dir.path(), "first", || info_span!("first_phase").in_scope(|| ()));
    let (_, second) = captured(dir.path(), "second", || info_span!("second_phase").in_scope(|| ()));
    let (_, third) = captured(dir.path(), "first", || info_span!("third_phase").in_scope(|| ()));
    assert_eq!(names(&first), ["first_phase"]);
    assert_eq!(names(&second), ["second_phase"]);
    assert_eq!(names(&third), ["third_phase"]);
    assert_eq!(crate::support::with_suffix(dir.path(), ".trace.json").len(), 3, "a stem per capture");
}

#[test]
fn a_second_capture_on_a_reused_worker_thread_receives_that_threads_events() {
    // One long-lived worker, as a pool or a test harness keeps.
    let (tx, rx) = mpsc::channel::<Box<dyn FnOnce() + Send>>();
    let worker = std::thread::Builder::new()
        .name("worker".into())
        .spawn(move || {
            for job in rx {
                job();
            }
        })
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut worker_tids = Vec::new();
    for (round, span) in [(1, "round_one"), (2, "round_two")] {
        let (threads, slices) = captured(dir.path(), "work", || {
            let (done_tx, done_rx) = mpsc::channel();
            let job = cabin_trace::bind(move || {
                match round {
                    1 => info_span!("round_one").in_scope(|| ()),
                    _ => info_span!("round_two").in_scope(|| ()),
                }
                done_tx.send(()).unwrap();
            });
            tx.send(Box::new(job)).unwrap();
            done_rx.recv().unwrap();
        });
        assert_eq!(names(&slices), [span], "round {round} sees exactly its own span");
        let (tid, name) = threads.iter().find(|(_, n)| *n == "worker").expect("the worker has its lane");
        assert_eq!(name, "worker");
        assert!(slices.iter().any(|s| s.tid == *tid && s.name == span));
        worker_tids.push(*tid);
    }
    assert_eq!(worker_tids[0], worker_tids[1], "the same thread served both captures");
    drop(tx);
    worker.join().unwrap();
}

#[test]
fn two_captures_running_at_once_on_different_threads_each_see_only_their_own_spans() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let barrier = Arc::new(Barrier::new(2));
    let run = |label: &'static str| {
        let dir = dir.clone();
        let barrier = barrier.clone();
        std::thread::spawn(move || {
            captured(dir.path(), label, || {
                for i in 0..200 {
                    if i == 100 {
                        barrier.wait(); // both captures are surely live at once here
                    }
                    match label {
                        "left" => info_span!("left_span", i).in_scope(|| ()),
                        _ => info_span!("right_span", i).in_scope(|| ()),
                    }
                }
            })
        })
    };
    let (left, right) = (run("left"), run("right"));
    let (_, left) = left.join().unwrap();
    let (_, right) = right.join().unwrap();
    assert_eq!(names(&left), ["left_span"]);
    assert_eq!(names(&right), ["right_span"]);
    assert_eq!(left.len(), 201);
    assert_eq!(right.len(), 201);
}

#[test]
fn helper_threads_started_with_spawn_appear_as_their_own_named_lanes() {
    let dir = tempfile::tempdir().unwrap();
    let (threads, slices) = captured(dir.path(), "fetch", || {
        let hs: Vec<_> = (0..3)
            .map(|i| {
                cabin_trace::spawn(format!("helper-{i}"), || info_span!("helping").in_scope(|| ())).unwrap()
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
    });
    for i in 0..3 {
        let (tid, _) = threads.iter().find(|(_, n)| **n == format!("helper-{i}")).expect("a named lane");
        assert_eq!(slices.iter().filter(|s| s.tid == *tid && s.name == "helping").count(), 1);
    }
}

#[test]
fn spans_still_open_at_the_end_are_closed_and_marked() {
    let dir = tempfile::tempdir().unwrap();
    let ((), report) = capture_into(dir.path())
        .run_with_report("leak", || std::mem::forget(info_span!("forgotten").entered()))
        .unwrap();
    let report = report.unwrap();
    let trace = &report.files.iter().find(|f| f.sink == "chrome").unwrap().path;
    let (_, slices) = check(trace, None);
    assert!(slices.iter().any(|s| s.name == "forgotten"));
    assert!(std::fs::read_to_string(trace).unwrap().contains(r#""unclosed":true"#));
}

/// Counts the events it sees, as a tool's log output would print them.
struct CountingLayer(Arc<AtomicUsize>);

impl<S: tracing::Subscriber> Layer<S> for CountingLayer {
    fn on_event(&self, _: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn the_tools_own_logging_keeps_working_during_a_capture_and_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let (_, slices) = {
        let ((), report) = capture_into(dir.path())
            .with_layer(CountingLayer(seen.clone()))
            .run_with_report("log", || {
                tracing::warn!("one");
                info_span!("phase").in_scope(|| tracing::warn!("two"));
            })
            .unwrap();
        check(&report.unwrap().files[0].path, None)
    };
    assert_eq!(seen.load(Ordering::Relaxed), 2, "the tool's layer saw both events");
    assert_eq!(names(&slices), ["phase"]);
    Capture::from_config(None)
        .with_layer(CountingLayer(seen.clone()))
        .run("log", || tracing::warn!("three"))
        .unwrap();
    assert_eq!(seen.load(Ordering::Relaxed), 3, "and runs alone when capture is off");
}

#[test]
fn no_capture_means_no_capture_dispatcher_and_the_thread_default_untouched() {
    let before = tracing::dispatcher::get_default(|d| d.is::<tracing_core::subscriber::NoSubscriber>());
    let value = Capture::from_config(None).run("off", || {
        assert!(cabin_trace::current().is_none(), "no capture is reachable from the command");
        let during = tracing::dispatcher::get_default(|d| d.is::<tracing_core::subscriber::NoSubscriber>());
        assert_eq!(during, before, "the thread's default dispatcher is the one it had");
        7
    });
    assert_eq!(value.unwrap(), 7);
}
