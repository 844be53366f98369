//! The one OTLP/JSON writer of the model ([`crate::model`]): the sink's
//! lines of spans and the exporter's metrics.
//!
//! Each of OTLP's exceptions to proto3's JSON mapping is one function here:
//! ids are lowercase hex ([`hex`], never base64), 64-bit integers are decimal
//! strings ([`decimal`]), enums are integers, keys are lowerCamelCase; fields
//! at their default are left out where proto3 allows it. The structure is
//! written by hand; `serde_json` escapes strings and formats doubles, `itoa`
//! formats integers. `serde`'s derived serializers for the same model were
//! measurably slower end to end with `otlp` on (they pass every key through
//! the string escaper; the engineering notebook has the run), so the model
//! derives only `Deserialize`, for reading.

use crate::model::{
    AnyValue, KeyValue, Metric, MetricData, MetricsData, Number, NumberDataPoint, Resource, Scope, Span,
    SpanEvent,
};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` as a JSON string.
fn string(out: &mut Vec<u8>, s: &str) {
    // Writing to a `Vec` cannot fail, and a `str` always serialises.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Appends `bytes` as a quoted lowercase hex string, as OTLP/JSON writes ids.
fn hex(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    for b in bytes {
        out.push(HEX[usize::from(b >> 4)]);
        out.push(HEX[usize::from(b & 0xf)]);
    }
    out.push(b'"');
}

/// Appends `n` as a quoted decimal, as OTLP/JSON writes 64-bit integers.
fn decimal(out: &mut Vec<u8>, n: impl itoa::Integer) {
    out.push(b'"');
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.push(b'"');
}

/// Appends an enum's number.
fn integer(out: &mut Vec<u8>, n: i32) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Appends a double, with proto3's spellings of what JSON cannot hold.
fn double(out: &mut Vec<u8>, x: f64) {
    if x.is_finite() {
        let _ = serde_json::to_writer(&mut *out, &x);
    } else if x.is_nan() {
        out.extend_from_slice(br#""NaN""#);
    } else if x > 0.0 {
        out.extend_from_slice(br#""Infinity""#);
    } else {
        out.extend_from_slice(br#""-Infinity""#);
    }
}

/// Appends `[item,item,...]`.
fn list<T>(out: &mut Vec<u8>, items: &[T], mut item: impl FnMut(&mut Vec<u8>, &T)) {
    out.push(b'[');
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        item(out, x);
    }
    out.push(b']');
}

/// Appends an `AnyValue` object.
fn any_value(out: &mut Vec<u8>, v: &AnyValue<'_>) {
    match v {
        AnyValue::Str(s) => {
            out.extend_from_slice(br#"{"stringValue":"#);
            string(out, s);
        }
        AnyValue::Bool(b) => {
            out.extend_from_slice(br#"{"boolValue":"#);
            out.extend_from_slice(if *b { b"true" } else { b"false" });
        }
        AnyValue::Int(n) => {
            out.extend_from_slice(br#"{"intValue":"#);
            decimal(out, *n);
        }
        AnyValue::Double(x) => {
            out.extend_from_slice(br#"{"doubleValue":"#);
            double(out, *x);
        }
        AnyValue::Array(items) => {
            out.extend_from_slice(br#"{"arrayValue":{"values":"#);
            list(out, items, any_value);
            out.push(b'}');
        }
        AnyValue::KvList(kvs) => {
            out.extend_from_slice(br#"{"kvlistValue":{"values":"#);
            list(out, kvs, key_value);
            out.push(b'}');
        }
        AnyValue::Bytes(bytes) => {
            out.extend_from_slice(br#"{"bytesValue":"#);
            string(out, &base64(bytes));
        }
    }
    out.push(b'}');
}

fn base64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            out.push(if i <= c.len() { T[(n >> shift) as usize & 63] as char } else { '=' });
        }
    }
    out
}

/// Appends one `KeyValue`.
fn key_value(out: &mut Vec<u8>, kv: &KeyValue<'_>) {
    out.extend_from_slice(br#"{"key":"#);
    string(out, &kv.key);
    out.extend_from_slice(br#","value":"#);
    any_value(out, &kv.value);
    out.push(b'}');
}

/// Appends `,"attributes":[...]`, or nothing when there are none.
fn attributes(out: &mut Vec<u8>, kvs: &[KeyValue<'_>]) {
    if !kvs.is_empty() {
        out.extend_from_slice(br#","attributes":"#);
        list(out, kvs, key_value);
    }
}

fn resource(out: &mut Vec<u8>, r: &Resource<'_>) {
    out.extend_from_slice(br#"{"attributes":"#);
    list(out, &r.attributes, key_value);
    out.push(b'}');
}

fn scope(out: &mut Vec<u8>, s: &Scope<'_>) {
    out.extend_from_slice(br#"{"name":"#);
    string(out, &s.name);
    if !s.version.is_empty() {
        out.extend_from_slice(br#","version":"#);
        string(out, &s.version);
    }
    out.push(b'}');
}

fn span_event(out: &mut Vec<u8>, e: &SpanEvent<'_>) {
    out.extend_from_slice(br#"{"timeUnixNano":"#);
    decimal(out, e.time_unix_nano);
    out.extend_from_slice(br#","name":"#);
    string(out, &e.name);
    attributes(out, &e.attributes);
    out.push(b'}');
}

/// Appends one span.
pub(crate) fn span(out: &mut Vec<u8>, s: &Span<'_>) {
    out.extend_from_slice(br#"{"traceId":"#);
    hex(out, &s.trace_id);
    out.extend_from_slice(br#","spanId":"#);
    hex(out, &s.span_id);
    if !s.trace_state.is_empty() {
        out.extend_from_slice(br#","traceState":"#);
        string(out, &s.trace_state);
    }
    if let Some(parent) = &s.parent_span_id {
        out.extend_from_slice(br#","parentSpanId":"#);
        hex(out, parent);
    }
    out.extend_from_slice(br#","name":"#);
    string(out, &s.name);
    out.extend_from_slice(br#","kind":"#);
    integer(out, s.kind);
    out.extend_from_slice(br#","startTimeUnixNano":"#);
    decimal(out, s.start_time_unix_nano);
    out.extend_from_slice(br#","endTimeUnixNano":"#);
    decimal(out, s.end_time_unix_nano);
    attributes(out, &s.attributes);
    if !s.events.is_empty() {
        out.extend_from_slice(br#","events":"#);
        list(out, &s.events, span_event);
    }
    if let Some(status) = &s.status {
        out.extend_from_slice(br#","status":{"#);
        if !status.message.is_empty() {
            out.extend_from_slice(br#""message":"#);
            string(out, &status.message);
            out.push(b',');
        }
        out.extend_from_slice(br#""code":"#);
        integer(out, status.code);
        out.push(b'}');
    }
    out.push(b'}');
}

/// Appends the start of a `TracesData` of one resource and one scope, up to
/// its first span; the spans follow, comma-separated, then [`TRACES_TAIL`].
pub(crate) fn traces_head(out: &mut Vec<u8>, r: &Resource<'_>, s: &Scope<'_>) {
    out.extend_from_slice(br#"{"resourceSpans":[{"resource":"#);
    resource(out, r);
    out.extend_from_slice(br#","scopeSpans":[{"scope":"#);
    scope(out, s);
    out.extend_from_slice(br#","spans":["#);
}

/// What closes a [`traces_head`] and its spans.
pub(crate) const TRACES_TAIL: &[u8] = b"]}]}]}";

fn data_point(out: &mut Vec<u8>, p: &NumberDataPoint<'_>) {
    out.extend_from_slice(br#"{"attributes":"#);
    list(out, &p.attributes, key_value);
    out.extend_from_slice(br#","startTimeUnixNano":"#);
    decimal(out, p.start_time_unix_nano);
    out.extend_from_slice(br#","timeUnixNano":"#);
    decimal(out, p.time_unix_nano);
    match p.value {
        Number::Int(n) => {
            out.extend_from_slice(br#","asInt":"#);
            decimal(out, n);
        }
        Number::Double(x) => {
            out.extend_from_slice(br#","asDouble":"#);
            double(out, x);
        }
    }
    out.push(b'}');
}

fn metric(out: &mut Vec<u8>, m: &Metric<'_>) {
    out.extend_from_slice(br#"{"name":"#);
    string(out, &m.name);
    out.extend_from_slice(br#","description":"#);
    string(out, &m.description);
    out.extend_from_slice(br#","unit":"#);
    string(out, &m.unit);
    match &m.data {
        MetricData::Gauge(points) => {
            out.extend_from_slice(br#","gauge":{"dataPoints":"#);
            list(out, points, data_point);
        }
        MetricData::Sum { points, temporality, monotonic } => {
            out.extend_from_slice(br#","sum":{"dataPoints":"#);
            list(out, points, data_point);
            out.extend_from_slice(br#","aggregationTemporality":"#);
            integer(out, *temporality);
            out.extend_from_slice(br#","isMonotonic":"#);
            out.extend_from_slice(if *monotonic { b"true" } else { b"false" });
        }
    }
    out.extend_from_slice(b"}}");
}

/// Appends a whole `MetricsData`.
pub(crate) fn metrics_data(out: &mut Vec<u8>, data: &MetricsData<'_>) {
    out.extend_from_slice(br#"{"resourceMetrics":"#);
    list(out, &data.resource_metrics, |out, rm| {
        out.extend_from_slice(br#"{"resource":"#);
        resource(out, &rm.resource);
        out.extend_from_slice(br#","scopeMetrics":"#);
        list(out, &rm.scope_metrics, |out, sm| {
            out.extend_from_slice(br#"{"scope":"#);
            scope(out, &sm.scope);
            out.extend_from_slice(br#","metrics":"#);
            list(out, &sm.metrics, metric);
            out.push(b'}');
        });
        out.push(b'}');
    });
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;
    use crate::model::{ResourceMetrics, ScopeMetrics, Status, TracesData};

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
    fn sixty_four_bit_integers_are_decimal_strings() {
        assert_eq!(text(|b| any_value(b, &AnyValue::Int(-7))), r#"{"intValue":"-7"}"#);
        assert_eq!(text(|b| any_value(b, &AnyValue::Int(i64::MAX))), r#"{"intValue":"9223372036854775807"}"#);
    }

    #[test]
    fn doubles_that_json_cannot_hold_are_written_as_proto3_spells_them() {
        let d = |x: f64| text(|b| any_value(b, &AnyValue::Double(x)));
        assert_eq!(d(1.5), r#"{"doubleValue":1.5}"#);
        assert_eq!(d(f64::NAN), r#"{"doubleValue":"NaN"}"#);
        assert_eq!(d(f64::INFINITY), r#"{"doubleValue":"Infinity"}"#);
        assert_eq!(d(f64::NEG_INFINITY), r#"{"doubleValue":"-Infinity"}"#);
    }

    #[test]
    fn strings_are_escaped() {
        let s = "a \"q\" \\ \n \u{1} ü";
        let back: String = serde_json::from_str(&text(|b| string(b, s))).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn base64_matches_the_rfc_4648_examples() {
        for (raw, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
        ] {
            assert_eq!(base64(raw.as_bytes()), enc);
        }
    }

    #[test]
    fn a_line_of_spans_reads_back_as_the_model_it_was_written_from() {
        let nested = AnyValue::KvList(vec![KeyValue {
            key: "list".into(),
            value: AnyValue::Array(vec![AnyValue::Bool(true), AnyValue::Double(f64::INFINITY)]),
        }]);
        let child = Span {
            trace_id: [0xab; 16],
            span_id: [1; 8],
            trace_state: Cow::Borrowed("k=v"),
            parent_span_id: Some([2; 8]),
            name: "resolve \"x\"".into(),
            kind: crate::model::SPAN_KIND_INTERNAL,
            start_time_unix_nano: 1,
            end_time_unix_nano: u64::MAX,
            attributes: vec![KeyValue::int("n", i64::MIN), KeyValue { key: "nested".into(), value: nested }],
            events: vec![SpanEvent { time_unix_nano: 2, name: "e".into(), attributes: vec![] }],
            status: Some(Status { message: "m".into(), code: 2 }),
        };
        let root = Span {
            parent_span_id: None,
            events: vec![],
            status: None,
            trace_state: "".into(),
            ..child.clone()
        };
        let resource = Resource { attributes: vec![KeyValue::str("service.name", "cabin")] };
        let scope = Scope { name: "s".into(), version: "1".into() };
        let line = text(|b| {
            traces_head(b, &resource, &scope);
            span(b, &root);
            b.push(b',');
            span(b, &child);
            b.extend_from_slice(TRACES_TAIL);
        });
        assert!(line.contains(r#""endTimeUnixNano":"18446744073709551615""#), "{line}");
        let back: TracesData<'_> = serde_json::from_str(&line).unwrap();
        assert_eq!(back.span_count(), 2);
        let rs = &back.resource_spans[0];
        assert_eq!((&rs.resource, &rs.scope_spans[0].scope), (&resource, &scope));
        // NaN aside (never equal), what was written is what is read.
        assert_eq!(rs.scope_spans[0].spans, [root, child]);
    }

    #[test]
    fn metrics_survive_a_round_trip_through_otlp_json() {
        let point = |value| NumberDataPoint {
            attributes: vec![KeyValue::int("n", -3)],
            start_time_unix_nano: 1,
            time_unix_nano: u64::MAX,
            value,
        };
        let m = MetricsData {
            resource_metrics: vec![ResourceMetrics {
                resource: Resource { attributes: vec![KeyValue::str("service.name", "cabin")] },
                scope_metrics: vec![ScopeMetrics {
                    scope: Scope { name: "s".into(), version: "1".into() },
                    metrics: vec![
                        Metric {
                            name: "m".into(),
                            description: "d".into(),
                            unit: "ms".into(),
                            data: MetricData::Gauge(vec![point(Number::Int(i64::MIN))]),
                        },
                        Metric {
                            name: "total".into(),
                            description: "".into(),
                            unit: "{action}".into(),
                            data: MetricData::Sum {
                                points: vec![point(Number::Double(0.5))],
                                temporality: 2,
                                monotonic: true,
                            },
                        },
                    ],
                }],
            }],
        };
        let line = m.to_json_line();
        assert!(line.contains(r#""asInt":"-9223372036854775808""#), "{line}");
        assert!(line.contains(r#""gauge":{"dataPoints":[{"#), "{line}");
        assert!(line.contains(r#""aggregationTemporality":2,"isMonotonic":true"#), "{line}");
        assert_eq!(serde_json::from_str::<MetricsData<'_>>(&line).unwrap(), m);
        assert_eq!(m.point_count(), 2);
    }
}
