//! The sink driven with hand-made event streams.

use serde_json::Value as Json;
use trace_core::{Level, Site};

use super::*;

const START_MS: u64 = 1_700_000_000_123;
const START_NS: u64 = 5_000_000_000;

fn start() -> Start<'static> {
    let mut start = Start::default();
    start.command = "build";
    start.stem = "build-1-2-0";
    start.pid = 4242;
    start.start_unix_ms = START_MS;
    start.start_ns = START_NS;
    start.filter = "info";
    start
}

fn site(name: &'static str) -> Site<'static> {
    Site::new(name, "demo::phase", Level::INFO, None, None)
}

fn begin(thread: Tid, ts: u64, name: &'static str) -> Event<'static> {
    Event::SpanBegin { thread, ts, site: site(name), fields: &[], thread_cpu_ns: None }
}

fn end(
    thread: Tid,
    begin_ts: u64,
    ts: u64,
    name: &'static str,
    fields: &'static [Field<'static>],
) -> Event<'static> {
    Event::SpanEnd {
        thread,
        ts,
        begin_ts,
        site: site(name),
        fields,
        recorded: &[],
        unclosed: false,
        cpu: None,
    }
}

fn finish_at(end_ns: u64) -> Finish<'static> {
    let mut end = Finish::default();
    end.end_ns = end_ns;
    end
}

/// Runs the sink over `events` and returns every line, parsed.
fn run(sink: &mut OtlpSink, events: &[Event<'_>], end_ns: u64) -> Vec<Json> {
    let mut out = Vec::new();
    sink.start(&start(), &mut out).unwrap();
    for e in events {
        sink.event(e, &mut out).unwrap();
    }
    sink.finish(&finish_at(end_ns), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.ends_with('\n'));
    for line in text.lines() {
        let read: Result<model::TracesData<'_>, _> = serde_json::from_str(line);
        assert!(read.is_ok(), "the model reads back what the sink wrote: {read:?}");
    }
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn spans(lines: &[Json]) -> Vec<Json> {
    lines
        .iter()
        .flat_map(|l| l["resourceSpans"][0]["scopeSpans"][0]["spans"].as_array().unwrap().clone())
        .collect()
}

fn by_name<'a>(spans: &'a [Json], name: &str) -> &'a Json {
    spans.iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("no span {name}"))
}

fn attr<'a>(obj: &'a Json, key: &str) -> Option<&'a Json> {
    obj["attributes"].as_array()?.iter().find(|a| a["key"] == key).map(|a| &a["value"])
}

