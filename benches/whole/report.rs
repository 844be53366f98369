//! The whole-cost benchmark's tables, printed in markdown at the end of a run.

use std::time::Duration;

use crate::setups::{s, Sinks, Subject, Who, LOAD_SUBJECTS, SUBJECTS};
use crate::support::{self, median, num};
use crate::{Load, Params, Sample, Workload};

/// One figure of every sample of one set-up and workload.
pub fn values<K: PartialEq + Copy>(
    all: &[(Subject, K, Sample)],
    s: Subject,
    k: K,
    f: impl Fn(&Sample) -> f64,
) -> Vec<f64> {
    all.iter().filter(|(a, b, _)| *a == s && *b == k).map(|(_, _, x)| f(x)).collect()
}

/// The median of one figure over the samples of one set-up.
pub fn med<K: PartialEq + Copy>(
    all: &[(Subject, K, Sample)],
    s: Subject,
    k: K,
    f: impl Fn(&Sample) -> f64,
) -> f64 {
    median(&values(all, s, k, f))
}

/// The range of one figure over the samples of one set-up.
pub fn spread_of<K: PartialEq + Copy>(
    all: &[(Subject, K, Sample)],
    s: Subject,
    k: K,
    f: impl Fn(&Sample) -> f64,
) -> String {
    support::spread(&values(all, s, k, f))
}

/// A target (issues #14 and #37) that is a ratio of two set-ups' medians.
pub struct Target {
    label: &'static str,
    a: Subject,
    b: Subject,
    figure: fn(&Sample) -> f64,
    at_most: f64,
    /// Whether `figure` is the total CPU (the targets the floor is for).
    total_cpu: bool,
}

/// The median of `Report::dropped_records` with its range, or `-` for a set-up
/// that keeps no such count.
pub fn dropped_cell<K: PartialEq + Copy>(all: &[(Subject, K, Sample)], s: Subject, k: K) -> String {
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

pub fn report(
    p: &Params,
    samples: &[(Subject, Workload, Sample)],
    loads: &[(Subject, Load, Sample)],
    took: Duration,
    traces: &std::path::Path,
) {
    support::print_machine();
    println!(
        "`cargo bench -p cabin-trace-benches --bench whole`: {} rounds of {} spans per set-up and workload, \
         {} rounds under load; {:.0} s in all; traces written under {}",
        p.rounds,
        num(p.ops as f64),
        p.load_rounds,
        took.as_secs_f64(),
        traces.parent().unwrap_or(traces).display()
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
                    num(m(s, |x| x.system_ns)),
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
                "of which system ns",
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
    // Like for like: the peers record neither CPU time nor samples.
    let ours = s(Who::Ours(Sinks::DefaultNoCounters), false);
    let cpu = |x: &Sample| x.cpu_ns;
    let calling = |x: &Sample| x.calling_ns;
    // Issue #37's performance guard (the calling thread's and the total's),
    // and issue #14's target for a capture that is off.
    let targets = [
        Target {
            label: "total CPU, default sinks, CPU off, sample off / TPF",
            a: ours,
            b: tpf(false),
            figure: cpu,
            total_cpu: true,
            at_most: 1.0,
        },
        Target {
            label: "calling thread, default sinks, CPU off, sample off / TPF",
            a: ours,
            b: tpf(false),
            figure: calling,
            total_cpu: false,
            at_most: 0.35,
        },
        Target {
            label: "calling thread, capture off / no subscriber",
            a: s(Who::CaptureOff, false),
            b: s(Who::NoSubscriber, false),
            figure: calling,
            total_cpu: false,
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
                    format!("missed by {:.1}%", 100.0 * (r / t.at_most - 1.0))
                };
                row.push(format!("{r:.2}x ({verdict})"));
            }
            row
        })
        .collect();
    support::print_table(
        "Targets (#37, and #14 for a capture that is off) from the medians above",
        &["ratio", "target", Workload::Flushed.label(), Workload::NoFlush.label()],
        &rows,
    );

    // What a target leaves for the work off the calling thread that is not
    // the kernel's: the calling thread's CPU and the process's system time
    // are paid whatever the writer's code does (the kernel's share is mostly
    // the files' bytes), so a writer whose own code cost nothing would still
    // be at "floor". The calling thread's own system time is in both terms,
    // so the floor is a little high; ours makes few system calls there.
    let rows: Vec<Vec<String>> = targets
        .iter()
        .filter(|t| t.total_cpu)
        .map(|t| {
            let mut row = vec![t.label.to_string(), format!("<= {}x", t.at_most)];
            for w in [Workload::Flushed, Workload::NoFlush] {
                let base = med(samples, t.b, w, cpu);
                let paid = med(samples, t.a, w, calling) + med(samples, t.a, w, |x| x.system_ns);
                let user_rest = med(samples, t.a, w, cpu) - paid;
                let budget = t.at_most * base - paid;
                let left = if budget > 0.0 { format!("{} ns", num(budget)) } else { "nothing".into() };
                row.push(format!(
                    "floor {:.2}x; the rest {} ns, against {left} at the target",
                    paid / base,
                    num(user_rest)
                ));
            }
            row
        })
        .collect();
    support::print_table(
        "The CPU targets against what is paid whatever the writer's code does: floor = (calling thread + \
         system CPU) / TPF's total; the rest = user CPU off the calling thread, ns/span",
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
                 but CPU time and samples off (medians of {} runs, each in a child process)",
                num(ops as f64),
                p.load_rounds
            ),
            Load::Flood => format!(
                "Under load: two threads, {} events with two fields between them, no flush, default \
                 configuration but CPU time and samples off (medians of {} runs, each in a child process; calling thread = per event on one thread)",
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
