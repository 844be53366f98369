//! Writes a capture as Chrome trace-event JSON (`<stem>.trace.json`), the
//! format Perfetto's UI and `chrome://tracing` open directly.
//!
//! # Overview
//!
//! The file is a JSON array with one event per line:
//!
//! - `M` metadata events name the process (the command) and each thread;
//! - a span is a `B`/`E` pair on its thread's lane, its fields as `args` of the
//!   `B`, fields recorded later as `args` of the `E` (viewers merge them);
//! - a `tracing` event is an `i` (instant) event with its fields as `args`;
//! - an external lane (Ninja's actions, test executables) is a process of its
//!   own with one thread per sub-lane, its slices as complete (`X`) events.
//!
//! `B`/`E` pairs are written as the spans begin and end, so the file never holds
//! the whole trace in memory and a span still open at the end is closed, marked
//! `"unclosed": true`, rather than lost. Timestamps are microseconds of
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
//! assert!(events.as_array().unwrap().iter().any(|e| e["name"] == "compile"));
//! ```
//!
//! # What it does not do
//!
//! It writes no flow events and no counters, and never re-reads its output.
//! Files from several processes are not meant to be concatenated (use the
//! Perfetto sink for that).

#![deny(missing_docs)]

use std::io::{self, Write};

use trace_core::{Event, Field, Finish, LaneSlice, Sink, Start, Value};

/// The sink's name in `<P>_TRACE_FORMAT`.
pub const NAME: &str = "chrome";
/// The file name after the stem.
pub const SUFFIX: &str = "trace.json";

/// Pids of external lanes start above the kernel's largest pid (2^22 on Linux).
const LANE_PID_BASE: u64 = 1 << 22;

/// The Chrome trace-event JSON sink. See the crate docs for the format.
#[derive(Debug, Default)]
pub struct ChromeSink {
    pid: u32,
    first: bool,
    lanes: Vec<(String, Vec<u32>)>,
}

impl ChromeSink {
    /// A new sink.
    pub fn new() -> Self {
        ChromeSink { pid: 0, first: true, lanes: Vec::new() }
    }

    /// Starts a new line of the array.
    fn sep(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if self.first {
            self.first = false;
            Ok(())
        } else {
            out.write_all(b",\n")
        }
    }

