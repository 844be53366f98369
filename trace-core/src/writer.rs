//! The writer: puts every thread's records back in time order, applies each
//! to its span whichever thread wrote it, and feeds the resulting event stream
//! to the sinks.
//!
//! # Merging the threads
//!
//! Batches arrive one thread at a time, and a thread may hold a partial batch
//! for as long as it likes. The writer keeps, for each thread, the batches it
//! has and the stamp up to which it has all of that thread's records (the
//! batch's `until`). A record is applied only once every thread is known up to
//! its stamp; when threads hold the merge back, the writer takes their
//! partial batches itself, all of them at once ([`buffer::steal_all`]),
//! which also tells it that those threads stamped nothing else before that
//! moment. So a span created
//! on one thread, entered on a second and recorded on a third is seen in that
//! order, and its fields reach every file.
//!
//! Most spans are leaves: entered right after their creation and exited and
//! closed with nothing stored between on their thread. Such a span is two
//! adjacent records, a [`Kind::NewEnter`] and a [`Kind::ExitClose`]; when no
//! other thread's record is stamped before its close, the writer sends its
//! begin and end at once, its fields borrowed from the batch, and never puts
//! it in a table or on a thread's stack (`Writer::leaf`), which is most of
//! the writer's work saved for such a span.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;

use crate::buffer::{self, Msg, Taken, ThreadBuf, Threads};
use crate::clock::{Anchors, Near};
use crate::event::{Event, Field, FileStatus, Finish, LaneSlice, Resources, Site, Start, ThreadCpu, Tid};
use crate::record::{raw_value, Batch, Kind, Meta, OwnedLane, Raw};
use crate::sink::{CheckedWriter, Sink};
use crate::stacks::{CpuStacks, SpanIntervals, StacksEnd};

mod fields;
mod span_lives;

use fields::SpanFields;

/// One sink and the file it writes.
pub(crate) struct SinkFile {
    pub sink: Box<dyn Sink>,
    pub out: CheckedWriter<BufWriter<File>>,
    pub path: PathBuf,
    /// The first error the sink itself returned, or its panic (its file is
    /// then incomplete).
    pub error: Option<std::io::Error>,
}

impl SinkFile {
    /// Runs one call of the sink under `catch_unwind`, keeping its error or
    /// its panic: a sink that failed is not called again, its file stays
    /// `.partial`, and the other sinks go on.
    fn call(&mut self, f: impl FnOnce(&mut dyn Sink, &mut dyn Write) -> std::io::Result<()>) {
        if self.error.is_some() {
            return;
        }
        let (sink, out) = (&mut *self.sink, &mut self.out);
        match panic::catch_unwind(AssertUnwindSafe(|| f(sink, out))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => self.error = Some(e),
            Err(payload) => {
                let what = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_string());
                self.error =
                    Some(std::io::Error::other(format!("the {} sink panicked: {what}", self.sink.name())));
            }
        }
    }
}

/// Gives `event` to every sink that has not failed yet.
fn feed(sinks: &mut [SinkFile], event: &Event<'_>) {
    for s in sinks {
        s.call(|sink, out| sink.event(event, out));
    }
}

/// What the capture's start tells the sinks, owned until the writer runs.
#[derive(Default)]
pub(crate) struct StartOwned {
    pub command: String,
    pub stem: String,
    pub pid: u32,
    pub start_unix_ms: u64,
    pub startup_us: Option<u64>,
    pub filter: String,
    pub family: crate::family::Family,
}

/// A map keyed by span ids or flow numbers: FxHash, one multiplication, no
/// SipHash rounds (a span exited before its close reaches two tables).
type IdMap<V> = rustc_hash::FxHashMap<u64, V>;

/// A list of borrowed fields, kept empty between events so that its
/// allocation serves every event of the capture: building an event's fields
/// then costs neither an allocation nor a copy of a fixed-size array.
#[derive(Default)]
struct Scratch(Vec<Field<'static>>);

impl Scratch {
    /// The list, empty, borrowed for one event.
    #[inline]
    fn take<'a>(&mut self) -> Vec<Field<'a>> {
        std::mem::take(&mut self.0)
    }

    /// Gives the list back once the event is fed. Collecting an emptied
    /// vector into one of the same layout keeps its allocation (in place).
    #[inline]
    fn put(&mut self, mut fields: Vec<Field<'_>>) {
        fields.clear();
        self.0 =
            fields.into_iter().map(|_| Field { name: "", value: crate::event::Value::Bool(false) }).collect();
    }
}

/// Appends a span's owned fields to `to`, borrowed.
#[inline]
fn borrow_fields<'a>(to: &mut Vec<Field<'a>>, fields: Option<&'a SpanFields>) {
    if let Some(f) = fields {
        f.borrow_into(to);
    }
}

