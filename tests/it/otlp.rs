//! The OTLP file of the demo, decoded by the official OpenTelemetry classes
//! (tools/otlp_check.py, installed by scripts/install-test-tools.sh) and
//! compared span for span with the Chrome trace of the same capture.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::{Map, Value};

use crate::support::*;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Decodes an OTLP/JSON Lines file with the official classes after checking
/// the OTLP/JSON rules (hex ids, string 64-bit integers, integer enums).
pub fn decode(path: &Path) -> Value {
    let python = root().join(".tools/py/bin/python");
    assert!(python.exists(), "{} is missing: run scripts/install-test-tools.sh", python.display());
    let out = Command::new(python)
        .arg(root().join("tools/otlp_check.py"))
        .arg("json")
        .arg(path)
        .output()
        .expect("run tools/otlp_check.py");
    assert!(out.status.success(), "the official OTLP classes refuse {}:\n{}", path.display(), stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A span as both files can describe it: times in nanoseconds of the
/// monotonic clock, its parent by name and start.
#[derive(Debug, PartialEq)]
struct Common {
    tid: u64,
    name: String,
    begin_ns: i128,
    dur_ns: i128,
    parent: Option<(String, i128)>,
    attributes: Map<String, Value>,
}

fn chrome_ns(ts: &Value) -> i128 {
    let text = ts.to_string();
    let (int, frac) = text.split_once('.').unwrap_or((&text, "0"));
    int.parse::<i128>().unwrap() * 1000 + format!("{frac:0<3}")[..3].parse::<i128>().unwrap()
}

/// Chrome's spans: `B`/`E` pairs of the tool's process, fields of both merged;
/// a thread's outermost span has the capture's root as its parent.
/// A complete event: thread, begin, end, name, args.
type Complete = (u64, i128, i128, String, Map<String, Value>);

fn chrome_spans(path: &Path) -> (u64, BTreeMap<u64, String>, Vec<Common>) {
    let events: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let pid = events[0]["pid"].as_u64().unwrap();
    let mut threads = BTreeMap::new();
    // Complete events: (tid, begin, end, name, args).
    let mut complete: Vec<Complete> = Vec::new();
    for e in events.iter().filter(|e| e["pid"].as_u64() == Some(pid)) {
        let tid = e["tid"].as_u64().unwrap();
        let name = e["name"].as_str().unwrap().to_string();
        let args = e["args"].as_object().cloned().unwrap_or_default();
        match e["ph"].as_str().unwrap() {
            "M" if name == "thread_name" => {
                threads.insert(tid, args["name"].as_str().unwrap().to_string());
            }
            "X" => {
                let begin = chrome_ns(&e["ts"]);
                complete.push((tid, begin, begin + chrome_ns(&e["dur"]), name, args));
            }
            _ => {}
        }
    }
    // Outer slices first where they begin together.
    complete.sort_by_key(|c| (c.0, c.1, std::cmp::Reverse(c.2)));
    let root = complete.iter().filter(|c| c.3 == "command").min_by_key(|c| c.1).map(|c| (c.3.clone(), c.1));
    let mut spans = Vec::new();
    let mut stack: Vec<(u64, String, i128, i128)> = Vec::new();
    for (tid, begin, end, name, args) in complete {
        while let Some(top) = stack.last() {
            if top.0 == tid && begin >= top.2 && end <= top.3 {
                break;
            }
            stack.pop();
        }
        let parent = match stack.last() {
            Some((_, n, b, _)) => Some((n.clone(), *b)),
            None if root.as_ref() == Some(&(name.clone(), begin)) => None,
            None => root.clone(),
        };
        stack.push((tid, name.clone(), begin, end));
        spans.push(Common { tid, name, begin_ns: begin, dur_ns: end - begin, parent, attributes: args });
    }
    (pid, threads, spans)
}

const OUR_ATTRIBUTES: [&str; 5] =
    ["thread.id", "thread.name", "code.namespace", "tracing.level", "cabin_trace.unclosed"];

/// The OTLP spans on the monotonic clock, given the wall-clock offset.
fn otlp_spans(decoded: &Value, offset_ns: i128) -> Vec<Common> {
    let spans = decoded["spans"].as_array().unwrap();
    let by_id: BTreeMap<&str, &Value> = spans.iter().map(|s| (s["span_id"].as_str().unwrap(), s)).collect();
    let begin = |s: &Value| i128::from(s["start"].as_u64().unwrap()) - offset_ns;
    spans
        .iter()
        // Lane slices (the demo's child process) are not on the process's
        // threads; the Chrome side leaves their lanes' processes out too.
        .filter(|s| s["attributes"].get("cabin_trace.lane").is_none())
        .map(|s| {
            let attrs = s["attributes"].as_object().unwrap();
            Common {
                tid: attrs["thread.id"].as_u64().unwrap(),
                name: s["name"].as_str().unwrap().to_string(),
                begin_ns: begin(s),
                dur_ns: i128::from(s["end"].as_u64().unwrap()) - i128::from(s["start"].as_u64().unwrap()),
                parent: s["parent_span_id"].as_str().map(|p| {
                    let parent =
                        by_id.get(p).unwrap_or_else(|| panic!("parent {p} of {s} is not in the file"));
                    (parent["name"].as_str().unwrap().to_string(), begin(parent))
                }),
                attributes: attrs
                    .iter()
                    .filter(|(k, _)| !OUR_ATTRIBUTES.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            }
        })
        .collect()
}

#[test]
fn the_demo_otlp_file_matches_its_chrome_trace_span_for_span() {
    let dir = tempfile::tempdir().unwrap();
    let out = demo(
        &["--spans", "40", "--threads", "3"],
        &[
            ("CABIN_TRACE_DIR", dir.path()),
            ("CABIN_TRACE_FORMAT", Path::new("otlp,chrome")),
            ("CABIN_TRACE_FILTER", Path::new("debug")),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(with_suffix(dir.path(), ".pftrace").is_empty(), "only the formats asked for");
    let decoded = decode(&one(dir.path(), ".otlp.json"));
    let (pid, threads, mut chrome) = chrome_spans(&one(dir.path(), ".trace.json"));

    let spans = decoded["spans"].as_array().unwrap();
    let trace_id = spans[0]["trace_id"].as_str().unwrap();
    assert!(spans.iter().all(|s| s["trace_id"] == trace_id), "one trace");
    let ids: std::collections::BTreeSet<&str> =
        spans.iter().map(|s| s["span_id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), spans.len(), "span ids are unique");
    let resource = &spans[0]["resource"];
    assert_eq!(resource["process.pid"], pid);
    assert_eq!(resource["service.name"], "build");
    assert!(resource["host.name"].as_str().is_some_and(|h| !h.is_empty()));

    // The wall clock's offset from the monotonic one, read off the root.
    let root = spans.iter().find(|s| s["parent_span_id"].is_null()).expect("a root");
    assert_eq!(root["name"], "command");
    let chrome_root = chrome.iter().find(|c| c.parent.is_none()).unwrap();
    let offset = i128::from(root["start"].as_u64().unwrap()) - chrome_root.begin_ns;
    let mut otlp = otlp_spans(&decoded, offset);

    let key = |c: &Common| (c.tid, c.begin_ns, c.name.clone());
    chrome.sort_by_key(key);
    otlp.sort_by_key(key);
    assert_eq!(otlp.len(), chrome.len(), "one OTLP span per Chrome slice");
    assert!(otlp.len() > 80, "{} spans", otlp.len());
    for (o, c) in otlp.iter().zip(&chrome) {
        assert_eq!((o.tid, &o.name), (c.tid, &c.name));
        assert!((o.begin_ns - c.begin_ns).abs() <= 1000, "{} starts at the same time: {o:?} {c:?}", o.name);
        assert!((o.dur_ns - c.dur_ns).abs() <= 1000, "{} lasts as long: {o:?} {c:?}", o.name);
        assert_eq!(o.parent, c.parent, "{} has the same parent", o.name);
        assert_eq!(o.attributes, c.attributes, "{} has the same fields", o.name);
    }
    // Each span of a thread names it as the Chrome metadata does.
    for s in spans.iter().filter(|s| s["attributes"].get("cabin_trace.lane").is_none()) {
        let tid = s["attributes"]["thread.id"].as_u64().unwrap();
        assert_eq!(s["attributes"]["thread.name"].as_str(), threads.get(&tid).map(String::as_str));
    }
    // The `info!` in `link` is a span event of `link`, named by its message.
    let link = spans.iter().find(|s| s["name"] == "link").unwrap();
    assert_eq!(link["events"][0]["name"], "linked");
    assert_eq!(link["events"][0]["attributes"]["units"].as_i64().map(|u| u > 0), Some(true));
}

#[test]
fn otlp_is_not_written_unless_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let out = demo(&["--spans", "5"], &[("CABIN_TRACE_DIR", dir.path())]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(with_suffix(dir.path(), ".otlp.json").is_empty(), "{:?}", files_in(dir.path()));
    one(dir.path(), ".trace.json");
    one(dir.path(), ".pftrace");
}

#[test]
fn otel_variables_shape_the_resource_and_a_malformed_one_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("CABIN_TRACE_DIR", dir.path()),
        ("CABIN_TRACE_FORMAT", Path::new("otlp")),
        ("OTEL_SERVICE_NAME", Path::new("cabin")),
        ("OTEL_RESOURCE_ATTRIBUTES", Path::new("deployment.environment=ci,team=build%20tools")),
    ];
    let out = demo(&["--spans", "3"], &env);
    assert!(out.status.success(), "{}", stderr(&out));
    let decoded = decode(&one(dir.path(), ".otlp.json"));
    let resource = &decoded["spans"][0]["resource"];
    assert_eq!(resource["service.name"], "cabin");
    assert_eq!(resource["team"], "build tools");
    assert_eq!(resource["deployment.environment"], "ci");

    let bad = tempfile::tempdir().unwrap();
    let plain = demo(&["--spans", "3"], &[]);
    let out = demo(
        &["--spans", "3"],
        &[
            ("CABIN_TRACE_DIR", bad.path()),
            ("CABIN_TRACE_FORMAT", Path::new("otlp")),
            ("OTEL_RESOURCE_ATTRIBUTES", Path::new("team")),
        ],
    );
    assert!(out.status.success(), "the command runs: {}", stderr(&out));
    assert_eq!(out.stdout, plain.stdout);
    assert!(stderr(&out).contains("warning: OTEL_RESOURCE_ATTRIBUTES=`team`"), "{}", stderr(&out));
    let decoded = decode(&one(bad.path(), ".otlp.json"));
    assert!(decoded["spans"][0]["resource"].get("team").is_none());
}

#[test]
fn ninja_actions_and_test_executables_are_spans_under_the_root_as_long_as_their_chrome_slices() {
    let project = tempfile::tempdir().unwrap();
    let traces = tempfile::tempdir().unwrap();
    let out = Command::new(example_exe("minibuild"))
        .arg(project.path())
        .env("CABIN_TRACE_DIR", traces.path())
        .env("CABIN_TRACE_FORMAT", "chrome,otlp")
        .env_remove("CABIN_TRACE_FILTER")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let decoded = decode(&one(traces.path(), ".otlp.json"));
    let chrome: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(one(traces.path(), ".trace.json")).unwrap()).unwrap();
    let spans = decoded["spans"].as_array().unwrap();
    let root = spans.iter().find(|s| s["parent_span_id"].is_null()).unwrap();
    for lane in ["ninja", "tests"] {
        let mut ours: Vec<(String, i128)> = spans
            .iter()
            .filter(|s| s["attributes"]["cabin_trace.lane"] == lane)
            .inspect(|s| assert_eq!(s["parent_span_id"], root["span_id"], "{s}"))
            .map(|s| {
                let dur = i128::from(s["end"].as_u64().unwrap()) - i128::from(s["start"].as_u64().unwrap());
                (s["name"].as_str().unwrap().to_string(), dur)
            })
            .collect();
        let mut theirs: Vec<(String, i128)> = chrome
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == lane)
            .map(|e| (e["name"].as_str().unwrap().to_string(), chrome_ns(&e["dur"])))
            .collect();
        ours.sort();
        theirs.sort();
        assert!(!ours.is_empty(), "the {lane} lane has spans");
        assert_eq!(ours.len(), theirs.len(), "{lane}");
        for (o, t) in ours.iter().zip(&theirs) {
            assert_eq!(o.0, t.0);
            assert!((o.1 - t.1).abs() <= 1000, "{o:?} {t:?}");
        }
    }
}
