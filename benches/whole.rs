//! The whole cost of a capture, not only the calling thread's: process CPU
//! and wall time from the capture's start to its finish, bytes written and
//! records dropped, for ours and its peers, in interleaved rounds of one run.
//!
//! ```text
//! cargo bench -p cabin-trace-benches --bench whole          # about 4 min on 2 cores
//! cargo test -p cabin-trace-benches --bench whole           # the checks, at small sizes
//! WHOLE_ROUNDS=3 cargo bench -p cabin-trace-benches --bench whole
//! ```
//!
//! Two parts.
//!
//! The cost per span. Every set-up (`Subject`) runs the same loop of
//! `WHOLE_OPS` (200,000) spans with two fields on the main thread, in a fresh
//! capture per run, once per round for `WHOLE_ROUNDS` (9) rounds after a round
//! of checks; the order of the set-ups rotates from round to round, so that a
//! change in the machine's load spreads over all of them. Two workloads:
//! "flushed" flushes every 10,000 spans (outside the calling-thread time,
//! inside the total), "no flush" does not flush at all, as a real command
//! does not. Per run: calling thread = the CPU time of the loop on its own
//! thread (`CLOCK_THREAD_CPUTIME_ID`, so that time spent waiting for a core
//! the machine's other work holds is not counted); total CPU =
//! `getrusage(RUSAGE_SELF)` user + system, all threads, from before the
//! capture starts to after it has finished (files written, writer joined);
//! wall = the same interval; bytes = the sizes of the files written; dropped =
//! `Report::dropped_records` for ours, the spans missing from the file for
//! the peers. Every run is checked after its clock stops: ours by its
//! summary's counts (exact when nothing was dropped), the peers by counting
//! their file's spans; in the round of checks, every file is also read back
//! by an independent parser (Chrome JSON, Perfetto wire format).
//!
//! Under load. Each case runs in a child process of its own (so that the
//! peak memory of one set-up is not another's), `WHOLE_LOAD_ROUNDS` (3)
//! times per set-up, interleaved: one thread making `WHOLE_LOAD_SPANS`
//! (1,000,000) spans with two fields as fast as it can, and two threads making
//! `WHOLE_FLOOD_EVENTS` (2,000,000) events with two fields between them, each
//! in a default capture (`Capture::run_with_report`, no flush). Peak memory
//! growth is `VmHWM` after the finish less `VmRSS` before the start.
//!
//! Without `--bench` (as `cargo test` runs it), or with `--test`
//! (`cargo bench ... -- --test`), every size is small and one round runs: the
//! checks alone.

use std::fs::File;
use std::hint::black_box;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::dispatcher::{self, Dispatch};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{Layer, Registry};

use cabin_trace::{Capture, Report, Session, Sink, Timings};

mod support;

use support::{median, num, Scratch};

/// The name of every span the workloads make.
const SPAN: &str = "bench_span";
/// Spans between two flushes in the "flushed" workload.
const CHUNK: u64 = 10_000;

/// Sizes, from the environment, small unless run by `cargo bench`.
#[derive(Clone, Copy, Debug)]
struct Params {
    full: bool,
    rounds: usize,
    ops: u64,
    load_rounds: usize,
    load_spans: u64,
    flood_events: u64,
}

