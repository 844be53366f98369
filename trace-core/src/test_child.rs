//! Tests that need a process of their own (a seccomp filter, a process-wide
//! mode): the test binary runs one ignored test again, alone, with a
//! variable that tells it to do its work.

/// Runs the ignored test `path` (its full path in the crate) in a child
/// process of the test binary with `var` set, and asserts that it passed and
/// printed `<var>: checked`; returns the child's standard output.
pub(crate) fn run_alone(path: &str, var: &str) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", path, "--nocapture"])
        .env(var, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains(&format!("{var}: checked")),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
