//! Writes a capture as OpenTelemetry traces in the OTLP file format
//! (`<stem>.otlp.json`), for any collector or backend a CI fleet already runs.
//!
//! # Overview
//!
//! The file is JSON Lines: each line is one `TracesData` message in OTLP/JSON,
//! proto3's JSON mapping with OTLP's exceptions: trace and span ids are
//! lowercase hex (32 and 16 characters, never base64), 64-bit integers
//! (`startTimeUnixNano`, `endTimeUnixNano`, `timeUnixNano`, `intValue`) are
//! decimal strings, enums (span kind, status code) are integers, keys are
//! lowerCamelCase. A line is written once about 1 MiB of spans has built up and
//! at the end, each repeating the resource, so a large capture is several lines
//! and the sink never holds the whole trace.
//!
//! It is the most verbose format: on the demo at `debug` (40,000 spans, two
//! integer fields each) about 580 bytes a span, against about 210 for the
//! Chrome JSON and 9 for Perfetto, since every span repeats the trace id and
//! names its thread, target and level. That is why it is not a default.
//!
//! | capture | OTLP |
//! | --- | --- |
//! | the capture | one trace: a fresh random 128-bit trace id, or the one given by [`OtlpSink::with_context`] |
//! | a span's slice (enter to exit) | a span (`kind` 1, internal); a span entered twice is two spans |
//! | nesting on a thread | `parentSpanId`: the innermost span open on the same thread |
//! | the capture's root (its first outermost span, the façade's `command`) | the parent of every thread's outermost spans and of every lane slice |
//! | span fields (at creation and recorded later) | span attributes: `intValue`, `doubleValue`, `boolValue`, `stringValue` (an unsigned value past `i64::MAX` stays exact as a string) |
//! | the thread, target and level | attributes `thread.id`, `thread.name`, `code.namespace`, `tracing.level` |
//! | a `tracing` event | a span event of the innermost open span on its thread (else of the root); named by its `message` |
//! | a Ninja action or test executable (a lane slice) | a span, child of the root, with `cabin_trace.lane` and `cabin_trace.track` |
//! | a span still open at the end | a span ending at the capture's end, with `cabin_trace.unclosed` = true |
//!
//! Resource attributes follow the semantic conventions: `service.name`,
//! `process.pid`, `process.command` (`argv[0]`), `host.name`; then ours,
//! `cabin_trace.command` and `cabin_trace.stem`; then whatever
//! `OTEL_RESOURCE_ATTRIBUTES` adds or replaces.
//!
//! # Time
//!
//! The capture's timestamps are `CLOCK_MONOTONIC` nanoseconds; OTLP wants Unix
//! nanoseconds. Each time is placed on the wall clock through the anchor the
//! capture reads at its start ([`trace_core::Start`]): `start_unix_ms` (the
//! wall clock, in whole milliseconds) and `start_ns` (the monotonic clock,
//! read just after). Durations and the order of events are exact to the
//! nanosecond; the absolute placement is not: every time is **between 0 and
//! 1 ms early** (the anchor is truncated to the millisecond), plus the few tens
//! of microseconds between the two clock reads, and carries whatever error the
//! machine's wall clock had at that instant. Traces of different machines are
//! aligned only as well as their clocks are.
//!
//! # Example
//!
//! ```
//! use trace_core::{Config, Session, Sink};
//! use trace_sink_otlp::OtlpSink;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let config = Config::from_lookup("DEMO", &["otlp"], |n| {
//!     (n == "DEMO_TRACE_DIR").then(|| dir.path().into())
//! })
//! .unwrap()
//! .unwrap();
//! let sinks: Vec<Box<dyn Sink>> = vec![Box::new(OtlpSink::new())];
//! let session = Session::start(&config, "build", sinks).unwrap();
//! session.in_scope(|| tracing::info_span!("compile", files = 3).in_scope(|| ()));
//! let report = session.finish();
//! let text = std::fs::read_to_string(&report.files[0].path).unwrap();
//! let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
//! let span = &line["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
//! assert_eq!(span["name"], "compile");
//! assert_eq!(span["traceId"].as_str().unwrap().len(), 32);
//! assert_eq!(span["attributes"][0]["value"]["intValue"], "3");
//! ```
//!
//! # Environment
//!
//! | variable | meaning |
//! | --- | --- |
//! | `OTEL_SERVICE_NAME` | `service.name`; else the one in `OTEL_RESOURCE_ATTRIBUTES`, else the captured command |
//! | `OTEL_RESOURCE_ATTRIBUTES` | `key=value,...`, values percent-encoded; added to the resource. A malformed value is refused whole ([`OtlpSink::try_from_env`]) |
//!
//! Both are read when the sink is built ([`OtlpSink::try_from_env`]), before the
//! command runs. No feature flags.
//!
//! # One OTLP model
//!
//! [`model`] holds the OTLP data model (traces, and the gauges and sums of
//! metrics), its text borrowed or owned. The sink builds a [`model::Span`]
//! from the capture's strings as each span ends and appends it to the current
//! line with the crate's one OTLP/JSON writer; `trace-export-otlp` reads these
//! lines into the same types (`serde`, derived on the model), builds its
//! metrics with them and writes them with the same writer
//! ([`model::MetricsData::to_json_line`]). The tests decode every line with
//! the official `opentelemetry-proto` Python classes after checking the hex
//! ids, and read every line written back into the model.
//!
//! # What it does not do
//!
//! It never touches the network: sending files to a collector is
//! `trace-export-otlp`'s job, run by CI after the command. It writes no
//! metrics, logs or span links, and counts of dropped records are in the
//! summary, not here.

