//! What the Perfetto UI shows: every capture loaded into Perfetto's own trace
//! processor (v58.2, the engine the UI runs to import a trace before it draws
//! anything), both files of it, and what a person would see compared table by
//! table.
//!
//! For each capture, the `.pftrace` and the `.trace.json`:
//! - import with no `stats` row of severity `error` or `data_loss` above 0
//!   (what the UI reports as import problems);
//! - hold the same slices on each thread (name, begin and duration, within
//!   the JSON's microsecond resolution) with the same arguments, and every
//!   slice's thread duration equal to the other file's (the CPU time of a span
//!   at `<P>_TRACE_CPU`'s levels, none elsewhere);
//! - link the same slices by flows, draw the same counters (names, values),
//!   the same async tracks (one slice each, on the process) and the same lanes
//!   (processes of their own);
//! - and show loss and spans left open where a reader looks.
//!
//! The binary is found through `TRACE_PROCESSOR_SHELL`, else at
//! `.tools/perfetto/trace_processor_shell`, which
//! `scripts/install-trace-processor.sh` (run by the test set-up) installs.
//! `TP_DEBUG_KEEP=<dir>` copies every file loaded into `<dir>`, to query by
//! hand when a check fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

/// The trace processor's binary; panics saying how to install it.
fn shell() -> PathBuf {
    let path = match std::env::var_os("TRACE_PROCESSOR_SHELL") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/perfetto/trace_processor_shell"),
    };
    assert!(
        path.exists(),
        "Perfetto's trace processor is missing at {}: run scripts/install-trace-processor.sh \
         (or scripts/install-test-tools.sh), or set TRACE_PROCESSOR_SHELL to a trace_processor_shell v58.2",
        path.display()
    );
    path
}

/// One result of a query: the column names and the rows (`None` for NULL).
#[derive(Debug, Default)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Option<String>>>,
}

impl Table {
    /// The rows as maps from column name to value.
    pub fn records(&self) -> Vec<BTreeMap<&str, Option<&str>>> {
        self.rows
            .iter()
            .map(|r| self.columns.iter().map(String::as_str).zip(r.iter().map(|v| v.as_deref())).collect())
            .collect()
    }
}

/// Splits the shell's CSV output (results separated by an empty line, each
/// header first, strings quoted with `"` doubled inside, NULL as `[NULL]`).
fn parse_results(out: &str) -> Vec<Table> {
    let mut tables = Vec::new();
    let mut table: Option<Table> = None;
    let mut chars = out.chars().peekable();
    loop {
        // One line: fields until an unquoted newline.
        let mut fields: Vec<(String, bool)> = Vec::new();
        let (mut field, mut quoted) = (String::new(), false);
        let mut ended = true;
        while let Some(c) = chars.next() {
            ended = false;
            match c {
                '"' if field.is_empty() && !quoted => {
                    quoted = true;
                    // A quoted field: until a lone closing quote.
                    while let Some(c) = chars.next() {
                        if c == '"' {
                            if chars.peek() == Some(&'"') {
                                chars.next();
                                field.push('"');
                            } else {
                                break;
                            }
                        } else {
                            field.push(c);
                        }
                    }
                }
                ',' => fields.push((std::mem::take(&mut field), std::mem::replace(&mut quoted, false))),
                '\n' => {
                    ended = true;
                    break;
                }
                c => field.push(c),
            }
        }
        if !field.is_empty() || quoted || !fields.is_empty() {
            fields.push((field, quoted));
        }
        if fields.is_empty() {
            if let Some(t) = table.take() {
                tables.push(t);
            }
            if chars.peek().is_none() {
                break;
            }
            continue;
        }
        // The shell quotes NULL as it quotes strings: `"[NULL]"`.
        let values: Vec<Option<String>> =
            fields.into_iter().map(|(f, _)| if f == "[NULL]" { None } else { Some(f) }).collect();
        match &mut table {
            None => {
                table = Some(Table {
                    columns: values.into_iter().map(Option::unwrap_or_default).collect(),
                    rows: vec![],
                })
            }
            Some(t) => t.rows.push(values),
        }
        if ended && chars.peek().is_none() {
            break;
        }
    }
    if let Some(t) = table.take() {
        tables.push(t);
    }
    tables
}

