//! Aggregation on the writer thread: the summary is a sink like the others.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, Write};

use trace_core::{Event, Field, Finish, Since, Sink, Start};

use crate::format::{
    FORMAT_VERSION, NAME, NINJA_AVAILABLE, NINJA_UNAVAILABLE, SINCE_IMAGE_START, SINCE_PROCESS_CREATION,
    SUFFIX,
};
use crate::model::{Lane, Ninja, Resources, SpanTotals, Timings, TraceFile};

#[derive(Default)]
struct Acc {
    count: u64,
    total_ns: u64,
    /// Thread CPU time of the slices that carried it.
    cpu_ns: Option<u64>,
    unclosed: u64,
    /// In the order the names first came: a span has a few fields, found
    /// faster by a scan than by a tree's string comparisons.
    field_sums: Vec<(String, i128)>,
}

impl Acc {
    fn add(&mut self, ns: u64, cpu_ns: Option<u64>, unclosed: bool, fields: &[Field<'_>]) {
        self.count += 1;
        self.total_ns += ns;
        if let Some(cpu) = cpu_ns {
            self.cpu_ns = Some(self.cpu_ns.unwrap_or(0).saturating_add(cpu));
        }
        self.unclosed += u64::from(unclosed);
        for f in fields {
            if let Some(v) = f.value.as_integer() {
                match self.field_sums.iter_mut().find(|(name, _)| name == f.name) {
                    Some((_, sum)) => *sum = sum.saturating_add(v),
                    None => self.field_sums.push((f.name.to_owned(), v)),
                }
            }
        }
    }
}

/// A string hasher for the span table: names and targets are short, and
/// SipHash's rounds cost more than the rest of a span's end. Not resistant to
/// chosen collisions, which only the program's own call sites could choose.
#[derive(Default, Clone, Copy)]
struct NameHasher(u64);

impl Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(c);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
        let mut tail = [0u8; 8];
        tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(tail) ^ bytes.len() as u64).wrapping_mul(K);
    }
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

type Names<V> = HashMap<String, V, BuildHasherDefault<NameHasher>>;

/// The sink that writes `<stem>.timings.json`. Give it to the capture after the
/// trace sinks, so it can say whether their files are complete.
#[derive(Default)]
pub struct SummarySink {
    command: String,
    stem: String,
    pid: u32,
    start_unix_ms: u64,
    start_ns: u64,
    startup_us: Option<u64>,
    filter: String,
    trace_id: String,
    parent_stem: Option<String>,
    parent_span_id: Option<String>,
    /// By name, then by target: looked up with the borrowed strings, so a
    /// span's end allocates nothing once its call site has been seen.
    spans: Names<Names<Acc>>,
    events: u64,
    ninja: Option<Ninja>,
    lanes: BTreeMap<String, Lane>,
}

impl std::fmt::Debug for SummarySink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SummarySink").field("stem", &self.stem).finish_non_exhaustive()
    }
}

impl SummarySink {
    /// A new summary sink.
    pub fn new() -> Self {
        Self::default()
    }

    fn ninja_report(&mut self, report: &trace_core::LaneReport) {
        let uncertainty_us = report.alignment_uncertainty_ns / 1000;
        let n = self.ninja.get_or_insert_with(|| Ninja {
            status: NINJA_AVAILABLE.to_string(),
            actions: Some(0),
            ..Ninja::not_run()
        });
        n.notes.extend(report.notes.iter().cloned());
        match &report.unavailable {
            Some(reason) => {
                // One unreadable run makes the capture's count unknown.
                n.status = NINJA_UNAVAILABLE.to_string();
                n.actions = None;
                n.reason = Some(match n.reason.take() {
                    Some(before) => format!("{before}; {reason}"),
                    None => reason.clone(),
                });
            }
            None => {
                if let Some(a) = n.actions.as_mut() {
                    *a += report.slices;
                }
            }
        }
        n.alignment_uncertainty_us = Some(n.alignment_uncertainty_us.unwrap_or(0).max(uncertainty_us));
    }
}

