//! Spans that run in pieces get a track of their own, and links between
//! spans become flows: checked in the `.pftrace` by the official-schema
//! checker and in the Chrome JSON by parsing it.

use std::collections::{BTreeMap, BTreeSet};

use cabin_trace::Report;
use serde_json::Value;
use tracing::{info_span, Instrument};

use crate::chrome_output::ns;
use crate::cross_thread::{capture, file};

/// The Chrome trace's events, after the well-formedness checks.
fn chrome(report: &Report) -> Vec<Value> {
    let path = file(report, "chrome");
    let _ = crate::chrome_output::check(path, Some(u64::from(std::process::id())));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// A begin and an end, in nanoseconds.
type Span = (u64, u64);

fn within(inner: Span, outer: Span) -> bool {
    outer.0 <= inner.0 && inner.1 <= outer.1
}

const TASKS: u64 = 48;

/// 48 `.instrument()`ed tasks on a four-worker runtime, each yielding five
/// times, so that each is polled six times (and entered once more when the
/// future drops), on whichever workers take it; and one plain span.
pub fn tokio_tasks() {
    info_span!("setup", plain = true).in_scope(|| ());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).build().unwrap();
    runtime.block_on(async {
        let tasks: Vec<_> = (0..TASKS)
            .map(|n| {
                let task = async move {
                    for _ in 0..5 {
                        tokio::task::yield_now().await;
                    }
                };
                let task = tracing::instrument::WithSubscriber::with_current_subscriber(
                    task.instrument(info_span!("task", n)),
                );
                tokio::spawn(task)
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
}

#[test]
fn forty_eight_instrumented_tasks_get_forty_eight_tracks_covering_their_polls_in_both_formats() {
    let dir = tempfile::tempdir().unwrap();
    let report = capture(dir.path(), "tokio", tokio_tasks);
    assert_eq!(report.dropped_records, 0);

    // Perfetto: one track per task under the process, one slice on it; the
    // polls on the threads' tracks, where the checker has seen them nest.
    let dumped = crate::perfetto::check(&[file(&report, "perfetto")]);
    let mut tracks: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
    let mut polls: BTreeMap<u64, Vec<(u64, Span)>> = BTreeMap::new();
    for s in dumped.iter().filter(|s| s["kind"] == "slice") {
        let range = (s["begin_ns"].as_u64().unwrap(), s["end_ns"].as_u64().unwrap());
        if let Some(uuid) = s["async"].as_u64() {
            assert_eq!(s["pid"], u64::from(std::process::id()), "{s}");
            tracks.entry(uuid).or_default().push(s);
        } else if s["name"] == "task" {
            let n = s["args"]["n"].as_u64().unwrap_or_else(|| panic!("a poll without its field: {s}"));
            polls.entry(n).or_default().push((s["tid"].as_u64().unwrap(), range));
        }
    }
    assert_eq!(tracks.len() as u64, TASKS, "one track per task: {:?}", tracks.keys());
    let mut covered = BTreeSet::new();
    for slices in tracks.values() {
        assert_eq!(slices.len(), 1, "one slice per track: {slices:?}");
        let s = slices[0];
        assert_eq!((s["name"].as_str(), s["track"].as_str()), (Some("task"), Some("task")), "{s}");
        let n = s["args"]["n"].as_u64().unwrap();
        let life = (s["begin_ns"].as_u64().unwrap(), s["end_ns"].as_u64().unwrap());
        let pieces = &polls[&n];
        assert!(pieces.len() >= 6, "task {n}: {} polls", pieces.len());
        for (_, poll) in pieces {
            assert!(within(*poll, life), "task {n}: poll {poll:?} outside its track's slice {life:?}");
        }
        covered.insert(n);
    }
    assert_eq!(covered.len() as u64, TASKS, "every task has its own track");
    let plain = dumped.iter().filter(|s| s["name"] == "setup").collect::<Vec<_>>();
    assert!(plain.len() == 1 && plain[0]["tid"].is_u64(), "a plain span stays on its thread: {plain:?}");

    // Chrome: one `b`/`e` pair per task, with the task's fields, around its
    // polls, which are complete events on the threads that ran them.
    let events = chrome(&report);
    let mut asyncs: BTreeMap<u64, (Option<Span>, Option<u64>)> = BTreeMap::new();
    let mut polls: BTreeMap<u64, Vec<Span>> = BTreeMap::new();
    for e in events.iter().filter(|e| e["name"] == "task") {
        match e["ph"].as_str().unwrap() {
            "b" => {
                assert_eq!(e["cat"], "it::async_tracks", "{e}");
                let n = e["args"]["n"].as_u64().unwrap_or_else(|| panic!("a begin without its field: {e}"));
                let entry = asyncs.entry(crate::chrome_output::event_id(e).unwrap()).or_default();
                entry.1 = Some(n);
                entry.0 = Some((ns(&e["ts"]), entry.0.map_or(0, |r| r.1)));
            }
            "e" => {
                let entry = asyncs.entry(crate::chrome_output::event_id(e).unwrap()).or_default();
                entry.0 = Some((entry.0.map_or(0, |r| r.0), ns(&e["ts"])));
            }
            "X" => {
                let begin = ns(&e["ts"]);
                let n = e["args"]["n"].as_u64().unwrap();
                polls.entry(n).or_default().push((begin, begin + ns(&e["dur"])));
            }
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    assert_eq!(asyncs.len() as u64, TASKS, "one async id per task");
    let tasks: BTreeSet<u64> = asyncs.values().map(|(_, n)| n.unwrap()).collect();
    assert_eq!(tasks.len() as u64, TASKS, "one async id for each task");
    for (range, n) in asyncs.values() {
        let (life, n) = (range.unwrap(), n.unwrap());
        for poll in &polls[&n] {
            assert!(within(*poll, life), "task {n}: poll {poll:?} outside its async slice {life:?}");
        }
    }
    assert!(!events.iter().any(|e| e["name"] == "setup" && e["ph"] != "X"), "a plain span has no async pair");
}

/// The single slice named `name` with a thread, from the checker's dump.
fn slice<'a>(dumped: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> =
        dumped.iter().filter(|s| s["kind"] == kind && s["name"] == name && s["tid"].is_u64()).collect();
    assert_eq!(found.len(), 1, "one {kind} {name}: {found:#?}");
    found[0]
}

fn range(s: &Value) -> Span {
    (s["begin_ns"].as_u64().unwrap(), s["end_ns"].as_u64().unwrap())
}

/// Checks, in both files, one flow named `kind` from inside the slice
/// `source` to the begin of the slice `target`.
fn assert_flow(report: &Report, kind: &str, source: &str, target: &str) {
    let dumped = crate::perfetto::check(&[file(report, "perfetto")]);
    let from = slice(&dumped, "slice", source);
    let to = slice(&dumped, "slice", target);
    let out = slice(&dumped, "instant", kind);
    assert_eq!(out["tid"], from["tid"], "the flow leaves from the source's thread");
    assert!(within(range(out), range(from)), "the flow's instant {out} lies in its source {from}");
    let flow = out["args"]["flow_ids"].as_array().expect("flow_ids on the source's instant").clone();
    assert_eq!(flow.len(), 1, "{out}");
    assert_eq!(to["args"]["terminating_flow_ids"], Value::Array(flow), "the target's begin ends it: {to}");

    let events = chrome(report);
    let x = |name: &str| {
        let e = events.iter().find(|e| e["ph"] == "X" && e["name"] == name).unwrap();
        let begin = ns(&e["ts"]);
        (e["tid"].as_u64().unwrap(), (begin, begin + ns(&e["dur"])))
    };
    let (s, f) = (events.iter().find(|e| e["ph"] == "s"), events.iter().find(|e| e["ph"] == "f"));
    let (s, f) = (s.expect("a flow's `s`"), f.expect("a flow's `f`"));
    assert_eq!((&s["name"], &f["name"], &s["id"]), (&kind.into(), &kind.into(), &f["id"]));
    let (from_tid, from) = x(source);
    assert_eq!(s["tid"], from_tid);
    let at = ns(&s["ts"]);
    assert!(within((at, at), from), "`s` at {at} binds to its source {from:?}");
    // An `f` without `bp` binds to the next slice to begin on its thread.
    let (to_tid, to) = x(target);
    assert_eq!(f["tid"], to_tid);
    assert!(f.get("bp").is_none(), "{f}");
    let at = ns(&f["ts"]);
    assert_eq!(at + 1, to.0, "`f` is 1 ns before its target's begin");
}

#[test]
fn a_helper_started_with_spawn_is_linked_by_a_flow_from_the_span_that_started_it() {
    let dir = tempfile::tempdir().unwrap();
    let report = capture(dir.path(), "spawn", || {
        info_span!("start_helpers").in_scope(|| {
            let helper = cabin_trace::spawn("helper", || info_span!("helper_work", n = 1).in_scope(|| ()));
            helper.unwrap().join().unwrap();
        });
    });
    assert_flow(&report, "spawn", "start_helpers", "helper_work");
}

#[test]
fn a_span_that_follows_from_another_is_linked_by_a_flow_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let report = capture(dir.path(), "follows", || {
        let request = info_span!("request", id = 7);
        let batch = info_span!("batch");
        request.in_scope(|| {
            batch.follows_from(&request);
        });
        batch.in_scope(|| ());
    });
    assert_flow(&report, "follows_from", "request", "batch");
}