#![deny(missing_docs)]

mod ids;
mod json_writer;
pub mod model;
mod resource;

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{self, Write};

use trace_core::{Event, Field, Finish, LaneSlice, Sink, Site, Start, Tid, Value};

pub use ids::{fresh_trace_id, SpanId, TraceId};
pub use resource::{
    parse_key_values, KeyValueError, KeyValueErrorKind, ResourceEnv, RESOURCE_ATTRIBUTES_VAR,
    SERVICE_NAME_VAR,
};

use ids::SpanIds;
use model::{AnyValue, KeyValue, Resource, Scope, Span, SpanEvent, Status};

/// The sink's name in `<P>_TRACE_FORMAT`.
pub const NAME: &str = "otlp";
/// The file name after the stem.
pub const SUFFIX: &str = "otlp.json";
/// The instrumentation scope every span is written under.
pub const SCOPE_NAME: &str = "cabin-trace";

/// A line is written once this many bytes of spans have built up.
const LINE_AT: usize = 1 << 20;

/// The trace a capture joins: its trace id and, for a capture started by
/// another traced process, the span it runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceContext {
    /// The trace id, never all zero.
    pub trace_id: TraceId,
    /// The parent of the capture's root span (the span of the process that
    /// started this one), if any.
    pub parent_span_id: Option<SpanId>,
}

impl TraceContext {
    /// A new trace of its own: a fresh random id and no parent.
    pub fn fresh() -> Self {
        TraceContext { trace_id: fresh_trace_id(), parent_span_id: None }
    }
}

/// A span open on a thread.
#[derive(Debug)]
struct Open {
    id: SpanId,
    parent: Option<SpanId>,
    events: Vec<SpanEvent<'static>>,
}

/// The OTLP/JSON file sink. See the crate docs for the mapping.
#[derive(Debug)]
pub struct OtlpSink {
    env: ResourceEnv,
    context: TraceContext,
    ids: SpanIds,
    /// The root's id, drawn up front so lanes and other threads can name it
    /// before (or without) the root span itself.
    root_id: SpanId,
    /// The thread of the root span while it is open.
    root_thread: Option<Tid>,
    root_claimed: bool,
    command: String,
    clock: Clock,
    threads: HashMap<Tid, String>,
    open: HashMap<Tid, Vec<Open>>,
    /// Events outside every span while the root is not open.
    orphans: Vec<SpanEvent<'static>>,
    /// The JSON of every line before its spans (the resource and scope).
    line_head: Vec<u8>,
    /// The current line's spans: JSON, comma-separated.
    spans: Vec<u8>,
}

impl Default for OtlpSink {
    fn default() -> Self {
        OtlpSink::new()
    }
}

impl OtlpSink {
    /// A sink for a trace of its own, ignoring the `OTEL_*` variables.
    pub fn new() -> Self {
        let mut ids = SpanIds::new();
        let root_id = ids.next_id();
        OtlpSink {
            env: ResourceEnv::default(),
            context: TraceContext::fresh(),
            ids,
            root_id,
            root_thread: None,
            root_claimed: false,
            command: String::new(),
            clock: Clock { anchor_unix_ns: 0, start_ns: 0 },
            threads: HashMap::new(),
            open: HashMap::new(),
            orphans: Vec::new(),
            line_head: Vec::new(),
            spans: Vec::new(),
        }
    }

    /// A sink whose resource honours `OTEL_SERVICE_NAME` and
    /// `OTEL_RESOURCE_ATTRIBUTES`; a malformed `OTEL_RESOURCE_ATTRIBUTES` is an
    /// error naming it (print it, and use [`OtlpSink::new`] to go on without).
    pub fn try_from_env() -> Result<Self, KeyValueError> {
        Ok(OtlpSink::new().with_resource_env(ResourceEnv::from_lookup(|n| std::env::var_os(n))?))
    }

