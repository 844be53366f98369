//! The writer thread's side: how fast each sink encodes, and how many bytes it
//! writes per span and per event.
//!
//! ```text
//! cargo bench -p cabin-trace-benches --bench writer
//! ```
//!
//! Each sink is fed a synthetic event stream through `Sink::event`, the way
//! the writer thread feeds it, into a null writer that counts bytes. This is
//! the encoders alone: turning the calling threads' raw records into events
//! (the rest of the writer thread's work) and writing the file are not in it;
//! the hot-path benchmark prints the writer thread's whole CPU time per
//! operation. Before a benchmark is timed, a stream of `CHECKED_OPS`
//! operations is encoded and read back (Chrome JSON parsed, Perfetto counted by
//! an independent wire-format reader, the summary's counts), and must hold
//! exactly those operations.

use std::hint::black_box;
use std::io::Write;
use std::time::Instant;

use criterion::Throughput;
use trace_core::{Event, Field, Finish, Level, Sink, Site, Start, Value};

mod support;

use support::Counts;

const CHECKED_OPS: u64 = 10_000;
const THREAD: u64 = 4242;
const SPAN: &str = "bench_span";
const START_NS: u64 = 1_000_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    /// A span with no fields: a begin and an end.
    Span,
    /// A span with two integer fields.
    SpanFields,
    /// An instant with its message.
    Event,
    /// An instant with its message and two integer fields.
    EventFields,
}

const STREAMS: [Stream; 4] = [Stream::Span, Stream::SpanFields, Stream::Event, Stream::EventFields];

