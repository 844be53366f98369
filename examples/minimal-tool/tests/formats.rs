//! The tool as a user builds it. `cargo test -p cabin-trace-minimal-tool`
//! (this package alone, as .ci/run runs it) builds the façade with its default
//! features, without `otlp`; under `cargo test --workspace`, Cargo unifies
//! features across the workspace and the façade's own tests add `otlp`. Each
//! test checks the build it got, which `cabin_trace::ALL_FORMATS` names.

use std::path::Path;
use std::process::{Command, Output};

fn run(dir: &Path, format: Option<&str>) -> Output {
    let mut tool = Command::new(env!("CARGO_BIN_EXE_minimal-tool"));
    tool.env("CABIN_TRACE_DIR", dir).env_remove("CABIN_TRACE_FORMAT");
    if let Some(format) = format {
        tool.env("CABIN_TRACE_FORMAT", format);
    }
    tool.output().expect("the minimal tool runs")
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

#[test]
fn the_default_build_writes_chrome_perfetto_and_the_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run(tmp.path(), None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "500500\n");
    let names = files(tmp.path());
    let suffixes: Vec<&str> = names.iter().map(|n| n.split_once('.').unwrap().1).collect();
    assert_eq!(suffixes, ["pftrace", "timings.json", "trace.json"], "{names:?}");
}

#[test]
fn a_format_the_build_left_out_is_refused_before_any_file_exists_naming_the_feature() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("traces");
    let out = run(&dir, Some("perfetto,otlp"));
    if cabin_trace::ALL_FORMATS.contains(&"otlp") {
        // A workspace-wide build: the façade's tests compiled `otlp` in.
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(files(&dir).iter().any(|n| n.ends_with(".otlp.json")), "{:?}", files(&dir));
        return;
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("error: CABIN_TRACE_FORMAT=`perfetto,otlp`: names `otlp`"), "{stderr}");
    assert!(stderr.contains("enable the feature `otlp` of the cabin-trace crate"), "{stderr}");
    assert!(out.stdout.is_empty(), "the command did not run");
    assert!(!dir.exists(), "no directory, no file: {:?}", files(&dir));
}
