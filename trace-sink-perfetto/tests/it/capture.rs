//! A capture with every kind of event the engine sends, written through the
//! real engine, checked with the official schema, and compared, nanosecond for
//! nanosecond, with what the engine handed the sinks.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::{json, Value as Json};
use trace_core::{Field, LaneSlice, Value};
use tracing::{debug_span, field, info, info_span};

use crate::support::{assert_checker_accepts, assert_protoc_decodes, capture, dump, Seen};

/// What `busy_command` records, as the checker dumps it and as the engine sent it.
struct Busy {
    path: PathBuf,
    seen: Vec<Seen>,
    dumped: Vec<Json>,
    _dir: tempfile::TempDir,
}

/// A build-shaped command: a root span with a field of each type and one
/// recorded later, an instant, two helper threads with nested spans, three
/// slices on two sub-lanes of a `ninja` lane, and a span still open when the
/// capture finishes.
fn busy_command() -> Busy {
    let dir = tempfile::tempdir().unwrap();
    let (path, seen, still_open) = capture(dir.path(), "build", || {
        let root = info_span!(
            "build",
            jobs = 2u64,
            offset = -3i64,
            ratio = 0.5f64,
            fresh = true,
            profile = "release",
            target = ?"x86_64",
            late = field::Empty,
        );
        let entered = root.enter();
        info!(packages = 3u64, "resolved");
        let workers: Vec<_> = (0..2)
            .map(|w| {
                trace_core::spawn(format!("worker-{w}"), move || {
                    for unit in 0..3u64 {
                        let _compile = info_span!("compile", unit, worker = w).entered();
                        let _parse = debug_span!("parse").entered();
                    }
                })
                .unwrap()
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        root.record("late", 42u64);
        let handle = trace_core::current().unwrap();
        let now = handle.now_ns();
        let lane = |track, begin_ago: u64, end_ago: u64, name, fields| LaneSlice {
            lane: "ninja",
            track,
            begin_ns: now - begin_ago,
            end_ns: now - end_ago,
            name,
            fields,
        };
        let hash = [Field { name: "hash", value: Value::Str("1f2e") }];
        handle.lane_slice(&lane(0, 5_000_000, 1_000_000, "obj/a.o", &hash));
        handle.lane_slice(&lane(1, 4_000_000, 2_000_000, "obj/b.o", &[]));
        handle.lane_slice(&lane(0, 900_000, 100_000, "bin/app", &[]));
        drop(entered);
        // Returned still entered: the capture finishes with it open.
        info_span!("left_open").entered()
    });
    drop(still_open);
    let dumped = dump(&[], &[&path]);
    Busy { path, seen, dumped, _dir: dir }
}

/// Thread slices the engine sent: begins paired with ends per thread.
fn sent_slices(seen: &[Seen]) -> Vec<(u64, String, String, u64, u64)> {
    let names: HashMap<u64, String> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Thread { tid, name } => Some((*tid, name.clone())),
            _ => None,
        })
        .collect();
    let mut open: HashMap<u64, Vec<(String, u64)>> = HashMap::new();
    let mut slices = Vec::new();
    for s in seen {
        match s {
            Seen::Begin { tid, ts, name } => open.entry(*tid).or_default().push((name.clone(), *ts)),
            Seen::End { tid, ts, name, .. } => {
                let (begun, begin) = open.get_mut(tid).and_then(Vec::pop).unwrap();
                assert_eq!(&begun, name, "the engine pairs ends with begins");
                slices.push((*tid, names[tid].clone(), begun, begin, *ts));
            }
            _ => {}
        }
    }
    slices.sort();
    slices
}

