//! Finding the binaries and tools the tests run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// `cabin-trace` with `args`, every `CABIN_TRACE_*` variable removed.
pub fn cabin_trace(args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cabin-trace"));
    c.args(args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("CABIN_TRACE_") {
            c.env_remove(k);
        }
    }
    c.output().expect("run cabin-trace")
}

/// stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The workspace's `demo` example, of this test's profile.
pub fn demo_exe() -> PathBuf {
    example_exe("demo")
}

/// The workspace's example `name`, of this test's profile: the one `cargo test
/// --workspace` built, else built now with `cargo build --example NAME`.
pub fn example_exe(name: &str) -> PathBuf {
    static BUILDING: Mutex<()> = Mutex::new(());
    let _one_build_at_a_time = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    // target/<profile>/deps/it-<hash> -> target/<profile>/examples/<name>
    let test_exe = std::env::current_exe().expect("test binary");
    let profile_dir = test_exe.parent().and_then(Path::parent).expect("profile dir").to_path_buf();
    let exe = profile_dir.join("examples").join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if !exe.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut c = Command::new(cargo);
        c.current_dir(root()).args(["build", "-p", "cabin-trace", "--example", name]);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            c.arg("--release");
        }
        let status = c.status().unwrap_or_else(|e| panic!("run cargo build --example {name}: {e}"));
        assert!(status.success(), "cargo build --example {name} failed");
    }
    assert!(exe.exists(), "{} is missing after building it", exe.display());
    exe
}

/// The Python of `.tools/py` with `jsonschema` (scripts/install-test-tools.sh).
pub fn python_with_jsonschema() -> PathBuf {
    let py = root().join(".tools/py/bin/python");
    let ok = Command::new(&py).args(["-c", "import jsonschema"]).status().is_ok_and(|s| s.success());
    assert!(ok, "{} with the jsonschema package is needed: run scripts/install-test-tools.sh", py.display());
    py
}

/// The JSON report printed on stdout.
pub fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", stdout(o)))
}

/// The row of `metric` in the first group of a JSON report.
pub fn row<'a>(report: &'a serde_json::Value, metric: &str) -> &'a serde_json::Value {
    report["groups"][0]["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["metric"] == metric)
        .unwrap_or_else(|| panic!("no row {metric} in {report:#}"))
}
