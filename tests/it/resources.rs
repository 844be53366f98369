//! Resource figures belong to the capture: a process that burned CPU, grew
//! large and waited for a large child before it exec'd the tool passes none of
//! that on to the tool's summary.
//!
//! Unix only: there is no exec on Windows (and no process figure is read there).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::*;

/// Set in the helper process to the program it execs at the end.
const EXEC_VAR: &str = "CABIN_TRACE_TEST_EXEC";
/// Set in the helper's own child, which only grows and burns, then exits.
const GROW_VAR: &str = "CABIN_TRACE_TEST_GROW_MIB";
const HELPER: &str = "resources::helper_that_burns_cpu_and_memory_then_execs_the_demo";

const BURN_US: u64 = 500_000;
const PARENT_MIB: usize = 200;
const CHILD_MIB: usize = 300;

fn cpu_us() -> u64 {
    // SAFETY: an all-zero rusage is valid, and getrusage only writes to it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let us = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64;
    us(ru.ru_utime) + us(ru.ru_stime)
}

/// Burns CPU until the process has used `us` of it.
fn burn(us: u64) {
    let mut x = 1u64;
    while cpu_us() < us {
        for _ in 0..100_000 {
            x = std::hint::black_box(x ^ (x << 13) ^ (x >> 7));
        }
    }
}

/// Allocates `mib` MiB and touches every page, so that it is resident.
fn grow(mib: usize) -> Vec<u8> {
    let mut v = vec![0u8; mib << 20];
    for page in v.chunks_mut(4096) {
        page[0] = 1;
    }
    std::hint::black_box(v)
}

/// Not a test of its own: the process the test below starts, which does the
/// work a build tool's launcher would (cargo before it execs the binary it
/// built), then becomes the demo.
#[test]
#[ignore = "a helper process of the_summary_of_a_tool_that_was_execd_holds_only_the_tools_own_figures"]
fn helper_that_burns_cpu_and_memory_then_execs_the_demo() {
    if let Ok(mib) = std::env::var(GROW_VAR) {
        let _big = grow(mib.parse().unwrap());
        burn(BURN_US / 2);
        return;
    }
    let demo = std::env::var_os(EXEC_VAR).expect("run by the test that sets CABIN_TRACE_TEST_EXEC");
    burn(BURN_US);
    let _big = grow(PARENT_MIB);
    // A large child, waited for before the exec: its peak stays in the
    // process's getrusage(RUSAGE_CHILDREN) totals.
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", HELPER, "--ignored", "--test-threads=1", "-q"])
        .env(GROW_VAR, CHILD_MIB.to_string())
        .env_remove(EXEC_VAR)
        .status()
        .unwrap();
    assert!(status.success());
    let e = Command::new(demo).args(["--spans", "20"]).exec();
    panic!("exec of the demo failed: {e}");
}

#[test]
fn the_summary_of_a_tool_that_was_execd_holds_only_the_tools_own_figures() {
    let dir = tempfile::tempdir().unwrap();
    let mut helper = Command::new(std::env::current_exe().unwrap());
    helper.args(["--exact", HELPER, "--ignored", "--test-threads=1", "-q"]);
    for var in ["CABIN_TRACE_FILTER", "CABIN_TRACE_FORMAT", GROW_VAR] {
        helper.env_remove(var);
    }
    helper.env(EXEC_VAR, demo_exe()).env("CABIN_TRACE_DIR", dir.path());
    let out = helper.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("resolved 20 packages"), "the demo ran");
    let summary: Value =
        serde_json::from_slice(&std::fs::read(one(dir.path(), ".timings.json")).unwrap()).unwrap();
    let r = &summary["resources"];
    let us = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("a number, not {v}: {r}"));
    let (mib_kib, figures) = (1024, format!("{r}, startup_us {}", summary["startup_us"]));
    eprintln!("resources: the demo exec'd after a {BURN_US} µs, {PARENT_MIB} MiB launcher: {figures}");

    // The launcher's CPU is there, said to be not the tool's ...
    assert!(us(&r["pre_exec_user_us"]) + us(&r["pre_exec_system_us"]) >= BURN_US * 9 / 10, "{figures}");
    // ... and none of it is in the tool's own figures.
    assert!(us(&r["self_user_us"]) + us(&r["self_system_us"]) < BURN_US / 4, "{figures}");
    assert!(us(&r["startup_user_us"]) + us(&r["startup_system_us"]) < BURN_US / 4, "{figures}");
    assert!(us(&r["children_user_us"]) + us(&r["children_system_us"]) < BURN_US / 4, "{figures}");
    assert_eq!(summary["startup_since"], "image_start", "{figures}");
    assert!(us(&summary["startup_us"]) < BURN_US / 2, "startup counts from the exec: {figures}");

    // Peaks: the tool's own, since its exec; the child's, only of the child the demo ran.
    if r["self_max_rss_since"] == "image_start" {
        assert!(us(&r["self_max_rss_kib"]) < (PARENT_MIB as u64 / 4) * mib_kib, "{figures}");
    }
    assert_eq!(r["waited_children"], 1, "the demo's compiler: {figures}");
    let child = us(&r["largest_child_max_rss_kib"]);
    assert!(child > 0 && child < (CHILD_MIB as u64 / 4) * mib_kib, "{figures}");
}

#[test]
fn a_test_executable_run_by_run_test_reports_its_cpu_and_peak_on_its_slice_and_in_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let config = cabin_trace::Config::from_lookup("T", &["chrome"], |n| match n {
        "T_TRACE_DIR" => Some(dir.path().into()),
        "T_TRACE_FORMAT" => Some("chrome".into()),
        _ => None,
    })
    .unwrap();
    let mut grower = Command::new(std::env::current_exe().unwrap());
    grower.args(["--exact", HELPER, "--ignored", "--test-threads=1", "-q"]).env(GROW_VAR, "64");
    let (output, report) = cabin_trace::Capture::from_config(config)
        .run_with_report("test", || cabin_trace::run_test(&mut grower).unwrap())
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("1 passed"), "its stdout is captured");
    let report = report.unwrap();
    let path =
        |suffix: &str| report.files.iter().find(|f| f.path.to_string_lossy().ends_with(suffix)).unwrap();
    let summary: Value =
        serde_json::from_slice(&std::fs::read(&path(".timings.json").path).unwrap()).unwrap();
    let r = &summary["resources"];
    assert_eq!(r["waited_children"], 1, "{r}");
    let peak = r["largest_child_max_rss_kib"].as_u64().unwrap();
    assert!(peak >= 64 * 1024, "the 64 MiB the child touched: {r}");
    // The child burns until its own CPU (user and system) reaches BURN_US / 2.
    let cpu =
        r["waited_children_user_us"].as_u64().unwrap() + r["waited_children_system_us"].as_u64().unwrap();
    assert!(cpu >= BURN_US / 2, "{r}");

    let trace: Value = serde_json::from_slice(&std::fs::read(&path(".trace.json").path).unwrap()).unwrap();
    let slice = trace
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["ph"] == "X" && e["args"]["exit_code"] == 0 && e["args"].get("max_rss_kib").is_some())
        .unwrap_or_else(|| {
            panic!("no test slice with usage in {}", Path::new(&path(".trace.json").path).display())
        });
    assert_eq!(slice["args"]["max_rss_kib"].as_u64(), Some(peak), "{slice}");
}
