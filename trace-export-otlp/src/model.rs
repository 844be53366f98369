//! The part of the OTLP data model this crate reads and writes, and its
//! OTLP/JSON form (hex ids, 64-bit integers as decimal strings, enums as
//! integers, lowerCamelCase keys).

use serde_json::{json, Map, Value as Json};

/// An attribute value (`AnyValue`).
#[derive(Clone, Debug, PartialEq)]
pub enum AnyValue {
    /// `stringValue`.
    Str(String),
    /// `boolValue`.
    Bool(bool),
    /// `intValue`.
    Int(i64),
    /// `doubleValue`.
    Double(f64),
    /// `arrayValue`.
    Array(Vec<AnyValue>),
    /// `kvlistValue`.
    KvList(Vec<KeyValue>),
    /// `bytesValue` (base64 in JSON).
    Bytes(Vec<u8>),
}

/// A key and its value.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyValue {
    /// The key, e.g. `service.name`.
    pub key: String,
    /// The value.
    pub value: AnyValue,
}

impl KeyValue {
    /// A string attribute.
    pub fn str(key: &str, value: impl Into<String>) -> Self {
        KeyValue { key: key.to_string(), value: AnyValue::Str(value.into()) }
    }

    /// An integer attribute.
    pub fn int(key: &str, value: i64) -> Self {
        KeyValue { key: key.to_string(), value: AnyValue::Int(value) }
    }
}

/// The entity that produced the data: `resource.attributes`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resource {
    /// Its attributes.
    pub attributes: Vec<KeyValue>,
}

/// The instrumentation scope.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scope {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
}

/// A span's status.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Status {
    /// The message.
    pub message: String,
    /// `STATUS_CODE_UNSET` 0, `OK` 1, `ERROR` 2.
    pub code: i32,
}

/// An event of a span.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanEvent {
    /// Unix nanoseconds.
    pub time_unix_nano: u64,
    /// Its name.
    pub name: String,
    /// Its attributes.
    pub attributes: Vec<KeyValue>,
}

/// One span.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// 16 bytes.
    pub trace_id: [u8; 16],
    /// 8 bytes.
    pub span_id: [u8; 8],
    /// W3C trace state.
    pub trace_state: String,
    /// The parent's id, if any.
    pub parent_span_id: Option<[u8; 8]>,
    /// Its name.
    pub name: String,
    /// Span kind (1 internal).
    pub kind: i32,
    /// Start, Unix nanoseconds.
    pub start_time_unix_nano: u64,
    /// End, Unix nanoseconds.
    pub end_time_unix_nano: u64,
    /// Its attributes.
    pub attributes: Vec<KeyValue>,
    /// Its events.
    pub events: Vec<SpanEvent>,
    /// Its status, if any.
    pub status: Option<Status>,
}

/// Spans of one scope.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScopeSpans {
    /// The scope.
    pub scope: Scope,
    /// The spans.
    pub spans: Vec<Span>,
}

/// Spans of one resource.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceSpans {
    /// The resource.
    pub resource: Resource,
    /// By scope.
    pub scope_spans: Vec<ScopeSpans>,
}

/// `TracesData` (the body of an `ExportTraceServiceRequest`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TracesData {
    /// By resource.
    pub resource_spans: Vec<ResourceSpans>,
}

/// A number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    /// `asInt`.
    Int(i64),
    /// `asDouble`.
    Double(f64),
}

/// One measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct NumberDataPoint {
    /// Its attributes.
    pub attributes: Vec<KeyValue>,
    /// Start of the interval measured, Unix nanoseconds.
    pub start_time_unix_nano: u64,
    /// When it was measured, Unix nanoseconds.
    pub time_unix_nano: u64,
    /// The value.
    pub value: Number,
}

/// What a metric's points are.
#[derive(Clone, Debug, PartialEq)]
pub enum MetricData {
    /// A gauge: each point a measurement of its own.
    Gauge(Vec<NumberDataPoint>),
    /// A sum.
    Sum {
        /// The points.
        points: Vec<NumberDataPoint>,
        /// 1 delta, 2 cumulative.
        temporality: i32,
        /// Whether it only grows.
        monotonic: bool,
    },
}

