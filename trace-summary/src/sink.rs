//! Aggregation on the writer thread: the summary is a sink like the others.

use std::collections::BTreeMap;
use std::io::{self, Write};

use rustc_hash::FxHashMap;
use trace_core::{CpuStacks, Event, Field, Finish, Sink, Start};

use crate::format::{FORMAT_VERSION, NAME, NINJA_AVAILABLE, NINJA_UNAVAILABLE, SUFFIX};
use crate::model::{Lane, Ninja, ResourceSummary, SpanTotals, StackSummary, Timings, TraceFile};

/// The totals of one span name and target.
#[derive(Default)]
struct Acc {
    count: u64,
    total_ns: u64,
    /// Thread CPU time of the slices that carried it.
    cpu_ns: Option<u64>,
    unclosed: u64,
    /// The sum of each integer field, every value added in turn to an `i128`
    /// that saturates at its bounds; in the order the names first came (a
    /// span has a few fields, found faster by a scan than by a map).
    sums: Vec<(String, i128)>,
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
            let Some(v) = f.value.as_integer() else { continue };
            match self.sums.iter_mut().find(|(name, _)| name == f.name) {
                Some((_, sum)) => *sum = sum.saturating_add(v),
                None => self.sums.push((f.name.to_owned(), v)),
            }
        }
    }
}

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
    /// The totals of every span name and target seen.
    spans: Vec<(String, String, Acc)>,
    /// Indexes into `spans` by name (a name has one target, or a few):
    /// looked up with the borrowed strings, so a span's end allocates nothing
    /// once its name and target have been seen.
    index: FxHashMap<String, Vec<usize>>,
    events: u64,
    ninja: Option<Ninja>,
    lanes: BTreeMap<String, Lane>,
    stacks: Option<StackSummary>,
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

    /// The index in `spans` of the totals of `name` and `target`, made if new.
    fn index_of(&mut self, name: &str, target: &str) -> usize {
        let spans = &self.spans;
        let same_target = |&&i: &&usize| spans.get(i).is_some_and(|s| s.1 == target);
        if let Some(&index) = self.index.get(name).and_then(|indexes| indexes.iter().find(same_target)) {
            return index;
        }
        let index = self.spans.len();
        self.spans.push((name.to_owned(), target.to_owned(), Acc::default()));
        self.index.entry(name.to_owned()).or_default().push(index);
        index
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
                let index = self.index_of(site.name, site.target);
                let (_, _, acc) = &mut self.spans[index];
                acc.add(ts.saturating_sub(begin_ts), cpu.map(|c| c.ns()), unclosed, fields);
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

    fn stacks(&mut self, stacks: &CpuStacks, _out: &mut dyn Write) -> io::Result<()> {
        self.stacks = Some(StackSummary::from_stacks(stacks));
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
        self.index.clear();
        let mut spans: Vec<SpanTotals> = std::mem::take(&mut self.spans)
            .into_iter()
            .map(|(name, target, a)| SpanTotals {
                name,
                target,
                count: a.count,
                total_inclusive_us: a.total_ns / 1000,
                total_inclusive_thread_cpu_us: a.cpu_ns.map(|ns| ns / 1000),
                unclosed: a.unclosed,
                field_sums: a.sums.into_iter().collect(),
            })
            .collect();
        spans.sort_by(|a, b| {
            b.total_inclusive_us
                .cmp(&a.total_inclusive_us)
                .then_with(|| (&a.name, &a.target).cmp(&(&b.name, &b.target)))
        });
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
            startup_since: self
                .startup_us
                .and(trace_core::os::startup_since())
                .map(|s| crate::model::since_name::name(s).to_string()),
            startup_resolution_us: trace_core::os::startup_resolution_us(),
            filter: self.filter.clone(),
            trace_complete: end.dropped_records == 0 && files.iter().all(|f| f.complete),
            files,
            dropped_records: end.dropped_records,
            spans,
            events: self.events,
            resources: ResourceSummary {
                figures: end.resources,
                missing: trace_core::os::missing().map(str::to_string),
            },
            ninja: self.ninja.take().unwrap_or_else(Ninja::not_run),
            lanes: std::mem::take(&mut self.lanes),
            stacks: self.stacks.take().unwrap_or_default(),
        };
        // Into memory first: serde's many small writes would each go through
        // the checked writer; one write of the whole text costs less. Room
        // for a short command's text, so that it is not grown piece by piece.
        let mut text = Vec::with_capacity(8 * 1024);
        serde_json::to_writer_pretty(&mut text, &timings).map_err(io::Error::other)?;
        text.push(b'\n');
        out.write_all(&text)
    }
}

#[cfg(test)]
mod tests {
    use trace_core::{Field, Value};

    use super::*;

    fn int(name: &str, v: i64) -> Field<'_> {
        Field { name, value: Value::I64(v) }
    }

    #[test]
    fn a_name_and_its_prefix_at_one_address_are_two_span_names() {
        static TEXT: &str = "download_bytes";
        let mut sink = SummarySink::new();
        let a = sink.index_of(TEXT, "t");
        let b = sink.index_of(&TEXT[..8], "t");
        assert_ne!(a, b);
        assert_eq!(sink.index_of(TEXT, "t"), a);
        assert_eq!(sink.index_of(&String::from(TEXT), "t"), a, "found by its text wherever it lives");
        assert_ne!(sink.index_of(TEXT, "u"), a, "another target is another span");
    }

    #[test]
    fn fields_are_summed_by_name_whatever_their_order_and_only_when_integers() {
        let mut acc = Acc::default();
        let mut name = String::from("hits");
        acc.add(1, None, false, &[int(&name, 3), int("rounds", 10)]);
        acc.add(1, None, false, &[int("rounds", 20), Field { name: &name, value: Value::U64(4) }]);
        acc.add(1, None, false, &[Field { name: &name, value: Value::Str("7") }, int("rounds", -5)]);
        acc.add(1, None, false, &[Field { name: "rounds", value: Value::F64(1.5) }]);
        name.replace_range(.., "miss");
        acc.add(1, None, false, &[int(&name, 5)]);
        let sums: BTreeMap<String, i128> = acc.sums.into_iter().collect();
        let expected: BTreeMap<String, i128> =
            [("hits".into(), 7), ("rounds".into(), 25), ("miss".into(), 5)].into();
        assert_eq!(sums, expected);
        assert_eq!(acc.count, 5);
    }

    #[test]
    fn a_sum_saturates_at_the_bounds_of_i128_value_by_value() {
        let mut acc = Acc::default();
        acc.sums.push(("n".into(), i128::MAX - 2));
        acc.add(1, None, false, &[Field { name: "n", value: Value::U64(u64::MAX) }]);
        assert_eq!(acc.sums[0].1, i128::MAX);
        acc.add(1, None, false, &[int("n", -5)]);
        assert_eq!(acc.sums[0].1, i128::MAX - 5, "saturated, then taken from the bound");
        acc.sums[0].1 = i128::MIN + 1;
        acc.add(1, None, false, &[Field { name: "n", value: Value::I64(i64::MIN) }, int("n", 3)]);
        assert_eq!(acc.sums[0].1, i128::MIN + 3);
    }
}
