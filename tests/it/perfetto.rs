//! Perfetto output, checked by the independent decoder built from Perfetto's
//! official schema (tools/pftrace_check.py, installed by
//! scripts/install-test-tools.sh), and compared with the Chrome JSON of the
//! same capture.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::chrome_output::Slice;
use crate::support::*;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> PathBuf {
    let p = root().join(".tools/py/bin/python");
    assert!(p.exists(), "{} is missing: run scripts/install-test-tools.sh", p.display());
    p
}

/// Runs the official-schema checker on `files` (`--concat` when several) and
/// returns the slices it dumps; panics with its messages if any check fails.
pub fn check(files: &[&Path]) -> Vec<Value> {
    check_inflating(files, None)
}

/// [`check`], also writing the trace with its compressed packets inflated to
/// `inflated`.
fn check_inflating(files: &[&Path], inflated: Option<&Path>) -> Vec<Value> {
    let mut cmd = Command::new(python());
    cmd.arg(root().join("tools/pftrace_check.py")).arg("--dump-slices");
    if files.len() > 1 {
        cmd.arg("--concat");
    }
    if let Some(path) = inflated {
        cmd.arg("--inflate").arg(path);
    }
    let out = cmd.args(files).output().expect("run tools/pftrace_check.py");
    assert!(out.status.success(), "the official-schema check failed for {files:?}:\n{}", stderr(&out));
    String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// `protoc --decode` against the official schema's descriptor set; asserts it
/// decodes with no unknown (numbered) fields.
fn protoc_decodes(file: &Path) {
    let desc = root().join(".tools/perfetto_trace.desc");
    assert!(desc.exists(), "{} is missing: run scripts/install-test-tools.sh", desc.display());
    let out = Command::new("protoc")
        .arg(format!("--descriptor_set_in={}", desc.display()))
        .arg("--decode=perfetto.protos.Trace")
        .stdin(std::fs::File::open(file).unwrap())
        .output()
        .expect("protoc is missing: run scripts/install-test-tools.sh");
    assert!(out.status.success(), "protoc could not decode {}: {}", file.display(), stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let unknown = text
        .lines()
        .find(|l| l.trim_start().split(':').next().is_some_and(|k| k.trim().parse::<u64>().is_ok()));
    assert!(unknown.is_none(), "an unknown field in {}: {:?}", file.display(), unknown);
}

fn thread_slices(dumped: &[Value]) -> Vec<Slice> {
    let mut v: Vec<Slice> = dumped
        .iter()
        .filter(|s| s["kind"] == "slice" && s.get("tid").is_some_and(|t| !t.is_null()))
        .map(|s| Slice {
            tid: s["tid"].as_u64().unwrap(),
            name: s["name"].as_str().unwrap().to_string(),
            begin_ns: s["begin_ns"].as_u64().unwrap(),
            end_ns: s["end_ns"].as_u64().unwrap(),
        })
        .collect();
    v.sort();
    v
}

#[test]
fn the_demo_pftrace_passes_the_official_schema_and_matches_the_chrome_json_slice_for_slice() {
    let dir = tempfile::tempdir().unwrap();
    let out = demo(
        &["--spans", "200", "--threads", "2"],
        &[("CABIN_TRACE_DIR", dir.path()), ("CABIN_TRACE_FILTER", Path::new("debug"))],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let pftrace = one(dir.path(), ".pftrace");
    protoc_decodes(&pftrace);
    let inflated = dir.path().join("inflated.bin");
    let dumped = check_inflating(&[&pftrace], Some(&inflated));
    let (file, plain) =
        (std::fs::metadata(&pftrace).unwrap().len(), std::fs::metadata(&inflated).unwrap().len());
    assert_eq!(file, plain, "the default sink compresses nothing");
    let (threads, chrome) = crate::chrome_output::check(&one(dir.path(), ".trace.json"), None);
    let perfetto = thread_slices(&dumped);
    assert_eq!(perfetto.len(), chrome.len(), "the same number of slices");
    assert_eq!(perfetto, chrome, "every slice on the same thread, with the same name and times");
    // Instants: the same name, level and location in both files.
    let chrome_events: Vec<Value> =
        serde_json::from_slice(&std::fs::read(one(dir.path(), ".trace.json")).unwrap()).unwrap();
    let instant = |name: &Value, args: &Value| {
        (name.as_str().unwrap().to_string(), args["level"].clone(), args["location"].clone())
    };
    let chrome_instants: Vec<_> = chrome_events
        .iter()
        .filter(|e| e["ph"] == "i" && e["s"] == "t")
        .map(|e| instant(&e["name"], &e["args"]))
        .collect();
    // The sink's own instants, the sources of the flows to the fetch threads,
    // are the JSON's `s` events.
    let perfetto_instants: Vec<_> = dumped
        .iter()
        .filter(|s| s["kind"] == "instant" && s.get("tid").is_some() && s["category"] != "cabin_trace")
        .map(|s| instant(&s["name"], &s["args"]))
        .collect();
    assert_eq!(chrome_instants.len(), 1, "{chrome_instants:?}");
    assert_eq!(chrome_instants[0].0, "linked");
    assert!(chrome_instants[0].2.as_str().is_some_and(|l| l.contains("demo.rs:")), "{chrome_instants:?}");
    assert_eq!(perfetto_instants, chrome_instants);
    let names: Vec<&str> = dumped.iter().filter_map(|s| s["thread"].as_str()).collect();
    for t in threads.values() {
        assert!(names.contains(&t.as_str()), "thread {t} is named in the pftrace");
    }
    let summary: Value =
        serde_json::from_slice(&std::fs::read(one(dir.path(), ".timings.json")).unwrap()).unwrap();
    let formats: Vec<&str> =
        summary["files"].as_array().unwrap().iter().map(|f| f["format"].as_str().unwrap()).collect();
    assert_eq!(formats, ["chrome", "perfetto"]);
}

#[test]
fn two_processes_pftraces_concatenated_form_one_valid_trace() {
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..2 {
        let out = demo(
            &["--spans", "50"],
            &[("CABIN_TRACE_DIR", dir.path()), ("CABIN_TRACE_FORMAT", Path::new("perfetto"))],
        );
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let files = with_suffix(dir.path(), ".pftrace");
    assert_eq!(files.len(), 2);
    assert!(with_suffix(dir.path(), ".trace.json").is_empty(), "only the format asked for");
    let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let inflated = dir.path().join("inflated.bin");
    let dumped = check_inflating(&refs, Some(&inflated));
    protoc_decodes(&inflated);
    let pids: std::collections::BTreeSet<u64> = dumped.iter().filter_map(|s| s["pid"].as_u64()).collect();
    assert_eq!(pids.len(), 2, "both processes' slices are in the concatenation");
    let joined = dir.path().join("joined.pftrace");
    let mut bytes = std::fs::read(&files[0]).unwrap();
    bytes.extend(std::fs::read(&files[1]).unwrap());
    std::fs::write(&joined, bytes).unwrap();
    protoc_decodes(&joined);
}

#[test]
fn the_minibuild_lanes_are_tracks_of_their_own_in_the_pftrace() {
    let project = tempfile::tempdir().unwrap();
    let traces = tempfile::tempdir().unwrap();
    let out = Command::new(example_exe("minibuild"))
        .arg(project.path())
        .env("CABIN_TRACE_DIR", traces.path())
        .env_remove("CABIN_TRACE_FILTER")
        .env_remove("CABIN_TRACE_FORMAT")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let dumped = check(&[&one(traces.path(), ".pftrace")]);
    let in_lane = |lane: &str| dumped.iter().filter(|s| s["lane"] == lane && s["kind"] == "slice").count();
    assert_eq!(in_lane("ninja"), 8);
    assert_eq!(in_lane("tests"), 1);
}

/// The demo's compiler is a real child process run with `run_child`: a slice
/// of the `children` lane, with the child's exit code, CPU and peak memory,
/// in both files.
#[test]
fn the_demos_child_process_is_a_slice_of_the_children_lane_with_its_usage_in_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = demo(&["--spans", "50"], &[("CABIN_TRACE_DIR", dir.path())]);
    assert!(out.status.success(), "{}", stderr(&out));
    let dumped = check(&[&one(dir.path(), ".pftrace")]);
    let children: Vec<&Value> =
        dumped.iter().filter(|s| s["lane"] == cabin_trace::CHILDREN_LANE && s["kind"] == "slice").collect();
    assert_eq!(children.len(), 1, "{dumped:?}");
    assert_eq!(children[0]["name"], "demo", "named after the program: {}", children[0]);
    let json: Vec<Value> =
        serde_json::from_slice(&std::fs::read(one(dir.path(), ".trace.json")).unwrap()).unwrap();
    let slice = json
        .iter()
        .find(|e| e["ph"] == "X" && e["cat"] == cabin_trace::CHILDREN_LANE)
        .unwrap_or_else(|| panic!("no children slice in the JSON"));
    assert_eq!(slice["name"], "demo");
    assert_eq!(slice["args"]["exit_code"], 0, "{slice}");
    #[cfg(unix)]
    {
        let peak = slice["args"]["max_rss_kib"].as_u64().unwrap_or(0);
        assert!(peak > 100, "the child's own peak resident set, in KiB: {slice}");
        assert!(slice["args"].get("user_us").is_some(), "{slice}");
    }
}

#[test]
fn ten_thousand_spans_take_under_37_bytes_each_in_the_pftrace_and_half_the_json_or_less() {
    let (p, j) = span_sizes("off");
    assert!(p < 37.0, "{p:.2} bytes per span");
    assert!(
        p * 2.0 <= j,
        "the pftrace ({p:.2} bytes per span) is at least 2x smaller than the JSON ({j:.2})"
    );
}

/// With the thread CPU time of every span (the default at `info`), each of a
/// span's two packets adds the counter's track and value: 38 bytes at most.
#[test]
fn ten_thousand_spans_with_their_thread_cpu_time_take_under_75_bytes_each_and_less_than_the_json() {
    let (p, j) = span_sizes("info");
    assert!(p < 75.0, "{p:.2} bytes per span");
    assert!(p < j, "the pftrace ({p:.2} bytes per span) is smaller than the JSON ({j:.2})");
}

/// Bytes per span of the `.pftrace` and of the JSON of a capture of 10,000
/// spans without fields, with `SIZE_TRACE_CPU=cpu`.
fn span_sizes(cpu: &str) -> (f64, f64) {
    const SPANS: u64 = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let config = cabin_trace::Config::from_lookup("SIZE", cabin_trace::FORMATS, |name| match name {
        "SIZE_TRACE_DIR" => Some(dir.path().into()),
        "SIZE_TRACE_CPU" => Some(cpu.into()),
        _ => None,
    })
    .unwrap();
    let ((), report) = cabin_trace::Capture::from_config(config)
        .run_with_report("size", || {
            for _ in 0..SPANS {
                let _span = tracing::info_span!("step").entered();
            }
        })
        .unwrap();
    let report = report.unwrap();
    assert!(report.is_complete(), "{:?}", report.warnings());
    let file = |sink: &str| report.files.iter().find(|f| f.sink == sink).unwrap().path.clone();
    let (pftrace, json) = (file("perfetto"), file("chrome"));
    let dumped = check(&[&pftrace]);
    let steps = dumped.iter().filter(|s| s["kind"] == "slice" && s["name"] == "step").count() as u64;
    assert_eq!(steps, SPANS, "every span is in the pftrace");
    let len = |p: &Path| std::fs::metadata(p).unwrap().len() as f64 / SPANS as f64;
    let (p, j) = (len(&pftrace), len(&json));
    println!(
        "perfetto size: {SPANS} spans without fields, thread CPU time at {cpu}: pftrace {p:.2} bytes per span, \
         Chrome JSON {j:.1}, {:.1}x smaller",
        j / p
    );
    (p, j)
}