fn dumped_thread_slices(dumped: &[Json]) -> Vec<(u64, String, String, u64, u64)> {
    let mut slices: Vec<_> = dumped
        .iter()
        .filter(|r| r["kind"] == "slice" && r.get("tid").is_some())
        .map(|r| {
            (
                r["tid"].as_u64().unwrap(),
                r["thread"].as_str().unwrap().to_string(),
                r["name"].as_str().unwrap().to_string(),
                r["begin_ns"].as_u64().unwrap(),
                r["end_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    slices.sort();
    slices
}

fn find<'a>(dumped: &'a [Json], kind: &str, name: &str) -> &'a Json {
    match dumped.iter().find(|r| r["kind"] == kind && r["name"] == name) {
        Some(r) => r,
        None => panic!("no {kind} named {name:?} in {dumped:#?}"),
    }
}

#[test]
fn a_busy_capture_passes_every_check_of_the_official_schema() {
    let busy = busy_command();
    assert_checker_accepts(&[], &[&busy.path]);
    let text = assert_protoc_decodes(&busy.path);
    for expected in
        ["thread_name: \"worker-0\"", "thread_name: \"worker-1\"", "TYPE_SLICE_BEGIN", "TYPE_INSTANT"]
    {
        assert!(text.contains(expected), "protoc's text lacks {expected:?}");
    }
}

#[test]
fn decoded_thread_slices_match_what_the_engine_sent_to_the_nanosecond() {
    let busy = busy_command();
    let sent = sent_slices(&busy.seen);
    assert_eq!(sent.len(), 1 + 2 * 3 * 2 + 1, "root, 2 workers x 3 x (compile, parse), left_open");
    assert_eq!(dumped_thread_slices(&busy.dumped), sent);
    let threads: Vec<&str> = sent.iter().map(|s| s.1.as_str()).collect();
    assert!(threads.contains(&"worker-0") && threads.contains(&"worker-1"), "{threads:?}");
    let pid = u64::from(std::process::id());
    assert!(busy.dumped.iter().filter(|r| r.get("tid").is_some()).all(|r| r["pid"] == pid));
}

#[test]
fn span_fields_of_every_type_and_late_ones_become_annotations() {
    let busy = busy_command();
    let root = find(&busy.dumped, "slice", "build");
    assert_eq!(root["category"], "it::capture", "the target is the category");
    assert_eq!(
        root["args"],
        json!({
            "jobs": 2, "offset": -3, "ratio": 0.5, "fresh": true, "profile": "release",
            "target": "\"x86_64\"", "late": 42
        })
    );
    let compile = find(&busy.dumped, "slice", "compile");
    assert!(compile["args"]["unit"].is_u64() && compile["args"]["worker"].is_i64(), "{compile}");
}

#[test]
fn a_span_open_at_the_end_is_closed_and_marked_unclosed() {
    let busy = busy_command();
    let open = find(&busy.dumped, "slice", "left_open");
    assert_eq!(open["args"], json!({ "unclosed": true }));
    assert!(busy
        .seen
        .iter()
        .any(|s| matches!(s, Seen::End { name, unclosed: true, .. } if name == "left_open")));
    let root = find(&busy.dumped, "slice", "build");
    assert!(root["args"].get("unclosed").is_none(), "a span that ended by itself is not marked");
}

#[test]
fn instants_are_named_after_their_message_with_their_level_and_location() {
    let busy = busy_command();
    // The sink's own instants (the flow to the spawned worker) aside.
    let instants: Vec<&Json> = busy
        .dumped
        .iter()
        .filter(|r| r["kind"] == "instant" && r.get("tid").is_some() && r["category"] != "cabin_trace")
        .collect();
    assert_eq!(instants.len(), 1, "{instants:#?}");
    let resolved = instants[0];
    assert_eq!(resolved["name"], "resolved");
    let location = resolved["args"]["location"].as_str().expect("a location").to_string();
    assert!(location.starts_with("trace-sink-perfetto/tests/it/capture.rs:"), "{location}");
    assert_eq!(
        resolved["args"],
        json!({ "message": "resolved", "packages": 3, "level": "INFO", "location": location })
    );
    assert_eq!(resolved["category"], "it::capture");
    let sent = busy.seen.iter().find_map(|s| match s {
        Seen::Instant { ts, .. } => Some(*ts),
        _ => None,
    });
    assert_eq!(sent, resolved["begin_ns"].as_u64());
}

#[test]
fn the_unclosed_span_is_flagged_by_an_instant_on_the_process_track() {
    let busy = busy_command();
    let (family, markers): (Vec<&Json>, Vec<&Json>) = busy
        .dumped
        .iter()
        .filter(|r| r["kind"] == "instant" && r.get("process").is_some())
        .partition(|r| r["name"] == trace_sink_perfetto::FAMILY_MARKER);
    assert_eq!(family.len(), 1, "the family's marker: {family:#?}");
    assert_eq!(family[0]["args"]["trace_id"].as_str().map(str::len), Some(32), "{family:#?}");
    assert_eq!(markers.len(), 1, "{markers:#?}");
    assert_eq!(markers[0]["name"], "trace spans unclosed (1)");
    assert_eq!(markers[0]["args"], json!({ "unclosed_spans": 1 }));
    assert_eq!(markers[0]["pid"], u64::from(std::process::id()));
    assert!(
        busy.dumped.iter().all(|r| r["kind"] != "counter" || r["track"] != "trace records dropped"),
        "no record was dropped"
    );
}

#[test]
fn a_lane_is_its_own_track_with_a_named_child_per_sub_lane() {
    let busy = busy_command();
    let mut lanes: Vec<(String, String, String, u64, u64)> = busy
        .dumped
        .iter()
        .filter(|r| r.get("lane").is_some())
        .map(|r| {
            (
                r["lane"].as_str().unwrap().into(),
                r["track"].as_str().unwrap().into(),
                r["name"].as_str().unwrap().into(),
                r["begin_ns"].as_u64().unwrap(),
                r["end_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    lanes.sort();
    let mut sent: Vec<(String, String, String, u64, u64)> = busy
        .seen
        .iter()
        .filter_map(|s| match s {
            Seen::Lane { lane, track, begin, end, name } => {
                Some((lane.clone(), format!("{lane} {track}"), name.clone(), *begin, *end))
            }
            _ => None,
        })
        .collect();
    sent.sort();
    assert_eq!(lanes, sent);
    assert_eq!(lanes.iter().filter(|l| l.1 == "ninja 0").count(), 2);
    assert_eq!(lanes.iter().filter(|l| l.1 == "ninja 1").count(), 1);
    let a = find(&busy.dumped, "slice", "obj/a.o");
    assert_eq!((&a["category"], &a["args"]), (&json!("ninja"), &json!({ "hash": "1f2e" })));
}
