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
//! capture starts to after it has finished (files written, writer joined),
//! and its system time apart (the kernel's share: mostly writing the files);
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
//! in a default capture (`Capture::run_with_report`, no flush) with CPU time
//! and samples off (they would slow the loop and so spare the writer). Peak memory
//! growth is `VmHWM` after the finish less `VmRSS` before the start.
//!
//! Traces go to a directory under `/dev/shm` where there is one, or under
//! `BENCH_SCRATCH_DIR` (e.g. a directory on a disk, where a tool writes its
//! traces); the report names it.
//!
//! Without `--bench` (as `cargo test` runs it), or with `--test`
//! (`cargo bench ... -- --test`), every size is small and one round runs: the
//! checks alone.

use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use tracing::dispatcher;
use tracing::level_filters::LevelFilter;

use cabin_trace::Capture;

// The crate root is this file, so the modules are found from `benches/`.
#[path = "whole/report.rs"]
mod report;
#[path = "whole/setups.rs"]
mod setups;
mod support;

use setups::{check, Checked, Expect, Finished, Rig, Subject, Who, LOAD_SUBJECTS, SUBJECTS};
use support::Scratch;

/// The name of every span the workloads make.
pub(crate) const SPAN: &str = "bench_span";
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

/// One run's figures.
#[derive(Clone, Debug)]
struct Sample {
    calling_ns: f64,
    cpu_ns: f64,
    /// The share of `cpu_ns` the kernel spent (system time, every thread).
    system_ns: f64,
    wall_ns: f64,
    checked: Checked,
    /// Peak memory growth, KiB (under load only).
    peak_kib: Option<u64>,
}

/// One run of `w` under a fresh capture of `subject`.
fn measure(subject: Subject, w: Workload, ops: u64, dir: &Path, seq: u64, parse: bool) -> Sample {
    let (user0, system0) = support::process_user_system_ns();
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
    let (user1, system1) = support::process_user_system_ns();
    let system = system1.saturating_sub(system0);
    let cpu = user1.saturating_sub(user0) + system;
    let what = format!("{} {w:?} {ops}", subject.id());
    let checked = check(&what, finished, Expect { spans: ops, events: 0 }, parse);
    if !matches!(subject.who, Who::Ours(_)) {
        assert_eq!(checked.missing, 0, "{what}: a peer lost spans");
    }
    let per = |ns: f64| ns / ops as f64;
    Sample {
        calling_ns: per(calling.as_nanos() as f64),
        cpu_ns: per(cpu as f64),
        system_ns: per(system as f64),
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
        // The façade, as a tool runs it: default sinks, default configuration,
        // but for the thread CPU time and the samples, which would slow the
        // loop of info spans (two system calls per span) and so make it
        // easier for the writer to keep up.
        Who::Ours(_) | Who::CaptureOff => {
            let config = (subject.who != Who::CaptureOff)
                .then(|| support::config(dir).with_cpu(LevelFilter::OFF).with_sample(None));
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
        // Not split in the child's figures; the load rows do not show it.
        system_ns: f64::NAN,
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
        report::report(&p, &samples, &loads, elapsed, dir.path());
    } else {
        eprintln!(
            "whole: checks passed in {:.1} s (sizes for `cargo bench` are larger)",
            elapsed.as_secs_f64()
        );
    }
}