    /// Uses these `OTEL_*` settings for the resource.
    pub fn with_resource_env(mut self, env: ResourceEnv) -> Self {
        self.env = env;
        self
    }

    /// Joins the trace `context` (the family of processes this capture belongs
    /// to) instead of starting a trace of its own.
    pub fn with_context(mut self, context: TraceContext) -> Self {
        self.context = context;
        self
    }

    /// The trace this sink writes.
    pub fn context(&self) -> TraceContext {
        self.context
    }

    /// The id of the capture's root span.
    pub fn root_span_id(&self) -> SpanId {
        self.root_id
    }

    /// A span of this trace, without attributes or events yet.
    fn span<'a>(
        &self,
        id: SpanId,
        parent: Option<SpanId>,
        name: &'a str,
        (begin_ns, end_ns): (u64, u64),
    ) -> Span<'a> {
        Span {
            trace_id: self.context.trace_id,
            span_id: id,
            trace_state: Cow::Borrowed(""),
            parent_span_id: parent,
            name: Cow::Borrowed(name),
            kind: model::SPAN_KIND_INTERNAL,
            start_time_unix_nano: self.clock.unix_ns(begin_ns),
            end_time_unix_nano: self.clock.unix_ns(end_ns),
            attributes: Vec::new(),
            events: Vec::new(),
            status: Some(Status::default()),
        }
    }

    fn lane(&mut self, slice: &LaneSlice<'_>, out: &mut dyn Write) -> io::Result<()> {
        let id = self.ids.next_id();
        let extra = [
            ("cabin_trace.lane", Value::Str(slice.lane)),
            ("cabin_trace.track", Value::U64(slice.track.into())),
        ];
        let mut span = self.span(id, Some(self.root_id), slice.name, (slice.begin_ns, slice.end_ns));
        span.attributes = attributes(slice.fields, extra);
        append(&mut self.spans, &span);
        self.write_some(out)
    }

    /// Writes the current line, if it holds any span.
    fn write_line(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if self.spans.is_empty() {
            return Ok(());
        }
        let r = out
            .write_all(&self.line_head)
            .and_then(|()| out.write_all(&self.spans))
            .and_then(|()| out.write_all(json_writer::TRACES_TAIL))
            .and_then(|()| out.write_all(b"\n"));
        self.spans.clear();
        r
    }

    fn write_some(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if self.spans.len() >= LINE_AT {
            self.write_line(out)?;
        }
        Ok(())
    }
}

/// Appends `span` to `spans`, the current line's.
fn append(spans: &mut Vec<u8>, span: &Span<'_>) {
    if !spans.is_empty() {
        spans.push(b',');
    }
    json_writer::span(spans, span);
}

/// A span event at `time_unix_ns`, named by its `message` field (every other
/// field an attribute), else by its site.
fn span_event(time_unix_ns: u64, site: &Site<'_>, fields: &[Field<'_>]) -> SpanEvent<'static> {
    let message = fields.iter().find_map(|f| match (f.name, f.value) {
        ("message", Value::Str(m)) => Some(m),
        _ => None,
    });
    let rest = fields.iter().filter(|f| message.is_none() || f.name != "message");
    let extra =
        [("code.namespace", Value::Str(site.target)), ("tracing.level", Value::Str(site.level.as_str()))];
    let attributes = rest.map(|f| (f.name, f.value)).chain(extra);
    SpanEvent {
        time_unix_nano: time_unix_ns,
        name: Cow::Owned(message.unwrap_or(site.name).to_string()),
        attributes: attributes.map(|(key, value)| key_value(key, value).into_owned()).collect(),
    }
}

/// `fields`, then `extra`, as OTLP attributes.
fn attributes<'a>(
    fields: &[Field<'a>],
    extra: impl IntoIterator<Item = (&'a str, Value<'a>)>,
) -> Vec<KeyValue<'a>> {
    let extra = extra.into_iter().map(|(key, value)| key_value(key, value));
    fields.iter().map(|f| key_value(f.name, f.value)).chain(extra).collect()
}

/// A field as an attribute: an unsigned integer past `i64::MAX` stays exact
/// as a string rather than wrapped or rounded.
fn key_value<'a>(key: &'a str, value: Value<'a>) -> KeyValue<'a> {
    let value = match value {
        Value::I64(n) => AnyValue::Int(n),
        Value::U64(n) => match i64::try_from(n) {
            Ok(n) => AnyValue::Int(n),
            Err(_) => AnyValue::Str(Cow::Owned(n.to_string())),
        },
        Value::F64(x) => AnyValue::Double(x),
        Value::Bool(b) => AnyValue::Bool(b),
        Value::Str(s) => AnyValue::Str(Cow::Borrowed(s)),
    };
    KeyValue { key: Cow::Borrowed(key), value }
}

