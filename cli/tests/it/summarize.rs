//! `cabin-trace summarize`.

use std::process::Command;

use crate::support::{cabin_trace, demo_exe, stderr, stdout};

#[test]
fn summarize_prints_the_top_phases_of_a_real_capture() {
    let dir = tempfile::tempdir().unwrap();
    let run =
        Command::new(demo_exe()).args(["--spans", "50"]).env("CABIN_TRACE_DIR", dir.path()).output().unwrap();
    assert!(run.status.success());
    let file = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".timings.json"))
        .expect("a timings.json");
    let out = cabin_trace(&["summarize", "--top", "3", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("build: wall "), "{text}");
    assert!(text.contains("more"), "only the top 3 are listed: {text}");
}

#[test]
fn summarize_names_a_file_it_cannot_read_and_exits_2() {
    let out = cabin_trace(&["summarize", "no/such.timings.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no/such.timings.json: cannot be read"), "{}", stderr(&out));
}
