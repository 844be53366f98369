//! The fixed cost of one capture: everything a traced invocation pays besides
//! its spans.
//!
//! ```text
//! cargo bench -p cabin-trace-benches --bench capture
//! ```
//!
//! Ours: read the configuration through a lookup, start the capture (create
//! the files and the writer thread), run a command of a handful of spans,
//! finish (join the writer, write the summary) and rename the files, with the
//! default sinks (Chrome, Perfetto, summary). Against it, the same command
//! under tracing-chrome (create the file, build the layer and its guard, run
//! under a scoped dispatcher, drop the guard, which joins its writer thread)
//! and under tracing-perfetto-file (the same, flushing on the calling thread).
//! Trace files go to a directory in memory and are removed after each
//! iteration, outside the timed region. Before timing, one capture of each is
//! read back and must hold the command's spans.

use std::path::Path;
use std::time::{Duration, Instant};

use tracing::dispatcher::{self, Dispatch};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Registry;

use cabin_trace::{Capture, Config};

mod support;

use support::Scratch;

/// Spans the command makes: its root and five phases (plus the root span our
/// capture adds around every command).
const PHASES: u64 = 5;

/// A command with the shape of a short real one: a root span, a few phases
/// with a field each, and one event.
fn command() -> u64 {
    let _root = tracing::info_span!("bench_command").entered();
    let mut sum = 0;
    for i in 0..PHASES {
        let _phase = tracing::info_span!("phase", index = i).entered();
        sum += std::hint::black_box(i);
    }
    tracing::info!(phases = PHASES, "done");
    sum
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Subject {
    /// The variable is unset: capture is off.
    Off,
    Ours,
    /// Ours with `<P>_TRACE_CPU=off`: the sampler thread, no thread CPU clock.
    OursCpuOff,
    /// Ours with `<P>_TRACE_SAMPLE=off`: the thread CPU clock, no sampler thread.
    OursSampleOff,
    /// Ours with `<P>_TRACE_CPU=off` and `<P>_TRACE_SAMPLE=off`.
    OursNoCounters,
    TracingChrome,
    PerfettoFile,
    /// No tracing at all: only the file work our capture cannot avoid.
    FilesAlone,
}

const SUBJECTS: [Subject; 8] = [
    Subject::Off,
    Subject::Ours,
    Subject::OursCpuOff,
    Subject::OursSampleOff,
    Subject::OursNoCounters,
    Subject::FilesAlone,
    Subject::TracingChrome,
    Subject::PerfettoFile,
];

/// The sizes of the three files a capture of `command` writes, about.
const FILE_BYTES: [usize; 3] = [1_700, 700, 1_400];

impl Subject {
    fn id(self) -> &'static str {
        match self {
            Subject::Off => "capture_off",
            Subject::Ours => "ours",
            Subject::OursCpuOff => "ours_cpu_off",
            Subject::OursSampleOff => "ours_sample_off",
            Subject::OursNoCounters => "ours_cpu_off_sample_off",
            Subject::TracingChrome => "tracing_chrome",
            Subject::PerfettoFile => "perfetto_file",
            Subject::FilesAlone => "files_alone",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Subject::Off => "ours, capture off (variable unset)",
            Subject::Ours => "ours: Chrome + Perfetto + summary, renamed",
            Subject::OursCpuOff => "ours, the same with CPU off (the sampler thread only)",
            Subject::OursSampleOff => "ours, the same with sample off (the thread CPU clock only)",
            Subject::OursNoCounters => "ours, the same with CPU off and sample off",
            Subject::TracingChrome => "tracing-chrome 0.7.2: file, layer, guard",
            Subject::PerfettoFile => "tracing-perfetto-file 0.1.1: file, layer, guard",
            Subject::FilesAlone => "no tracing: 3 files created, written, closed, renamed",
        }
    }

    /// One whole capture of `command`; returns the files it wrote.
    fn once(self, dir: &Path, seq: u64) -> Vec<std::path::PathBuf> {
        match self {
            Subject::Off
            | Subject::Ours
            | Subject::OursCpuOff
            | Subject::OursSampleOff
            | Subject::OursNoCounters => {
                let on = self != Subject::Off;
                let mut config = Config::from_lookup("BENCH", cabin_trace::FORMATS, |name| {
                    (on && name == "BENCH_TRACE_DIR").then(|| dir.into())
                })
                .expect("the benchmark's configuration is valid");
                if matches!(self, Subject::OursCpuOff | Subject::OursNoCounters) {
                    config = config.map(|c| c.with_cpu(tracing::level_filters::LevelFilter::OFF));
                }
                if matches!(self, Subject::OursSampleOff | Subject::OursNoCounters) {
                    config = config.map(|c| c.with_sample(None));
                }
                let (sum, report) =
                    Capture::from_config(config).run_with_report("bench", command).expect("capture");
                assert_eq!(sum, (0..PHASES).sum::<u64>());
                match report {
                    None => Vec::new(),
                    Some(r) => {
                        assert!(r.is_complete(), "{:?}", r.warnings());
                        r.files.into_iter().map(|f| f.path).collect()
                    }
                }
            }
            Subject::TracingChrome => {
                let path = dir.join(format!("tracing-chrome-{seq}.json"));
                let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new().file(&path).build();
                let dispatch = Dispatch::new(Registry::default().with(layer));
                dispatcher::with_default(&dispatch, command);
                drop(guard);
                vec![path]
            }
            Subject::FilesAlone => {
                let bytes = [b'x'; 4096];
                FILE_BYTES
                    .iter()
                    .enumerate()
                    .map(|(i, len)| {
                        let path = dir.join(format!("alone-{seq}.{i}"));
                        let partial = dir.join(format!("alone-{seq}.{i}.partial"));
                        let mut f = std::fs::OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .open(&partial)
                            .expect("create a file");
                        std::io::Write::write_all(&mut f, &bytes[..*len]).expect("write it");
                        drop(f);
                        std::fs::rename(&partial, &path).expect("rename it");
                        path
                    })
                    .collect()
            }
            Subject::PerfettoFile => {
                let path = dir.join(format!("perfetto-file-{seq}.pftrace"));
                let file = std::fs::File::create(&path).expect("create the trace file");
                let (layer, guard) = tracing_perfetto_file::PerfettoLayer::builder(file).build();
                let dispatch = Dispatch::new(Registry::default().with(layer));
                dispatcher::with_default(&dispatch, command);
                drop(guard);
                vec![path]
            }
        }
    }
}

