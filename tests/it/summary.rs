//! The timings summary of the demo, checked number by number.

use std::path::Path;

use serde_json::Value;

use crate::support::*;

fn bytes_of(i: u64) -> u64 {
    (i * 37) % 1000 + 1 // as the demo computes it
}

fn span<'a>(summary: &'a Value, name: &str) -> &'a Value {
    summary["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no span {name} in the summary"))
}

#[test]
fn the_demo_summary_counts_exactly_what_its_arguments_imply() {
    let (n, threads) = (300u64, 3u64);
    let dir = tempfile::tempdir().unwrap();
    let out = demo(
        &["--spans", &n.to_string(), "--threads", &threads.to_string()],
        &[("CABIN_TRACE_DIR", dir.path()), ("CABIN_TRACE_FILTER", Path::new("debug"))],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let summary: Value =
        serde_json::from_slice(&std::fs::read(one(dir.path(), ".timings.json")).unwrap()).unwrap();
    assert_eq!(summary["format_version"], 3);
    assert_eq!(summary["stacks"]["status"], "off", "stacks are off unless asked for");
    assert_eq!(summary["command"], "build");
    assert_eq!(summary["trace_complete"], true);
    assert_eq!(summary["dropped_records"], 0);
    assert_eq!(summary["ninja"]["status"], "not_run");

    let resolve = span(&summary, "resolve_package");
    assert_eq!(resolve["count"], n);
    assert_eq!(resolve["field_sums"]["requests"], n);
    assert_eq!(resolve["field_sums"]["rounds"], (0..n).map(|i| i % 3).sum::<u64>());
    assert_eq!(resolve["field_sums"]["index"], n * (n - 1) / 2);

    let download = span(&summary, "download");
    assert_eq!(download["count"], n);
    assert_eq!(download["field_sums"]["bytes"], (0..n).map(bytes_of).sum::<u64>());

    for phase in ["command", "resolve", "fetch", "compile", "run_compiler", "link"] {
        assert_eq!(span(&summary, phase)["count"], 1, "{phase}");
    }
    assert_eq!(span(&summary, "fetch")["field_sums"]["threads"], threads);
    assert_eq!(span(&summary, "fetch_worker")["count"], threads, "one per helper thread");
    assert!(
        span(&summary, "fetch_worker")["field_sums"].get("worker").is_none(),
        "the lane names the worker"
    );
    assert_eq!(span(&summary, "run_compiler")["field_sums"]["exit_code"], 0, "recorded after creation");
    assert_eq!(summary["events"], 1);

    // Inclusive time: a phase holds its children, and the root holds everything.
    let us = |name: &str| span(&summary, name)["total_inclusive_us"].as_u64().unwrap();
    assert!(us("resolve") >= us("resolve_package"));
    assert!(us("command") >= us("resolve") + us("fetch") + us("compile"));
    assert!(summary["wall_us"].as_u64().unwrap() >= us("command"));

    let r = &summary["resources"];
    if cfg!(unix) {
        assert!(r["self_max_rss_kib"].as_u64().unwrap() > 0);
        assert_eq!(r["waited_children"], 1, "the compiler child, waited for with wait_child");
        assert!(r["largest_child_max_rss_kib"].as_u64().unwrap() > 0, "the compiler child was waited for");
        assert_eq!(r["missing"], Value::Null);
    } else {
        assert!(r["missing"].is_string() && r["self_max_rss_kib"].is_null(), "{r}");
    }

    let files = summary["files"].as_array().unwrap();
    assert_eq!(files.len(), 2);
    for (f, format) in files.iter().zip(["chrome", "perfetto"]) {
        assert_eq!(f["format"], format);
        assert_eq!(f["complete"], true);
        assert!(dir.path().join(f["file"].as_str().unwrap()).exists());
    }
}

/// Unix only: the validator is the Linux Python of the test set-up.
#[cfg(unix)]
#[test]
fn the_summary_validates_against_the_checked_in_schema() {
    let dir = tempfile::tempdir().unwrap();
    let out = demo(
        &["--spans", "20"],
        &[("CABIN_TRACE_DIR", dir.path()), ("CABIN_TRACE_FILTER", Path::new("debug"))],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = one(dir.path(), ".timings.json");
    let ok = check_schema(&summary);
    assert!(ok.status.success(), "{}{}", String::from_utf8_lossy(&ok.stdout), stderr(&ok));
    // The validator can fail: a summary with a field of the wrong type.
    let mut v: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    v["wall_us"] = Value::from("slow");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, serde_json::to_vec(&v).unwrap()).unwrap();
    assert!(!check_schema(&bad).status.success(), "a wrong type is refused by the schema");
}

/// Runs the JSON Schema validator of the test set-up on a summary, against
/// the checked-in schema.
#[cfg(unix)]
pub fn check_schema(file: &Path) -> std::process::Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join(".tools/py/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/install-test-tools.sh to install the JSON Schema validator",
        python.display()
    );
    std::process::Command::new(&python)
        .arg(root.join("tools/validate_json_schema.py"))
        .arg(root.join("trace-summary/schema/timings-v3.schema.json"))
        .arg(file)
        .output()
        .unwrap()
}
