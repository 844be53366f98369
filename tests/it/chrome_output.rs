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

/// The id of an async event (the process's own, `"id2":{"local":"0x…"}`) or a
/// flow event (`"id"`).
pub fn event_id(e: &Value) -> Option<u64> {
    match e["id2"]["local"].as_str() {
        Some(hex) => u64::from_str_radix(hex.trim_start_matches("0x"), 16).ok(),
        None => e["id"].as_u64(),
    }
}

pub fn ns(ts: &Value) -> u64 {
    // `ts` is microseconds with three decimals: read it back exactly.
    let text = ts.to_string();
    let (int, frac) = text.split_once('.').unwrap_or((&text, "0"));
    let frac = format!("{frac:0<3}");
    int.parse::<u64>().expect("integer microseconds") * 1000 + frac[..3].parse::<u64>().expect("fraction")
}

/// Parses a Chrome trace, checks that it is well formed, and returns its thread
/// names (by tid) and its span slices.
///
/// Checks: a JSON array, one event per line; spans only as complete (`X`)
/// events, or as a `B` marked `"unclosed": true` and never an `E`; on each
/// thread the spans nest (a span that starts inside another ends inside it);
/// names on every event; the real pid; each async id one `b` and one `e`,
/// each flow id one `s` and one `f`. An unclosed span's slice ends at the
/// `trace spans unclosed` marker, the capture's finish, which must be there
/// and count them.
pub fn check(path: &Path, pid: Option<u64>) -> (BTreeMap<u64, String>, Vec<Slice>) {
    let text = std::fs::read_to_string(path).expect("read the trace");
    let events: Vec<Value> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(text.lines().count(), events.len() + 2, "one event per line, between `[` and `]`");
    let mut threads = BTreeMap::new();
    let mut slices = Vec::new();
    let mut unclosed = Vec::new();
    let mut unclosed_marker = None;
    let mut pairs: BTreeMap<(&str, u64), Vec<&Value>> = BTreeMap::new();
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
        match ph {
            "M" => {
                if name == "thread_name" {
                    threads.insert(tid, e["args"]["name"].as_str().expect("thread name").to_string());
                }
            }
            "X" => {
                let begin_ns = ns(&e["ts"]);
                let end_ns = begin_ns + ns(&e["dur"]);
                slices.push(Slice { tid, name: name.to_string(), begin_ns, end_ns });
            }
            "B" => {
                assert_eq!(e["args"]["unclosed"], true, "a B is only written for an unclosed span: {e}");
                unclosed.push((tid, name.to_string(), ns(&e["ts"])));
            }
            "i" if e["s"] == "g" && name.starts_with("trace spans unclosed") => {
                unclosed_marker = Some((ns(&e["ts"]), e["args"]["unclosed_spans"].as_u64().expect("count")));
            }
            "b" | "e" | "s" | "f" => {
                let id = event_id(e).unwrap_or_else(|| panic!("an async or flow event without an id: {e}"));
                let key = (if ph == "b" || ph == "e" { "async" } else { "flow" }, id);
                pairs.entry(key).or_default().push(e);
            }
            "i" | "C" => {}
            other => panic!("unexpected phase {other} in {e}"),
        }
    }
    // Each async id is one `b` and one `e` no earlier, of one name and
    // category; each flow id one `s` and one `f` of one name.
    for ((what, id), list) in &pairs {
        let phases: Vec<&str> = list.iter().map(|e| e["ph"].as_str().unwrap()).collect();
        let expected = if *what == "async" { ["b", "e"] } else { ["f", "s"] };
        let mut sorted = phases.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, expected, "{what} {id}: phases {phases:?}");
        assert_eq!(list[0]["name"], list[1]["name"], "{what} {id}: one name");
        assert_eq!(list[0]["cat"], list[1]["cat"], "{what} {id}: one category");
        if *what == "async" {
            let at = |ph: &str| ns(&list.iter().find(|e| e["ph"] == ph).unwrap()["ts"]);
            assert!(at("b") <= at("e"), "async {id} ends before it begins");
        }
    }
    // Per thread, by begin and then the longer first: each span that ended
    // must end within every span that is open around its begin. (An unclosed
    // span has no end to check: it may outlast its parent.)
    let mut by_thread: BTreeMap<u64, Vec<&Slice>> = BTreeMap::new();
    for s in &slices {
        by_thread.entry(s.tid).or_default().push(s);
    }
    for (tid, list) in by_thread.iter_mut() {
        list.sort_by_key(|s| (s.begin_ns, std::cmp::Reverse(s.end_ns)));
        let mut open: Vec<&Slice> = Vec::new();
        for s in list.iter() {
            while open.last().is_some_and(|o| o.end_ns <= s.begin_ns && o.begin_ns < s.begin_ns) {
                open.pop();
            }
            if let Some(parent) = open.last() {
                assert!(
                    s.end_ns <= parent.end_ns,
                    "on thread {tid}, {s:?} overlaps {parent:?} without nesting"
                );
            }
            open.push(s);
        }
    }
    if !unclosed.is_empty() {
        let (finish, count) = unclosed_marker.expect("unclosed spans are flagged by a marker");
        assert_eq!(count, unclosed.len() as u64, "the marker counts the unclosed spans");
        for (tid, name, begin_ns) in unclosed {
            slices.push(Slice { tid, name, begin_ns, end_ns: finish });
        }
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
    assert!(!text.contains(r#""ph":"E""#), "no span is split into a begin and an end");
    let events: Vec<Value> = serde_json::from_str(&text).unwrap();
    let compiler = events.iter().find(|e| e["name"] == "run_compiler").unwrap();
    assert_eq!(compiler["ph"], "X");
    assert_eq!(
        compiler["args"],
        serde_json::json!({"units": 50, "exit_code": 0}),
        "a field recorded later joins the creation fields in one args"
    );
}

#[test]
fn the_demo_traces_instant_is_named_after_its_message_with_its_level_and_location() {
    let dir = tempfile::tempdir().unwrap();
    let out = demo(&["--spans", "10"], &[("CABIN_TRACE_DIR", dir.path())]);
    assert!(out.status.success(), "{}", stderr(&out));
    let events: Vec<Value> =
        serde_json::from_slice(&std::fs::read(one(dir.path(), ".trace.json")).unwrap()).unwrap();
    let instants: Vec<&Value> = events.iter().filter(|e| e["ph"] == "i").collect();
    assert_eq!(instants.len(), 1, "{instants:?}");
    let linked = instants[0];
    assert_eq!(linked["name"], "linked");
    assert_eq!(linked["args"]["message"], "linked");
    assert_eq!(linked["args"]["level"], "INFO");
    let location = linked["args"]["location"].as_str().expect("a location");
    let (file, line) = location.rsplit_once(':').expect("file:line");
    assert!(file.ends_with("demo.rs") && line.parse::<u32>().is_ok(), "{location}");
    assert!(
        events.iter().all(|e| e["ph"] != "C" || e["name"] != "trace records dropped"),
        "no loss, no counter"
    );
}

/// A sink stuck once, on its first event, past the longest a recording thread
/// waits for room: the writer falls behind a flood of instants, and records
/// are dropped.
pub(crate) struct Slow(pub(crate) u64);

impl trace_core::Sink for Slow {
    fn name(&self) -> &'static str {
        "slow"
    }
    fn suffix(&self) -> &'static str {
        "slow.txt"
    }
    fn event(&mut self, _: &trace_core::Event<'_>, _: &mut dyn std::io::Write) -> std::io::Result<()> {
        self.0 += 1;
        // Stuck once, past the longest a recording thread waits for room: the
        // capture then drops past its budget instead of waiting.
        if self.0 == 1 {
            std::thread::sleep(std::time::Duration::from_millis(1_300));
        }
        Ok(())
    }
    fn finish(&mut self, _: &trace_core::Finish<'_>, _: &mut dyn std::io::Write) -> std::io::Result<()> {
        Ok(())
    }
}

