//! `cabin-trace export`'s exit status: 2 for bad input, 1 when sending failed.

use std::net::TcpListener;

use crate::support::*;

/// An OTLP/JSON Lines file of one metric with one point.
fn metrics_file(dir: &std::path::Path) -> std::path::PathBuf {
    let file = dir.join("m.otlp.json");
    let line = r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"m","gauge":{"dataPoints":[{"asInt":"1"}]}}]}]}]}"#;
    std::fs::write(&file, format!("{line}\n")).unwrap();
    file
}

#[test]
fn a_usage_error_exits_2_and_says_what_was_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let file = metrics_file(dir.path());
    let file = file.to_str().unwrap();
    for (args, says) in [
        (vec!["export", file], "OTEL_EXPORTER_OTLP_ENDPOINT"),
        (vec!["export", "--header", "novalue", file], "--header=`novalue`"),
        (vec!["export", "--timeout=-1", file], "expected a positive number of seconds"),
    ] {
        let out = cabin_trace(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn a_receiver_that_cannot_be_reached_exits_1_naming_the_url() {
    let dir = tempfile::tempdir().unwrap();
    let file = metrics_file(dir.path());
    // A port that was just free: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let out = cabin_trace(&["export", "--endpoint", &endpoint, "--timeout", "3", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("{endpoint}/v1/metrics")), "{}", stderr(&out));
}
