//! The writer thread: turns raw per-thread records into a well-formed event
//! stream and feeds it to the sinks.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;
use tracing_core::Metadata;

use crate::clock::Anchors;
use crate::event::{
    Event, Field, FileStatus, Finish, LaneReport, LaneSlice, Resources, Site, Start, Tid, Value,
};
use crate::layer::{Batch, Kind, RawField, RawValue, Shared};
use crate::sink::{CheckedWriter, Sink};

/// What travels from the capture's threads to the writer.
pub(crate) enum Msg {
    Batch {
        thread: u32,
        batch: Batch,
    },
    Lane(OwnedLane),
    LaneReport(LaneReport),
    Finish {
        end_rel: u64,
        resources: Resources,
    },
    /// Answered once everything sent before it has been processed.
    Sync(Sender<()>),
}

/// An owned field value, kept by the writer while a span lives.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum OwnedValue {
    I64(i64),
    U64(u64),
    F64(f64),
    Bool(bool),
    Str(String),
}

impl OwnedValue {
    pub(crate) fn from_value(v: &Value<'_>) -> OwnedValue {
        match *v {
            Value::I64(v) => OwnedValue::I64(v),
            Value::U64(v) => OwnedValue::U64(v),
            Value::F64(v) => OwnedValue::F64(v),
            Value::Bool(v) => OwnedValue::Bool(v),
            Value::Str(s) => OwnedValue::Str(s.to_string()),
        }
    }

    fn as_value(&self) -> Value<'_> {
        match self {
            OwnedValue::I64(v) => Value::I64(*v),
            OwnedValue::U64(v) => Value::U64(*v),
            OwnedValue::F64(v) => Value::F64(*v),
            OwnedValue::Bool(v) => Value::Bool(*v),
            OwnedValue::Str(s) => Value::Str(s),
        }
    }
}

pub(crate) struct OwnedLane {
    pub lane: String,
    pub track: u32,
    pub begin_ns: u64,
    pub end_ns: u64,
    pub name: String,
    pub fields: Vec<(String, OwnedValue)>,
}

/// One sink and the file it writes.
pub(crate) struct SinkFile {
    pub sink: Box<dyn Sink>,
    pub out: CheckedWriter<BufWriter<File>>,
    pub path: PathBuf,
    /// The first error the sink itself returned (its file is then incomplete).
    pub error: Option<std::io::Error>,
}

impl SinkFile {
    fn keep(&mut self, r: std::io::Result<()>) {
        if let Err(e) = r {
            self.error.get_or_insert(e);
        }
    }
}

/// Gives `event` to every sink that has not failed yet.
fn feed(sinks: &mut [SinkFile], event: &Event<'_>) {
    for s in sinks {
        if s.error.is_none() {
            let r = s.sink.event(event, &mut s.out);
            s.keep(r);
        }
    }
}

pub(crate) struct StartOwned {
    pub command: String,
    pub stem: String,
    pub pid: u32,
    pub start_unix_ms: u64,
    pub startup_us: Option<u64>,
    pub filter: String,
}

struct Open {
    id: u64,
    begin_ts: u64,
    meta: &'static Metadata<'static>,
    recorded: Vec<(&'static str, OwnedValue)>,
}

struct ThreadState {
    tid: Tid,
    stack: Vec<Open>,
    /// The latest time given to this thread's records: a thread's times never
    /// go back, even where two counter reads ran out of order.
    last_ns: u64,
}

fn raw_value<'b>(batch: &'b Batch, v: &RawValue) -> Value<'b> {
    match *v {
        RawValue::I64(v) => Value::I64(v),
        RawValue::U64(v) => Value::U64(v),
        RawValue::F64(v) => Value::F64(v),
        RawValue::Bool(v) => Value::Bool(v),
        RawValue::Str { start, len } => Value::Str(batch.str_of(start, len)),
    }
}

/// Fields borrowed for one event; up to `INLINE` of them without touching the heap.
struct FieldBuf<'a> {
    inline: [Field<'a>; INLINE],
    len: usize,
    spill: Vec<Field<'a>>,
}

const INLINE: usize = 6;
const NO_FIELD: Field<'static> = Field { name: "", value: Value::Bool(false) };

impl<'a> FieldBuf<'a> {
    #[inline]
    fn new(iter: impl ExactSizeIterator<Item = Field<'a>>) -> Self {
        let mut buf = FieldBuf { inline: [NO_FIELD; INLINE], len: 0, spill: Vec::new() };
        if iter.len() == 0 {
            return buf;
        }
        if iter.len() > INLINE {
            buf.spill = iter.collect();
        } else {
            for f in iter {
                buf.inline[buf.len] = f;
                buf.len += 1;
            }
        }
        buf
    }