/// One metric.
#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    /// Its name, e.g. `cabin_trace.command.duration`.
    pub name: String,
    /// What it measures.
    pub description: String,
    /// UCUM unit, e.g. `ms`, `By`, `{action}`.
    pub unit: String,
    /// The points.
    pub data: MetricData,
}

/// Metrics of one scope.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScopeMetrics {
    /// The scope.
    pub scope: Scope,
    /// The metrics.
    pub metrics: Vec<Metric>,
}

/// Metrics of one resource.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceMetrics {
    /// The resource.
    pub resource: Resource,
    /// By scope.
    pub scope_metrics: Vec<ScopeMetrics>,
}

/// `MetricsData` (the body of an `ExportMetricsServiceRequest`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetricsData {
    /// By resource.
    pub resource_metrics: Vec<ResourceMetrics>,
}

// ---- OTLP/JSON out -------------------------------------------------------

fn double_json(x: f64) -> Json {
    if x.is_finite() {
        json!(x)
    } else if x.is_nan() {
        json!("NaN")
    } else if x > 0.0 {
        json!("Infinity")
    } else {
        json!("-Infinity")
    }
}

impl AnyValue {
    fn to_json(&self) -> Json {
        match self {
            AnyValue::Str(s) => json!({ "stringValue": s }),
            AnyValue::Bool(b) => json!({ "boolValue": b }),
            AnyValue::Int(n) => json!({ "intValue": n.to_string() }),
            AnyValue::Double(x) => json!({ "doubleValue": double_json(*x) }),
            AnyValue::Array(v) => {
                json!({ "arrayValue": { "values": v.iter().map(AnyValue::to_json).collect::<Vec<_>>() } })
            }
            AnyValue::KvList(v) => json!({ "kvlistValue": { "values": key_values_json(v) } }),
            AnyValue::Bytes(b) => json!({ "bytesValue": base64(b) }),
        }
    }
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

fn key_values_json(kvs: &[KeyValue]) -> Vec<Json> {
    kvs.iter().map(|kv| json!({ "key": kv.key, "value": kv.value.to_json() })).collect()
}

fn resource_json(r: &Resource) -> Json {
    json!({ "attributes": key_values_json(&r.attributes) })
}

fn scope_json(s: &Scope) -> Json {
    json!({ "name": s.name, "version": s.version })
}

impl NumberDataPoint {
    fn to_json(&self) -> Json {
        let mut m = Map::new();
        m.insert("attributes".into(), Json::Array(key_values_json(&self.attributes)));
        m.insert("startTimeUnixNano".into(), json!(self.start_time_unix_nano.to_string()));
        m.insert("timeUnixNano".into(), json!(self.time_unix_nano.to_string()));
        match self.value {
            Number::Int(n) => m.insert("asInt".into(), json!(n.to_string())),
            Number::Double(x) => m.insert("asDouble".into(), double_json(x)),
        };
        Json::Object(m)
    }
}

impl MetricsData {
    /// This data as one line of OTLP/JSON (no newline).
    pub fn to_json_line(&self) -> String {
        let rms: Vec<Json> = self
            .resource_metrics
            .iter()
            .map(|rm| {
                let sms: Vec<Json> = rm
                    .scope_metrics
                    .iter()
                    .map(|sm| {
                        let metrics: Vec<Json> = sm.metrics.iter().map(metric_json).collect();
                        json!({ "scope": scope_json(&sm.scope), "metrics": metrics })
                    })
                    .collect();
                json!({ "resource": resource_json(&rm.resource), "scopeMetrics": sms })
            })
            .collect();
        json!({ "resourceMetrics": rms }).to_string()
    }
}

fn metric_json(m: &Metric) -> Json {
    let points = |p: &[NumberDataPoint]| p.iter().map(NumberDataPoint::to_json).collect::<Vec<_>>();
    let mut o = Map::new();
    o.insert("name".into(), json!(m.name));
    o.insert("description".into(), json!(m.description));
    o.insert("unit".into(), json!(m.unit));
    match &m.data {
        MetricData::Gauge(p) => o.insert("gauge".into(), json!({ "dataPoints": points(p) })),
        MetricData::Sum { points: p, temporality, monotonic } => o.insert(
            "sum".into(),
            json!({ "dataPoints": points(p), "aggregationTemporality": temporality, "isMonotonic": monotonic }),
        ),
    };
    Json::Object(o)
}

// ---- OTLP/JSON in --------------------------------------------------------

/// What is wrong with an OTLP/JSON document, with the JSON path of the fault.
pub type ParseFault = String;

fn field<'a>(v: &'a Json, key: &str) -> Option<&'a Json> {
    v.get(key).filter(|x| !x.is_null())
}