/// Runs `queries` on `trace` in one load of it; one table per query.
pub fn query(trace: &Path, queries: &[&str]) -> Vec<Table> {
    let dir = tempfile::tempdir().unwrap();
    let sql = dir.path().join("q.sql");
    let text: String = queries.iter().map(|q| format!("{};\n", q.trim().trim_end_matches(';'))).collect();
    std::fs::write(&sql, text).unwrap();
    let out =
        Command::new(shell()).arg("-q").arg(&sql).arg(trace).output().expect("run trace_processor_shell");
    assert!(
        out.status.success(),
        "the trace processor failed on {}:\n{}",
        trace.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let tables = parse_results(&String::from_utf8(out.stdout).expect("UTF-8 output"));
    assert_eq!(tables.len(), queries.len(), "one result per query from {}", trace.display());
    tables
}

/// A slice as the trace processor imported it.
#[derive(Debug, Clone)]
pub struct Slice {
    pub id: i64,
    pub ts: i64,
    pub dur: i64,
    pub thread_dur: Option<i64>,
    pub name: String,
    pub parent: Option<i64>,
    /// `thread`, `process` (a track of the process: async spans, a lane's
    /// sub-lanes) or `global`.
    pub scope: &'static str,
    pub tid: Option<i64>,
    pub pid: Option<i64>,
    pub track: Option<String>,
    pub track_id: i64,
    /// Arguments, keys without their `args.`/`debug.` prefix.
    pub args: BTreeMap<String, String>,
}

/// A counter track and its values.
#[derive(Debug, Clone, PartialEq)]
pub struct Counter {
    pub pid: Option<i64>,
    pub unit: Option<String>,
    pub values: Vec<(i64, f64)>,
}

/// What a person sees of one file.
#[derive(Debug)]
pub struct Imported {
    pub path: PathBuf,
    pub errors: Vec<String>,
    pub slices: Vec<Slice>,
    /// (slice out, slice in), by slice id.
    pub flows: Vec<(i64, i64)>,
    /// By track name.
    pub counters: BTreeMap<String, Counter>,
    /// pid -> process name.
    pub processes: BTreeMap<i64, Option<String>>,
    /// (pid, tid) -> thread name.
    pub threads: BTreeMap<(i64, i64), Option<String>>,
}

const ERRORS: &str = "select name, idx, severity, value from stats \
    where value > 0 and severity in ('error', 'data_loss')";
const SLICES: &str = "select s.id, s.ts, s.dur, s.thread_dur, s.name, s.depth, s.parent_id, s.track_id, \
        tr.name as track, t.tid as tid, coalesce(p1.pid, p2.pid) as pid, \
        case when tt.id is not null then 'thread' when pt.id is not null then 'process' else 'global' end as scope \
    from slice s join track tr on tr.id = s.track_id \
    left join thread_track tt on tt.id = s.track_id left join thread t on t.utid = tt.utid \
    left join process p1 on p1.upid = t.upid \
    left join process_track pt on pt.id = s.track_id left join process p2 on p2.upid = pt.upid \
    order by s.ts, s.id";
const ARGS: &str =
    "select s.id, a.key, a.display_value from slice s join args a on a.arg_set_id = s.arg_set_id";
const FLOWS: &str = "select slice_out, slice_in from flow order by slice_out, slice_in";
const COUNTERS: &str = "select ct.name, ct.unit, p.pid, c.ts, c.value from counter c \
    join counter_track ct on ct.id = c.track_id \
    left join process_counter_track pct on pct.id = ct.id left join process p on p.upid = pct.upid \
    order by ct.name, c.ts";
const PROCESSES: &str = "select pid, name from process where pid != 0";
const THREADS: &str =
    "select t.tid, p.pid, t.name from thread t left join process p using (upid) where t.tid != 0";

fn int(v: Option<&str>) -> Option<i64> {
    v.map(|v| v.parse().unwrap_or_else(|_| panic!("an integer: {v}")))
}

/// Loads `path` into the trace processor and reads what a person sees.
pub fn import(path: &Path) -> Imported {
    if let Some(keep) = std::env::var_os("TP_DEBUG_KEEP") {
        let _ = std::fs::copy(path, Path::new(&keep).join(path.file_name().unwrap()));
    }
    let t = query(path, &[ERRORS, SLICES, ARGS, FLOWS, COUNTERS, PROCESSES, THREADS]);
    let errors = t[0]
        .records()
        .iter()
        .map(|r| {
            format!(
                "{}[{}] = {} ({})",
                r["name"].unwrap(),
                r["idx"].unwrap_or(""),
                r["value"].unwrap(),
                r["severity"].unwrap()
            )
        })
        .collect();
    let mut args: BTreeMap<i64, BTreeMap<String, String>> = BTreeMap::new();
    for r in t[2].records() {
        let key = r["key"].unwrap();
        let key = key.split_once('.').map_or(key, |(_, k)| k);
        args.entry(int(r["id"]).unwrap())
            .or_default()
            .insert(key.to_string(), r["display_value"].unwrap_or("").to_string());
    }
    let slices = t[1]
        .records()
        .iter()
        .map(|r| {
            let id = int(r["id"]).unwrap();
            Slice {
                id,
                ts: int(r["ts"]).unwrap(),
                dur: int(r["dur"]).unwrap(),
                thread_dur: int(r["thread_dur"]),
                name: r["name"].unwrap_or("").to_string(),
                parent: int(r["parent_id"]),
                scope: match r["scope"].unwrap() {
                    "thread" => "thread",
                    "process" => "process",
                    _ => "global",
                },
                tid: int(r["tid"]),
                pid: int(r["pid"]),
                track: r["track"].map(str::to_string),
                track_id: int(r["track_id"]).unwrap(),
                args: args.remove(&id).unwrap_or_default(),
            }
        })
        .collect();
    let flows =
        t[3].records().iter().map(|r| (int(r["slice_out"]).unwrap(), int(r["slice_in"]).unwrap())).collect();
    let mut counters: BTreeMap<String, Counter> = BTreeMap::new();
    for r in t[4].records() {
        let c = counters.entry(r["name"].unwrap_or("").to_string()).or_insert_with(|| Counter {
            pid: int(r["pid"]),
            unit: r["unit"].map(str::to_string),
            values: vec![],
        });
        c.values.push((int(r["ts"]).unwrap(), r["value"].unwrap().parse().unwrap()));
    }
    let names = |t: &Table, key: &str| -> BTreeMap<i64, Option<String>> {
        t.records().iter().map(|r| (int(r[key]).unwrap(), r["name"].map(str::to_string))).collect()
    };
    Imported {
        path: path.to_path_buf(),
        errors,
        slices,
        flows,
        counters,
        processes: names(&t[5], "pid"),
        threads: t[6]
            .records()
            .iter()
            .map(|r| ((int(r["pid"]).unwrap_or(-1), int(r["tid"]).unwrap()), r["name"].map(str::to_string)))
            .collect(),
    }
}

impl Imported {
    fn slice(&self, id: i64) -> &Slice {
        self.slices.iter().find(|s| s.id == id).unwrap()
    }

    /// Whether `s` is an instant that carries a flow: the `.pftrace` leaves a
    /// flow from an instant inside its source's slice (the source's begin is
    /// written before the link is known; the family merge adds its own),
    /// where the JSON's `s` and `f` events bind to the slices themselves.
    fn is_flow_instant(&self, s: &Slice) -> bool {
        s.dur == 0 && self.flows.iter().any(|&(o, i)| o == s.id || i == s.id)
    }

    /// The slices and instants on threads' tracks, by (pid, tid, name), each
    /// list in time order; instants that only carry a flow left out.
    pub fn thread_slices(&self) -> BTreeMap<(i64, i64, String), Vec<&Slice>> {
        let mut by: BTreeMap<_, Vec<&Slice>> = BTreeMap::new();
        for s in self.slices.iter().filter(|s| s.scope == "thread" && !self.is_flow_instant(s)) {
            by.entry((s.pid.unwrap_or(-1), s.tid.unwrap(), s.name.clone())).or_default().push(s);
        }
        by
    }

    /// Instants (zero-length slices) named `name`, on any track.
    pub fn instants(&self, prefix: &str) -> Vec<&Slice> {
        self.slices.iter().filter(|s| s.dur == 0 && s.name.starts_with(prefix)).collect()
    }

    /// The slices with a thread duration.
    pub fn with_thread_dur(&self) -> usize {
        self.slices.iter().filter(|s| s.thread_dur.is_some()).count()
    }

    /// Each flow as (source, target) slice names, where a flow that leaves
    /// from or ends on an instant inside a slice (the `.pftrace`'s `spawn` and
    /// `follows_from` instants) is read as the slice around it: what a person
    /// sees is an arrow from that slice.
    pub fn flow_names(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .flows
            .iter()
            .map(|&(o, i)| (self.around_instant(o).name.clone(), self.around_instant(i).name.clone()))
            .collect();
        v.sort();
        v
    }

    fn around_instant(&self, id: i64) -> &Slice {
        let s = self.slice(id);
        match (s.dur, s.parent) {
            (0, Some(parent)) => self.slice(parent),
            _ => s,
        }
    }

    /// Slices on tracks of a process (async spans, lanes), as
    /// (pid, track name, slice name) -> count.
    pub fn process_slices(&self) -> BTreeMap<(i64, String, String), usize> {
        let mut by = BTreeMap::new();
        for s in self.slices.iter().filter(|s| s.scope == "process" && s.dur != 0) {
            *by.entry((s.pid.unwrap_or(-1), s.track.clone().unwrap_or_default(), s.name.clone()))
                .or_default() += 1;
        }
        by
    }
}

/// Asserts that two maps are equal, naming only the keys where they differ
/// (a capture's maps run to thousands of entries).
fn assert_same_map<K: Ord + std::fmt::Debug, V: PartialEq + std::fmt::Debug>(
    a: &BTreeMap<K, V>,
    b: &BTreeMap<K, V>,
    what: &str,
) {
    let mut diff: Vec<String> = Vec::new();
    for (k, v) in a {
        match b.get(k) {
            Some(w) if w == v => {}
            w => diff.push(format!("{k:?}: {v:?} in the .pftrace, {w:?} in the JSON")),
        }
    }
    for (k, w) in b.iter().filter(|(k, _)| !a.contains_key(k)) {
        diff.push(format!("{k:?}: none in the .pftrace, {w:?} in the JSON"));
    }
    let shown: Vec<&String> = diff.iter().take(12).collect();
    assert!(diff.is_empty(), "{what}: {} differences, the first: {shown:#?}", diff.len());
}

/// A tolerance for times that the JSON holds in microseconds with three
/// decimals (exact to the nanosecond) and the `.pftrace` in nanoseconds: the
/// trace processor may round either by a nanosecond.
const TIME_SLACK_NS: i64 = 1_000;

/// Checks that the two files of one capture show the same thing.
pub fn assert_same_view(pf: &Imported, js: &Imported) {
    assert_same_view_but_args(pf, js, &[]);
}

/// [`assert_same_view`], but for arguments named in `json_only`, which only
/// the JSON holds.
pub fn assert_same_view_but_args(pf: &Imported, js: &Imported, json_only: &[&str]) {
    for i in [pf, js] {
        assert!(i.errors.is_empty(), "{}: import errors {:?}", i.path.display(), i.errors);
    }
    // Slices per thread and name, with their times and thread durations.
    let (a, b) = (pf.thread_slices(), js.thread_slices());
    let keys = |m: &BTreeMap<(i64, i64, String), Vec<&Slice>>| -> BTreeMap<(i64, i64, String), usize> {
        m.iter().map(|(k, v)| (k.clone(), v.len())).collect()
    };
    assert_same_map(&keys(&a), &keys(&b), &format!("slices per (pid, tid, name) of {}", pf.path.display()));
    // The `.pftrace`'s times reach the trace processor's clock through a
    // clock snapshot, whose two readings are a moment apart; the JSON's are
    // taken as they are. Each file's times are compared from its first slice.
    let offset = match (a.values().flatten().map(|s| s.ts).min(), b.values().flatten().map(|s| s.ts).min()) {
        (Some(x), Some(y)) => x - y,
        _ => 0,
    };
    assert!(offset.abs() < 1_000_000, "the files' clocks agree within a millisecond: {offset} ns");
    for (key, left) in &a {
        for (x, y) in left.iter().zip(&b[key]) {
            let ts = x.ts - offset;
            assert!((ts - y.ts).abs() <= TIME_SLACK_NS, "{key:?} begins at {ts} and {}", y.ts);
            if x.dur >= 0 && y.dur >= 0 {
                assert!((x.dur - y.dur).abs() <= TIME_SLACK_NS, "{key:?} lasts {} and {}", x.dur, y.dur);
            }
            match (x.thread_dur, y.thread_dur) {
                (Some(p), Some(j)) => {
                    assert!(
                        (p - j).abs() <= TIME_SLACK_NS,
                        "{key:?}: thread_dur {p} in the .pftrace, {j} in the JSON"
                    )
                }
                // The importer keeps a thread-time counter's value only when it
                // changes: a slice whose thread used no CPU between the two
                // readings (a clock of coarse resolution) has none.
                (None, Some(0)) => {}
                (p, j) => assert_eq!(
                    p.is_some(),
                    j.is_some(),
                    "{key:?}: thread_dur {p:?} in the .pftrace, {j:?} in the JSON"
                ),
            }
            let mut json_args = y.args.clone();
            json_args.retain(|k, _| !json_only.contains(&k.as_str()));
            assert_eq!(x.args, json_args, "{key:?}: the same arguments in both files");
        }
    }
    assert_eq!(pf.flow_names(), js.flow_names(), "flows between the same slices");
    assert_same_map(
        &pf.process_slices(),
        &js.process_slices(),
        "slices on the processes' tracks (async spans)",
    );
    let named = |i: &Imported| -> BTreeMap<(i64, i64), String> {
        i.threads.iter().filter_map(|(tid, name)| Some((*tid, name.clone()?))).collect()
    };
    assert_same_map(&named(pf), &named(js), "threads by name (each a lane in the UI)");
    assert_eq!(
        pf.processes.values().collect::<BTreeSet<_>>(),
        js.processes.values().collect::<BTreeSet<_>>(),
        "the same processes (the tool, its lanes)"
    );
    assert_same_counters(pf, js, offset);
}

/// The word a JSON counter's series is named after, for a `.pftrace`
/// counter's unit: a `C` event has no unit, so the series carries it, and the
/// trace processor names the JSON's track `<name> <series>`.
fn series_of_unit(unit: &str) -> &str {
    match unit {
        "%" => "percent",
        other => other,
    }
}

/// The trace processor's own thread-time counter, which it fills slices'
/// thread durations from: no counter of ours.
const THREAD_TIME: &str = "thread_time";

/// The counters of both files: the same tracks, on the same process, with the
/// same values; in the `.pftrace` with its unit, in the JSON with the unit as
/// the series' name.
fn assert_same_counters(pf: &Imported, js: &Imported, offset: i64) {
    let mut expected = BTreeSet::new();
    for (name, p) in pf.counters.iter().filter(|(n, _)| n.as_str() != THREAD_TIME) {
        let unit = p.unit.as_deref().unwrap_or_else(|| panic!("{name}: the .pftrace gives its unit"));
        let json_name = format!("{name} {}", series_of_unit(unit));
        let j = js.counters.get(&json_name).unwrap_or_else(|| {
            panic!(
                "{name} ({unit}): no `{json_name}` in the JSON, whose counters are {:?}",
                js.counters.keys()
            )
        });
        assert_eq!(p.values.len(), j.values.len(), "{name}: as many values in both files");
        for ((pt, pv), (jt, jv)) in p.values.iter().zip(&j.values) {
            assert!((pt - offset - jt).abs() <= TIME_SLACK_NS, "{name}: a value at {} and {jt}", pt - offset);
            assert!((pv - jv).abs() <= 1e-6 * pv.abs().max(1.0), "{name}: {pv} against {jv}");
        }
        assert_eq!(p.pid, j.pid, "{name}: on the same process");
        expected.insert(json_name);
    }
    assert_eq!(js.counters.keys().cloned().collect::<BTreeSet<_>>(), expected, "the JSON's counters");
}

/// Both files of the capture in `dir` (one of each).
fn both(dir: &Path) -> (Imported, Imported) {
    (import(&one(dir, ".pftrace")), import(&one(dir, ".trace.json")))
}

fn demo_capture(filter: &str) -> (tempfile::TempDir, Imported, Imported) {
    let dir = tempfile::tempdir().unwrap();
    let out = demo_cmd(&["--no-table"], &[("CABIN_TRACE_DIR", dir.path())])
        .env("CABIN_TRACE_FILTER", filter)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let (pf, js) = both(dir.path());
    (dir, pf, js)
}

#[test]
fn the_demo_at_info_shows_the_same_slices_with_their_thread_durations_in_both_files() {
    let (_dir, pf, js) = demo_capture("info");
    assert_same_view(&pf, &js);
    // Every span at info records its CPU time: every slice on the tool's
    // threads has one (the child process's slice on its lane does not).
    let tool = pf.processes.iter().find(|(_, n)| n.as_deref() == Some("build")).map(|(p, _)| *p);
    let slices: Vec<&Slice> =
        pf.slices.iter().filter(|s| s.scope == "thread" && s.dur > 0 && s.pid == tool).collect();
    assert!(slices.len() >= 6, "{slices:?}");
    for s in &slices {
        let cpu = s.thread_dur.unwrap_or_else(|| panic!("{} has no thread duration in the .pftrace", s.name));
        // The thread's clock is read just inside the wall clock's reads, and
        // each read takes a little CPU of its own.
        let slack = TIME_SLACK_NS + s.dur / 100 + 50_000;
        assert!(cpu >= 0 && cpu <= s.dur + slack, "{}: thread_dur {cpu} within dur {}", s.name, s.dur);
    }
    // The CPU time is the slices': no counter of ours per thread (the
    // importer's own `thread_time`, which it reads thread durations from, aside).
    assert!(
        pf.counters.keys().all(|n| n.starts_with("process ") || n == THREAD_TIME),
        "only the process's counters: {:?}",
        pf.counters.keys()
    );
}

#[test]
fn the_demo_at_debug_shows_the_same_slices_and_only_info_spans_have_thread_durations() {
    let (_dir, pf, js) = demo_capture("debug");
    assert_same_view(&pf, &js);
    let debug: Vec<&Slice> =
        pf.slices.iter().filter(|s| s.name == "download" || s.name == "resolve_package").collect();
    assert!(!debug.is_empty());
    assert!(debug.iter().all(|s| s.thread_dur.is_none()), "debug spans pay no CPU clock read by default");
    assert!(pf.with_thread_dur() >= 6);
}

#[test]
fn the_memory_and_cpu_counters_have_the_same_values_and_units_on_the_process() {
    let (_dir, pf, js) = demo_capture("info");
    for name in ["process resident memory", "process CPU usage"] {
        let c =
            pf.counters.get(name).unwrap_or_else(|| panic!("no {name} counter: {:?}", pf.counters.keys()));
        // Memory at every sample, from the start to the finish; the CPU used
        // between two samples, at the first of them.
        let least = if name == "process CPU usage" { 1 } else { 2 };
        assert!(c.values.len() >= least, "{name}: {} values", c.values.len());
        assert!(c.pid.is_some(), "{name}: a counter of the process");
        assert_eq!(
            js.counters[&format!("{name} {}", series_of_unit(c.unit.as_deref().unwrap()))].values.len(),
            c.values.len()
        );
    }
    assert!(pf.counters["process resident memory"].values.iter().all(|&(_, v)| v > 1e6), "bytes");
    assert_same_view(&pf, &js);
}

/// Both files of an in-process capture's report.
fn both_of(report: &cabin_trace::Report) -> (Imported, Imported) {
    use crate::cross_thread::file;
    (import(file(report, "perfetto")), import(file(report, "chrome")))
}

/// The newest capture of `command` in `dir`, both files.
fn newest(dir: &Path, command: &str) -> (Imported, Imported) {
    let pick = |suffix: &str| {
        let mut all: Vec<PathBuf> = with_suffix(dir, suffix)
            .into_iter()
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(&format!("{command}-")))
            .collect();
        all.sort_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap());
        all.pop().unwrap_or_else(|| panic!("no {command} capture in {}", dir.display()))
    };
    (import(&pick(".pftrace")), import(&pick(".trace.json")))
}

