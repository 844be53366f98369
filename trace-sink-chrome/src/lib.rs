//! Writes a capture as Chrome trace-event JSON (`<stem>.trace.json`), the
//! format the Perfetto UI and speedscope open directly.
//!
//! # Overview
//!
//! The file is a JSON array with one event per line:
//!
//! - `M` metadata events name the process (the command) and each thread, and
//!   give the capture's family: `cabin_trace_id` (`args.trace_id`, 32 hex),
//!   and for a child `cabin_trace_parent_span_id` (`args.span_id`) and
//!   `cabin_trace_parent_stem` (`args.stem`);
//! - a span is one complete (`X`) event on its thread's lane, written when
//!   the span ends: `ts` is its begin, `dur` its length, for the spans
//!   `<P>_TRACE_CPU` selects `tts` and `tdur` the thread's CPU clock at its
//!   begin and the CPU time the thread spent inside it (microseconds, like
//!   `ts` and `dur`), and `args` every field it holds at its end (those given
//!   at creation merged with those recorded later), so that a viewer which
//!   keys frames by name and `args` (speedscope) sees one frame per span, not
//!   a begin and an end that differ;
//! - a span still open when the capture finished (or whose end was lost with
//!   dropped records) is a `B` event with no `E`, its `args` marked
//!   `"unclosed": true`: the Perfetto UI draws a begin without an end as a
//!   slice that did not end, which is the truth, where an `X` to the finish
//!   would claim an end the span never had;
//! - a span that ran in pieces (entered more than once, or on more than one
//!   thread) is also an async `b`/`e` pair, named after the span, with the
//!   span's target as `cat`, an `id` of its own (the pid in the bits above 24,
//!   so that two processes' ids differ) and the span's fields as the `b`'s
//!   `args`, from its first enter to its close (the finish, the `e` marked
//!   `"unclosed": true`, if it is still open); written at its close;
//! - a flow is an `s` event (category `cabin_trace`, named `spawn` or
//!   `follows_from`) at the moment of the link on the source's thread, which
//!   binds it to the slice open there, and an `f` with the same `id` 1 ns
//!   before the target's begin (so that a reader sorting by time meets it
//!   first), which binds it to the next slice to begin on that thread
//!   (with `"bp":"e"`, to the slice open there, when the target was already
//!   running); speedscope ignores both and the async pairs;
//! - a `tracing` event is a thread-scoped instant (`i`) named after its
//!   message (its first line, cut to [`NAME_CHARS`] characters with an
//!   ellipsis; see [`instant_name`]), with every field (the full `message`
//!   among them), its `level` and its source `location` (`file:line`) as
//!   `args`; an event without a message keeps its call site's name;
//! - an external lane (Ninja's actions, test executables) is a process of its
//!   own with one thread per sub-lane, its slices as `X` events;
//! - the process's samples (`<P>_TRACE_SAMPLE`) are two counters (`C`) of
//!   the process: [`MEMORY_COUNTER`] (series `bytes`, the resident set at
//!   each sample) and [`CPU_COUNTER`] (series `percent`, of one core, the
//!   CPU used from one sample to the next, placed at the first of the two);
//! - loss is said where a viewer looks: when records were dropped, a
//!   global instant `trace records dropped (N)` at the finish and a counter
//!   (`C`) `trace records dropped` whose one series, `count`, is 0 at the
//!   start and N at the finish (the Perfetto UI names a JSON counter after
//!   its event and series, `trace records dropped count`, as it names the
//!   other counters after their unit); when spans were left unclosed, a
//!   global instant `trace spans unclosed (N)`.
//!
//! Each event is written, as it comes, into one buffer that is handed to the
//! file in pieces of about 32 KiB, so the sink never holds the whole trace in
//! memory. Since a span is written at its end, a parent comes after its
//! children in the file; viewers order events by time. Timestamps are
//! microseconds of `CLOCK_MONOTONIC` with nanosecond digits; `pid` is the
//! real process id and `tid` the operating-system thread id.
//!
//! # Example
//!
//! ```
//! use trace_core::{Config, Session, Sink};
//! use trace_sink_chrome::ChromeSink;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let config = Config::from_lookup("DEMO", &["chrome"], |n| {
//!     (n == "DEMO_TRACE_DIR").then(|| dir.path().into())
//! })
//! .unwrap()
//! .unwrap();
//! let sinks: Vec<Box<dyn Sink>> = vec![Box::new(ChromeSink::new())];
//! let session = Session::start(&config, "build", sinks).unwrap();
//! session.in_scope(|| tracing::info_span!("compile", files = 3).in_scope(|| ()));
//! let report = session.finish();
//! let text = std::fs::read_to_string(&report.files[0].path).unwrap();
//! let events: serde_json::Value = serde_json::from_str(&text).unwrap();
//! let compile = events.as_array().unwrap().iter().find(|e| e["name"] == "compile").unwrap();
//! assert_eq!((&compile["ph"], &compile["args"]["files"]), (&"X".into(), &3.into()));
//! ```
//!
//! # Configuration
//!
//! None of its own: a tool writes this file when `chrome` is among the sinks
//! of `<P>_TRACE_FORMAT` (or the variable is unset).
//!
//! # What it does not do
//!
//! It never re-reads its output. Files from several processes are not meant
//! to be concatenated (use the Perfetto sink for that).

