//! Captures to export, and the tools the tests run.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use trace_core::{Config, Session, Sink};

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The test tools' Python, with `opentelemetry-proto` and `rotel`.
pub fn python() -> PathBuf {
    let p = root().join(".tools/py/bin/python");
    assert!(p.exists(), "{} is missing: run scripts/install-test-tools.sh", p.display());
    p
}

/// Runs tools/otlp_check.py with `args` and returns what it decoded.
pub fn check(args: &[&std::ffi::OsStr]) -> Value {
    let out = Command::new(python()).arg(root().join("tools/otlp_check.py")).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "the official OTLP classes refuse {args:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The files of one capture of a small `build`: its trace (`.otlp.json`) and
/// summary (`.timings.json`).
pub struct Captured {
    pub otlp: PathBuf,
    pub timings: PathBuf,
}

/// Captures a small command with the OTLP sink and the summary.
pub fn capture(dir: &Path, command: &str) -> Captured {
    let config = Config::from_lookup("EXPORT_TEST", &["otlp"], |n| {
        (n == "EXPORT_TEST_TRACE_DIR").then(|| dir.as_os_str().to_owned())
    })
    .unwrap()
    .unwrap();
    let sinks: Vec<Box<dyn Sink>> =
        vec![Box::new(trace_sink_otlp::OtlpSink::new()), Box::new(trace_summary::SummarySink::new())];
    let session = Session::start(&config, command, sinks).unwrap();
    session.in_scope(|| {
        let _root = tracing::info_span!("command").entered();
        for i in 0..3u64 {
            let _r = tracing::info_span!("resolve", requests = i + 1).entered();
            tracing::info!(round = i, "resolved");
        }
        let _c = tracing::info_span!("compile", units = 2u64).entered();
    });
    let report = session.finish();
    let find = |sink: &str| report.files.iter().find(|f| f.sink == sink && f.complete).unwrap().path.clone();
    Captured { otlp: find("otlp"), timings: find("summary") }
}
