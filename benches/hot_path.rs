//! The cost of a span or an event on the thread that makes it, with our
//! capture and with its peers, in one harness and one run.
//!
//! ```text
//! cargo bench -p cabin-trace-benches --bench hot_path               # everything, then the tables
//! cargo bench -p cabin-trace-benches --bench hot_path -- 'span/'    # one workload
//! cargo bench -p cabin-trace-benches --bench hot_path -- --test     # only the checks, once each
//! ```
//!
//! Every row is a subscriber set-up (`Subject`), every column a workload
//! (`Workload`). What is timed is the calling thread's loop, in chunks of at
//! most `CHUNK` operations; between chunks, outside the timed region, each
//! subject's own flush runs and the writer threads catch up, so a writer that
//! falls behind never makes a subject drop records (ours would drop and count
//! them; tracing-chrome's channel would grow without bound). Each sample runs
//! in a fresh capture, which is finished and checked after the sample: the
//! exact span and event counts for ours (from the summary) and no dropped
//! record; the number of entries for tracing-chrome. Before a benchmark is
//! timed, a fresh capture of `CHECKED_OPS` operations is parsed by an
//! independent reader (Chrome JSON, Perfetto wire format) and must hold exactly
//! those operations: a fast wrong answer fails the run.
//!
//! The "registry, no layer" row is `tracing_subscriber::Registry` alone: the
//! floor of every set-up that is a layer on it (the peers, and ours when a tool
//! composes a layer of its own: "as a layer"). Ours by default is a subscriber
//! of its own and does not sit on the registry.
//!
//! This measures the hot path only. Ours and tracing-chrome encode on a writer
//! thread of their own (its CPU time per operation is printed beside the
//! check); tracing-perfetto-file and tracing-perfetto encode on the calling
//! thread, so their times include the encoding.

use std::hint::black_box;
use std::path::Path;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use tracing::dispatcher::{self, Dispatch};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Registry;

use cabin_trace::{Capture, Session, Sink, Timings};

mod support;

use support::{Counts, Scratch};

/// Operations per timed chunk; the capture is flushed between chunks.
const CHUNK: u64 = 10_000;
/// Untimed operations at the start of each fresh capture (per thread), so that
/// registering the thread and the first buffers are not in a sample.
const WARM: u64 = 1_000;
/// Operations in the capture that is parsed before a benchmark is timed.
const CHECKED_OPS: u64 = 10_000;
/// Threads of the multi-threaded workload.
const THREADS: u64 = 4;
/// The name of every span the workloads make.
const SPAN: &str = "bench_span";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Workload {
    /// `info_span!("bench_span")`: created, entered, exited, closed.
    Span,
    /// The same with two integer fields.
    SpanFields,
    /// `info!("bench event")`: an event with its message.
    Event,
    /// The same with two integer fields besides the message.
    EventFields,
    /// `Span` on four threads at once; one iteration is one span per thread.
    Threads,
}

const WORKLOADS: [Workload; 5] =
    [Workload::Span, Workload::SpanFields, Workload::Event, Workload::EventFields, Workload::Threads];

