//! `cabin-trace report`'s pages opened from `file://` in headless Chromium
//! (Debian's, driven by `tools/viewer/report_check.mjs` with playwright-core):
//! a capture of the demo, a minibuild with Ninja actions and a test, a family
//! merge, and `bench` sessions of a real A/B and an A/A. Each page must load
//! with no console message, no page error and no request, hold its named
//! sections, and plot as many marks as its input holds. The screenshots are
//! kept under `target/report-viewer/`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

const INSTALL: &str = "run scripts/install-test-tools.sh (it installs Debian's chromium and, with npm ci, \
                       tools/viewer's playwright-core)";
const CHROMIUM: &str = "/usr/bin/chromium";
/// Every page's check, browser start to last screenshot, is stopped past this.
const LIMIT: Duration = Duration::from_secs(90);

/// `target/report-viewer/`, beside the test binary's profile.
fn artifacts() -> PathBuf {
    let me = std::env::current_exe().expect("the test binary's path");
    let dir = me.ancestors().nth(3).expect("the target directory").join("report-viewer");
    std::fs::create_dir_all(&dir).expect("create target/report-viewer");
    dir
}

/// Opens every page in one headless Chromium; returns each page's report.
fn open_in_chromium(pages: &[(PathBuf, PathBuf)]) -> Vec<Value> {
    let node = Command::new("node").arg("--version").output();
    assert!(node.is_ok_and(|o| o.status.success()), "node is missing: {INSTALL}");
    assert!(Path::new(CHROMIUM).exists(), "{CHROMIUM} is missing: {INSTALL}");
    let viewer = root().join("tools/viewer");
    let pw = viewer.join("node_modules/playwright-core");
    assert!(pw.exists(), "{} is missing: {INSTALL}", pw.display());
    let mut cmd = Command::new("node");
    cmd.arg(viewer.join("report_check.mjs")).args(["--chromium", CHROMIUM, "--timeout-ms"]);
    cmd.arg((LIMIT.as_millis() - 5_000).to_string());
    for (page, shot) in pages {
        cmd.arg("--page").arg(format!("{}={}", page.display(), shot.display()));
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run node: {e}; {INSTALL}"));
    let started = Instant::now();
    let (mut out, mut err) = (String::new(), String::new());
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the check") {
            break status;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the report check ran past {LIMIT:?} and was stopped");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    out.push_str(&reader.join().unwrap());
    child.stderr.take().map(|mut s| s.read_to_string(&mut err));
    assert!(status.success(), "the report check failed ({status}):\n{err}");
    println!("report: {} pages checked in {:.1} s", pages.len(), started.elapsed().as_secs_f64());
    serde_json::from_str::<Vec<Value>>(out.trim())
        .unwrap_or_else(|e| panic!("the check printed {out:?}: {e}"))
}

/// `cabin-trace report FILE -o OUT`, which must succeed and print OUT.
fn report(input: &Path, out: &Path) {
    let o = cabin_trace(&["report", input.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "report {}: {}", input.display(), stderr(&o));
    assert_eq!(stdout(&o).trim(), out.display().to_string());
}

/// The one file in `dir` whose name ends with `suffix`.
fn one(dir: &Path, suffix: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    assert_eq!(found.len(), 1, "one {suffix} in {}: {found:?}", dir.display());
    found[0].clone()
}

/// A capture of example `name` with `args` into `dir`.
fn capture(name: &str, args: &[&str], dir: &Path, env: &[(&str, &Path)]) {
    let mut c = Command::new(example_exe(name));
    c.args(args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("CABIN_TRACE_") || k == "TRACEPARENT" {
            c.env_remove(k);
        }
    }
    c.env("CABIN_TRACE_DIR", dir);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap_or_else(|e| panic!("run {name}: {e}"));
    assert!(o.status.success(), "{name}: {}", stderr(&o));
}

/// The Chrome trace's events.
fn events(trace: &Path) -> Vec<Value> {
    serde_json::from_str(&std::fs::read_to_string(trace).unwrap()).unwrap()
}

/// How many events of phase `ph` on the processes `on` accepts.
fn count(events: &[Value], ph: &str, on: impl Fn(i64) -> bool) -> usize {
    events.iter().filter(|e| e["ph"] == ph && on(e["pid"].as_i64().unwrap_or(-1))).count()
}

fn pid_named(events: &[Value], name: &str) -> Option<i64> {
    events
        .iter()
        .find(|e| e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == name)
        .and_then(|e| e["pid"].as_i64())
}

fn counter_points(events: &[Value], name: &str) -> usize {
    events.iter().filter(|e| e["ph"] == "C" && e["name"] == name).count()
}

fn sections(page: &Value) -> Vec<&str> {
    page["sections"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect()
}

fn marks(page: &Value, selector: &str) -> u64 {
    page["counts"][selector].as_u64().unwrap_or_else(|| panic!("no count of {selector}: {page:#}"))
}

/// A page loaded with no console message, no page error and no request.
fn assert_clean(page: &Value) {
    let f = &page["file"];
    assert_eq!(page["console"], serde_json::json!([]), "{f}: console messages");
    assert_eq!(page["page_errors"], serde_json::json!([]), "{f}: page errors");
    assert_eq!(page["requests"], serde_json::json!([]), "{f}: the page made requests");
}

/// A `bench` session's page: every metric plots each side's samples and, for
/// a timed row, one ratio per block where both values are positive.
fn assert_samples_plotted(page: &Value, samples: &Path) {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(samples).unwrap()).unwrap();
    let runs = doc["scenarios"][0]["samples"].as_array().unwrap();
    let report = cabin_trace(&["compare", samples.to_str().unwrap(), "--format", "json"]);
    let rows = json(&report)["groups"][0]["rows"].as_array().unwrap().clone();
    let plotted = page["metrics"].as_array().unwrap();
    assert_eq!(plotted.len(), rows.len(), "one section per metric");
    let wall_of = |label: &str| runs.iter().filter(|s| s["label"] == label).count() as u64;
    for (row, shown) in rows.iter().zip(plotted) {
        assert_eq!(shown["metric"], row["metric"]);
        if row.get("work").is_some() {
            assert_eq!(shown["samples"], serde_json::json!({}), "a constant counter is not plotted: {shown}");
            continue;
        }
        for (side, spread) in [("a", &row["base"]), ("b", &row["head"])] {
            let n = spread["n"].as_u64().unwrap_or(0);
            assert_eq!(shown["samples"][side].as_u64().unwrap_or(0), n, "{side}: {shown} against {row}");
        }
        if row["metric"] == "wall" {
            assert_eq!(shown["samples"]["a"].as_u64(), Some(wall_of("a")));
            assert_eq!(shown["ratios"].as_u64(), Some(wall_of("a")), "one ratio per block: {shown}");
            let bounded = !row["paired"]["interval"].is_null();
            assert_eq!(shown["interval"].as_u64(), Some(u64::from(bounded)), "{shown}");
        }
    }
    assert_eq!(marks(page, "tr.verdict-row"), rows.len() as u64);
}

#[test]
fn every_kind_of_report_opens_from_file_in_chromium_with_no_request_and_plots_its_input() {
    let tmp = tempfile::tempdir().unwrap();
    let at = |p: &str| tmp.path().join(p);
    let shots = artifacts();

    // A capture of the demo.
    std::fs::create_dir_all(at("demo")).unwrap();
    capture("demo", &["--no-table"], &at("demo"), &[]);
    let demo = one(&at("demo"), ".timings.json");
    report(&demo, &at("demo.html"));

    // A minibuild: real Ninja and cc, then the test executable.
    std::fs::create_dir_all(at("mb")).unwrap();
    capture("minibuild", &[at("mb-project").to_str().unwrap()], &at("mb"), &[]);
    let mb = one(&at("mb"), ".timings.json");
    report(&mb, &at("minibuild.html"));

    // A family: minibuild through ccwrap, children joining, then merged.
    std::fs::create_dir_all(at("fam")).unwrap();
    let ccwrap = example_exe("ccwrap");
    capture(
        "minibuild",
        &["--cc-wrapper", ccwrap.to_str().unwrap(), at("fam-project").to_str().unwrap()],
        &at("fam"),
        &[("CABIN_TRACE_CHILDREN", Path::new("1")), ("CCWRAP_CACHE_DIR", &at("ccwrap-cache"))],
    );
    let merge = cabin_trace(&["merge", at("fam").to_str().unwrap()]);
    assert!(merge.status.success(), "{}", stderr(&merge));
    let family = one(&at("fam"), ".family.json");
    report(&family, &at("family.html"));

    // Two bench sessions: a real A/B and an A/A; bench writes report.html itself.
    let demo_cmd = |spans: u32| format!("{} --spans {spans}", demo_exe().display());
    let bench = |dir: &str, a: &str, b: &str| {
        let out = at(dir);
        let o = cabin_trace(&[
            "bench",
            "--cmd",
            &format!("a={a}"),
            "--cmd",
            &format!("b={b}"),
            "--runs",
            "6",
            "--no-progress",
            "--output",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let page = out.join("report.html");
        assert!(stderr(&o).contains(&format!("bench: wrote {}", page.display())), "{}", stderr(&o));
        page
    };
    let ab = bench("ab", &demo_cmd(1500), &demo_cmd(3000));
    let aa = bench("aa", &demo_cmd(500), &demo_cmd(500));

    let pages: Vec<(PathBuf, PathBuf)> = [
        (at("demo.html"), "capture-demo.png"),
        (at("minibuild.html"), "capture-minibuild.png"),
        (at("family.html"), "family.png"),
        (ab.clone(), "bench-a-b.png"),
        (aa.clone(), "bench-a-a.png"),
    ]
    .into_iter()
    .map(|(p, s)| (p, shots.join(s)))
    .collect();
    for (page, shot) in &pages {
        std::fs::copy(page, shot.with_extension("html")).expect("keep the page");
    }
    let checked = open_in_chromium(&pages);
    assert_eq!(checked.len(), 5);
    for page in &checked {
        assert_clean(page);
    }
    let capture_sections =
        ["summary", "loss", "phases", "timeline", "ninja", "tests", "counters", "children"];

    // The demo: every span of the tool's threads, every counter sample, its child.
    let (page, timings) = (&checked[0], trace_summary::Timings::from_path(&demo).unwrap());
    assert_eq!(sections(page), capture_sections);
    let ev = events(&demo.with_file_name(format!("{}.trace.json", timings.stem)));
    let pid = i64::from(timings.pid);
    let spans = count(&ev, "X", |p| p == pid) + count(&ev, "B", |p| p == pid);
    assert_eq!(marks(page, "rect.slice"), spans as u64);
    let children = pid_named(&ev, "children").expect("the demo's child lane");
    assert_eq!(marks(page, "rect.child"), count(&ev, "X", |p| p == children) as u64);
    assert!(marks(page, "rect.child") >= 1);
    assert_eq!(
        page["polylines"]["memory"],
        serde_json::json!([counter_points(&ev, "process resident memory")])
    );
    assert_eq!(page["polylines"]["cpu"], serde_json::json!([counter_points(&ev, "process CPU usage")]));
    let phases = timings.spans.len().min(15) as u64;
    assert_eq!(marks(page, "rect.bar"), 2 * phases, "wall and thread CPU per phase");

    // The minibuild: its eight Ninja actions in sub-lanes, their concurrency, the test.
    let (page, timings) = (&checked[1], trace_summary::Timings::from_path(&mb).unwrap());
    assert_eq!(sections(page), capture_sections);
    assert_eq!(timings.ninja.actions, Some(8));
    assert_eq!(marks(page, "rect.action"), 8);
    let ev = events(&mb.with_file_name(format!("{}.trace.json", timings.stem)));
    let tests = pid_named(&ev, "tests").expect("the tests lane");
    assert_eq!(marks(page, "rect.test"), count(&ev, "X", |p| p == tests) as u64);
    assert_eq!(marks(page, "rect.test"), 1);
    // The concurrency: a point at 0, then one at each distinct start or end.
    let ninja = pid_named(&ev, "ninja").expect("the ninja lane");
    let mut edges: Vec<u64> = ev
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"].as_i64() == Some(ninja))
        .flat_map(|e| {
            let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
            [(ts * 1000.0).round() as u64, ((ts + dur) * 1000.0).round() as u64]
        })
        .collect();
    edges.sort_unstable();
    edges.dedup();
    assert_eq!(page["polylines"]["concurrency"], serde_json::json!([1 + edges.len()]));

    // The family: one row and one phase chart per command.
    let page = &checked[2];
    assert_eq!(sections(page), ["summary", "commands", "phases"]);
    let fam: Value = serde_json::from_str(&std::fs::read_to_string(&family).unwrap()).unwrap();
    let commands = fam["commands"].as_array().unwrap().len() as u64;
    assert!(commands >= 2, "minibuild and ccwrap: {fam:#}");
    assert_eq!(marks(page, "tr.command"), commands);
    assert_eq!(marks(page, "h3.command-phases"), commands);

    // The bench sessions: verdicts first, every metric's samples and ratios.
    for (page, dir) in [(&checked[3], "ab"), (&checked[4], "aa")] {
        assert_eq!(sections(page), ["verdicts", "metrics"], "no INVALID section for valid runs");
        assert_samples_plotted(page, &at(dir).join("samples.json"));
    }
}

#[test]
fn an_invalid_measurement_s_reasons_come_first_of_all() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("s");
    let o = cabin_trace(&[
        "bench",
        "--cmd",
        &format!("a={} --spans 100", demo_exe().display()),
        "--cmd",
        &format!("b={} --spans 100", demo_exe().display()),
        "--runs",
        "3",
        "--warmup",
        "0",
        "--check",
        "count:resolve == 7",
        "--no-progress",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let invalid = html.find("<section id=\"invalid\">").expect("an INVALID MEASUREMENT section");
    assert!(invalid < html.find("<section id=\"verdicts\">").unwrap(), "before the verdicts");
    assert!(html.contains("`count:resolve == 7` failed (found 1)"), "the reason is given");
}

#[test]
fn report_refuses_a_file_it_cannot_read_or_does_not_know_and_names_it() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nowhere.timings.json");
    let o = cabin_trace(&["report", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(&missing.display().to_string()), "{}", stderr(&o));
    let other = tmp.path().join("other.json");
    std::fs::write(&other, "{\"hello\": 1}").unwrap();
    let o = cabin_trace(&["report", other.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("expected a .timings.json, a .family.json"), "{}", stderr(&o));
    assert!(!tmp.path().join("other.report.html").exists(), "no page for bad input");
}
