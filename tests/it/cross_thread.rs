//! A span used on several threads keeps every field in all three files.

use std::path::Path;

use cabin_trace::{Capture, Config, Report};
use serde_json::Value;
use tracing::field::Empty;
use tracing::info_span;

pub fn capture(dir: &Path, command: &str, f: impl FnOnce()) -> Report {
    let config = Config::from_lookup("TEST", cabin_trace::FORMATS, |name| {
        (name == "TEST_TRACE_DIR").then(|| dir.into())
    })
    .unwrap();
    let ((), report) = Capture::from_config(config).run_with_report(command, f).unwrap();
    let report = report.unwrap();
    assert!(report.is_complete(), "{:?}", report.warnings());
    report
}

pub fn file<'a>(report: &'a Report, sink: &str) -> &'a Path {
    &report.files.iter().find(|f| f.sink == sink).unwrap().path
}

/// Every arg the Chrome trace gives slices named `name`, merged (a complete
/// event's, or a begin's and its end's).
fn chrome_args(path: &Path, name: &str) -> serde_json::Map<String, Value> {
    let events: Vec<Value> = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let mut args = serde_json::Map::new();
    for e in events.iter().filter(|e| e["name"] == name && e["ph"] != "M") {
        if let Some(a) = e["args"].as_object() {
            args.extend(a.clone());
        }
    }
    args
}

/// The args of each `.pftrace` slice named `name`, by the official schema;
/// the flow ids the dump gives beside them (a helper's first span ends the
/// flow from the span that started it) are not fields.
fn perfetto_args(path: &Path, name: &str) -> Vec<Value> {
    crate::perfetto::check(&[path])
        .into_iter()
        .filter(|s| s["kind"] == "slice" && s["name"] == name)
        .map(|mut s| {
            if let Some(args) = s["args"].as_object_mut() {
                args.remove("flow_ids");
                args.remove("terminating_flow_ids");
            }
            s["args"].clone()
        })
        .collect()
}

fn summary_sums(path: &Path, name: &str) -> Value {
    let summary: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let span = summary["spans"].as_array().unwrap().iter().find(|s| s["name"] == name).cloned();
    span.unwrap_or_else(|| panic!("no span `{name}` in {summary}"))["field_sums"].clone()
}

/// Enough spans to fill a batch, so that this thread's records reach the
/// writer before those of the thread that created the span.
fn fill_a_batch() {
    for _ in 0..1500 {
        info_span!("filler").in_scope(|| ());
    }
}

#[test]
fn a_value_recorded_on_another_thread_reaches_all_three_files() {
    let dir = tempfile::tempdir().unwrap();
    let report = capture(dir.path(), "record", || {
        let s = info_span!("download", bytes = Empty);
        let _g = s.enter();
        let c = s.clone();
        cabin_trace::spawn("w", move || {
            c.record("bytes", 7u64);
            drop(c);
            fill_a_batch();
        })
        .unwrap()
        .join()
        .unwrap();
    });
    assert_eq!(chrome_args(file(&report, "chrome"), "download")["bytes"], 7);
    assert_eq!(perfetto_args(file(&report, "perfetto"), "download"), [serde_json::json!({"bytes": 7})]);
    assert_eq!(summary_sums(file(&report, "summary"), "download")["bytes"], 7);
}

#[test]
fn a_span_moved_to_another_thread_keeps_its_creation_fields_in_all_three_files() {
    let dir = tempfile::tempdir().unwrap();
    let report = capture(dir.path(), "moved", || {
        let span = info_span!("upload", files = 3u64, bytes = Empty);
        cabin_trace::spawn("mover", move || {
            span.in_scope(|| {
                tracing::Span::current().record("bytes", 11u64);
            });
            drop(span);
            fill_a_batch();
        })
        .unwrap()
        .join()
        .unwrap();
    });
    let chrome = chrome_args(file(&report, "chrome"), "upload");
    assert_eq!((chrome["files"].clone(), chrome["bytes"].clone()), (3.into(), 11.into()));
    assert_eq!(
        perfetto_args(file(&report, "perfetto"), "upload"),
        [serde_json::json!({"files": 3, "bytes": 11})]
    );
    let sums = summary_sums(file(&report, "summary"), "upload");
    assert_eq!((sums["files"].clone(), sums["bytes"].clone()), (3.into(), 11.into()));
}