/// The slices of the lane `lane` (a process of its own, on its sub-lanes'
/// threads), by name.
fn lane_slices(i: &Imported, lane: &str) -> Vec<String> {
    let pid = i
        .processes
        .iter()
        .find(|(_, name)| name.as_deref() == Some(lane))
        .map(|(pid, _)| *pid)
        .unwrap_or_else(|| panic!("{}: no process named {lane}: {:?}", i.path.display(), i.processes));
    let mut v: Vec<String> = i
        .slices
        .iter()
        .filter(|s| s.pid == Some(pid) && s.scope == "thread" && s.dur > 0)
        .map(|s| s.name.clone())
        .collect();
    v.sort();
    v
}

#[test]
fn a_minibuild_shows_its_ninja_and_tests_lanes_as_processes_in_both_files_and_a_no_op_rebuild_adds_none() {
    let project = tempfile::tempdir().unwrap();
    let traces = tempfile::tempdir().unwrap();
    crate::minibuild::minibuild(project.path(), traces.path());
    let (pf, js) = newest(traces.path(), "minibuild");
    assert_same_view(&pf, &js);
    for i in [&pf, &js] {
        let ninja = lane_slices(i, "ninja");
        assert_eq!(ninja.len(), 8, "{}: 5 compiles, 1 archive, 2 links: {ninja:?}", i.path.display());
        assert_eq!(lane_slices(i, "tests").len(), 1, "{}: the test executable", i.path.display());
    }

    // The same directory again: Ninja has nothing to do, and says so by
    // logging no action; the tests still run.
    let again = tempfile::tempdir().unwrap();
    crate::minibuild::minibuild(project.path(), again.path());
    let (pf, js) = newest(again.path(), "minibuild");
    assert_same_view(&pf, &js);
    for i in [&pf, &js] {
        assert!(!i.processes.values().any(|n| n.as_deref() == Some("ninja")), "no action, no ninja lane");
        assert_eq!(lane_slices(i, "tests").len(), 1);
    }
}

