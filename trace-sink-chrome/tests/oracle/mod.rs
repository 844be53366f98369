//! A reference encoder of the Chrome sink's format, written another way than
//! the sink: each event is built as a `String` with `format!`, strings are
//! escaped one character at a time, integers formatted by `std` and names
//! cut with `chars()`. The sink must write exactly its bytes for the events
//! it covers (spans, instants, lanes, thread names, loss markers); the
//! crate docs describe that format.

use std::io::{self, Write};

use trace_core::{Event, Field, Finish, LaneSlice, Sink, Start, Value};

const LANE_PID_BASE: u64 = 1 << 22;
const NAME_CHARS: usize = 60;

/// The reference Chrome sink.
#[derive(Debug, Default)]
pub struct OracleChromeSink {
    pid: u64,
    start_ns: u64,
    first: bool,
    lanes: Vec<(String, Vec<u32>)>,
    unclosed: u64,
}

/// `s` as a JSON string.
fn string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn int(v: impl std::fmt::Display) -> String {
    v.to_string()
}

/// Nanoseconds as microseconds with three decimals.
fn micros(ns: u64) -> String {
    format!("{}.{:03}", int(ns / 1000), ns % 1000)
}

fn value(v: &Value<'_>) -> String {
    match *v {
        Value::I64(v) => int(v),
        Value::U64(v) => int(v),
        Value::F64(v) if v.is_finite() => format!("{v}"),
        Value::F64(v) => string(&v.to_string()),
        Value::Bool(v) => v.to_string(),
        Value::Str(s) => string(s),
    }
}