/// A slice open on a thread.
struct OpenSlice {
    id: u64,
    begin_ts: u64,
    meta: Meta,
    /// Values recorded while the slice is open, which are rare: no list
    /// until one is (boxed, so that the common slice moves fewer bytes).
    recorded: Option<Box<SpanFields>>,
    /// The thread CPU clock at the begin, when read.
    begin_cpu: Option<u64>,
    /// The span's fields, for a span in its first piece since its creation
    /// ([`Kind::NewEnter`]): such a span has no entry in the span table nor
    /// in [`span_lives::SpanLives`] until it is exited without being closed, so the
    /// common span (created, entered, exited, closed) costs no table at all.
    own: Option<SpanFields>,
}

/// What arrived from one thread, in its order.
enum Item {
    Records {
        batch: Batch,
        next: usize,
        bytes: usize,
    },
    /// Records lost from the stamp `from` on (a dropped batch).
    Gap {
        from: u64,
    },
}

impl Item {
    /// The stamp and kind of the item's next record.
    fn head(&self) -> (u64, Kind) {
        match self {
            Item::Records { batch, next, .. } => {
                let r = &batch.raws[*next];
                (r.ts, r.kind)
            }
            Item::Gap { from } => (*from, Kind::NewSpan),
        }
    }
}

/// What arrived out of order, kept until the batches before it are in.
enum Arrival {
    Records { batch: Batch, until: u64, bytes: usize },
    Gap { from: u64, until: u64 },
    Mark { until: u64 },
}

/// The writer's state for one of the capture's threads.
struct ThreadState {
    tid: Tid,
    stack: Vec<OpenSlice>,
    /// The latest time given to this thread's records: a thread's times never
    /// go back, even where two counter reads ran out of order.
    last_ns: u64,
    /// The anchor segment of this thread's latest record ([`Anchors::ns_near`]).
    segment: Near,
    queue: VecDeque<Item>,
    /// The sequence number of the next batch to take in.
    next_seq: u64,
    waiting: BTreeMap<u64, Arrival>,
    /// Every record of this thread stamped before this is in `queue` or applied.
    known_until: u64,
    /// Where a dropped batch began, while spans opened before it may have
    /// lost their ends in it.
    gap_from: Option<u64>,
}

/// The monotonic time of a record of the thread `state` stamped `stamp`, given
/// the tick conversion (`anchors`) or the capture's start (`base`).
#[inline(always)]
fn thread_time(anchors: Option<&Anchors>, base: u64, state: &mut ThreadState, stamp: u64) -> u64 {
    let ns = match anchors {
        Some(anchors) => anchors.ns_near(stamp, &mut state.segment),
        None => base + stamp,
    };
    state.last_ns = state.last_ns.max(ns);
    state.last_ns
}

/// A span's fields, from its creation and later records, while it lives.
type Spans = IdMap<SpanFields>;

pub(crate) struct Writer {
    threads: Arc<Threads>,
    /// The channel, to tell whether more is waiting in it.
    rx: Receiver<Msg>,
    sinks: Vec<SinkFile>,
    thread_states: Vec<Option<ThreadState>>,
    spans: Spans,
    /// Emptied field lists, reused for the next spans.
    spare: Vec<SpanFields>,
    recycle: Sender<Batch>,
    /// The tick conversion, when records carry ticks.
    anchors: Option<Anchors>,
    /// The lists of an event's fields.
    scratch: [Scratch; 2],
    /// Spans that run in pieces, and flows.
    span_lives: span_lives::SpanLives,
    /// Every span's interval on its thread, while CPU stacks are sampled.
    intervals: Option<SpanIntervals>,
}

/// What the writer hands back at the end.
pub(crate) struct Outcome {
    pub files: Vec<FileStatus>,
    pub unclosed_spans: u64,
}

impl Writer {
    /// A writer whose sinks have started.
    pub(crate) fn start(threads: Arc<Threads>, p: Pending) -> Writer {
        let Pending { rx, recycle, mut sinks, start } = p;
        let info = Start {
            command: &start.command,
            stem: &start.stem,
            pid: start.pid,
            start_unix_ms: start.start_unix_ms,
            start_ns: threads.clock.base_mono_ns,
            startup_us: start.startup_us,
            filter: &start.filter,
            family: Some(&start.family),
        };
        for s in &mut sinks {
            s.call(|sink, out| sink.start(&info, out));
        }
        let anchors = threads.clock.ticks.then(|| Anchors::new(threads.clock.first_anchor));
        Writer {
            rx,
            sinks,
            thread_states: Vec::new(),
            spans: IdMap::default(),
            spare: Vec::new(),
            recycle,
            anchors,
            scratch: Default::default(),
            span_lives: span_lives::SpanLives::default(),
            intervals: threads.stacks.started().then(SpanIntervals::default),
            threads,
        }
    }