    fn lane_pid(&mut self, out: &mut dyn Write, lane: &LaneSlice<'_>) -> io::Result<(u64, u32)> {
        let index = match self.lanes.iter().position(|(n, _)| n == lane.lane) {
            Some(i) => i,
            None => {
                self.lanes.push((lane.lane.to_string(), Vec::new()));
                let i = self.lanes.len() - 1;
                let pid = self.pid as u64 + LANE_PID_BASE * (i as u64 + 1);
                self.sep(out)?;
                write!(out, r#"{{"name":"process_name","ph":"M","pid":{pid},"tid":0,"args":{{"name":"#)?;
                string(out, lane.lane)?;
                out.write_all(b"}}")?;
                self.sep(out)?;
                write!(
                    out,
                    r#"{{"name":"process_sort_index","ph":"M","pid":{pid},"tid":0,"args":{{"sort_index":{}}}}}"#,
                    i + 1
                )?;
                i
            }
        };
        let pid = self.pid as u64 + LANE_PID_BASE * (index as u64 + 1);
        let tid = lane.track + 1;
        if !self.lanes[index].1.contains(&lane.track) {
            self.lanes[index].1.push(lane.track);
            self.sep(out)?;
            write!(out, r#"{{"name":"thread_name","ph":"M","pid":{pid},"tid":{tid},"args":{{"name":"#)?;
            string(out, &format!("{} {}", lane.lane, lane.track))?;
            out.write_all(b"}}")?;
        }
        Ok((pid, tid))
    }
}

/// Writes `s` as a JSON string.
fn string(out: &mut dyn Write, s: &str) -> io::Result<()> {
    serde_json::to_writer(out, s).map_err(io::Error::other)
}

/// Writes nanoseconds as microseconds with three decimals.
fn micros(out: &mut dyn Write, ns: u64) -> io::Result<()> {
    write!(out, "{}.{:03}", ns / 1000, ns % 1000)
}

fn value(out: &mut dyn Write, v: &Value<'_>) -> io::Result<()> {
    match *v {
        Value::I64(v) => write!(out, "{v}"),
        Value::U64(v) => write!(out, "{v}"),
        Value::F64(v) if v.is_finite() => write!(out, "{v}"),
        Value::F64(v) => string(out, &v.to_string()),
        Value::Bool(v) => write!(out, "{v}"),
        Value::Str(s) => string(out, s),
    }
}

/// Writes `,"args":{...}` for the fields (and the extra flag), or nothing.
fn args(out: &mut dyn Write, fields: &[Field<'_>], unclosed: bool) -> io::Result<()> {
    if fields.is_empty() && !unclosed {
        return Ok(());
    }
    out.write_all(br#","args":{"#)?;
    let mut first = true;
    for f in fields {
        if !first {
            out.write_all(b",")?;
        }
        first = false;
        string(out, f.name)?;
        out.write_all(b":")?;
        value(out, &f.value)?;
    }
    if unclosed {
        if !first {
            out.write_all(b",")?;
        }
        out.write_all(br#""unclosed":true"#)?;
    }
    out.write_all(b"}")
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
        out.write_all(b"[\n")?;
        self.sep(out)?;
        write!(out, r#"{{"name":"process_name","ph":"M","pid":{},"tid":0,"args":{{"name":"#, self.pid)?;
        string(out, start.command)?;
        out.write_all(b"}}")?;
        self.sep(out)?;
        write!(
            out,
            r#"{{"name":"process_sort_index","ph":"M","pid":{},"tid":0,"args":{{"sort_index":0}}}}"#,
            self.pid
        )
    }

    fn event(&mut self, event: &Event<'_>, out: &mut dyn Write) -> io::Result<()> {
        let pid = self.pid;
        match *event {
            Event::ThreadName { thread, name } => {
                self.sep(out)?;
                write!(
                    out,
                    r#"{{"name":"thread_name","ph":"M","pid":{pid},"tid":{thread},"args":{{"name":"#
                )?;
                string(out, name)?;
                out.write_all(b"}}")
            }
            Event::SpanBegin { thread, ts, site, fields } => {
                self.sep(out)?;
                out.write_all(br#"{"name":"#)?;
                string(out, site.name)?;
                out.write_all(br#","cat":"#)?;
                string(out, site.target)?;
                write!(out, r#","ph":"B","pid":{pid},"tid":{thread},"ts":"#)?;
                micros(out, ts)?;
                args(out, fields, false)?;
                out.write_all(b"}")
            }
            Event::SpanEnd { thread, ts, site, recorded, unclosed, .. } => {
                self.sep(out)?;
                out.write_all(br#"{"name":"#)?;
                string(out, site.name)?;
                write!(out, r#","ph":"E","pid":{pid},"tid":{thread},"ts":"#)?;
                micros(out, ts)?;
                args(out, recorded, unclosed)?;
                out.write_all(b"}")
            }
            Event::Instant { thread, ts, site, fields } => {
                self.sep(out)?;
                out.write_all(br#"{"name":"#)?;
                string(out, site.name)?;
                out.write_all(br#","cat":"#)?;
                string(out, site.target)?;
                write!(out, r#","ph":"i","s":"t","pid":{pid},"tid":{thread},"ts":"#)?;
                micros(out, ts)?;
                args(out, fields, false)?;
                out.write_all(b"}")
            }
            Event::Lane(ref slice) => {
                let (lpid, tid) = self.lane_pid(out, slice)?;
                self.sep(out)?;
                out.write_all(br#"{"name":"#)?;
                string(out, slice.name)?;
                out.write_all(br#","cat":"#)?;
                string(out, slice.lane)?;
                write!(out, r#","ph":"X","pid":{lpid},"tid":{tid},"ts":"#)?;
                micros(out, slice.begin_ns)?;
                out.write_all(br#","dur":"#)?;
                micros(out, slice.end_ns.saturating_sub(slice.begin_ns))?;
                args(out, slice.fields, false)?;
                out.write_all(b"}")
            }
            _ => Ok(()),
        }
    }

    fn finish(&mut self, end: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
        if end.dropped_records > 0 {
            self.sep(out)?;
            write!(
                out,
                r#"{{"name":"trace_dropped_records","ph":"M","pid":{},"tid":0,"args":{{"dropped_records":{}}}}}"#,
                self.pid, end.dropped_records
            )?;
        }
        out.write_all(b"\n]\n")
    }
}