/// `,"args":{...}` of `entries` (key, encoded value), or nothing.
fn args(entries: &[(String, String)]) -> String {
    if entries.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = entries.iter().map(|(k, v)| format!("{}:{v}", string(k))).collect();
    format!(r#","args":{{{}}}"#, inner.join(","))
}

fn field_entries(fields: &[Field<'_>]) -> Vec<(String, String)> {
    fields.iter().map(|f| (f.name.to_string(), value(&f.value))).collect()
}

/// An instant's name: the message's first line, at most 60 characters with
/// the ellipsis when anything was cut.
fn instant_name(message: &str) -> Option<String> {
    let line: String = message.chars().take_while(|&c| c != '\n' && c != '\r').collect();
    if line.is_empty() {
        return None;
    }
    let chars = line.chars().count();
    Some(if chars > NAME_CHARS {
        line.chars().take(NAME_CHARS - 1).chain(['…']).collect()
    } else if line.len() < message.len() {
        format!("{line}…")
    } else {
        line
    })
}

impl OracleChromeSink {
    /// A new sink.
    pub fn new() -> Self {
        OracleChromeSink { first: true, ..Default::default() }
    }

    /// Writes one event, after the separator from the previous one.
    fn put(&mut self, out: &mut dyn Write, event: String) -> io::Result<()> {
        let sep = if self.first { "" } else { ",\n" };
        self.first = false;
        out.write_all(format!("{sep}{{{event}}}").as_bytes())
    }

    fn metadata(
        &mut self,
        out: &mut dyn Write,
        what: &str,
        pid: u64,
        tid: u64,
        key: &str,
        v: String,
    ) -> io::Result<()> {
        let e = format!(
            r#""name":{},"ph":"M","pid":{},"tid":{},"args":{{{}:{v}}}"#,
            string(what),
            int(pid),
            int(tid),
            string(key)
        );
        self.put(out, e)
    }

    /// The fields every timed event starts with.
    fn head(name: &str, cat: Option<&str>, ph: &str, pid: u64, tid: u64, ts: u64) -> String {
        let cat = cat.map(|c| format!(r#","cat":{}"#, string(c))).unwrap_or_default();
        format!(
            r#""name":{}{cat},"ph":{ph},"pid":{},"tid":{},"ts":{}"#,
            string(name),
            int(pid),
            int(tid),
            micros(ts)
        )
    }

    fn lane_ids(&mut self, out: &mut dyn Write, lane: &LaneSlice<'_>) -> io::Result<(u64, u64)> {
        let index = match self.lanes.iter().position(|(n, _)| n == lane.lane) {
            Some(i) => i,
            None => {
                self.lanes.push((lane.lane.to_string(), Vec::new()));
                let i = self.lanes.len() - 1;
                let pid = self.pid + LANE_PID_BASE * (i as u64 + 1);
                self.metadata(out, "process_name", pid, 0, "name", string(lane.lane))?;
                self.metadata(out, "process_sort_index", pid, 0, "sort_index", int(i as u64 + 1))?;
                i
            }
        };
        let pid = self.pid + LANE_PID_BASE * (index as u64 + 1);
        let tid = u64::from(lane.track) + 1;
        if !self.lanes[index].1.contains(&lane.track) {
            self.lanes[index].1.push(lane.track);
            let name = format!("{} {}", lane.lane, lane.track);
            self.metadata(out, "thread_name", pid, tid, "name", string(&name))?;
        }
        Ok((pid, tid))
    }
}

impl Sink for OracleChromeSink {
    fn name(&self) -> &'static str {
        "chrome"
    }

    fn suffix(&self) -> &'static str {
        "trace.json"
    }

    fn start(&mut self, start: &Start<'_>, out: &mut dyn Write) -> io::Result<()> {
        self.pid = start.pid.into();
        self.start_ns = start.start_ns;
        out.write_all(b"[\n")?;
        self.metadata(out, "process_name", self.pid, 0, "name", string(start.command))?;
        self.metadata(out, "process_sort_index", self.pid, 0, "sort_index", int(0))
    }

    fn event(&mut self, event: &Event<'_>, out: &mut dyn Write) -> io::Result<()> {
        let pid = self.pid;
        match *event {
            Event::ThreadName { thread, name, .. } => {
                self.metadata(out, "thread_name", pid, thread, "name", string(name))
            }
            Event::SpanEnd { thread, ts, begin_ts, site, fields, unclosed, cpu, .. } => {
                let mut entries = field_entries(fields);
                let e = if unclosed {
                    self.unclosed += 1;
                    entries.push(("unclosed".into(), "true".into()));
                    format!(
                        "{}{}",
                        Self::head(site.name, Some(site.target), r#""B""#, pid, thread, begin_ts),
                        args(&entries)
                    )
                } else {
                    // The thread's CPU clock at the begin, and the CPU time inside.
                    let cpu = cpu.map_or(String::new(), |cpu| {
                        format!(r#","tts":{},"tdur":{}"#, micros(cpu.begin_ns), micros(cpu.ns()))
                    });
                    format!(
                        r#"{},"dur":{}{cpu}{}"#,
                        Self::head(site.name, Some(site.target), r#""X""#, pid, thread, begin_ts),
                        micros(ts.saturating_sub(begin_ts)),
                        args(&entries)
                    )
                };
                self.put(out, e)
            }
            Event::Instant { thread, ts, site, fields, .. } => {
                let message = fields.iter().find(|f| f.name == "message").and_then(|f| match f.value {
                    Value::Str(m) => instant_name(m),
                    _ => None,
                });
                let name = message.unwrap_or_else(|| site.name.to_string());
                let mut entries = field_entries(fields);
                let has = |key: &str| fields.iter().any(|f| f.name == key);
                if !has("level") {
                    entries.push(("level".into(), string(&site.level.to_string())));
                }
                if let (Some(file), false) = (site.file, has("location")) {
                    let location = match site.line {
                        Some(line) => format!("{file}:{line}"),
                        None => file.to_string(),
                    };
                    entries.push(("location".into(), string(&location)));
                }
                let e = format!(
                    "{}{}",
                    Self::head(&name, Some(site.target), r#""i","s":"t""#, pid, thread, ts),
                    args(&entries)
                );
                self.put(out, e)
            }
            Event::Lane(ref slice) => {
                let (lpid, tid) = self.lane_ids(out, slice)?;
                let e = format!(
                    r#"{},"dur":{}{}"#,
                    Self::head(slice.name, Some(slice.lane), r#""X""#, lpid, tid, slice.begin_ns),
                    micros(slice.end_ns.saturating_sub(slice.begin_ns)),
                    args(&field_entries(slice.fields))
                );
                self.put(out, e)
            }
            _ => Ok(()),
        }
    }

    fn finish(&mut self, end: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
        let pid = self.pid;
        let marker = |what: &str, key: &str, n: u64| {
            format!(
                r#"{},"args":{{{}:{}}}"#,
                Self::head(
                    &format!("{what} ({n})"),
                    Some("cabin_trace"),
                    r#""i","s":"g""#,
                    pid,
                    0,
                    end.end_ns
                ),
                string(key),
                int(n)
            )
        };
        if end.dropped_records > 0 {
            self.put(out, marker("trace records dropped", "dropped_records", end.dropped_records))?;
            for (ts, n) in [(self.start_ns, 0), (end.end_ns, end.dropped_records)] {
                let e = format!(
                    r#"{},"args":{{"count":{}}}"#,
                    Self::head("trace records dropped", Some("cabin_trace"), r#""C""#, pid, 0, ts),
                    int(n)
                );
                self.put(out, e)?;
            }
        }
        if self.unclosed > 0 {
            self.put(out, marker("trace spans unclosed", "unclosed_spans", self.unclosed))?;
        }
        out.write_all(b"\n]\n")
    }
}
