//! The Chrome JSON opened in a real viewer that no one here wrote: speedscope
//! (npm), in headless Chromium (Debian), driven by `tools/viewer/
//! speedscope_check.mjs` with playwright-core, everything served on loopback.
//! All three are installed by `scripts/install-test-tools.sh`; the test fails
//! with that hint when one is missing.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

const INSTALL: &str = "run scripts/install-test-tools.sh (it installs Debian's chromium and, with npm ci, \
                       tools/viewer's speedscope and playwright-core)";
const CHROMIUM: &str = "/usr/bin/chromium";
/// The whole check, browser start to screenshot, is stopped past this.
const LIMIT: Duration = Duration::from_secs(55);

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Where the run's artifacts go: `target/viewer/`, beside the test binary's profile.
pub(crate) fn artifacts() -> PathBuf {
    let me = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/it-<hash> -> target/viewer
    let target = me.ancestors().nth(3).expect("the target directory");
    let dir = target.join("viewer");
    std::fs::create_dir_all(&dir).expect("create target/viewer");
    dir
}

/// Runs the speedscope check on `trace`, looking for `frame`, and returns its report.
pub(crate) fn speedscope(trace: &Path, screenshot: &Path, frame: &str) -> Value {
    let node = Command::new("node").arg("--version").output();
    assert!(node.is_ok_and(|o| o.status.success()), "node is missing: {INSTALL}");
    assert!(Path::new(CHROMIUM).exists(), "{CHROMIUM} is missing: {INSTALL}");
    let viewer = root().join("tools/viewer");
    for package in ["speedscope", "playwright-core"] {
        let dir = viewer.join("node_modules").join(package);
        assert!(dir.exists(), "{} is missing: {INSTALL}", dir.display());
    }
    let mut child = Command::new("node")
        .arg(viewer.join("speedscope_check.mjs"))
        .arg("--trace")
        .arg(trace)
        .args(["--chromium", CHROMIUM, "--frame", frame, "--timeout-ms"])
        .arg((LIMIT.as_millis() - 5_000).to_string())
        .arg("--screenshot")
        .arg(screenshot)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run node: {e}; {INSTALL}"));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the check") {
            break status;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the speedscope check ran past {LIMIT:?} and was stopped");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child.stdout.take().map(|mut s| s.read_to_string(&mut out));
    child.stderr.take().map(|mut s| s.read_to_string(&mut err));
    assert!(status.success(), "the speedscope check failed ({status}):\n{err}");
    println!("viewer: speedscope check took {:.1} s", started.elapsed().as_secs_f64());
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("the check printed {out:?}: {e}"))
}

/// Chromium's software renderer, not the page, reports a stall when a
/// screenshot reads WebGL's pixels back; speedscope draws with WebGL.
pub(crate) fn from_the_software_gpu(message: &Value) -> bool {
    let text = message["text"].as_str().unwrap_or("");
    text.starts_with("[.WebGL-") && text.contains("GL Driver Message")
}

#[test]
fn speedscope_imports_the_demo_trace_without_a_warning_and_shows_fetch_worker_as_one_frame() {
    let dir = tempfile::tempdir().unwrap();
    let out = demo(
        &[],
        &[
            ("CABIN_TRACE_DIR", dir.path()),
            ("CABIN_TRACE_FILTER", Path::new("debug")),
            ("CABIN_TRACE_FORMAT", Path::new("chrome")),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let trace = one(dir.path(), ".trace.json");
    let artifacts = artifacts();
    std::fs::copy(&trace, artifacts.join("demo-debug.trace.json")).expect("keep the trace");
    let screenshot = artifacts.join("speedscope-left-heavy.png");
    let _ = std::fs::remove_file(&screenshot);

    let report = speedscope(&trace, &screenshot, "fetch_worker");

    let profiles: Vec<&str> =
        report["profiles"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for thread in ["main", "fetch-0", "fetch-1"] {
        assert!(profiles.iter().any(|p| p.contains(&format!(", {thread} (tid"))), "{thread}: {profiles:?}");
    }
    let messages = report["console"].as_array().unwrap();
    let from_page: Vec<&Value> = messages.iter().filter(|m| !from_the_software_gpu(m)).collect();
    assert!(from_page.is_empty(), "console warnings or errors: {from_page:#?}");
    assert_eq!(report["page_errors"], serde_json::json!([]), "uncaught errors in the page");
    // One frame, keyed by name and args as speedscope keys it, on every thread.
    assert_eq!(report["frame_names"], serde_json::json!(["fetch_worker"]), "{report}");
    let per_profile = report["frames_per_profile"].as_object().unwrap();
    let holding: Vec<(&String, &Value)> = per_profile.iter().filter(|(_, n)| **n != 0).collect();
    assert_eq!(holding.len(), 2, "both fetch threads hold the frame: {per_profile:?}");
    assert!(holding.iter().all(|(_, n)| **n == 1), "one fetch_worker frame per thread: {per_profile:?}");
    // And the Left Heavy view finds it once in each of those threads.
    let left_heavy = report["left_heavy_matches"].as_object().unwrap();
    assert_eq!(left_heavy.len(), 2, "{left_heavy:?}");
    assert!(left_heavy.values().all(|n| *n == 1), "one fetch_worker in Left Heavy: {left_heavy:?}");
    let png = std::fs::read(&screenshot).expect("the screenshot is kept");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "a real screenshot: {} bytes", png.len());
    println!("viewer: screenshot {}", screenshot.display());
}

#[test]
fn speedscope_imports_async_tracks_and_flows_without_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let report = crate::cross_thread::capture(dir.path(), "tokio", || {
        crate::async_tracks::tokio_tasks();
        tracing::info_span!("start_helper").in_scope(|| {
            let helper = cabin_trace::spawn("helper", || tracing::info_span!("helper_work").in_scope(|| ()));
            helper.unwrap().join().unwrap();
        });
    });
    let trace = crate::cross_thread::file(&report, "chrome").to_path_buf();
    let text = std::fs::read_to_string(&trace).unwrap();
    for phase in [r#""ph":"b""#, r#""ph":"e""#, r#""ph":"s""#, r#""ph":"f""#] {
        assert!(text.contains(phase), "the trace holds {phase}");
    }
    let artifacts = artifacts();
    std::fs::copy(&trace, artifacts.join("tokio.trace.json")).expect("keep the trace");
    let screenshot = artifacts.join("speedscope-tokio.png");

    let seen = speedscope(&trace, &screenshot, "task");

    let messages = seen["console"].as_array().unwrap();
    let from_page: Vec<&Value> = messages.iter().filter(|m| !from_the_software_gpu(m)).collect();
    assert!(from_page.is_empty(), "console warnings or errors: {from_page:#?}");
    assert_eq!(seen["page_errors"], serde_json::json!([]), "uncaught errors in the page");
    // The polls are the frames, one per task (speedscope keys a frame by its
    // name and args); the async pairs and the flows are not drawn.
    let frames = seen["frame_names"].as_array().unwrap();
    assert_eq!(frames.len(), 48, "{seen}");
    assert!(frames.iter().all(|f| f.as_str().is_some_and(|f| f.starts_with("task {\"n\":"))), "{seen}");
}
