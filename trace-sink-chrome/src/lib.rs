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
//!   `ts` and `dur`), and `args` every
//!   field it holds at its end (those given at creation merged with those
//!   recorded later), so that a viewer which keys frames by name and `args`
//!   (speedscope) sees one frame per span, not a begin and an end that differ;
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
//!   message (its first line, cut to 60 characters with an ellipsis), with
//!   every field (the full `message` among them), its `level` and its source
//!   `location` (`file:line`) as `args`; an event without a message keeps its
//!   call site's name;
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
//!   other counters after their unit); when spans
//!   were left unclosed, a global instant `trace spans unclosed (N)`.
//!
//! Events are encoded into one buffer and handed to the file in pieces of
//! about 32 KiB, so the sink never holds the whole trace in memory; a span
//! that ended by itself, the most common event, is usually written in place
//! at the buffer's end, each piece a copy of a fixed length (464 to 298
//! instructions a span in the `spans` benchmark; see `spans.rs`). What
//! repeats from event to event is encoded once and reused while its text
//! stays the same: for a span that ended, everything before its time's last
//! digits (name, category, phase, pid, tid and the time's whole
//! milliseconds) for its call site and thread, and the run of its fields'
//! keys; for an instant, likewise written in place, everything before its
//! time's last digits for its call site and thread, its name and message's
//! value for the message they were made from, the run of its fields' keys
//! and what follows them (its site's `"level"` and `"location"`), so that
//! per instant only the numbers are encoded and the message compared (an
//! instant with a message and two integer fields cost the writer 2,083
//! instructions in this sink at first, 1,440 with its target's and site's
//! pieces rendered once, 460 in place; see `instants.rs`); for other events
//! a call site's `"name"`, `"cat"` and `"ph"`, each field name's key, a
//! time's whole seconds. Since a
//! span is written at its end, a parent comes after its children in the
//! file; viewers order events by time. Timestamps are microseconds of
//! `CLOCK_MONOTONIC` with nanosecond digits; `pid` is the real process id and
//! `tid` the operating-system thread id.
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
//! It never re-reads its output. Files from
//! several processes are not meant to be concatenated (use the Perfetto sink
//! for that).

#![deny(missing_docs)]

mod instants;
mod json;
mod pieces;
mod rendered;
mod room;
mod spans;
mod stamp;

use std::io::{self, Write};

use trace_core::{Event, Field, Finish, LaneSlice, Sink, Site, Start, Value};

use crate::instants::InstantLines;
use crate::json::{head, micros, string_then, uint, Args, Events};
use crate::rendered::Rendered;
use crate::spans::SpanLines;

/// The sink's name in `<P>_TRACE_FORMAT`.
pub const NAME: &str = "chrome";
/// The file name after the stem.
pub const SUFFIX: &str = "trace.json";

/// An instant's name holds at most this many characters of its message.
pub const NAME_CHARS: usize = trace_core::INSTANT_NAME_CHARS;

/// The category of the sink's own events.
const OWN_CATEGORY: &str = "cabin_trace";

/// The counter (`C`) of the process's resident memory, series `bytes`.
pub const MEMORY_COUNTER: &str = "process resident memory";
/// The counter (`C`) of the process's CPU usage, series `percent` (of one core).
pub const CPU_COUNTER: &str = "process CPU usage";

/// The name of an instant whose message is `message`: its first line, cut
/// to [`NAME_CHARS`] characters on a character boundary, and whether
/// anything was cut (the name then ends with an ellipsis, which counts in
/// the [`NAME_CHARS`]). `None` for a message with an empty first line.
///
/// The rule is trace-core's ([`trace_core::instant_name`]), which every sink
/// follows.
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

/// A number for each level, below 8.
fn level_index(level: trace_core::Level) -> u8 {
    match level {
        trace_core::Level::TRACE => 0,
        trace_core::Level::DEBUG => 1,
        trace_core::Level::INFO => 2,
        trace_core::Level::WARN => 3,
        _ => 4,
    }
}

/// The name of an instant at `site` whose message is `message` (the value
/// of its first field named `message`, if that is a string), and what
/// follows it inside its quotes (an ellipsis when it was cut).
fn name_of<'a>(site: &Site<'a>, message: Option<&'a str>) -> (&'a str, &'static [u8]) {
    match message.and_then(instant_name) {
        Some((name, true)) => (name, "…".as_bytes()),
        Some((name, false)) => (name, b""),
        None => (site.name, b""),
    }
}