#[test]
fn spans_nest_by_thread_and_other_threads_hang_under_the_root() {
    // thread 1:  command [0 ........................ 100]
    //              resolve [10 .. 40]
    // thread 2:           fetch_worker [20 ..... 60]
    //                       download [25 .. 30]
    static BYTES: [Field<'static>; 1] = [Field { name: "bytes", value: Value::U64(7) }];
    let t = |ns: u64| START_NS + ns;
    let events = [
        Event::ThreadName { thread: 1, name: "main" },
        begin(1, t(0), "command"),
        begin(1, t(10), "resolve"),
        Event::ThreadName { thread: 2, name: "fetch-0" },
        begin(2, t(20), "fetch_worker"),
        begin(2, t(25), "download"),
        end(2, t(25), t(30), "download", &BYTES),
        end(1, t(10), t(40), "resolve", &[]),
        end(2, t(20), t(60), "fetch_worker", &[]),
        end(1, t(0), t(100), "command", &[]),
    ];
    let mut sink = OtlpSink::new();
    let lines = run(&mut sink, &events, t(100));
    assert_eq!(lines.len(), 1);
    let spans = spans(&lines);
    assert_eq!(spans.len(), 4, "one span per slice, no synthetic root");
    let id = |n: &str| by_name(&spans, n)["spanId"].as_str().unwrap().to_string();
    let parent = |n: &str| by_name(&spans, n)["parentSpanId"].as_str().map(str::to_string);
    assert_eq!(parent("command"), None);
    assert_eq!(id("command"), json_hex(&sink.root_span_id()));
    assert_eq!(parent("resolve"), Some(id("command")));
    assert_eq!(parent("fetch_worker"), Some(id("command")), "a thread's outermost span is under the root");
    assert_eq!(parent("download"), Some(id("fetch_worker")));
    let trace = json_hex(&sink.context().trace_id);
    assert!(spans.iter().all(|s| s["traceId"] == trace.as_str()));
    let dl = by_name(&spans, "download");
    assert_eq!(attr(dl, "bytes").unwrap()["intValue"], "7");
    assert_eq!(attr(dl, "thread.name").unwrap()["stringValue"], "fetch-0");
    assert_eq!(attr(dl, "thread.id").unwrap()["intValue"], "2");
    let base = START_MS as u128 * 1_000_000;
    assert_eq!(dl["startTimeUnixNano"], (base + 25).to_string());
    assert_eq!(dl["endTimeUnixNano"], (base + 30).to_string());
    assert_eq!(dl["kind"], 1);
    assert_eq!(dl["status"]["code"], 0);
}

fn json_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn events_belong_to_the_enclosing_span_or_else_the_root() {
    static MSG: [Field<'static>; 2] = [
        Field { name: "message", value: Value::Str("linked") },
        Field { name: "units", value: Value::I64(3) },
    ];
    let t = |ns: u64| START_NS + ns;
    let events = [
        begin(1, t(0), "command"),
        begin(1, t(5), "link"),
        Event::Instant { thread: 1, ts: t(6), site: site("event demo.rs:1"), fields: &MSG },
        end(1, t(5), t(8), "link", &[]),
        // On a thread with nothing open: the root's.
        Event::Instant { thread: 9, ts: t(9), site: site("event demo.rs:2"), fields: &[] },
        end(1, t(0), t(10), "command", &[]),
    ];
    let spans = spans(&run(&mut OtlpSink::new(), &events, t(10)));
    let link = by_name(&spans, "link");
    let ev = &link["events"][0];
    assert_eq!(ev["name"], "linked", "named by its message");
    assert_eq!(ev["timeUnixNano"], (START_MS as u128 * 1_000_000 + 6).to_string());
    assert_eq!(attr(ev, "units").unwrap()["intValue"], "3");
    assert!(attr(ev, "message").is_none());
    let root = by_name(&spans, "command");
    assert_eq!(root["events"][0]["name"], "event demo.rs:2");
}

#[test]
fn lane_slices_are_children_of_the_root_even_before_it_begins() {
    static FIELDS: [Field<'static>; 1] = [Field { name: "outputs", value: Value::U64(2) }];
    let slice = LaneSlice {
        lane: "ninja",
        track: 1,
        begin_ns: START_NS + 3,
        end_ns: START_NS + 7,
        name: "a.o",
        fields: &FIELDS,
    };
    let events = [
        Event::Lane(slice),
        begin(1, START_NS + 1, "command"),
        end(1, START_NS + 1, START_NS + 9, "command", &[]),
    ];
    let mut sink = OtlpSink::new();
    let spans = spans(&run(&mut sink, &events, START_NS + 9));
    let a = by_name(&spans, "a.o");
    assert_eq!(a["parentSpanId"], json_hex(&sink.root_span_id()));
    assert_eq!(attr(a, "cabin_trace.lane").unwrap()["stringValue"], "ninja");
    assert_eq!(attr(a, "cabin_trace.track").unwrap()["intValue"], "1");
    assert_eq!(attr(a, "outputs").unwrap()["intValue"], "2");
}

#[test]
fn a_capture_without_spans_still_has_its_root_holding_the_events() {
    let events = [Event::Instant { thread: 1, ts: START_NS + 2, site: site("event x"), fields: &[] }];
    let mut sink = OtlpSink::new();
    let spans = spans(&run(&mut sink, &events, START_NS + 50));
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0]["name"], "build");
    assert_eq!(spans[0]["spanId"], json_hex(&sink.root_span_id()));
    assert_eq!(spans[0]["events"].as_array().unwrap().len(), 1);
}

