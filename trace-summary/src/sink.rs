//! Aggregation on the writer thread: the summary is a sink like the others.

use std::collections::BTreeMap;
use std::io::{self, Write};

use rustc_hash::FxHashMap;
use trace_core::{CpuStacks, Event, Field, Finish, Sink, Start, Value};

use crate::format::{FORMAT_VERSION, NAME, NINJA_AVAILABLE, NINJA_UNAVAILABLE, SUFFIX};
use crate::model::{Lane, Ninja, ResourceSummary, SpanTotals, StackSummary, Timings, TraceFile};

/// The sum of one integer field: exactly what adding each value in turn to an
/// `i128`, saturating at its bounds, gives.
///
/// Most values are added in an `i64` at their position of a call site's field
/// list ([`Position::lo`]), which the hardware checks for overflow in one
/// instruction; such a partial sum moves into `hi` when it would overflow, a
/// value does not fit in it, or the position is taken by another field. While
/// `hi` is at least [`MARGIN`] from `i128`'s bounds no sequence of the
/// partial sums can reach them, so the order of the additions does not
/// matter; nearer (`near_bound`) every value goes to `hi` at once.
struct Sum {
    name: String,
    hi: i128,
    near_bound: bool,
}

/// How far from `i128`'s bounds `hi` stays while values still go to the
/// positions' `i64`s: more than all of them (a few dozen) can hold.
const MARGIN: i128 = 1 << 100;

impl Sum {
    /// Adds `v` to `hi`; true if `hi` is now near the bounds for the first
    /// time.
    fn add_wide(&mut self, v: i128) -> bool {
        self.hi = self.hi.saturating_add(v);
        let near = self.hi >= i128::MAX - MARGIN || self.hi <= i128::MIN + MARGIN;
        let first = near && !self.near_bound;
        self.near_bound |= near;
        first
    }
}

/// The integer field last found at one position of a `'static` call site's
/// field list: its name's address and length, the index of its sum in
/// [`Acc::sums`] ([`NO_SUM`] before one came), and a part of that sum not
/// yet in [`Sum::hi`].
#[derive(Clone, Copy)]
struct Position {
    addr: usize,
    len: usize,
    /// `len` while `lo` takes values (the sum is far from `i128`'s bounds),
    /// else [`NOT_FAST`]: the common case compares one length.
    fast_len: usize,
    lo: i64,
    sum: u32,
}

const NO_SUM: u32 = u32::MAX;

/// [`Position::fast_len`] of a position whose values go to [`Sum::hi`].
const NOT_FAST: usize = usize::MAX;

/// An integer value as an `i64`, if it fits.
#[inline]
fn narrow(value: Value<'_>) -> Option<i64> {
    match value {
        Value::I64(v) => Some(v),
        Value::U64(v) => i64::try_from(v).ok(),
        _ => None,
    }
}

#[derive(Default)]
struct Acc {
    count: u64,
    total_ns: u64,
    /// Thread CPU time of the slices that carried it.
    cpu_ns: Option<u64>,
    unclosed: u64,
    /// In the order the names first came: a span has a few fields, found
    /// faster by a scan than by a tree's string comparisons.
    sums: Vec<Sum>,
    /// The field list of the last end whose names were `'static`: a call
    /// site's fields come in the same order every time, so each field is
    /// recognised by its position, its name's address and its length.
    positions: Vec<Position>,
}

