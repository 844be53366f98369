//! Scenarios run by real Ninja binaries of every version the `ninja` Python
//! package ships from 1.10 on. `scripts/install-ninja.sh` installs them under
//! `.tools/ninja/<version>/ninja` at the workspace root;
//! `NINJA_LOG_TEST_NINJA_DIR` points elsewhere. A missing binary fails the
//! test: these scenarios are the ground truth and must not be skipped quietly.
//!
//! Every command is a small shell command, so no compiler is needed, and each
//! test builds in its own temporary directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use ninja_log::{Action, Delta, Snapshot};

const NEWEST: &str = "1.13.2";
const OLDEST: &str = "1.10.0";

fn ninja_dir() -> PathBuf {
    match std::env::var_os("NINJA_LOG_TEST_NINJA_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tools/ninja"),
    }
}

/// The binary of one Ninja version.
fn ninja(version: &str) -> PathBuf {
    let bin = ninja_dir().join(version).join("ninja");
    assert!(
        bin.is_file(),
        "ninja {version} is not installed at {}: run scripts/install-ninja.sh (or set \
         NINJA_LOG_TEST_NINJA_DIR to a directory holding <version>/ninja)",
        bin.display()
    );
    bin
}

/// A build directory, its log, and the Ninja that builds it.
struct Build {
    dir: tempfile::TempDir,
    ninja: PathBuf,
}

impl Build {
    fn new(version: &str, manifest: &str) -> Build {
        let build =
            Build { dir: tempfile::tempdir().expect("create a temporary directory"), ninja: ninja(version) };
        build.write("build.ninja", manifest);
        build
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn log(&self) -> PathBuf {
        self.path(".ninja_log")
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.path(name), text).expect("write a file of the build");
    }

    /// Makes inputs newer than anything built so far, whatever the file
    /// system's time grain: every other file is aged, the inputs get now.
    fn bump(&self, names: &[&str]) {
        let now = SystemTime::now();
        let entries = std::fs::read_dir(self.dir.path()).expect("list the build directory");
        for entry in entries {
            let path = entry.expect("list the build directory").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if path.is_file() && name != ".ninja_log" {
                let when = if names.contains(&name) { now } else { now - Duration::from_secs(1000) };
                std::fs::File::options()
                    .append(true)
                    .open(&path)
                    .and_then(|f| f.set_modified(when))
                    .expect("set a modification time");
            }
        }
    }

    /// Runs Ninja as the capture code would: snapshot, build, delta.
    fn run(&self, args: &[&str]) -> (Delta, bool) {
        self.run_with(&self.ninja, args)
    }

    fn run_with(&self, ninja: &Path, args: &[&str]) -> (Delta, bool) {
        let snapshot = Snapshot::take(self.log()).expect("read the log before the run");
        let out =
            Command::new(ninja).arg("-C").arg(self.dir.path()).args(args).output().expect("start ninja");
        let success = out.status.success();
        let delta = snapshot.delta(self.log());
        // The same read from bytes, owned and lent.
        let after = std::fs::read(self.log()).ok();
        assert_eq!(snapshot.delta_from_bytes(after.as_deref()), delta);
        crate::lent::agrees(&snapshot, after.as_deref(), &delta).unwrap_or_else(|e| panic!("{e}"));
        let delta = delta.with_exit_status(success);
        if std::env::var_os("NINJA_LOG_TEST_VERBOSE").is_some() {
            eprintln!(
                "$ {} {args:?}\n{}{}\n{delta:#?}\n--- log after:\n{}",
                ninja.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                std::fs::read_to_string(self.log()).unwrap_or_default()
            );
        }
        (delta, success)
    }

    /// Runs a build that must succeed.
    fn ok(&self, args: &[&str]) -> Delta {
        let (delta, success) = self.run(args);
        assert!(success, "ninja failed: {delta:#?}");
        delta
    }
}

/// The actions drawn as `outputs` joined by `+`, sorted: what ran, not when.
fn drawn(delta: &Delta) -> Vec<String> {
    let actions = match delta {
        Delta::Available { actions, .. } => actions,
        Delta::Unavailable { reason, .. } => panic!("unavailable: {reason}"),
    };
    let mut v: Vec<String> = actions.iter().map(|a| a.outputs.join("+")).collect();
    v.sort();
    v
}

fn has_note(delta: &Delta, fragment: &str) -> bool {
    delta.notes().iter().any(|n| n.contains(fragment))
}