fn array<'a>(v: &'a Json, key: &str, path: &str) -> Result<&'a [Json], ParseFault> {
    match field(v, key) {
        None => Ok(&[]),
        Some(Json::Array(a)) => Ok(a),
        Some(_) => Err(format!("{path}.{key}: expected an array")),
    }
}

fn text(v: &Json, key: &str, path: &str) -> Result<String, ParseFault> {
    match field(v, key) {
        None => Ok(String::new()),
        Some(Json::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("{path}.{key}: expected a string")),
    }
}

/// A 64-bit integer: OTLP/JSON writes it as a decimal string (a number is
/// accepted too, as receivers do).
fn int64<T: std::str::FromStr>(v: &Json, key: &str, path: &str) -> Result<Option<T>, ParseFault> {
    let bad = || format!("{path}.{key}: expected a 64-bit integer as a decimal string");
    match field(v, key) {
        None => Ok(None),
        Some(Json::String(s)) => s.parse().map(Some).map_err(|_| bad()),
        Some(Json::Number(n)) => n.to_string().parse().map(Some).map_err(|_| bad()),
        Some(_) => Err(bad()),
    }
}

fn small_int(v: &Json, key: &str, path: &str) -> Result<i32, ParseFault> {
    match field(v, key) {
        None => Ok(0),
        Some(x) => x
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| format!("{path}.{key}: expected an integer (OTLP/JSON writes enums as integers)")),
    }
}

fn id<const N: usize>(v: &Json, key: &str, path: &str) -> Result<Option<[u8; N]>, ParseFault> {
    let s = match field(v, key) {
        None => return Ok(None),
        Some(Json::String(s)) if s.is_empty() => return Ok(None),
        Some(Json::String(s)) => s,
        Some(_) => return Err(format!("{path}.{key}: expected a hex string")),
    };
    let bad =
        || format!("{path}.{key}: `{s}` is not {} hex characters (OTLP/JSON ids are hex, not base64)", 2 * N);
    if s.len() != 2 * N || !s.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; N];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(Some(out))
}

fn double(v: &Json, path: &str) -> Result<f64, ParseFault> {
    match v {
        Json::Number(n) => n.as_f64().ok_or_else(|| format!("{path}: not a double")),
        Json::String(s) => match s.as_str() {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            other => other.parse().map_err(|_| format!("{path}: `{other}` is not a double")),
        },
        _ => Err(format!("{path}: expected a double")),
    }
}

fn any_value(v: &Json, path: &str) -> Result<AnyValue, ParseFault> {
    if let Some(s) = field(v, "stringValue") {
        return s
            .as_str()
            .map(|s| AnyValue::Str(s.to_string()))
            .ok_or_else(|| format!("{path}.stringValue: expected a string"));
    }
    if let Some(b) = field(v, "boolValue") {
        return b
            .as_bool()
            .map(AnyValue::Bool)
            .ok_or_else(|| format!("{path}.boolValue: expected a boolean"));
    }
    if let Some(n) = int64::<i64>(v, "intValue", path)? {
        return Ok(AnyValue::Int(n));
    }
    if let Some(x) = field(v, "doubleValue") {
        return double(x, &format!("{path}.doubleValue")).map(AnyValue::Double);
    }
    if let Some(a) = field(v, "arrayValue") {
        let p = format!("{path}.arrayValue");
        let items = array(a, "values", &p)?;
        return items
            .iter()
            .enumerate()
            .map(|(i, x)| any_value(x, &format!("{p}.values[{i}]")))
            .collect::<Result<_, _>>()
            .map(AnyValue::Array);
    }
    if let Some(l) = field(v, "kvlistValue") {
        return key_values(l, "values", &format!("{path}.kvlistValue")).map(AnyValue::KvList);
    }
    if field(v, "bytesValue").is_some() {
        return Err(format!("{path}.bytesValue: bytes values are not supported"));
    }
    Err(format!("{path}: an AnyValue with no value"))
}

