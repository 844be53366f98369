//! The report of one capture: its `timings.json`, and the `.trace.json`
//! beside it for everything that happened over time.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use serde_json::Value;
use trace_summary::Timings;

use super::page::Page;
use super::svg::{self, esc, ms, BarRow, Lane, Slice};

/// How many phases the bar chart shows.
const TOP_PHASES: usize = 15;

/// What the report reads from the Chrome JSON trace.
#[derive(Default)]
struct Trace {
    /// Process names by pid (`process_name` metadata).
    processes: BTreeMap<i64, String>,
    /// Thread names by (pid, tid).
    threads: BTreeMap<(i64, i64), String>,
    /// Complete and unclosed slices by (pid, tid): start and duration in µs on
    /// the trace's clock, name, args.
    slices: BTreeMap<(i64, i64), Vec<RawSlice>>,
    /// Counter samples by name: (µs, value).
    counters: BTreeMap<String, Vec<(f64, f64)>>,
    /// The latest timestamp seen, in µs.
    end: f64,
}

struct RawSlice {
    ts: f64,
    dur: f64,
    name: String,
    detail: String,
    open: bool,
}

fn read_trace(path: &Path) -> anyhow::Result<Trace> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("{}: cannot be read", path.display()))?;
    let events: Vec<Value> = serde_json::from_str(&text)
        .with_context(|| format!("{}: expected a Chrome trace-event JSON array", path.display()))?;
    let mut t = Trace::default();
    let mut open = Vec::new();
    for e in &events {
        let ph = e["ph"].as_str().unwrap_or("");
        let pid = e["pid"].as_i64().unwrap_or(0);
        let tid = e["tid"].as_i64().unwrap_or(0);
        let name = e["name"].as_str().unwrap_or("").to_string();
        let ts = e["ts"].as_f64().unwrap_or(0.0);
        let dur = e["dur"].as_f64().unwrap_or(0.0);
        t.end = t.end.max(ts + dur);
        match ph {
            "M" if name == "process_name" => {
                t.processes.insert(pid, e["args"]["name"].as_str().unwrap_or("").to_string());
            }
            "M" if name == "thread_name" => {
                t.threads.insert((pid, tid), e["args"]["name"].as_str().unwrap_or("").to_string());
            }
            "X" => t.slices.entry((pid, tid)).or_default().push(RawSlice {
                ts,
                dur,
                name,
                detail: detail(e),
                open: false,
            }),
            "B" => open.push((pid, tid, ts, name, detail(e))),
            "C" => {
                if let Some((_, v)) = e["args"].as_object().and_then(|a| a.iter().next()) {
                    if let Some(v) = v.as_f64() {
                        t.counters.entry(name).or_default().push((ts, v));
                    }
                }
            }
            _ => {}
        }
    }
    // A span still open at the finish runs to the end of the trace.
    for (pid, tid, ts, name, detail) in open {
        let detail = format!("{detail}; still open when the capture finished");
        t.slices.entry((pid, tid)).or_default().push(RawSlice {
            ts,
            dur: t.end - ts,
            name,
            detail,
            open: true,
        });
    }
    Ok(t)
}

/// A slice's thread CPU and args, for its hover text.
fn detail(e: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(cpu) = e["tdur"].as_f64() {
        parts.push(format!("thread CPU {}", ms(cpu / 1000.0)));
    }
    if let Some(args) = e["args"].as_object() {
        for (k, v) in args {
            parts.push(format!("{k}={}", v.as_str().map_or_else(|| v.to_string(), str::to_string)));
        }
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("; {}", parts.join(", "))
    }
}

/// Slices with their nesting depth as their row (a span inside another is
/// one row below it).
fn nest(raw: &[RawSlice], origin: f64) -> Vec<Slice> {
    let mut order: Vec<&RawSlice> = raw.iter().collect();
    order.sort_by(|a, b| a.ts.total_cmp(&b.ts).then(b.dur.total_cmp(&a.dur)));
    let mut stack: Vec<f64> = Vec::new();
    let mut out = Vec::new();
    for s in order {
        while stack.last().is_some_and(|&end| end <= s.ts) {
            stack.pop();
        }
        out.push(Slice {
            start: (s.ts - origin) / 1000.0,
            dur: s.dur / 1000.0,
            name: if s.open { format!("{} (open)", s.name) } else { s.name.clone() },
            row: stack.len(),
            detail: s.detail.clone(),
        });
        stack.push(s.ts + s.dur);
    }
    out
}

