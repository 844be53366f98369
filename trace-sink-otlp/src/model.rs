//! The OTLP data model this workspace writes and reads (traces, and the
//! gauges and sums of metrics), and the reading of its OTLP/JSON form.
//!
//! The types mirror opentelemetry-proto v1's messages field for field, as far
//! as they go; their text is borrowed or owned ([`Cow`]), so that the sink
//! builds a span from a capture's strings without copying them. They are
//! written by the crate's one OTLP/JSON writer, `json_writer.rs` (through
//! [`MetricsData::to_json_line`] and the sink), and read by `serde`: OTLP/JSON
//! is proto3's JSON mapping with OTLP's exceptions, each one an attribute
//! below: trace and span ids are lowercase hex ([`hex_id`]), never base64;
//! 64-bit integers are decimal strings ([`decimal`]); enums are integers; keys
//! are lowerCamelCase. Reading is as lenient as receivers are: a 64-bit
//! integer may also be a JSON number, an empty `parentSpanId` is no parent,
//! fields at their default may be absent, and unknown fields are ignored.
//!
//! ```
//! use trace_sink_otlp::model::{AnyValue, KeyValue, MetricsData};
//!
//! let kv: KeyValue = serde_json::from_str(r#"{"key":"requests","value":{"intValue":"3"}}"#).unwrap();
//! assert_eq!(kv, KeyValue::int("requests", 3));
//! let line = r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"m","gauge":{"dataPoints":[{"asInt":3}]}}]}]}]}"#;
//! let data: MetricsData = serde_json::from_str(line).unwrap();
//! assert_eq!(data.point_count(), 1);
//! assert!(data.to_json_line().contains(r#""asInt":"3""#), "64-bit integers are written as strings");
//! ```

use std::borrow::Cow;

use serde::Deserialize;

/// An attribute value (`AnyValue`): one JSON key naming its type.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub enum AnyValue<'a> {
    /// `stringValue`.
    #[serde(rename = "stringValue")]
    Str(Cow<'a, str>),
    /// `boolValue`.
    #[serde(rename = "boolValue")]
    Bool(bool),
    /// `intValue`.
    #[serde(rename = "intValue", deserialize_with = "decimal::deserialize")]
    Int(i64),
    /// `doubleValue`.
    #[serde(rename = "doubleValue", deserialize_with = "double::deserialize")]
    Double(f64),
    /// `arrayValue`.
    #[serde(rename = "arrayValue", deserialize_with = "array_value::deserialize")]
    Array(Vec<AnyValue<'a>>),
    /// `kvlistValue`.
    #[serde(rename = "kvlistValue", deserialize_with = "kvlist_value::deserialize")]
    KvList(Vec<KeyValue<'a>>),
    /// `bytesValue`: written as base64; refused when read.
    #[serde(rename = "bytesValue", deserialize_with = "bytes_value::deserialize")]
    Bytes(Vec<u8>),
}

impl Default for AnyValue<'_> {
    /// The empty string: what a `KeyValue` without a value reads as.
    fn default() -> Self {
        AnyValue::Str(Cow::Borrowed(""))
    }
}

/// A key and its value.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct KeyValue<'a> {
    /// The key, e.g. `service.name`.
    pub key: Cow<'a, str>,
    /// The value.
    #[serde(default)]
    pub value: AnyValue<'a>,
}

impl<'a> KeyValue<'a> {
    /// A string attribute.
    pub fn str(key: impl Into<Cow<'a, str>>, value: impl Into<Cow<'a, str>>) -> Self {
        KeyValue { key: key.into(), value: AnyValue::Str(value.into()) }
    }

    /// An integer attribute.
    pub fn int(key: impl Into<Cow<'a, str>>, value: i64) -> Self {
        KeyValue { key: key.into(), value: AnyValue::Int(value) }
    }
}

impl AnyValue<'_> {
    /// The same value, owning its text.
    pub fn into_owned(self) -> AnyValue<'static> {
        match self {
            AnyValue::Str(s) => AnyValue::Str(Cow::Owned(s.into_owned())),
            AnyValue::Bool(b) => AnyValue::Bool(b),
            AnyValue::Int(n) => AnyValue::Int(n),
            AnyValue::Double(x) => AnyValue::Double(x),
            AnyValue::Array(items) => AnyValue::Array(items.into_iter().map(AnyValue::into_owned).collect()),
            AnyValue::KvList(kvs) => AnyValue::KvList(kvs.into_iter().map(KeyValue::into_owned).collect()),
            AnyValue::Bytes(b) => AnyValue::Bytes(b),
        }
    }
}