/// Places monotonic times on the wall clock.
#[derive(Clone, Copy, Debug)]
struct Clock {
    /// Wall-clock nanoseconds of `start_ns`.
    anchor_unix_ns: i128,
    start_ns: u64,
}

impl Clock {
    fn unix_ns(self, ts: u64) -> u64 {
        let ns = self.anchor_unix_ns + (i128::from(ts) - i128::from(self.start_ns));
        ns.clamp(0, i128::from(u64::MAX)) as u64
    }
}

impl Sink for OtlpSink {
    fn name(&self) -> &'static str {
        NAME
    }

    fn suffix(&self) -> &'static str {
        SUFFIX
    }

    fn start(&mut self, start: &Start<'_>, _out: &mut dyn Write) -> io::Result<()> {
        self.command = start.command.to_string();
        self.clock =
            Clock { anchor_unix_ns: i128::from(start.start_unix_ms) * 1_000_000, start_ns: start.start_ns };
        let resource = Resource { attributes: self.env.attributes(start) };
        let scope = Scope { name: SCOPE_NAME.into(), version: env!("CARGO_PKG_VERSION").into() };
        self.line_head.clear();
        json_writer::traces_head(&mut self.line_head, &resource, &scope);
        self.spans.reserve(64 * 1024);
        Ok(())
    }

    fn event(&mut self, event: &Event<'_>, out: &mut dyn Write) -> io::Result<()> {
        match *event {
            Event::ThreadName { thread, name, .. } => {
                self.threads.insert(thread, name.to_string());
            }
            Event::SpanBegin { thread, .. } => {
                let stack = self.open.entry(thread).or_default();
                let (id, parent) = match stack.last() {
                    Some(open) => (self.ids.next_id(), Some(open.id)),
                    None if !self.root_claimed => {
                        self.root_claimed = true;
                        self.root_thread = Some(thread);
                        (self.root_id, self.context.parent_span_id)
                    }
                    None => (self.ids.next_id(), Some(self.root_id)),
                };
                stack.push(Open { id, parent, events: Vec::new() });
            }
            Event::SpanEnd { thread, ts, begin_ts, site, fields, unclosed, .. } => {
                let open = self.open.get_mut(&thread).and_then(Vec::pop);
                // The writer pairs every end with a begin; should one ever come
                // alone, it is still written, under the root.
                let open = open.unwrap_or_else(|| Open {
                    id: self.ids.next_id(),
                    parent: Some(self.root_id),
                    events: Vec::new(),
                });
                if open.id == self.root_id {
                    self.root_thread = None;
                }
                let thread_name = self.threads.get(&thread).map(|n| ("thread.name", Value::Str(n)));
                let extra = [("thread.id", Value::U64(thread))]
                    .into_iter()
                    .chain(thread_name)
                    .chain([
                        ("code.namespace", Value::Str(site.target)),
                        ("tracing.level", Value::Str(site.level.as_str())),
                    ])
                    .chain(unclosed.then_some(("cabin_trace.unclosed", Value::Bool(true))));
                let mut span = self.span(open.id, open.parent, site.name, (begin_ts, ts));
                span.attributes = attributes(fields, extra);
                span.events = open.events;
                append(&mut self.spans, &span);
            }
            Event::Instant { thread, ts, site, fields, .. } => {
                let event = span_event(self.clock.unix_ns(ts), &site, fields);
                let root_thread = self.root_thread;
                let events = match self.open.get_mut(&thread).and_then(|s| s.last_mut()) {
                    Some(open) => &mut open.events,
                    None => match root_thread.and_then(|t| self.open.get_mut(&t)).and_then(|s| s.first_mut())
                    {
                        Some(root) => &mut root.events,
                        None => &mut self.orphans,
                    },
                };
                events.push(event);
                return Ok(());
            }
            Event::Lane(ref slice) => return self.lane(slice, out),
            _ => return Ok(()),
        }
        self.write_some(out)
    }

    fn finish(&mut self, end: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
        // Events outside every span: on a span of the capture's whole length,
        // the root itself when no span claimed it.
        if !self.orphans.is_empty() || !self.root_claimed {
            let (id, parent) = if self.root_claimed {
                (self.ids.next_id(), Some(self.root_id))
            } else {
                (self.root_id, self.context.parent_span_id)
            };
            let times = (self.clock.start_ns, end.end_ns.max(self.clock.start_ns));
            let mut span = self.span(id, parent, &self.command, times);
            span.attributes = vec![key_value("cabin_trace.outside_spans", Value::Bool(true))];
            span.events = std::mem::take(&mut self.orphans);
            append(&mut self.spans, &span);
        }
        self.write_line(out)?;
        out.flush()
    }
}

#[cfg(test)]
mod tests;
