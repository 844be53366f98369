//! `cabin-trace compare` on hyperfine exports and timings directories, and
//! the shape of its reports.

use std::process::Command;

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

use crate::support::{cabin_trace, demo_exe, json, root, row, stderr, stdout};

fn fixture(name: &str) -> String {
    root().join("cli/tests/fixtures/hyperfine").join(name).display().to_string()
}

fn reference() -> serde_json::Value {
    let p = root().join("trace-compare/tests/vectors/reference.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn close(what: &str, ours: &serde_json::Value, scipy: &serde_json::Value) {
    let (a, b) = (ours.as_f64().unwrap(), scipy.as_f64().unwrap());
    assert!((a - b).abs() <= 1e-12 * b.abs().max(1e-300), "{what}: ours {a:e}, SciPy {b:e}");
}

#[test]
fn two_hyperfine_exports_get_a_verdict_per_command() {
    let out = cabin_trace(&["compare", &fixture("base.json"), &fixture("head.json")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("== sleep 0.020 | sleep 0.040 =="), "{text}");
    assert!(text.contains("== true =="), "{text}");
    let report =
        json(&cabin_trace(&["compare", &fixture("base.json"), &fixture("head.json"), "--format", "json"]));
    assert_eq!(report["format_version"], 2);
    assert_eq!(report["paired"], false);
    assert_eq!(report["family"], serde_json::Value::Null, "an unpaired report has no family");
    let groups = report["groups"].as_array().unwrap();
    let wall = |g: &serde_json::Value| {
        g["rows"].as_array().unwrap().iter().find(|r| r["metric"] == "wall").unwrap().clone()
    };
    assert_eq!(wall(&groups[0])["verdict"], "regressed");
    assert_eq!(wall(&groups[1])["verdict"], "unchanged");
}

#[test]
fn the_json_report_gives_u_p_medians_and_iqrs_that_match_scipy() {
    let report =
        json(&cabin_trace(&["compare", &fixture("base.json"), &fixture("head.json"), "--format", "json"]));
    let expected = reference()["hyperfine_fixtures"].clone();
    for (g, want) in report["groups"].as_array().unwrap().iter().zip(expected.as_array().unwrap()) {
        let wall = g["rows"].as_array().unwrap().iter().find(|r| r["metric"] == "wall").unwrap();
        let name = want["name"].as_str().unwrap();
        close(&format!("{name}: U"), &wall["unpaired"]["u"], &want["u1"]);
        close(&format!("{name}: p"), &wall["unpaired"]["p"], &want["p"]);
        assert_eq!(wall["unpaired"]["method"], want["method"]);
        for side in ["base", "head"] {
            for q in ["median", "q1", "q3", "iqr"] {
                close(&format!("{name}: {side} {q}"), &wall[side][q], &want[side][q]);
            }
        }
    }
}

#[test]
fn fail_on_regression_exits_1_on_a_regression_and_bad_input_exits_2() {
    let out = cabin_trace(&["compare", &fixture("base.json"), &fixture("head.json"), "--fail-on-regression"]);
    assert_eq!(out.status.code(), Some(1));
    let out = cabin_trace(&["compare", &fixture("base.json"), &fixture("base.json"), "--fail-on-regression"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = cabin_trace(&["compare", "no/such.json", &fixture("head.json")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no/such.json"), "{}", stderr(&out));
    let out = cabin_trace(&["compare", &fixture("base.json"), &fixture("head.json"), "--alpha", "2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("alpha (unpaired): found 2; expected a level between 0 and 1"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn one_hyperfine_export_compares_two_of_its_commands() {
    let out =
        cabin_trace(&["compare", &fixture("head.json"), "--base", "true", "--head", "0", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(row(&json(&out), "wall")["verdict"], "regressed");
    let out = cabin_trace(&["compare", &fixture("head.json"), "--head", "sleep 9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no command `sleep 9`; expected one of: `sleep 0.040`, `true`"),
        "{}",
        stderr(&out)
    );
}

/// The cells of every table in `md`, as parsed by a CommonMark parser with
/// GitHub's table extension.
fn tables(md: &str) -> Vec<Vec<Vec<String>>> {
    let mut out = Vec::new();
    let (mut table, mut row, mut cell): (Vec<Vec<String>>, Vec<String>, Option<String>) = Default::default();
    for ev in Parser::new_ext(md, pulldown_cmark::Options::ENABLE_TABLES) {
        match ev {
            Event::Start(Tag::Table(_)) => table.clear(),
            Event::End(TagEnd::Table) => out.push(std::mem::take(&mut table)),
            Event::Start(Tag::TableHead | Tag::TableRow) => row.clear(),
            Event::End(TagEnd::TableHead | TagEnd::TableRow) => table.push(std::mem::take(&mut row)),
            Event::Start(Tag::TableCell) => cell = Some(String::new()),
            Event::End(TagEnd::TableCell) => row.push(cell.take().unwrap_or_default()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(c) = cell.as_mut() {
                    c.push_str(&t);
                }
            }
            _ => {}
        }
    }
    out
}

#[test]
fn the_markdown_report_is_one_table_with_verdicts_first_and_the_details_folded() {
    let out = cabin_trace(&["compare", &fixture("base.json"), &fixture("head.json"), "--format", "markdown"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let md = stdout(&out);
    let parsed = tables(&md);
    assert_eq!(parsed.len(), 2, "the verdict table and the folded statistics: {md}");
    let main = &parsed[0];
    assert_eq!(main[0], ["verdict", "scenario", "metric", "base", "head", "change"]);
    assert!(main.iter().all(|r| r.len() == 6), "{main:?}");
    // Verdicts first: the regression leads; the escaped pipe stays in its cell.
    assert_eq!(main[1][..3], ["Regressed", "sleep 0.020 | sleep 0.040", "wall"]);
    assert_eq!(main.len() - 1, 6, "one row per metric of both commands");
    let details = md.find("<details>").expect("folded details");
    assert!(md[details..].contains("U=0"), "{md}");
}

#[test]
fn two_directories_of_timings_files_are_compared_unpaired_and_a_changed_counter_is_a_change_of_work() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    for (dir, spans) in dirs.iter().zip(["100", "200"]) {
        for _ in 0..3 {
            let o = Command::new(demo_exe())
                .args(["--spans", spans])
                .env("CABIN_TRACE_DIR", dir.path())
                .output()
                .unwrap();
            assert!(o.status.success());
        }
    }
    let (a, b) = (dirs[0].path().to_str().unwrap(), dirs[1].path().to_str().unwrap());
    let out = cabin_trace(&["compare", a, b, "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = json(&out);
    assert_eq!(report["groups"][0]["name"], "build");
    let packages = row(&report, "field:resolve.packages");
    assert_eq!(packages["verdict"], "regressed");
    assert_eq!(packages["work"], serde_json::json!([100.0, 200.0]));
    assert_eq!(row(&report, "count:resolve")["verdict"], "unchanged");
    assert_eq!(row(&report, "wall")["base"]["n"], 3);

    // The gate decides on its primary metrics only: wall by default (3 v 3
    // runs can never reach p < 0.01), the changed counter when asked.
    let wall = cabin_trace(&["compare", a, b, "--fail-on-regression"]);
    assert_eq!(wall.status.code(), Some(0), "{}", stderr(&wall));
    let packages =
        cabin_trace(&["compare", a, b, "--fail-on-regression", "--gate", "wall,field:resolve.packages"]);
    assert_eq!(packages.status.code(), Some(1), "{}", stderr(&packages));
    assert!(
        stderr(&packages).contains("gate: build: field:resolve.packages: Regressed"),
        "{}",
        stderr(&packages)
    );
}

#[test]
fn a_comparison_report_becomes_otlp_metrics_with_its_ratios_and_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let out = cabin_trace(&["compare", &fixture("base.json"), &fixture("head.json"), "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::write(&report, &out.stdout).unwrap();
    let metrics = dir.path().join("metrics.otlp.json");
    let out = cabin_trace(&[
        "export",
        "metrics",
        "--revision",
        "abc123",
        "-o",
        metrics.to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let line: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&metrics).unwrap()).unwrap();
    let text = line.to_string();
    assert!(text.contains("\"cabin_trace.verdict\""), "{text}");
    assert!(text.contains("\"regressed\""), "{text}");
    assert!(text.contains("abc123"), "{text}");
    // The wall ratio of the slower command: 0.040 s against 0.020 s.
    let points: Vec<&serde_json::Value> = line["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["gauge"]["dataPoints"].as_array().into_iter().flatten())
        .filter(|p| p.to_string().contains("\"wall\"") && p.to_string().contains("regressed"))
        .collect();
    assert_eq!(points.len(), 1, "{text}");
    let ratio = points[0]["asDouble"].as_f64().unwrap();
    assert!((1.6..2.4).contains(&ratio), "{ratio}");
}
