//! The JSON encoder of the Chrome sink: strings, numbers and times written
//! straight into a byte buffer, and the parts every trace event shares (its
//! separator, name, phase, ids and time, its `args` object).
//!
//! Nothing here knows what a span or a capture is: [`crate::ChromeSink`]
//! decides which events to write, this module how their bytes look. Output
//! is byte-for-byte what `tests/oracle` (a plain encoder written for clarity)
//! writes, which `tests/same_bytes.rs` checks on varied streams. [`Events`]
//! also holds the room where [`crate::spans`] writes the usual span in
//! place, after the events of its buffer.

use std::io::{self, Write};

use trace_core::{Field, Value};

use crate::rendered::Rendered;
use crate::room::ROOM;

/// Output is handed to the writer once this much has built up (and at the
/// finish): larger than the capture's file buffer, so it goes straight through.
pub(crate) const WRITE_AT: usize = 32 * 1024;

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
pub(crate) fn plain_prefix(bytes: &[u8]) -> usize {
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
pub(crate) fn string(buf: &mut Vec<u8>, s: &str) {
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
pub(crate) const PAIRS: [[u8; 2]; 100] = {
    let mut pairs = [[0; 2]; 100];
    let mut i = 0;
    while i < 100 {
        pairs[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    pairs
};

/// The room [`uint`] and [`micros`] write a number in: more than the 21
/// bytes of the longest (`u64::MAX` nanoseconds as microseconds).
pub(crate) const NUMBER: usize = 24;

/// Writes the digits of `n` two at a time, backwards, so that they end
/// before `end` of `out`; returns where they start.
// Always inlined: a call costs a fifth of what it does for a short number.
#[inline(always)]
pub(crate) fn digits_before(out: &mut [u8], mut end: usize, mut n: u64) -> usize {
    while n >= 100 {
        end -= 2;
        out[end..end + 2].copy_from_slice(&PAIRS[(n % 100) as usize]);
        n /= 100;
    }
    if n >= 10 {
        end -= 2;
        out[end..end + 2].copy_from_slice(&PAIRS[n as usize]);
    } else {
        end -= 1;
        out[end] = b'0' + n as u8;
    }
    end
}

/// Appends `number[from..NUMBER]`, as a copy of a fixed length (no call to
/// copy a variable one) trimmed after.
#[inline]
fn put_number(buf: &mut Vec<u8>, number: &[u8; 2 * NUMBER], from: usize) {
    let at = buf.len();
    let fixed: &[u8; NUMBER] = number[from..from + NUMBER].try_into().expect("NUMBER bytes");
    buf.extend_from_slice(fixed);
    buf.truncate(at + NUMBER - from);
}

/// Appends `n` in decimal.
#[inline]
pub(crate) fn uint(buf: &mut Vec<u8>, n: u64) {
    if n < 10 {
        buf.push(b'0' + n as u8);
        return;
    }
    let mut number = [0; 2 * NUMBER];
    let from = digits_before(&mut number, NUMBER, n);
    put_number(buf, &number, from);
}

/// The whole seconds of a time in nanoseconds, and the nanoseconds after them.
#[inline]
fn seconds(ns: u64) -> (u64, u32) {
    (ns / 1_000_000_000, (ns % 1_000_000_000) as u32)
}

/// Appends the part of a time after its whole seconds (`rest`, below 10^9
/// nanoseconds) as [`micros`] writes it after the seconds' digits: six
/// digits of microseconds, the point and three of nanoseconds.
#[inline]
fn subsecond(buf: &mut Vec<u8>, rest: u32) {
    let (us, frac) = (rest / 1000, rest % 1000);
    let mut digits = [b'.'; 10];
    digits[0..2].copy_from_slice(&PAIRS[(us / 10_000) as usize]);
    digits[2..4].copy_from_slice(&PAIRS[(us / 100 % 100) as usize]);
    digits[4..6].copy_from_slice(&PAIRS[(us % 100) as usize]);
    digits[7] = b'0' + (frac / 100) as u8;
    digits[8..10].copy_from_slice(&PAIRS[(frac % 100) as usize]);
    buf.extend_from_slice(&digits);
}

/// Appends `n` in decimal.
pub(crate) fn int(buf: &mut Vec<u8>, n: i64) {
    if n < 0 {
        buf.push(b'-');
    }
    uint(buf, n.unsigned_abs());
}

/// Appends nanoseconds as microseconds with three decimals.
#[inline]
pub(crate) fn micros(buf: &mut Vec<u8>, ns: u64) {
    let (whole, frac) = (ns / 1000, (ns % 1000) as usize);
    let mut number = [0; 2 * NUMBER];
    number[NUMBER - 4] = b'.';
    number[NUMBER - 3] = b'0' + (frac / 100) as u8;
    number[NUMBER - 2..NUMBER].copy_from_slice(&PAIRS[frac % 100]);
    let from = digits_before(&mut number, NUMBER - 4, whole);
    put_number(buf, &number, from);
}

#[inline]
pub(crate) fn value(buf: &mut Vec<u8>, v: &Value<'_>) {
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

/// Appends `s` as a JSON string followed, inside the quotes, by `tail`,
/// which must need no escaping (the ellipsis of a shortened name, a
/// `:line` suffix).
pub(crate) fn string_then(buf: &mut Vec<u8>, s: &str, tail: &[u8]) {
    debug_assert!(tail.iter().all(|&b| !needs_escape(b)));
    string(buf, s);
    buf.pop();
    buf.extend_from_slice(tail);
    buf.push(b'"');
}

/// The `args` object of one event, written as its entries come: nothing at
/// all when it gets none.
pub(crate) struct Args<'b> {
    buf: &'b mut Vec<u8>,
    open: bool,
}

impl<'b> Args<'b> {
    /// Starts the `args` of the event being written into `buf`.
    #[inline]
    pub(crate) fn new(buf: &'b mut Vec<u8>) -> Self {
        Args { buf, open: false }
    }

    /// Appends the separator before the next entry.
    #[inline]
    fn next(&mut self) {
        if self.open {
            self.buf.push(b',');
        } else {
            self.open = true;
            self.buf.extend_from_slice(br#","args":{"#);
        }
    }

    /// Appends the key of the next entry and its colon, and returns the
    /// buffer for its value.
    #[inline]
    pub(crate) fn key(&mut self, key: &str) -> &mut Vec<u8> {
        self.next();
        string(self.buf, key);
        self.buf.push(b':');
        self.buf
    }

    /// Appends `entries`, one or more `"key":value` entries rendered
    /// beforehand, as the next.
    #[inline]
    pub(crate) fn entries(&mut self, entries: &[u8]) {
        self.next();
        self.buf.extend_from_slice(entries);
    }

    /// Appends each field as an entry, its key (`"name":`) taken from
    /// `keys`, where it is rendered once per name; `fixed`: the names are
    /// `'static` ([`Rendered::get`]).
    #[inline]
    pub(crate) fn fields(&mut self, fields: &[Field<'_>], keys: &mut Rendered, fixed: bool) {
        for f in fields {
            self.next();
            let key = keys.get([f.name, ""], 0, fixed, |b, [name, _]| {
                string(b, name);
                b.push(b':');
            });
            self.buf.extend_from_slice(key);
            value(self.buf, &f.value);
        }
    }

    /// Closes the object, if it was opened.
    #[inline]
    pub(crate) fn close(self) {
        if self.open {
            self.buf.push(b'}');
        }
    }
}

/// Appends the name (followed inside its quotes by `name_tail`), category
/// and phase of a timed event: `"name":…,"cat":…,"ph":…`.
#[inline]
pub(crate) fn head(b: &mut Vec<u8>, (name, name_tail): (&str, &[u8]), cat: Option<&str>, ph: &[u8]) {
    b.extend_from_slice(br#""name":"#);
    if name_tail.is_empty() {
        string(b, name);
    } else {
        string_then(b, name, name_tail);
    }
    if let Some(cat) = cat {
        b.extend_from_slice(br#","cat":"#);
        string(b, cat);
    }
    b.extend_from_slice(br#","ph":"#);
    b.extend_from_slice(ph);
}

/// Appends `,"pid":P,"tid":T`.
fn ids(buf: &mut Vec<u8>, pid: u64, tid: u64) {
    buf.extend_from_slice(br#","pid":"#);
    uint(buf, pid);
    buf.extend_from_slice(br#","tid":"#);
    uint(buf, tid);
}

/// Appends `,"pid":P,"tid":T,"ts":`.
pub(crate) fn ids_then_ts(buf: &mut Vec<u8>, pid: u64, tid: u64) {
    ids(buf, pid, tid);
    buf.extend_from_slice(br#","ts":"#);
}

/// The file's bytes not yet written: the opening bracket, then events
/// separated by `,\n`, each encoded here and handed to the writer in pieces
/// of at least [`WRITE_AT`] bytes.
#[derive(Debug, Default)]
pub(crate) struct Events {
    /// Output not yet written.
    pub(crate) buf: Vec<u8>,
    /// Whether an event has been encoded (the next one needs a separator).
    any: bool,
    /// The process and thread of the last timed event, and its encoded
    /// `,"pid":P,"tid":T,"ts":`.
    last_ids: Option<(u64, u64)>,
    ids: Vec<u8>,
    /// The whole seconds of the last event's time, and their digits: a run
    /// of events shares them, so only the rest is encoded per event.
    seconds: Option<u64>,
    seconds_digits: Vec<u8>,
    /// Events written in place by [`Events::room`] after those of `buf`
    /// (any other event first moves them to `buf`): [`FAST`] bytes once
    /// used, the first `fast_len` of them written; made with the first
    /// event written in place.
    fast: Option<Box<[u8; FAST]>>,
    fast_len: usize,
    /// The `fast_len` from which [`Events::room`] first drains `fast`, or
    /// gives none before the first event: 0 until then.
    room_end: usize,
    /// Whether events may be written in place: once the first
    /// [`WRITE_AT`] bytes are written out. A short capture's few events
    /// go the general way and never make `fast` (40 KiB whose zeroing
    /// took ten page faults of a fresh process, for a file of 2 KiB).
    in_place_on: bool,
}

/// [`Events::fast`], zeroed by the allocator.
fn zeroed_fast() -> Box<[u8; FAST]> {
    // The length is FAST, so the conversion cannot fail; were it to, the
    // array written whole is the same buffer.
    vec![0u8; FAST].into_boxed_slice().try_into().unwrap_or_else(|_| Box::new([0; FAST]))
}

/// The bytes of [`Events::fast`]: what builds up before it is written, and
/// room for one more event.
const FAST: usize = WRITE_AT + 2 * ROOM;

impl Events {
    /// Opens the array.
    pub(crate) fn begin(&mut self) {
        self.buf.reserve(WRITE_AT + 4 * 1024);
        self.buf.extend_from_slice(b"[\n");
    }

    /// Closes the array.
    pub(crate) fn end(&mut self) {
        self.drain();
        self.buf.extend_from_slice(b"\n]\n");
    }

    /// Moves the events written in place to `buf`, before another is
    /// written there.
    #[inline]
    fn drain(&mut self) {
        if let (Some(fast), true) = (&self.fast, self.fast_len > 0) {
            self.buf.extend_from_slice(&fast[..self.fast_len.min(FAST)]);
        }
        self.fast_len = 0;
    }

    /// Room to write the next event in place, its bytes from the separator
    /// from the event before (`,\n{`) to its closing brace, to be kept by
    /// [`Events::commit`]; `None` before the first event (which has no
    /// separator).
    #[inline]
    pub(crate) fn room(&mut self) -> Option<&mut [u8; ROOM]> {
        if self.fast_len >= self.room_end {
            if !self.any || !self.in_place_on {
                return None;
            }
            self.room_end = FAST - ROOM + 1;
            self.drain();
            if self.fast.is_none() {
                self.fast = Some(zeroed_fast());
            }
        }
        let fast = self.fast.as_mut()?;
        fast[self.fast_len.min(FAST - ROOM)..].first_chunk_mut()
    }

    /// How many bytes of events written in place are waiting.
    #[cfg(test)]
    pub(crate) fn in_place(&self) -> usize {
        self.fast_len
    }

    /// Keeps the first `n` bytes written in the [`Events::room`] given last.
    #[inline]
    pub(crate) fn commit(&mut self, n: usize) {
        self.fast_len += n.min(ROOM);
    }

    /// Starts a new event: the separator from the previous one, and `{`.
    #[inline]
    fn open(&mut self) {
        self.drain();
        if self.any {
            self.buf.extend_from_slice(b",\n{");
        } else {
            self.any = true;
            self.buf.push(b'{');
        }
    }

    /// A metadata (`M`) event naming a process or thread, or giving a sort index.
    pub(crate) fn metadata(
        &mut self,
        what: &str,
        (pid, tid): (u64, u64),
        key: &str,
        name: Option<&str>,
        index: u64,
    ) {
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

    /// Starts an event with a time: name (followed inside its quotes by
    /// `name_tail`), category, phase, ids and `ts`; the caller adds what
    /// follows and then calls [`Events::close`].
    #[inline]
    pub(crate) fn timed(
        &mut self,
        (name, name_tail): (&str, &[u8]),
        cat: Option<&str>,
        ph: &[u8],
        ids: (u64, u64),
        ts: u64,
    ) -> &mut Vec<u8> {
        self.open();
        head(&mut self.buf, (name, name_tail), cat, ph);
        self.ids_and_ts(ids, ts)
    }

    /// [`Events::timed`] with what follows the name (`,"cat":…,"ph":…`, as
    /// [`head`] writes it) rendered beforehand.
    #[inline]
    pub(crate) fn timed_then(
        &mut self,
        (name, name_tail): (&str, &[u8]),
        after_name: &[u8],
        ids: (u64, u64),
        ts: u64,
    ) -> &mut Vec<u8> {
        self.open();
        self.buf.extend_from_slice(br#""name":"#);
        if name_tail.is_empty() {
            string(&mut self.buf, name);
        } else {
            string_then(&mut self.buf, name, name_tail);
        }
        self.buf.extend_from_slice(after_name);
        self.ids_and_ts(ids, ts)
    }

    /// [`Events::timed`] with its name, category and phase rendered
    /// beforehand (by [`head`]).
    #[inline]
    pub(crate) fn timed_rendered(&mut self, head: &[u8], ids: (u64, u64), ts: u64) -> &mut Vec<u8> {
        self.open();
        self.buf.extend_from_slice(head);
        self.ids_and_ts(ids, ts)
    }

    /// Appends `,"pid":P,"tid":T,"ts":` and the time.
    #[inline]
    fn ids_and_ts(&mut self, (pid, tid): (u64, u64), ts: u64) -> &mut Vec<u8> {
        // Events come in runs on one thread: its ids are encoded once a run.
        if self.last_ids != Some((pid, tid)) {
            self.last_ids = Some((pid, tid));
            self.ids.clear();
            ids_then_ts(&mut self.ids, pid, tid);
        }
        self.buf.extend_from_slice(&self.ids);
        self.ts(ts);
        &mut self.buf
    }

    /// Appends a time, as [`micros`] writes it: the digits of its whole
    /// seconds (kept from the event before when they are the same), then
    /// [`subsecond`].
    #[inline]
    fn ts(&mut self, ns: u64) {
        let (seconds, rest) = seconds(ns);
        if seconds == 0 {
            return micros(&mut self.buf, ns);
        }
        if self.seconds != Some(seconds) {
            self.seconds = Some(seconds);
            self.seconds_digits.clear();
            uint(&mut self.seconds_digits, seconds);
        }
        self.buf.extend_from_slice(&self.seconds_digits);
        subsecond(&mut self.buf, rest);
    }

    /// Starts an event with `piece`, which begins with the separator from
    /// the event before (`,\n{`), left out for the first event; returns the
    /// buffer for the rest, to be ended by [`Events::close`].
    #[inline]
    pub(crate) fn open_with(&mut self, piece: &[u8]) -> &mut Vec<u8> {
        self.drain();
        if self.any {
            self.buf.extend_from_slice(piece);
        } else {
            self.any = true;
            self.buf.extend_from_slice(&piece[2..]);
        }
        &mut self.buf
    }

    /// Ends the event begun by [`Events::timed`].
    #[inline]
    pub(crate) fn close(&mut self) {
        self.buf.push(b'}');
    }

    /// Writes what has built up once there is enough of it.
    #[inline]
    pub(crate) fn write_some(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if self.buf.len() + self.fast_len < WRITE_AT {
            return Ok(());
        }
        self.write_all(out)
    }

    /// Lets events be written in place from the next on, however few were
    /// written out.
    #[cfg(test)]
    pub(crate) fn in_place_at_once(&mut self) {
        self.in_place_on = true;
    }

    /// Writes everything built up.
    pub(crate) fn write_all(&mut self, out: &mut dyn Write) -> io::Result<()> {
        self.in_place_on = true;
        if let (Some(fast), true) = (&self.fast, self.buf.is_empty()) {
            let r = out.write_all(&fast[..self.fast_len.min(FAST)]);
            self.fast_len = 0;
            return r;
        }
        self.drain();
        let r = out.write_all(&self.buf);
        self.buf.clear();
        r
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
    fn a_time_whose_seconds_are_kept_from_the_event_before_is_written_as_micros_writes_it() {
        let mut events = Events::default();
        let mut times = vec![0, 999, 1_000_000_000, 1_000_000_001, 1_999_999_999, u64::MAX];
        // A run within one second, then across a few, then a step back.
        times.extend((0..40).map(|i| 17_000_000_000_123 + i * 123_456_789));
        times.push(17_000_000_000_000);
        for ns in times {
            events.buf.clear();
            events.ts(ns);
            let mut expected = Vec::new();
            micros(&mut expected, ns);
            assert_eq!(String::from_utf8_lossy(&events.buf), String::from_utf8_lossy(&expected), "{ns}");
        }
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
