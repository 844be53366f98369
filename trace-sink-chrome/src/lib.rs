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
//! `B`/`E` pairs are encoded as the spans begin and end, and handed to the
//! file in pieces of about 32 KiB, so the sink never holds the whole trace in
//! memory and a span still open at the end is closed, marked
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

/// Output is handed to the writer once this much has built up (and at the
/// finish): larger than the capture's file buffer, so it goes straight through.
const WRITE_AT: usize = 32 * 1024;

/// The Chrome trace-event JSON sink. See the crate docs for the format.
#[derive(Debug, Default)]
pub struct ChromeSink {
    pid: u32,
    /// Whether an event has been encoded (the next one needs a separator).
    any: bool,
    lanes: Vec<(String, Vec<u32>)>,
    /// Output not yet written: events are encoded here, then written in
    /// pieces of at least [`WRITE_AT`] bytes.
    buf: Vec<u8>,
    /// The process and thread of the last timed event, and its encoded
    /// `,"pid":P,"tid":T,"ts":`.
    last_ids: Option<(u64, u64)>,
    ids: Vec<u8>,
}

/// Bytes a JSON string cannot hold as they are: control characters, `"` and `\`.
const fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// Whether any of the eight bytes of `x` needs escaping (exact, no false
/// positives: each test is the classic "has a byte less than n" bit trick).
#[inline]
fn any_needs_escape(x: u64) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * n as u64) & !x & HIGH;
    let quote = x ^ (ONES * b'"' as u64);
    let backslash = x ^ (ONES * b'\\' as u64);
    (below(x, 0x20) | below(quote, 1) | below(backslash, 1)) != 0
}

/// The index of the first byte of `bytes` that needs escaping, or its length.
#[inline]
fn plain_prefix(bytes: &[u8]) -> usize {
    let mut i = 0;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        if any_needs_escape(u64::from_ne_bytes(chunk.try_into().expect("8 bytes"))) {
            break;
        }
        i += 8;
    }
    while i < bytes.len() && !needs_escape(bytes[i]) {
        i += 1;
    }
    i
}

/// Appends `s` as a JSON string.
#[inline]
fn string(buf: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let plain = plain_prefix(bytes);
    buf.reserve(bytes.len() + 2);
    buf.push(b'"');
    if plain == bytes.len() {
        buf.extend_from_slice(bytes);
    } else {
        escape(buf, bytes, plain);
    }
    buf.push(b'"');
}