impl Params {
    fn from_env() -> Params {
        // `cargo bench` passes `--bench`; `cargo bench -- --test` asks for the checks alone.
        let full = std::env::args().any(|a| a == "--bench") && !std::env::args().any(|a| a == "--test");
        let var = |name: &str, full_default: u64, test_default: u64| {
            std::env::var(name).ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(if full {
                full_default
            } else {
                test_default
            })
        };
        Params {
            full,
            rounds: var("WHOLE_ROUNDS", 9, 1) as usize,
            ops: var("WHOLE_OPS", 200_000, 2_000),
            load_rounds: var("WHOLE_LOAD_ROUNDS", 3, 1) as usize,
            load_spans: var("WHOLE_LOAD_SPANS", 1_000_000, 20_000),
            flood_events: var("WHOLE_FLOOD_EVENTS", 2_000_000, 20_000),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Workload {
    /// Spans with two fields, the capture flushed every `CHUNK` spans.
    Flushed,
    /// The same spans, never flushed: a real command's loop.
    NoFlush,
}

impl Workload {
    fn label(self) -> &'static str {
        match self {
            Workload::Flushed => "span + 2 fields, flushed every 10,000",
            Workload::NoFlush => "span + 2 fields, no flush",
        }
    }
}

/// `n` spans with two fields, numbered from `from`; returns the CPU time the
/// loop took on the calling thread.
#[inline(never)]
fn spans(from: u64, n: u64) -> Duration {
    let start = support::own_thread_cpu();
    for i in from..from + n {
        drop(tracing::info_span!("bench_span", a = black_box(i), b = 7u64).entered());
    }
    support::own_thread_cpu() - start
}

/// `n` events with two fields; returns the CPU time the loop took on the
/// calling thread.
#[inline(never)]
fn events(n: u64) -> Duration {
    let start = support::own_thread_cpu();
    for i in 0..n {
        tracing::info!(a = black_box(i), b = 7u64, "bench event");
    }
    support::own_thread_cpu() - start
}

/// Our sink sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sinks {
    /// Chrome, Perfetto and the summary: a tool's default.
    Default,
    Perfetto,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    NoSubscriber,
    /// The façade with capture off (`Capture::from_config(None)`).
    CaptureOff,
    Ours(Sinks),
    /// tracing-perfetto-file 0.1.1 with debug annotations (it records the fields).
    PerfettoFile,
    /// tracing-chrome 0.7.2 with `include_args` (it records the fields).
    TracingChrome,
    TracingPerfetto,
}

/// A set-up: who records, and whether a tool's log layer (`fmt` at WARN,
/// writing to `io::sink`) is composed with it on the registry, as cabin runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Subject {
    who: Who,
    fmt: bool,
}

const fn s(who: Who, fmt: bool) -> Subject {
    Subject { who, fmt }
}

const SUBJECTS: [Subject; 11] = [
    s(Who::NoSubscriber, false),
    s(Who::CaptureOff, false),
    s(Who::Ours(Sinks::Default), false),
    s(Who::Ours(Sinks::Perfetto), false),
    s(Who::PerfettoFile, false),
    s(Who::TracingChrome, false),
    s(Who::TracingPerfetto, false),
    s(Who::CaptureOff, true),
    s(Who::Ours(Sinks::Default), true),
    s(Who::PerfettoFile, true),
    s(Who::TracingChrome, true),
];

/// The set-ups under load: tracing-perfetto is left out (it is an order of
/// magnitude slower than the others, and it holds nothing back).
const LOAD_SUBJECTS: [Subject; 5] = [
    s(Who::NoSubscriber, false),
    s(Who::CaptureOff, false),
    s(Who::Ours(Sinks::Default), false),
    s(Who::PerfettoFile, false),
    s(Who::TracingChrome, false),
];

impl Subject {
    fn id(self) -> String {
        let who = match self.who {
            Who::NoSubscriber => "no_subscriber",
            Who::CaptureOff => "capture_off",
            Who::Ours(Sinks::Default) => "ours_default",
            Who::Ours(Sinks::Perfetto) => "ours_perfetto",
            Who::PerfettoFile => "perfetto_file",
            Who::TracingChrome => "tracing_chrome",
            Who::TracingPerfetto => "tracing_perfetto",
        };
        if self.fmt {
            format!("{who}+fmt")
        } else {
            who.to_string()
        }
    }

    fn parse(id: &str) -> Option<Subject> {
        SUBJECTS.into_iter().find(|s| s.id() == id)
    }

    fn label(self) -> String {
        let who = match (self.who, self.fmt) {
            (Who::NoSubscriber, _) => "no subscriber",
            (Who::CaptureOff, false) => "our capture, off",
            (Who::CaptureOff, true) => "our capture, off: the fmt layer alone",
            (Who::Ours(Sinks::Default), _) => "ours, default (Chrome + Perfetto + summary)",
            (Who::Ours(Sinks::Perfetto), _) => "ours, Perfetto + summary",
            (Who::PerfettoFile, _) => "tracing-perfetto-file 0.1.1, debug annotations",
            (Who::TracingChrome, _) => "tracing-chrome 0.7.2, include_args",
            (Who::TracingPerfetto, _) => "tracing-perfetto 0.1.5",
        };
        if self.fmt && self.who != Who::CaptureOff {
            format!("{who} + fmt layer")
        } else {
            who.to_string()
        }
    }
}

/// The tool's log layer, as cabin composes it: WARN and above, formatted and
/// thrown away. At the workloads' INFO level it formats nothing; what it
/// costs is the registry it needs and its per-layer filter.
fn fmt_layer() -> impl Layer<Registry> + Send + Sync + 'static {
    tracing_subscriber::fmt::layer().with_writer(io::sink).with_filter(LevelFilter::WARN)
}

