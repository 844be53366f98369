//! CPU time per span and the memory and CPU counters, on a real process
//! (examples/resources.rs), read back from every file: the Chrome JSON
//! parsed, the `.pftrace` through the official-schema checker, the summary
//! against its schema.

use std::path::Path;

use serde_json::Value;

use crate::support::*;

/// Runs the resources example with `args`, capturing into a fresh
/// directory with `env` set; returns the directory.
fn capture(args: &[&str], env: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(example_exe("resources"));
    cmd.args(args).env("CABIN_TRACE_DIR", dir.path());
    for var in ["CABIN_TRACE_FILTER", "CABIN_TRACE_FORMAT", "CABIN_TRACE_CPU", "CABIN_TRACE_SAMPLE"] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().expect("run the resources example");
    assert!(out.status.success(), "{}", stderr(&out));
    dir
}

fn chrome_events(dir: &Path) -> Vec<Value> {
    let path = one(dir, ".trace.json");
    // Well formed, spans nested: the checks every Chrome file passes.
    let _ = crate::chrome_output::check(&path, None);
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

fn named<'a>(events: &'a [Value], name: &str) -> &'a Value {
    events.iter().find(|e| e["name"] == name && e["ph"] == "X").unwrap_or_else(|| panic!("no slice {name}"))
}

/// Within 10% of 50 ms, and about 0 (under 10% of 50 ms), in microseconds.
const SPUN_US: std::ops::Range<f64> = 45_000.0..55_000.0;
const IDLE_US: f64 = 5_000.0;

#[test]
fn a_span_that_spins_50ms_has_50ms_of_thread_cpu_and_one_that_sleeps_50ms_has_none_in_every_file() {
    let dir = capture(&["--cpu-ms", "50"], &[]);

    let events = chrome_events(dir.path());
    let (spin, sleep) = (named(&events, "spin"), named(&events, "sleep"));
    let tdur = |e: &Value| e["tdur"].as_f64().unwrap_or_else(|| panic!("no tdur: {e}"));
    assert!(SPUN_US.contains(&tdur(spin)), "Chrome: {spin}");
    assert!(tdur(sleep) < IDLE_US && sleep["dur"].as_f64().unwrap() >= 50_000.0, "Chrome: {sleep}");
    assert!(spin["tts"].as_f64().unwrap() < sleep["tts"].as_f64().unwrap(), "tts is the thread's CPU clock");

    let records = crate::perfetto::check(&[&one(dir.path(), ".pftrace")]);
    let slice = |name: &str| {
        records.iter().find(|r| r["kind"] == "slice" && r["name"] == name).unwrap_or_else(|| panic!("{name}"))
    };
    let thread_dur_us = |r: &Value| r["thread_dur_ns"].as_f64().unwrap_or_else(|| panic!("{r}")) / 1000.0;
    assert!(SPUN_US.contains(&thread_dur_us(slice("spin"))), "Perfetto: {}", slice("spin"));
    assert!(thread_dur_us(slice("sleep")) < IDLE_US, "Perfetto: {}", slice("sleep"));
    // The same clock readings in both files.
    assert_eq!(slice("spin")["thread_dur_ns"].as_f64().unwrap() / 1000.0, tdur(spin));

    let summary_path = one(dir.path(), ".timings.json");
    let summary: Value = serde_json::from_slice(&std::fs::read(&summary_path).unwrap()).unwrap();
    let cpu_us = |name: &str| {
        let row = summary["spans"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap();
        row["total_inclusive_thread_cpu_us"].as_f64().unwrap_or_else(|| panic!("{row}"))
    };
    assert!(SPUN_US.contains(&cpu_us("spin")), "summary: {}", cpu_us("spin"));
    assert!(cpu_us("sleep") < IDLE_US, "summary: {}", cpu_us("sleep"));
    let valid = crate::summary::check_schema(&summary_path);
    assert!(valid.status.success(), "{}{}", String::from_utf8_lossy(&valid.stdout), stderr(&valid));
}

/// Samples of a counter, as (ns, value), in time order.
type Samples = Vec<(u64, u64)>;

/// The resident-memory samples of both files, Chrome's then Perfetto's.
fn memory(dir: &Path) -> (Samples, Samples) {
    let mut chrome: Samples = chrome_events(dir)
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "process resident memory")
        .map(|e| ((e["ts"].as_f64().unwrap() * 1000.0) as u64, e["args"]["bytes"].as_u64().unwrap()))
        .collect();
    chrome.sort();
    let mut perfetto: Samples = crate::perfetto::check(&[&one(dir, ".pftrace")])
        .iter()
        .filter(|r| r["kind"] == "counter" && r["track"] == "process resident memory")
        .map(|r| {
            assert_eq!(r["unit"], "UNIT_SIZE_BYTES", "{r}");
            (r["ts_ns"].as_u64().unwrap(), r["value"].as_u64().unwrap())
        })
        .collect();
    perfetto.sort();
    (chrome, perfetto)
}