/// Appends `bytes` escaped, the first `plain` of which need no escaping.
#[cold]
fn escape(buf: &mut Vec<u8>, bytes: &[u8], mut plain: usize) {
    buf.extend_from_slice(&bytes[..plain]);
    for (i, &b) in bytes.iter().enumerate().skip(plain) {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => b"",
            _ => continue,
        };
        buf.extend_from_slice(&bytes[plain..i]);
        if escape.is_empty() {
            buf.extend_from_slice(b"\\u00");
            buf.push(HEX[(b >> 4) as usize]);
            buf.push(HEX[(b & 0xf) as usize]);
        } else {
            buf.extend_from_slice(escape);
        }
        plain = i + 1;
    }
    buf.extend_from_slice(&bytes[plain..]);
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `"00"` to `"99"`.
const PAIRS: [[u8; 2]; 100] = {
    let mut pairs = [[0; 2]; 100];
    let mut i = 0;
    while i < 100 {
        pairs[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    pairs
};

/// The number of decimal digits of `n`.
#[inline]
fn digit_count(n: u64) -> usize {
    n.checked_ilog10().unwrap_or(0) as usize + 1
}

/// Writes the digits of `n` to the end of `out`, which is exactly as long as
/// [`digit_count`] says.
#[inline]
fn digits_into(out: &mut [u8], mut n: u64) {
    let mut i = out.len();
    while n >= 100 {
        i -= 2;
        out[i..i + 2].copy_from_slice(&PAIRS[(n % 100) as usize]);
        n /= 100;
    }
    if n >= 10 {
        out[i - 2..i].copy_from_slice(&PAIRS[n as usize]);
    } else {
        out[i - 1] = b'0' + n as u8;
    }
}

/// Appends `n` in decimal.
#[inline]
fn uint(buf: &mut Vec<u8>, n: u64) {
    let at = buf.len();
    let len = digit_count(n);
    // A fixed-size extension (no call to copy a variable length), trimmed after.
    buf.extend_from_slice(&[0; 20]);
    digits_into(&mut buf[at..at + len], n);
    buf.truncate(at + len);
}

/// Appends `n` in decimal.
fn int(buf: &mut Vec<u8>, n: i64) {
    if n < 0 {
        buf.push(b'-');
    }
    uint(buf, n.unsigned_abs());
}

/// Appends nanoseconds as microseconds with three decimals.
#[inline]
fn micros(buf: &mut Vec<u8>, ns: u64) {
    let (whole, frac) = (ns / 1000, (ns % 1000) as usize);
    let at = buf.len();
    let len = digit_count(whole);
    buf.extend_from_slice(&[0; 24]);
    let out = &mut buf[at..at + len + 4];
    digits_into(&mut out[..len], whole);
    out[len] = b'.';
    out[len + 1] = b'0' + (frac / 100) as u8;
    out[len + 2..].copy_from_slice(&PAIRS[frac % 100]);
    buf.truncate(at + len + 4);
}

fn value(buf: &mut Vec<u8>, v: &Value<'_>) {
    match *v {
        Value::I64(v) => int(buf, v),
        Value::U64(v) => uint(buf, v),
        Value::F64(v) if v.is_finite() => {
            let _ = write!(buf, "{v}");
        }
        // As `Display` writes them, quoted.
        Value::F64(v) if v.is_nan() => buf.extend_from_slice(br#""NaN""#),
        Value::F64(v) if v > 0.0 => buf.extend_from_slice(br#""inf""#),
        Value::F64(_) => buf.extend_from_slice(br#""-inf""#),
        Value::Bool(v) => buf.extend_from_slice(if v { b"true" } else { b"false" }),
        Value::Str(s) => string(buf, s),
    }
}

/// Appends `,"args":{...}` for the fields (and the extra flag), or nothing.
#[inline]
fn args(buf: &mut Vec<u8>, fields: &[Field<'_>], unclosed: bool) {
    if fields.is_empty() && !unclosed {
        return;
    }
    buf.extend_from_slice(br#","args":{"#);
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        string(buf, f.name);
        buf.push(b':');
        value(buf, &f.value);
    }
    if unclosed {
        if !fields.is_empty() {
            buf.push(b',');
        }
        buf.extend_from_slice(br#""unclosed":true"#);
    }
    buf.push(b'}');
}

/// Appends `,"pid":P,"tid":T`.
fn ids(buf: &mut Vec<u8>, pid: u64, tid: u64) {
    buf.extend_from_slice(br#","pid":"#);
    uint(buf, pid);
    buf.extend_from_slice(br#","tid":"#);
    uint(buf, tid);
}

impl ChromeSink {
    /// A new sink.
    pub fn new() -> Self {
        ChromeSink::default()
    }

    /// Starts a new event: the separator from the previous one, and `{`.
    #[inline]
    fn open(&mut self) {
        if self.any {
            self.buf.extend_from_slice(b",\n{");
        } else {
            self.any = true;
            self.buf.push(b'{');
        }
    }

    /// A metadata (`M`) event naming a process or thread, or giving a sort index.
    fn metadata(&mut self, what: &str, pid: u64, tid: u64, key: &str, name: Option<&str>, index: u64) {
        self.open();
        self.buf.extend_from_slice(br#""name":"#);
        string(&mut self.buf, what);
        self.buf.extend_from_slice(br#","ph":"M""#);
        ids(&mut self.buf, pid, tid);
        self.buf.extend_from_slice(br#","args":{"#);
        string(&mut self.buf, key);
        self.buf.push(b':');
        match name {
            Some(n) => string(&mut self.buf, n),
            None => uint(&mut self.buf, index),
        }
        self.buf.extend_from_slice(b"}}");
    }

    /// Starts an event with a time: name, category, phase, ids and `ts`; the
    /// caller adds what follows and the closing brace.
    #[inline]
    fn timed(&mut self, name: &str, cat: Option<&str>, ph: &[u8], (pid, tid): (u64, u64), ts: u64) {
        self.open();
        let b = &mut self.buf;
        b.extend_from_slice(br#""name":"#);
        string(b, name);
        if let Some(cat) = cat {
            b.extend_from_slice(br#","cat":"#);
            string(b, cat);
        }
        b.extend_from_slice(br#","ph":"#);
        b.extend_from_slice(ph);
        // Events come in runs on one thread: its ids are encoded once a run.
        if self.last_ids != Some((pid, tid)) {
            self.last_ids = Some((pid, tid));
            self.ids.clear();
            ids(&mut self.ids, pid, tid);
            self.ids.extend_from_slice(br#","ts":"#);
        }
        b.extend_from_slice(&self.ids);
        micros(b, ts);
    }

    /// The pid and tid of a lane's sub-lane; encodes the metadata naming them
    /// the first time.
    fn lane_ids(&mut self, lane: &LaneSlice<'_>) -> (u64, u64) {
        let index = match self.lanes.iter().position(|(n, _)| n == lane.lane) {
            Some(i) => i,
            None => {
                self.lanes.push((lane.lane.to_string(), Vec::new()));
                let i = self.lanes.len() - 1;
                let pid = self.pid as u64 + LANE_PID_BASE * (i as u64 + 1);
                self.metadata("process_name", pid, 0, "name", Some(lane.lane), 0);
                self.metadata("process_sort_index", pid, 0, "sort_index", None, i as u64 + 1);
                i
            }
        };
        let pid = self.pid as u64 + LANE_PID_BASE * (index as u64 + 1);
        let tid = u64::from(lane.track) + 1;
        if !self.lanes[index].1.contains(&lane.track) {
            self.lanes[index].1.push(lane.track);
            let name = format!("{} {}", lane.lane, lane.track);
            self.metadata("thread_name", pid, tid, "name", Some(&name), 0);
        }
        (pid, tid)
    }

    /// Writes what has built up once there is enough of it.
    #[inline]
    fn write_some(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if self.buf.len() < WRITE_AT {
            return Ok(());
        }
        self.write_all(out)
    }

    /// Writes everything built up.
    fn write_all(&mut self, out: &mut dyn Write) -> io::Result<()> {
        let r = out.write_all(&self.buf);
        self.buf.clear();
        r
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
        self.buf.reserve(WRITE_AT + 4 * 1024);
        self.buf.extend_from_slice(b"[\n");
        self.metadata("process_name", self.pid.into(), 0, "name", Some(start.command), 0);
        self.metadata("process_sort_index", self.pid.into(), 0, "sort_index", None, 0);
        self.write_some(out)
    }

    fn event(&mut self, event: &Event<'_>, out: &mut dyn Write) -> io::Result<()> {
        let pid = u64::from(self.pid);
        match *event {
            Event::ThreadName { thread, name } => {
                self.metadata("thread_name", pid, thread, "name", Some(name), 0);
            }
            Event::SpanBegin { thread, ts, site, fields } => {
                self.timed(site.name, Some(site.target), br#""B""#, (pid, thread), ts);
                args(&mut self.buf, fields, false);
                self.buf.push(b'}');
            }
            Event::SpanEnd { thread, ts, site, recorded, unclosed, .. } => {
                self.timed(site.name, None, br#""E""#, (pid, thread), ts);
                args(&mut self.buf, recorded, unclosed);
                self.buf.push(b'}');
            }
            Event::Instant { thread, ts, site, fields } => {
                self.timed(site.name, Some(site.target), br#""i","s":"t""#, (pid, thread), ts);
                args(&mut self.buf, fields, false);
                self.buf.push(b'}');
            }
            Event::Lane(ref slice) => {
                let (lpid, tid) = self.lane_ids(slice);
                self.timed(slice.name, Some(slice.lane), br#""X""#, (lpid, tid), slice.begin_ns);
                let b = &mut self.buf;
                b.extend_from_slice(br#","dur":"#);
                micros(b, slice.end_ns.saturating_sub(slice.begin_ns));
                args(b, slice.fields, false);
                b.push(b'}');
            }
            _ => return Ok(()),
        }
        self.write_some(out)
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
        }
        self.buf.extend_from_slice(b"\n]\n");
        self.write_all(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(s: &str) -> String {
        let mut v = Vec::new();
        string(&mut v, s);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn strings_are_escaped_as_json_requires() {
        for s in ["plain", "quote \" and \\ back", "tab\tnew\nline\r", "\u{1}\u{1f}", "ünï €", ""] {
            let parsed: String = serde_json::from_str(&json(s)).unwrap();
            assert_eq!(parsed, s);
        }
    }

    #[test]
    fn microseconds_keep_every_nanosecond_digit() {
        for (ns, text) in
            [(0, "0.000"), (1, "0.001"), (999, "0.999"), (1_000, "1.000"), (123_456_789, "123456.789")]
        {
            let mut v = Vec::new();
            micros(&mut v, ns);
            assert_eq!(String::from_utf8(v).unwrap(), text);
        }
        let mut v = Vec::new();
        micros(&mut v, u64::MAX);
        assert_eq!(String::from_utf8(v).unwrap(), "18446744073709551.615");
    }

    #[test]
    fn integers_are_written_as_display_writes_them() {
        let mut powers: Vec<u64> = (0..20).map(|e| 10u64.pow(e)).collect();
        powers.extend(powers.clone().iter().map(|p| p - 1));
        powers.extend([u64::MAX, u64::MAX - 1, 42, 4242]);
        for n in powers {
            let mut v = Vec::new();
            uint(&mut v, n);
            assert_eq!(String::from_utf8(v).unwrap(), n.to_string());
            let n = n as i64;
            let mut v = Vec::new();
            int(&mut v, n);
            assert_eq!(String::from_utf8(v).unwrap(), n.to_string());
        }
        for n in [i64::MIN, i64::MIN + 1, -1, -10, -99, -100] {
            let mut v = Vec::new();
            int(&mut v, n);
            assert_eq!(String::from_utf8(v).unwrap(), n.to_string());
        }
    }
}
