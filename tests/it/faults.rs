//! Write faults: a failure injected at every write call of a representative
//! capture (midway through the call's bytes), for each sink and for the
//! summary, and a real full file system.

use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cabin_trace::{Config, Session, Sink};
use trace_core::{Event, Field, Finish, LaneSlice, Start, Value};

#[cfg(target_os = "linux")]
use crate::support::*;

/// Where to fail: the write that would cross byte `fail_at` of the file takes
/// the bytes before it and fails, as a write that runs out of space does.
#[derive(Clone)]
struct Plan {
    fail_at: u64,
    bytes: Arc<AtomicU64>,
    /// Where each write call started and how long it was (recorded always).
    calls: Arc<std::sync::Mutex<Vec<(u64, u64)>>>,
}

/// Wraps a real sink; its writes go through a writer that fails as planned,
/// then refuses every later write, as the capture's checked writer does.
struct Faulty {
    inner: Box<dyn Sink>,
    plan: Plan,
    failed: bool,
}

/// The operating system's "disk full" error, and words of its message.
#[cfg(unix)]
const DISK_FULL: (i32, &str) = (libc::ENOSPC, "No space left");
/// `ERROR_DISK_FULL`.
#[cfg(windows)]
const DISK_FULL: (i32, &str) = (112, "(os error 112)");

fn disk_full() -> io::Error {
    io::Error::from_raw_os_error(DISK_FULL.0)
}

struct Injector<'a> {
    out: &'a mut dyn Write,
    plan: &'a Plan,
    failed: &'a mut bool,
}

impl Write for Injector<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if *self.failed {
            return Err(disk_full());
        }
        let at = self.plan.bytes.load(Ordering::Relaxed);
        self.plan.calls.lock().unwrap().push((at, buf.len() as u64));
        if at + buf.len() as u64 > self.plan.fail_at {
            *self.failed = true;
            let room = (self.plan.fail_at - at) as usize;
            self.out.write_all(&buf[..room])?;
            self.plan.bytes.fetch_add(room as u64, Ordering::Relaxed);
            return Err(disk_full());
        }
        self.out.write_all(buf)?;
        self.plan.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl Faulty {
    fn run(
        &mut self,
        out: &mut dyn Write,
        f: impl FnOnce(&mut dyn Sink, &mut dyn Write) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut w = Injector { out, plan: &self.plan, failed: &mut self.failed };
        let r = f(self.inner.as_mut(), &mut w);
        // A sink that ignored the error still has an incomplete file.
        if self.failed {
            return Err(r.err().unwrap_or_else(|| io::Error::from_raw_os_error(28)));
        }
        r
    }
}

impl Sink for Faulty {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn suffix(&self) -> &'static str {
        self.inner.suffix()
    }
    fn start(&mut self, start: &Start<'_>, out: &mut dyn Write) -> io::Result<()> {
        self.run(out, |s, w| s.start(start, w))
    }
    fn event(&mut self, event: &Event<'_>, out: &mut dyn Write) -> io::Result<()> {
        self.run(out, |s, w| s.event(event, w))
    }
    fn finish(&mut self, end: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
        self.run(out, |s, w| s.finish(end, w))
    }
}

fn make(kind: &str) -> Box<dyn Sink> {
    match kind {
        "chrome" => Box::new(trace_sink_chrome::ChromeSink::new()),
        "perfetto" => Box::new(trace_sink_perfetto::PerfettoSink::new()),
        _ => Box::new(trace_summary::SummarySink::new()),
    }
}

const KINDS: [&str; 3] = ["chrome", "perfetto", "summary"];

/// Spans the long shape adds: enough for several of the Chrome sink's 32 KiB
/// writes and two of the Perfetto sink's 64 KiB chunks, and for the writer
/// thread to start (a short capture is finished on the calling thread).
const LONG_SPANS: u64 = 2_000;

/// A capture with everything a sink must encode: two threads, fields of each
/// kind, a field recorded late, an event, an unclosed span, a lane; `long`
/// adds [`LONG_SPANS`] spans with a field.
fn representative(long: bool) -> u64 {
    let _root = tracing::info_span!("resolve", packages = 3u64, name = "demo").entered();
    let h = cabin_trace::spawn("helper", || {
        for i in 0..3u64 {
            let _s = tracing::info_span!("download", i, ok = true, ratio = 0.5).entered();
        }
    })
    .unwrap();
    h.join().unwrap();
    let s = tracing::info_span!("compile", exit_code = tracing::field::Empty);
    s.in_scope(|| tracing::warn!(units = 2u64, "compiled"));
    s.record("exit_code", 0i64);
    if long {
        for step in 0..LONG_SPANS {
            let _s = tracing::info_span!("step", step).entered();
        }
    }
    std::mem::forget(tracing::info_span!("left_open").entered());
    if let Some(h) = cabin_trace::current() {
        let now = h.now_ns();
        h.lane_slice(&LaneSlice {
            lane: "ninja",
            track: h.place("ninja", now, now + 1000),
            begin_ns: now,
            end_ns: now + 1000,
            name: "obj/a.o",
            fields: &[Field { name: "duration_ms", value: Value::U64(1) }],
        });
    }
    42
}

fn config(dir: &Path) -> Config {
    Config::from_lookup("F", cabin_trace::FORMATS, |n| (n == "F_TRACE_DIR").then(|| dir.into()))
        .unwrap()
        .unwrap()
}