impl Sink for SummarySink {
    fn name(&self) -> &'static str {
        NAME
    }

    fn suffix(&self) -> &'static str {
        SUFFIX
    }

    fn start(&mut self, start: &Start<'_>, _out: &mut dyn Write) -> io::Result<()> {
        self.command = start.command.to_string();
        self.stem = start.stem.to_string();
        self.pid = start.pid;
        self.start_unix_ms = start.start_unix_ms;
        self.start_ns = start.start_ns;
        self.startup_us = start.startup_us;
        self.filter = start.filter.to_string();
        if let Some(family) = start.family {
            self.trace_id = family.trace_id_hex();
            self.parent_stem = family.parent_stem.clone();
            self.parent_span_id = family.parent_span_id_hex();
        }
        Ok(())
    }

    fn event(&mut self, event: &Event<'_>, _out: &mut dyn Write) -> io::Result<()> {
        match *event {
            Event::SpanEnd { ts, begin_ts, site, fields, unclosed, cpu, .. } => {
                let ns = ts.saturating_sub(begin_ts);
                let cpu = cpu.map(|c| c.ns());
                // Most ends hit an existing entry: look up before allocating keys.
                if let Some(acc) = self.spans.get_mut(site.name).and_then(|t| t.get_mut(site.target)) {
                    acc.add(ns, cpu, unclosed, fields);
                } else {
                    let mut acc = Acc::default();
                    acc.add(ns, cpu, unclosed, fields);
                    self.spans.entry(site.name.to_owned()).or_default().insert(site.target.to_owned(), acc);
                }
            }
            Event::Instant { .. } => self.events += 1,
            Event::LaneReport(report) if report.lane == "ninja" => self.ninja_report(report),
            Event::LaneReport(report) => {
                let lane = self.lanes.entry(report.lane.clone()).or_insert(Lane {
                    slices: 0,
                    unavailable: None,
                    notes: Vec::new(),
                });
                lane.slices += report.slices;
                if report.unavailable.is_some() {
                    lane.unavailable = report.unavailable.clone();
                }
                lane.notes.extend(report.notes.iter().cloned());
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, end: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
        let files: Vec<TraceFile> = end
            .files
            .iter()
            .map(|f| TraceFile {
                format: f.sink.clone(),
                file: f.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                complete: f.complete,
                error: f.error.clone(),
            })
            .collect();
        let mut spans: Vec<SpanTotals> = std::mem::take(&mut self.spans)
            .into_iter()
            .flat_map(|(name, targets)| {
                targets.into_iter().map(move |(target, a)| SpanTotals {
                    name: name.clone(),
                    target,
                    count: a.count,
                    total_inclusive_us: a.total_ns / 1000,
                    total_inclusive_thread_cpu_us: a.cpu_ns.map(|ns| ns / 1000),
                    unclosed: a.unclosed,
                    field_sums: a.field_sums.into_iter().collect(),
                })
            })
            .collect();
        spans.sort_by(|a, b| {
            b.total_inclusive_us
                .cmp(&a.total_inclusive_us)
                .then_with(|| (&a.name, &a.target).cmp(&(&b.name, &b.target)))
        });
        let r = end.resources;
        let since = |s: Option<Since>| {
            s.map(|s| match s {
                Since::ImageStart => SINCE_IMAGE_START.to_string(),
                Since::ProcessCreation => SINCE_PROCESS_CREATION.to_string(),
            })
        };
        let timings = Timings {
            format_version: FORMAT_VERSION,
            command: self.command.clone(),
            stem: self.stem.clone(),
            pid: self.pid,
            start_unix_ms: self.start_unix_ms,
            start_ns: self.start_ns,
            trace_id: std::mem::take(&mut self.trace_id),
            parent_stem: self.parent_stem.take(),
            parent_span_id: self.parent_span_id.take(),
            wall_us: end.end_ns.saturating_sub(self.start_ns) / 1000,
            startup_us: self.startup_us,
            startup_since: since(self.startup_us.and(trace_core::os::startup_since())),
            startup_resolution_us: trace_core::os::startup_resolution_us(),
            filter: self.filter.clone(),
            trace_complete: end.dropped_records == 0 && files.iter().all(|f| f.complete),
            files,
            dropped_records: end.dropped_records,
            spans,
            events: self.events,
            resources: Resources {
                self_user_us: r.self_user_us,
                self_system_us: r.self_system_us,
                self_max_rss_kib: r.self_max_rss_kib,
                self_max_rss_since: since(r.self_max_rss_since),
                startup_user_us: r.startup_user_us,
                startup_system_us: r.startup_system_us,
                pre_exec_user_us: r.pre_exec_user_us,
                pre_exec_system_us: r.pre_exec_system_us,
                children_user_us: r.children_user_us,
                children_system_us: r.children_system_us,
                waited_children: r.waited_children,
                waited_children_user_us: r.waited_children_user_us,
                waited_children_system_us: r.waited_children_system_us,
                largest_child_max_rss_kib: r.largest_child_max_rss_kib,
                missing: trace_core::os::missing().map(str::to_string),
            },
            ninja: self.ninja.take().unwrap_or_else(Ninja::not_run),
            lanes: std::mem::take(&mut self.lanes),
        };
        // Into memory first: serde's many small writes would each go through
        // the checked writer; one write of the whole text costs less.
        let mut text = serde_json::to_vec_pretty(&timings).map_err(io::Error::other)?;
        text.push(b'\n');
        out.write_all(&text)
    }
}