/// Runs one capture and checks what it wrote holds the command's spans.
fn check(subject: Subject, dir: &Path) {
    let files = subject.once(dir, u64::MAX);
    let spans = PHASES + 1;
    let ours = matches!(
        subject,
        Subject::Ours | Subject::OursCpuOff | Subject::OursSampleOff | Subject::OursNoCounters
    );
    if ours {
        // The "files alone" row writes about as much as a capture does.
        let sizes: Vec<u64> = files.iter().map(|f| std::fs::metadata(f).map_or(0, |m| m.len())).collect();
        eprintln!("ours wrote {sizes:?} bytes; the files-alone row writes {FILE_BYTES:?}");
        let written: u64 = sizes.iter().sum();
        let alone: usize = FILE_BYTES.iter().sum();
        assert!(written as usize / 2 <= alone && alone <= 2 * written as usize, "{written} against {alone}");
    }
    for f in &files {
        let bytes = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let name = f.to_string_lossy();
        if name.ends_with(".json") && !name.ends_with(".timings.json") {
            let phases = support::chrome_counts(&bytes, "phase").unwrap_or_else(|e| panic!("{name}: {e}"));
            let root = support::chrome_counts(&bytes, "bench_command").unwrap();
            assert_eq!((phases.spans + root.spans, phases.instants), (spans, 1), "{name}");
        } else if name.ends_with(".pftrace") {
            let c = support::perfetto_counts(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            // Ours adds a root span around every command, and the family's instant.
            let extra = u64::from(ours);
            assert_eq!((c.slice_begins, c.instants), (spans + extra, 1 + extra), "{name}");
        } else if name.ends_with(".timings.json") {
            let t = cabin_trace::Timings::from_path(f).unwrap();
            let n: u64 = t.spans.iter().filter(|s| s.name != "command").map(|s| s.count).sum();
            assert_eq!((n, t.events), (spans, 1), "{name}");
        }
        let _ = std::fs::remove_file(f);
    }
    let expected = match subject {
        Subject::Off => 0,
        Subject::Ours
        | Subject::OursCpuOff
        | Subject::OursSampleOff
        | Subject::OursNoCounters
        | Subject::FilesAlone => 3,
        Subject::TracingChrome | Subject::PerfettoFile => 1,
    };
    assert_eq!(files.len(), expected, "{subject:?} wrote {files:?}");
}

fn main() {
    let mut c = support::criterion();
    let dir = Scratch::new("capture");
    let mut group = c.benchmark_group("capture");
    for subject in SUBJECTS {
        let mut first = true;
        let mut seq = 0;
        group.bench_function(subject.id(), |b| {
            if first {
                first = false;
                check(subject, dir.path());
            }
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    seq += 1;
                    let start = Instant::now();
                    let files = subject.once(dir.path(), seq);
                    total += start.elapsed();
                    for f in files {
                        let _ = std::fs::remove_file(f);
                    }
                }
                support::record("capture", subject.id(), iters, total);
                total
            })
        });
    }
    group.finish();
    c.final_summary();

    let m = |s: Subject| support::median_ns("capture", s.id());
    if SUBJECTS.iter().any(|s| m(*s).is_some()) {
        support::print_machine();
        let rows: Vec<Vec<String>> = SUBJECTS
            .iter()
            .map(|s| {
                vec![
                    s.label().to_string(),
                    support::cell(m(*s).map(|ns| ns / 1000.0)),
                    support::ratio(m(*s), m(Subject::TracingChrome)),
                    support::ratio(m(*s), m(Subject::PerfettoFile)),
                ]
            })
            .collect();
        support::print_table(
            "Fixed cost of one capture of a 6-span command, µs (median of samples)",
            &["capture", "µs", "/ tracing-chrome", "/ tracing-perfetto-file"],
            &rows,
        );
    }
}