fn key_values(v: &Json, key: &str, path: &str) -> Result<Vec<KeyValue>, ParseFault> {
    array(v, key, path)?
        .iter()
        .enumerate()
        .map(|(i, kv)| {
            let p = format!("{path}.{key}[{i}]");
            let value = match field(kv, "value") {
                Some(x) => any_value(x, &format!("{p}.value"))?,
                None => AnyValue::Str(String::new()),
            };
            Ok(KeyValue { key: text(kv, "key", &p)?, value })
        })
        .collect()
}

fn resource(v: &Json, path: &str) -> Result<Resource, ParseFault> {
    match field(v, "resource") {
        None => Ok(Resource::default()),
        Some(r) => Ok(Resource { attributes: key_values(r, "attributes", &format!("{path}.resource"))? }),
    }
}

fn scope(v: &Json, path: &str) -> Result<Scope, ParseFault> {
    match field(v, "scope") {
        None => Ok(Scope::default()),
        Some(s) => {
            let p = format!("{path}.scope");
            Ok(Scope { name: text(s, "name", &p)?, version: text(s, "version", &p)? })
        }
    }
}

fn span(v: &Json, p: &str) -> Result<Span, ParseFault> {
    let events = array(v, "events", p)?
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let ep = format!("{p}.events[{i}]");
            Ok(SpanEvent {
                time_unix_nano: int64(e, "timeUnixNano", &ep)?.unwrap_or(0),
                name: text(e, "name", &ep)?,
                attributes: key_values(e, "attributes", &ep)?,
            })
        })
        .collect::<Result<_, ParseFault>>()?;
    let status = match field(v, "status") {
        None => None,
        Some(s) => {
            let sp = format!("{p}.status");
            Some(Status { message: text(s, "message", &sp)?, code: small_int(s, "code", &sp)? })
        }
    };
    Ok(Span {
        trace_id: id::<16>(v, "traceId", p)?.ok_or_else(|| format!("{p}.traceId: missing"))?,
        span_id: id::<8>(v, "spanId", p)?.ok_or_else(|| format!("{p}.spanId: missing"))?,
        trace_state: text(v, "traceState", p)?,
        parent_span_id: id::<8>(v, "parentSpanId", p)?,
        name: text(v, "name", p)?,
        kind: small_int(v, "kind", p)?,
        start_time_unix_nano: int64(v, "startTimeUnixNano", p)?.unwrap_or(0),
        end_time_unix_nano: int64(v, "endTimeUnixNano", p)?.unwrap_or(0),
        attributes: key_values(v, "attributes", p)?,
        events,
        status,
    })
}

impl TracesData {
    /// Reads one OTLP/JSON `TracesData`.
    pub fn from_json(v: &Json) -> Result<TracesData, ParseFault> {
        let mut out = TracesData::default();
        for (i, rs) in array(v, "resourceSpans", "$")?.iter().enumerate() {
            let p = format!("$.resourceSpans[{i}]");
            let mut r = ResourceSpans { resource: resource(rs, &p)?, scope_spans: Vec::new() };
            for (j, ss) in array(rs, "scopeSpans", &p)?.iter().enumerate() {
                let sp = format!("{p}.scopeSpans[{j}]");
                let spans = array(ss, "spans", &sp)?
                    .iter()
                    .enumerate()
                    .map(|(k, s)| span(s, &format!("{sp}.spans[{k}]")))
                    .collect::<Result<_, _>>()?;
                r.scope_spans.push(ScopeSpans { scope: scope(ss, &sp)?, spans });
            }
            out.resource_spans.push(r);
        }
        Ok(out)
    }

    /// How many spans it holds.
    pub fn span_count(&self) -> usize {
        self.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum()
    }
}

