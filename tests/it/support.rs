//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The demo example, built by `cargo test` beside the test binary.
pub fn demo_exe() -> PathBuf {
    example_exe("demo")
}

/// An example of this package, built by `cargo test` beside the test binary.
pub fn example_exe(name: &str) -> PathBuf {
    let me = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/it-<hash> -> target/<profile>/examples/<name>
    let profile_dir = me.parent().and_then(Path::parent).expect("target/<profile>");
    let exe = profile_dir.join("examples").join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        exe.exists(),
        "{} is missing: run the tests with `cargo test --workspace` (which builds the examples) \
         or build it first with `cargo build --example {name}`",
        exe.display()
    );
    exe
}

/// Runs the demo with `args`, with every `CABIN_TRACE_*` variable removed and
/// then `env` set.
pub fn demo(args: &[&str], env: &[(&str, &Path)]) -> Output {
    demo_cmd(args, env).output().expect("run the demo")
}

/// The demo's command, ready to run.
pub fn demo_cmd(args: &[&str], env: &[(&str, &Path)]) -> Command {
    let mut cmd = Command::new(demo_exe());
    cmd.args(args);
    for var in ["CABIN_TRACE_DIR", "CABIN_TRACE_FILTER", "CABIN_TRACE_FORMAT"] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// The files in `dir`, sorted by name.
pub fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.expect("a directory entry").file_name().to_string_lossy().into_owned()).collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The files in `dir` whose names end with `suffix`.
pub fn with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    files_in(dir).into_iter().filter(|n| n.ends_with(suffix)).map(|n| dir.join(n)).collect()
}

/// The one file in `dir` ending with `suffix`.
pub fn one(dir: &Path, suffix: &str) -> PathBuf {
    let found = with_suffix(dir, suffix);
    assert_eq!(found.len(), 1, "expected one *{suffix} in {}, found {:?}", dir.display(), files_in(dir));
    found.into_iter().next().unwrap()
}

/// Text of a process's stderr, for assertion messages.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
