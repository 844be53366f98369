//! A tool and the tools it runs: context through the environment, children
//! joining their parent's capture, and the merge of a family, with real
//! processes (minibuild, real Ninja, the ccwrap wrapper, real cc).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use cabin_trace::{Capture, Config, Timings};
use serde_json::Value;

use crate::perfetto::check;
use crate::support::*;

const COMPILES: usize = 5;

fn summaries(dir: &Path) -> Vec<Timings> {
    with_suffix(dir, ".timings.json").iter().map(|p| Timings::from_path(p).unwrap()).collect()
}

/// Runs minibuild in `project` through ccwrap, capturing into `traces` with
/// children joining.
pub(crate) fn minibuild_cmd(project: &Path, traces: &Path) -> Command {
    let mut cmd = Command::new(example_exe("minibuild"));
    cmd.arg("--cc-wrapper")
        .arg(example_exe("ccwrap"))
        .arg(project)
        .env("CABIN_TRACE_DIR", traces)
        .env("CABIN_TRACE_CHILDREN", "1")
        .env("CCWRAP_CACHE_DIR", project.join(".ccwrap-cache"))
        .env_remove("CABIN_TRACE_FILTER")
        .env_remove("CABIN_TRACE_FORMAT")
        .env_remove("CCWRAP_TRACE_DIR")
        .env_remove("TRACEPARENT")
        .env_remove("CABIN_TRACE_PARENT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

pub(crate) fn merged(traces: &Path) -> (trace_merge::Scan, Vec<trace_merge::Merged>) {
    let scan = trace_merge::scan(&[traces.to_path_buf()]).unwrap();
    let out = trace_merge::merge(&scan, traces).unwrap();
    (scan, out)
}

fn chrome_processes(path: &Path) -> BTreeSet<(u64, String)> {
    let events: Vec<Value> = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .map(|e| (e["pid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn a_captured_minibuild_through_ccwrap_merges_into_one_trace_with_a_wrapper_process_under_each_compile() {
    let project = tempfile::tempdir().unwrap();
    let traces = tempfile::tempdir().unwrap();
    let out = minibuild_cmd(project.path(), traces.path()).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));

    // The context reached the grandchildren (minibuild -> ninja -> ccwrap).
    let all = summaries(traces.path());
    let parent = all.iter().find(|t| t.command == "minibuild").expect("minibuild's summary");
    let children: Vec<&Timings> = all.iter().filter(|t| t.command == "ccwrap").collect();
    assert_eq!(children.len(), COMPILES, "one capture per compile: {:?}", files_in(traces.path()));
    for c in &children {
        assert_eq!(c.trace_id, parent.trace_id);
        assert_eq!(c.parent_stem.as_deref(), Some(parent.stem.as_str()));
        assert_eq!(c.parent_span_id.as_deref().map(str::len), Some(16));
    }
    assert!(parent.parent_stem.is_none());

    let (scan, merged) = merged(traces.path());
    assert!(scan.incomplete.is_empty(), "{:?}", scan.incomplete);
    assert_eq!(merged.len(), 1, "one family");
    let family = &merged[0];
    assert_eq!((family.processes, family.flows), (COMPILES + 1, COMPILES));

    let dumped = check(&[&family.pftrace]);
    // Processes, by the official schema's reading of the merged trace.
    let mut processes: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    for r in dumped.iter().filter(|r| r["tid"].is_u64()) {
        let pid = r["pid"].as_u64().unwrap();
        processes.entry(pid).or_default().insert(r["name"].as_str().unwrap().to_string());
    }
    assert!(processes[&u64::from(parent.pid)].contains("build"), "minibuild's phases");
    for c in &children {
        let phases = &processes[&u64::from(c.pid)];
        for phase in ["parse_args", "hash_inputs", "cache_lookup", "compile", "cache_store", "command"] {
            assert!(phases.contains(phase), "ccwrap {} lacks {phase}: {phases:?}", c.pid);
        }
    }
    assert_eq!(processes.len(), COMPILES + 1, "{processes:?}");

    // Each child's root slice lies inside the compile action that ran it.
    let actions: Vec<&Value> = dumped
        .iter()
        .filter(|r| {
            r["lane"] == "ninja" && r["kind"] == "slice" && r["name"].as_str().unwrap().ends_with(".o")
        })
        .collect();
    assert_eq!(actions.len(), COMPILES);
    let slack_ns = parent.ninja.alignment_uncertainty_us.unwrap() * 1000 + 1_000_000;
    for c in &children {
        let root = dumped
            .iter()
            .find(|r| r["pid"] == c.pid && r["name"] == "command" && r["kind"] == "slice")
            .expect("the child's root slice");
        let (b, e) = (root["begin_ns"].as_u64().unwrap(), root["end_ns"].as_u64().unwrap());
        let inside = actions.iter().filter(|a| {
            let (ab, ae) = (a["begin_ns"].as_u64().unwrap(), a["end_ns"].as_u64().unwrap());
            ab <= b + 1_000_000 && e <= ae + slack_ns
        });
        assert!(
            inside.count() >= 1,
            "ccwrap {}'s root [{b}, {e}] lies in no compile action ({slack_ns} ns slack)",
            c.pid
        );
    }

    // One flow per child, from a compile action to the child's root.
    let starts: Vec<&Value> = dumped.iter().filter(|r| r["args"]["flow_ids"].is_array()).collect();
    let ends: Vec<&Value> = dumped.iter().filter(|r| r["args"]["terminating_flow_ids"].is_array()).collect();
    assert_eq!((starts.len(), ends.len()), (COMPILES, COMPILES));
    assert!(starts.iter().all(|s| s["lane"] == "ninja"), "{starts:?}");
    let ended: BTreeSet<u64> = ends.iter().map(|e| e["pid"].as_u64().unwrap()).collect();
    assert_eq!(ended, children.iter().map(|c| u64::from(c.pid)).collect());
    let ids: BTreeSet<u64> = starts.iter().map(|s| s["args"]["flow_ids"][0].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), COMPILES, "distinct flow ids");
    assert_eq!(ids, ends.iter().map(|e| e["args"]["terminating_flow_ids"][0].as_u64().unwrap()).collect());

    // The Chrome trace holds the same processes, and minibuild's lanes are
    // processes of their own, with pids derived from minibuild's.
    let mut expected: BTreeSet<(u64, String)> =
        children.iter().map(|c| (u64::from(c.pid), "ccwrap".into())).collect();
    expected.insert((u64::from(parent.pid), "minibuild".into()));
    let ninja_pid = trace_core::LaneSlice::lane_pid(parent.pid, 0);
    expected.insert((ninja_pid, "ninja".into()));
    expected.insert((trace_core::LaneSlice::lane_pid(parent.pid, 1), "tests".into()));
    assert_eq!(chrome_processes(&family.chrome), expected);
    let events: Vec<Value> = serde_json::from_slice(&std::fs::read(&family.chrome).unwrap()).unwrap();
    let lane: Vec<&Value> = events.iter().filter(|e| e["cat"] == "ninja").collect();
    assert!(lane.iter().all(|e| e["pid"] == ninja_pid));
    assert_eq!(
        lane.iter().filter(|e| e["args"]["child_pid"].is_u64()).count(),
        COMPILES,
        "each compile names its child"
    );
    assert_eq!(events.iter().filter(|e| e["ph"] == "s").count(), COMPILES);

    // The family summary counts one wrapper per compile action Ninja logged.
    let summary: Value = serde_json::from_slice(&std::fs::read(&family.summary).unwrap()).unwrap();
    let ccwrap = summary["commands"].as_array().unwrap().iter().find(|c| c["command"] == "ccwrap").unwrap();
    assert_eq!(ccwrap["count"], actions.len());
    assert!(ccwrap["top_phases"].as_array().unwrap().iter().any(|p| p["name"] == "compile"));
    assert!(ccwrap["wall_us"].as_u64().unwrap() > 0 && ccwrap["peak_rss_kib"].as_u64().unwrap() > 0);
}

#[test]
fn two_families_captured_at_once_into_one_directory_never_mix() {
    let projects = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let traces = tempfile::tempdir().unwrap();
    let running: Vec<_> =
        projects.iter().map(|p| minibuild_cmd(p.path(), traces.path()).spawn().unwrap()).collect();
    for child in running {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let (_, merged) = merged(traces.path());
    assert_eq!(merged.len(), 2, "two trace ids, two families");
    assert_ne!(merged[0].trace_id, merged[1].trace_id);
    let pids: Vec<BTreeSet<u64>> =
        merged.iter().map(|m| chrome_processes(&m.chrome).into_iter().map(|(p, _)| p).collect()).collect();
    for (m, p) in merged.iter().zip(&pids) {
        // minibuild, its wrappers, and its ninja and tests lanes.
        assert_eq!(p.len(), COMPILES + 3, "{}", m.trace_id);
        let dumped = check(&[&m.pftrace]);
        assert!(
            dumped.iter().filter_map(|r| r["pid"].as_u64()).all(|pid| p.contains(&pid)),
            "no other family's event"
        );
    }
    assert!(pids[0].is_disjoint(&pids[1]));
}

/// A capture of this test process, with `CABIN_TRACE_CHILDREN` as given.
fn parent_capture(dir: &Path, children: bool) -> Capture {
    let config = Config::from_lookup("CABIN", cabin_trace::FORMATS, |name| match name {
        "CABIN_TRACE_DIR" => Some(dir.into()),
        "CABIN_TRACE_CHILDREN" => Some(if children { "1" } else { "0" }.into()),
        _ => None,
    })
    .unwrap()
    .unwrap();
    Capture::from_config(Some(config))
}

#[test]
fn a_child_without_the_crates_sees_the_context_and_the_parent_environment_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (out, report) = parent_capture(dir.path(), true)
        .run_with_report("parent", || {
            let _phase = tracing::info_span!("spawn_child").entered();
            let mut sh = Command::new("sh");
            sh.arg("-c").arg("printf '%s\\n%s' \"$TRACEPARENT\" \"$CABIN_TRACE_PARENT\"");
            cabin_trace::run_test(&mut sh).unwrap()
        })
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let (traceparent, ours) = text.split_once('\n').unwrap();
    let (trace, _span) = trace_core::parse_traceparent(traceparent).expect("a well-formed TRACEPARENT");
    let stem = report.unwrap().stem;
    assert_eq!(ours, format!("1\t{stem}\t{}", dir.path().display()));
    let t = Timings::from_path(dir.path().join(format!("{stem}.timings.json"))).unwrap();
    assert_eq!(t.trace_id, trace.iter().map(|b| format!("{b:02x}")).collect::<String>());
    assert!(std::env::var_os("TRACEPARENT").is_none() && std::env::var_os("CABIN_TRACE_PARENT").is_none());
    // Without a capture, a command is left as it is.
    let mut cmd = Command::new("true");
    assert_eq!(cabin_trace::command(&mut cmd).get_envs().count(), 0);
}

fn ccwrap(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(example_exe("ccwrap"));
    cmd.args(args);
    for v in ["CCWRAP_TRACE_DIR", "CCWRAP_TRACE_CHILDREN", "TRACEPARENT", "CABIN_TRACE_PARENT"] {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().copied()).output().unwrap()
}

#[test]
fn a_malformed_traceparent_is_ignored_with_a_one_line_warning() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = ccwrap(&["true"], &[("CCWRAP_TRACE_DIR", d), ("TRACEPARENT", "00-not-a-context-01")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let warnings: Vec<&str> =
        std::str::from_utf8(&out.stderr).unwrap().lines().filter(|l| l.contains("TRACEPARENT")).collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].starts_with("warning: TRACEPARENT=") && warnings[0].contains("ignored"));
    let t = &summaries(dir.path())[0];
    assert_eq!(t.trace_id.len(), 32, "a fresh trace id of its own");
    assert!(t.parent_span_id.is_none());
}

#[test]
fn a_children_flag_other_than_1_or_0_is_an_error_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = ccwrap(&["true"], &[("CCWRAP_TRACE_DIR", d), ("CCWRAP_TRACE_CHILDREN", "yes")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("CCWRAP_TRACE_CHILDREN=`yes`"), "{}", stderr(&out));
    assert!(files_in(dir.path()).is_empty());
}

#[test]
fn children_join_only_when_asked() {
    for (children, expected) in [(false, 1), (true, 2)] {
        let dir = tempfile::tempdir().unwrap();
        parent_capture(dir.path(), children)
            .run("parent", || {
                let mut cmd = Command::new(example_exe("ccwrap"));
                cmd.arg("true").env_remove("CCWRAP_TRACE_DIR").env_remove("CCWRAP_TRACE_CHILDREN");
                assert!(cabin_trace::command(&mut cmd).status().unwrap().success());
            })
            .unwrap();
        assert_eq!(summaries(dir.path()).len(), expected, "children={children}");
    }
}

#[test]
fn a_child_that_fails_is_merged_and_one_that_is_killed_is_reported_and_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let killed_pid = parent_capture(dir.path(), true)
        .run("parent", || {
            let mut failing = Command::new(example_exe("ccwrap"));
            failing.arg("false");
            assert_eq!(cabin_trace::command(&mut failing).status().unwrap().code(), Some(1));
            let mut hanging = Command::new(example_exe("ccwrap"));
            hanging.args(["sleep", "30"]);
            let mut child = cabin_trace::command(&mut hanging).spawn().unwrap();
            // Until its capture has started (its files exist), then killed.
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while !files_in(dir.path()).iter().any(|n| {
                n.starts_with("ccwrap") && n.ends_with(".partial") && n.contains(&format!("-{}-", child.id()))
            }) {
                assert!(std::time::Instant::now() < deadline, "the child never started its capture");
                std::thread::sleep(Duration::from_millis(20));
            }
            child.kill().unwrap();
            child.wait().unwrap();
            child.id()
        })
        .unwrap();
    let (scan, merged) = merged(dir.path());
    assert_eq!(scan.incomplete.len(), 1, "{:?}", scan.incomplete);
    assert!(scan.incomplete[0].contains(&format!("-{killed_pid}-")) && scan.incomplete[0].contains("killed"));
    assert_eq!(merged.len(), 1);
    assert_eq!((merged[0].processes, merged[0].flows), (2, 1), "the parent and the failed child");
    check(&[&merged[0].pftrace]);
}