/// The merge copies the `.pftrace`'s packets as they are, and names the child
/// an action ran only in the JSON's arguments (`child_pid`, `child_stem`);
/// the flow from the action to the child's process shows it in both.
#[test]
fn the_family_merge_of_a_minibuild_through_its_wrapper_shows_every_process_in_both_files_the_child_args_in_the_json_only(
) {
    let project = tempfile::tempdir().unwrap();
    let traces = tempfile::tempdir().unwrap();
    let out = crate::family::minibuild_cmd(project.path(), traces.path()).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let (scan, merged) = crate::family::merged(traces.path());
    assert!(scan.incomplete.is_empty(), "{:?}", scan.incomplete);
    let (pf, js) = (import(&merged[0].pftrace), import(&merged[0].chrome));
    assert_same_view_but_args(&pf, &js, &["child_pid", "child_stem"]);
    let wrappers = pf.processes.values().filter(|n| n.as_deref() == Some("ccwrap")).count();
    assert_eq!(wrappers, 5, "one wrapper process per compile: {:?}", pf.processes);
    // Each wrapper hangs under the compile that ran it: a flow per child,
    // from its action on the ninja lane.
    for i in [&pf, &js] {
        let ninja = i.processes.iter().find(|(_, n)| n.as_deref() == Some("ninja")).map(|(p, _)| *p);
        let from_actions = i.flows.iter().filter(|&&(o, _)| i.around_instant(o).pid == ninja).count();
        assert_eq!(from_actions, 5, "{}: {:?}", i.path.display(), i.flow_names());
    }
    assert_eq!(lane_slices(&pf, "ninja").len(), 8);
}

