//! Files of several captures, from one process and from two, concatenated into
//! one trace: the ids the sink draws must keep them apart.

use std::path::{Path, PathBuf};
use std::process::Command;

use tracing::info_span;

use crate::support::{assert_protoc_decodes, capture, dump};

/// Set by the parent test to the directory the child captures into.
const CHILD_DIR: &str = "PFTRACE_IT_CHILD_DIR";
/// The child's entry point, a test of this binary run on its own.
const CHILD_TEST: &str = "processes::in_a_child_process_this_captures_into_the_dir_it_is_given";

/// A little work on two threads.
fn work() {
    let _root = info_span!("root").entered();
    let helper = trace_core::spawn("helper", || {
        let _step = info_span!("step", n = 1u64).entered();
    })
    .unwrap();
    let _local = info_span!("local").entered();
    helper.join().unwrap();
}

fn concatenate(dir: &Path, parts: &[&Path]) -> PathBuf {
    let bytes: Vec<u8> = parts.iter().flat_map(|p| std::fs::read(p).unwrap()).collect();
    let path = dir.join("both.pftrace");
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn in_a_child_process_this_captures_into_the_dir_it_is_given() {
    // Only the parent test below sets the variable; otherwise there is nothing to do.
    let Some(dir) = std::env::var_os(CHILD_DIR) else { return };
    capture(Path::new(&dir), "child", work);
}

#[test]
fn captures_of_two_processes_concatenated_form_one_valid_trace() {
    let dir = tempfile::tempdir().unwrap();
    let child_dir = dir.path().join("child");
    std::fs::create_dir(&child_dir).unwrap();
    let child_run = Command::new(std::env::current_exe().unwrap())
        .args([CHILD_TEST, "--exact", "--test-threads=1"])
        .env(CHILD_DIR, &child_dir)
        .output()
        .unwrap();
    assert!(
        child_run.status.success(),
        "the child process failed ({}):\n{}{}",
        child_run.status,
        String::from_utf8_lossy(&child_run.stdout),
        String::from_utf8_lossy(&child_run.stderr)
    );
    let child: Vec<PathBuf> = std::fs::read_dir(&child_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pftrace"))
        .collect();
    assert_eq!(child.len(), 1, "the child writes one trace: {child:?}");

    let (ours, _, ()) = capture(dir.path(), "parent", work);
    // In time order: the child's capture ran first. (The other order gives
    // the trace processor clock snapshots that go back, which it refuses and
    // the checker reports; a merge orders its inputs for that reason.)
    let slices = dump(&["--concat"], &[&child[0], &ours]);
    let mut pids: Vec<u64> = slices.iter().filter_map(|r| r["pid"].as_u64()).collect();
    pids.sort();
    pids.dedup();
    assert_eq!(pids.len(), 2, "two processes' slices: {pids:?}");
    assert!(pids.contains(&u64::from(std::process::id())));
    assert_eq!(slices.iter().filter(|r| r["name"] == "step").count(), 2);

    assert_protoc_decodes(&concatenate(dir.path(), &[&ours, &child[0]]));
}

#[test]
fn repeated_captures_in_one_process_concatenate_into_one_valid_trace() {
    let dir = tempfile::tempdir().unwrap();
    // The same threads (this one) in each capture: only the capture counter and
    // the time tell their ids apart.
    let files: Vec<PathBuf> = (0..3).map(|_| capture(dir.path(), "again", work).0).collect();
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let slices = dump(&["--concat"], &paths);
    assert_eq!(slices.iter().filter(|r| r["name"] == "root").count(), 3);
}
