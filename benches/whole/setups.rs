//! The set-ups the whole-cost benchmark measures: ours and the peers, with
//! and without a tool's log layer, each started, run, finished and checked.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tracing::dispatcher::{self, Dispatch};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{Layer, Registry};

use cabin_trace::{Capture, Report, Session, Sink, Timings};

use crate::support;
use crate::SPAN;

/// Our sink sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sinks {
    /// Chrome, Perfetto and the summary: a tool's default.
    Default,
    /// The default sinks with `<P>_TRACE_CPU=off` and `<P>_TRACE_SAMPLE=off`:
    /// no thread CPU clock read per span, no sampler thread; the difference
    /// from `Default` is what the two cost.
    DefaultNoCounters,
    Perfetto,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
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
pub struct Subject {
    pub who: Who,
    pub fmt: bool,
}

pub const fn s(who: Who, fmt: bool) -> Subject {
    Subject { who, fmt }
}

pub const SUBJECTS: [Subject; 12] = [
    s(Who::NoSubscriber, false),
    s(Who::CaptureOff, false),
    s(Who::Ours(Sinks::Default), false),
    s(Who::Ours(Sinks::DefaultNoCounters), false),
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
pub const LOAD_SUBJECTS: [Subject; 5] = [
    s(Who::NoSubscriber, false),
    s(Who::CaptureOff, false),
    // Run through the façade's default capture with CPU time and samples off (whole.rs).
    s(Who::Ours(Sinks::DefaultNoCounters), false),
    s(Who::PerfettoFile, false),
    s(Who::TracingChrome, false),
];

impl Subject {
    pub fn id(self) -> String {
        let who = match self.who {
            Who::NoSubscriber => "no_subscriber",
            Who::CaptureOff => "capture_off",
            Who::Ours(Sinks::Default) => "ours_default",
            Who::Ours(Sinks::DefaultNoCounters) => "ours_default_cpu_off_sample_off",
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

    pub fn parse(id: &str) -> Option<Subject> {
        SUBJECTS.into_iter().find(|s| s.id() == id)
    }

    pub fn label(self) -> String {
        let who = match (self.who, self.fmt) {
            (Who::NoSubscriber, _) => "no subscriber",
            (Who::CaptureOff, false) => "our capture, off",
            (Who::CaptureOff, true) => "our capture, off: the fmt layer alone",
            (Who::Ours(Sinks::Default), false) => {
                "ours, default (Chrome + Perfetto + summary; CPU time for info spans, samples every 10 ms)"
            }
            (Who::Ours(Sinks::Default), true) => "ours, default sinks, CPU off, sample off",
            (Who::Ours(Sinks::DefaultNoCounters), _) => "ours, default sinks, CPU off, sample off",
            (Who::Ours(Sinks::Perfetto), _) => "ours, Perfetto + summary, CPU off, sample off",
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
pub fn fmt_layer() -> impl Layer<Registry> + Send + Sync + 'static {
    tracing_subscriber::fmt::layer().with_writer(io::sink).with_filter(LevelFilter::WARN)
}

pub fn our_sinks(which: Sinks) -> Vec<Box<dyn Sink>> {
    let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
    if which != Sinks::Perfetto {
        sinks.push(Box::new(trace_sink_chrome::ChromeSink::new()));
    }
    sinks.push(Box::new(trace_sink_perfetto::PerfettoSink::new()));
    sinks.push(Box::new(trace_summary::SummarySink::new()));
    sinks
}

/// A file shared by every writer tracing-perfetto makes.
#[derive(Clone)]
pub struct SharedFile(Arc<Mutex<BufWriter<File>>>);

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

pub enum Kind {
    Plain,
    Off,
    Ours(Box<Session>),
    PerfettoFile(tracing_perfetto_file::FlushGuard),
    TracingChrome(tracing_chrome::FlushGuard),
    TracingPerfetto(SharedFile),
}

/// One fresh capture of a subject, started.
pub struct Rig {
    subject: Subject,
    dispatch: Option<Dispatch>,
    kind: Kind,
    /// The peer's output file.
    file: Option<PathBuf>,
}

/// A finished capture, before its checks.
pub enum Finished {
    Nothing,
    Ours(Report),
    /// A peer's file, and whether it is Chrome JSON (else Perfetto).
    Peer {
        path: PathBuf,
        chrome: bool,
    },
}

impl Rig {
    pub fn start(subject: Subject, dir: &Path, seq: u64) -> Rig {
        let file = |suffix: &str| dir.join(format!("{}-{seq}.{suffix}", subject.id()));
        let mut path = None;
        let (dispatch, kind) = match subject.who {
            Who::NoSubscriber => (None, Kind::Plain),
            Who::CaptureOff => (None, Kind::Off),
            Who::Ours(which) => {
                let mut config = support::config(dir);
                // Like for like with the peers, which record no CPU time and no
                // samples: every set-up of ours but the default itself.
                if which != Sinks::Default || subject.fmt {
                    config = config.with_cpu(LevelFilter::OFF).with_sample(None);
                }
                let session = if subject.fmt {
                    // As `Capture::with_layer` runs it: the capture's own
                    // subscriber forwarding to a registry with the tool's layer.
                    let tool = tracing::Dispatch::new(Registry::default().with(fmt_layer()));
                    Session::start_forwarding(&config, "bench", our_sinks(which), Some(tool))
                } else {
                    Session::start(&config, "bench", our_sinks(which))
                }
                .expect("start a capture");
                (Some(session.dispatch().clone()), Kind::Ours(Box::new(session)))
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
    pub fn run<T>(&self, f: impl FnOnce() -> T) -> T {
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
    pub fn flush(&self) {
        match &self.kind {
            Kind::Ours(session) => session.flush(),
            Kind::PerfettoFile(guard) => guard.flush().expect("tracing-perfetto-file flushes"),
            Kind::TracingChrome(guard) => guard.flush(),
            Kind::Plain | Kind::Off | Kind::TracingPerfetto(_) => {}
        }
    }

    /// Ends the capture: every file written and closed, every thread joined.
    pub fn finish(self) -> Finished {
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
pub struct Checked {
    /// Bytes per file, by sink or peer.
    pub files: Vec<(String, u64)>,
    /// Records our capture says it dropped (`Report::dropped_records`);
    /// `None` for the peers, which keep no such count.
    pub dropped: Option<u64>,
    /// Spans and events made but missing from the trace.
    pub missing: u64,
}

impl Checked {
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|(_, b)| b).sum()
    }
}

/// What a capture should hold: `spans` spans named `SPAN` and `events`
/// events, unless ours says it dropped records.
#[derive(Clone, Copy, Debug)]
pub struct Expect {
    pub spans: u64,
    pub events: u64,
}

/// Checks a finished capture against `expect` and removes its files. With
/// `parse`, every file is read back by an independent parser.
pub fn check(what: &str, finished: Finished, expect: Expect, parse: bool) -> Checked {
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
                        // Ours adds a root span around a façade capture's command,
                        // and the family's instant on the process track.
                        assert!(
                            (expect.spans..=expect.spans + 1).contains(&c.slice_begins)
                                && c.slice_ends == c.slice_begins
                                && c.instants == expect.events + 1,
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