/// The lanes of the process named `name` (the `ninja` or `tests` lane): one
/// row per sub-lane (thread), in the sub-lane's order.
fn external_lanes(t: &Trace, name: &str, origin: f64) -> (Vec<Slice>, Vec<(i64, i64)>) {
    let pids: Vec<i64> = t.processes.iter().filter(|(_, n)| n.as_str() == name).map(|(p, _)| *p).collect();
    let mut keys: Vec<(i64, i64)> = t.slices.keys().filter(|(p, _)| pids.contains(p)).copied().collect();
    keys.sort();
    let mut out = Vec::new();
    for (row, key) in keys.iter().enumerate() {
        for s in &t.slices[key] {
            out.push(Slice {
                start: (s.ts - origin) / 1000.0,
                dur: s.dur / 1000.0,
                name: s.name.clone(),
                row,
                detail: s.detail.clone(),
            });
        }
    }
    (out, keys)
}

/// How many slices run at once, over time: (ms, count) at every change.
/// Times are taken to the nanosecond, so that an action that starts as
/// another ends is one change, whatever the rounding of the sums.
fn concurrency(slices: &[Slice]) -> Vec<(f64, f64)> {
    let ns = |ms: f64| (ms * 1e6).round() / 1e6;
    let mut edges: Vec<(f64, i64)> =
        slices.iter().flat_map(|s| [(ns(s.start), 1), (ns(s.start + s.dur), -1)]).collect();
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut now = 0i64;
    let mut out: Vec<(f64, f64)> = vec![(0.0, 0.0)];
    for (t, d) in edges {
        now += d;
        match out.last_mut() {
            Some(last) if last.0 == t => last.1 = now as f64,
            _ => out.push((t, now as f64)),
        }
    }
    out
}