fn check_times(actions: &[Action]) {
    for a in actions {
        assert!(a.start_ms <= a.end_ms, "{a:?}");
        assert!(!a.hash.is_empty() && !a.hash.starts_with('0'), "{a:?}");
    }
}

/// A graph with a chain, a command with two outputs, and a bystander.
const CHAIN: &str = "\
rule cp
  command = cp $in $out
rule split
  command = cp $in $out1 && cp $in $out2
build a.out: cp a.in
build m1 m2: split a.out
  out1 = m1
  out2 = m2
build c.out: cp c.in
";

fn a_plain_append_is_read(version: &str) {
    let b = Build::new(version, CHAIN);
    b.write("a.in", "a");
    b.write("c.in", "c");
    let first = b.ok(&[]);
    assert_eq!(drawn(&first), ["a.out", "c.out", "m1+m2"]);
    assert!(has_note(&first, "no log before the run"), "{first:#?}");
    check_times(first.actions().unwrap_or_default());

    b.bump(&["a.in"]);
    let second = b.ok(&[]);
    assert_eq!(drawn(&second), ["a.out", "m1+m2"], "{second:#?}");
    assert!(second.notes().is_empty(), "{second:#?}");
}

fn a_no_op_build_is_available_with_no_actions(version: &str) {
    let b = Build::new(version, CHAIN);
    b.write("a.in", "a");
    b.write("c.in", "c");
    b.ok(&[]);
    let again = b.ok(&[]);
    assert_eq!(again.actions().map(<[Action]>::len), Some(0), "{again:#?}");
}

/// Every edge depends on a phony target that never exists, so every build
/// runs them all: the log grows by five lines for four outputs per build.
const ALWAYS: &str = "\
rule mark
  command = touch $out
rule pair
  command = touch $out1 $out2
build FORCE: phony
build a.out: mark | FORCE
build m1 m2: pair a.out | FORCE
  out1 = m1
  out2 = m2
build e.out: mark | FORCE
";
const DOOMED: &str = "build d.out: mark | FORCE\n";

fn a_recompacted_log_with_a_multi_output_action_and_a_dead_output_is_read(version: &str) {
    let b = Build::new(version, &format!("{ALWAYS}{DOOMED}"));
    // 21 builds of 5 lines: 105 entries for 5 outputs, over the threshold.
    for _ in 0..21 {
        b.ok(&["-j1"]);
    }
    // d.out is now dead: no edge builds it and it is gone from disk.
    b.write("build.ninja", ALWAYS);
    std::fs::remove_file(b.path("d.out")).expect("remove d.out");
    let inode_before = inode(&b.log());
    let delta = b.ok(&["-j1"]);
    assert_ne!(inode(&b.log()), inode_before, "Ninja did not recompact");
    assert_eq!(drawn(&delta), ["a.out", "e.out", "m1+m2"], "{delta:#?}");
    assert!(has_note(&delta, "1 dropped as no longer built"), "{delta:#?}");
    let pair = delta
        .actions()
        .unwrap_or_default()
        .iter()
        .find(|a| a.outputs.len() == 2)
        .expect("the two outputs of one command are one action");
    assert_eq!(pair.outputs, ["m1", "m2"]);
}

fn inode(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).expect("stat the log").ino()
}

fn a_failed_build_lists_what_succeeded_and_says_the_failure_is_absent(version: &str) {
    let b = Build::new(
        version,
        "\
rule mark
  command = touch $out
rule fail
  command = touch $out && false
build ok1: mark
build ok2: mark ok1
build bad: fail ok2
",
    );
    let (delta, success) = b.run(&["-j1"]);
    assert!(!success, "the build was meant to fail");
    assert_eq!(drawn(&delta), ["ok1", "ok2"], "{delta:#?}");
    assert!(has_note(&delta, "the action that failed"), "{delta:#?}");
}

fn a_log_of_another_version_is_read(version: &str) {
    // 1.13 deletes an older log and starts over; 1.10 and 1.11 append under
    // the newer header.
    let other = if version.starts_with("1.13") { OLDEST } else { NEWEST };
    let b = Build::new(version, CHAIN);
    b.write("a.in", "a");
    b.write("c.in", "c");
    b.run_with(&ninja(other), &[]);
    b.bump(&["a.in"]);
    let delta = b.ok(&[]);
    if version.starts_with("1.13") {
        // The hashes changed with the version, so everything is rebuilt.
        assert_eq!(drawn(&delta), ["a.out", "c.out", "m1+m2"], "{delta:#?}");
        assert!(has_note(&delta, "started a new log"), "{delta:#?}");
    } else {
        assert_eq!(drawn(&delta), ["a.out", "c.out", "m1+m2"], "{delta:#?}");
        let log = std::fs::read_to_string(b.log()).expect("read the log");
        assert!(log.starts_with("# ninja log v7\n"), "{log}");
    }
}

