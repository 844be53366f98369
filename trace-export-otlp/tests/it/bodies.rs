//! The bodies the export writes and sends, decoded by the official classes.

use std::ffi::OsStr;

use serde_json::Value;
use trace_export_otlp::{model, proto, run, Export, Labels, MetricsOptions};
use trace_summary::Timings;

use crate::support::*;

fn metric<'a>(decoded: &'a Value, name: &str) -> &'a Value {
    decoded["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no {name}"))
}

/// The point of the `build` capture whose attribute `key` is `value`.
fn point_of_build<'a>(metric: &'a Value, key: &str, value: &str) -> &'a Value {
    let points = metric["points"].as_array().unwrap();
    let found = points
        .iter()
        .find(|p| p["attributes"][key] == value && p["attributes"]["cabin_trace.command"] == "build");
    found.unwrap_or_else(|| panic!("no point with {key}={value} in {metric}"))
}

fn metrics_file(dir: &std::path::Path, timings: &[std::path::PathBuf]) -> std::path::PathBuf {
    let output = dir.join("metrics.otlp.json");
    let export = Export::WriteMetrics(MetricsOptions {
        labels: Labels {
            revision: Some("abc123".into()),
            machine: Some("ci-7".into()),
            scenario: Some("warm".into()),
        },
        output: Some(output.clone()),
        files: timings.to_vec(),
    });
    run(&export).unwrap();
    output
}