fn our_sinks(which: Sinks) -> Vec<Box<dyn Sink>> {
    let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
    if which == Sinks::Default {
        sinks.push(Box::new(trace_sink_chrome::ChromeSink::new()));
    }
    sinks.push(Box::new(trace_sink_perfetto::PerfettoSink::new()));
    sinks.push(Box::new(trace_summary::SummarySink::new()));
    sinks
}

/// A file shared by every writer tracing-perfetto makes.
#[derive(Clone)]
struct SharedFile(Arc<Mutex<BufWriter<File>>>);

impl Write for SharedFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).flush()
    }
}

/// `(dispatch, guard)` from a peer's `(layer, guard)`: the layer on a
/// registry, with the tool's layer under it when the set-up has one. (A macro:
/// tracing-chrome's layer is generic over the subscriber it sits on.)
macro_rules! on_registry {
    ($fmt:expr, $build:expr) => {
        if $fmt {
            let (layer, guard) = $build;
            (Dispatch::new(Registry::default().with(fmt_layer()).with(layer)), guard)
        } else {
            let (layer, guard) = $build;
            (Dispatch::new(Registry::default().with(layer)), guard)
        }
    };
}

enum Kind {
    Plain,
    Off,
    Ours(Session),
    PerfettoFile(tracing_perfetto_file::FlushGuard),
    TracingChrome(tracing_chrome::FlushGuard),
    TracingPerfetto(SharedFile),
}

/// One fresh capture of a subject, started.
struct Rig {
    subject: Subject,
    dispatch: Option<Dispatch>,
    kind: Kind,
    /// The peer's output file.
    file: Option<PathBuf>,
}

/// A finished capture, before its checks.
enum Finished {
    Nothing,
    Ours(Report),
    /// A peer's file, and whether it is Chrome JSON (else Perfetto).
    Peer {
        path: PathBuf,
        chrome: bool,
    },
}

impl Rig {
    fn start(subject: Subject, dir: &Path, seq: u64) -> Rig {
        let file = |suffix: &str| dir.join(format!("{}-{seq}.{suffix}", subject.id()));
        let mut path = None;
        let (dispatch, kind) = match subject.who {
            Who::NoSubscriber => (None, Kind::Plain),
            Who::CaptureOff => (None, Kind::Off),
            Who::Ours(which) => {
                let session = if subject.fmt {
                    Session::start_with_layer(&support::config(dir), "bench", our_sinks(which), fmt_layer())
                } else {
                    Session::start(&support::config(dir), "bench", our_sinks(which))
                }
                .expect("start a capture");
                (Some(session.dispatch().clone()), Kind::Ours(session))
            }
            Who::PerfettoFile => {
                let p = file("pftrace");
                let out = File::create(&p).expect("create the trace file");
                let (d, guard) = on_registry!(
                    subject.fmt,
                    tracing_perfetto_file::PerfettoLayer::builder(out).with_debug_annotations().build()
                );
                path = Some(p);
                (Some(d), Kind::PerfettoFile(guard))
            }
            Who::TracingChrome => {
                let p = file("json");
                // Built on the thread that runs the workload: tracing-chrome
                // keeps its sender in a thread-local that the builder resets.
                let (d, guard) = on_registry!(
                    subject.fmt,
                    tracing_chrome::ChromeLayerBuilder::new().file(&p).include_args(true).build()
                );
                path = Some(p);
                (Some(d), Kind::TracingChrome(guard))
            }
            Who::TracingPerfetto => {
                let p = file("pftrace");
                let out = SharedFile(Arc::new(Mutex::new(BufWriter::new(
                    File::create(&p).expect("create the trace file"),
                ))));
                let make = out.clone();
                let (d, ()) = on_registry!(
                    subject.fmt,
                    (tracing_perfetto::PerfettoLayer::new(move || make.clone()), ())
                );
                path = Some(p);
                (Some(d), Kind::TracingPerfetto(out))
            }
        };
        Rig { subject, dispatch, kind, file: path }
    }