    /// The writer's state for thread `index`, named to the sinks on first use.
    fn thread_state(&mut self, index: u32) -> &mut ThreadState {
        let i = index as usize;
        if self.thread_states.len() <= i {
            self.thread_states.resize_with(i + 1, || None);
        }
        if self.thread_states[i].is_none() {
            let (tid, name, registered) = {
                let list = self.threads.list.lock();
                let b = &list[i];
                (b.tid, b.name.clone(), b.registered)
            };
            feed(&mut self.sinks, &Event::ThreadName { thread: tid, name: &name });
            self.thread_states[i] = Some(ThreadState {
                tid,
                stack: Vec::new(),
                last_ns: 0,
                segment: Near::NONE,
                queue: VecDeque::new(),
                next_seq: 0,
                waiting: BTreeMap::new(),
                known_until: registered,
                gap_from: None,
            });
        }
        self.thread_states[i].as_mut().expect("created above")
    }

    /// Takes in what arrived from thread `index` as its batch number `seq`.
    fn arrive(&mut self, index: u32, seq: u64, arrival: Arrival) {
        let _ = self.thread_state(index);
        let Some(state) = self.thread_states[index as usize].as_mut() else { return };
        if seq != state.next_seq {
            state.waiting.insert(seq, arrival);
            return;
        }
        let mut next = Some(arrival);
        while let Some(a) = next {
            state.next_seq += 1;
            let until = match a {
                Arrival::Records { mut batch, until, bytes } => {
                    if batch.raws.is_empty() {
                        batch.clear();
                        let _ = self.recycle.try_send(batch);
                        self.threads.handoff.released(bytes);
                    } else {
                        state.queue.push_back(Item::Records { batch, next: 0, bytes });
                    }
                    until
                }
                Arrival::Gap { from, until } => {
                    state.queue.push_back(Item::Gap { from });
                    until
                }
                Arrival::Mark { until } => until,
            };
            state.known_until = state.known_until.max(until);
            next = state.waiting.remove(&state.next_seq);
        }
    }

    fn taken(&mut self, index: u32, taken: Taken) {
        let arrival = match taken.batch {
            Some(batch) => {
                let bytes = batch.bytes();
                self.threads.handoff.taken(bytes);
                Arrival::Records { batch, until: taken.until, bytes }
            }
            None => Arrival::Mark { until: taken.until },
        };
        self.arrive(index, taken.seq, arrival);
    }

