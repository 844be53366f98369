//! Kills, many processes at once, and bad directories: nothing lost, nothing
//! hidden. Each test prints a `reliability:` line with its figures, which
//! docs/reliability.md quotes.

#[cfg(unix)]
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
#[cfg(unix)]
use std::process::Stdio;
#[cfg(unix)]
use std::time::{Duration, Instant};

#[cfg(unix)]
use serde_json::Value;

use crate::support::*;

/// Unix only: a pftrace is checked by the Linux Python of the test set-up.
#[cfg(unix)]
/// Checks every final (non-`.partial`) file in `dir`: JSON that parses, a
/// Chrome trace that is well formed, a summary that reads back. Returns how
/// many files of each kind it checked.
pub fn validate_final_files(dir: &Path) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for name in files_in(dir) {
        let path = dir.join(&name);
        let kind = if name.ends_with(".partial") {
            "partial"
        } else if name.ends_with(".trace.json") {
            crate::chrome_output::check(&path, None);
            "trace.json"
        } else if name.ends_with(".timings.json") {
            cabin_trace::Timings::from_path(&path).unwrap_or_else(|e| panic!("{e}"));
            "timings.json"
        } else if name.ends_with(".pftrace") {
            crate::perfetto::check(&[&path]);
            "pftrace"
        } else {
            panic!("unexpected file {name}");
        };
        *counts.entry(kind).or_insert(0) += 1;
    }
    counts
}

/// A small deterministic generator, so a failing run can be repeated.
#[cfg(unix)]
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// Unix only: checks the pftraces with the Linux Python of the test set-up.
#[cfg(unix)]
#[test]
fn a_capture_killed_at_any_moment_never_leaves_a_final_file_that_does_not_parse() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--spans", "400"];
    let env = [("CABIN_TRACE_DIR", dir.path()), ("CABIN_TRACE_FILTER", Path::new("debug"))];
    // How long a whole run takes here (median of three), to spread the kills over it.
    let mut runs: Vec<u64> = (0..3)
        .map(|_| {
            let t = Instant::now();
            assert!(demo(&args, &env).status.success());
            t.elapsed().as_micros() as u64
        })
        .collect();
    runs.sort();
    let run_us = runs[1];
    std::fs::remove_dir_all(dir.path()).unwrap();
    std::fs::create_dir(dir.path()).unwrap();

    const KILLS: usize = 200;
    let mut seed = 0x5eed_cafe_u64;
    let mut finished_first = 0;
    for _ in 0..KILLS {
        let mut child = demo_cmd(&args, &env).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        std::thread::sleep(Duration::from_micros(next(&mut seed) % (run_us + run_us / 10)));
        let _ = child.kill(); // SIGKILL
        let status = child.wait().unwrap();
        finished_first += usize::from(status.success());
    }
    let counts = validate_final_files(dir.path());
    println!(
        "reliability: kills: {KILLS} SIGKILLs over a {:.1} ms run ({finished_first} runs finished first); \
         final files checked: {counts:?}; none failed to parse",
        run_us as f64 / 1000.0
    );
    assert!(counts.get("partial").copied().unwrap_or(0) > 0, "some kills landed mid-capture");
}

/// Unix only: checks the pftraces with the Linux Python of the test set-up.
#[cfg(unix)]
#[test]
fn many_processes_with_many_concurrent_captures_each_hold_exactly_their_own_events() {
    const PROCESSES: usize = 32;
    const CAPTURES: usize = 16;
    const SPANS: u64 = 50;
    let dir = tempfile::tempdir().unwrap();
    let exe = example_exe("concurrent_captures");
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            std::process::Command::new(&exe)
                .args(["--captures", &CAPTURES.to_string(), "--spans", &SPANS.to_string()])
                .env("CABIN_TRACE_DIR", dir.path())
                .env_remove("CABIN_TRACE_FILTER")
                .env_remove("CABIN_TRACE_FORMAT")
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut stems: BTreeMap<String, u64> = BTreeMap::new();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "a process reported an incomplete capture");
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            assert_eq!(parts[2], "complete", "{line}");
            assert!(stems.insert(parts[1].to_string(), parts[0].parse().unwrap()).is_none(), "stem reused");
        }
    }
    assert_eq!(stems.len(), PROCESSES * CAPTURES, "every capture has a stem of its own");
    let mut files = BTreeSet::new();
    for (stem, capture) in &stems {
        let trace = dir.path().join(format!("{stem}.trace.json"));
        let (_, slices) = crate::chrome_output::check(&trace, None);
        let events: Vec<Value> = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
        let labelled: Vec<&Value> =
            events.iter().filter(|e| e["name"] == "labelled" && e["ph"] == "X").collect();
        assert_eq!(labelled.len() as u64, SPANS, "{stem}: all its spans");
        assert!(labelled.iter().all(|e| e["args"]["capture"] == *capture), "{stem}: only its own spans");
        assert_eq!(slices.iter().filter(|s| s.name == "labelled").count() as u64, SPANS);
        let timings =
            cabin_trace::Timings::from_path(dir.path().join(format!("{stem}.timings.json"))).unwrap();
        assert!(timings.trace_complete);
        files.insert(stem.clone());
    }
    let counts = validate_final_files(dir.path());
    assert!(!counts.contains_key("partial"));
    println!(
        "reliability: concurrency: {PROCESSES} processes x {CAPTURES} concurrent captures = {} captures, \
         {} files, all names distinct, each holding exactly its own {SPANS} spans",
        stems.len(),
        files_in(dir.path()).len()
    );
}

#[test]
fn bad_directories_are_refused_with_the_variable_named_and_nothing_created() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let long_component = dir.path().join("d".repeat(300));
    let long_path = dir.path().join(["abcdefghij"; 420].join("/"));
    let under_file = file.join("sub");
    let mut cases: Vec<(&str, &Path)> = vec![
        ("a regular file", &file),
        ("a path under a regular file", &under_file),
        ("a name longer than the file system allows", &long_component),
    ];
    // Windows has no PATH_MAX to refuse at: std makes long paths verbatim
    // (`\\?\`), and Wine creates the leading directories before it fails.
    if cfg!(unix) {
        cases.push(("a path longer than PATH_MAX", &long_path));
    }
    let refused = cases.len();
    for (what, path) in cases {
        let out = demo(&["--spans", "5"], &[("CABIN_TRACE_DIR", path)]);
        assert_eq!(out.status.code(), Some(2), "{what}: {}", stderr(&out));
        assert!(stderr(&out).starts_with("error: CABIN_TRACE_DIR="), "{what}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{what}: the command did not run");
        assert_eq!(files_in(dir.path()), ["file"], "{what}: nothing created");
    }
    // A missing parent is not an error: the directory is created, like `mkdir -p`.
    let nested = dir.path().join("a/b/c");
    let out = demo(&["--spans", "5"], &[("CABIN_TRACE_DIR", &nested)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(with_suffix(&nested, ".timings.json").len(), 1);
    println!("reliability: bad directories: {refused} kinds refused before the command ran, nothing created");
}