#[test]
fn a_family_of_a_thousand_children_imports_every_process_in_both_files() {
    const N: usize = 1000;
    let dir = tempfile::tempdir().unwrap();
    crate::family::many_children(dir.path(), N);
    let (_, merged) = crate::family::merged(dir.path());
    let (pf, js) = (import(&merged[0].pftrace), import(&merged[0].chrome));
    assert_same_view(&pf, &js);
    assert_eq!(pf.processes.len(), N + 1, "the parent and its children");
    assert_eq!(pf.flows.len(), N, "one flow to each child");
}

/// Where the two files differ: the `.pftrace` gives each task a track of its
/// own (and asks the importer not to merge them); the importer packs the
/// JSON's async pairs of one name into as few rows as do not overlap.
#[test]
fn instrumented_tokio_tasks_get_async_tracks_on_the_process_one_each_in_the_pftrace_packed_in_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let report = crate::cross_thread::capture(dir.path(), "tokio", crate::async_tracks::tokio_tasks);
    let (pf, js) = both_of(&report);
    assert_same_view(&pf, &js);
    let pf_tracks: BTreeSet<i64> =
        pf.slices.iter().filter(|s| s.scope == "process" && s.name == "task").map(|s| s.track_id).collect();
    assert_eq!(pf_tracks.len(), 48, "each task on a track of its own");
    let mut rows: BTreeMap<i64, Vec<(i64, i64)>> = BTreeMap::new();
    for s in js.slices.iter().filter(|s| s.scope == "process" && s.name == "task") {
        rows.entry(s.track_id).or_default().push((s.ts, s.ts + s.dur));
    }
    for row in rows.values() {
        assert!(row.windows(2).all(|w| w[0].1 <= w[1].0), "tasks packed into a row do not overlap: {row:?}");
    }
    for i in [&pf, &js] {
        let tasks = i.slices.iter().filter(|s| s.scope == "process" && s.name == "task").count();
        assert_eq!(tasks, 48, "{}: one slice per task on the process", i.path.display());
        let polls = i.slices.iter().filter(|s| s.scope == "thread" && s.name == "task").count();
        assert!(polls >= 48 * 6, "{}: the polls stay on the workers' threads: {polls}", i.path.display());
    }
}