#[test]
fn summaries_become_metrics_with_units_labels_and_the_summaries_figures() {
    let dir = tempfile::tempdir().unwrap();
    let a = capture(dir.path(), "build");
    let b = capture(dir.path(), "test");
    let output = metrics_file(dir.path(), &[a.timings.clone(), b.timings.clone()]);
    let decoded = check(&[OsStr::new("json"), output.as_os_str()]);
    assert_eq!(decoded["lines"], 1);
    let t = Timings::from_path(&a.timings).unwrap();

    let wall = metric(&decoded, "cabin_trace.command.duration");
    assert_eq!(wall["unit"], "ms");
    assert_eq!(wall["kind"], "gauge");
    let points = wall["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "one point per summary");
    let p = points.iter().find(|p| p["attributes"]["cabin_trace.command"] == "build").unwrap();
    assert_eq!(p["value"].as_f64().unwrap(), t.wall_us as f64 / 1000.0);
    for (k, v) in
        [("vcs.ref.head.revision", "abc123"), ("host.name", "ci-7"), ("cabin_trace.scenario", "warm")]
    {
        assert_eq!(p["attributes"][k], v, "{k}");
    }
    assert_eq!(p["start"].as_u64().unwrap(), t.start_unix_ms * 1_000_000);

    assert_eq!(metric(&decoded, "cabin_trace.memory.peak")["unit"], "By");
    let peak = &metric(&decoded, "cabin_trace.memory.peak")["points"][0];
    assert_eq!(peak["value"].as_i64().unwrap() % 1024, 0, "KiB turned into bytes");
    assert_eq!(metric(&decoded, "cabin_trace.cpu.time")["points"].as_array().unwrap().len(), 8);

    let count = metric(&decoded, "cabin_trace.phase.count");
    assert_eq!(count["unit"], "{span}");
    let resolve = point_of_build(count, "cabin_trace.phase", "resolve");
    assert_eq!(resolve["value"], 3);
    let work = metric(&decoded, "cabin_trace.phase.work");
    let requests = point_of_build(work, "cabin_trace.counter", "requests");
    assert_eq!(requests["value"], 1 + 2 + 3, "the sum of a work counter");
    let phase = metric(&decoded, "cabin_trace.phase.duration");
    let total: f64 = t.spans.iter().find(|s| s.name == "compile").unwrap().total_inclusive_us as f64 / 1000.0;
    assert!(phase["points"].as_array().unwrap().iter().any(|p| p["value"].as_f64() == Some(total)));
}

#[test]
fn protobuf_bodies_are_what_the_official_encoder_writes_for_what_the_json_holds() {
    let dir = tempfile::tempdir().unwrap();
    let c = capture(dir.path(), "build");
    // Traces: the sink's file, read back and encoded.
    let from_json = check(&[OsStr::new("json"), c.otlp.as_os_str()]);
    let text = std::fs::read_to_string(&c.otlp).unwrap();
    let data = model::traces_from_json(&serde_json::from_str(text.lines().next().unwrap()).unwrap()).unwrap();
    let pb = dir.path().join("traces.pb");
    std::fs::write(&pb, proto::encode_traces(&data)).unwrap();
    let from_pb = check(&[OsStr::new("pb-canonical"), OsStr::new("traces"), pb.as_os_str()]);
    assert_eq!(from_pb["spans"], from_json["spans"]);
    assert!(from_pb["spans"].as_array().unwrap().len() >= 5);
    let resolve = from_pb["spans"].as_array().unwrap().iter().find(|s| s["name"] == "resolve").unwrap();
    assert_eq!(resolve["events"][0]["name"], "resolved", "span events survive");

    // Metrics: the metrics file, read back and encoded.
    let output = metrics_file(dir.path(), &[c.timings]);
    let from_json = check(&[OsStr::new("json"), output.as_os_str()]);
    let text = std::fs::read_to_string(&output).unwrap();
    let data = model::metrics_from_json(&serde_json::from_str(text.trim()).unwrap()).unwrap();
    let pb = dir.path().join("metrics.pb");
    std::fs::write(&pb, proto::encode_metrics(&data)).unwrap();
    let from_pb = check(&[OsStr::new("pb-canonical"), OsStr::new("metrics"), pb.as_os_str()]);
    assert_eq!(from_pb["metrics"], from_json["metrics"]);
}

#[test]
fn the_checker_refuses_base64_ids_and_numbers_for_64_bit_integers() {
    let dir = tempfile::tempdir().unwrap();
    let c = capture(dir.path(), "build");
    let text = std::fs::read_to_string(&c.otlp).unwrap();
    let mut doc: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let good = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0].clone();
    for (key, bad) in [
        ("traceId", Value::from("AAECAwQFBgcICQoLDA0ODw==")),
        ("startTimeUnixNano", Value::from(1_700_000_000_000_000_000u64)),
        ("kind", Value::from("SPAN_KIND_INTERNAL")),
    ] {
        let span = &mut doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        *span = good.clone();
        span[key] = bad;
        let path = dir.path().join("bad.otlp.json");
        std::fs::write(&path, format!("{doc}\n")).unwrap();
        let out = std::process::Command::new(python())
            .arg(root().join("tools/otlp_check.py"))
            .arg("json")
            .arg(&path)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{key} written wrong is refused");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(key),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn comparison_rows_become_ratio_metrics_with_their_verdicts() {
    let rows = [trace_export_otlp::ComparisonRow {
        metric: "wall_us".into(),
        ratio: 1.25,
        verdict: "Regressed".into(),
        attributes: vec![("cabin_trace.method".into(), "mwu".into())],
    }];
    let labels = trace_export_otlp::Labels { revision: Some("r2".into()), ..Default::default() };
    let data =
        trace_export_otlp::comparison_metrics(&rows, &labels, "cabin-trace", 1_700_000_000_000_000_000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cmp.otlp.json");
    std::fs::write(&path, format!("{}\n", data.to_json_line())).unwrap();
    let decoded = check(&[OsStr::new("json"), path.as_os_str()]);
    let m = metric(&decoded, "cabin_trace.comparison.ratio");
    assert_eq!(m["unit"], "1");
    let p = &m["points"][0];
    assert_eq!(p["value"], 1.25);
    assert_eq!(p["attributes"]["cabin_trace.verdict"], "Regressed");
    assert_eq!(p["attributes"]["cabin_trace.metric"], "wall_us");
    assert_eq!(p["attributes"]["cabin_trace.method"], "mwu");
    assert_eq!(p["attributes"]["vcs.ref.head.revision"], "r2");
}
