//! Captures through the real engine, and the independent decoder that checks
//! them: Perfetto's official schema in Python, and protoc with a descriptor set
//! exported from it (both installed by `scripts/install-perfetto.sh`).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::Value as Json;
use trace_core::{Config, Event, Finish, Report, Session, Sink};
use trace_sink_perfetto::PerfettoSink;

const INSTALL: &str = "run `scripts/install-perfetto.sh` from the repository root to install it";

/// The repository root, found from this crate's manifest directory.
pub fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    match manifest.parent() {
        Some(root) => root.to_path_buf(),
        None => panic!("{} has no parent directory", manifest.display()),
    }
}

/// The Python that has the official schema classes; fails the test when missing.
pub fn python() -> PathBuf {
    let python = repo_root().join(".tools/py/bin/python");
    assert!(python.exists(), "the Perfetto schema decoder ({}) is missing: {INSTALL}", python.display());
    python
}

/// The official schema as a descriptor set; fails the test when missing.
pub fn descriptor_set() -> PathBuf {
    let desc = repo_root().join(".tools/perfetto_trace.desc");
    assert!(desc.exists(), "the Perfetto schema descriptor set ({}) is missing: {INSTALL}", desc.display());
    desc
}

/// Runs `tools/pftrace_check.py` with `args`.
pub fn checker(args: &[&str], files: &[&Path]) -> Output {
    let script = repo_root().join("tools/pftrace_check.py");
    let out = Command::new(python()).arg(&script).args(args).args(files).output();
    match out {
        Ok(out) => out,
        Err(e) => panic!("running {} failed: {e}; {INSTALL}", script.display()),
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts the checker accepts `files` (with `args`); returns its stdout.
pub fn assert_checker_accepts(args: &[&str], files: &[&Path]) -> String {
    let out = checker(args, files);
    assert!(
        out.status.success(),
        "pftrace_check refused {files:?} (exit {:?}):\n{}",
        out.status.code(),
        text(&out.stderr)
    );
    eprint!("{}", text(&out.stderr));
    text(&out.stdout)
}

/// Asserts the checker refuses `file` with exit status 1 and a message
/// containing `expected`.
pub fn assert_checker_refuses(file: &Path, expected: &str) {
    let out = checker(&[], &[file]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "pftrace_check should refuse {}:\n{stderr}", file.display());
    assert!(stderr.contains(expected), "the refusal should mention {expected:?}, got:\n{stderr}");
}

/// The checker's `--dump-slices` lines for `files`, parsed.
pub fn dump(args: &[&str], files: &[&Path]) -> Vec<Json> {
    let mut all = vec!["--dump-slices"];
    all.extend_from_slice(args);
    assert_checker_accepts(&all, files)
        .lines()
        .map(|line| match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => panic!("bad dump line {line:?}: {e}"),
        })
        .collect()
}

/// `protoc --decode=perfetto.protos.Trace` of `file` against the official
/// schema; asserts it succeeds and that no field is unknown to the schema
/// (protoc prints those as bare field numbers). Returns the text.
pub fn assert_protoc_decodes(file: &Path) -> String {
    let input = match std::fs::File::open(file) {
        Ok(f) => f,
        Err(e) => panic!("open {}: {e}", file.display()),
    };
    let out = Command::new("protoc")
        .arg(format!("--descriptor_set_in={}", descriptor_set().display()))
        .arg("--decode=perfetto.protos.Trace")
        .stdin(Stdio::from(input))
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => panic!("protoc did not run ({e}); {INSTALL}"),
    };
    assert!(out.status.success(), "protoc could not decode {}:\n{}", file.display(), text(&out.stderr));
    let decoded = text(&out.stdout);
    let unknown: Vec<&str> = decoded
        .lines()
        .filter(|line| {
            let field = line.trim_start().split([':', ' ']).next().unwrap_or("");
            !field.is_empty() && field.chars().all(|c| c.is_ascii_digit())
        })
        .collect();
    assert!(
        unknown.is_empty(),
        "protoc shows fields unknown to the schema in {}: {unknown:?}",
        file.display()
    );
    decoded
}

