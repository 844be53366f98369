//! Protobuf encoding of the model, for OTLP/HTTP `application/x-protobuf`.
//!
//! The field numbers are those of opentelemetry-proto v1 (`trace.proto`,
//! `metrics.proto`, `common.proto`, `resource.proto`); an
//! `ExportTraceServiceRequest` / `ExportMetricsServiceRequest` has the same
//! fields as `TracesData` / `MetricsData`, so one encoding serves both. Fields
//! at their default value are left out, as proto3 encoders do.

use crate::model::*;

use trace_proto_wire as wire;

/// A message being written: proto3's rule (a field at its default value is
/// left out) over the workspace's one protobuf writer.
#[derive(Default)]
struct Buf(Vec<u8>);

impl Buf {
    fn uint(&mut self, field: u32, n: u64) {
        if n != 0 {
            wire::put_uint(&mut self.0, field, n);
        }
    }

    /// `int32`/`int64`/enums: negative values as ten-byte two's complement.
    fn int(&mut self, field: u32, n: i64) {
        self.uint(field, n as u64);
    }

    fn boolean(&mut self, field: u32, b: bool) {
        self.uint(field, u64::from(b));
    }

    fn fixed64(&mut self, field: u32, n: u64) {
        if n != 0 {
            wire::put_fixed64(&mut self.0, field, n);
        }
    }

    fn double(&mut self, field: u32, x: f64) {
        // Written even at zero when it is the member of a oneof (the caller decides).
        wire::put_double(&mut self.0, field, x);
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        if !b.is_empty() {
            self.bytes_always(field, b);
        }
    }

    fn bytes_always(&mut self, field: u32, b: &[u8]) {
        wire::put_bytes(&mut self.0, field, b);
    }

    fn string(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }

    /// A sub-message, written in place (its length filled in after it),
    /// even when empty (its presence can matter).
    fn message(&mut self, field: u32, f: impl FnOnce(&mut Buf)) {
        let nested = wire::open(&mut self.0, field);
        f(self);
        wire::close(&mut self.0, nested);
    }
}

fn any_value(b: &mut Buf, v: &AnyValue) {
    // A oneof member is written even at its default, so the kind survives.
    match v {
        AnyValue::Str(s) => b.bytes_always(1, s.as_bytes()),
        AnyValue::Bool(x) => wire::put_bool(&mut b.0, 2, *x),
        AnyValue::Int(n) => wire::put_int(&mut b.0, 3, *n),
        AnyValue::Double(x) => b.double(4, *x),
        AnyValue::Array(items) => b.message(5, |a| {
            for item in items {
                a.message(1, |x| any_value(x, item));
            }
        }),
        AnyValue::KvList(kvs) => b.message(6, |l| key_values(l, 1, kvs)),
        AnyValue::Bytes(bytes) => b.bytes_always(7, bytes),
    }
}

fn key_values(b: &mut Buf, field: u32, kvs: &[KeyValue]) {
    for kv in kvs {
        b.message(field, |m| {
            m.string(1, &kv.key);
            m.message(2, |v| any_value(v, &kv.value));
        });
    }
}

fn resource(b: &mut Buf, r: &Resource) {
    b.message(1, |m| key_values(m, 1, &r.attributes));
}

fn scope(b: &mut Buf, s: &Scope) {
    b.message(1, |m| {
        m.string(1, &s.name);
        m.string(2, &s.version);
    });
}

fn span(b: &mut Buf, s: &Span) {
    b.bytes(1, &s.trace_id);
    b.bytes(2, &s.span_id);
    b.string(3, &s.trace_state);
    if let Some(p) = &s.parent_span_id {
        b.bytes(4, p);
    }
    b.string(5, &s.name);
    b.int(6, i64::from(s.kind));
    b.fixed64(7, s.start_time_unix_nano);
    b.fixed64(8, s.end_time_unix_nano);
    key_values(b, 9, &s.attributes);
    for e in &s.events {
        b.message(11, |m| {
            m.fixed64(1, e.time_unix_nano);
            m.string(2, &e.name);
            key_values(m, 3, &e.attributes);
        });
    }
    if let Some(st) = &s.status {
        b.message(15, |m| {
            m.string(2, &st.message);
            m.int(3, i64::from(st.code));
        });
    }
}

/// `TracesData` (equally an `ExportTraceServiceRequest`) as protobuf bytes.
pub fn encode_traces(data: &TracesData) -> Vec<u8> {
    let mut b = Buf::default();
    for rs in &data.resource_spans {
        b.message(1, |m| {
            resource(m, &rs.resource);
            for ss in &rs.scope_spans {
                m.message(2, |m| {
                    scope(m, &ss.scope);
                    for s in &ss.spans {
                        m.message(2, |m| span(m, s));
                    }
                });
            }
        });
    }
    b.0
}

fn point(b: &mut Buf, p: &NumberDataPoint) {
    b.fixed64(2, p.start_time_unix_nano);
    b.fixed64(3, p.time_unix_nano);
    match p.value {
        Number::Double(x) => b.double(4, x),
        // `as_int` is sfixed64.
        Number::Int(n) => wire::put_fixed64(&mut b.0, 6, n as u64),
    }
    key_values(b, 7, &p.attributes);
}

fn metric(b: &mut Buf, m: &Metric) {
    b.string(1, &m.name);
    b.string(2, &m.description);
    b.string(3, &m.unit);
    match &m.data {
        MetricData::Gauge(points) => b.message(5, |g| {
            for p in points {
                g.message(1, |d| point(d, p));
            }
        }),
        MetricData::Sum { points, temporality, monotonic } => b.message(7, |s| {
            for p in points {
                s.message(1, |d| point(d, p));
            }
            s.int(2, i64::from(*temporality));
            s.boolean(3, *monotonic);
        }),
    }
}

/// `MetricsData` (equally an `ExportMetricsServiceRequest`) as protobuf bytes.
pub fn encode_metrics(data: &MetricsData) -> Vec<u8> {
    let mut b = Buf::default();
    for rm in &data.resource_metrics {
        b.message(1, |m| {
            resource(m, &rm.resource);
            for sm in &rm.scope_metrics {
                m.message(2, |m| {
                    scope(m, &sm.scope);
                    for x in &sm.metrics {
                        m.message(2, |m| metric(m, x));
                    }
                });
            }
        });
    }
    b.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_ints_are_encoded_as_protobuf_does_and_zeros_are_left_out() {
        let mut b = Buf::default();
        b.int(1, 0);
        b.fixed64(2, 0);
        assert!(b.0.is_empty(), "proto3 leaves defaults out");
        b.int(1, -1);
        assert_eq!(b.0, [0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    }
}
