//! The OTLP model: `trace-sink-otlp`'s ([`trace_sink_otlp::model`]), the one
//! the sink writes its files with, re-exported; and the reading of OTLP/JSON
//! documents into it, with the JSON path of a fault.

use serde_json::Value as Json;

pub use trace_sink_otlp::model::*;

/// What is wrong with an OTLP/JSON document, with the JSON path of the fault.
pub type ParseFault = String;

fn read<T: serde::de::DeserializeOwned>(v: &Json) -> Result<T, ParseFault> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." { "$".to_string() } else { format!("$.{path}") };
        format!("{at}: {}", e.inner())
    })
}

/// Reads one OTLP/JSON `TracesData`.
pub fn traces_from_json(v: &Json) -> Result<TracesData<'static>, ParseFault> {
    read(v)
}

/// Reads one OTLP/JSON `MetricsData` (gauges and sums).
pub fn metrics_from_json(v: &Json) -> Result<MetricsData<'static>, ParseFault> {
    read(v)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn base64_ids_are_refused_with_the_reason() {
        let line = json!({"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"AAECAwQFBgcICQoLDA0ODw==","spanId":"0102030405060708"}]}]}]});
        let e = traces_from_json(&line).unwrap_err();
        assert!(e.contains("$.resourceSpans[0].scopeSpans[0].spans[0].traceId"), "{e}");
        assert!(e.contains("not base64"), "{e}");
    }

    #[test]
    fn a_metric_kind_other_than_gauge_or_sum_is_refused_naming_the_metric() {
        let line = json!({"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"h","histogram":{}}]}]}]});
        let e = metrics_from_json(&line).unwrap_err();
        assert!(e.starts_with("$.resourceMetrics[0].scopeMetrics[0].metrics[0]"), "{e}");
    }
}
