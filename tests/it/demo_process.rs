//! The measurement-infrastructure checks, on the demo as a real process.

use std::path::Path;
use std::process::Stdio;

use crate::support::*;

#[test]
fn stdout_is_byte_identical_under_capture() {
    let dir = tempfile::tempdir().unwrap();
    let plain = demo(&["--spans", "120", "--threads", "3"], &[]);
    let traced = demo(
        &["--spans", "120", "--threads", "3"],
        &[("CABIN_TRACE_DIR", dir.path()), ("CABIN_TRACE_FILTER", Path::new("trace"))],
    );
    assert!(plain.status.success() && traced.status.success(), "{}", stderr(&traced));
    assert!(!plain.stdout.is_empty());
    assert_eq!(plain.stdout, traced.stdout);
    assert!(!with_suffix(dir.path(), ".trace.json").is_empty(), "the traced run wrote a trace");
}

#[test]
fn capture_off_writes_nothing_and_says_how_to_turn_it_on() {
    let out = demo(&["--spans", "10"], &[]);
    assert!(out.status.success());
    assert!(stderr(&out).contains("set CABIN_TRACE_DIR=<dir>"), "{}", stderr(&out));
}

#[test]
fn a_capture_leaves_one_file_of_each_kind_and_no_partial() {
    let dir = tempfile::tempdir().unwrap();
    let out = demo(&["--spans", "30"], &[("CABIN_TRACE_DIR", dir.path())]);
    assert!(out.status.success(), "{}", stderr(&out));
    let names = files_in(dir.path());
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names.iter().all(|n| !n.ends_with(".partial")), "{names:?}");
    for suffix in [".trace.json", ".pftrace", ".timings.json"] {
        let file = one(dir.path(), suffix);
        assert!(stderr(&out).contains(&file.display().to_string()), "the demo names what it wrote");
    }
    // The stem is <command>-<unix-ms>-<pid>-<seq>.
    let stem = names[0].split('.').next().unwrap();
    let parts: Vec<&str> = stem.split('-').collect();
    assert_eq!(parts.len(), 4, "{stem}");
    assert_eq!(parts[0], "build");
    assert!(parts[1..].iter().all(|p| p.parse::<u64>().is_ok()), "{stem}");
}

#[test]
fn the_demo_prints_its_top_phases_unless_told_not_to() {
    let dir = tempfile::tempdir().unwrap();
    let with_table = demo(&["--spans", "20"], &[("CABIN_TRACE_DIR", dir.path())]);
    let without = demo(&["--spans", "20", "--no-table"], &[("CABIN_TRACE_DIR", dir.path())]);
    assert!(with_table.status.success() && without.status.success(), "{}", stderr(&without));
    let header = "total ms";
    assert!(stderr(&with_table).contains(header), "{}", stderr(&with_table));
    assert!(!stderr(&without).contains(header), "{}", stderr(&without));
    assert!(stderr(&without).contains(".timings.json"), "it still names what it wrote");
    assert_eq!(with_table.stdout, without.stdout);
}

#[test]
fn a_failing_command_keeps_its_error_and_finishes_the_capture() {
    let dir = tempfile::tempdir().unwrap();
    let plain = demo(&["--fail"], &[]);
    let out = demo(&["--fail"], &[("CABIN_TRACE_DIR", dir.path())]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(plain.status.code(), Some(1));
    assert!(stderr(&out).contains("error: link failed: undefined reference"), "{}", stderr(&out));
    assert_eq!(plain.stdout, out.stdout);
    let (_, slices) = crate::chrome_output::check(&one(dir.path(), ".trace.json"), None);
    assert!(slices.iter().any(|s| s.name == "link"), "the failing phase is in the trace");
    one(dir.path(), ".timings.json");
    assert!(with_suffix(dir.path(), ".partial").is_empty());
}

fn assert_refused(out: &std::process::Output, variable: &str) {
    assert_eq!(out.status.code(), Some(2), "{}", stderr(out));
    assert!(stderr(out).contains(&format!("error: {variable}=")), "{}", stderr(out));
    assert!(out.stdout.is_empty(), "the command did not run");
}

#[test]
fn a_malformed_filter_refuses_to_run_the_command_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("traces");
    for filter in ["info,=[", "", "=", "info,cabin=loud", "inof", "warning", "loud", "demo"] {
        let out = demo(&[], &[("CABIN_TRACE_DIR", &target), ("CABIN_TRACE_FILTER", Path::new(filter))]);
        assert_refused(&out, "CABIN_TRACE_FILTER");
        assert!(!target.exists(), "no directory or file is created for `{filter}`");
    }
}