/// Appends what follows an instant's name: its target as `"cat"`, and its phase.
fn after_instant_name(b: &mut Vec<u8>, target: &str) {
    b.extend_from_slice(br#","cat":"#);
    json::string(b, target);
    b.extend_from_slice(br#","ph":"i","s":"t""#);
}

/// Whether an instant at `site` with `fields` gets its site's `"level"`,
/// and its `"location"` (a field of the same name, set by the tool, is not
/// shadowed).
fn site_shadows(site: &Site<'_>, fields: &[Field<'_>]) -> (bool, bool) {
    (field(fields, "level").is_none(), site.file.is_some() && field(fields, "location").is_none())
}

/// Appends the `"level"` (`level_text`) and `"location"` (`file`, then
/// `line`, `:N` or nothing) entries of an instant, those that `(level,
/// location)` ask for, separated by a comma.
fn level_and_location(
    b: &mut Vec<u8>,
    level_text: &str,
    (file, line): (&str, &[u8]),
    (level, location): (bool, bool),
) {
    if level {
        b.extend_from_slice(br#""level":"#);
        json::string(b, level_text);
    }
    if location {
        if level {
            b.push(b',');
        }
        b.extend_from_slice(br#""location":"#);
        string_then(b, file, line);
    }
}

/// Appends the `"level"` and `"location"` entries of an instant at `site`
/// with `fields`, as the general path writes them.
fn site_entries(b: &mut Vec<u8>, site: &Site<'_>, fields: &[Field<'_>]) {
    let mut line = Vec::new();
    if let Some(n) = site.line {
        line.push(b':');
        uint(&mut line, u64::from(n));
    }
    let file = site.file.unwrap_or_default();
    level_and_location(b, site.level.as_str(), (file, &line), site_shadows(site, fields));
}

/// The field of `fields` named `name`, if any.
fn field<'f, 'a>(fields: &'f [Field<'a>], name: &str) -> Option<&'f Field<'a>> {
    fields.iter().find(|f| f.name == name)
}

/// The Chrome trace-event JSON sink. See the crate docs for the format.
#[derive(Debug, Default)]
pub struct ChromeSink {
    pid: u32,
    /// The capture's start, where the dropped-records counter starts at 0.
    start_ns: u64,
    lanes: Vec<(String, Vec<u32>)>,
    /// Spans written as unclosed, for the marker at the finish.
    unclosed: u64,
    /// The previous process sample, for the CPU usage between it and the next.
    last_sample: Option<trace_core::ProcessSample>,
    out: Events,
    /// The `:line` after a location's file, reused.
    line: Vec<u8>,
    /// Spans' `"name":…,"cat":…,"ph":…`, by call site.
    heads: Rendered,
    /// Fields' `"key":`, by name.
    keys: Rendered,
    /// Instants' `"level":…,"location":…`, by file, line, level and which
    /// of the two the instant's own fields leave to the site.
    site_entries: Rendered,
    /// The pieces of spans that ended by themselves, by call site and thread.
    spans: SpanLines,
    /// The pieces of instants, by call site and thread.
    instants: InstantLines,
}

impl ChromeSink {
    /// A new sink.
    pub fn new() -> Self {
        ChromeSink::default()
    }

    fn pid(&self) -> u64 {
        u64::from(self.pid)
    }

    /// The pid and tid of a lane's sub-lane; encodes the metadata naming them
    /// the first time.
    fn lane_ids(&mut self, lane: &LaneSlice<'_>) -> (u64, u64) {
        let index = match self.lanes.iter().position(|(n, _)| n == lane.lane) {
            Some(i) => i,
            None => {
                self.lanes.push((lane.lane.to_string(), Vec::new()));
                let i = self.lanes.len() - 1;
                let pid = LaneSlice::lane_pid(self.pid, i);
                self.out.metadata("process_name", (pid, 0), "name", Some(lane.lane), 0);
                self.out.metadata("process_sort_index", (pid, 0), "sort_index", None, i as u64 + 1);
                i
            }
        };
        let pid = LaneSlice::lane_pid(self.pid, index);
        let tid = lane.sub_lane_tid();
        if !self.lanes[index].1.contains(&lane.track) {
            self.lanes[index].1.push(lane.track);
            let name = lane.sub_lane_name();
            self.out.metadata("thread_name", (pid, tid), "name", Some(&name), 0);
        }
        (pid, tid)
    }

    /// A `tracing` event: an instant named after its message.
    fn instant(&mut self, thread: u64, ts: u64, site: Site<'_>, fields: &[Field<'_>]) {
        let pid = self.pid();
        let message = match field(fields, "message") {
            Some(Field { value: Value::Str(m), .. }) => Some(*m),
            _ => None,
        };
        let name = name_of(&site, message);
        let fixed = site.has_static_text();
        // What follows the name, per target; then the site's level and
        // location, per site: each rendered once, not escaped per event.
        let after_name =
            self.heads.get([site.target, ""], 1, fixed, |b, [cat, _]| after_instant_name(b, cat));
        let b = self.out.timed_then(name, after_name, (pid, thread), ts);
        let mut args = Args::new(b);
        args.fields(fields, &mut self.keys, fixed);
        // A field of the same name, set by the tool, is not shadowed.
        let (level, location) = site_shadows(&site, fields);
        if level || location {
            self.line.clear();
            if let Some(line) = site.line {
                self.line.push(b':');
                uint(&mut self.line, u64::from(line));
            }
            let line = std::str::from_utf8(&self.line).unwrap_or_default();
            let form = level_index(site.level) | u8::from(level) << 3 | u8::from(location) << 4;
            let file = site.file.unwrap_or_default();
            let entries = self.site_entries.get([file, line], form, false, |b, [file, line]| {
                level_and_location(b, site.level.as_str(), (file, line.as_bytes()), (level, location));
            });
            args.entries(entries);
        }
        args.close();
        self.out.close();
    }

    /// A global instant at `ts` named `what (count)`, with the count as `key`.
    fn marker(&mut self, ts: u64, what: &str, key: &str, count: u64) {
        let name = format!("{what} ({count})");
        let pid = self.pid();
        let b = self.out.timed((&name, b""), Some(OWN_CATEGORY), br#""i","s":"g""#, (pid, 0), ts);
        let mut args = Args::new(b);
        uint(args.key(key), count);
        args.close();
        self.out.close();
    }

    /// A process sample: the resident memory at its time, and the CPU usage
    /// since the previous sample, placed at the previous sample's time (a
    /// counter holds its value until the next one).
    fn process_sample(&mut self, sample: &trace_core::ProcessSample) {
        let pid = self.pid();
        if let Some(bytes) = sample.resident_bytes {
            let b = self.out.timed((MEMORY_COUNTER, b""), Some(OWN_CATEGORY), br#""C""#, (pid, 0), sample.ts);
            let mut args = Args::new(b);
            uint(args.key("bytes"), bytes);
            args.close();
            self.out.close();
        }
        if let Some((last, percent)) =
            self.last_sample.and_then(|last| Some((last, sample.cpu_percent_since(&last)?)))
        {
            let b = self.out.timed((CPU_COUNTER, b""), Some(OWN_CATEGORY), br#""C""#, (pid, 0), last.ts);
            let mut args = Args::new(b);
            // Already rounded to tenths of a percent.
            let tenths = (percent * 10.0).round() as u64;
            let key = args.key("percent");
            uint(key, tenths / 10);
            key.push(b'.');
            uint(key, tenths % 10);
            args.close();
            self.out.close();
        }
        self.last_sample = Some(*sample);
    }

    /// One sample of the dropped-records counter.
    fn dropped_sample(&mut self, ts: u64, count: u64) {
        let pid = self.pid();
        let b = self.out.timed(("trace records dropped", b""), Some(OWN_CATEGORY), br#""C""#, (pid, 0), ts);
        let mut args = Args::new(b);
        uint(args.key("count"), count);
        args.close();
        self.out.close();
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
        self.pid = start.pid;
        self.start_ns = start.start_ns;
        self.out.begin();
        let pid = self.pid();
        self.out.metadata("process_name", (pid, 0), "name", Some(start.command), 0);
        self.out.metadata("process_sort_index", (pid, 0), "sort_index", None, 0);
        if let Some(family) = start.family {
            self.out.metadata("cabin_trace_id", (pid, 0), "trace_id", Some(&family.trace_id_hex()), 0);
            if let Some(span) = family.parent_span_id_hex() {
                self.out.metadata("cabin_trace_parent_span_id", (pid, 0), "span_id", Some(&span), 0);
            }
            if let Some(stem) = &family.parent_stem {
                self.out.metadata("cabin_trace_parent_stem", (pid, 0), "stem", Some(stem), 0);
            }
        }
        self.out.write_some(out)
    }

    fn event(&mut self, event: &Event<'_>, out: &mut dyn Write) -> io::Result<()> {
        // The most common event first, the others out of line (so that
        // their code takes no registers from this one's).
        if let Event::SpanEnd { unclosed: false, .. } = event {
            let pid = self.pid();
            self.spans.write(&mut self.out, pid, event);
            return self.out.write_some(out);
        }
        self.instant_or_other_event(event, out)
    }

    fn finish(&mut self, end: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
        if end.dropped_records > 0 {
            self.marker(end.end_ns, "trace records dropped", "dropped_records", end.dropped_records);
            self.dropped_sample(self.start_ns, 0);
            self.dropped_sample(end.end_ns, end.dropped_records);
        }
        if self.unclosed > 0 {
            self.marker(end.end_ns, "trace spans unclosed", "unclosed_spans", self.unclosed);
        }
        self.out.end();
        self.out.write_all(out)
    }
}

impl ChromeSink {
    /// Every event but a span that ended by itself: an instant written in
    /// place if it can be, else [`ChromeSink::other_event`].
    #[inline(never)]
    fn instant_or_other_event(&mut self, event: &Event<'_>, out: &mut dyn Write) -> io::Result<()> {
        if let Event::Instant { .. } = event {
            let pid = self.pid();
            if self.instants.write(&mut self.out, pid, event) {
                return self.out.write_some(out);
            }
        }
        self.other_event(event, out)
    }

    /// Every event but a span that ended by itself, the general way.
    #[inline(never)]
    fn other_event(&mut self, event: &Event<'_>, out: &mut dyn Write) -> io::Result<()> {
        let pid = self.pid();
        match *event {
            Event::ThreadName { thread, name, .. } => {
                self.out.metadata("thread_name", (pid, thread), "name", Some(name), 0);
            }
            // Unclosed: a begin (`B`) with no end, marked in its `args`.
            Event::SpanEnd { thread, begin_ts, site, fields, .. } => {
                let fixed = site.has_static_text();
                let rendered = self.heads.get([site.name, site.target], 0, fixed, |b, [name, cat]| {
                    head(b, (name, b""), Some(cat), br#""B""#);
                });
                let b = self.out.timed_rendered(rendered, (pid, thread), begin_ts);
                let mut args = Args::new(b);
                args.fields(fields, &mut self.keys, fixed);
                args.key("unclosed").extend_from_slice(b"true");
                self.unclosed += 1;
                args.close();
                self.out.close();
            }
            Event::Instant { thread, ts, site, fields, .. } => self.instant(thread, ts, site, fields),
            Event::ProcessSample(ref sample) => self.process_sample(sample),
            Event::Lane(ref slice) => {
                let (lpid, tid) = self.lane_ids(slice);
                let b = self.out.timed(
                    (slice.name, b""),
                    Some(slice.lane),
                    br#""X""#,
                    (lpid, tid),
                    slice.begin_ns,
                );
                b.extend_from_slice(br#","dur":"#);
                micros(b, slice.end_ns.saturating_sub(slice.begin_ns));
                let mut args = Args::new(b);
                args.fields(slice.fields, &mut self.keys, false);
                args.close();
                self.out.close();
            }
            Event::AsyncSpan { id, thread, begin_ts, end_ts, site, fields, unclosed, .. } => {
                self.async_span(id, thread, (begin_ts, end_ts), site, fields, unclosed);
            }
            Event::FlowOut { flow, kind, thread, ts, .. } => {
                self.flow(pieces::FLOW_OUT, flow, kind, thread, ts)
            }
            Event::FlowIn { flow, kind, thread, ts, at_begin, .. } => {
                // Just before the target's begin, so that a reader that sorts
                // by time sees it first, whatever it does with equal times.
                let (ph, ts) = match at_begin {
                    true => (pieces::FLOW_IN_NEXT, ts.saturating_sub(1)),
                    false => (pieces::FLOW_IN_ENCLOSING, ts),
                };
                self.flow(ph, flow, kind, thread, ts);
            }
            // Nothing is written when a span begins: it becomes one event at its end.
            _ => return Ok(()),
        }
        self.out.write_some(out)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value as Json};
    use trace_core::{FileStatus, Level};

    use super::*;

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