#![deny(missing_docs)]

mod json_writer;

use std::io::{self, Write};

use trace_core::{Event, Field, Finish, FlowKind, LaneSlice, ProcessSample, Sink, Site, Start, Tid, Value};

use crate::json_writer::JsonWriter;

/// The sink's name in `<P>_TRACE_FORMAT`.
pub const NAME: &str = "chrome";
/// The file name after the stem.
pub const SUFFIX: &str = "trace.json";

/// An instant's name holds at most this many characters of its message.
pub const NAME_CHARS: usize = 60;

/// The counter (`C`) of the process's resident memory, series `bytes`.
pub const MEMORY_COUNTER: &str = "process resident memory";
/// The counter (`C`) of the process's CPU usage, series `percent` (of one core).
pub const CPU_COUNTER: &str = "process CPU usage";

/// The category of the sink's own events.
const OWN_CATEGORY: &str = "cabin_trace";

/// The phases, as [`JsonWriter::begin_event`] writes them: each with what
/// goes with it.
const COMPLETE: &str = r#""X""#;
const BEGIN: &str = r#""B""#;
const ASYNC_BEGIN: &str = r#""b""#;
const ASYNC_END: &str = r#""e""#;
const THREAD_INSTANT: &str = r#""i","s":"t""#;
const GLOBAL_INSTANT: &str = r#""i","s":"g""#;
const COUNTER: &str = r#""C""#;
const METADATA: &str = r#""M""#;
/// A flow's source, bound to the slice open at its time.
const FLOW_OUT: &str = r#""s""#;
/// A flow's end, bound to the next slice to begin on its thread.
const FLOW_IN_NEXT: &str = r#""f""#;
/// A flow's end, bound to the slice open at its time.
const FLOW_IN_ENCLOSING: &str = r#""f","bp":"e""#;

/// The name of an instant whose message is `message`: its first line, cut
/// to [`NAME_CHARS`] characters on a character boundary, and whether
/// anything was cut (the name then ends with an ellipsis, which counts in
/// the [`NAME_CHARS`]). `None` for a message with an empty first line.
///
/// The Perfetto sink names its instants by the same rule.
///
/// ```
/// use trace_sink_chrome::instant_name;
///
/// assert_eq!(instant_name("resolved 3 packages"), Some(("resolved 3 packages", false)));
/// assert_eq!(instant_name("two\nlines"), Some(("two", true)));
/// let long = "é".repeat(70);
/// assert_eq!(instant_name(&long), Some((&long[..2 * 59], true)));
/// ```
pub fn instant_name(message: &str) -> Option<(&str, bool)> {
    trace_core::instant_name(message)
}