    fn owned(fields: Option<&'a Vec<(&'static str, OwnedValue)>>) -> Self {
        match fields {
            Some(f) => Self::new(f.iter().map(|(name, v)| Field { name, value: v.as_value() })),
            None => Self::new(std::iter::empty()),
        }
    }

    fn as_slice(&self) -> &[Field<'a>] {
        if self.spill.is_empty() {
            &self.inline[..self.len]
        } else {
            &self.spill
        }
    }
}

/// A hasher for span ids: one multiplication, no SipHash rounds.
#[derive(Default, Clone, Copy)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type IdMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<IdHasher>>;
type OwnedFields = Vec<(&'static str, OwnedValue)>;

fn set_field(fields: &mut Vec<(&'static str, OwnedValue)>, name: &'static str, value: OwnedValue) {
    match fields.iter_mut().find(|(n, _)| *n == name) {
        Some(slot) => slot.1 = value,
        None => fields.push((name, value)),
    }
}

struct Writer {
    shared: Arc<Shared>,
    sinks: Vec<SinkFile>,
    threads: Vec<Option<ThreadState>>,
    span_fields: IdMap<OwnedFields>,
    /// Emptied field lists, reused for the next spans.
    spare: Vec<OwnedFields>,
    recycle: Sender<Batch>,
    /// The tick conversion, when records carry ticks.
    anchors: Option<Anchors>,
}

impl Writer {
    fn emit(&mut self, event: &Event<'_>) {
        feed(&mut self.sinks, event);
    }

    fn abs(&self, rel: u64) -> u64 {
        self.shared.base_mono_ns + rel
    }

    /// The monotonic time of a record of thread `i` stamped `stamp`.
    #[inline]
    fn time(&mut self, i: usize, stamp: u64) -> u64 {
        let ns = match &self.anchors {
            Some(anchors) => anchors.ns(stamp),
            None => self.shared.base_mono_ns + stamp,
        };
        match self.threads[i].as_mut() {
            Some(t) => {
                t.last_ns = t.last_ns.max(ns);
                t.last_ns
            }
            None => ns,
        }
    }

    fn thread(&mut self, index: u32) -> Tid {
        let i = index as usize;
        if self.threads.len() <= i {
            self.threads.resize_with(i + 1, || None);
        }
        if let Some(t) = &self.threads[i] {
            return t.tid;
        }
        let (tid, name) = {
            let threads = self.shared.threads.lock();
            let b = &threads[i];
            (b.tid, b.name.clone())
        };
        self.threads[i] = Some(ThreadState { tid, stack: Vec::new(), last_ns: 0 });
        self.emit(&Event::ThreadName { thread: tid, name: &name });
        tid
    }

    fn end_slice(&mut self, tid: Tid, open: Open, ts: u64, unclosed: bool) {
        let all = FieldBuf::owned(self.span_fields.get(&open.id));
        let recorded = FieldBuf::owned(Some(&open.recorded));
        let event = Event::SpanEnd {
            thread: tid,
            ts,
            begin_ts: open.begin_ts,
            site: Site::of(open.meta),
            fields: all.as_slice(),
            recorded: recorded.as_slice(),
            unclosed,
        };
        feed(&mut self.sinks, &event);
    }

    fn batch(&mut self, index: u32, batch: Batch) {
        // Every record of the batch was stamped before this reading.
        if let Some(anchors) = self.anchors.as_mut() {
            anchors.push_now();
        }
        let tid = self.thread(index);
        let i = index as usize;
        for raw in &batch.raws {
            let raw_fields: &[RawField] =
                &batch.values[raw.fields_start as usize..(raw.fields_start + raw.fields_len) as usize];
            match raw.kind {
                Kind::NewSpan => {
                    if raw_fields.is_empty() {
                        continue;
                    }
                    let mut owned = self.spare.pop().unwrap_or_default();
                    owned.extend(
                        raw_fields
                            .iter()
                            .map(|f| (f.name, OwnedValue::from_value(&raw_value(&batch, &f.value)))),
                    );
                    if let Some(mut old) = self.span_fields.insert(raw.id, owned) {
                        old.clear();
                        self.spare.push(old);
                    }
                }
                Kind::Record => {
                    let entry = self.span_fields.entry(raw.id).or_default();
                    for f in raw_fields {
                        set_field(entry, f.name, OwnedValue::from_value(&raw_value(&batch, &f.value)));
                    }
                    // A span may be open on any thread; its slices there get the late values too.
                    for t in self.threads.iter_mut().flatten() {
                        for open in t.stack.iter_mut().filter(|o| o.id == raw.id) {
                            for f in raw_fields {
                                set_field(
                                    &mut open.recorded,
                                    f.name,
                                    OwnedValue::from_value(&raw_value(&batch, &f.value)),
                                );
                            }
                        }
                    }
                }
                Kind::Enter => {
                    let Some(meta) = raw.meta else { continue };
                    let ts = self.time(i, raw.ts);
                    let fields = FieldBuf::owned(self.span_fields.get(&raw.id));
                    let event =
                        Event::SpanBegin { thread: tid, ts, site: Site::of(meta), fields: fields.as_slice() };
                    feed(&mut self.sinks, &event);
                    if let Some(t) = self.threads[i].as_mut() {
                        t.stack.push(Open { id: raw.id, begin_ts: ts, meta, recorded: Vec::new() });
                    }
                }
                Kind::Exit => {
                    let ts = self.time(i, raw.ts);
                    let Some(t) = self.threads[i].as_mut() else { continue };
                    // An exit whose enter was dropped matches nothing: skip it. Spans
                    // above the match lost their exits with a dropped batch: close them here.
                    let Some(pos) = t.stack.iter().rposition(|o| o.id == raw.id) else { continue };
                    let lost_ends = t.stack.len() - 1 - pos;
                    for _ in 0..lost_ends {
                        if let Some(open) = self.threads[i].as_mut().and_then(|t| t.stack.pop()) {
                            self.end_slice(tid, open, ts, true);
                        }
                    }
                    if let Some(own) = self.threads[i].as_mut().and_then(|t| t.stack.pop()) {
                        self.end_slice(tid, own, ts, false);
                    }
                }
                Kind::Close => {
                    if let Some(mut old) = self.span_fields.remove(&raw.id) {
                        if self.spare.len() < 1024 {
                            old.clear();
                            self.spare.push(old);
                        }
                    }
                }
                Kind::Event => {
                    let Some(meta) = raw.meta else { continue };
                    let fields: Vec<Field<'_>> = raw_fields
                        .iter()
                        .map(|f| Field { name: f.name, value: raw_value(&batch, &f.value) })
                        .collect();
                    let ts = self.time(i, raw.ts);
                    let event = Event::Instant { thread: tid, ts, site: Site::of(meta), fields: &fields };
                    feed(&mut self.sinks, &event);
                }
            }
        }
        let mut batch = batch;
        batch.clear();
        let _ = self.recycle.try_send(batch);
    }

    fn lane(&mut self, lane: OwnedLane) {
        let fields: Vec<Field<'_>> =
            lane.fields.iter().map(|(n, v)| Field { name: n, value: v.as_value() }).collect();
        self.emit(&Event::Lane(LaneSlice {
            lane: &lane.lane,
            track: lane.track,
            begin_ns: lane.begin_ns,
            end_ns: lane.end_ns.max(lane.begin_ns),
            name: &lane.name,
            fields: &fields,
        }));
    }

    fn handle(&mut self, msg: Msg) -> Option<(u64, Resources)> {
        match msg {
            Msg::Batch { thread, batch } => self.batch(thread, batch),
            Msg::Lane(lane) => self.lane(lane),
            Msg::LaneReport(report) => self.emit(&Event::LaneReport(&report)),
            Msg::Finish { end_rel, resources } => return Some((end_rel, resources)),
            Msg::Sync(done) => {
                let _ = done.send(());
            }
        }
        None
    }

    fn finish(mut self, rx: &Receiver<Msg>, end_rel: u64, resources: Resources) -> Vec<FileStatus> {
        // Close every thread's buffer, then drain what was sent before the close,
        // then the buffers' remainders: each thread's records stay in order.
        let remainders: Vec<(u32, Batch)> = {
            let threads = self.shared.threads.lock();
            self.shared.closed.store(true, Ordering::Release);
            threads
                .iter()
                .map(|b| {
                    let mut local = b.claim();
                    local.closed = true;
                    b.closed.store(true, Ordering::Relaxed);
                    (b.index, std::mem::take(&mut local.batch))
                })
                .collect()
        };
        while let Ok(msg) = rx.try_recv() {
            let _ = self.handle(msg);
        }
        for (index, batch) in remainders {
            self.batch(index, batch);
        }
        // No record's time is after the end, whichever clock stamped it.
        let last = self.threads.iter().flatten().map(|t| t.last_ns).max().unwrap_or(0);
        let end_ns = self.abs(end_rel).max(last);
        for i in 0..self.threads.len() {
            let Some(t) = self.threads[i].as_mut() else { continue };
            let tid = t.tid;
            let open: Vec<Open> = t.stack.drain(..).rev().collect();
            for o in open {
                self.end_slice(tid, o, end_ns, true);
            }
        }
        let dropped = self.shared.dropped.load(Ordering::Relaxed);
        let mut files: Vec<FileStatus> = Vec::with_capacity(self.sinks.len());
        for mut s in std::mem::take(&mut self.sinks) {
            let finish = Finish { end_ns, dropped_records: dropped, files: &files, resources };
            if s.error.is_none() {
                let r = s.sink.finish(&finish, &mut s.out);
                s.keep(r);
            }
            let _ = s.out.flush();
            let (_file, out_err) = s.out.into_parts();
            let err = out_err.or(s.error);
            files.push(FileStatus {
                sink: s.sink.name().to_string(),
                path: s.path,
                complete: err.is_none(),
                error: err.map(|e| e.to_string()),
            });
        }
        files
    }
}

/// Everything the writer runs with, until it runs.
pub(crate) struct Pending {
    pub rx: Receiver<Msg>,
    pub recycle: Sender<Batch>,
    pub sinks: Vec<SinkFile>,
    pub start: StartOwned,
}

/// The writer, started on the first message sent to it.
///
/// A short command (a few hundred records on each thread) never fills a batch,
/// so nothing is sent before the capture finishes: its records are then turned
/// into events on the finishing thread, which saves the thread's start and
/// exit (about 55 µs, a third of a short capture's fixed cost). Otherwise the
/// first thread to hand a batch over starts the writer thread. If the thread
/// cannot be started, the messages wait in the channel (and are dropped and
/// counted once it is full) and the finish processes them.
#[derive(Default)]
pub(crate) struct WriterCell {
    started: AtomicBool,
    /// What the writer runs with; taken by the writer thread or by the finish.
    pending: Arc<Mutex<Option<Pending>>>,
    thread: Mutex<Option<JoinHandle<Option<Vec<FileStatus>>>>>,
    /// The capture's state, for the writer thread.
    shared: Weak<Shared>,
}

/// How the writer ended, for the finish.
pub(crate) enum Ended {
    /// The writer thread is running: send it the finish and join it.
    Thread(JoinHandle<Option<Vec<FileStatus>>>),
    /// It never started: run it here.
    Inline(Pending),
    /// Already finished, or never had anything to write.
    Gone,
}

impl WriterCell {
    /// A writer for `shared`'s capture that will run with `pending`.
    pub(crate) fn new(shared: Weak<Shared>, pending: Pending) -> WriterCell {
        WriterCell {
            started: AtomicBool::new(false),
            pending: Arc::new(Mutex::new(Some(pending))),
            thread: Mutex::new(None),
            shared,
        }
    }

    /// Starts the writer thread unless it has started (or the capture has
    /// finished). Called before anything is sent to the writer.
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
        let mut thread = self.thread.lock();
        if self.started.load(Ordering::Acquire) || self.pending.lock().is_none() {
            return;
        }
        let Some(shared) = self.shared.upgrade() else { return };
        #[cfg(test)]
        if tests::REFUSE_SPAWN.get() {
            return;
        }
        let pending = self.pending.clone();
        let spawned = std::thread::Builder::new()
            .name("trace-writer".into())
            // Room for a sink's compressor tables, which an unoptimised build
            // assembles on the stack before moving them to the heap (about
            // 300 KiB for zlib's); the pages are only touched if used.
            .stack_size(1024 * 1024)
            .spawn(move || {
                let p = pending.lock().take()?;
                Some(run(shared, p))
            });
        // On failure the pending writer stays here: the next send tries again,
        // and the finish runs it if none succeeds.
        if let Ok(handle) = spawned {
            *thread = Some(handle);
            self.started.store(true, Ordering::Release);
        }
    }

    /// Ends the writer's life as a thread-to-be: returns its thread, or what
    /// it would have run with. Later calls return `Ended::Gone`, and nothing
    /// starts the thread any more.
    pub(crate) fn end(&self) -> Ended {
        let mut thread = self.thread.lock();
        let was_started = self.started.swap(true, Ordering::AcqRel);
        if let Some(handle) = thread.take() {
            return Ended::Thread(handle);
        }
        if was_started {
            return Ended::Gone;
        }
        match self.pending.lock().take() {
            Some(p) => Ended::Inline(p),
            None => Ended::Gone,
        }
    }
}

/// Runs a writer that never started on the calling thread, from its sinks'
/// start to their finish, after every thread's records are in.
pub(crate) fn run_inline(
    shared: Arc<Shared>,
    p: Pending,
    end_rel: u64,
    resources: Resources,
) -> Vec<FileStatus> {
    let rx = p.rx.clone();
    let w = Writer::start(shared, p);
    w.finish(&rx, end_rel, resources)
}

/// The writer thread's body. Returns the fate of each sink's file.
pub(crate) fn run(shared: Arc<Shared>, p: Pending) -> Vec<FileStatus> {
    let rx = p.rx.clone();
    let mut w = Writer::start(shared, p);
    let (end_rel, resources) = loop {
        match rx.recv() {
            Ok(msg) => {
                if let Some(end) = w.handle(msg) {
                    break end;
                }
            }
            // Every sender is gone without a finish: end at the last moment we know.
            Err(_) => break (w.shared.rel_now(), Resources::default()),
        }
    };
    w.finish(&rx, end_rel, resources)
}

impl Writer {
    /// A writer whose sinks have started.
    fn start(shared: Arc<Shared>, p: Pending) -> Writer {
        let Pending { rx: _, recycle, mut sinks, start } = p;
        let info = Start {
            command: &start.command,
            stem: &start.stem,
            pid: start.pid,
            start_unix_ms: start.start_unix_ms,
            start_ns: shared.base_mono_ns,
            startup_us: start.startup_us,
            filter: &start.filter,
        };
        for s in &mut sinks {
            let r = s.sink.start(&info, &mut s.out);
            s.keep(r);
        }
        let anchors = shared.ticks.then(|| Anchors::new(shared.first_anchor));
        Writer {
            shared,
            sinks,
            threads: Vec::new(),
            span_fields: IdMap::default(),
            spare: Vec::new(),
            recycle,
            anchors,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::io::{self, Write};
    use std::sync::atomic::AtomicU64;

    use super::*;
    use crate::{Config, Event, Finish, LaneSlice, Session, Sink};

    thread_local! {
        /// Makes the writer thread fail to start when this thread starts it.
        pub(crate) static REFUSE_SPAWN: Cell<bool> = const { Cell::new(false) };
    }

    /// Counts span ends and lane slices.
    struct Count(Arc<AtomicU64>, Arc<AtomicU64>);

    impl Sink for Count {
        fn name(&self) -> &'static str {
            "count"
        }
        fn suffix(&self) -> &'static str {
            "count.txt"
        }
        fn event(&mut self, event: &Event<'_>, _out: &mut dyn Write) -> io::Result<()> {
            match event {
                Event::SpanEnd { .. } => self.0.fetch_add(1, Ordering::Relaxed),
                Event::Lane(_) => self.1.fetch_add(1, Ordering::Relaxed),
                _ => 0,
            };
            Ok(())
        }
        fn finish(&mut self, _end: &Finish<'_>, _out: &mut dyn Write) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_writer_thread_that_cannot_start_blocks_nothing_and_loses_only_what_it_counts() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::from_lookup("T", &[], |n| (n == "T_TRACE_DIR").then(|| dir.path().into()))
            .unwrap()
            .unwrap();
        let (spans, lanes) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let session =
            Session::start(&config, "no-thread", vec![Box::new(Count(spans.clone(), lanes.clone()))])
                .unwrap();
        REFUSE_SPAWN.set(true);
        // Far more batches and lanes than the channel holds (256 messages).
        const SPANS: u64 = 300_000;
        const LANES: u64 = 1_000;
        session.in_scope(|| {
            for _ in 0..SPANS {
                let _s = tracing::info_span!("work").entered();
            }
            let h = crate::current().unwrap();
            for i in 0..LANES {
                h.lane_slice(&LaneSlice {
                    lane: "ninja",
                    track: 0,
                    begin_ns: i,
                    end_ns: i + 1,
                    name: "a.o",
                    fields: &[],
                });
            }
        });
        session.flush();
        let report = session.finish();
        REFUSE_SPAWN.set(false);
        let (spans, lanes) = (spans.load(Ordering::Relaxed), lanes.load(Ordering::Relaxed));
        assert!(
            spans < SPANS && lanes < LANES,
            "the channel cannot hold it all: {spans} spans, {lanes} lanes"
        );
        assert!(spans > 0, "what the channel held is written at the finish");
        // A span without fields is two records, an enter and an exit, and a
        // batch holds a whole number of them: a missing span is two records
        // counted, a missing lane one.
        let missing = 2 * (SPANS - spans) + (LANES - lanes);
        assert_eq!(report.dropped_records, missing, "{spans} spans and {lanes} lanes arrived");
        assert!(report.files.iter().all(|f| f.complete), "{:?}", report.files);
        assert!(report.warnings().iter().any(|w| w.contains("dropped")), "{:?}", report.warnings());
    }
}