/// Runs the capture with `faulty` failing at byte `fail_at`; returns the plan
/// (with the write calls it saw) and what the capture reported.
fn run_once(dir: &Path, faulty: &str, long: bool, fail_at: u64) -> (Plan, cabin_trace::Report) {
    let plan = Plan { fail_at, bytes: Arc::new(AtomicU64::new(0)), calls: Default::default() };
    let sinks: Vec<Box<dyn Sink>> = KINDS
        .iter()
        .map(|k| -> Box<dyn Sink> {
            if *k == faulty {
                Box::new(Faulty { inner: make(k), plan: plan.clone(), failed: false })
            } else {
                make(k)
            }
        })
        .collect();
    let session = Session::start(&config(dir), "faults", sinks).unwrap();
    let answer = session.in_scope(|| representative(long));
    assert_eq!(answer, 42, "the command's result is unchanged");
    let report = session.finish();
    (plan, report)
}

#[test]
fn a_write_failure_at_every_write_call_of_each_sink_is_kept_reported_and_never_panics() {
    let mut injected = 0;
    let mut lines = Vec::new();
    // The summary's writes do not depend on the number of spans: one shape.
    let shapes =
        [("chrome", false), ("chrome", true), ("perfetto", false), ("perfetto", true), ("summary", false)];
    for (kind, long) in shapes {
        let dir = tempfile::tempdir().unwrap();
        let (clean_plan, clean) = run_once(dir.path(), kind, long, u64::MAX);
        assert!(clean.is_complete(), "{:?}", clean.warnings());
        let calls = clean_plan.calls.lock().unwrap().clone();
        let file_len = clean_plan.bytes.load(Ordering::Relaxed);
        // Midway through each write call. Timestamps change a file's length by
        // a few bytes from run to run: an offset past a run's end injects
        // nothing, and is not counted.
        for (i, (start, len)) in calls.iter().enumerate() {
            let fail_at = start + len / 2;
            let dir = tempfile::tempdir().unwrap();
            let (plan, report) = run_once(dir.path(), kind, long, fail_at);
            if plan.bytes.load(Ordering::Relaxed) < fail_at || report.is_complete() {
                continue;
            }
            injected += 1;
            let failed: Vec<_> = report.files.iter().filter(|f| !f.complete).collect();
            assert_eq!(
                failed.len(),
                1,
                "{kind} at byte {fail_at}: only the faulty file fails: {:?}",
                report.files
            );
            let f = failed[0];
            assert_eq!(f.sink, kind);
            let error = f.error.as_deref().unwrap();
            assert!(!error.contains("panicked"), "{kind} at byte {fail_at}: {error}");
            assert!(error.contains(DISK_FULL.1), "{kind} at byte {fail_at}: {error}");
            let partial = format!("{}.partial", f.path.display());
            assert!(Path::new(&partial).exists() && !f.path.exists(), "{kind}: only the .partial is left");
            assert_eq!(
                std::fs::metadata(&partial).unwrap().len(),
                fail_at,
                "{kind}: the bytes before the fault"
            );
            let warnings = report.warnings();
            assert_eq!(warnings.len(), 1);
            assert!(warnings[0].contains(&partial), "{warnings:?}");
            if kind != "summary" {
                let summary = report.files.iter().find(|f| f.sink == "summary").unwrap();
                let t = cabin_trace::Timings::from_path(&summary.path).unwrap();
                assert!(!t.trace_complete, "{kind} at byte {fail_at}");
                assert!(t.files.iter().any(|tf| tf.format == kind && !tf.complete));
            }
            // What completed is valid (the official-schema check is slow: sample it).
            // Its decoders are the Linux ones of the test set-up: not run on Windows.
            if i % 50 == 0 {
                #[cfg(unix)]
                crate::reliability::validate_final_files(dir.path());
            }
        }
        let shape = if long { "long" } else { "short" };
        lines.push(format!("{kind}, {shape}: {} write calls, {file_len} bytes", calls.len()));
    }
    println!(
        "reliability: write faults: {injected} captures, each failing midway through one write call ({}); \
         0 panics, 0 files wrongly complete",
        lines.join(", ")
    );
}

/// A small tmpfs that fills up: a real ENOSPC from the kernel (Linux only).
#[cfg(target_os = "linux")]
struct SmallTmpfs {
    dir: tempfile::TempDir,
}

#[cfg(target_os = "linux")]
impl SmallTmpfs {
    fn mount(size: &str) -> SmallTmpfs {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mounting a small tmpfs failed ({}): this test needs root (as CI runs) to make a real full file system",
            stderr(&out)
        );
        SmallTmpfs { dir }
    }
}

#[cfg(target_os = "linux")]
impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(self.dir.path()).status();
    }
}

/// Linux only: it mounts a tmpfs.
#[cfg(target_os = "linux")]
#[test]
fn a_full_file_system_leaves_partial_files_says_so_and_changes_nothing_else() {
    let fs = SmallTmpfs::mount("96k");
    let plain = demo(&["--spans", "3000"], &[]);
    let out = demo(
        &["--spans", "3000"],
        &[("CABIN_TRACE_DIR", fs.dir.path()), ("CABIN_TRACE_FILTER", Path::new("debug"))],
    );
    assert_eq!(out.status.code(), plain.status.code(), "{}", stderr(&out));
    assert_eq!(out.stdout, plain.stdout);
    let partials = with_suffix(fs.dir.path(), ".partial");
    assert!(!partials.is_empty(), "the file system filled up: {:?}", files_in(fs.dir.path()));
    for p in &partials {
        let line = format!("warning: trace file {} is incomplete: No space left on device", p.display());
        assert!(stderr(&out).contains(&line), "{}", stderr(&out));
    }
    let counts = crate::reliability::validate_final_files(fs.dir.path());
    println!(
        "reliability: full tmpfs: {} partial files, each named in a warning; final files valid: {counts:?}",
        partials.len()
    );
}