#[test]
fn spawn_and_follows_from_flows_link_the_same_slices_from_an_instant_inside_the_source_in_the_pftrace() {
    let dir = tempfile::tempdir().unwrap();
    let report = crate::cross_thread::capture(dir.path(), "flows", || {
        tracing::info_span!("start_helpers").in_scope(|| {
            let helper =
                cabin_trace::spawn("helper", || tracing::info_span!("helper_work", n = 1).in_scope(|| ()));
            helper.unwrap().join().unwrap();
        });
        let request = tracing::info_span!("request", id = 7);
        let batch = tracing::info_span!("batch");
        request.in_scope(|| batch.follows_from(&request));
        batch.in_scope(|| ());
    });
    let (pf, js) = both_of(&report);
    assert_same_view(&pf, &js);
    let expected = vec![
        ("request".to_string(), "batch".to_string()),
        ("start_helpers".to_string(), "helper_work".to_string()),
    ];
    assert_eq!(pf.flow_names(), expected);
    // Where the two files differ: the .pftrace's arrow leaves from an instant
    // named after the link, inside the source's slice.
    for &(out, _) in &pf.flows {
        let s = pf.slice(out);
        assert!(s.dur == 0 && (s.name == "spawn" || s.name == "follows_from"), "{s:?}");
    }
}