#[test]
fn an_unknown_format_refuses_to_run_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let out = demo(&[], &[("CABIN_TRACE_DIR", dir.path()), ("CABIN_TRACE_FORMAT", Path::new("chrome,svg"))]);
    assert_refused(&out, "CABIN_TRACE_FORMAT");
    assert!(stderr(&out).contains("`svg`"));
    assert!(files_in(dir.path()).is_empty());
}

#[test]
fn an_unusable_trace_dir_refuses_to_run_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    // A regular file, and a path whose parent is a regular file.
    for bad in [file.clone(), file.join("sub")] {
        let out = demo(&[], &[("CABIN_TRACE_DIR", &bad)]);
        assert_refused(&out, "CABIN_TRACE_DIR");
        assert_eq!(files_in(dir.path()), ["a-file"], "nothing created for {}", bad.display());
    }
}

/// Unix only: it makes a directory unwritable with Unix permissions (or, as
/// root, uses `/proc/self`).
#[cfg(unix)]
#[test]
fn a_trace_dir_that_cannot_be_written_refuses_to_run_the_command() {
    let dir = tempfile::tempdir().unwrap();
    // A directory that exists but cannot be written (read-only for everyone;
    // root ignores permissions, so it gets /proc/self, which nobody can create files in).
    let ro = if is_root() { Path::new("/proc/self").to_path_buf() } else { readonly_dir(dir.path()) };
    let out = demo(&[], &[("CABIN_TRACE_DIR", &ro)]);
    assert_refused(&out, "CABIN_TRACE_DIR");
    assert!(stderr(&out).contains("cannot be written"), "{}", stderr(&out));
}

#[cfg(unix)]
fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(unix)]
fn readonly_dir(parent: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let ro = parent.join("read-only");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    ro
}