    /// The stamp up to which every thread's records are known: the least
    /// `known_until` of the threads the writer has heard from, and the
    /// registration of those it has not.
    fn watermark(&self) -> u64 {
        let list = self.threads.list.lock();
        list.iter()
            .map(|b| match self.thread_states.get(b.index as usize).and_then(Option::as_ref) {
                Some(state) => state.known_until,
                None => b.registered,
            })
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Applies every record that can be put in order now; if a thread holds
    /// the merge back, takes its partial batch and tries again: every thread
    /// that holds it back at once.
    fn advance(&mut self) {
        self.drain(self.watermark());
        // While batches wait in the channel, they may be what holds the merge
        // back: take them in first, and take from the threads only once caught up.
        if !self.rx.is_empty() {
            return;
        }
        let Some(head) = self.least_head() else { return };
        // The threads that hold the merge back and have nothing in flight.
        let behind: Vec<Arc<ThreadBuf>> = {
            let list = self.threads.list.lock();
            list.iter()
                .filter(|b| match self.thread_states.get(b.index as usize).and_then(Option::as_ref) {
                    Some(state) => state.known_until < head && state.waiting.is_empty(),
                    None => b.registered < head,
                })
                .cloned()
                .collect()
        };
        if behind.is_empty() {
            return;
        }
        let handoff = &self.threads.handoff;
        let taken = buffer::steal_all(&behind, &self.threads.clock, || handoff.first_batch());
        for (buf, taken) in behind.iter().zip(taken) {
            if let Some(taken) = taken {
                self.taken(buf.index, taken);
            }
        }
        // Everything taken was stamped before this reading.
        if let Some(anchors) = self.anchors.as_mut() {
            anchors.push_now();
        }
        self.drain(self.watermark());
    }

    /// The least stamp of any thread's next record.
    fn least_head(&self) -> Option<u64> {
        self.thread_states.iter().flatten().filter_map(|l| l.queue.front()).map(|i| i.head().0).min()
    }

    /// Applies, in order of their stamps, every record stamped up to `limit`.
    fn drain(&mut self, limit: u64) {
        loop {
            // The thread with the earliest next record, and the earliest next
            // record of any other thread: this thread's records up to that one
            // go first.
            let mut best: Option<(usize, (u64, Kind))> = None;
            let mut second: Option<(u64, Kind)> = None;
            for (i, state) in self.thread_states.iter().enumerate() {
                let Some(head) = state.as_ref().and_then(|l| l.queue.front()).map(Item::head) else {
                    continue;
                };
                match best {
                    Some((_, b)) if head >= b => second = Some(second.map_or(head, |s| s.min(head))),
                    _ => {
                        if let Some((_, b)) = best {
                            second = Some(second.map_or(b, |s| s.min(b)));
                        }
                        best = Some((i, head));
                    }
                }
            }
            let Some((i, head)) = best else { return };
            if head.0 > limit {
                return;
            }
            let bound = match second {
                Some(s) if s.0 <= limit => s,
                _ => (limit, Kind::Close),
            };
            self.run_thread(i, bound);
        }
    }

    /// Applies thread `i`'s records while they come at or before `bound`.
    fn run_thread(&mut self, i: usize, bound: (u64, Kind)) {
        loop {
            let Some(item) = self.thread_states[i].as_mut().and_then(|l| l.queue.pop_front()) else { return };
            match item {
                Item::Gap { from } => {
                    let Some(state) = self.thread_states[i].as_mut() else { return };
                    if (from, Kind::NewSpan) > bound {
                        state.queue.push_front(Item::Gap { from });
                        return;
                    }
                    if !state.stack.is_empty() {
                        state.gap_from = Some(from);
                    }
                }
                Item::Records { batch, mut next, bytes } => {
                    // Out of its thread's queue while it is applied, so that a record can
                    // reach every thread's slices.
                    while let Some(raw) = batch.raws.get(next) {
                        if (raw.ts, raw.kind) > bound {
                            break;
                        }
                        // A span entered and closed with nothing between on
                        // its thread, and nothing of any other thread stamped
                        // before its close: most spans, sent at once.
                        if let (Kind::NewEnter | Kind::NewEnterCpu, Some(close)) =
                            (raw.kind, batch.raws.get(next + 1))
                        {
                            if close.kind == Kind::ExitClose
                                && close.id == raw.id
                                && (close.ts, close.kind) <= bound
                                && self.leaf(i, &batch, raw, close)
                            {
                                next += 2;
                                continue;
                            }
                        }
                        let raw = *raw;
                        self.apply(i, &batch, &raw);
                        next += 1;
                    }
                    if next < batch.raws.len() {
                        if let Some(state) = self.thread_states[i].as_mut() {
                            state.queue.push_front(Item::Records { batch, next, bytes });
                        }
                        return;
                    }
                    let mut batch = batch;
                    batch.clear();
                    let _ = self.recycle.try_send(batch);
                    self.threads.handoff.released(bytes);
                }
            }
        }
    }

    /// The monotonic time of a record of thread `i` stamped `stamp`.
    #[inline]
    fn time(&mut self, i: usize, stamp: u64) -> u64 {
        let base = self.threads.clock.base_mono_ns;
        match self.thread_states[i].as_mut() {
            Some(l) => thread_time(self.anchors.as_ref(), base, l, stamp),
            None => self.anchors.as_ref().map_or(base + stamp, |a| a.ns(stamp)),
        }
    }

    /// Ends `open` at `ts`; `end_cpu` is the thread CPU clock at its exit
    /// (`None` for a span the writer closes itself).
    fn end_slice(&mut self, tid: Tid, open: OpenSlice, ts: u64, unclosed: bool, end_cpu: Option<u64>) {
        let [a, b] = &mut self.scratch;
        let mut all = a.take();
        borrow_fields(&mut all, open.own.as_ref().or_else(|| self.spans.get(&open.id)));
        let mut recorded = b.take();
        borrow_fields(&mut recorded, open.recorded.as_deref());
        let event = Event::SpanEnd {
            thread: tid,
            ts,
            begin_ts: open.begin_ts,
            site: Site::of(open.meta),
            fields: &all,
            recorded: &recorded,
            unclosed,
            cpu: open.begin_cpu.zip(end_cpu).map(|(begin_ns, end_ns)| ThreadCpu::new(begin_ns, end_ns)),
        };
        if let Some(intervals) = self.intervals.as_mut() {
            intervals.span_end(&event);
        }
        feed(&mut self.sinks, &event);
        a.put(all);
        b.put(recorded);
        if let Some(kept) = open.recorded {
            self.reuse(*kept);
        }
        if let Some(own) = open.own {
            self.reuse(own);
        }
    }

    /// Keeps an emptied field list for a later span.
    #[inline(always)]
    fn reuse(&mut self, mut fields: SpanFields) {
        if self.spare.len() < 1024 && fields.has_room() {
            fields.clear();
            self.spare.push(fields);
        }
    }

    /// Makes the fields of span `id` (from creation and later records) an
    /// entry of the span table: a span in its first piece keeps them in its
    /// open slice ([`OpenSlice::own`]) until it may be entered again.
    fn table_entry(&mut self, id: u64) {
        if self.spans.contains_key(&id) {
            return;
        }
        let found = self.thread_states.iter_mut().flatten().find_map(|l| {
            let tid = l.tid;
            l.stack.iter_mut().find(|o| o.id == id && o.own.is_some()).map(|o| (tid, o))
        });
        let Some((tid, open)) = found else { return };
        let Some(own) = open.own.take() else { return };
        let (meta, begin_ts) = (open.meta, open.begin_ts);
        // Its first piece, noted now that there is a second.
        self.span_lives.first_piece(id, meta, tid, begin_ts);
        self.spans.insert(id, own);
    }

    /// Applies one record of thread `i`.
    fn apply(&mut self, i: usize, batch: &Batch, raw: &Raw) {
        let raw_fields = batch.fields(raw);
        match raw.kind {
            Kind::NewSpan => {
                // Created with no value yet (every field `Empty`), it still gets
                // an entry for the values recorded later.
                let mut owned = self.spare.pop().unwrap_or_default();
                owned.extend(batch, raw_fields);
                if let Some(mut old) = self.spans.insert(raw.id, owned) {
                    old.clear();
                    self.spare.push(old);
                }
            }
            Kind::Record => {
                // No entry and no open slice: the span's close came first (or
                // its creation was lost); nothing is left to carry the values.
                if let Some(entry) = self.spans.get_mut(&raw.id) {
                    for f in raw_fields {
                        entry.set(f.name, batch, &f.value);
                    }
                }
                // A span may be open on any thread; its slices there get the values too.
                for state in self.thread_states.iter_mut().flatten() {
                    for open in state.stack.iter_mut().filter(|o| o.id == raw.id) {
                        for f in raw_fields {
                            open.recorded.get_or_insert_with(Default::default).set(f.name, batch, &f.value);
                            if let Some(own) = open.own.as_mut() {
                                own.set(f.name, batch, &f.value);
                            }
                        }
                    }
                }
            }
            Kind::NewEnter | Kind::NewEnterCpu | Kind::Enter => {
                let Some(meta) = raw.meta else { return };
                let ts = self.time(i, raw.ts);
                let Some(tid) = self.thread_states[i].as_ref().map(|l| l.tid) else { return };
                let own = if raw.kind == Kind::Enter {
                    // Entered while its first piece runs on another thread: that
                    // piece hands its fields to the table, and its life to `span_lives`.
                    self.table_entry(raw.id);
                    self.span_lives.enter(&mut self.sinks, i, tid, raw.id, meta, ts);
                    None
                } else {
                    self.span_lives.arrivals(&mut self.sinks, i, tid, raw.id, ts);
                    let mut own = self.spare.pop().unwrap_or_default();
                    own.extend(batch, raw_fields);
                    Some(own)
                };
                let begin_cpu = batch.thread_cpu_ns(raw);
                self.begin(
                    i,
                    tid,
                    OpenSlice { id: raw.id, begin_ts: ts, meta, recorded: None, begin_cpu, own },
                );
            }
            Kind::Exit | Kind::ExitClose => {
                let ts = self.time(i, raw.ts);
                let closing = raw.kind == Kind::ExitClose;
                if !self.exit(i, raw, ts, closing) && closing {
                    self.close_span(raw.id, ts);
                }
            }
            Kind::Close => {
                let ts = self.time(i, raw.ts);
                self.close_span(raw.id, ts);
            }
            Kind::Follows => {
                let ts = self.time(i, raw.ts);
                if let Some(crate::record::RawValue::U64(origin)) = raw_fields.first().map(|f| f.value) {
                    self.span_lives.follows(&mut self.sinks, &self.thread_states, raw.id, origin, ts);
                }
            }
            Kind::FlowOut => {
                let ts = self.time(i, raw.ts);
                let Some(state) = self.thread_states[i].as_ref() else { return };
                let (tid, open) = (state.tid, !state.stack.is_empty());
                self.span_lives.spawn(&mut self.sinks, tid, open, raw.id, ts);
            }
            Kind::FlowIn => self.span_lives.helper(i, raw.id),
            Kind::Event => {
                let Some(meta) = raw.meta else { return };
                let ts = self.time(i, raw.ts);
                let Some(tid) = self.thread_states[i].as_ref().map(|l| l.tid) else { return };
                let scratch = &mut self.scratch[0];
                let mut fields = scratch.take();
                fields.extend(
                    raw_fields.iter().map(|f| Field { name: f.name, value: raw_value(batch, &f.value) }),
                );
                let event = Event::Instant { thread: tid, ts, site: Site::of(meta), fields: &fields };
                feed(&mut self.sinks, &event);
                scratch.put(fields);
            }
        }
    }

    /// Applies `enter`, the first enter of a span, and `close`, its exit and
    /// close, two records of thread `i` with nothing between them: the span's
    /// begin and end go to the sinks with its fields borrowed from the batch,
    /// and no table or stack of the writer ever holds it. Returns false, having
    /// done nothing, for a record without its call site (the general path
    /// then skips it as it does any such record).
    #[inline]
    fn leaf(&mut self, i: usize, batch: &Batch, enter: &Raw, close: &Raw) -> bool {
        let Some(meta) = enter.meta else { return false };
        let base = self.threads.clock.base_mono_ns;
        let Some(state) = self.thread_states[i].as_mut() else { return false };
        // With one lookup of the thread.
        let begin_ts = thread_time(self.anchors.as_ref(), base, state, enter.ts);
        let ts = thread_time(self.anchors.as_ref(), base, state, close.ts);
        let tid = state.tid;
        // As the exit of a slice that leaves the stack empty does.
        if state.stack.is_empty() {
            state.gap_from = None;
        }
        self.span_lives.arrivals(&mut self.sinks, i, tid, enter.id, begin_ts);
        let scratch = &mut self.scratch[0];
        let mut fields = scratch.take();
        fields.extend(
            batch.fields(enter).iter().map(|f| Field { name: f.name, value: raw_value(batch, &f.value) }),
        );
        let site = Site::of(meta);
        let begin_cpu = batch.thread_cpu_ns(enter);
        let begin =
            Event::SpanBegin { thread: tid, ts: begin_ts, site, fields: &fields, thread_cpu_ns: begin_cpu };
        let cpu =
            begin_cpu.zip(close.thread_cpu_ns()).map(|(begin_ns, end_ns)| ThreadCpu::new(begin_ns, end_ns));
        let end = Event::SpanEnd {
            thread: tid,
            ts,
            begin_ts,
            site,
            fields: &fields,
            recorded: &[],
            unclosed: false,
            cpu,
        };
        feed(&mut self.sinks, &begin);
        if let Some(intervals) = self.intervals.as_mut() {
            intervals.span_end(&end);
        }
        feed(&mut self.sinks, &end);
        scratch.put(fields);
        true
    }

    /// Begins `open`, a slice on thread `i` (`tid`), with the span's fields
    /// from its own (its first piece) or else from the table.
    #[inline]
    fn begin(&mut self, i: usize, tid: Tid, open: OpenSlice) {
        let scratch = &mut self.scratch[0];
        let mut fields = scratch.take();
        borrow_fields(&mut fields, open.own.as_ref().or_else(|| self.spans.get(&open.id)));
        let event = Event::SpanBegin {
            thread: tid,
            ts: open.begin_ts,
            site: Site::of(open.meta),
            fields: &fields,
            thread_cpu_ns: open.begin_cpu,
        };
        feed(&mut self.sinks, &event);
        scratch.put(fields);
        if let Some(state) = self.thread_states[i].as_mut() {
            state.stack.push(open);
        }
    }

    /// Exits span `id` of `raw` on thread `i` at `ts`; `closing`: its close
    /// came with the exit. Returns whether the span was closed here, which it
    /// is only when a slice of it was open on the thread.
    fn exit(&mut self, i: usize, raw: &Raw, ts: u64, closing: bool) -> bool {
        let Some(state) = self.thread_states[i].as_mut() else { return false };
        let tid = state.tid;
        // An exit whose enter was dropped matches nothing: skip it.
        let Some(pos) = state.stack.iter().rposition(|o| o.id == raw.id) else { return false };
        let cpu = raw.thread_cpu_ns();
        if pos + 1 == state.stack.len() {
            // The common case: the innermost span ends.
            let own = state.stack.pop();
            if state.stack.is_empty() {
                state.gap_from = None;
            }
            return own.is_some_and(|own| self.end_piece(tid, own, ts, cpu, closing));
        }
        // Spans above the match lost their exits with a dropped batch:
        // end them where the loss began, not here.
        let gap_ns = state.gap_from.map(|from| match &self.anchors {
            Some(a) => a.ns(from),
            None => self.threads.clock.base_mono_ns + from,
        });
        let above: Vec<OpenSlice> = state.stack.drain(pos + 1..).rev().collect();
        let own = state.stack.pop();
        if state.stack.is_empty() {
            state.gap_from = None;
        }
        for mut open in above {
            // Not closed: a later record of it may still need its fields.
            if let Some(fields) = open.own.take() {
                self.spans.insert(open.id, fields);
            }
            let end = gap_ns.map_or(ts, |g| g.clamp(open.begin_ts, ts));
            self.end_slice(tid, open, end, true, None);
        }
        own.is_some_and(|own| self.end_piece(tid, own, ts, cpu, closing))
    }

    /// Ends `open`, a piece of a span on `tid`, at `ts`; `closing`: the span
    /// closes with it. Returns `closing`.
    fn end_piece(&mut self, tid: Tid, mut open: OpenSlice, ts: u64, cpu: Option<u64>, closing: bool) -> bool {
        if closing && open.own.is_some() {
            // Its one and only piece: no table ever knew it.
            self.end_slice(tid, open, ts, false, cpu);
            return true;
        }
        if let Some(own) = open.own.take() {
            // It may be entered again: from now on the tables know it.
            self.span_lives.first_piece(open.id, open.meta, tid, open.begin_ts);
            if let Some(old) = self.spans.insert(open.id, own) {
                self.reuse(old);
            }
        }
        let id = open.id;
        self.span_lives.exit(id, tid, open.begin_ts, ts);
        self.end_slice(tid, open, ts, false, cpu);
        if closing {
            self.close_span(id, ts);
        }
        closing
    }

    /// Span `id` closed at `ts`: its whole life goes out if it ran in pieces,
    /// and the tables forget it.
    fn close_span(&mut self, id: u64, ts: u64) {
        self.span_lives.close(&mut self.sinks, &self.spans, id, ts);
        if let Some(old) = self.spans.remove(&id) {
            self.reuse(old);
        }
    }

    fn lane_slice(&mut self, lane: OwnedLane) {
        let fields: Vec<Field<'_>> =
            lane.fields.iter().map(|(n, v)| Field { name: n, value: v.as_value() }).collect();
        feed(
            &mut self.sinks,
            &Event::Lane(LaneSlice {
                lane: &lane.lane,
                track: lane.track,
                begin_ns: lane.begin_ns,
                end_ns: lane.end_ns.max(lane.begin_ns),
                name: &lane.name,
                fields: &fields,
            }),
        );
    }

    /// Handles one message; returns the finish's figures when it is the finish.
    fn handle(&mut self, msg: Msg) -> Option<(u64, Resources, Box<StacksEnd>)> {
        match msg {
            Msg::Batch { thread, seq, until, batch, bytes } => {
                // Every record of the batch was stamped before this reading.
                if let Some(anchors) = self.anchors.as_mut() {
                    anchors.push_now();
                }
                self.arrive(thread, seq, Arrival::Records { batch, until, bytes });
            }
            Msg::Gap { thread, seq, from, until } => self.arrive(thread, seq, Arrival::Gap { from, until }),
            Msg::Lane(lane) => self.lane_slice(lane),
            Msg::LaneReport(report) => feed(&mut self.sinks, &Event::LaneReport(&report)),
            Msg::Sample(sample) => feed(&mut self.sinks, &Event::ProcessSample(sample)),
            Msg::Finish { end_rel, resources, stacks } => return Some((end_rel, resources, stacks)),
            Msg::Sync(done) => {
                self.advance();
                let _ = done.send(());
                return None;
            }
        }
        // After every message, not only a batch: while it sat in the channel,
        // the merge did not take the partial batches of the threads holding it
        // back (it takes them only once the channel is empty), and those
        // threads may be waiting for the room that only the merge can make.
        self.advance();
        None
    }

    /// Takes every thread's last records, ends what is still open and
    /// finishes the sinks: the end of a writer thread, or all of a writer
    /// that never started, run by the finishing thread.
    pub(crate) fn finish(mut self, end_rel: u64, resources: Resources, stacks: StacksEnd) -> Outcome {
        // Close every thread's buffer, then take in what was sent before the
        // close, then the buffers' remainders.
        let remainders: Vec<(u32, Taken)> = {
            let list = self.threads.list.lock();
            self.threads.handoff.closed.store(true, Ordering::Release);
            buffer::close_all(&list).into_iter().zip(list.iter()).map(|(t, b)| (b.index, t)).collect()
        };
        if let Some(anchors) = self.anchors.as_mut() {
            anchors.push_now();
        }
        let rx = self.rx.clone();
        while let Ok(msg) = rx.try_recv() {
            match msg {
                Msg::Batch { thread, seq, until, batch, bytes } => {
                    self.arrive(thread, seq, Arrival::Records { batch, until, bytes })
                }
                other => {
                    let _ = self.handle(other);
                }
            }
        }
        for (index, taken) in remainders {
            self.taken(index, taken);
        }
        self.drain(u64::MAX);
        // No record's time is after the end, whichever clock stamped it.
        let last = self.thread_states.iter().flatten().map(|l| l.last_ns).max().unwrap_or(0);
        let end_ns = (self.threads.clock.base_mono_ns + end_rel).max(last);
        let mut unclosed_spans = 0;
        for i in 0..self.thread_states.len() {
            let Some(state) = self.thread_states[i].as_mut() else { continue };
            let tid = state.tid;
            let open: Vec<OpenSlice> = state.stack.drain(..).rev().collect();
            for o in open {
                unclosed_spans += 1;
                self.end_slice(tid, o, end_ns, true, None);
            }
        }
        self.span_lives.finish(&mut self.sinks, &self.spans, end_ns);
        let dropped = self.threads.handoff.dropped.load(Ordering::Relaxed);
        let stacks = CpuStacks::new(stacks, self.intervals.take());
        for s in &mut self.sinks {
            s.call(|sink, out| sink.stacks(&stacks, out));
        }
        let mut files: Vec<FileStatus> = Vec::with_capacity(self.sinks.len());
        for mut s in std::mem::take(&mut self.sinks) {
            let finish =
                Finish { end_ns, dropped_records: dropped, unclosed_spans, files: &files, resources };
            s.call(|sink, out| sink.finish(&finish, out));
            let _ = s.out.flush();
            let (_file, out_err) = s.out.into_parts();
            let err = s.error.or(out_err);
            files.push(FileStatus {
                sink: s.sink.name().to_string(),
                path: s.path,
                complete: err.is_none(),
                error: err.map(|e| e.to_string()),
            });
        }
        Outcome { files, unclosed_spans }
    }
}

/// Everything the writer runs with, until it runs.
pub(crate) struct Pending {
    pub rx: Receiver<Msg>,
    pub recycle: Sender<Batch>,
    pub sinks: Vec<SinkFile>,
    pub start: StartOwned,
}

/// The writer, started on the first batch handed over.
///
/// A short command (a few hundred records on each thread) never fills a batch,
/// so nothing is sent before the capture finishes: its records are then turned
/// into events on the finishing thread, which saves the thread's start and
/// exit. Otherwise the first thread to hand a batch over starts the writer
/// thread. If it cannot be started, the batches wait in the channel (up to
/// the memory budget; past it they are dropped and counted) and the finish
/// processes them.
pub(crate) struct WriterCell {
    /// Set once the writer thread runs, or the finish has taken the writer.
    started: AtomicBool,
    /// The writer still to run (`Inline`), its thread, or neither.
    state: Mutex<Ended>,
    threads: Arc<Threads>,
}

/// Says, when dropped, that the writer thread no longer runs.
struct Running(Arc<Threads>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.handoff.writer_running.store(false, Ordering::Release);
    }
}