impl KeyValue<'_> {
    /// The same attribute, owning its text.
    pub fn into_owned(self) -> KeyValue<'static> {
        KeyValue { key: Cow::Owned(self.key.into_owned()), value: self.value.into_owned() }
    }
}

/// The entity that produced the data: `resource.attributes`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Resource<'a> {
    /// Its attributes.
    pub attributes: Vec<KeyValue<'a>>,
}

/// The instrumentation scope.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Scope<'a> {
    /// Its name.
    pub name: Cow<'a, str>,
    /// Its version.
    pub version: Cow<'a, str>,
}

/// A span's status.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Status<'a> {
    /// The message.
    pub message: Cow<'a, str>,
    /// `STATUS_CODE_UNSET` 0, `OK` 1, `ERROR` 2.
    pub code: i32,
}

/// An event of a span.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SpanEvent<'a> {
    /// Unix nanoseconds.
    #[serde(deserialize_with = "decimal::deserialize")]
    pub time_unix_nano: u64,
    /// Its name.
    pub name: Cow<'a, str>,
    /// Its attributes.
    pub attributes: Vec<KeyValue<'a>>,
}

/// `SPAN_KIND_INTERNAL`: a span of the process's own work.
pub const SPAN_KIND_INTERNAL: i32 = 1;

/// One span.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Span<'a> {
    /// 16 bytes.
    #[serde(deserialize_with = "hex_id::deserialize")]
    pub trace_id: [u8; 16],
    /// 8 bytes.
    #[serde(deserialize_with = "hex_id::deserialize")]
    pub span_id: [u8; 8],
    /// W3C trace state.
    #[serde(default)]
    pub trace_state: Cow<'a, str>,
    /// The parent's id, if any.
    #[serde(default, deserialize_with = "parent_id::deserialize")]
    pub parent_span_id: Option<[u8; 8]>,
    /// Its name.
    #[serde(default)]
    pub name: Cow<'a, str>,
    /// Span kind ([`SPAN_KIND_INTERNAL`] 1).
    #[serde(default)]
    pub kind: i32,
    /// Start, Unix nanoseconds.
    #[serde(default, deserialize_with = "decimal::deserialize")]
    pub start_time_unix_nano: u64,
    /// End, Unix nanoseconds.
    #[serde(default, deserialize_with = "decimal::deserialize")]
    pub end_time_unix_nano: u64,
    /// Its attributes.
    #[serde(default)]
    pub attributes: Vec<KeyValue<'a>>,
    /// Its events.
    #[serde(default)]
    pub events: Vec<SpanEvent<'a>>,
    /// Its status, if any.
    #[serde(default)]
    pub status: Option<Status<'a>>,
}

/// Spans of one scope.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ScopeSpans<'a> {
    /// The scope.
    pub scope: Scope<'a>,
    /// The spans.
    pub spans: Vec<Span<'a>>,
}

/// Spans of one resource.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResourceSpans<'a> {
    /// The resource.
    pub resource: Resource<'a>,
    /// By scope.
    pub scope_spans: Vec<ScopeSpans<'a>>,
}

/// `TracesData` (the body of an `ExportTraceServiceRequest`): one line of a
/// trace file.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TracesData<'a> {
    /// By resource.
    pub resource_spans: Vec<ResourceSpans<'a>>,
}

impl TracesData<'_> {
    /// How many spans it holds.
    pub fn span_count(&self) -> usize {
        self.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum()
    }
}

/// A data point's value.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
pub enum Number {
    /// `asInt`.
    #[serde(rename = "asInt", deserialize_with = "decimal::deserialize")]
    Int(i64),
    /// `asDouble`.
    #[serde(rename = "asDouble", deserialize_with = "double::deserialize")]
    Double(f64),
}

/// One measurement.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NumberDataPoint<'a> {
    /// Its attributes.
    #[serde(default)]
    pub attributes: Vec<KeyValue<'a>>,
    /// Start of the interval measured, Unix nanoseconds.
    #[serde(default, deserialize_with = "decimal::deserialize")]
    pub start_time_unix_nano: u64,
    /// When it was measured, Unix nanoseconds.
    #[serde(default, deserialize_with = "decimal::deserialize")]
    pub time_unix_nano: u64,
    /// The value.
    #[serde(flatten)]
    pub value: Number,
}

