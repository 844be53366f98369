//! The tool's own logging prints exactly the same with capture on and off.

use std::path::Path;
use std::process::Command;

use crate::support::{example_exe, one};

fn run(mode: &str, dir: Option<&Path>) -> std::process::Output {
    let mut cmd = Command::new(example_exe("logtool"));
    cmd.arg(mode);
    for var in ["CABIN_TRACE_DIR", "CABIN_TRACE_FILTER", "CABIN_TRACE_FORMAT", "RUST_LOG"] {
        cmd.env_remove(var);
    }
    if let Some(dir) = dir {
        cmd.env("CABIN_TRACE_DIR", dir);
    }
    cmd.output().expect("run logtool")
}

fn same_output_with_and_without_capture(mode: &str, expected_lines: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let off = run(mode, None);
    let on = run(mode, Some(dir.path()));
    let (off_err, on_err) = (String::from_utf8_lossy(&off.stderr), String::from_utf8_lossy(&on.stderr));
    assert_eq!(on_err, off_err, "{mode}: stderr differs under capture");
    assert_eq!(on.stdout, off.stdout, "{mode}: stdout differs");
    assert_eq!(on.status.code(), off.status.code());
    assert_eq!(String::from_utf8_lossy(&on.stdout), "built\n");
    for line in expected_lines {
        assert!(off_err.contains(line), "{mode}: no `{line}` in\n{off_err}");
    }
    assert!(!on_err.contains("command"), "{mode}: the capture's root span showed:\n{on_err}");
    // And the capture did capture the tool's spans, from every thread it could.
    let trace: serde_json::Value =
        serde_json::from_slice(&std::fs::read(one(dir.path(), ".trace.json")).unwrap()).unwrap();
    let names: Vec<&str> = trace.as_array().unwrap().iter().filter_map(|e| e["name"].as_str()).collect();
    for span in ["command", "resolve", "fetch", "compile"] {
        assert!(names.contains(&span), "{mode}: no `{span}` in the trace: {names:?}");
    }
}

#[test]
fn a_global_fmt_subscriber_prints_the_same_from_every_thread_with_capture_on_and_off() {
    same_output_with_and_without_capture(
        "global",
        &[
            " INFO logtool: starting",
            " WARN resolve{packages=3}: logtool: retrying a download attempt=1",
            " INFO fetch{url=\"https://example.invalid/a\"}: logtool: fetched bytes=10",
            " INFO logtool: from a bound thread",
            " INFO logtool: from a plain thread",
            " INFO compile{unit=\"lib\" cached=false}: logtool: compiled",
        ],
    );
}

#[test]
fn an_fmt_layer_given_to_with_layer_prints_the_same_with_capture_on_and_off() {
    same_output_with_and_without_capture(
        "layer",
        &[
            " INFO logtool: starting",
            " WARN resolve{packages=3}: logtool: retrying a download attempt=1",
            " INFO fetch{url=\"https://example.invalid/a\"}: logtool: fetched bytes=10",
            " INFO compile{unit=\"lib\" cached=false}: logtool: compiled",
        ],
    );
}

#[test]
fn an_fmt_layer_at_warn_prints_the_same_with_capture_on_and_off() {
    // The layer enables none of the spans, which are the capture's alone: its
    // warning inside `resolve` carries no span, with capture on as off.
    same_output_with_and_without_capture("warn-layer", &[" WARN logtool: retrying a download attempt=1"]);
    let off = run("warn-layer", None);
    let err = String::from_utf8_lossy(&off.stderr);
    assert_eq!(err.lines().count(), 1, "more than the one warning at WARN:\n{err}");
}