/// A capture of `f` into `dir` through `sinks`, with a small memory budget.
fn capture_with(
    dir: &Path,
    sinks: Vec<Box<dyn trace_core::Sink>>,
    budget: usize,
    f: impl FnOnce(),
) -> cabin_trace::Report {
    let config = trace_core::Config::from_lookup("TP", &["chrome", "perfetto"], |n| {
        (n == "TP_TRACE_DIR").then(|| dir.into())
    })
    .unwrap()
    .unwrap()
    .with_memory_budget(budget);
    let session = trace_core::Session::start(&config, "tp", sinks).unwrap();
    session.in_scope(f);
    session.finish()
}

#[test]
fn records_dropped_by_a_stuck_writer_are_an_instant_and_a_counter_on_the_process_in_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let sinks: Vec<Box<dyn trace_core::Sink>> = vec![
        Box::new(crate::chrome_output::Slow(0)),
        Box::new(trace_sink_chrome::ChromeSink::new()),
        Box::new(trace_sink_perfetto::PerfettoSink::new()),
    ];
    let report = capture_with(dir.path(), sinks, 1 << 20, || {
        let threads: Vec<_> = (0..2)
            .map(|t| {
                trace_core::spawn(format!("flood-{t}"), || {
                    for i in 0..60_000u64 {
                        tracing::info!(i, "flood");
                    }
                })
                .unwrap()
            })
            .collect();
        threads.into_iter().for_each(|h| h.join().unwrap());
    });
    let dropped = report.dropped_records;
    assert!(dropped > 0, "the writer fell behind on purpose");
    let (pf, js) = both_of(&report);
    assert_same_view(&pf, &js);
    let mark = format!("trace records dropped ({dropped})");
    for i in [&pf, &js] {
        let marks = i.instants(&mark);
        assert_eq!(marks.len(), 1, "{}: the mark {mark}", i.path.display());
        assert_ne!(marks[0].scope, "thread", "{}: not hidden on a thread", i.path.display());
    }
    let counter = &pf.counters["trace records dropped"];
    assert_eq!(counter.values.first().map(|v| v.1), Some(0.0));
    assert_eq!(counter.values.last().map(|v| v.1), Some(dropped as f64));
}