fn points(v: &Json, p: &str) -> Result<Vec<NumberDataPoint>, ParseFault> {
    array(v, "dataPoints", p)?
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let dp = format!("{p}.dataPoints[{i}]");
            let value = if let Some(n) = int64::<i64>(d, "asInt", &dp)? {
                Number::Int(n)
            } else if let Some(x) = field(d, "asDouble") {
                Number::Double(double(x, &format!("{dp}.asDouble"))?)
            } else {
                return Err(format!("{dp}: neither asInt nor asDouble"));
            };
            Ok(NumberDataPoint {
                attributes: key_values(d, "attributes", &dp)?,
                start_time_unix_nano: int64(d, "startTimeUnixNano", &dp)?.unwrap_or(0),
                time_unix_nano: int64(d, "timeUnixNano", &dp)?.unwrap_or(0),
                value,
            })
        })
        .collect()
}

fn metric(v: &Json, p: &str) -> Result<Metric, ParseFault> {
    let data = if let Some(g) = field(v, "gauge") {
        MetricData::Gauge(points(g, &format!("{p}.gauge"))?)
    } else if let Some(s) = field(v, "sum") {
        let sp = format!("{p}.sum");
        MetricData::Sum {
            points: points(s, &sp)?,
            temporality: small_int(s, "aggregationTemporality", &sp)?,
            monotonic: field(s, "isMonotonic").and_then(Json::as_bool).unwrap_or(false),
        }
    } else {
        return Err(format!("{p}: only gauge and sum metrics are supported"));
    };
    Ok(Metric {
        name: text(v, "name", p)?,
        description: text(v, "description", p)?,
        unit: text(v, "unit", p)?,
        data,
    })
}

impl MetricsData {
    /// Reads one OTLP/JSON `MetricsData` (gauges and sums).
    pub fn from_json(v: &Json) -> Result<MetricsData, ParseFault> {
        let mut out = MetricsData::default();
        for (i, rm) in array(v, "resourceMetrics", "$")?.iter().enumerate() {
            let p = format!("$.resourceMetrics[{i}]");
            let mut r = ResourceMetrics { resource: resource(rm, &p)?, scope_metrics: Vec::new() };
            for (j, sm) in array(rm, "scopeMetrics", &p)?.iter().enumerate() {
                let sp = format!("{p}.scopeMetrics[{j}]");
                let metrics = array(sm, "metrics", &sp)?
                    .iter()
                    .enumerate()
                    .map(|(k, m)| metric(m, &format!("{sp}.metrics[{k}]")))
                    .collect::<Result<_, _>>()?;
                r.scope_metrics.push(ScopeMetrics { scope: scope(sm, &sp)?, metrics });
            }
            out.resource_metrics.push(r);
        }
        Ok(out)
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn base64_ids_are_refused_with_the_reason() {
        let line = json!({"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"AAECAwQFBgcICQoLDA0ODw==","spanId":"0102030405060708"}]}]}]});
        let e = TracesData::from_json(&line).unwrap_err();
        assert!(e.contains("$.resourceSpans[0].scopeSpans[0].spans[0].traceId"), "{e}");
        assert!(e.contains("not base64"), "{e}");
    }

    #[test]
    fn metrics_survive_a_round_trip_through_otlp_json() {
        let m = MetricsData {
            resource_metrics: vec![ResourceMetrics {
                resource: Resource { attributes: vec![KeyValue::str("service.name", "cabin")] },
                scope_metrics: vec![ScopeMetrics {
                    scope: Scope { name: "s".into(), version: "1".into() },
                    metrics: vec![Metric {
                        name: "m".into(),
                        description: "d".into(),
                        unit: "ms".into(),
                        data: MetricData::Gauge(vec![NumberDataPoint {
                            attributes: vec![KeyValue::int("n", -3)],
                            start_time_unix_nano: 1,
                            time_unix_nano: u64::MAX,
                            value: Number::Int(i64::MIN),
                        }]),
                    }],
                }],
            }],
        };
        let line = m.to_json_line();
        assert!(line.contains(r#""asInt":"-9223372036854775808""#), "{line}");
        assert!(line.contains(r#""timeUnixNano":"18446744073709551615""#), "{line}");
        let back = MetricsData::from_json(&serde_json::from_str(&line).unwrap()).unwrap();
        assert_eq!(back, m);
    }
}