impl Stream {
    fn id(self) -> &'static str {
        match self {
            Stream::Span => "span",
            Stream::SpanFields => "span_2_fields",
            Stream::Event => "event",
            Stream::EventFields => "event_2_fields",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Stream::Span => "span",
            Stream::SpanFields => "span + 2 fields",
            Stream::Event => "event",
            Stream::EventFields => "event + 2 fields",
        }
    }

    /// Events per operation: a span is a begin and an end.
    fn events(self) -> u64 {
        match self {
            Stream::Span | Stream::SpanFields => 2,
            Stream::Event | Stream::EventFields => 1,
        }
    }

    /// Feeds operation `i` to `sink`.
    #[inline]
    fn feed(self, sink: &mut dyn Sink, i: u64, out: &mut dyn Write) {
        let span = Site::new(SPAN, "writer_bench", Level::INFO, None, None);
        let event = Site::new("event writer_bench:1", "writer_bench", Level::INFO, None, None);
        // Irregular times, as real ones are (a regular stream would flatter
        // the Perfetto sink's compression): 1 us apart plus up to 255 ns.
        let jitter = |x: u64| x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56;
        let ts = START_NS + i * 1000 + jitter(i);
        let two = [Field { name: "a", value: Value::U64(i) }, Field { name: "b", value: Value::U64(7) }];
        let message = [Field { name: "message", value: Value::Str("bench event") }];
        let three = [message[0], two[0], two[1]];
        let r = match self {
            Stream::Span | Stream::SpanFields => {
                let fields: &[Field<'_>] = if self == Stream::Span { &[] } else { &two };
                let begin = Event::SpanBegin { thread: THREAD, ts, site: span, fields, thread_cpu_ns: None };
                let end = Event::SpanEnd {
                    thread: THREAD,
                    ts: ts + 200 + jitter(i ^ 0x5555),
                    begin_ts: ts,
                    site: span,
                    fields,
                    recorded: &[],
                    unclosed: false,
                    cpu: None,
                };
                sink.event(&begin, out).and_then(|()| sink.event(&end, out))
            }
            Stream::Event => {
                sink.event(&Event::Instant { thread: THREAD, ts, site: event, fields: &message }, out)
            }
            Stream::EventFields => {
                sink.event(&Event::Instant { thread: THREAD, ts, site: event, fields: &three }, out)
            }
        };
        r.expect("a sink writing to a null writer does not fail");
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Which {
    Chrome,
    Perfetto,
    Summary,
    /// All three, one after the other, as a default capture's writer runs them.
    All,
}

const SINKS: [Which; 4] = [Which::Chrome, Which::Perfetto, Which::Summary, Which::All];

impl Which {
    fn id(self) -> &'static str {
        match self {
            Which::Chrome => "chrome",
            Which::Perfetto => "perfetto",
            Which::Summary => "summary",
            Which::All => "all",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Which::Chrome => "Chrome JSON",
            Which::Perfetto => "Perfetto",
            Which::Summary => "summary",
            Which::All => "all three (default capture)",
        }
    }

    fn sinks(self) -> Vec<Box<dyn Sink>> {
        let chrome = || Box::new(trace_sink_chrome::ChromeSink::new()) as Box<dyn Sink>;
        let perfetto = || Box::new(trace_sink_perfetto::PerfettoSink::new()) as Box<dyn Sink>;
        let summary = || Box::new(trace_summary::SummarySink::new()) as Box<dyn Sink>;
        match self {
            Which::Chrome => vec![chrome()],
            Which::Perfetto => vec![perfetto()],
            Which::Summary => vec![summary()],
            Which::All => vec![chrome(), perfetto(), summary()],
        }
    }
}

/// Started sinks, each with its own counting writer.
struct Fed {
    sinks: Vec<(Box<dyn Sink>, Counts, support::CountingWriter)>,
}

impl Fed {
    fn start(which: Which, keep: bool) -> Fed {
        let mut start = Start::default();
        start.command = "bench";
        start.stem = "bench-0-0-0";
        start.pid = std::process::id();
        start.start_ns = START_NS;
        start.filter = "info";
        let sinks = which
            .sinks()
            .into_iter()
            .map(|mut sink| {
                let counts = if keep { Counts::keeping() } else { Counts::new() };
                let mut out = counts.writer(false);
                sink.start(&start, &mut out).expect("start");
                sink.event(&Event::ThreadName { thread: THREAD, name: "main" }, &mut out)
                    .expect("thread name");
                (sink, counts, out)
            })
            .collect();
        Fed { sinks }
    }

    fn run(&mut self, stream: Stream, from: u64, n: u64) {
        for i in from..from + n {
            for (sink, _, out) in &mut self.sinks {
                stream.feed(sink.as_mut(), black_box(i), out);
            }
        }
    }

    /// Finishes every sink; returns each one's name and output.
    fn finish(self) -> Vec<(&'static str, Vec<u8>)> {
        let mut files = Vec::new();
        self.sinks
            .into_iter()
            .map(|(mut sink, counts, mut out)| {
                let mut end = Finish::default();
                end.end_ns = u64::MAX / 2;
                end.files = &files;
                sink.finish(&end, &mut out).expect("finish");
                files.push(trace_core::FileStatus {
                    sink: sink.name().to_string(),
                    path: format!("bench.{}", sink.suffix()).into(),
                    complete: true,
                    error: None,
                });
                (sink.name(), counts.kept())
            })
            .collect()
    }
}

/// Encodes `CHECKED_OPS` operations, reads the output back, and returns the
/// bytes per operation of each sink.
fn check(which: Which, stream: Stream) -> Vec<(&'static str, f64)> {
    let mut fed = Fed::start(which, true);
    fed.run(stream, 0, CHECKED_OPS);
    let (spans, events) = match stream {
        Stream::Span | Stream::SpanFields => (CHECKED_OPS, 0),
        Stream::Event | Stream::EventFields => (0, CHECKED_OPS),
    };
    let what = format!("{} {}", which.id(), stream.id());
    let outputs = fed.finish();
    for (name, bytes) in &outputs {
        match *name {
            "chrome" => {
                let c = support::chrome_counts(bytes, SPAN).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!((c.spans, c.instants), (spans, events), "{what}: chrome");
            }
            "perfetto" => {
                let c = support::perfetto_counts(bytes).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(
                    (c.slice_begins, c.slice_ends, c.instants),
                    (spans, spans, events),
                    "{what}: perfetto"
                );
            }
            "summary" => {
                let t = trace_summary::Timings::from_slice(bytes, "bench.timings.json".as_ref())
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let n: u64 = t.spans.iter().filter(|s| s.name == SPAN).map(|s| s.count).sum();
                assert_eq!((n, t.events), (spans, events), "{what}: summary");
            }
            other => panic!("{what}: unexpected sink {other}"),
        }
    }
    // The whole file: a sink that holds output back (the Perfetto sink's
    // chunks) writes it at the finish.
    outputs.iter().map(|(n, bytes)| (*n, bytes.len() as f64 / CHECKED_OPS as f64)).collect()
}

/// A sink set, a stream, and each sink's bytes per operation.
type Sizes = (Which, Stream, Vec<(&'static str, f64)>);

fn main() {
    let mut c = support::criterion();
    let mut sizes: Vec<Sizes> = Vec::new();
    for stream in STREAMS {
        let group_id = format!("writer_{}", stream.id());
        let mut group = c.benchmark_group(&group_id);
        group.throughput(Throughput::Elements(stream.events()));
        for which in SINKS {
            let mut first = true;
            group.bench_function(which.id(), |b| {
                if first {
                    first = false;
                    sizes.push((which, stream, check(which, stream)));
                }
                b.iter_custom(|iters| {
                    let mut fed = Fed::start(which, false);
                    let start = Instant::now();
                    fed.run(stream, 0, iters);
                    let counts: Vec<support::Counts> = fed.sinks.iter().map(|(_, c, _)| c.clone()).collect();
                    // The finish is timed too: the Perfetto sink compresses its last chunk there.
                    let _ = fed.finish();
                    let time = start.elapsed();
                    assert!(
                        counts.iter().all(|c| c.bytes() > 0),
                        "{group_id} {}: nothing written",
                        which.id()
                    );
                    support::record(&group_id, which.id(), iters, time);
                    time
                })
            });
        }
        group.finish();
    }
    c.final_summary();
    report(&sizes);
}

fn report(sizes: &[Sizes]) {
    let m = |w: Which, s: Stream| support::median_ns(&format!("writer_{}", s.id()), w.id());
    let mut header = vec!["sink"];
    header.extend(STREAMS.iter().map(|s| s.label()));
    if SINKS.iter().any(|w| STREAMS.iter().any(|s| m(*w, *s).is_some())) {
        support::print_machine();
        let rows: Vec<Vec<String>> = SINKS
            .iter()
            .map(|w| {
                let mut row = vec![w.label().to_string()];
                row.extend(STREAMS.iter().map(|s| support::cell(m(*w, *s))));
                row
            })
            .collect();
        support::print_table("Encoding, ns per operation (a span is a begin and an end)", &header, &rows);
        let rows: Vec<Vec<String>> = SINKS
            .iter()
            .map(|w| {
                let mut row = vec![w.label().to_string()];
                row.extend(STREAMS.iter().map(|s| {
                    m(*w, *s)
                        .map_or("-".into(), |ns| format!("{} M", support::num(1e3 * s.events() as f64 / ns)))
                }));
                row
            })
            .collect();
        support::print_table("Encoded events per second", &header, &rows);
    }
    let rows: Vec<Vec<String>> = SINKS
        .iter()
        .filter(|w| matches!(w, Which::Chrome | Which::Perfetto))
        .map(|w| {
            let mut row = vec![w.label().to_string()];
            row.extend(STREAMS.iter().map(|s| {
                sizes
                    .iter()
                    .find(|(sw, ss, _)| sw == w && ss == s)
                    .map_or("-".into(), |(_, _, b)| support::num(b.iter().map(|(_, v)| v).sum()))
            }));
            row
        })
        .collect();
    support::print_table(
        &format!("Bytes per operation ({CHECKED_OPS} operations, the whole file)"),
        &header,
        &rows,
    );
}