#[test]
fn a_span_left_open_is_marked_unclosed_and_counted_where_a_reader_looks_in_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let sinks: Vec<Box<dyn trace_core::Sink>> = vec![
        Box::new(trace_sink_chrome::ChromeSink::new()),
        Box::new(trace_sink_perfetto::PerfettoSink::new()),
    ];
    let report = capture_with(dir.path(), sinks, 64 << 20, || {
        tracing::info_span!("closed").in_scope(|| ());
        // Entered and never exited: still open when the capture finishes.
        std::mem::forget(tracing::info_span!("left_open", n = 3).entered());
    });
    let (pf, js) = both_of(&report);
    assert_same_view(&pf, &js);
    for i in [&pf, &js] {
        let open: Vec<&Slice> = i.slices.iter().filter(|s| s.name == "left_open").collect();
        assert_eq!(open.len(), 1, "{}", i.path.display());
        assert_eq!(open[0].args.get("unclosed").map(String::as_str), Some("true"), "{}", i.path.display());
        let marks = i.instants("trace spans unclosed (1)");
        assert_eq!(marks.len(), 1, "{}: the mark", i.path.display());
        assert_ne!(marks[0].scope, "thread", "{}: not hidden on a thread", i.path.display());
    }
}

#[test]
fn the_compressed_perfetto_sink_imports_as_the_json_of_the_same_capture() {
    let dir = tempfile::tempdir().unwrap();
    let sinks: Vec<Box<dyn trace_core::Sink>> = vec![
        Box::new(trace_sink_chrome::ChromeSink::new()),
        Box::new(trace_sink_perfetto::PerfettoSink::compressed()),
    ];
    let report = capture_with(dir.path(), sinks, 64 << 20, || {
        for i in 0..5_000u64 {
            tracing::info_span!("item", i).in_scope(|| ());
        }
        tracing::info!(count = 5_000u64, "done");
    });
    let (pf, js) = both_of(&report);
    assert_same_view(&pf, &js);
    assert_eq!(
        pf.thread_slices().iter().filter(|(k, _)| k.2 == "item").map(|(_, v)| v.len()).sum::<usize>(),
        5_000
    );
}

#[test]
fn two_captures_concatenated_into_one_pftrace_import_as_both_side_by_side() {
    let (a, pf_a, _) = demo_capture("info");
    let (b, pf_b, _) = demo_capture("info");
    let joined = a.path().join("joined.pftrace");
    let mut bytes = std::fs::read(one(a.path(), ".pftrace")).unwrap();
    bytes.extend(std::fs::read(one(b.path(), ".pftrace")).unwrap());
    std::fs::write(&joined, bytes).unwrap();
    let both = import(&joined);
    assert!(both.errors.is_empty(), "{:?}", both.errors);
    let mut expected = pf_a.thread_slices();
    for (k, v) in pf_b.thread_slices() {
        expected.entry(k).or_default().extend(v);
    }
    let count = |m: &BTreeMap<(i64, i64, String), Vec<&Slice>>| -> BTreeMap<(i64, i64, String), usize> {
        m.iter().map(|(k, v)| (k.clone(), v.len())).collect()
    };
    assert_eq!(count(&both.thread_slices()), count(&expected), "each capture's slices on its own threads");
    assert_eq!(both.with_thread_dur(), pf_a.with_thread_dur() + pf_b.with_thread_dur());
    assert_eq!(both.flows.len(), pf_a.flows.len() + pf_b.flows.len());
    assert_eq!(both.processes.len(), pf_a.processes.len() + pf_b.processes.len());
}