    /// Runs `f` on the calling thread inside the capture.
    fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        match (&self.kind, &self.dispatch) {
            (Kind::Off, _) => {
                let capture = Capture::from_config(None);
                let capture = if self.subject.fmt { capture.with_layer(fmt_layer()) } else { capture };
                capture.run("bench", f).expect("capture off never refuses")
            }
            (_, Some(d)) => dispatcher::with_default(d, f),
            (_, None) => f(),
        }
    }

    /// The subject's own flush, on the calling thread.
    fn flush(&self) {
        match &self.kind {
            Kind::Ours(session) => session.flush(),
            Kind::PerfettoFile(guard) => guard.flush().expect("tracing-perfetto-file flushes"),
            Kind::TracingChrome(guard) => guard.flush(),
            Kind::Plain | Kind::Off | Kind::TracingPerfetto(_) => {}
        }
    }

    /// Ends the capture: every file written and closed, every thread joined.
    fn finish(self) -> Finished {
        let Rig { dispatch, kind, file, .. } = self;
        drop(dispatch);
        match kind {
            Kind::Plain | Kind::Off => Finished::Nothing,
            Kind::Ours(session) => Finished::Ours(session.finish()),
            Kind::PerfettoFile(guard) => {
                drop(guard);
                Finished::Peer { path: file.expect("a peer writes a file"), chrome: false }
            }
            Kind::TracingChrome(guard) => {
                drop(guard); // joins its writer thread, which writes the closing bracket
                Finished::Peer { path: file.expect("a peer writes a file"), chrome: true }
            }
            Kind::TracingPerfetto(out) => {
                out.0
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .flush()
                    .expect("flush tracing-perfetto's file");
                Finished::Peer { path: file.expect("a peer writes a file"), chrome: false }
            }
        }
    }
}

/// What a finished capture holds, once checked.
#[derive(Clone, Debug, Default)]
struct Checked {
    /// Bytes per file, by sink or peer.
    files: Vec<(String, u64)>,
    /// Records our capture says it dropped (`Report::dropped_records`);
    /// `None` for the peers, which keep no such count.
    dropped: Option<u64>,
    /// Spans and events made but missing from the trace.
    missing: u64,
}

impl Checked {
    fn bytes(&self) -> u64 {
        self.files.iter().map(|(_, b)| b).sum()
    }
}

/// What a capture should hold: `spans` spans named `SPAN` and `events`
/// events, unless ours says it dropped records.
#[derive(Clone, Copy, Debug)]
struct Expect {
    spans: u64,
    events: u64,
}

/// Checks a finished capture against `expect` and removes its files. With
/// `parse`, every file is read back by an independent parser.
fn check(what: &str, finished: Finished, expect: Expect, parse: bool) -> Checked {
    let mut checked = Checked::default();
    match finished {
        Finished::Nothing => {}
        Finished::Ours(report) => {
            // Dropped records are counted below; a file must be whole regardless.
            assert!(
                report.files.iter().all(|f| f.complete),
                "{what}: incomplete files: {:?}",
                report.warnings()
            );
            checked.dropped = Some(report.dropped_records);
            let exact = report.dropped_records == 0;
            let mut summary = None;
            for f in &report.files {
                checked.files.push((f.sink.clone(), std::fs::metadata(&f.path).map_or(0, |m| m.len())));
                if f.sink == "summary" {
                    let t = Timings::from_path(&f.path).unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(t.dropped_records, report.dropped_records, "{what}: the summary's drops");
                    let n: u64 = t.spans.iter().filter(|s| s.name == SPAN).map(|s| s.count).sum();
                    summary = Some((n, t.events));
                }
            }
            let (n, e) = summary.unwrap_or_else(|| panic!("{what}: no summary"));
            checked.missing = expect.spans + expect.events - n.min(expect.spans) - e.min(expect.events);
            if exact {
                assert_eq!((n, e), (expect.spans, expect.events), "{what}: the summary's counts");
            } else {
                assert!(n <= expect.spans && e <= expect.events, "{what}: more than was made: {n} + {e}");
                assert!(n + e < expect.spans + expect.events, "{what}: records dropped, yet all are there");
            }
            for f in report.files.iter().filter(|_| parse && exact) {
                let bytes = std::fs::read(&f.path).unwrap_or_else(|e| panic!("{what}: {e}"));
                match f.sink.as_str() {
                    "chrome" => {
                        let c =
                            support::chrome_counts(&bytes, SPAN).unwrap_or_else(|e| panic!("{what}: {e}"));
                        assert_eq!((c.spans, c.instants), (expect.spans, expect.events), "{what}: chrome");
                    }
                    "perfetto" => {
                        let c = support::perfetto_counts(&bytes).unwrap_or_else(|e| panic!("{what}: {e}"));
                        // Ours adds a root span around a façade capture's command.
                        assert!(
                            (expect.spans..=expect.spans + 1).contains(&c.slice_begins)
                                && c.slice_ends == c.slice_begins
                                && c.instants == expect.events,
                            "{what}: perfetto holds {c:?}, expected {expect:?}"
                        );
                    }
                    _ => {}
                }
            }
            for f in &report.files {
                let _ = std::fs::remove_file(&f.path);
            }
        }
        Finished::Peer { path, chrome } => {
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{what}: {}: {e}", path.display()));
            checked.files.push(("output".into(), bytes.len() as u64));
            let (spans, events) = if chrome && !parse {
                // One entry per line between the brackets: a begin and an end
                // per span, one per event, and a name for each thread.
                let entries = bytes.iter().filter(|b| **b == b'\n').count() as u64 - 1;
                let made = 2 * expect.spans + expect.events;
                assert!((made..=made + 3).contains(&entries), "{what}: {entries} entries, expected {made}");
                (expect.spans, expect.events)
            } else if chrome {
                let c = support::chrome_counts(&bytes, SPAN).unwrap_or_else(|e| panic!("{what}: {e}"));
                (c.spans, c.instants)
            } else {
                let c = support::perfetto_counts(&bytes).unwrap_or_else(|e| panic!("{what}: {e}"));
                (c.slice_begins, c.instants)
            };
            assert!(spans <= expect.spans && events <= expect.events, "{what}: more than was made");
            checked.missing = expect.spans + expect.events - spans - events;
            let _ = std::fs::remove_file(&path);
        }
    }
    checked
}