#[test]
fn concurrent_processes_write_separate_complete_captures() {
    let dir = tempfile::tempdir().unwrap();
    let children: Vec<_> = (0..8)
        .map(|_| {
            demo_cmd(&["--spans", "40"], &[("CABIN_TRACE_DIR", dir.path())])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn a demo")
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let traces = with_suffix(dir.path(), ".trace.json");
    assert_eq!(traces.len(), 8, "{:?}", files_in(dir.path()));
    assert_eq!(with_suffix(dir.path(), ".timings.json").len(), 8);
    assert!(with_suffix(dir.path(), ".partial").is_empty());
    let mut pids = std::collections::BTreeSet::new();
    for t in &traces {
        let text = std::fs::read_to_string(t).unwrap();
        let events: serde_json::Value = serde_json::from_str(&text).unwrap();
        let pid = events[0]["pid"].as_u64().unwrap();
        // Each file holds one process's events only, and those of its lanes
        // (the demo's child process), each drawn as a process of its own.
        let lanes: std::collections::BTreeSet<u64> = events
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"] == "process_name" && e["args"]["name"] == cabin_trace::CHILDREN_LANE)
            .filter_map(|e| e["pid"].as_u64())
            .collect();
        assert_eq!(lanes.len(), 1, "the child's lane");
        assert!(events
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["pid"].as_u64() == Some(pid) || lanes.contains(&e["pid"].as_u64().unwrap_or(0))));
        assert!(t.file_name().unwrap().to_string_lossy().contains(&format!("-{pid}-")));
        pids.insert(pid);
    }
    assert_eq!(pids.len(), 8);
}

/// Unix only: the file-size limit comes from `sh`'s `ulimit`.
#[cfg(unix)]
#[test]
fn a_write_failure_leaves_a_partial_trace_and_says_so() {
    // A real operating-system error: the file-size limit makes writes past it
    // fail with EFBIG (SIGXFSZ ignored, as `trap "" XFSZ` does).
    let dir = tempfile::tempdir().unwrap();
    let exe = demo_exe();
    let plain = demo(&["--spans", "2000"], &[]);
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"trap "" XFSZ; ulimit -f 64; exec "$0" --spans 2000"#)
        .arg(&exe)
        .env("CABIN_TRACE_DIR", dir.path())
        .env("CABIN_TRACE_FILTER", "debug")
        .env_remove("CABIN_TRACE_FORMAT")
        .output()
        .unwrap();
    assert!(out.status.success(), "the command's exit status is unchanged: {}", stderr(&out));
    assert_eq!(out.stdout, plain.stdout, "and so is its output");
    // Both trace files outgrow the limit; the small summary does not.
    for suffix in [".trace.json", ".pftrace"] {
        let partial = one(dir.path(), &format!("{suffix}.partial"));
        assert!(with_suffix(dir.path(), suffix).is_empty(), "no final {suffix}");
        let warning = format!("warning: trace file {} is incomplete", partial.display());
        assert!(stderr(&out).contains(&warning), "{}", stderr(&out));
    }
    assert_eq!(stderr(&out).matches("warning: trace file").count(), 2, "one line per failed file");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(one(dir.path(), ".timings.json")).unwrap()).unwrap();
    assert_eq!(summary["trace_complete"], false);
    for f in summary["files"].as_array().unwrap() {
        assert_eq!(f["complete"], false);
        assert!(f["error"].as_str().unwrap().contains("File too large"), "{f}");
    }
}

#[test]
fn a_misspelt_level_is_refused_with_the_level_it_resembles() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("traces");
    let out = demo(&[], &[("CABIN_TRACE_DIR", &target), ("CABIN_TRACE_FILTER", Path::new("inof"))]);
    assert_refused(&out, "CABIN_TRACE_FILTER");
    assert!(stderr(&out).contains("CABIN_TRACE_FILTER=`inof`"), "{}", stderr(&out));
    assert!(stderr(&out).contains("did you mean `info`?"), "{}", stderr(&out));
    assert!(!target.exists());
}

/// The span names a capture of the demo with `filter` holds, from its summary.
fn span_names_with_filter(filter: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let out = demo(
        &["--spans", "20"],
        &[("CABIN_TRACE_DIR", dir.path()), ("CABIN_TRACE_FILTER", Path::new(filter))],
    );
    assert!(out.status.success(), "{filter:?}: {}", stderr(&out));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(one(dir.path(), ".timings.json")).unwrap()).unwrap();
    let mut names: Vec<String> = summary["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn spacing_and_empty_items_in_the_filter_capture_what_the_plain_directives_capture() {
    let info = span_names_with_filter("info");
    let debug_demo = span_names_with_filter("info,demo=debug");
    assert!(info.contains(&"command".to_string()) && info.len() > 1, "{info:?}");
    assert!(debug_demo.len() > info.len(), "the second directive adds the debug spans: {debug_demo:?}");
    for spaced in [" info ", "info,", "info,,"] {
        assert_eq!(span_names_with_filter(spaced), info, "{spaced:?}");
    }
    assert_eq!(span_names_with_filter("info, demo=debug"), debug_demo);
}

#[test]
fn the_root_span_is_kept_under_a_filter_for_another_tools_target() {
    let names = span_names_with_filter("kache=debug");
    assert_eq!(names, ["command"]);
}
