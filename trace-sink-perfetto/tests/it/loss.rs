//! What a reader of the `.pftrace` is told about loss, and how instants are
//! named: events handed to the sink directly, the file checked with the
//! official schema.

use serde_json::{json, Value as Json};
use trace_core::{Event, Field, Finish, Level, Sink, Site, Start, Value};
use trace_sink_perfetto::PerfettoSink;

use crate::support::{assert_protoc_decodes, dump};

const START_NS: u64 = 1_000;
const END_NS: u64 = 90_000;

/// Writes `events` through a new sink into a file, finishes it with
/// `dropped_records`, and returns the checker's dump.
fn written(events: &[Event<'_>], dropped_records: u64) -> Vec<Json> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.pftrace");
    let mut out = Vec::new();
    let mut sink = PerfettoSink::new();
    let mut start = Start::default();
    start.command = "build";
    start.stem = "s";
    start.pid = std::process::id();
    start.start_unix_ms = 1;
    start.start_ns = START_NS;
    start.filter = "info";
    sink.start(&start, &mut out).unwrap();
    for e in events {
        sink.event(e, &mut out).unwrap();
    }
    let mut end = Finish::default();
    end.end_ns = END_NS;
    end.dropped_records = dropped_records;
    sink.finish(&end, &mut out).unwrap();
    std::fs::write(&path, &out).unwrap();
    assert_protoc_decodes(&path);
    dump(&[], &[&path])
}

const SITE: Site<'static> = Site::new("event src/x.rs:9", "app", Level::WARN, Some("src/x.rs"), Some(9));

#[test]
fn dropped_records_are_an_instant_on_the_process_and_a_counter_track_with_a_unit() {
    let dumped = written(&[], 7);
    let marker = dumped.iter().find(|r| r["kind"] == "instant").expect("a marker");
    assert_eq!(marker["name"], "trace records dropped (7)");
    assert_eq!((&marker["process"], &marker["begin_ns"]), (&json!("build"), &json!(END_NS)));
    assert_eq!(marker["args"], json!({ "dropped_records": 7 }));
    let counter: Vec<(u64, i64)> = dumped
        .iter()
        .filter(|r| r["kind"] == "counter")
        .inspect(|r| {
            assert_eq!((&r["track"], &r["unit"]), (&json!("trace records dropped"), &json!("UNIT_COUNT")));
            assert_eq!(r["pid"], u64::from(std::process::id()), "a counter of the process");
        })
        .map(|r| (r["ts_ns"].as_u64().unwrap(), r["value"].as_i64().unwrap()))
        .collect();
    assert_eq!(counter, [(START_NS, 0), (END_NS, 7)]);
}

#[test]
fn a_long_message_names_its_instant_cut_to_sixty_characters_on_a_character_boundary() {
    let message = format!("{} and the rest", "é".repeat(70));
    let fields = [Field { name: "message", value: Value::Str(&message) }];
    let dumped = written(&[Event::Instant { thread: 3, ts: 5_000, site: SITE, fields: &fields }], 0);
    assert!(dumped.iter().all(|r| r["kind"] != "counter"), "nothing dropped, no counter");
    let instant = dumped.iter().find(|r| r["kind"] == "instant").unwrap();
    assert_eq!(instant["name"], format!("{}…", "é".repeat(59)));
    assert_eq!(
        instant["args"],
        json!({ "message": message, "level": "WARN", "location": "src/x.rs:9" }),
        "the full message, the level and the location"
    );
}

#[test]
fn an_event_without_a_message_keeps_its_call_sites_name_and_a_field_named_level_is_the_tools() {
    let fields = [Field { name: "level", value: Value::U64(3) }];
    let mut site = SITE;
    site.file = None;
    let dumped = written(&[Event::Instant { thread: 3, ts: 5_000, site, fields: &fields }], 0);
    let instant = dumped.iter().find(|r| r["kind"] == "instant").unwrap();
    assert_eq!(instant["name"], "event src/x.rs:9");
    assert_eq!(instant["args"], json!({ "level": 3 }), "no location without a file");
}

#[test]
fn fields_recorded_after_the_begin_are_annotations_of_the_end() {
    let created = [Field { name: "units", value: Value::U64(4) }];
    let all = [created[0], Field { name: "exit_code", value: Value::I64(0) }];
    let mut site = SITE;
    site.name = "run_compiler";
    let events = [
        Event::SpanBegin { thread: 3, ts: 2_000, site, fields: &created, thread_cpu_ns: None },
        Event::SpanEnd {
            thread: 3,
            ts: 8_000,
            begin_ts: 2_000,
            site,
            fields: &all,
            recorded: &all[1..],
            unclosed: false,
            cpu: None,
        },
    ];
    let dumped = written(&events, 0);
    let slice = dumped.iter().find(|r| r["kind"] == "slice").unwrap();
    assert_eq!(slice["args"], json!({ "units": 4, "exit_code": 0 }), "the checker merges begin and end");
    assert!(dumped.iter().all(|r| r["kind"] != "instant"), "nothing unclosed, no marker");
}