/// An external lane, drawn as a process of its own: its name, and the
/// sub-lanes (threads) named so far.
#[derive(Debug)]
struct Lane {
    name: String,
    tracks: Vec<u32>,
}

/// The Chrome trace-event JSON sink. See the crate docs for the format.
#[derive(Debug, Default)]
pub struct ChromeSink {
    pid: u64,
    /// The capture's start, where the dropped-records counter starts at 0.
    start_ns: u64,
    lanes: Vec<Lane>,
    /// Spans written as unclosed, for the marker at the finish.
    unclosed: u64,
    /// The previous process sample, for the CPU usage between it and the next.
    last_sample: Option<ProcessSample>,
    json: JsonWriter,
}

impl ChromeSink {
    /// A new sink.
    pub fn new() -> Self {
        ChromeSink::default()
    }

    /// A metadata (`M`) event of the process or one of its threads.
    fn metadata(&mut self, what: &str, (pid, tid): (u64, Tid), key: &str, value: Value<'_>) {
        self.json.begin_event(&[what], None, METADATA, pid, tid);
        self.json.arg(key, value);
        self.json.end_event();
    }

    /// An id for the capture's `n`-th async span or flow: the process id
    /// above, so that the ids of two processes' files differ when a trace
    /// joins them, and below 2^53, which a JSON reader keeps exactly.
    fn scoped_id(&self, n: u64) -> u64 {
        (self.pid << 24) | (n & ((1 << 24) - 1))
    }

    /// The end of a span: a complete (`X`) event, or for a span that did not
    /// end by itself a begin (`B`) marked unclosed.
    fn span_end(&mut self, end: &Event<'_>) {
        let Event::SpanEnd { thread, ts, begin_ts, site, fields, unclosed, cpu, .. } = *end else { return };
        let j = &mut self.json;
        if unclosed {
            self.unclosed += 1;
            j.begin_event(&[site.name], Some(site.target), BEGIN, self.pid, thread);
            j.time("ts", begin_ts);
            args(j, fields);
            j.arg("unclosed", Value::Bool(true));
        } else {
            j.begin_event(&[site.name], Some(site.target), COMPLETE, self.pid, thread);
            j.time("ts", begin_ts);
            j.time("dur", ts.saturating_sub(begin_ts));
            if let Some(cpu) = cpu {
                j.time("tts", cpu.begin_ns);
                j.time("tdur", cpu.ns());
            }
            args(j, fields);
        }
        j.end_event();
    }