/// One event as the engine handed it to the sinks, owned.
#[derive(Clone, Debug, PartialEq)]
pub enum Seen {
    Thread { tid: u64, name: String },
    Begin { tid: u64, ts: u64, name: String },
    End { tid: u64, ts: u64, name: String, unclosed: bool },
    Instant { tid: u64, ts: u64, name: String },
    Lane { lane: String, track: u32, begin: u64, end: u64, name: String },
}

/// A sink that keeps what the engine hands the sinks, to compare the decoded
/// trace with, event for event.
pub struct Recorder(pub Arc<Mutex<Vec<Seen>>>);

impl Sink for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn suffix(&self) -> &'static str {
        "recorded.txt"
    }
    fn event(&mut self, event: &Event<'_>, _out: &mut dyn Write) -> io::Result<()> {
        let seen = match *event {
            Event::ThreadName { thread, name } => Seen::Thread { tid: thread, name: name.into() },
            Event::SpanBegin { thread, ts, site, .. } => {
                Seen::Begin { tid: thread, ts, name: site.name.into() }
            }
            Event::SpanEnd { thread, ts, site, unclosed, .. } => {
                Seen::End { tid: thread, ts, name: site.name.into(), unclosed }
            }
            Event::Instant { thread, ts, site, .. } => {
                Seen::Instant { tid: thread, ts, name: site.name.into() }
            }
            Event::Lane(l) => Seen::Lane {
                lane: l.lane.into(),
                track: l.track,
                begin: l.begin_ns,
                end: l.end_ns,
                name: l.name.into(),
            },
            _ => return Ok(()),
        };
        if let Ok(mut all) = self.0.lock() {
            all.push(seen);
        }
        Ok(())
    }
    fn finish(&mut self, _end: &Finish<'_>, _out: &mut dyn Write) -> io::Result<()> {
        Ok(())
    }
}

/// A capture config writing into `dir`.
pub fn config(dir: &Path) -> Config {
    let dir = dir.to_path_buf();
    let lookup = move |name: &str| match name {
        "PFTEST_TRACE_DIR" => Some(dir.clone().into_os_string()),
        "PFTEST_TRACE_FILTER" => Some("trace".into()),
        _ => None,
    };
    match Config::from_lookup("PFTEST", &["perfetto", "recorder"], lookup) {
        Ok(Some(config)) => config,
        Ok(None) => panic!("the trace dir is set, so capture is on"),
        Err(e) => panic!("config: {e}"),
    }
}

/// Runs `command` under a capture into `dir` with the Perfetto sink and a
/// recorder; returns the `.pftrace` path, the recorded events and `command`'s
/// result.
pub fn capture<T>(dir: &Path, name: &str, command: impl FnOnce() -> T) -> (PathBuf, Vec<Seen>, T) {
    capture_with(&config(dir), PerfettoSink::new(), name, command)
}

/// [`capture`] with a configuration and a Perfetto sink of the caller's.
pub fn capture_with<T>(
    config: &Config,
    sink: PerfettoSink,
    name: &str,
    command: impl FnOnce() -> T,
) -> (PathBuf, Vec<Seen>, T) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sinks: Vec<Box<dyn Sink>> = vec![Box::new(sink), Box::new(Recorder(seen.clone()))];
    let session = match Session::start(config, name, sinks) {
        Ok(s) => s,
        Err(e) => panic!("start: {e}"),
    };
    let result = session.in_scope(command);
    let report = session.finish();
    let path = pftrace_of(&report);
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    (path, seen, result)
}

/// The complete `.pftrace` a finished capture wrote.
pub fn pftrace_of(report: &Report) -> PathBuf {
    // Some captures leave a span open on purpose: only the files must be whole.
    assert!(
        report.dropped_records == 0 && report.files.iter().all(|f| f.complete),
        "the capture is incomplete: {:?}",
        report.warnings()
    );
    match report.files.iter().find(|f| f.sink == "perfetto") {
        Some(f) => f.path.clone(),
        None => panic!("no perfetto file in {:?}", report.files),
    }
}
