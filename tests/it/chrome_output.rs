//! The Chrome JSON, parsed back and checked as a viewer would need it.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::support::*;

/// A slice as the Chrome file draws it, for comparison with other formats.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Slice {
    pub tid: u64,
    pub name: String,
    pub begin_ns: u64,
    pub end_ns: u64,
}

fn ns(ts: &Value) -> u64 {
    // `ts` is microseconds with three decimals: read it back exactly.
    let text = ts.to_string();
    let (int, frac) = text.split_once('.').unwrap_or((&text, "0"));
    let frac = format!("{frac:0<3}");
    int.parse::<u64>().expect("integer microseconds") * 1000 + frac[..3].parse::<u64>().expect("fraction")
}

/// Parses a Chrome trace, checks that it is well formed, and returns its thread
/// names (by tid) and its span slices.
///
/// Checks: a JSON array, one event per line; every `B` closed by an `E` of the
/// same name on its thread, properly nested; timestamps non-decreasing per
/// thread; names on every event; the real pid.
pub fn check(path: &Path, pid: Option<u64>) -> (BTreeMap<u64, String>, Vec<Slice>) {
    let text = std::fs::read_to_string(path).expect("read the trace");
    let events: Vec<Value> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(text.lines().count(), events.len() + 2, "one event per line, between `[` and `]`");
    let mut threads = BTreeMap::new();
    let mut stacks: BTreeMap<u64, Vec<(String, u64)>> = BTreeMap::new();
    let mut last_ts: BTreeMap<u64, u64> = BTreeMap::new();
    let mut slices = Vec::new();
    let main_pid = events[0]["pid"].as_u64().expect("pid");
    if let Some(pid) = pid {
        assert_eq!(main_pid, pid, "the real pid");
    }
    for e in &events {
        let ph = e["ph"].as_str().expect("ph");
        let name = e["name"].as_str().unwrap_or_else(|| panic!("an event without a name: {e}"));
        let tid = e["tid"].as_u64().expect("tid");
        if e["pid"].as_u64() != Some(main_pid) {
            continue; // external lanes: checked by their own tests
        }
        if ph == "M" {
            if name == "thread_name" {
                threads.insert(tid, e["args"]["name"].as_str().expect("thread name").to_string());
            }
            continue;
        }
        let ts = ns(&e["ts"]);
        let last = last_ts.entry(tid).or_insert(0);
        assert!(ts >= *last, "timestamps go back on thread {tid} at {e}");
        *last = ts;
        let stack = stacks.entry(tid).or_default();
        match ph {
            "B" => stack.push((name.to_string(), ts)),
            "E" => {
                let (open, begin) = stack.pop().unwrap_or_else(|| panic!("an E with nothing open: {e}"));
                assert_eq!(open, name, "E closes the innermost B on thread {tid}");
                slices.push(Slice { tid, name: open, begin_ns: begin, end_ns: ts });
            }
            "i" => {}
            other => panic!("unexpected phase {other} in {e}"),
        }
    }
    for (tid, stack) in &stacks {
        assert!(stack.is_empty(), "spans left open on thread {tid}: {stack:?}");
    }
    slices.sort();
    (threads, slices)
}

#[test]
fn at_the_default_filter_the_demo_trace_holds_spans_of_the_main_and_both_helper_threads() {
    let dir = tempfile::tempdir().unwrap();
    let out = demo(&[], &[("CABIN_TRACE_DIR", dir.path())]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (threads, slices) = check(&one(dir.path(), ".trace.json"), None);
    for name in ["main", "fetch-0", "fetch-1"] {
        let (tid, _) = threads.iter().find(|(_, n)| *n == name).unwrap_or_else(|| panic!("no lane {name}"));
        assert!(slices.iter().any(|s| s.tid == *tid), "thread {name} has spans");
    }
}

#[test]
fn the_demo_trace_is_well_formed_with_every_thread_named_and_every_span_closed() {
    let dir = tempfile::tempdir().unwrap();
    let out = demo(
        &["--spans", "50", "--threads", "2"],
        &[("CABIN_TRACE_DIR", dir.path()), ("CABIN_TRACE_FILTER", Path::new("debug"))],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let trace = one(dir.path(), ".trace.json");
    let (threads, slices) = check(&trace, None);
    let names: Vec<&str> = threads.values().map(String::as_str).collect();
    for t in ["main", "fetch-0", "fetch-1"] {
        assert!(names.contains(&t), "thread {t} is named: {names:?}");
    }
    let count = |n: &str| slices.iter().filter(|s| s.name == n).count();
    assert_eq!(count("resolve_package"), 50);
    assert_eq!(count("download"), 50);
    for phase in ["command", "resolve", "fetch", "compile", "run_compiler", "link"] {
        assert_eq!(count(phase), 1, "{phase}");
    }
    assert_eq!(count("fetch_worker"), 2);
    // Downloads happen on the helper threads, nowhere else.
    let main_tid = threads.iter().find(|(_, n)| *n == "main").map(|(t, _)| *t).unwrap();
    assert!(slices.iter().filter(|s| s.name == "download").all(|s| s.tid != main_tid));
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(text.contains(r#""args":{"index":7,"requests":1,"rounds":1}"#), "span fields are args");
    assert!(text.contains(r#""args":{"exit_code":0}"#), "a field recorded later is on the E");
}
