//! The OTLP/JSON pieces the sink writes: strings, ids, attributes.
//!
//! OTLP/JSON is proto3's JSON mapping with exceptions, each handled here:
//! ids are lowercase hex (not base64), 64-bit integers are decimal strings,
//! enums are integers, keys are lowerCamelCase.

use trace_core::{Field, Value};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` as a JSON string.
pub(crate) fn string(buf: &mut Vec<u8>, s: &str) {
    // Writing to a `Vec` cannot fail, and a `str` always serialises.
    let _ = serde_json::to_writer(&mut *buf, s);
}

/// Appends `bytes` as a quoted lowercase hex string, as OTLP/JSON writes ids.
pub(crate) fn hex(buf: &mut Vec<u8>, bytes: &[u8]) {
    buf.push(b'"');
    for b in bytes {
        buf.push(HEX[(b >> 4) as usize]);
        buf.push(HEX[(b & 0xf) as usize]);
    }
    buf.push(b'"');
}

/// Appends `n` as a quoted decimal, as OTLP/JSON writes 64-bit integers.
pub(crate) fn quoted_int(buf: &mut Vec<u8>, n: impl std::fmt::Display) {
    use std::io::Write;
    let _ = write!(buf, "\"{n}\"");
}

/// Appends an `AnyValue` object.
pub(crate) fn any_value(buf: &mut Vec<u8>, v: &Value<'_>) {
    match *v {
        Value::I64(n) => {
            buf.extend_from_slice(br#"{"intValue":"#);
            quoted_int(buf, n);
        }
        Value::U64(n) if n <= i64::MAX as u64 => {
            buf.extend_from_slice(br#"{"intValue":"#);
            quoted_int(buf, n);
        }
        // Beyond int64: kept exact as text rather than wrapped or rounded.
        Value::U64(n) => {
            buf.extend_from_slice(br#"{"stringValue":"#);
            quoted_int(buf, n);
        }
        Value::F64(x) => {
            buf.extend_from_slice(br#"{"doubleValue":"#);
            if x.is_finite() {
                let _ = serde_json::to_writer(&mut *buf, &x);
            } else if x.is_nan() {
                buf.extend_from_slice(br#""NaN""#);
            } else if x > 0.0 {
                buf.extend_from_slice(br#""Infinity""#);
            } else {
                buf.extend_from_slice(br#""-Infinity""#);
            }
        }
        Value::Bool(b) => {
            buf.extend_from_slice(br#"{"boolValue":"#);
            buf.extend_from_slice(if b { b"true" } else { b"false" });
        }
        Value::Str(s) => {
            buf.extend_from_slice(br#"{"stringValue":"#);
            string(buf, s);
        }
    }
    buf.push(b'}');
}

/// Appends one `KeyValue`.
pub(crate) fn key_value(buf: &mut Vec<u8>, key: &str, v: &Value<'_>) {
    buf.extend_from_slice(br#"{"key":"#);
    string(buf, key);
    buf.extend_from_slice(br#","value":"#);
    any_value(buf, v);
    buf.push(b'}');
}

/// Appends `,"attributes":[...]` holding `pairs`, or nothing when there are none.
pub(crate) fn attributes<'a>(buf: &mut Vec<u8>, pairs: impl IntoIterator<Item = (&'a str, Value<'a>)>) {
    let mut any = false;
    for (k, v) in pairs {
        buf.extend_from_slice(if any { b"," } else { br#","attributes":["# });
        any = true;
        key_value(buf, k, &v);
    }
    if any {
        buf.push(b']');
    }
}

/// The pairs of `fields`, for [`attributes`].
pub(crate) fn pairs<'a>(fields: &'a [Field<'a>]) -> impl Iterator<Item = (&'a str, Value<'a>)> + 'a {
    fields.iter().map(|f| (f.name, f.value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut v = Vec::new();
        f(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn ids_are_lowercase_hex_of_twice_their_byte_length() {
        assert_eq!(text(|b| hex(b, &[0x00, 0xab, 0x0f, 0xff])), r#""00ab0fff""#);
    }

    #[test]
    fn sixty_four_bit_integers_are_decimal_strings_and_a_too_large_unsigned_one_stays_exact() {
        assert_eq!(text(|b| any_value(b, &Value::I64(-7))), r#"{"intValue":"-7"}"#);
        assert_eq!(
            text(|b| any_value(b, &Value::U64(i64::MAX as u64))),
            r#"{"intValue":"9223372036854775807"}"#
        );
        assert_eq!(
            text(|b| any_value(b, &Value::U64(u64::MAX))),
            r#"{"stringValue":"18446744073709551615"}"#
        );
    }

    #[test]
    fn doubles_that_json_cannot_hold_are_written_as_proto3_spells_them() {
        assert_eq!(text(|b| any_value(b, &Value::F64(1.5))), r#"{"doubleValue":1.5}"#);
        assert_eq!(text(|b| any_value(b, &Value::F64(f64::NAN))), r#"{"doubleValue":"NaN"}"#);
        assert_eq!(text(|b| any_value(b, &Value::F64(f64::INFINITY))), r#"{"doubleValue":"Infinity"}"#);
        assert_eq!(text(|b| any_value(b, &Value::F64(f64::NEG_INFINITY))), r#"{"doubleValue":"-Infinity"}"#);
    }

    #[test]
    fn strings_are_escaped() {
        let s = "a \"q\" \\ \n \u{1} ü";
        let back: String = serde_json::from_str(&text(|b| string(b, s))).unwrap();
        assert_eq!(back, s);
    }
}