/// One run's figures.
#[derive(Clone, Debug)]
struct Sample {
    calling_ns: f64,
    cpu_ns: f64,
    wall_ns: f64,
    checked: Checked,
    /// Peak memory growth, KiB (under load only).
    peak_kib: Option<u64>,
}

/// One run of `w` under a fresh capture of `subject`.
fn measure(subject: Subject, w: Workload, ops: u64, dir: &Path, seq: u64, parse: bool) -> Sample {
    let cpu0 = support::process_cpu_ns();
    let t0 = Instant::now();
    let rig = Rig::start(subject, dir, seq);
    let calling = rig.run(|| match w {
        Workload::NoFlush => spans(0, ops),
        Workload::Flushed => {
            let mut time = Duration::ZERO;
            let mut done = 0;
            while done < ops {
                let n = CHUNK.min(ops - done);
                time += spans(done, n);
                done += n;
                rig.flush();
            }
            time
        }
    });
    let finished = rig.finish();
    let wall = t0.elapsed();
    let cpu = support::process_cpu_ns() - cpu0;
    let what = format!("{} {w:?} {ops}", subject.id());
    let checked = check(&what, finished, Expect { spans: ops, events: 0 }, parse);
    if !matches!(subject.who, Who::Ours(_)) {
        assert_eq!(checked.missing, 0, "{what}: a peer lost spans");
    }
    let per = |ns: f64| ns / ops as f64;
    Sample {
        calling_ns: per(calling.as_nanos() as f64),
        cpu_ns: per(cpu as f64),
        wall_ns: per(wall.as_nanos() as f64),
        checked,
        peak_kib: None,
    }
}

/// The two cases under load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Load {
    /// One thread, `load_spans` spans with two fields.
    Spans,
    /// Two threads, `flood_events` events with two fields between them.
    Flood,
}

impl Load {
    fn id(self) -> &'static str {
        match self {
            Load::Spans => "spans",
            Load::Flood => "flood",
        }
    }

    fn ops(self, p: &Params) -> u64 {
        match self {
            Load::Spans => p.load_spans,
            Load::Flood => p.flood_events / 2 * 2,
        }
    }
}