/// The page for `timings` (read from `path`).
pub fn page(path: &Path, timings: &Timings) -> anyhow::Result<Page> {
    let mut p = Page::new(&format!("capture {}", timings.stem));
    let r = &timings.resources;
    let cpu = |u: Option<u64>, s: Option<u64>| u.zip(s).map(|(u, s)| ms((u + s) as f64 / 1000.0));
    let mut facts = vec![
        ("command", esc(&timings.command)),
        ("wall", ms(timings.wall_us as f64 / 1000.0)),
        (
            "CPU of the tool (user + system)",
            cpu(r.figures.self_user_us, r.figures.self_system_us).unwrap_or("-".into()),
        ),
        ("peak RSS of the tool", r.figures.self_max_rss_kib.map_or("-".into(), mib)),
        ("filter", esc(&timings.filter)),
        ("trace complete", timings.trace_complete.to_string()),
    ];
    if let Some(s) = timings.startup_us {
        facts.push(("startup", ms(s as f64 / 1000.0)));
    }
    p.facts("summary", "Summary", &facts);

    // What was lost comes first after the summary: a reader must know it.
    let unclosed: Vec<String> = timings
        .spans
        .iter()
        .filter(|s| s.unclosed > 0)
        .map(|s| format!("{} ({} open)", esc(&s.name), s.unclosed))
        .collect();
    let mut loss = String::new();
    let _ = write!(
        loss,
        "<p>Records dropped by the writer: <b class=\"dropped\">{}</b>. Spans left open at the finish: <b class=\"unclosed\">{}</b>{}.</p>",
        timings.dropped_records,
        timings.spans.iter().map(|s| s.unclosed).sum::<u64>(),
        if unclosed.is_empty() { String::new() } else { format!(" ({})", unclosed.join(", ")) }
    );
    for f in timings.files.iter().filter(|f| !f.complete) {
        let _ = write!(
            loss,
            "<p class=\"warning\">{} is incomplete: {}</p>",
            esc(&f.file),
            esc(f.error.as_deref().unwrap_or("no reason given"))
        );
    }
    p.section("loss", "Dropped and unclosed", &loss);

    let mut phases: Vec<&trace_summary::SpanTotals> = timings.spans.iter().collect();
    phases.sort_by_key(|s| std::cmp::Reverse(s.total_inclusive_us));
    let rows: Vec<BarRow> = phases
        .iter()
        .take(TOP_PHASES)
        .map(|s| BarRow {
            name: s.name.clone(),
            first: s.total_inclusive_us as f64 / 1000.0,
            second: s.total_inclusive_thread_cpu_us.map(|c| c as f64 / 1000.0),
        })
        .collect();
    p.section(
        "phases",
        "Top phases: wall against thread CPU",
        &format!(
            "<p>Each span name's inclusive time summed over its spans (threads and nesting add up: not elapsed \
             time), against the CPU time its threads spent inside them. A long bar over a short one waited.</p>{}",
            svg::bars(&rows, ("inclusive wall", "thread CPU"))
        ),
    );

    let trace_path = path.with_file_name(format!("{}.trace.json", timings.stem));
    let trace = if trace_path.exists() { Some(read_trace(&trace_path)?) } else { None };
    match &trace {
        Some(t) => over_time(&mut p, t, timings),
        None => p.section(
            "timeline",
            "Over time",
            &format!(
                "<p class=\"warning\">No {} beside the summary (captured without the chrome format?): the time \
                 lines, lanes and counters need it.</p>",
                esc(&trace_path.display().to_string())
            ),
        ),
    }

    let mut children = String::new();
    let _ = write!(
        children,
        "<table class=\"facts\"><tr><th>children waited for</th><td class=\"children-count\">{}</td></tr>\
         <tr><th>their CPU (user + system)</th><td>{}</td></tr><tr><th>largest peak RSS</th><td>{}</td></tr>\
         <tr><th>all children's CPU (getrusage)</th><td>{}</td></tr></table>",
        r.figures.waited_children.map_or("-".into(), |n| n.to_string()),
        cpu(r.figures.waited_children_user_us, r.figures.waited_children_system_us).unwrap_or("-".into()),
        r.figures.largest_child_max_rss_kib.map_or("-".into(), mib),
        cpu(r.figures.children_user_us, r.figures.children_system_us).unwrap_or("-".into()),
    );
    if let Some(t) = &trace {
        let (slices, _) = external_lanes(t, "children", origin(t, timings));
        if !slices.is_empty() {
            let lanes = [Lane { name: "children".into(), slices }];
            children.push_str(&svg::timeline(&lanes, span(t, timings), "child"));
        }
    }
    if let Some(m) = &r.missing {
        let _ = write!(children, "<p class=\"warning\">{}</p>", esc(m));
    }
    p.section("children", "Children", &children);
    Ok(p)
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// The capture's clock origin: the earliest event of the tool's process.
fn origin(t: &Trace, timings: &Timings) -> f64 {
    let pid = i64::from(timings.pid);
    let first = t
        .slices
        .iter()
        .filter(|((p, _), _)| *p == pid)
        .flat_map(|(_, v)| v.iter().map(|s| s.ts))
        .chain(t.counters.values().flat_map(|v| v.iter().map(|c| c.0)))
        .fold(f64::INFINITY, f64::min);
    if first.is_finite() {
        first
    } else {
        0.0
    }
}

/// The range every time line of the capture shares, in ms from the origin.
fn span(t: &Trace, timings: &Timings) -> (f64, f64) {
    let o = origin(t, timings);
    (0.0, ((t.end - o) / 1000.0).max(timings.wall_us as f64 / 1000.0))
}

fn over_time(p: &mut Page, t: &Trace, timings: &Timings) {
    let pid = i64::from(timings.pid);
    let o = origin(t, timings);
    let range = span(t, timings);
    // The tool's threads, the main thread (tid = pid) first.
    let mut keys: Vec<(i64, i64)> = t.slices.keys().filter(|(p, _)| *p == pid).copied().collect();
    keys.sort_by_key(|&(_, tid)| (tid != pid, tid));
    let lanes: Vec<Lane> = keys
        .iter()
        .map(|k| Lane {
            name: t.threads.get(k).cloned().unwrap_or_else(|| format!("thread {}", k.1)),
            slices: nest(&t.slices[k], o),
        })
        .collect();
    p.section(
        "timeline",
        "Phases over time",
        &format!(
            "<p>Each thread of the tool, the main thread first; a span inside another is drawn one row below \
             it. Hover a slice for its duration, thread CPU and fields.</p>{}",
            svg::timeline(&lanes, range, "slice")
        ),
    );

    let (actions, rows) = external_lanes(t, "ninja", o);
    let ninja = &timings.ninja;
    let mut body = String::new();
    let _ = write!(body, "<p>Ninja: <b>{}</b>", esc(&ninja.status));
    if let Some(n) = ninja.actions {
        let _ = write!(body, ", {n} actions");
    }
    if let Some(u) = ninja.alignment_uncertainty_us {
        let _ = write!(
            body,
            "; the actions are placed at the moment Ninja was started, up to {} early (the manifest's load)",
            ms(u as f64 / 1000.0)
        );
    }
    if let Some(r) = &ninja.reason {
        let _ = write!(body, "; {}", esc(r));
    }
    body.push_str(".</p>");
    if !actions.is_empty() {
        let lanes: Vec<Lane> = (0..rows.len())
            .map(|row| Lane {
                name: format!("ninja {row}"),
                slices: actions
                    .iter()
                    .filter(|a| a.row == row)
                    .map(|a| Slice { row: 0, name: a.name.clone(), detail: a.detail.clone(), ..*a })
                    .collect(),
            })
            .collect();
        body.push_str(&svg::timeline(&lanes, range, "action"));
        body.push_str("<h3>Actions running at once</h3>");
        body.push_str(&svg::line(&concurrency(&actions), range, "", "concurrency", true));
    }
    p.section("ninja", "Ninja actions", &body);

    let (tests, _) = external_lanes(t, "tests", o);
    let body = if tests.is_empty() {
        "<p>No test executables ran in this capture.</p>".to_string()
    } else {
        let lanes = [Lane {
            name: "tests".into(),
            slices: tests.into_iter().map(|s| Slice { row: 0, ..s }).collect(),
        }];
        svg::timeline(&lanes, range, "test")
    };
    p.section("tests", "Tests", &body);

    let mut body = String::new();
    for (name, class, unit, scale) in [
        ("process resident memory", "memory", "MiB", 1.0 / (1024.0 * 1024.0)),
        ("process CPU usage", "cpu", "%", 1.0),
    ] {
        let points: Vec<(f64, f64)> = t
            .counters
            .get(name)
            .map(|v| v.iter().map(|&(ts, v)| ((ts - o) / 1000.0, v * scale)).collect())
            .unwrap_or_default();
        let _ = write!(body, "<h3>{}</h3>", esc(name));
        if points.is_empty() {
            body.push_str("<p>Not sampled in this capture.</p>");
        } else {
            body.push_str(&svg::line(&points, range, unit, class, false));
        }
    }
    p.section("counters", "Memory and CPU over time", &body);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(ts: f64, dur: f64, name: &str) -> RawSlice {
        RawSlice { ts, dur, name: name.into(), detail: String::new(), open: false }
    }

    #[test]
    fn a_span_inside_another_is_one_row_below_it_and_a_later_one_back_on_top() {
        // µs:  0        10        20        30
        //      [command..........................]
        //        [fetch...]   [compile...]
        //          [w]
        let rows = nest(
            &[
                raw(12.0, 10.0, "compile"),
                raw(0.0, 30.0, "command"),
                raw(1.0, 8.0, "fetch"),
                raw(2.0, 1.0, "w"),
            ],
            0.0,
        );
        let by_name: Vec<(&str, usize)> = rows.iter().map(|s| (s.name.as_str(), s.row)).collect();
        assert_eq!(by_name, [("command", 0), ("fetch", 1), ("w", 2), ("compile", 1)]);
        assert_eq!(rows[0].dur, 0.03, "µs become ms");
    }

    #[test]
    fn concurrency_steps_at_every_start_and_end() {
        // ms:  0    1    2    3    4
        //           [a........]
        //                [b........]
        //                     [c]
        let slice =
            |start: f64, dur: f64| Slice { start, dur, name: String::new(), row: 0, detail: String::new() };
        let steps = concurrency(&[slice(1.0, 2.0), slice(2.0, 2.0), slice(3.0, 0.5)]);
        assert_eq!(steps, [(0.0, 0.0), (1.0, 1.0), (2.0, 2.0), (3.0, 2.0), (3.5, 1.0), (4.0, 0.0)]);
    }
}
