//! The Chrome sink's encoder as it was before the fast one (commit 72d3324),
//! kept unchanged as the oracle the new encoder's bytes are compared with.

use std::io::{self, Write};

use trace_core::{Event, Field, Finish, LaneSlice, Sink, Start, Value};

const LANE_PID_BASE: u64 = 1 << 22;

/// The old Chrome sink.
#[derive(Debug, Default)]
pub struct OldChromeSink {
    pid: u32,
    first: bool,
    lanes: Vec<(String, Vec<u32>)>,
    /// The line being built: each event is encoded here, then written whole.
    line: Vec<u8>,
}

/// Appends `s` as a JSON string.
fn string(line: &mut Vec<u8>, s: &str) {
    line.push(b'"');
    let bytes = s.as_bytes();
    let mut plain = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => b"",
            _ => continue,
        };
        line.extend_from_slice(&bytes[plain..i]);
        if escape.is_empty() {
            line.extend_from_slice(b"\\u00");
            line.push(HEX[(b >> 4) as usize]);
            line.push(HEX[(b & 0xf) as usize]);
        } else {
            line.extend_from_slice(escape);
        }
        plain = i + 1;
    }
    line.extend_from_slice(&bytes[plain..]);
    line.push(b'"');
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn int(line: &mut Vec<u8>, v: impl itoa::Integer) {
    line.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Appends nanoseconds as microseconds with three decimals.
fn micros(line: &mut Vec<u8>, ns: u64) {
    int(line, ns / 1000);
    let frac = ns % 1000;
    line.extend_from_slice(&[
        b'.',
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
}

fn value(line: &mut Vec<u8>, v: &Value<'_>) {
    match *v {
        Value::I64(v) => int(line, v),
        Value::U64(v) => int(line, v),
        Value::F64(v) if v.is_finite() => {
            let _ = write!(line, "{v}");
        }
        Value::F64(v) => string(line, &v.to_string()),
        Value::Bool(v) => line.extend_from_slice(if v { b"true" } else { b"false" }),
        Value::Str(s) => string(line, s),
    }
}

/// Appends `,"args":{...}` for the fields (and the extra flag), or nothing.
fn args(line: &mut Vec<u8>, fields: &[Field<'_>], unclosed: bool) {
    if fields.is_empty() && !unclosed {
        return;
    }
    line.extend_from_slice(br#","args":{"#);
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            line.push(b',');
        }
        string(line, f.name);
        line.push(b':');
        value(line, &f.value);
    }
    if unclosed {
        if !fields.is_empty() {
            line.push(b',');
        }
        line.extend_from_slice(br#""unclosed":true"#);
    }
    line.push(b'}');
}

/// Appends `"pid":P,"tid":T`.
fn ids(line: &mut Vec<u8>, pid: u64, tid: u64) {
    line.extend_from_slice(br#","pid":"#);
    int(line, pid);
    line.extend_from_slice(br#","tid":"#);
    int(line, tid);
}

impl OldChromeSink {
    /// A new sink.
    pub fn new() -> Self {
        OldChromeSink { pid: 0, first: true, lanes: Vec::new(), line: Vec::with_capacity(256) }
    }

    /// Starts a new event: the separator from the previous one, and `{`.
    fn open(&mut self) {
        self.line.clear();
        if self.first {
            self.first = false;
        } else {
            self.line.extend_from_slice(b",\n");
        }
        self.line.push(b'{');
    }

    /// A metadata (`M`) event naming a process or thread, or giving a sort index.
    fn metadata(&mut self, what: &str, pid: u64, tid: u64, key: &str, name: Option<&str>, index: u64) {
        self.open();
        self.line.extend_from_slice(br#""name":"#);
        string(&mut self.line, what);
        self.line.extend_from_slice(br#","ph":"M""#);
        ids(&mut self.line, pid, tid);
        self.line.extend_from_slice(br#","args":{"#);
        string(&mut self.line, key);
        self.line.push(b':');
        match name {
            Some(n) => string(&mut self.line, n),
            None => int(&mut self.line, index),
        }
        self.line.extend_from_slice(b"}}");
    }

    /// Starts an event with a time: name, category, phase, ids and `ts`; the
    /// caller adds what follows and the closing brace.
    fn timed(&mut self, name: &str, cat: Option<&str>, ph: &[u8], (pid, tid): (u64, u64), ts: u64) {
        self.open();
        let l = &mut self.line;
        l.extend_from_slice(br#""name":"#);
        string(l, name);
        if let Some(cat) = cat {
            l.extend_from_slice(br#","cat":"#);
            string(l, cat);
        }
        l.extend_from_slice(br#","ph":"#);
        l.extend_from_slice(ph);
        ids(l, pid, tid);
        l.extend_from_slice(br#","ts":"#);
        micros(l, ts);
    }

    fn lane_ids(&mut self, out: &mut dyn Write, lane: &LaneSlice<'_>) -> io::Result<(u64, u64)> {
        let index = match self.lanes.iter().position(|(n, _)| n == lane.lane) {
            Some(i) => i,
            None => {
                self.lanes.push((lane.lane.to_string(), Vec::new()));
                let i = self.lanes.len() - 1;
                let pid = self.pid as u64 + LANE_PID_BASE * (i as u64 + 1);
                self.metadata("process_name", pid, 0, "name", Some(lane.lane), 0);
                out.write_all(&self.line)?;
                self.metadata("process_sort_index", pid, 0, "sort_index", None, i as u64 + 1);
                out.write_all(&self.line)?;
                i
            }
        };
        let pid = self.pid as u64 + LANE_PID_BASE * (index as u64 + 1);
        let tid = u64::from(lane.track) + 1;
        if !self.lanes[index].1.contains(&lane.track) {
            self.lanes[index].1.push(lane.track);
            let name = format!("{} {}", lane.lane, lane.track);
            self.metadata("thread_name", pid, tid, "name", Some(&name), 0);
            out.write_all(&self.line)?;
        }
        Ok((pid, tid))
    }
}

impl Sink for OldChromeSink {
    fn name(&self) -> &'static str {
        "chrome"
    }

    fn suffix(&self) -> &'static str {
        "trace.json"
    }

    fn start(&mut self, start: &Start<'_>, out: &mut dyn Write) -> io::Result<()> {
        self.pid = start.pid;
        out.write_all(b"[\n")?;
        self.metadata("process_name", self.pid.into(), 0, "name", Some(start.command), 0);
        out.write_all(&self.line)?;
        self.metadata("process_sort_index", self.pid.into(), 0, "sort_index", None, 0);
        out.write_all(&self.line)
    }

    fn event(&mut self, event: &Event<'_>, out: &mut dyn Write) -> io::Result<()> {
        let pid = u64::from(self.pid);
        match *event {
            Event::ThreadName { thread, name } => {
                self.metadata("thread_name", pid, thread, "name", Some(name), 0);
            }
            Event::SpanBegin { thread, ts, site, fields } => {
                self.timed(site.name, Some(site.target), br#""B""#, (pid, thread), ts);
                args(&mut self.line, fields, false);
                self.line.push(b'}');
            }
            Event::SpanEnd { thread, ts, site, recorded, unclosed, .. } => {
                self.timed(site.name, None, br#""E""#, (pid, thread), ts);
                args(&mut self.line, recorded, unclosed);
                self.line.push(b'}');
            }
            Event::Instant { thread, ts, site, fields } => {
                self.timed(site.name, Some(site.target), br#""i","s":"t""#, (pid, thread), ts);
                args(&mut self.line, fields, false);
                self.line.push(b'}');
            }
            Event::Lane(ref slice) => {
                let (lpid, tid) = self.lane_ids(out, slice)?;
                self.timed(slice.name, Some(slice.lane), br#""X""#, (lpid, tid), slice.begin_ns);
                let l = &mut self.line;
                l.extend_from_slice(br#","dur":"#);
                micros(l, slice.end_ns.saturating_sub(slice.begin_ns));
                args(l, slice.fields, false);
                l.push(b'}');
            }
            _ => return Ok(()),
        }
        out.write_all(&self.line)
    }

    fn finish(&mut self, end: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
        if end.dropped_records > 0 {
            self.metadata(
                "trace_dropped_records",
                self.pid.into(),
                0,
                "dropped_records",
                None,
                end.dropped_records,
            );
            out.write_all(&self.line)?;
        }
        out.write_all(b"\n]\n")
    }
}