/// Where the writer is, for the finish.
pub(crate) enum Ended {
    /// The writer thread is running: send it the finish and join it.
    Thread(JoinHandle<Option<Outcome>>),
    /// It never started: run it here.
    Inline(Pending),
    /// Already finished.
    Gone,
}

impl WriterCell {
    /// A writer for `threads`' capture that will run with `pending`.
    pub(crate) fn new(threads: Arc<Threads>, pending: Pending) -> WriterCell {
        WriterCell { started: AtomicBool::new(false), state: Mutex::new(Ended::Inline(pending)), threads }
    }

    /// Starts the writer thread unless it has started (or the capture has
    /// finished). True when it runs.
    #[inline]
    pub(crate) fn ensure_started(&self) -> bool {
        if !self.started.load(Ordering::Acquire) {
            self.start();
            return self.started.load(Ordering::Acquire);
        }
        true
    }

    #[cold]
    fn start(&self) {
        let mut state = self.state.lock();
        if self.started.load(Ordering::Acquire) || !matches!(*state, Ended::Inline(_)) {
            return;
        }
        #[cfg(test)]
        if tests::REFUSE_SPAWN.get() {
            return;
        }
        let Ended::Inline(pending) = std::mem::replace(&mut *state, Ended::Gone) else { return };
        // The thread takes the writer from here; if it cannot start, it stays.
        let slot = Arc::new(Mutex::new(Some(pending)));
        let (threads, taken) = (self.threads.clone(), slot.clone());
        let spawned = std::thread::Builder::new()
            .name("trace-writer".into())
            // Room for a sink's compressor tables, which an unoptimised build
            // assembles on the stack before moving them to the heap (about
            // 300 KiB for zlib's); the pages are only touched if used.
            .stack_size(1024 * 1024)
            .spawn(move || {
                crate::buffer::ON_WRITER.with(|w| w.set(true));
                // Recording threads stop waiting for room once this thread ends, however it ends.
                let _running = Running(threads.clone());
                let p = taken.lock().take()?;
                Some(run(threads, p))
            });
        match spawned {
            Ok(handle) => {
                *state = Ended::Thread(handle);
                self.threads.handoff.writer_running.store(true, Ordering::Release);
                self.started.store(true, Ordering::Release);
            }
            // The next hand-over tries again, and the finish runs it if none succeeds.
            Err(_) => *state = slot.lock().take().map_or(Ended::Gone, Ended::Inline),
        }
    }

