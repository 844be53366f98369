//! The JSON text of a trace-event file: events written one after another into
//! one reused buffer, which is handed to the file in pieces.
//!
//! An event is written in three steps: [`JsonWriter::begin_event`] (the
//! separator from the event before, then `name`, `cat`, `ph`, `pid` and
//! `tid`), its other members ([`JsonWriter::time`], [`JsonWriter::uint`]) and
//! `args` entries ([`JsonWriter::arg`], [`JsonWriter::arg_text`]), then
//! [`JsonWriter::end_event`]. An event given no entry has no `args` at all.
//! Nothing here knows what a span is: the sink decides which events to write.

use std::io::{self, Write};

use trace_core::Value;

/// Output is handed to the file once this much has built up, and at the end.
const WRITE_AT: usize = 32 * 1024;

/// The file's bytes not yet handed to it, and where the event being written is.
#[derive(Debug, Default)]
pub(crate) struct JsonWriter {
    buf: Vec<u8>,
    /// Whether an event was written: the next one needs a separator.
    any_event: bool,
    /// Whether the event being written has opened its `args` object.
    args_open: bool,
}

impl JsonWriter {
    /// Opens the file's array.
    pub(crate) fn begin_array(&mut self) {
        self.buf.reserve(WRITE_AT + 4 * 1024);
        self.buf.extend_from_slice(b"[\n");
    }

    /// Closes the file's array.
    pub(crate) fn end_array(&mut self) {
        self.buf.extend_from_slice(b"\n]\n");
    }