/// The body of a child process: one case under load, in a default capture,
/// printed as one line of figures for the parent.
fn load_child(load: Load, subject: Subject, dir: &Path, p: &Params) {
    let ops = load.ops(p);
    let rss0 = support::status_kib("VmRSS").unwrap_or(0);
    let cpu0 = support::process_cpu_ns();
    let t0 = Instant::now();
    let body = || match load {
        Load::Spans => spans(0, ops),
        Load::Flood => {
            // Each thread runs under the dispatcher of the thread that starts it.
            let d = dispatcher::get_default(|d| d.clone());
            let times: Vec<Duration> = std::thread::scope(|s| {
                let workers: Vec<_> = (0..2)
                    .map(|_| {
                        let d = d.clone();
                        s.spawn(move || dispatcher::with_default(&d, || events(ops / 2)))
                    })
                    .collect();
                workers.into_iter().map(|w| w.join().expect("a flood thread panicked")).collect()
            });
            // Per event on one thread: both threads' loops, averaged.
            times.iter().sum::<Duration>() / 2
        }
    };
    let (calling, finished) = match subject.who {
        // The façade, as a tool runs it: default sinks, default configuration.
        Who::Ours(_) | Who::CaptureOff => {
            let config = (subject.who != Who::CaptureOff).then(|| support::config(dir));
            let (calling, report) =
                Capture::from_config(config).run_with_report("bench", body).expect("start a capture");
            (calling, report.map_or(Finished::Nothing, Finished::Ours))
        }
        _ => {
            let rig = Rig::start(subject, dir, 0);
            let calling = rig.run(body);
            (calling, rig.finish())
        }
    };
    let wall = t0.elapsed();
    let cpu = support::process_cpu_ns() - cpu0;
    let peak = support::status_kib("VmHWM").unwrap_or(0).saturating_sub(rss0);
    let expect = match load {
        Load::Spans => Expect { spans: ops, events: 0 },
        Load::Flood => Expect { spans: 0, events: ops },
    };
    let what = format!("{} {load:?} {ops}", subject.id());
    let checked = check(&what, finished, expect, false);
    let per_thread_ops = if load == Load::Flood { ops / 2 } else { ops };
    println!(
        "figures {} {} {} {} {} {} {peak}",
        calling.as_nanos() as f64 / per_thread_ops as f64,
        cpu as f64 / ops as f64,
        wall.as_nanos() as f64 / ops as f64,
        checked.bytes(),
        checked.dropped.map_or(-1, |d| d as i64),
        checked.missing,
    );
}

/// Runs one case under load in a child process and reads its figures.
fn load_run(load: Load, subject: Subject, dir: &Path) -> Sample {
    let exe = std::env::current_exe().expect("the benchmark's own path");
    let mut cmd = Command::new(exe);
    cmd.args(["--load-child", load.id(), &subject.id()]).arg(dir);
    if Params::from_env().full {
        cmd.arg("--bench");
    }
    let out = cmd.output().expect("start a child process");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} under load {load:?} failed: {}\n{stdout}",
        subject.id(),
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().find_map(|l| l.strip_prefix("figures ")).expect("the child's figures");
    let v: Vec<f64> = line.split(' ').map(|x| x.parse().expect("a number")).collect();
    Sample {
        calling_ns: v[0],
        cpu_ns: v[1],
        wall_ns: v[2],
        checked: Checked {
            files: vec![("all".into(), v[3] as u64)],
            dropped: (v[4] >= 0.0).then_some(v[4] as u64),
            missing: v[5] as u64,
        },
        peak_kib: Some(v[6] as u64),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let p = Params::from_env();
    if let Some(i) = args.iter().position(|a| a == "--load-child") {
        let load = if args[i + 1] == "flood" { Load::Flood } else { Load::Spans };
        let subject = Subject::parse(&args[i + 2]).expect("a known subject");
        load_child(load, subject, Path::new(&args[i + 3]), &p);
        return;
    }
    let dir = Scratch::new("whole");
    let started = Instant::now();
    let workloads = [Workload::Flushed, Workload::NoFlush];

    // Round 0 checks every file with a parser and is not counted.
    let mut samples: Vec<(Subject, Workload, Sample)> = Vec::new();
    let mut seq = 0;
    for round in 0..=p.rounds {
        eprintln!("whole: round {round} of {} ({:.0} s)", p.rounds, started.elapsed().as_secs_f64());
        for w in workloads {
            for k in 0..SUBJECTS.len() {
                let subject = SUBJECTS[(k + round) % SUBJECTS.len()];
                seq += 1;
                let sample = measure(subject, w, p.ops, dir.path(), seq, round == 0);
                if round > 0 || p.rounds == 0 {
                    samples.push((subject, w, sample));
                }
            }
        }
    }
    let mut loads: Vec<(Subject, Load, Sample)> = Vec::new();
    for round in 0..p.load_rounds {
        eprintln!(
            "whole: under load, round {} of {} ({:.0} s)",
            round + 1,
            p.load_rounds,
            started.elapsed().as_secs_f64()
        );
        for load in [Load::Spans, Load::Flood] {
            for k in 0..LOAD_SUBJECTS.len() {
                let subject = LOAD_SUBJECTS[(k + round) % LOAD_SUBJECTS.len()];
                loads.push((subject, load, load_run(load, subject, dir.path())));
            }
        }
    }
    let elapsed = started.elapsed();
    if p.full {
        report(&p, &samples, &loads, elapsed);
    } else {
        eprintln!(
            "whole: checks passed in {:.1} s (sizes for `cargo bench` are larger)",
            elapsed.as_secs_f64()
        );
    }
}

