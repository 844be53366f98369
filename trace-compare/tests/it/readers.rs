//! The readers: hyperfine exports, timings files, samples.json; their errors.

use serde_json::json;
use trace_compare::input::{self, hyperfine};
use trace_compare::{ErrorKind, Kind, Metric};

#[test]
fn a_hyperfine_export_gives_one_group_per_command_with_wall_and_memory_per_run() {
    let doc = json!({"results": [{
        "command": "sleep 0.01", "mean": 0.0105, "stddev": 0.0001, "median": 0.0105,
        "user": 0.0008, "system": 0.0012, "min": 0.0104, "max": 0.0106,
        "times": [0.0104, 0.0105, 0.0106], "exit_codes": [0, 0, 0],
        "memory_usage_byte": [2097152, 2097152, 3145728]
    }]});
    let side = hyperfine::read("base", "a.json", &doc).unwrap();
    let g = &side.groups[0];
    assert_eq!(g.name, "sleep 0.01");
    assert!(g.invalid.is_empty());
    let wall = g.values(&Metric::new("wall", Kind::Time));
    assert_eq!(wall.len(), 3);
    assert!((wall[1].1 - 10.5).abs() < 1e-9);
    assert_eq!(g.values(&Metric::new("peak_rss", Kind::Memory))[2].1, 3072.0);
    // CPU means are one value: shown, never tested.
    assert_eq!(g.values(&Metric::new("cpu_user", Kind::Time)).len(), 1);
}

#[test]
fn a_hyperfine_run_that_failed_or_was_killed_makes_its_command_invalid() {
    let doc = json!({"results": [{"command": "x", "times": [0.1, 0.2], "exit_codes": [1, null]}]});
    let side = hyperfine::read("base", "a.json", &doc).unwrap();
    assert_eq!(side.groups[0].invalid, vec!["run 0 exited with status 1", "run 1 was killed by a signal"]);
}

#[test]
fn a_hyperfine_field_of_the_wrong_type_is_named_with_its_index() {
    let doc = json!({"results": [{"command": "x", "times": [0.1, "0.2"]}]});
    let e = hyperfine::read("base", "a.json", &doc).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Format);
    assert_eq!(e.to_string(), "results[0].times[1]: found \"0.2\"; expected a number of seconds");
}

#[test]
fn a_file_of_another_kind_is_refused_naming_the_file_and_what_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("other.json");
    std::fs::write(&p, "{\"hello\": 1}").unwrap();
    let e = input::open(&p).unwrap_err();
    let text = e.to_string();
    assert!(text.starts_with(&p.display().to_string()) && text.contains("hyperfine export"), "{text}");
    std::fs::write(&p, "{\"results\": [\n  1,,\n]}").unwrap();
    let text = input::open(&p).unwrap_err().to_string();
    assert!(text.contains("line 2"), "{text}");
}

#[test]
fn a_samples_file_of_another_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("samples.json");
    std::fs::write(&p, r#"{"format_version": 9, "labels": [], "scenarios": []}"#).unwrap();
    let e = input::open(&p).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Version);
    assert!(e.to_string().contains("format_version: found 9; expected samples format_version 1"), "{e}");
}

#[test]
fn a_directory_without_timings_files_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(input::open(dir.path()), Err(e) if e.kind() == ErrorKind::Io));
}