    /// Starts an event: `{"name":…,"cat":…,"ph":…,"pid":…,"tid":…`. The name
    /// is the concatenation of `name` (an instant's cut message and its
    /// ellipsis are two parts); `ph` is written as it is, so that a phase
    /// may carry what goes with it (`"i","s":"t"`).
    pub(crate) fn begin_event(&mut self, name: &[&str], cat: Option<&str>, ph: &str, pid: u64, tid: u64) {
        let b = &mut self.buf;
        if self.any_event {
            b.extend_from_slice(b",\n");
        }
        self.any_event = true;
        self.args_open = false;
        b.extend_from_slice(br#"{"name":"#);
        string(b, name);
        if let Some(cat) = cat {
            b.extend_from_slice(br#","cat":"#);
            string(b, &[cat]);
        }
        b.extend_from_slice(br#","ph":"#);
        b.extend_from_slice(ph.as_bytes());
        self.uint("pid", pid);
        self.uint("tid", tid);
    }

    /// Appends the member `key` (a plain key: no escaping), a time in
    /// nanoseconds written as microseconds.
    #[inline]
    pub(crate) fn time(&mut self, key: &str, ns: u64) {
        self.member(key);
        micros(&mut self.buf, ns);
    }

    /// Appends the member `key` (a plain key: no escaping), an integer.
    #[inline]
    pub(crate) fn uint(&mut self, key: &str, n: u64) {
        self.member(key);
        self.buf.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    }

    /// Appends the id of an async event that belongs to its process,
    /// `"id2":{"local":"0x…"}`: a plain `"id"` is global to Perfetto's
    /// importer, whose UI then lists the track apart from every process.
    pub(crate) fn local_id(&mut self, id: u64) {
        use std::io::Write as _;
        let _ = write!(self.buf, r#","id2":{{"local":"{id:#x}"}}"#);
    }

    /// Appends `,"key":`.
    #[inline]
    fn member(&mut self, key: &str) {
        self.buf.extend_from_slice(b",\"");
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.extend_from_slice(b"\":");
    }

    /// Appends the `args` entry `key`, and the separator before it (or the
    /// object's opening).
    #[inline]
    fn arg_key(&mut self, key: &str) {
        if self.args_open {
            self.buf.push(b',');
        } else {
            self.args_open = true;
            self.buf.extend_from_slice(br#","args":{"#);
        }
        string(&mut self.buf, &[key]);
        self.buf.push(b':');
    }

    /// Appends the `args` entry `key` with `value`.
    #[inline]
    pub(crate) fn arg(&mut self, key: &str, value: Value<'_>) {
        self.arg_key(key);
        write_value(&mut self.buf, value);
    }

    /// Appends the `args` entry `key` with a string, the concatenation of `text`.
    pub(crate) fn arg_text(&mut self, key: &str, text: &[&str]) {
        self.arg_key(key);
        string(&mut self.buf, text);
    }

    /// Ends the event begun by [`JsonWriter::begin_event`].
    #[inline]
    pub(crate) fn end_event(&mut self) {
        if self.args_open {
            self.buf.push(b'}');
        }
        self.buf.push(b'}');
    }

    /// Hands what has built up to `out` once it is [`WRITE_AT`] bytes or more.
    #[inline]
    pub(crate) fn write_some(&mut self, out: &mut dyn Write) -> io::Result<()> {
        match self.buf.len() >= WRITE_AT {
            true => self.write_all(out),
            false => Ok(()),
        }
    }

    /// Hands everything built up to `out`. After an error the bytes are
    /// dropped all the same: the capture's writer keeps the error.
    pub(crate) fn write_all(&mut self, out: &mut dyn Write) -> io::Result<()> {
        let written = out.write_all(&self.buf);
        self.buf.clear();
        written
    }
}

/// Appends a JSON string whose text is the concatenation of `parts`.
fn string(b: &mut Vec<u8>, parts: &[&str]) {
    b.push(b'"');
    for part in parts {
        escape(b, part);
    }
    b.push(b'"');
}

/// For each byte, whether a JSON string cannot hold it as it is: the
/// control characters, `"` and `\`.
const NEEDS_ESCAPE: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = true;
        byte += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// Appends `text` as it stands inside a JSON string's quotes: `"`, `\` and
/// the control characters escaped, everything else as it is.
fn escape(b: &mut Vec<u8>, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    b.reserve(text.len());
    for &byte in text.as_bytes() {
        if !NEEDS_ESCAPE[usize::from(byte)] {
            b.push(byte);
            continue;
        }
        match byte {
            b'"' => b.extend_from_slice(br#"\""#),
            b'\\' => b.extend_from_slice(br"\\"),
            b'\n' => b.extend_from_slice(br"\n"),
            b'\r' => b.extend_from_slice(br"\r"),
            b'\t' => b.extend_from_slice(br"\t"),
            _ => b.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ]),
        }
    }
}

/// Appends nanoseconds as microseconds with three decimals.
fn micros(b: &mut Vec<u8>, ns: u64) {
    b.extend_from_slice(itoa::Buffer::new().format(ns / 1000).as_bytes());
    let frac = ns % 1000;
    let digit = |n: u64| b'0' + (n % 10) as u8;
    b.extend_from_slice(&[b'.', digit(frac / 100), digit(frac / 10), digit(frac)]);
}

/// Appends a field's value: integers and booleans as JSON has them, a finite
/// float as `Display` writes it, a non-finite one (which JSON lacks) as the
/// string `Display` writes, text as a string.
fn write_value(b: &mut Vec<u8>, value: Value<'_>) {
    match value {
        Value::I64(n) => b.extend_from_slice(itoa::Buffer::new().format(n).as_bytes()),
        Value::U64(n) => b.extend_from_slice(itoa::Buffer::new().format(n).as_bytes()),
        Value::F64(x) if x.is_finite() => {
            // Writing into a `Vec` cannot fail.
            let _ = write!(b, "{x}");
        }
        Value::F64(x) if x.is_nan() => b.extend_from_slice(br#""NaN""#),
        Value::F64(x) if x > 0.0 => b.extend_from_slice(br#""inf""#),
        Value::F64(_) => b.extend_from_slice(br#""-inf""#),
        Value::Bool(true) => b.extend_from_slice(b"true"),
        Value::Bool(false) => b.extend_from_slice(b"false"),
        Value::Str(s) => string(b, &[s]),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value as Json};

    use super::*;

    /// What `write` leaves in a fresh writer's array, parsed.
    fn written(write: impl FnOnce(&mut JsonWriter)) -> Json {
        let mut w = JsonWriter::default();
        w.begin_array();
        write(&mut w);
        w.end_array();
        let mut out = Vec::new();
        w.write_all(&mut out).unwrap();
        serde_json::from_slice(&out).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out)))
    }

    #[test]
    fn every_character_survives_a_json_parser() {
        let mut text: String = (0u32..0x80).filter_map(char::from_u32).collect();
        text.push_str("é €字𝄞\u{2028}\u{feff}\u{7f}");
        let out = written(|w| {
            w.begin_event(&[&text, "…"], Some(&text), r#""X""#, 1, 2);
            w.arg_text(&text, &[&text, ":", "7"]);
            w.end_event();
        });
        let event = &out[0];
        assert_eq!(event["name"], format!("{text}…"));
        assert_eq!(event["cat"], text);
        assert_eq!(event["args"][&text], format!("{text}:7"));
    }

    #[test]
    fn control_characters_are_escaped_as_json_short_forms_or_unicode_escapes() {
        let mut b = Vec::new();
        escape(&mut b, "a\"b\\c\nd\re\tf\u{0}g\u{1f}h\u{8}");
        assert_eq!(String::from_utf8(b).unwrap(), r#"a\"b\\c\nd\re\tf\u0000g\u001fh\u0008"#);
    }

    #[test]
    fn times_are_microseconds_with_three_decimals() {
        for (ns, text) in [
            (0, "0.000"),
            (1, "0.001"),
            (999, "0.999"),
            (1_000, "1.000"),
            (1_234_567, "1234.567"),
            (u64::MAX, "18446744073709551.615"),
        ] {
            let mut b = Vec::new();
            micros(&mut b, ns);
            assert_eq!(String::from_utf8(b).unwrap(), text, "{ns}");
        }
    }

    #[test]
    fn values_keep_their_kind_and_non_finite_floats_become_strings() {
        let out = written(|w| {
            w.begin_event(&["v"], None, r#""X""#, 1, 2);
            for (key, value) in [
                ("i", Value::I64(i64::MIN)),
                ("u", Value::U64(u64::MAX)),
                ("f", Value::F64(0.5)),
                ("big", Value::F64(1e300)),
                ("nan", Value::F64(f64::NAN)),
                ("inf", Value::F64(f64::INFINITY)),
                ("minus_inf", Value::F64(f64::NEG_INFINITY)),
                ("yes", Value::Bool(true)),
                ("no", Value::Bool(false)),
                ("s", Value::Str("a \"b\"")),
            ] {
                w.arg(key, value);
            }
            w.end_event();
        });
        assert_eq!(
            out[0]["args"],
            json!({"i": i64::MIN, "u": u64::MAX, "f": 0.5, "big": 1e300, "nan": "NaN", "inf": "inf",
                   "minus_inf": "-inf", "yes": true, "no": false, "s": "a \"b\""})
        );
    }

    #[test]
    fn an_event_without_entries_has_no_args_and_events_are_one_a_line() {
        let mut w = JsonWriter::default();
        w.begin_array();
        for tid in [1, 2] {
            w.begin_event(&["e"], None, r#""i","s":"t""#, 7, tid);
            w.time("ts", 1_500);
            w.uint("id", 9);
            w.end_event();
        }
        w.end_array();
        let mut out = Vec::new();
        w.write_all(&mut out).unwrap();
        let expected = concat!(
            "[\n",
            r#"{"name":"e","ph":"i","s":"t","pid":7,"tid":1,"ts":1.500,"id":9}"#,
            ",\n",
            r#"{"name":"e","ph":"i","s":"t","pid":7,"tid":2,"ts":1.500,"id":9}"#,
            "\n]\n"
        );
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn output_waits_in_the_buffer_until_a_piece_is_full() {
        let mut w = JsonWriter::default();
        let mut out = Vec::new();
        w.begin_array();
        w.write_some(&mut out).unwrap();
        assert!(out.is_empty());
        while out.is_empty() {
            w.begin_event(&["e"], None, r#""i""#, 1, 1);
            w.end_event();
            w.write_some(&mut out).unwrap();
        }
        assert!(out.len() >= WRITE_AT && w.buf.is_empty(), "{}", out.len());
    }
}