/// One figure of every sample of one set-up and workload.
fn values<K: PartialEq + Copy>(
    all: &[(Subject, K, Sample)],
    s: Subject,
    k: K,
    f: impl Fn(&Sample) -> f64,
) -> Vec<f64> {
    all.iter().filter(|(a, b, _)| *a == s && *b == k).map(|(_, _, x)| f(x)).collect()
}

/// The median of one figure over the samples of one set-up.
fn med<K: PartialEq + Copy>(
    all: &[(Subject, K, Sample)],
    s: Subject,
    k: K,
    f: impl Fn(&Sample) -> f64,
) -> f64 {
    median(&values(all, s, k, f))
}

/// The range of one figure over the samples of one set-up.
fn spread_of<K: PartialEq + Copy>(
    all: &[(Subject, K, Sample)],
    s: Subject,
    k: K,
    f: impl Fn(&Sample) -> f64,
) -> String {
    support::spread(&values(all, s, k, f))
}

/// A target of issue #14 that is a ratio of two set-ups' medians.
struct Target {
    label: &'static str,
    a: Subject,
    b: Subject,
    figure: fn(&Sample) -> f64,
    at_most: f64,
}

/// The median of `Report::dropped_records` with its range, or `-` for a set-up
/// that keeps no such count.
fn dropped_cell<K: PartialEq + Copy>(all: &[(Subject, K, Sample)], s: Subject, k: K) -> String {
    let xs: Vec<f64> = all
        .iter()
        .filter(|(a, b, _)| *a == s && *b == k)
        .filter_map(|(_, _, x)| x.checked.dropped.map(|d| d as f64))
        .collect();
    if xs.is_empty() {
        "-".into()
    } else {
        format!("{} ({})", num(median(&xs)), support::spread(&xs))
    }
}