/// Records dropped by the engine reach the sink's markers. (The format of the
/// markers is checked in each sink's tests, the `.pftrace`'s with the
/// official schema; this is the path from a real flood to them.)
#[test]
fn records_dropped_in_a_flood_are_a_global_instant_and_a_counter_in_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let config = trace_core::Config::from_lookup("FLOOD", &["chrome"], |n| {
        (n == "FLOOD_TRACE_DIR").then(|| dir.path().into())
    })
    .unwrap()
    .unwrap()
    // A small budget: the flood outruns it.
    .with_memory_budget(1 << 20);
    let sinks: Vec<Box<dyn trace_core::Sink>> =
        vec![Box::new(Slow(0)), Box::new(trace_sink_chrome::ChromeSink::new())];
    let session = trace_core::Session::start(&config, "flood", sinks).unwrap();
    session.in_scope(|| {
        let threads: Vec<_> = (0..4)
            .map(|t| {
                trace_core::spawn(format!("flood-{t}"), || {
                    for i in 0..100_000u64 {
                        tracing::info!(i, "flood");
                    }
                })
                .unwrap()
            })
            .collect();
        threads.into_iter().for_each(|h| h.join().unwrap());
    });
    let report = session.finish();
    let dropped = report.dropped_records;
    assert!(dropped > 0, "the writer fell behind on purpose");
    let path = &report.files.iter().find(|f| f.sink == "chrome").unwrap().path;
    // Hundreds of thousands of instants: read only the lines of the markers.
    let text = std::fs::read_to_string(path).unwrap();
    let marked: Vec<Value> = text
        .lines()
        .filter(|l| l.contains(r#""ph":"C""#) || l.contains(r#""s":"g""#))
        .map(|l| serde_json::from_str(l.trim_end_matches(',')).unwrap())
        .collect();
    let instants: Vec<&Value> = marked.iter().filter(|e| e["ph"] == "i").collect();
    assert_eq!(instants.len(), 1, "{marked:?}");
    assert_eq!(instants[0]["name"], format!("trace records dropped ({dropped})"));
    assert_eq!(instants[0]["args"]["dropped_records"], dropped);
    let samples: Vec<u64> = marked
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "trace records dropped")
        .map(|e| e["args"]["count"].as_u64().unwrap())
        .collect();
    assert_eq!(samples, [0, dropped], "the counter rises from 0 to the count");
}