#[test]
fn a_given_trace_context_is_used_and_its_parent_is_the_roots() {
    let ctx = TraceContext { trace_id: [0xab; 16], parent_span_id: Some([0x01; 8]) };
    let events = [begin(1, START_NS, "command"), end(1, START_NS, START_NS + 1, "command", &[])];
    let spans = spans(&run(&mut OtlpSink::new().with_context(ctx), &events, START_NS + 1));
    assert_eq!(spans[0]["traceId"], "ab".repeat(16));
    assert_eq!(spans[0]["parentSpanId"], "01".repeat(8));
}

#[test]
fn a_large_capture_is_split_into_lines_each_a_whole_traces_data() {
    let mut events = vec![begin(1, START_NS, "command")];
    for i in 0..20_000u64 {
        events.push(begin(1, START_NS + i, "resolve_package_with_a_long_name"));
        events.push(end(1, START_NS + i, START_NS + i + 1, "resolve_package_with_a_long_name", &[]));
    }
    events.push(end(1, START_NS, START_NS + 30_000, "command", &[]));
    let lines = run(&mut OtlpSink::new(), &events, START_NS + 30_000);
    assert!(lines.len() >= 2, "{} lines", lines.len());
    for l in &lines {
        let attrs = l["resourceSpans"][0]["resource"]["attributes"].as_array().unwrap();
        assert!(attrs.iter().any(|a| a["key"] == "service.name"), "each line carries the resource");
    }
    assert_eq!(spans(&lines).len(), 20_001);
}

#[test]
fn an_unmatched_end_is_written_under_the_root_rather_than_panicking() {
    let events = [end(3, START_NS, START_NS + 4, "stray", &[])];
    let mut sink = OtlpSink::new();
    let spans = spans(&run(&mut sink, &events, START_NS + 4));
    assert_eq!(by_name(&spans, "stray")["parentSpanId"], json_hex(&sink.root_span_id()));
}

/// Fails every write.
struct Broken;

impl Write for Broken {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::from_raw_os_error(libc::ENOSPC))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_write_error_is_returned_to_the_writer() {
    let mut sink = OtlpSink::new();
    sink.start(&start(), &mut Broken).unwrap();
    sink.event(&begin(1, START_NS, "command"), &mut Broken).unwrap();
    sink.event(&end(1, START_NS, START_NS + 1, "command", &[]), &mut Broken).unwrap();
    let e = sink.finish(&finish_at(START_NS + 1), &mut Broken).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
}

#[test]
fn the_resource_names_the_service_process_and_host() {
    let env =
        ResourceEnv { service_name: Some("cabin".into()), attributes: vec![("team".into(), "b".into())] };
    let events = [begin(1, START_NS, "command"), end(1, START_NS, START_NS + 1, "command", &[])];
    let lines = run(&mut OtlpSink::new().with_resource_env(env), &events, START_NS + 1);
    let res = &lines[0]["resourceSpans"][0]["resource"];
    assert_eq!(attr(res, "service.name").unwrap()["stringValue"], "cabin");
    assert_eq!(attr(res, "process.pid").unwrap()["intValue"], "4242");
    assert!(attr(res, "host.name").is_some());
    assert!(attr(res, "process.command").is_some());
    assert_eq!(attr(res, "team").unwrap()["stringValue"], "b");
    assert_eq!(lines[0]["resourceSpans"][0]["scopeSpans"][0]["scope"]["name"], SCOPE_NAME);
}

#[test]
fn a_span_still_open_at_the_end_is_written_and_marked_unclosed() {
    let events = [
        begin(1, START_NS, "command"),
        Event::SpanEnd {
            thread: 1,
            ts: START_NS + 9,
            begin_ts: START_NS,
            site: site("command"),
            fields: &[],
            recorded: &[],
            unclosed: true,
            cpu: None,
        },
    ];
    let spans = spans(&run(&mut OtlpSink::new(), &events, START_NS + 9));
    assert_eq!(attr(&spans[0], "cabin_trace.unclosed").unwrap()["boolValue"], true);
    assert_eq!(spans[0]["endTimeUnixNano"], (START_MS as u128 * 1_000_000 + 9).to_string());
}