    /// A `tracing` event: a thread-scoped instant named after its message,
    /// its site's level and location among its `args` (unless a field of the
    /// same name, set by the tool, takes their place).
    fn instant(&mut self, thread: Tid, ts: u64, site: &Site<'_>, fields: &[Field<'_>]) {
        let message = fields.iter().find(|f| f.name == "message").and_then(|f| match f.value {
            Value::Str(message) => instant_name(message),
            _ => None,
        });
        let name = match message {
            Some((line, true)) => [line, "…"],
            Some((line, false)) => [line, ""],
            None => [site.name, ""],
        };
        let j = &mut self.json;
        j.begin_event(&name, Some(site.target), THREAD_INSTANT, self.pid, thread);
        j.time("ts", ts);
        args(j, fields);
        let has = |key: &str| fields.iter().any(|f| f.name == key);
        if !has("level") {
            j.arg_text("level", &[site.level.as_str()]);
        }
        if let (Some(file), false) = (site.file, has("location")) {
            match site.line {
                Some(line) => j.arg_text("location", &[file, ":", itoa::Buffer::new().format(line)]),
                None => j.arg_text("location", &[file]),
            }
        }
        j.end_event();
    }

    /// A span that ran in pieces: an async `b`/`e` pair with an id of its
    /// own, the process's ([`JsonWriter::local_id`]), named after the span,
    /// its fields as the begin's `args`.
    fn async_span(&mut self, span: &Event<'_>) {
        let Event::AsyncSpan { id, thread, begin_ts, end_ts, site, fields, unclosed, .. } = *span else {
            return;
        };
        let (pid, id) = (self.pid, self.scoped_id(id));
        let j = &mut self.json;
        j.begin_event(&[site.name], Some(site.target), ASYNC_BEGIN, pid, thread);
        j.time("ts", begin_ts);
        j.local_id(id);
        args(j, fields);
        j.end_event();
        j.begin_event(&[site.name], Some(site.target), ASYNC_END, pid, thread);
        j.time("ts", end_ts.max(begin_ts));
        j.local_id(id);
        if unclosed {
            j.arg("unclosed", Value::Bool(true));
        }
        j.end_event();
    }

    /// One end of a flow (`ph` says which, [`FLOW_OUT`] or a `FLOW_IN_`).
    fn flow(&mut self, ph: &str, flow: u64, kind: FlowKind, thread: Tid, ts: u64) {
        let id = self.scoped_id(flow);
        let j = &mut self.json;
        j.begin_event(&[kind.as_str()], Some(OWN_CATEGORY), ph, self.pid, thread);
        j.time("ts", ts);
        j.uint("id", id);
        j.end_event();
    }

    /// A slice of an external lane, on its own process and thread, named
    /// by metadata the first time each is met.
    fn lane_slice(&mut self, slice: &LaneSlice<'_>) {
        let index = match self.lanes.iter().position(|lane| lane.name == slice.lane) {
            Some(i) => i,
            None => {
                self.lanes.push(Lane { name: slice.lane.to_string(), tracks: Vec::new() });
                let sort_index = self.lanes.len() as u64;
                let pid = LaneSlice::lane_pid(self.pid as u32, self.lanes.len() - 1);
                self.metadata("process_name", (pid, 0), "name", Value::Str(slice.lane));
                self.metadata("process_sort_index", (pid, 0), "sort_index", Value::U64(sort_index));
                self.lanes.len() - 1
            }
        };
        let pid = LaneSlice::lane_pid(self.pid as u32, index);
        let tid = slice.sub_lane_tid();
        if !self.lanes[index].tracks.contains(&slice.track) {
            self.lanes[index].tracks.push(slice.track);
            let name = slice.sub_lane_name();
            self.metadata("thread_name", (pid, tid), "name", Value::Str(&name));
        }
        let j = &mut self.json;
        j.begin_event(&[slice.name], Some(slice.lane), COMPLETE, pid, tid);
        j.time("ts", slice.begin_ns);
        j.time("dur", slice.end_ns.saturating_sub(slice.begin_ns));
        args(j, slice.fields);
        j.end_event();
    }

    /// A counter (`C`) of the process, with one series.
    fn counter(&mut self, name: &str, ts: u64, series: &str, value: Value<'_>) {
        self.json.begin_event(&[name], Some(OWN_CATEGORY), COUNTER, self.pid, 0);
        self.json.time("ts", ts);
        self.json.arg(series, value);
        self.json.end_event();
    }

    /// A process sample: the resident memory at its time, and the CPU usage
    /// since the previous sample, placed at the previous sample's time (a
    /// counter holds its value until the next one).
    fn process_sample(&mut self, sample: &ProcessSample) {
        if let Some(bytes) = sample.resident_bytes {
            self.counter(MEMORY_COUNTER, sample.ts, "bytes", Value::U64(bytes));
        }
        if let Some(last) = self.last_sample {
            if let Some(percent) = sample.cpu_percent_since(&last) {
                // Already rounded to tenths of a percent.
                self.counter(CPU_COUNTER, last.ts, "percent", Value::F64(percent));
            }
        }
        self.last_sample = Some(*sample);
    }

    /// A global instant at `ts` named `what (count)`, with the count as `key`.
    fn loss_marker(&mut self, ts: u64, what: &str, key: &str, count: u64) {
        let j = &mut self.json;
        j.begin_event(
            &[what, " (", itoa::Buffer::new().format(count), ")"],
            Some(OWN_CATEGORY),
            GLOBAL_INSTANT,
            self.pid,
            0,
        );
        j.time("ts", ts);
        j.arg(key, Value::U64(count));
        j.end_event();
    }
}