impl Acc {
    /// `fixed`: the fields' names are `'static` ([`trace_core::Site::has_static_text`]).
    #[inline]
    fn add(&mut self, ns: u64, cpu_ns: Option<u64>, unclosed: bool, fields: &[Field<'_>], fixed: bool) {
        self.add_times(ns, cpu_ns, unclosed);
        if !fixed {
            self.add_borrowed(fields);
        } else if let Some(i) = self.add_in_place(fields) {
            self.add_slowly(i, fields);
        }
    }

    #[inline]
    fn add_times(&mut self, ns: u64, cpu_ns: Option<u64>, unclosed: bool) {
        self.count += 1;
        self.total_ns += ns;
        if let Some(cpu) = cpu_ns {
            self.cpu_ns = Some(self.cpu_ns.unwrap_or(0).saturating_add(cpu));
        }
        self.unclosed += u64::from(unclosed);
    }

    /// Adds the fields of a `'static` call site's end that are where
    /// [`Acc::positions`] says, with values that fit: the position of the
    /// first that is not (the rest are not added), if any.
    #[inline]
    fn add_in_place(&mut self, fields: &[Field<'_>]) -> Option<usize> {
        if self.positions.len() != fields.len() {
            return Some(0);
        }
        for (i, (p, f)) in self.positions.iter_mut().zip(fields).enumerate() {
            let v = match f.value {
                Value::I64(v) => v,
                Value::U64(v) if v <= i64::MAX as u64 => v as i64,
                Value::U64(_) => return Some(i),
                // Not summed, wherever it is.
                _ => continue,
            };
            if p.addr == f.name.as_ptr() as usize && p.fast_len == f.name.len() {
                if let Some(lo) = p.lo.checked_add(v) {
                    p.lo = lo;
                    continue;
                }
            }
            return Some(i);
        }
        None
    }

    /// Adds `fields[i..]` where the fast way did not apply to `fields[i]`.
    #[cold]
    #[inline(never)]
    fn add_slowly(&mut self, i: usize, fields: &[Field<'_>]) {
        if self.positions.len() != fields.len() {
            self.resize(fields.len());
        }
        for (i, f) in fields.iter().enumerate().skip(i) {
            self.add_at(i, f);
        }
    }

    /// Adds a `'static` field at position `i`, and remembers where it was.
    fn add_at(&mut self, i: usize, f: &Field<'_>) {
        let Some(v) = f.value.as_integer() else { return };
        let Some(&p) = self.positions.get(i) else { return };
        let (addr, len) = (f.name.as_ptr() as usize, f.name.len());
        let p = if p.addr == addr && p.len == len && p.sum != NO_SUM {
            p
        } else {
            self.flush(i);
            let sum = match self.sums.iter().position(|s| s.name == f.name) {
                Some(at) => at,
                None => self.new_sum(f.name),
            };
            let sum = u32::try_from(sum).unwrap_or(NO_SUM);
            let fast = self.sums.get(sum as usize).is_some_and(|s| !s.near_bound);
            let fast_len = if fast { len } else { NOT_FAST };
            let p = Position { addr, len, fast_len, lo: 0, sum };
            self.positions[i] = p;
            p
        };
        match narrow(f.value).and_then(|v| p.lo.checked_add(v)) {
            Some(lo) if p.fast_len != NOT_FAST => self.positions[i].lo = lo,
            _ => self.add_wide(p.sum, v),
        }
    }

    fn new_sum(&mut self, name: &str) -> usize {
        self.sums.push(Sum { name: name.to_owned(), hi: 0, near_bound: false });
        self.sums.len() - 1
    }

    /// Adds the fields of an end whose names are borrowed, by their names.
    #[cold]
    #[inline(never)]
    fn add_borrowed(&mut self, fields: &[Field<'_>]) {
        for f in fields {
            if let Some(v) = f.value.as_integer() {
                let at = match self.sums.iter().position(|s| s.name == f.name) {
                    Some(at) => at,
                    None => self.new_sum(f.name),
                };
                self.add_wide(u32::try_from(at).unwrap_or(NO_SUM), v);
            }
        }
    }

    /// Adds `v` to `sums[sum]` after every earlier value of it, and stops
    /// the fast way for it near `i128`'s bounds.
    fn add_wide(&mut self, sum: u32, v: i128) {
        for i in 0..self.positions.len() {
            if self.positions[i].sum == sum {
                self.flush(i);
            }
        }
        if self.sums.get_mut(sum as usize).is_some_and(|s| s.add_wide(v)) {
            self.stop_fast(sum);
        }
    }

    /// Sends the values of `sums[sum]`, now near the bounds, to its `hi`.
    fn stop_fast(&mut self, sum: u32) {
        for p in self.positions.iter_mut().filter(|p| p.sum == sum) {
            p.fast_len = NOT_FAST;
        }
    }

    /// Moves the partial sum at position `i` into its sum.
    fn flush(&mut self, i: usize) {
        let Some(p) = self.positions.get_mut(i) else { return };
        let (lo, sum) = (std::mem::take(&mut p.lo), p.sum);
        // Far from the bounds, or `lo` is 0: exact.
        if self.sums.get_mut(sum as usize).is_some_and(|s| s.add_wide(i128::from(lo))) {
            self.stop_fast(sum);
        }
    }

    fn resize(&mut self, len: usize) {
        for i in len..self.positions.len() {
            self.flush(i);
        }
        self.positions.resize(len, Position { addr: 0, len: 0, fast_len: NOT_FAST, lo: 0, sum: NO_SUM });
    }

    /// The sum `sums[at]` with its parts at the positions.
    fn total(&self, at: usize) -> i128 {
        let hi = self.sums.get(at).map_or(0, |s| s.hi);
        // Far from the bounds, or the parts are 0: exact.
        self.positions
            .iter()
            .filter(|p| p.sum as usize == at)
            .fold(hi, |t, p| t.saturating_add(i128::from(p.lo)))
    }

    /// The sums, by name.
    fn into_field_sums(self) -> BTreeMap<String, i128> {
        let totals: Vec<i128> = (0..self.sums.len()).map(|at| self.total(at)).collect();
        self.sums.into_iter().zip(totals).map(|(s, total)| (s.name, total)).collect()
    }
}

/// A map keyed by span names or targets: FxHash, not SipHash, whose rounds
/// cost more than the rest of a span's end (no untrusted input: the names
/// are the program's own).
type Names<V> = FxHashMap<String, V>;

/// Slots of [`Recent`]: a power of two.
const RECENT: usize = 256;

/// A direct-mapped cache from the addresses of a span's name and target to
/// its index in [`SummarySink::spans`].
struct Recent(Box<[Slot; RECENT]>);

/// A slot of [`Recent`]: the addresses and lengths of a name and a target,
/// whether the two were `'static` when the slot was filled (then the
/// addresses and lengths alone decide), and the index.
#[derive(Clone, Copy)]
struct Slot {
    name: (usize, usize),
    target: (usize, usize),
    fixed: bool,
    index: usize,
}

impl Default for Recent {
    fn default() -> Self {
        let empty = Slot { name: (0, 0), target: (0, 0), fixed: false, index: usize::MAX };
        Recent(Box::new([empty; RECENT]))
    }
}

impl Recent {
    fn slot(name: &str, target: &str) -> usize {
        let (n, t) = (name.as_ptr() as usize, target.as_ptr() as usize);
        (n ^ (n >> 9) ^ (t >> 3)) & (RECENT - 1)
    }

    /// The index for `'static` text at the addresses and lengths of a slot
    /// filled by `'static` text: the same text. Otherwise the text is what
    /// decides ([`SummarySink::index_by_slot`]).
    #[inline]
    fn hit(&self, name: &str, target: &str) -> Option<usize> {
        let slot = &self.0[Recent::slot(name, target)];
        let key = ((name.as_ptr() as usize, name.len()), (target.as_ptr() as usize, target.len()));
        (slot.name == key.0 && slot.target == key.1 && slot.fixed).then_some(slot.index)
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
    /// `fixed`: both are `'static` ([`trace_core::Site::has_static_text`]).
    #[inline]
    fn index_of(&mut self, name: &str, target: &str, fixed: bool) -> usize {
        match self.recent.hit(name, target) {
            Some(index) if fixed => index,
            _ => self.index_by_slot(name, target, fixed, Recent::slot(name, target)),
        }
    }

    /// [`SummarySink::index_of`] for text that is not `'static` or not in its
    /// slot.
    #[cold]
    #[inline(never)]
    fn index_by_slot(&mut self, name: &str, target: &str, fixed: bool, at: usize) -> usize {
        let key = ((name.as_ptr() as usize, name.len()), (target.as_ptr() as usize, target.len()));
        if let Some(slot) = self.recent.0.get_mut(at) {
            if slot.name == key.0 && slot.target == key.1 {
                if let Some((sn, st, _)) = self.spans.get(slot.index) {
                    if sn == name && st == target {
                        // `'static` text at these addresses stays there.
                        slot.fixed |= fixed;
                        return slot.index;
                    }
                }
            }
        }
        let index = self.index_by_text(name, target);
        if let Some(slot) = self.recent.0.get_mut(at) {
            *slot = Slot { name: key.0, target: key.1, fixed, index };
        }
        index
    }

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

    /// A span's end not found in [`SummarySink::recent`].
    #[cold]
    #[inline(never)]
    fn span_end(&mut self, event: &Event<'_>) {
        if let Event::SpanEnd { ts, begin_ts, site, fields, unclosed, cpu, .. } = *event {
            let fixed = site.has_static_text();
            let index = self.index_of(site.name, site.target, fixed);
            if let Some((_, _, acc)) = self.spans.get_mut(index) {
                acc.add(ts.saturating_sub(begin_ts), cpu.map(|c| c.ns()), unclosed, fields, fixed);
            }
        }
    }

    /// Every event but a span's end: rarer, kept out of its way.
    #[cold]
    #[inline(never)]
    fn other_event(&mut self, event: &Event<'_>) {
        match *event {
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
        let Event::SpanEnd { site, .. } = event else {
            self.other_event(event);
            return Ok(());
        };
        // The common case calls nothing, so that it saves few registers: a
        // `'static` call site seen before, its fields where they were. The
        // rest of the event is read once the span is found.
        if site.has_static_text() {
            if let Some(index) = self.recent.hit(site.name, site.target) {
                if let Some((_, _, acc)) = self.spans.get_mut(index) {
                    if let Event::SpanEnd { ts, begin_ts, fields, unclosed, cpu, .. } = *event {
                        acc.add_times(ts.saturating_sub(begin_ts), cpu.map(|c| c.ns()), unclosed);
                        if let Some(i) = acc.add_in_place(fields) {
                            acc.add_slowly(i, fields);
                        }
                    }
                    return Ok(());
                }
            }
        }
        self.span_end(event);
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
                field_sums: a.into_field_sums(),
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
        let sums: Vec<(&str, i128)> =
            (0..acc.sums.len()).map(|at| (acc.sums[at].name.as_str(), acc.total(at))).collect();
        assert_eq!(sums, [(long, 21), (short, 3)]);
    }

    /// The sums as every value added in turn to an `i128`, saturating.
    fn one_by_one<'a>(ends: impl IntoIterator<Item = &'a [Field<'a>]>) -> BTreeMap<String, i128> {
        let mut sums = BTreeMap::new();
        for fields in ends {
            for f in fields {
                if let Some(v) = f.value.as_integer() {
                    let sum: &mut i128 = sums.entry(f.name.to_string()).or_default();
                    *sum = sum.saturating_add(v);
                }
            }
        }
        sums
    }

    fn sums(acc: &Acc) -> BTreeMap<String, i128> {
        (0..acc.sums.len()).map(|at| (acc.sums[at].name.clone(), acc.total(at))).collect()
    }

    fn int(name: &str, v: i64) -> Field<'_> {
        Field { name, value: Value::I64(v) }
    }

    #[test]
    fn a_call_site_whose_fields_change_between_ends_sums_each_by_its_name() {
        static A: &str = "requests";
        static B: &str = "rounds";
        // `b` empty at first, then recorded; then a text, then fields swapped.
        let ends: Vec<Vec<Field<'static>>> = vec![
            vec![int(A, 1)],
            vec![int(A, 2), int(B, 10)],
            vec![int(A, 3), int(B, 20)],
            vec![int(A, 4), Field { name: B, value: Value::Str("many") }],
            vec![Field { name: B, value: Value::U64(5) }, int(A, 5)],
            vec![Field { name: A, value: Value::Bool(true) }],
            vec![int(B, 7), Field { name: A, value: Value::F64(1.5) }, int(A, 6)],
            vec![],
            vec![int(A, 7), int(B, 30)],
        ];
        let mut acc = Acc::default();
        for fields in &ends {
            acc.add(1, None, false, fields, true);
        }
        assert_eq!(sums(&acc), one_by_one(ends.iter().map(Vec::as_slice)));
        assert_eq!(sums(&acc)[A], 1 + 2 + 3 + 4 + 5 + 6 + 7);
        assert_eq!(sums(&acc)[B], 10 + 20 + 5 + 7 + 30);
    }

    #[test]
    fn borrowed_field_names_at_a_reused_address_are_told_apart_by_their_text() {
        let mut acc = Acc::default();
        let mut name = String::from("hits");
        acc.add(1, None, false, &[int(&name, 3)], false);
        acc.add(1, None, false, &[int(&name, 4)], false);
        name.replace_range(.., "miss");
        acc.add(1, None, false, &[int(&name, 5)], false);
        // A `'static` name of the same length at another address, then the
        // borrowed one again.
        acc.add(1, None, false, &[int("hits", 6)], true);
        acc.add(1, None, false, &[int(&name, 7)], false);
        let expected: BTreeMap<String, i128> = [("hits".to_string(), 13), ("miss".to_string(), 12)].into();
        assert_eq!(sums(&acc), expected);
    }

    #[test]
    fn sums_near_the_integer_limits_are_what_adding_one_by_one_gives() {
        static N: &str = "n";
        let values = [
            Value::I64(i64::MAX),
            Value::I64(i64::MAX),
            Value::U64(u64::MAX),
            Value::I64(i64::MIN),
            Value::I64(-1),
            Value::U64(i64::MAX as u64 + 1),
            Value::I64(i64::MIN),
            Value::I64(i64::MIN),
            Value::I64(i64::MIN),
            Value::U64(0),
            Value::I64(1),
        ];
        for fixed in [true, false] {
            let mut acc = Acc::default();
            let mut ends = Vec::new();
            for (i, v) in values.iter().cycle().take(200).enumerate() {
                ends.push([Field { name: N, value: *v }, int(N, i as i64 - 100)]);
            }
            for fields in &ends {
                acc.add(1, None, false, fields, fixed);
            }
            assert_eq!(sums(&acc), one_by_one(ends.iter().map(|f| f.as_slice())));
        }
    }

    #[test]
    fn a_part_moved_in_when_its_position_is_taken_can_bring_a_sum_near_the_bounds() {
        static N: &str = "n";
        static OTHER: &str = "other";
        let mut acc = Acc::default();
        acc.add(1, None, false, &[int(N, 0)], true);
        let start = i128::MAX - MARGIN - 10;
        acc.add_wide(0, start);
        acc.add(1, None, false, &[int(N, 5)], true);
        acc.add(1, None, false, &[int(N, 10)], true);
        assert!(!acc.sums[0].near_bound, "the values wait at their position");
        // `n` moves: its part goes into the sum, which is now near the bounds.
        acc.add(1, None, false, &[int(OTHER, 1), int(N, i64::MAX)], true);
        assert!(acc.sums[0].near_bound);
        assert!(acc.positions.iter().all(|p| p.sum != 0 || p.fast_len == NOT_FAST));
        acc.add(1, None, false, &[int(OTHER, 1), int(N, -3)], true);
        let n = start + 5 + 10 + i128::from(i64::MAX) - 3;
        let expected: BTreeMap<String, i128> = [(N.to_string(), n), (OTHER.to_string(), 2)].into();
        assert_eq!(sums(&acc), expected);
    }

    #[test]
    fn a_sum_at_the_bounds_of_i128_saturates_value_by_value() {
        static N: &str = "n";
        let values = [
            Value::U64(u64::MAX),
            Value::I64(i64::MAX),
            Value::I64(i64::MAX),
            Value::I64(i64::MIN),
            Value::U64(u64::MAX),
            Value::I64(-5),
            Value::Str("7"),
            Value::U64(3),
        ];
        let starts = [
            i128::MAX - MARGIN - (1 << 64),
            i128::MIN + MARGIN + (1 << 64),
            i128::MAX - MARGIN + 1,
            i128::MAX - 2,
            i128::MIN + 2,
        ];
        for start in starts {
            for sign in [1i64, -1] {
                let mut acc = Acc::default();
                // Two positions share the sum: each holds a part of it.
                let zero = [int(N, 0), int(N, 0)];
                acc.add(1, None, false, &zero, true);
                acc.add_wide(0, start);
                let mut expected = start;
                for (i, v) in values.iter().cycle().take(80).enumerate() {
                    let v = match *v {
                        Value::I64(v) => Value::I64(v.saturating_mul(sign)),
                        other => other,
                    };
                    let other = int(N, sign * (i as i64 % 3));
                    let fields = [Field { name: N, value: v }, other];
                    acc.add(1, None, false, &fields, true);
                    for f in &fields {
                        expected = expected.saturating_add(f.value.as_integer().unwrap_or(0));
                    }
                    assert_eq!(acc.total(0), expected, "from {start}, after adding {v:?}");
                }
            }
        }
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

    #[test]
    fn a_slot_filled_by_a_borrowed_lookup_of_static_text_is_then_trusted() {
        let mut sink = SummarySink::new();
        let a = sink.index_of(TEXT, "t", false);
        let at = Recent::slot(TEXT, "t");
        assert!(!sink.recent.0[at].fixed);
        assert_eq!(sink.index_of(TEXT, "t", true), a);
        assert!(sink.recent.0[at].fixed, "confirmed by its text once");
        assert_eq!(sink.index_of(TEXT, "t", false), a);
        assert_eq!(sink.spans.len(), 1);
    }
}