/// Runs ccwrap `n` times as children of one capture, a few at a time.
pub(crate) fn many_children(dir: &Path, n: usize) -> PathBuf {
    let exe = example_exe("ccwrap");
    parent_capture(dir, true)
        .run("parent", || {
            let mut left = n;
            while left > 0 {
                let batch: Vec<_> = (0..left.min(8))
                    .map(|_| {
                        let mut cmd = Command::new(&exe);
                        cmd.arg("true");
                        cabin_trace::command(&mut cmd).spawn().unwrap()
                    })
                    .collect();
                left -= batch.len();
                for mut c in batch {
                    assert!(c.wait().unwrap().success());
                }
            }
        })
        .unwrap();
    dir.to_path_buf()
}

#[test]
fn a_family_of_a_thousand_children_merges_into_a_valid_trace_of_a_few_kib_per_child() {
    const N: usize = 1000;
    let dir = tempfile::tempdir().unwrap();
    many_children(dir.path(), N);
    let (scan, merged) = merged(dir.path());
    assert!(scan.incomplete.is_empty(), "{:?}", scan.incomplete);
    assert_eq!((merged[0].processes, merged[0].flows), (N + 1, N));
    let dumped = check(&[&merged[0].pftrace]);
    let pids: BTreeSet<u64> = dumped.iter().filter_map(|r| r["pid"].as_u64()).collect();
    assert_eq!(pids.len(), N + 1);
    assert_eq!(chrome_processes(&merged[0].chrome).len(), N + 1);
    let size = |p: &Path| std::fs::metadata(p).unwrap().len() as usize;
    let (pf, js) = (size(&merged[0].pftrace) / N, size(&merged[0].chrome) / N);
    eprintln!("a merged child takes {pf} bytes of .pftrace and {js} bytes of .trace.json");
    assert!(pf < 2048, "{pf} bytes of .pftrace per child");
    assert!(js < 4096, "{js} bytes of .trace.json per child");
}
