//! The minibuild example: a real build with real Ninja and a real compiler.

use std::path::Path;

use serde_json::Value;

use crate::support::*;

pub(crate) fn minibuild(project: &Path, traces: &Path) -> (std::process::Output, Value, Vec<Value>) {
    let exe = example_exe("minibuild");
    let out = std::process::Command::new(exe)
        .arg(project)
        .env("CABIN_TRACE_DIR", traces)
        .env_remove("CABIN_TRACE_FILTER")
        .env_remove("CABIN_TRACE_FORMAT")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let newest = |suffix: &str| {
        let mut all = with_suffix(traces, suffix);
        all.sort_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap());
        all.pop().unwrap()
    };
    let summary: Value = serde_json::from_slice(&std::fs::read(newest(".timings.json")).unwrap()).unwrap();
    let trace: Vec<Value> = serde_json::from_slice(&std::fs::read(newest(".trace.json")).unwrap()).unwrap();
    (out, summary, trace)
}

fn lane_slices<'a>(trace: &'a [Value], lane: &str) -> Vec<&'a Value> {
    trace.iter().filter(|e| e["ph"] == "X" && e["cat"] == lane).collect()
}

#[test]
fn a_clean_build_counts_every_compile_and_link_and_a_second_run_is_a_no_op() {
    let project = tempfile::tempdir().unwrap();
    let traces = tempfile::tempdir().unwrap();
    let (out, summary, trace) = minibuild(project.path(), traces.path());
    assert!(String::from_utf8_lossy(&out.stdout).contains("build: 8 actions"));
    assert_eq!(summary["ninja"]["status"], "available");
    assert_eq!(summary["ninja"]["actions"], 8, "5 compiles, 1 archive, 2 links");
    assert!(summary["ninja"]["alignment_uncertainty_us"].is_u64());
    assert_eq!(summary["lanes"]["tests"]["slices"], 1);

    let actions = lane_slices(&trace, "ninja");
    let mut names: Vec<&str> = actions.iter().map(|a| a["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "app",
            "libmath.a",
            "obj/add.o",
            "obj/main.o",
            "obj/mul.o",
            "obj/pow.o",
            "obj/test_math.o",
            "test_math"
        ]
    );
    // Sub-lanes never hold overlapping actions.
    let mut by_lane: std::collections::BTreeMap<u64, Vec<(f64, f64)>> = Default::default();
    for a in &actions {
        let ts = a["ts"].as_f64().unwrap();
        by_lane.entry(a["tid"].as_u64().unwrap()).or_default().push((ts, ts + a["dur"].as_f64().unwrap()));
    }
    for slices in by_lane.values_mut() {
        slices.sort_by(|a, b| a.partial_cmp(b).unwrap());
        assert!(slices.windows(2).all(|w| w[0].1 <= w[1].0), "overlap on a sub-lane: {slices:?}");
    }
    // The ninja lane sits inside the capture, after the build phase began.
    let build_begin =
        trace.iter().find(|e| e["name"] == "build" && e["ph"] == "X").unwrap()["ts"].as_f64().unwrap();
    assert!(actions.iter().all(|a| a["ts"].as_f64().unwrap() >= build_begin));
    let tests = lane_slices(&trace, "tests");
    assert_eq!(tests.len(), 1);
    assert_eq!(tests[0]["name"], "test_math");
    assert_eq!(tests[0]["args"]["exit_code"], 0);

    let (out, summary, trace) = minibuild(project.path(), traces.path());
    assert!(String::from_utf8_lossy(&out.stdout).contains("build: 0 actions"));
    assert_eq!(summary["ninja"]["status"], "available", "a no-op is zero actions, not unavailable");
    assert_eq!(summary["ninja"]["actions"], 0);
    assert!(lane_slices(&trace, "ninja").is_empty());
}