#[test]
fn a_capture_that_allocates_100_mib_in_steps_shows_resident_memory_rising_to_it_in_both_formats() {
    const MIB: u64 = 1 << 20;
    let dir = capture(&["--cpu-ms", "0", "--alloc-mib", "100", "--steps", "10"], &[]);
    let (chrome, perfetto) = memory(dir.path());
    assert_eq!(chrome.len(), perfetto.len(), "the same samples in both files");
    for (format, samples) in [("Chrome", &chrome), ("Perfetto", &perfetto)] {
        // 10 steps of 30 ms at 10 ms: dozens of samples.
        assert!(samples.len() > 20, "{format}: {samples:?}");
        let first = samples[0].1;
        let (peak_at, peak) = samples.iter().map(|&(ts, b)| (b, ts)).max().map(|(b, ts)| (ts, b)).unwrap();
        let grown = peak - first;
        assert!((95 * MIB..=110 * MIB).contains(&grown), "{format}: rose by {} MiB", grown / MIB);
        // It rises in steps: up to the peak, at least 8 distinct levels, never falling by more
        // than the allocator's noise.
        let rising: Vec<u64> = samples.iter().filter(|s| s.0 <= peak_at).map(|s| s.1).collect();
        let mut levels: Vec<u64> = rising.iter().map(|b| b / (8 * MIB)).collect();
        levels.dedup();
        assert!(levels.len() >= 8, "{format}: levels {levels:?}");
        assert!(rising.windows(2).all(|w| w[1] + MIB >= w[0]), "{format}: {rising:?}");
    }
    let records = crate::perfetto::check(&[&one(dir.path(), ".pftrace")]);
    let cpu: Vec<&Value> = records.iter().filter(|r| r["track"] == "process CPU usage").collect();
    assert!(!cpu.is_empty() && cpu.iter().all(|r| r["unit"] == "%"), "{cpu:?}");
}

#[test]
fn cpu_and_sampling_off_write_no_thread_time_and_no_counters() {
    let dir = capture(&["--cpu-ms", "5"], &[("CABIN_TRACE_CPU", "off"), ("CABIN_TRACE_SAMPLE", "off")]);
    let events = chrome_events(dir.path());
    assert!(events.iter().all(|e| e.get("tdur").is_none() && e["ph"] != "C"), "{events:?}");
    let records = crate::perfetto::check(&[&one(dir.path(), ".pftrace")]);
    assert!(
        records.iter().all(|r| r["kind"] != "counter" && r.get("thread_dur_ns").is_none()),
        "{records:?}"
    );
    let summary = std::fs::read_to_string(one(dir.path(), ".timings.json")).unwrap();
    assert!(!summary.contains("thread_cpu"), "{summary}");
}

#[test]
fn a_malformed_cpu_level_or_sample_interval_refuses_to_run_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("traces");
    for (var, value, expected) in [
        ("CABIN_TRACE_CPU", "inof", "did you mean `info`"),
        ("CABIN_TRACE_CPU", "info,debug", "expected one level"),
        ("CABIN_TRACE_SAMPLE", "10", "expected an interval from `1ms` to `1s`"),
        ("CABIN_TRACE_SAMPLE", "5min", "expected an interval"),
    ] {
        let out = std::process::Command::new(example_exe("resources"))
            .args(["--cpu-ms", "1"])
            .env("CABIN_TRACE_DIR", &target)
            .env(var, value)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{var}={value}: {}", stderr(&out));
        let message = stderr(&out);
        assert!(
            message.contains(&format!("error: {var}=`{value}`: ")) && message.contains(expected),
            "{message}"
        );
        assert!(out.stdout.is_empty(), "the command did not run");
        assert!(!target.exists(), "no directory or file for {var}={value}");
    }
}