    /// Ends the writer's life as a thread-to-be: returns its thread, or what
    /// it would have run with. Later calls return `Ended::Gone`, and nothing
    /// starts the thread any more.
    pub(crate) fn end(&self) -> Ended {
        let mut state = self.state.lock();
        self.started.store(true, Ordering::Release);
        std::mem::replace(&mut *state, Ended::Gone)
    }
}

/// The writer thread's body.
fn run(threads: Arc<Threads>, p: Pending) -> Outcome {
    let mut w = Writer::start(threads, p);
    let (end_rel, resources, stacks) = loop {
        match w.rx.recv() {
            Ok(msg) => {
                if let Some(end) = w.handle(msg) {
                    break end;
                }
            }
            // Every sender is gone without a finish: end at the last moment we know.
            Err(_) => break (w.threads.clock.rel_now(), Resources::default(), Box::default()),
        }
    };
    w.finish(end_rel, resources, *stacks)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::cell::Cell;

    use super::*;

    thread_local! {
        /// Makes the writer thread fail to start when this thread starts it.
        pub(crate) static REFUSE_SPAWN: Cell<bool> = const { Cell::new(false) };
    }

    #[test]
    fn the_scratch_list_keeps_its_allocation_from_event_to_event() {
        let mut scratch = Scratch::default();
        let text = String::from("borrowed");
        let mut fields = scratch.take();
        fields.extend((0..8).map(|_| Field { name: "f", value: crate::event::Value::Str(&text) }));
        let (ptr, capacity) = (fields.as_ptr() as usize, fields.capacity());
        scratch.put(fields);
        let again = scratch.take();
        assert!(again.is_empty());
        assert_eq!((again.as_ptr() as usize, again.capacity()), (ptr, capacity));
    }
}