/// Appends each field as an `args` entry.
fn args(j: &mut JsonWriter, fields: &[Field<'_>]) {
    for f in fields {
        j.arg(f.name, f.value);
    }
}

impl Sink for ChromeSink {
    fn name(&self) -> &'static str {
        NAME
    }

    fn suffix(&self) -> &'static str {
        SUFFIX
    }

    fn start(&mut self, start: &Start<'_>, out: &mut dyn Write) -> io::Result<()> {
        self.pid = u64::from(start.pid);
        self.start_ns = start.start_ns;
        self.json.begin_array();
        let process = (self.pid, 0);
        self.metadata("process_name", process, "name", Value::Str(start.command));
        self.metadata("process_sort_index", process, "sort_index", Value::U64(0));
        if let Some(family) = start.family {
            self.metadata("cabin_trace_id", process, "trace_id", Value::Str(&family.trace_id_hex()));
            if let Some(span) = family.parent_span_id_hex() {
                self.metadata("cabin_trace_parent_span_id", process, "span_id", Value::Str(&span));
            }
            if let Some(stem) = &family.parent_stem {
                self.metadata("cabin_trace_parent_stem", process, "stem", Value::Str(stem));
            }
        }
        self.json.write_some(out)
    }

    fn event(&mut self, event: &Event<'_>, out: &mut dyn Write) -> io::Result<()> {
        match *event {
            Event::ThreadName { thread, name, .. } => {
                self.metadata("thread_name", (self.pid, thread), "name", Value::Str(name))
            }
            Event::SpanEnd { .. } => self.span_end(event),
            Event::Instant { thread, ts, ref site, fields, .. } => self.instant(thread, ts, site, fields),
            Event::AsyncSpan { .. } => self.async_span(event),
            Event::FlowOut { flow, kind, thread, ts, .. } => self.flow(FLOW_OUT, flow, kind, thread, ts),
            // Just before the target's begin, so that a reader that sorts by
            // time sees it first, whatever it does with equal times.
            Event::FlowIn { flow, kind, thread, ts, at_begin: true, .. } => {
                self.flow(FLOW_IN_NEXT, flow, kind, thread, ts.saturating_sub(1))
            }
            Event::FlowIn { flow, kind, thread, ts, at_begin: false, .. } => {
                self.flow(FLOW_IN_ENCLOSING, flow, kind, thread, ts)
            }
            Event::Lane(ref slice) => self.lane_slice(slice),
            Event::ProcessSample(ref sample) => self.process_sample(sample),
            // A span is written whole at its end (which carries its begin's
            // time and fields); a lane's report is the summary's.
            _ => return Ok(()),
        }
        self.json.write_some(out)
    }

    fn finish(&mut self, end: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
        if end.dropped_records > 0 {
            self.loss_marker(end.end_ns, "trace records dropped", "dropped_records", end.dropped_records);
            self.counter("trace records dropped", self.start_ns, "count", Value::U64(0));
            self.counter("trace records dropped", end.end_ns, "count", Value::U64(end.dropped_records));
        }
        if self.unclosed > 0 {
            self.loss_marker(end.end_ns, "trace spans unclosed", "unclosed_spans", self.unclosed);
        }
        self.json.end_array();
        self.json.write_all(out)
    }
}
#[cfg(test)]
mod tests {
    use serde_json::{json, Value as Json};
    use trace_core::{FileStatus, Level};