/// What a metric's points are. Other kinds (histograms, summaries) are
/// refused when read.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub enum MetricData<'a> {
    /// A gauge: each point a measurement of its own.
    #[serde(rename = "gauge", deserialize_with = "gauge::deserialize")]
    Gauge(Vec<NumberDataPoint<'a>>),
    /// A sum.
    #[serde(rename = "sum")]
    Sum {
        /// The points.
        #[serde(rename = "dataPoints", default)]
        points: Vec<NumberDataPoint<'a>>,
        /// 1 delta, 2 cumulative.
        #[serde(rename = "aggregationTemporality", default)]
        temporality: i32,
        /// Whether it only grows.
        #[serde(rename = "isMonotonic", default)]
        monotonic: bool,
    },
}

/// One metric.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Metric<'a> {
    /// Its name, e.g. `cabin_trace.command.duration`.
    #[serde(default)]
    pub name: Cow<'a, str>,
    /// What it measures.
    #[serde(default)]
    pub description: Cow<'a, str>,
    /// UCUM unit, e.g. `ms`, `By`, `{action}`.
    #[serde(default)]
    pub unit: Cow<'a, str>,
    /// The points.
    #[serde(flatten)]
    pub data: MetricData<'a>,
}

/// Metrics of one scope.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ScopeMetrics<'a> {
    /// The scope.
    pub scope: Scope<'a>,
    /// The metrics.
    pub metrics: Vec<Metric<'a>>,
}

/// Metrics of one resource.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResourceMetrics<'a> {
    /// The resource.
    pub resource: Resource<'a>,
    /// By scope.
    pub scope_metrics: Vec<ScopeMetrics<'a>>,
}

/// `MetricsData` (the body of an `ExportMetricsServiceRequest`): one line of
/// a metrics file.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MetricsData<'a> {
    /// By resource.
    pub resource_metrics: Vec<ResourceMetrics<'a>>,
}

impl MetricsData<'_> {
    /// This data as one line of OTLP/JSON (no newline).
    pub fn to_json_line(&self) -> String {
        let mut out = Vec::new();
        crate::json_writer::metrics_data(&mut out, self);
        String::from_utf8(out).unwrap_or_default()
    }

    /// How many data points it holds.
    pub fn point_count(&self) -> usize {
        self.resource_metrics
            .iter()
            .flat_map(|r| &r.scope_metrics)
            .flat_map(|s| &s.metrics)
            .map(|m| match &m.data {
                MetricData::Gauge(p) | MetricData::Sum { points: p, .. } => p.len(),
            })
            .sum()
    }
}

/// Ids as lowercase hex of twice their length in bytes.
pub mod hex_id {
    use serde::de::{Deserializer, Error, Unexpected};

    /// Reads `2 * N` hex characters.
    pub fn deserialize<'de, const N: usize, D: Deserializer<'de>>(d: D) -> Result<[u8; N], D::Error> {
        let text = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
        parse(&text)
    }

    pub(super) fn parse<const N: usize, E: Error>(text: &str) -> Result<[u8; N], E> {
        let bad = || {
            let expected = format!("{} hex characters (OTLP/JSON ids are hex, not base64)", 2 * N);
            E::invalid_value(Unexpected::Str(text), &expected.as_str())
        };
        if text.len() != 2 * N || !text.is_ascii() {
            return Err(bad());
        }
        let mut out = [0u8; N];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(out)
    }
}

/// An optional span id: absent or empty is none.
mod parent_id {
    use serde::Deserializer;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<[u8; 8]>, D::Error> {
        let text = <Option<std::borrow::Cow<'de, str>> as serde::Deserialize>::deserialize(d)?;
        match text.as_deref() {
            None | Some("") => Ok(None),
            Some(t) => super::hex_id::parse(t).map(Some),
        }
    }
}

/// 64-bit integers: decimal strings, or JSON numbers as some writers give them.
pub mod decimal {
    use std::fmt;
    use std::marker::PhantomData;
    use std::str::FromStr;

    use serde::de::{Deserializer, Error, Unexpected, Visitor};

    /// Reads a decimal string or a JSON integer.
    pub fn deserialize<'de, T, D>(d: D) -> Result<T, D::Error>
    where
        T: FromStr + TryFrom<u64> + TryFrom<i64>,
        D: Deserializer<'de>,
    {
        struct Int<T>(PhantomData<T>);
        impl<T: FromStr + TryFrom<u64> + TryFrom<i64>> Visitor<'_> for Int<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a 64-bit integer as a decimal string")
            }
            fn visit_str<E: Error>(self, v: &str) -> Result<T, E> {
                v.parse().map_err(|_| E::invalid_value(Unexpected::Str(v), &self))
            }
            fn visit_u64<E: Error>(self, v: u64) -> Result<T, E> {
                T::try_from(v).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
            }
            fn visit_i64<E: Error>(self, v: i64) -> Result<T, E> {
                T::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            }
        }
        d.deserialize_any(Int(PhantomData))
    }
}

