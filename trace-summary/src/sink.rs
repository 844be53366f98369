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
    /// faster by a scan than by a tree's string comparisons. The third value
    /// is the address of the name when it was last found as a `'static`
    /// string (a call site's), else 0: such a name is then recognised by its
    /// address and length.
    field_sums: Vec<(String, i128, usize)>,
}

impl Acc {
    /// `fixed`: the fields' names are `'static` ([`trace_core::Site::has_static_text`]).
    fn add(&mut self, ns: u64, cpu_ns: Option<u64>, unclosed: bool, fields: &[Field<'_>], fixed: bool) {
        self.count += 1;
        self.total_ns += ns;
        if let Some(cpu) = cpu_ns {
            self.cpu_ns = Some(self.cpu_ns.unwrap_or(0).saturating_add(cpu));
        }
        self.unclosed += u64::from(unclosed);
        for (i, f) in fields.iter().enumerate() {
            if let Some(v) = f.value.as_integer() {
                // A call site's fields come in the same order every time: try
                // the same position first.
                let addr = if fixed { f.name.as_ptr() as usize } else { 0 };
                let at = match self.field_sums.get(i) {
                    Some((name, _, a)) if fixed && *a == addr && name.len() == f.name.len() => Some(i),
                    Some((name, _, _)) if name == f.name => Some(i),
                    _ => self.field_sums.iter().position(|(name, _, _)| name == f.name),
                };
                match at {
                    Some(at) => {
                        let (_, sum, a) = &mut self.field_sums[at];
                        *sum = sum.saturating_add(v);
                        *a = addr;
                    }
                    None => self.field_sums.push((f.name.to_owned(), v, addr)),
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

/// Slots of [`Recent`]: a power of two.
const RECENT: usize = 256;

/// A direct-mapped cache from the addresses of a span's name and target to
/// its index in [`SummarySink::spans`], and whether the two were `'static`
/// when the slot was filled.
struct Recent(Box<[(usize, usize, usize, bool)]>);

impl Default for Recent {
    fn default() -> Self {
        Recent(vec![(0, 0, usize::MAX, false); RECENT].into_boxed_slice())
    }
}

impl Recent {
    fn slot(name: &str, target: &str) -> usize {
        let (n, t) = (name.as_ptr() as usize, target.as_ptr() as usize);
        (n ^ (n >> 9) ^ (t >> 3)) & (RECENT - 1)
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
    /// The totals of every span name and target seen, found through `recent`
    /// or `by_text`.
    spans: Vec<(String, String, Acc)>,
    /// Indexes into `spans` by name, then by target: looked up with the
    /// borrowed strings, so a span's end allocates nothing once its call site
    /// has been seen.
    by_text: Names<Names<usize>>,
    /// Indexes into `spans` by the addresses of a name and a target (a call
    /// site's strings are static), confirmed against the text: most span ends
    /// are found here without hashing a string.
    recent: Recent,
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

    /// The index in `spans` of the totals of `name` and `target`, made if new.
    /// `fixed`: both are `'static` ([`trace_core::Site::has_static_text`]).
    #[inline]
    fn index_of(&mut self, name: &str, target: &str, fixed: bool) -> usize {
        let slot = Recent::slot(name, target);
        let (n, t, index, was_fixed) = self.recent.0[slot];
        if n == name.as_ptr() as usize && t == target.as_ptr() as usize {
            if let Some((sn, st, _)) = self.spans.get(index) {
                // `'static` text at the same addresses and lengths is the same
                // text; otherwise the text is what decides.
                let same = if fixed && was_fixed {
                    sn.len() == name.len() && st.len() == target.len()
                } else {
                    sn == name && st == target
                };
                if same {
                    return index;
                }
            }
        }
        let index = self.index_by_text(name, target);
        self.recent.0[slot] = (name.as_ptr() as usize, target.as_ptr() as usize, index, fixed);
        index
    }

    #[cold]
    fn index_by_text(&mut self, name: &str, target: &str) -> usize {
        // Most lookups find an entry: look up before allocating keys.
        if let Some(&index) = self.by_text.get(name).and_then(|t| t.get(target)) {
            return index;
        }
        let index = self.spans.len();
        self.spans.push((name.to_owned(), target.to_owned(), Acc::default()));
        self.by_text.entry(name.to_owned()).or_default().insert(target.to_owned(), index);
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
                let ns = ts.saturating_sub(begin_ts);
                let cpu = cpu.map(|c| c.ns());
                let fixed = site.has_static_text();
                let index = self.index_of(site.name, site.target, fixed);
                if let Some((_, _, acc)) = self.spans.get_mut(index) {
                    acc.add(ns, cpu, unclosed, fields, fixed);
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

    fn wants_span_begins(&self) -> bool {
        // A span's totals come from its end alone.
        false
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
        self.by_text.clear();
        let mut spans: Vec<SpanTotals> = std::mem::take(&mut self.spans)
            .into_iter()
            .map(|(name, target, a)| SpanTotals {
                name,
                target,
                count: a.count,
                total_inclusive_us: a.total_ns / 1000,
                total_inclusive_thread_cpu_us: a.cpu_ns.map(|ns| ns / 1000),
                unclosed: a.unclosed,
                field_sums: a.field_sums.into_iter().map(|(name, sum, _)| (name, sum)).collect(),
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

    static TEXT: &str = "download_bytes";

    #[test]
    fn static_names_at_one_address_with_other_lengths_are_other_names() {
        let mut sink = SummarySink::new();
        // A linker may put a name and its prefix at one address.
        let (long, short) = (TEXT, &TEXT[..8]);
        let a = sink.index_of(long, "t", true);
        assert_eq!(sink.index_of(long, "t", true), a);
        let b = sink.index_of(short, "t", true);
        assert_ne!(a, b, "the prefix is its own span name");
        assert_eq!(sink.index_of(long, "t", true), a);
        assert_eq!(sink.index_of(long, "t", false), a, "found by its text too");

        let mut acc = Acc::default();
        let fields = |n: u64| {
            [Field { name: long, value: Value::U64(n) }, Field { name: short, value: Value::U64(1) }]
        };
        acc.add(1, None, false, &fields(5), true);
        acc.add(1, None, false, &fields(7), true);
        acc.add(1, None, false, &fields(9), false);
        let sums: Vec<(&str, i128)> = acc.field_sums.iter().map(|(n, s, _)| (n.as_str(), *s)).collect();
        assert_eq!(sums, [(long, 21), (short, 3)]);
    }

    #[test]
    fn a_reused_buffer_is_checked_by_its_text_even_after_static_lookups() {
        let mut sink = SummarySink::new();
        let mut buf = String::from("compile");
        let a = sink.index_of(&buf, "t", false);
        buf.replace_range(.., "linking");
        // The slot was filled by a borrowed lookup: its text decides.
        let b = sink.index_of(&buf, "t", true);
        assert_ne!(a, b);
        assert_eq!(sink.spans[b].0, "linking");
    }
}