    use super::*;

    #[test]
    fn an_instant_is_named_after_the_first_line_of_its_message_cut_to_sixty_characters() {
        let (sixty, sixty_one) = ("é".repeat(60), "é".repeat(61));
        let cases: [(&str, Option<(&str, bool)>); 9] = [
            ("resolved 3 packages", Some(("resolved 3 packages", false))),
            ("two\nlines", Some(("two", true))),
            ("two\r\nlines", Some(("two", true))),
            ("ends with a line end\n", Some(("ends with a line end", true))),
            ("\nthe first line empty", None),
            ("", None),
            (&sixty, Some((&sixty, false))),
            // Cut: 59 characters and the ellipsis.
            (&sixty_one, Some((&sixty[..2 * 59], true))),
            ("🦀\n", Some(("🦀", true))),
        ];
        for (message, name) in cases {
            assert_eq!(instant_name(message), name, "{message:?}");
        }
    }

    fn run(events: &[Event<'_>], dropped_records: u64) -> Vec<Json> {
        let mut sink = ChromeSink::new();
        let mut out = Vec::new();
        let mut start = Start::default();
        start.command = "build";
        start.stem = "s";
        start.pid = 42;
        start.start_ns = 1_000;
        start.filter = "info";
        sink.start(&start, &mut out).unwrap();
        for e in events {
            sink.event(e, &mut out).unwrap();
        }
        let files: Vec<FileStatus> = Vec::new();
        let mut end = Finish::default();
        end.end_ns = 9_000;
        end.dropped_records = dropped_records;
        end.files = &files;
        sink.finish(&end, &mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    const SITE: Site<'static> = Site::new("compile", "cabin::build", Level::INFO, Some("src/b.rs"), Some(7));

    #[test]
    fn a_span_with_thread_cpu_time_gives_it_as_tts_and_tdur_in_microseconds() {
        let cpu = trace_core::ThreadCpu { begin_ns: 7_000_500, end_ns: 9_500_500 };
        let events = [
            Event::SpanBegin {
                thread: 7,
                ts: 2_000,
                site: SITE,
                fields: &[],
                thread_cpu_ns: Some(7_000_500),
            },
            Event::SpanEnd {
                thread: 7,
                ts: 5_000_000,
                begin_ts: 2_000,
                site: SITE,
                fields: &[],
                recorded: &[],
                unclosed: false,
                cpu: Some(cpu),
            },
        ];
        let out = run(&events, 0);
        let span = out.iter().find(|e| e["name"] == "compile").unwrap();
        assert_eq!((&span["tts"], &span["tdur"]), (&json!(7000.5), &json!(2500.0)), "{span}");
        let without = [Event::SpanEnd {
            thread: 7,
            ts: 5_000,
            begin_ts: 2_000,
            site: SITE,
            fields: &[],
            recorded: &[],
            unclosed: false,
            cpu: None,
        }];
        let out = run(&without, 0);
        let span = out.iter().find(|e| e["name"] == "compile").unwrap();
        assert!(span.get("tts").is_none() && span.get("tdur").is_none(), "{span}");
    }

    #[test]
    fn a_span_is_one_complete_event_written_at_its_end_with_every_field_in_its_args() {
        let created = [Field { name: "unit", value: Value::Str("a.c") }];
        let all = [created[0], Field { name: "exit_code", value: Value::I64(0) }];
        let events = [
            Event::SpanBegin { thread: 7, ts: 2_000, site: SITE, fields: &created, thread_cpu_ns: None },
            Event::SpanEnd {
                thread: 7,
                ts: 5_500,
                begin_ts: 2_000,
                site: SITE,
                fields: &all,
                recorded: &all[1..],
                unclosed: false,
                cpu: None,
            },
        ];
        let out = run(&events, 0);
        let spans: Vec<&Json> = out.iter().filter(|e| e["name"] == "compile").collect();
        assert_eq!(spans.len(), 1, "{out:?}");
        assert_eq!(
            *spans[0],
            json!({"name": "compile", "cat": "cabin::build", "ph": "X", "pid": 42, "tid": 7, "ts": 2.0,
                   "dur": 3.5, "args": {"unit": "a.c", "exit_code": 0}})
        );
        assert!(out.iter().all(|e| e["ph"] != "i"), "no loss, no marker: {out:?}");
    }

    #[test]
    fn a_span_left_open_is_a_begin_marked_unclosed_and_counted_at_the_finish() {
        let events = [Event::SpanEnd {
            thread: 7,
            ts: 9_000,
            begin_ts: 2_000,
            site: SITE,
            fields: &[],
            recorded: &[],
            unclosed: true,
            cpu: None,
        }];
        let out = run(&events, 0);
        let span = out.iter().find(|e| e["name"] == "compile").unwrap();
        assert_eq!((&span["ph"], &span["args"]), (&json!("B"), &json!({"unclosed": true})));
        let marker = out.iter().find(|e| e["ph"] == "i").unwrap();
        assert_eq!(marker["name"], "trace spans unclosed (1)");
        assert_eq!((&marker["s"], &marker["args"]["unclosed_spans"]), (&json!("g"), &json!(1)));
    }

    #[test]
    fn an_instant_is_named_after_its_message_with_level_and_location_in_its_args() {
        let long = format!("fetched {} and more", "x".repeat(80));
        let fields =
            [Field { name: "message", value: Value::Str(&long) }, Field { name: "n", value: Value::U64(3) }];
        let out = run(&[Event::Instant { thread: 7, ts: 3_000, site: SITE, fields: &fields }], 0);
        let instant = out.iter().find(|e| e["ph"] == "i").unwrap();
        let name = instant["name"].as_str().unwrap();
        assert_eq!(name.chars().count(), NAME_CHARS);
        assert!(name.starts_with("fetched xxx") && name.ends_with('…'), "{name}");
        assert_eq!(
            instant["args"],
            json!({"message": long, "n": 3, "level": "INFO", "location": "src/b.rs:7"})
        );
    }

    #[test]
    fn dropped_records_are_a_global_instant_and_a_counter_that_rises_to_their_count() {
        let out = run(&[], 12);
        let marker = out.iter().find(|e| e["ph"] == "i").unwrap();
        assert_eq!(marker["name"], "trace records dropped (12)");
        assert_eq!(
            (&marker["s"], &marker["ts"], &marker["args"]),
            (&json!("g"), &json!(9.0), &json!({"dropped_records": 12}))
        );
        let samples: Vec<(f64, u64)> = out
            .iter()
            .filter(|e| e["ph"] == "C")
            .map(|e| (e["ts"].as_f64().unwrap(), e["args"]["count"].as_u64().unwrap()))
            .collect();
        assert_eq!(samples, [(1.0, 0), (9.0, 12)]);
        // The Perfetto UI names a counter track after the event and the series.
        assert!(out.iter().filter(|e| e["ph"] == "C").all(|e| e["name"] == "trace records dropped"));
        assert!(out.iter().all(|e| e["ph"] != "M" || e["name"] != "trace_dropped_records"));
    }

    #[test]
    fn process_samples_are_a_memory_counter_and_a_cpu_counter_placed_at_the_earlier_sample() {
        let sample = |ts, cpu_ns| ProcessSample { ts, resident_bytes: Some(ts * 10), cpu_ns: Some(cpu_ns) };
        // 1.5 ms of CPU in 2 ms, then 0.25 ms in 3 ms.
        let out = run(
            &[
                Event::ProcessSample(sample(2_000_000, 0)),
                Event::ProcessSample(sample(4_000_000, 1_500_000)),
                Event::ProcessSample(sample(7_000_000, 1_750_000)),
            ],
            0,
        );
        let series = |name: &str, key: &str| -> Vec<(f64, f64)> {
            out.iter()
                .filter(|e| e["ph"] == "C" && e["name"] == name)
                .map(|e| (e["ts"].as_f64().unwrap(), e["args"][key].as_f64().unwrap()))
                .collect()
        };
        assert_eq!(series(MEMORY_COUNTER, "bytes"), [(2_000.0, 2e7), (4_000.0, 4e7), (7_000.0, 7e7)]);
        assert_eq!(series(CPU_COUNTER, "percent"), [(2_000.0, 75.0), (4_000.0, 8.3)]);
    }

    #[test]
    fn a_span_in_pieces_is_an_async_pair_and_a_flow_an_s_and_an_f_with_one_id() {
        let fields = [Field { name: "n", value: Value::U64(3) }];
        let (spawn, follows) = (trace_core::FlowKind::Spawn, trace_core::FlowKind::FollowsFrom);
        let out = run(
            &[
                Event::AsyncSpan {
                    id: 1,
                    thread: 7,
                    begin_ts: 2_000,
                    end_ts: 5_000,
                    site: SITE,
                    fields: &fields,
                    unclosed: false,
                },
                Event::AsyncSpan {
                    id: 2,
                    thread: 8,
                    begin_ts: 3_000,
                    end_ts: 9_000,
                    site: SITE,
                    fields: &[],
                    unclosed: true,
                },
                Event::FlowOut { flow: 1, kind: spawn, thread: 7, ts: 2_500 },
                Event::FlowIn { flow: 1, kind: spawn, thread: 8, ts: 2_600, at_begin: true },
                Event::FlowOut { flow: 2, kind: follows, thread: 7, ts: 2_700 },
                Event::FlowIn { flow: 2, kind: follows, thread: 8, ts: 2_800, at_begin: false },
            ],
            0,
        );
        let timed: Vec<&Json> = out.iter().filter(|e| e["ph"] != "M").collect();
        let id = |n: u64| json!((42u64 << 24) | n);
        let local = |n: u64| format!("{:#x}", (42u64 << 24) | n);
        let asyncs = [
            json!({"name": "compile", "cat": "cabin::build", "ph": "b", "pid": 42, "tid": 7, "ts": 2.0, "id2": {"local": local(1)}, "args": {"n": 3}}),
            json!({"name": "compile", "cat": "cabin::build", "ph": "e", "pid": 42, "tid": 7, "ts": 5.0, "id2": {"local": local(1)}}),
            json!({"name": "compile", "cat": "cabin::build", "ph": "b", "pid": 42, "tid": 8, "ts": 3.0, "id2": {"local": local(2)}}),
            json!({"name": "compile", "cat": "cabin::build", "ph": "e", "pid": 42, "tid": 8, "ts": 9.0, "id2": {"local": local(2)}, "args": {"unclosed": true}}),
        ];
        assert_eq!(timed[..4], asyncs.iter().collect::<Vec<_>>()[..]);
        let flows = [
            json!({"name": "spawn", "cat": "cabin_trace", "ph": "s", "pid": 42, "tid": 7, "ts": 2.5, "id": id(1)}),
            json!({"name": "spawn", "cat": "cabin_trace", "ph": "f", "pid": 42, "tid": 8, "ts": 2.599, "id": id(1)}),
            json!({"name": "follows_from", "cat": "cabin_trace", "ph": "s", "pid": 42, "tid": 7, "ts": 2.7, "id": id(2)}),
            json!({"name": "follows_from", "cat": "cabin_trace", "ph": "f", "bp": "e", "pid": 42, "tid": 8, "ts": 2.8, "id": id(2)}),
        ];
        assert_eq!(timed[4..8], flows.iter().collect::<Vec<_>>()[..]);
    }
}