/// Doubles, with proto3's spellings of what JSON cannot hold: `"NaN"`,
/// `"Infinity"`, `"-Infinity"`.
mod double {
    use std::fmt;

    use serde::de::{Deserializer, Error, Unexpected, Visitor};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        struct Double;
        impl Visitor<'_> for Double {
            type Value = f64;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a double")
            }
            fn visit_f64<E: Error>(self, v: f64) -> Result<f64, E> {
                Ok(v)
            }
            fn visit_u64<E: Error>(self, v: u64) -> Result<f64, E> {
                Ok(v as f64)
            }
            fn visit_i64<E: Error>(self, v: i64) -> Result<f64, E> {
                Ok(v as f64)
            }
            fn visit_str<E: Error>(self, v: &str) -> Result<f64, E> {
                match v {
                    "NaN" => Ok(f64::NAN),
                    "Infinity" => Ok(f64::INFINITY),
                    "-Infinity" => Ok(f64::NEG_INFINITY),
                    other => other.parse().map_err(|_| E::invalid_value(Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(Double)
    }
}

/// `{"values": [...]}`, the wrapper of an array or a key-value list.
#[derive(Deserialize)]
struct Values<T> {
    #[serde(default)]
    values: T,
}

mod array_value {
    use serde::{Deserialize, Deserializer};

    use super::{AnyValue, Values};

    pub fn deserialize<'de, 'a, D: Deserializer<'de>>(d: D) -> Result<Vec<AnyValue<'a>>, D::Error> {
        Values::deserialize(d).map(|v| v.values)
    }
}

mod kvlist_value {
    use serde::{Deserialize, Deserializer};

    use super::{KeyValue, Values};

    pub fn deserialize<'de, 'a, D: Deserializer<'de>>(d: D) -> Result<Vec<KeyValue<'a>>, D::Error> {
        Values::deserialize(d).map(|v| v.values)
    }
}

/// `{"dataPoints": [...]}`.
mod gauge {
    use serde::{Deserialize, Deserializer};

    use super::NumberDataPoint;

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Gauge<T> {
        #[serde(default)]
        data_points: T,
    }

    pub fn deserialize<'de, 'a, D: Deserializer<'de>>(d: D) -> Result<Vec<NumberDataPoint<'a>>, D::Error> {
        Gauge::deserialize(d).map(|g| g.data_points)
    }
}

mod bytes_value {
    use serde::de::{Deserializer, Error, IgnoredAny};
    use serde::Deserialize;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        IgnoredAny::deserialize(d)?;
        Err(D::Error::custom("bytes values are not supported"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_ids_are_refused_with_the_reason() {
        let line = r#"{"traceId":"AAECAwQFBgcICQoLDA0ODw==","spanId":"0102030405060708"}"#;
        let e = serde_json::from_str::<Span<'_>>(line).unwrap_err().to_string();
        assert!(e.contains("not base64"), "{e}");
    }

    #[test]
    fn sixty_four_bit_integers_are_read_from_strings_and_numbers() {
        let read = |t: &str| serde_json::from_str::<AnyValue<'_>>(t).unwrap();
        assert_eq!(read(r#"{"intValue":"-7"}"#), AnyValue::Int(-7));
        assert_eq!(read(r#"{"intValue":-7}"#), AnyValue::Int(-7));
        assert!(serde_json::from_str::<AnyValue<'_>>(r#"{"intValue":"1.5"}"#).is_err());
        assert_eq!(read(r#"{"doubleValue":"-Infinity"}"#), AnyValue::Double(f64::NEG_INFINITY));
    }

    #[test]
    fn a_span_without_a_parent_or_with_an_empty_one_reads_as_a_root() {
        let span = |parent: &str| {
            let line =
                format!(r#"{{"traceId":"{}","spanId":"{}"{parent}}}"#, "ab".repeat(16), "01".repeat(8));
            serde_json::from_str::<Span<'_>>(&line).unwrap()
        };
        assert_eq!(span("").parent_span_id, None);
        assert_eq!(span(r#","parentSpanId":"""#).parent_span_id, None);
        assert_eq!(
            span(r#","parentSpanId":"0000000000000002""#).parent_span_id,
            Some([0, 0, 0, 0, 0, 0, 0, 2])
        );
    }
}