fn report(
    p: &Params,
    samples: &[(Subject, Workload, Sample)],
    loads: &[(Subject, Load, Sample)],
    took: Duration,
) {
    support::print_machine();
    println!(
        "`cargo bench -p cabin-trace-benches --bench whole`: {} rounds of {} spans per set-up and workload, \
         {} rounds under load; {:.0} s in all",
        p.rounds,
        num(p.ops as f64),
        p.load_rounds,
        took.as_secs_f64()
    );
    let tpf = |fmt| s(Who::PerfettoFile, fmt);
    for w in [Workload::Flushed, Workload::NoFlush] {
        let m = |s: Subject, f: fn(&Sample) -> f64| med(samples, s, w, f);
        let rows: Vec<Vec<String>> = SUBJECTS
            .iter()
            .map(|&s| {
                let files = samples
                    .iter()
                    .find(|(a, b, _)| *a == s && *b == w)
                    .map(|(_, _, x)| &x.checked.files)
                    .filter(|f| f.len() > 1)
                    .map(|f| {
                        f.iter()
                            .map(|(n, b)| format!("{n} {}", num(*b as f64 / p.ops as f64)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default();
                vec![
                    s.label(),
                    num(m(s, |x| x.calling_ns)),
                    num(m(s, |x| x.cpu_ns)),
                    spread_of(samples, s, w, |x| x.cpu_ns),
                    num(m(s, |x| x.wall_ns)),
                    if matches!(s.who, Who::NoSubscriber | Who::CaptureOff) {
                        "-".into()
                    } else {
                        support::ratio(Some(m(s, |x| x.cpu_ns)), Some(m(tpf(s.fmt), |x| x.cpu_ns)))
                    },
                    num(m(s, |x| x.checked.bytes() as f64) / p.ops as f64),
                    if files.is_empty() { "-".into() } else { files },
                    dropped_cell(samples, s, w),
                    num(m(s, |x| x.checked.missing as f64)),
                ]
            })
            .collect();
        support::print_table(
            &format!(
                "{}: per span, medians of {} rounds of {} spans (total CPU and wall from capture start to finish)",
                w.label(),
                p.rounds,
                num(p.ops as f64)
            ),
            &[
                "set-up",
                "calling thread ns",
                "total CPU ns",
                "total CPU range",
                "wall ns",
                "total CPU / TPF, same set-up",
                "bytes",
                "bytes by file",
                "records dropped",
                "spans missing",
            ],
            &rows,
        );
    }

    // The targets that are ratios of this run's medians.
    let ours = s(Who::Ours(Sinks::Default), false);
    let cpu = |x: &Sample| x.cpu_ns;
    let calling = |x: &Sample| x.calling_ns;
    let targets = [
        Target { label: "total CPU, default sinks / TPF", a: ours, b: tpf(false), figure: cpu, at_most: 0.8 },
        Target {
            label: "total CPU, Perfetto + summary / TPF",
            a: s(Who::Ours(Sinks::Perfetto), false),
            b: tpf(false),
            figure: cpu,
            at_most: 0.5,
        },
        Target {
            label: "total CPU, cabin's set-up / TPF in it",
            a: s(Who::Ours(Sinks::Default), true),
            b: tpf(true),
            figure: cpu,
            at_most: 0.8,
        },
        Target {
            label: "calling thread, default sinks / TPF",
            a: ours,
            b: tpf(false),
            figure: calling,
            at_most: 0.3,
        },
        Target {
            label: "calling thread, capture off / no subscriber",
            a: s(Who::CaptureOff, false),
            b: s(Who::NoSubscriber, false),
            figure: calling,
            at_most: 1.05,
        },
    ];
    let rows: Vec<Vec<String>> = targets
        .iter()
        .map(|t| {
            let mut row = vec![t.label.to_string(), format!("<= {}x", t.at_most)];
            for w in [Workload::Flushed, Workload::NoFlush] {
                let r = med(samples, t.a, w, t.figure) / med(samples, t.b, w, t.figure);
                let verdict = if r <= t.at_most {
                    "met".to_string()
                } else {
                    format!("missed by {:.0}%", 100.0 * (r / t.at_most - 1.0))
                };
                row.push(format!("{r:.2}x ({verdict})"));
            }
            row
        })
        .collect();
    support::print_table(
        "Targets (#14) from the medians above",
        &["ratio", "target", Workload::Flushed.label(), Workload::NoFlush.label()],
        &rows,
    );

    for load in [Load::Spans, Load::Flood] {
        let ops = load.ops(p);
        let rows: Vec<Vec<String>> = LOAD_SUBJECTS
            .iter()
            .map(|&s| {
                let missing = med(loads, s, load, |x| x.checked.missing as f64);
                vec![
                    s.label(),
                    num(med(loads, s, load, |x| x.calling_ns)),
                    num(med(loads, s, load, |x| x.cpu_ns)),
                    num(med(loads, s, load, |x| x.wall_ns)),
                    num(med(loads, s, load, |x| x.checked.bytes() as f64) / ops as f64),
                    dropped_cell(loads, s, load),
                    format!(
                        "{} ({:.1}%; {})",
                        num(missing),
                        100.0 * missing / ops as f64,
                        spread_of(loads, s, load, |x| x.checked.missing as f64)
                    ),
                    format!(
                        "{} ({})",
                        num(med(loads, s, load, |x| x.peak_kib.unwrap_or(0) as f64) / 1024.0),
                        spread_of(loads, s, load, |x| x.peak_kib.unwrap_or(0) as f64 / 1024.0)
                    ),
                ]
            })
            .collect();
        let title = match load {
            Load::Spans => format!(
                "Under load: one thread, {} spans with two fields, no flush, default configuration \
                 (medians of {} runs, each in a child process)",
                num(ops as f64),
                p.load_rounds
            ),
            Load::Flood => format!(
                "Under load: two threads, {} events with two fields between them, no flush, default \
                 configuration (medians of {} runs, each in a child process; calling thread = per event on one thread)",
                num(ops as f64),
                p.load_rounds
            ),
        };
        support::print_table(
            &title,
            &[
                "set-up",
                "calling thread ns/op",
                "total CPU ns/op",
                "wall ns/op",
                "bytes/op",
                "records dropped",
                "missing from the trace (share; range)",
                "peak memory growth MiB (range)",
            ],
            &rows,
        );
    }
}