/// A manifest that regenerates itself, the way CMake's does, from `gen.sh`;
/// with `restat`, the regeneration also runs `ninja -t restat <restat>`.
fn regenerating(ninja: &Path, restat: Option<&str>) -> String {
    let restat = restat.map_or(String::new(), |args| format!(" && {} -t restat {args}", ninja.display()));
    // The sleep makes the regeneration end later than the first action after
    // Ninja restarts, so that the restart shows.
    format!(
        "\
rule gen
  command = sh gen.sh{restat} && sleep 0.15
  generator = 1
build build.ninja: gen gen.sh
rule cp
  command = cp $in $out
build a.out: cp a.in
build b.out: cp a.out
"
    )
}

/// Builds once, then makes the manifest and `a.in` out of date and builds
/// again; returns the second build's delta.
fn regenerate(version: &str, restat: Option<&str>) -> Delta {
    let b = Build::new(version, "");
    let manifest = regenerating(&b.ninja, restat);
    b.write("gen.sh", &format!("cat > build.ninja <<'EOF'\n{manifest}EOF\n"));
    b.write("build.ninja", &manifest);
    b.write("a.in", "a");
    b.ok(&[]);
    b.bump(&["gen.sh", "a.in"]);
    b.ok(&[])
}

/// What a regeneration followed by a rebuild of both files is.
fn regeneration_truth(delta: &Delta) {
    let epochs: Vec<(String, u32)> =
        delta.actions().unwrap_or_default().iter().map(|a| (a.outputs.join("+"), a.epoch)).collect();
    assert_eq!(
        epochs,
        [("build.ninja".to_owned(), 0), ("a.out".to_owned(), 1), ("b.out".to_owned(), 1)],
        "{delta:#?}"
    );
    assert!(has_note(delta, "times go back"), "{delta:#?}");
}

fn a_regeneration_restarts_the_clock_and_is_read_with_epochs(version: &str) {
    regeneration_truth(&regenerate(version, None));
}

fn unavailable_for_a_rewrite(delta: &Delta) {
    let reason = delta.reason().unwrap_or_else(|| panic!("{delta:#?}"));
    assert!(reason.contains(".ninja_log"), "{reason}");
    assert!(reason.contains("rewritten"), "{reason}");
}

fn a_regeneration_restating_every_output_is_unavailable(version: &str) {
    // 1.13 logged each command's start as its time, and the restat puts the
    // outputs' times instead: every line changes. 1.10 and 1.11 keep the
    // lines but the regeneration's own line goes to the replaced file, and
    // the rewrite shows because the old log was too small to recompact.
    unavailable_for_a_rewrite(&regenerate(version, Some("")));
}

fn a_regeneration_restating_the_manifest_is_exact_or_unavailable(version: &str) {
    // What CMake does. 1.13 opens its log only when the first action is
    // done, after the rewrite, and the rewrite changes no line: nothing is
    // lost and the log reads as an append. 1.10 and 1.11 opened the log
    // before, so the regeneration's line is lost: it must not read.
    let delta = regenerate(version, Some("build.ninja"));
    if version.starts_with("1.13") {
        regeneration_truth(&delta);
    } else {
        unavailable_for_a_rewrite(&delta);
    }
}

macro_rules! for_each_version {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            #[test]
            fn ninja_1_10_0() {
                super::$scenario("1.10.0")
            }
            #[test]
            fn ninja_1_10_2() {
                super::$scenario("1.10.2")
            }
            #[test]
            fn ninja_1_11_1() {
                super::$scenario("1.11.1")
            }
            #[test]
            fn ninja_1_13_0() {
                super::$scenario("1.13.0")
            }
            #[test]
            fn ninja_1_13_2() {
                super::$scenario("1.13.2")
            }
        }
    )*};
}

for_each_version!(
    a_plain_append_is_read,
    a_no_op_build_is_available_with_no_actions,
    a_recompacted_log_with_a_multi_output_action_and_a_dead_output_is_read,
    a_failed_build_lists_what_succeeded_and_says_the_failure_is_absent,
    a_log_of_another_version_is_read,
    a_regeneration_restarts_the_clock_and_is_read_with_epochs,
    a_regeneration_restating_every_output_is_unavailable,
    a_regeneration_restating_the_manifest_is_exact_or_unavailable,
);
