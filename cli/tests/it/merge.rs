//! `cabin-trace merge` on real captures of the demo.

use std::process::Command;

use crate::support::{cabin_trace, demo_exe, stderr, stdout};

#[test]
fn two_captures_of_separate_invocations_merge_into_two_families() {
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..2 {
        let out = Command::new(demo_exe())
            .args(["--spans", "10"])
            .env("CABIN_TRACE_DIR", dir.path())
            .env_remove("CABIN_TRACE_PARENT")
            .env_remove("TRACEPARENT")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let merged = dir.path().join("merged");
    std::fs::create_dir(&merged).unwrap();
    let out = cabin_trace(&["merge", "--out", merged.to_str().unwrap(), dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Each top-level capture is a family of its own: two traces, never one.
    assert_eq!(stdout(&out).lines().filter(|l| l.contains("processes")).count(), 2, "{}", stdout(&out));
    let pftraces = std::fs::read_dir(&merged)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".pftrace"))
        .count();
    assert_eq!(pftraces, 2);
}

#[test]
fn a_directory_without_captures_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = cabin_trace(&["merge", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(&dir.path().display().to_string()), "{}", stderr(&out));
}