impl Workload {
    fn id(self) -> &'static str {
        match self {
            Workload::Span => "span",
            Workload::SpanFields => "span_2_fields",
            Workload::Event => "event",
            Workload::EventFields => "event_2_fields",
            Workload::Threads => "span_4_threads",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Workload::Span => "span",
            Workload::SpanFields => "span + 2 fields",
            Workload::Event => "event",
            Workload::EventFields => "event + 2 fields",
            Workload::Threads => "span, 4 threads",
        }
    }

    fn threads(self) -> u64 {
        if self == Workload::Threads {
            THREADS
        } else {
            1
        }
    }

    fn has_fields(self) -> bool {
        matches!(self, Workload::SpanFields | Workload::EventFields)
    }

    /// Runs `n` operations on the calling thread.
    #[inline(never)]
    fn run(self, n: u64) {
        match self {
            Workload::Span | Workload::Threads => {
                for _ in 0..n {
                    drop(tracing::info_span!("bench_span").entered());
                }
            }
            Workload::SpanFields => {
                for i in 0..n {
                    drop(tracing::info_span!("bench_span", a = black_box(i), b = 7u64).entered());
                }
            }
            Workload::Event => {
                for _ in 0..n {
                    tracing::info!("bench event");
                }
            }
            Workload::EventFields => {
                for i in 0..n {
                    tracing::info!(a = black_box(i), b = 7u64, "bench event");
                }
            }
        }
    }

    /// What a capture of `ops_per_thread` operations on each thread holds.
    fn expect(self, ops_per_thread: u64) -> Expect {
        let ops = ops_per_thread * self.threads();
        match self {
            Workload::Event | Workload::EventFields => Expect { spans: 0, events: ops, threads: 1 },
            _ => Expect { spans: ops, events: 0, threads: self.threads() },
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Expect {
    spans: u64,
    events: u64,
    threads: u64,
}

impl Expect {
    fn ops(&self) -> u64 {
        self.spans + self.events
    }
}

/// Our capture's sink sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ours {
    Chrome,
    Perfetto,
    /// Chrome, Perfetto and the summary: what a tool gets by default.
    All,
    /// The default sinks with a tool's own layer composed in
    /// (`Session::start_with_layer`, here `Identity`): the registry and our
    /// layer on it, instead of our own subscriber.
    Layered,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Subject {
    NoSubscriber,
    CaptureOff,
    Registry,
    Ours(Ours),
    TracingChrome { args: bool },
    PerfettoFile { thread_tracks: bool, annotations: bool },
    TracingPerfetto,
}

const SUBJECTS: [Subject; 13] = [
    Subject::NoSubscriber,
    Subject::CaptureOff,
    Subject::Registry,
    Subject::Ours(Ours::Chrome),
    Subject::Ours(Ours::Perfetto),
    Subject::Ours(Ours::All),
    Subject::Ours(Ours::Layered),
    Subject::TracingChrome { args: false },
    Subject::TracingChrome { args: true },
    Subject::PerfettoFile { thread_tracks: false, annotations: false },
    Subject::PerfettoFile { thread_tracks: true, annotations: false },
    Subject::PerfettoFile { thread_tracks: false, annotations: true },
    Subject::TracingPerfetto,
];

impl Subject {
    fn id(self) -> &'static str {
        match self {
            Subject::NoSubscriber => "no_subscriber",
            Subject::CaptureOff => "capture_off",
            Subject::Registry => "registry",
            Subject::Ours(Ours::Chrome) => "ours_chrome",
            Subject::Ours(Ours::Perfetto) => "ours_perfetto",
            Subject::Ours(Ours::All) => "ours_all",
            Subject::Ours(Ours::Layered) => "ours_layered",
            Subject::TracingChrome { args: false } => "tracing_chrome",
            Subject::TracingChrome { args: true } => "tracing_chrome_args",
            Subject::PerfettoFile { thread_tracks: false, annotations: false } => "perfetto_file",
            Subject::PerfettoFile { thread_tracks: true, .. } => "perfetto_file_thread_tracks",
            Subject::PerfettoFile { annotations: true, .. } => "perfetto_file_annotations",
            Subject::TracingPerfetto => "tracing_perfetto",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Subject::NoSubscriber => "no subscriber",
            Subject::CaptureOff => "our capture, off",
            Subject::Registry => "registry, no layer",
            Subject::Ours(Ours::Chrome) => "ours: Chrome + summary",
            Subject::Ours(Ours::Perfetto) => "ours: Perfetto + summary",
            Subject::Ours(Ours::All) => "ours: Chrome + Perfetto + summary (default)",
            Subject::Ours(Ours::Layered) => "ours, default sinks, as a layer (with a tool's layer)",
            Subject::TracingChrome { args: false } => "tracing-chrome 0.7.2",
            Subject::TracingChrome { args: true } => "tracing-chrome 0.7.2, include_args",
            Subject::PerfettoFile { thread_tracks: false, annotations: false } => {
                "tracing-perfetto-file 0.1.1 (SpanTracks)"
            }
            Subject::PerfettoFile { thread_tracks: true, .. } => "tracing-perfetto-file 0.1.1, ThreadTracks",
            Subject::PerfettoFile { annotations: true, .. } => {
                "tracing-perfetto-file 0.1.1, debug annotations"
            }
            Subject::TracingPerfetto => "tracing-perfetto 0.1.5",
        }
    }

    /// The variants that record fields are measured only where there are fields.
    fn applies_to(self, w: Workload) -> bool {
        match self {
            Subject::TracingChrome { args: true } | Subject::PerfettoFile { annotations: true, .. } => {
                w.has_fields()
            }
            _ => true,
        }
    }
}

/// How a thread runs inside a subject's capture.
#[derive(Clone)]
enum Scope {
    None,
    Off,
    Dispatch(Dispatch),
}

impl Scope {
    fn run(&self, f: &mut dyn FnMut()) {
        match self {
            Scope::None => f(),
            Scope::Off => Capture::from_config(None).run("bench", f).expect("capture off never refuses"),
            Scope::Dispatch(d) => dispatcher::with_default(d, f),
        }
    }
}

enum Kind {
    Plain,
    Ours(Session),
    TracingChrome { guard: tracing_chrome::FlushGuard, out: Counts },
    PerfettoFile { guard: tracing_perfetto_file::FlushGuard, out: Counts },
    TracingPerfetto { out: Counts },
}

/// One fresh capture of a subject.
struct Rig {
    subject: Subject,
    scope: Scope,
    kind: Kind,
    /// Threads the capture started (its writer), for their CPU time.
    helpers: Vec<u64>,
}

/// What a finished capture wrote, after its checks passed.
#[derive(Debug, Default)]
struct Outcome {
    /// Output bytes, per output (file name or `output`).
    bytes: Vec<(String, u64)>,
}

fn sinks(which: Ours) -> Vec<Box<dyn Sink>> {
    let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
    if matches!(which, Ours::Chrome | Ours::All | Ours::Layered) {
        sinks.push(Box::new(trace_sink_chrome::ChromeSink::new()));
    }
    if matches!(which, Ours::Perfetto | Ours::All | Ours::Layered) {
        sinks.push(Box::new(trace_sink_perfetto::PerfettoSink::new()));
    }
    sinks.push(Box::new(trace_summary::SummarySink::new()));
    sinks
}

impl Rig {
    /// A fresh capture; `keep` keeps the peers' output for a parsing check.
    fn new(subject: Subject, dir: &Path, keep: bool) -> Rig {
        let before = support::thread_ids();
        let counts = || if keep { Counts::keeping() } else { Counts::new() };
        let (scope, kind) = match subject {
            Subject::NoSubscriber => (Scope::None, Kind::Plain),
            Subject::CaptureOff => (Scope::Off, Kind::Plain),
            Subject::Registry => (Scope::Dispatch(Dispatch::new(Registry::default())), Kind::Plain),
            Subject::Ours(which) => {
                let session = match which {
                    Ours::Layered => Session::start_with_layer(
                        &support::config(dir),
                        "bench",
                        sinks(which),
                        tracing_subscriber::layer::Identity::new(),
                    ),
                    _ => Session::start(&support::config(dir), "bench", sinks(which)),
                }
                .expect("start a capture");
                // The writer thread starts with the first batch; start it now,
                // so that it is among the threads whose CPU time is counted.
                session.flush();
                (Scope::Dispatch(session.dispatch().clone()), Kind::Ours(session))
            }
            Subject::TracingChrome { args } => {
                let out = counts();
                // Built on the thread that runs the workload: tracing-chrome keeps
                // its sender in a thread-local that the builder resets.
                let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
                    .writer(out.writer(true))
                    .include_args(args)
                    .build();
                (
                    Scope::Dispatch(Dispatch::new(Registry::default().with(layer))),
                    Kind::TracingChrome { guard, out },
                )
            }
            Subject::PerfettoFile { thread_tracks, annotations } => {
                let out = counts();
                let mut builder = tracing_perfetto_file::PerfettoLayer::builder(out.writer(false));
                if thread_tracks {
                    builder = builder.span_mode(tracing_perfetto_file::SpanMode::ThreadTracks);
                }
                if annotations {
                    builder = builder.with_debug_annotations();
                }
                let (layer, guard) = builder.build();
                (
                    Scope::Dispatch(Dispatch::new(Registry::default().with(layer))),
                    Kind::PerfettoFile { guard, out },
                )
            }
            Subject::TracingPerfetto => {
                let out = counts();
                let make = out.clone();
                let layer = tracing_perfetto::PerfettoLayer::new(move || make.writer(false));
                (
                    Scope::Dispatch(Dispatch::new(Registry::default().with(layer))),
                    Kind::TracingPerfetto { out },
                )
            }
        };
        let helpers = support::thread_ids().into_iter().filter(|t| !before.contains(t)).collect();
        Rig { subject, scope, kind, helpers }
    }

    /// The subject's own flush, and for a writer thread, waiting until it has
    /// caught up with everything sent so far.
    fn flush(&self) {
        match &self.kind {
            Kind::Plain | Kind::TracingPerfetto { .. } => {}
            Kind::Ours(session) => session.flush(),
            Kind::TracingChrome { guard, out } => {
                // Its writer thread flushes its buffer when it reaches the flush
                // message, after everything sent before it.
                let seen = out.flushes();
                guard.flush();
                let deadline = Instant::now() + Duration::from_secs(60);
                while out.flushes() == seen {
                    assert!(Instant::now() < deadline, "tracing-chrome's writer did not catch up in 60 s");
                    std::thread::yield_now();
                }
            }
            Kind::PerfettoFile { guard, .. } => guard.flush().expect("tracing-perfetto-file flushes"),
        }
    }

    /// CPU time the capture's own threads have used so far, in nanoseconds.
    fn helper_cpu_ns(&self) -> u64 {
        self.helpers.iter().filter_map(|t| support::thread_cpu_ns(*t)).sum()
    }

    /// Finishes the capture and checks that it holds `expect`. With `parse`,
    /// the trace files (or the peer's kept output) are read back and counted.
    fn finish(self, expect: Expect, parse: bool) -> Outcome {
        let what = format!("{} {:?}", self.subject.id(), expect);
        let mut outcome = Outcome::default();
        match self.kind {
            Kind::Plain => {}
            Kind::Ours(session) => {
                let report = session.finish();
                assert_eq!(report.dropped_records, 0, "{what}: the writer fell behind and dropped records");
                assert!(report.is_complete(), "{what}: incomplete capture: {:?}", report.warnings());
                for f in &report.files {
                    let bytes = std::fs::metadata(&f.path).map_or(0, |m| m.len());
                    outcome.bytes.push((f.sink.clone(), bytes));
                    match f.sink.as_str() {
                        "summary" => {
                            let t = Timings::from_path(&f.path).expect("read the summary");
                            let spans: u64 = t.spans.iter().filter(|s| s.name == SPAN).map(|s| s.count).sum();
                            assert_eq!((spans, t.events), (expect.spans, expect.events), "{what}: summary");
                            assert_eq!(t.dropped_records, 0, "{what}: summary says records were dropped");
                        }
                        "chrome" if parse => {
                            let c = support::chrome_counts(&std::fs::read(&f.path).unwrap(), SPAN)
                                .unwrap_or_else(|e| panic!("{what}: {}: {e}", f.path.display()));
                            assert_eq!(
                                (c.spans, c.instants),
                                (expect.spans, expect.events),
                                "{what}: chrome"
                            );
                        }
                        "perfetto" if parse => {
                            let c = support::perfetto_counts(&std::fs::read(&f.path).unwrap())
                                .unwrap_or_else(|e| panic!("{what}: {}: {e}", f.path.display()));
                            // The family marker is an instant of its own.
                            assert_eq!(
                                (c.slice_begins, c.slice_ends, c.instants),
                                (expect.spans, expect.spans, expect.events + 1),
                                "{what}: perfetto"
                            );
                        }
                        _ => {}
                    }
                    let _ = std::fs::remove_file(&f.path);
                }
            }
            Kind::TracingChrome { guard, out } => {
                drop(guard); // joins its writer thread, which writes the closing bracket
                outcome.bytes.push(("output".into(), out.bytes()));
                // One entry per line; the first and last lines are the brackets.
                // Each thread new to tracing-chrome's thread-locals adds a name entry.
                let entries = out.newlines().saturating_sub(1);
                let wanted = 2 * expect.spans + expect.events;
                assert!(
                    (wanted..=wanted + expect.threads).contains(&entries),
                    "{what}: tracing-chrome wrote {entries} entries, expected {wanted} (+ thread names)"
                );
                if parse {
                    let c =
                        support::chrome_counts(&out.kept(), SPAN).unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!((c.spans, c.instants), (expect.spans, expect.events), "{what}: parsed");
                }
            }
            Kind::PerfettoFile { guard, out } => {
                drop(guard);
                outcome.bytes.push(("output".into(), out.bytes()));
                assert!(out.bytes() >= 2 * expect.ops(), "{what}: only {} bytes written", out.bytes());
                if parse {
                    let c = support::perfetto_counts(&out.kept()).unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!((c.slice_begins, c.instants), (expect.spans, expect.events), "{what}: parsed");
                }
            }
            Kind::TracingPerfetto { out } => {
                // It writes each span when it closes and each event at once: nothing to flush.
                outcome.bytes.push(("output".into(), out.bytes()));
                assert!(out.bytes() >= 2 * expect.ops(), "{what}: only {} bytes written", out.bytes());
                if parse {
                    let c = support::perfetto_counts(&out.kept()).unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(
                        (c.slice_begins, c.slice_ends, c.instants),
                        (expect.spans, expect.spans, expect.events),
                        "{what}: parsed"
                    );
                }
            }
        }
        outcome
    }
}

/// `total` split into chunks of at most `chunk`.
fn chunks(total: u64, chunk: u64) -> impl Iterator<Item = u64> {
    (0..total.div_ceil(chunk)).map(move |i| chunk.min(total - i * chunk))
}

/// Runs `iters` iterations of `w` in `rig` (after the untimed warm-up) and
/// returns the time the calling threads spent in them, flushes excluded.
fn timed(rig: &Rig, w: Workload, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    if w.threads() == 1 {
        rig.scope.run(&mut || {
            w.run(WARM);
            rig.flush();
            for n in chunks(iters, CHUNK) {
                let start = Instant::now();
                w.run(n);
                total += start.elapsed();
                rig.flush();
            }
        });
        return total;
    }
    // Every thread runs each chunk between two barriers; the main thread
    // times from releasing the first to passing the second, then flushes while
    // the workers wait.
    let per_chunk = CHUNK / w.threads();
    let go = Barrier::new(w.threads() as usize + 1);
    let done = Barrier::new(w.threads() as usize + 1);
    std::thread::scope(|s| {
        for t in 0..w.threads() {
            let scope = rig.scope.clone();
            let (go, done) = (&go, &done);
            std::thread::Builder::new()
                .name(format!("bench-{t}"))
                .spawn_scoped(s, move || {
                    scope.run(&mut || {
                        w.run(WARM);
                        go.wait();
                        for n in chunks(iters, per_chunk) {
                            go.wait();
                            w.run(n);
                            done.wait();
                        }
                    })
                })
                .expect("spawn a benchmark thread");
        }
        go.wait();
        rig.flush();
        for _ in chunks(iters, per_chunk) {
            let start = Instant::now();
            go.wait();
            done.wait();
            total += start.elapsed();
            rig.flush();
        }
    });
    total
}

/// Figures from the check of one benchmark.
struct Checked {
    /// Output bytes per operation, per output.
    bytes_per_op: Vec<(String, f64)>,
    /// CPU time of the capture's own threads per operation, in nanoseconds.
    helper_cpu_per_op: Option<f64>,
}

/// The check that runs before a benchmark is timed: a fresh capture of
/// `CHECKED_OPS` operations, read back by an independent parser.
fn check(subject: Subject, w: Workload, dir: &Path) -> Checked {
    let rig = Rig::new(subject, dir, true);
    let per_thread = CHECKED_OPS / w.threads();
    // `timed` adds the warm-up operations; the check counts them too.
    let _ = timed(&rig, w, per_thread);
    let ops = (per_thread + WARM) * w.threads();
    let helper_cpu = rig.helper_cpu_ns();
    let has_helpers = !rig.helpers.is_empty();
    let outcome = rig.finish(w.expect(per_thread + WARM), true);
    Checked {
        bytes_per_op: outcome.bytes.iter().map(|(n, b)| (n.clone(), *b as f64 / ops as f64)).collect(),
        helper_cpu_per_op: has_helpers.then(|| helper_cpu as f64 / ops as f64),
    }
}

fn main() {
    let mut c = support::criterion();
    let dir = Scratch::new("hot-path");
    let mut checked: Vec<(Subject, Workload, Checked)> = Vec::new();
    for w in WORKLOADS {
        let mut group = c.benchmark_group(w.id());
        for subject in SUBJECTS.into_iter().filter(|s| s.applies_to(w)) {
            let mut first = true;
            group.bench_function(subject.id(), |b| {
                if first {
                    first = false;
                    checked.push((subject, w, check(subject, w, dir.path())));
                }
                b.iter_custom(|iters| {
                    let rig = Rig::new(subject, dir.path(), false);
                    let time = timed(&rig, w, iters);
                    rig.finish(w.expect(iters + WARM), false);
                    support::record(w.id(), subject.id(), iters, time);
                    time
                })
            });
        }
        group.finish();
    }
    c.final_summary();
    report(&checked);
    paired_off();
}

/// Capture off against no subscriber, measured in pairs: both run the same
/// loop, a few nanoseconds per operation, where drift of the machine's speed
/// between two benchmarks run one after the other is larger than any
/// difference. Here each round times one block of each, in alternating order,
/// and the ratio is taken within the round.
fn paired_off() {
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let (rounds, ops) = if bench_mode { (101, 200_000) } else { (3, 1_000) };
    let mut rows = Vec::new();
    for w in [Workload::Span, Workload::SpanFields, Workload::Event, Workload::EventFields] {
        let none = || {
            let start = Instant::now();
            w.run(ops);
            start.elapsed()
        };
        let off = || {
            let mut time = Duration::ZERO;
            Scope::Off.run(&mut || {
                let start = Instant::now();
                w.run(ops);
                time = start.elapsed();
            });
            time
        };
        let mut ratios: Vec<f64> = (0..rounds)
            .map(|r| {
                let (t_none, t_off) = if r % 2 == 0 {
                    let t_none = none();
                    (t_none, off())
                } else {
                    let t_off = off();
                    (none(), t_off)
                };
                t_off.as_secs_f64() / t_none.as_secs_f64()
            })
            .collect();
        ratios.sort_by(|a, b| a.total_cmp(b));
        let q = |p: f64| ratios[((ratios.len() - 1) as f64 * p).round() as usize];
        rows.push(vec![
            w.label().to_string(),
            format!("{:.3}x", q(0.5)),
            format!("{:.3}x-{:.3}x", q(0.25), q(0.75)),
            format!("{:.3}x-{:.3}x", q(0.0), q(1.0)),
        ]);
    }
    if bench_mode {
        support::print_table(
            &format!("Capture off / no subscriber, paired: {rounds} rounds of {ops} operations each"),
            &["workload", "median ratio", "interquartile range", "min-max"],
            &rows,
        );
    }
}

fn report(checked: &[(Subject, Workload, Checked)]) {
    let m = |s: Subject, w: Workload| support::median_ns(w.id(), s.id());
    let measured = WORKLOADS.iter().any(|w| SUBJECTS.iter().any(|s| m(*s, *w).is_some()));
    if measured {
        support::print_machine();
        let mut header = vec!["subscriber"];
        header.extend(WORKLOADS.iter().map(|w| w.label()));
        let rows: Vec<Vec<String>> = SUBJECTS
            .iter()
            .map(|s| {
                let mut row = vec![s.label().to_string()];
                row.extend(WORKLOADS.iter().map(|w| support::cell(m(*s, *w))));
                row
            })
            .collect();
        support::print_table(
            "Calling thread, ns per operation (median of samples; 4 threads: one span on each)",
            &header,
            &rows,
        );

        let ours = Subject::Ours(Ours::All);
        let pf = Subject::PerfettoFile { thread_tracks: false, annotations: false };
        let pf_tt = Subject::PerfettoFile { thread_tracks: true, annotations: false };
        let tc = Subject::TracingChrome { args: false };
        let rows: Vec<Vec<String>> = [
            ("ours (default) / tracing-perfetto-file", ours, pf),
            ("ours (default) / tracing-perfetto-file ThreadTracks", ours, pf_tt),
            ("ours (default) / tracing-chrome", ours, tc),
            ("ours, as a layer / registry, no layer", Subject::Ours(Ours::Layered), Subject::Registry),
            ("ours, as a layer / tracing-perfetto-file", Subject::Ours(Ours::Layered), pf),
            ("ours: Perfetto / tracing-perfetto-file", Subject::Ours(Ours::Perfetto), pf),
            ("capture off / no subscriber", Subject::CaptureOff, Subject::NoSubscriber),
        ]
        .iter()
        .map(|(label, a, b)| {
            let mut row = vec![label.to_string()];
            row.extend(WORKLOADS.iter().map(|w| support::ratio(m(*a, *w), m(*b, *w))));
            row
        })
        .collect();
        support::print_table("Ratios of the medians above", &header, &rows);

        // One span per thread on four threads against one span on one thread:
        // 2.0x is perfect use of two cores, 4.0x is fully serialised.
        let rows: Vec<Vec<String>> = SUBJECTS
            .iter()
            .map(|s| {
                vec![
                    s.label().to_string(),
                    support::cell(m(*s, Workload::Span)),
                    support::cell(m(*s, Workload::Threads)),
                    support::ratio(m(*s, Workload::Threads), m(*s, Workload::Span)),
                ]
            })
            .collect();
        support::print_table(
            "Four threads: time for 4 spans at once over time for 1 span",
            &["subscriber", "1 span, 1 thread (ns)", "4 spans, 4 threads (ns)", "ratio"],
            &rows,
        );
    }

    if checked.is_empty() {
        return;
    }
    let mut header = vec!["subscriber".to_string()];
    header.extend(WORKLOADS.iter().map(|w| w.label().to_string()));
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let find =
        |s: Subject, w: Workload| checked.iter().find(|(cs, cw, _)| *cs == s && *cw == w).map(|(_, _, c)| c);
    let rows: Vec<Vec<String>> = SUBJECTS
        .iter()
        .filter(|s| !matches!(s, Subject::NoSubscriber | Subject::CaptureOff | Subject::Registry))
        .map(|s| {
            let mut row = vec![s.label().to_string()];
            row.extend(WORKLOADS.iter().map(|w| {
                match find(*s, *w) {
                    None => "-".to_string(),
                    Some(c) => c
                        .bytes_per_op
                        .iter()
                        .map(|(name, b)| {
                            if c.bytes_per_op.len() > 1 {
                                format!("{name} {}", support::num(*b))
                            } else {
                                support::num(*b)
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(", "),
                }
            }));
            row
        })
        .collect();
    support::print_table(
        &format!("Bytes written per operation (checked captures of {CHECKED_OPS} + warm-up operations)"),
        &header,
        &rows,
    );
    let rows: Vec<Vec<String>> = SUBJECTS
        .iter()
        .filter(|s| matches!(s, Subject::Ours(_) | Subject::TracingChrome { .. }))
        .map(|s| {
            let mut row = vec![s.label().to_string()];
            row.extend(
                WORKLOADS.iter().map(|w| support::cell(find(*s, *w).and_then(|c| c.helper_cpu_per_op))),
            );
            row
        })
        .collect();
    support::print_table(
        "Writer thread CPU, ns per operation (same checked captures; not on the calling thread)",
        &header,
        &rows,
    );
}
