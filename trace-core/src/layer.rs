//! The hot path: raw records stored in a per-thread, per-capture buffer and
//! handed in full batches to the writer thread, by a `tracing` layer on the
//! registry ([`CaptureLayer`]) or by the capture's own subscriber
//! ([`crate::subscriber`]), which share this code.
//!
//! The calling thread stores only what it has to: a timestamp relative to the
//! capture's start, the span id, a `&'static` callsite, and field values
//! (integers as they are, text appended to the batch's own string). Buffers are
//! recycled by the writer thread, so in steady state nothing is allocated.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use parking_lot::{Mutex, RwLock};
use tracing_core::field::{Field as TField, Visit};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event as TEvent, Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::clock::{self, Anchor};
use crate::event::Tid;
use crate::subscriber::SpanRing;
use crate::writer::{Msg, WriterCell};

/// Records per batch before it is handed to the writer.
pub(crate) const BATCH_RECORDS: usize = 1024;
/// Text bytes per batch before it is handed to the writer.
pub(crate) const BATCH_TEXT: usize = 64 * 1024;
/// Batches in flight to the writer before producers start dropping.
pub(crate) const CHANNEL_BATCHES: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    NewSpan,
    Record,
    Enter,
    Exit,
    Close,
    Event,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Raw {
    pub kind: Kind,
    pub id: u64,
    pub ts: u64,
    pub meta: Option<&'static Metadata<'static>>,
    pub fields_start: u32,
    pub fields_len: u32,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum RawValue {
    I64(i64),
    U64(u64),
    F64(f64),
    Bool(bool),
    Str { start: u32, len: u32 },
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct RawField {
    pub name: &'static str,
    pub value: RawValue,
}

/// One thread's records, in order.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub raws: Vec<Raw>,
    pub values: Vec<RawField>,
    pub text: String,
}

impl Batch {
    fn with_capacity() -> Batch {
        Batch {
            raws: Vec::with_capacity(BATCH_RECORDS),
            values: Vec::with_capacity(BATCH_RECORDS),
            text: String::with_capacity(4096),
        }
    }

    pub(crate) fn clear(&mut self) {
        self.raws.clear();
        self.values.clear();
        self.text.clear();
    }

    fn is_full(&self) -> bool {
        self.raws.len() >= BATCH_RECORDS || self.text.len() >= BATCH_TEXT
    }

    pub(crate) fn str_of(&self, start: u32, len: u32) -> &str {
        self.text.get(start as usize..(start + len) as usize).unwrap_or("")
    }
}

/// A thread's buffer for one capture.
///
/// Only its thread writes to it, except once: when the capture finishes, the
/// writer thread takes what is left. A flag instead of a lock keeps the hot
/// path to one atomic swap and one plain store per record.
///
/// Aligned so that two threads' buffers never share a cache line.
#[repr(align(128))]
pub(crate) struct ThreadBuf {
    pub index: u32,
    pub tid: Tid,
    pub name: String,
    /// Set by whoever has `local`: see [`ThreadBuf::try_claim`].
    busy: AtomicBool,
    /// Set once the capture has taken this buffer's last records.
    pub closed: AtomicBool,
    local: UnsafeCell<Local>,
    /// The callsites of the spans this thread created lately, for the capture's
    /// own subscriber (unused under the registry).
    pub spans: SpanRing,
}

// SAFETY: `local` is reached only through a `Claim`, and a `Claim` exists only
// for whoever swapped `busy` from false to true, until it stores false again:
// one party at a time. `Local` itself is `Send`.
unsafe impl Sync for ThreadBuf {}

impl ThreadBuf {
    pub(crate) fn new(index: u32, tid: Tid, name: String, batch: Batch) -> ThreadBuf {
        ThreadBuf {
            index,
            tid,
            name,
            busy: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            local: UnsafeCell::new(Local { batch, closed: false }),
            spans: SpanRing::new(),
        }
    }

    /// Exclusive access to the buffer, unless another party has it (only the
    /// writer thread, while it closes the buffer).
    #[inline]
    pub(crate) fn try_claim(&self) -> Option<Claim<'_>> {
        if self.busy.swap(true, Ordering::Acquire) {
            None
        } else {
            Some(Claim { buf: self })
        }
    }

    /// Exclusive access, waiting for the owning thread to finish its record.
    pub(crate) fn claim(&self) -> Claim<'_> {
        loop {
            if let Some(c) = self.try_claim() {
                return c;
            }
            std::thread::yield_now();
        }
    }
}

/// Exclusive access to a [`ThreadBuf`]'s records; released when dropped.
pub(crate) struct Claim<'a> {
    buf: &'a ThreadBuf,
}

impl std::ops::Deref for Claim<'_> {
    type Target = Local;
    fn deref(&self) -> &Local {
        // SAFETY: this claim is the only access to `local` (see `ThreadBuf`).
        unsafe { &*self.buf.local.get() }
    }
}

impl std::ops::DerefMut for Claim<'_> {
    fn deref_mut(&mut self) -> &mut Local {
        // SAFETY: this claim is the only access to `local` (see `ThreadBuf`).
        unsafe { &mut *self.buf.local.get() }
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.buf.busy.store(false, Ordering::Release);
    }
}

pub(crate) struct Local {
    pub batch: Batch,
    pub closed: bool,
}

impl Local {
    /// Appends a record without fields.
    #[inline]
    pub(crate) fn raw(&mut self, kind: Kind, id: u64, ts: u64, meta: Option<&'static Metadata<'static>>) {
        self.batch.raws.push(Raw { kind, id, ts, meta, fields_start: 0, fields_len: 0 });
    }

    /// Appends a record with the fields `record` visits.
    #[inline]
    pub(crate) fn raw_fields(
        &mut self,
        kind: Kind,
        id: u64,
        ts: u64,
        meta: Option<&'static Metadata<'static>>,
        record: impl FnOnce(&mut dyn Visit),
    ) {
        let b = &mut self.batch;
        let start = b.values.len();
        record(&mut FieldVisitor { batch: b });
        let len = b.values.len() - start;
        b.raws.push(Raw { kind, id, ts, meta, fields_start: start as u32, fields_len: len as u32 });
    }
}

/// State shared by the layer, the writer thread and the session.
pub(crate) struct Shared {
    pub capture_id: u64,
    pub base: Instant,
    pub base_mono_ns: u64,
    /// Whether records carry time-stamp counter ticks ([`crate::clock`])
    /// rather than nanoseconds since `base_mono_ns`.
    pub ticks: bool,
    /// The first anchor of the tick conversion, read with `base_mono_ns`.
    pub first_anchor: Anchor,
    pub tx: Sender<Msg>,
    pub recycle: Receiver<Batch>,
    pub threads: Mutex<Vec<Arc<ThreadBuf>>>,
    /// The same buffers, by index, for the rare lookups of another thread's
    /// spans. A lock of its own: the writer holds `threads` while it waits for
    /// the threads to release their buffers, so a thread must never wait for
    /// `threads` while it holds its own buffer; this lock is only ever held
    /// for an index.
    pub by_index: RwLock<Vec<Arc<ThreadBuf>>>,
    pub closed: AtomicBool,
    pub dropped: AtomicU64,
    pub late: AtomicU64,
    /// Per external lane, the end of the last slice on each of its tracks.
    pub lane_tracks: Mutex<Vec<(String, Vec<u64>)>>,
    /// The writer, started by the first message sent to it.
    pub writer: WriterCell,
    /// The children the command's helpers waited for ([`crate::Handle::child_exited`]).
    pub children: crate::os::ChildTotals,
}

impl Shared {
    /// A new capture's state, starting now; `tx` reaches its writer, which
    /// sends emptied batches back through `recycle`.
    pub(crate) fn new(tx: Sender<Msg>, recycle: Receiver<Batch>) -> Shared {
        let ticks = clock::counter_usable();
        let first_anchor =
            if ticks { Anchor::now() } else { Anchor { tick: 0, ns: crate::os::monotonic_ns() } };
        Shared {
            capture_id: next_capture_id(),
            base: Instant::now(),
            base_mono_ns: first_anchor.ns,
            ticks,
            first_anchor,
            tx,
            recycle,
            threads: Mutex::new(Vec::new()),
            by_index: RwLock::new(Vec::new()),
            closed: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            late: AtomicU64::new(0),
            lane_tracks: Mutex::new(Vec::new()),
            writer: WriterCell::default(),
            children: Default::default(),
        }
    }

    /// Nanoseconds since the capture's start. Reads `CLOCK_MONOTONIC` directly:
    /// the same clock as `Instant`, without its checked arithmetic.
    #[inline]
    pub(crate) fn rel_now(&self) -> u64 {
        crate::os::monotonic_ns().saturating_sub(self.base_mono_ns)
    }

    /// A record's timestamp: time-stamp counter ticks where they are usable,
    /// nanoseconds since the capture's start otherwise. The writer converts
    /// either to monotonic nanoseconds.
    #[inline(always)]
    pub(crate) fn stamp(&self) -> u64 {
        if self.ticks {
            clock::ticks()
        } else {
            self.rel_now()
        }
    }

    fn fresh_batch(&self) -> Batch {
        self.recycle.try_recv().unwrap_or_else(|_| Batch::with_capacity())
    }

    /// Registers the calling thread with this capture, unless it has finished.
    fn register(&self) -> Option<Arc<ThreadBuf>> {
        let mut threads = self.threads.lock();
        if self.closed.load(Ordering::Acquire) {
            return None;
        }
        let tid = crate::os::current_tid();
        let name = match std::thread::current().name() {
            Some(n) => n.to_string(),
            None => format!("thread-{tid}"),
        };
        let buf = Arc::new(ThreadBuf::new(threads.len() as u32, tid, name, self.fresh_batch()));
        threads.push(buf.clone());
        self.by_index.write().push(buf.clone());
        Some(buf)
    }

    /// Runs `f` on the buffer of this capture's thread number `index`.
    #[cold]
    pub(crate) fn with_thread_buf<R>(&self, index: u64, f: impl FnOnce(&ThreadBuf) -> R) -> Option<R> {
        let bufs = self.by_index.read();
        let buf = bufs.get(usize::try_from(index).ok()?)?;
        Some(f(buf))
    }

    /// Runs `f` with the calling thread's slot for this capture, registering
    /// the thread on its first use. `None` when the thread is already inside
    /// the hot path (a `Debug` impl that logs), while it shuts down, or when
    /// the capture has finished before the thread's first record.
    #[inline(always)]
    pub(crate) fn with_slot<R>(&self, f: impl FnOnce(&Slot) -> R) -> Option<R> {
        let id = self.capture_id;
        TLS.try_with(|tls| {
            if tls.busy.replace(true) {
                return None;
            }
            let _busy = Busy(&tls.busy);
            {
                let slots = tls.slots.try_borrow().ok()?;
                if let Some(slot) = slots.iter().find(|s| s.capture == id) {
                    return Some(f(slot));
                }
            }
            {
                let mut slots = tls.slots.try_borrow_mut().ok()?;
                slots.retain(|s| !s.buf.closed.load(Ordering::Relaxed));
                let buf = self.register()?;
                slots.push(Slot::new(id, buf));
            }
            let slots = tls.slots.try_borrow().ok()?;
            slots.last().map(f)
        })
        .ok()
        .flatten()
    }

    /// Runs `f` with the calling thread's slot for this capture if it has one,
    /// even from inside the hot path. `f` must not record.
    #[inline]
    pub(crate) fn peek_slot<R>(&self, f: impl FnOnce(&Slot) -> R) -> Option<R> {
        let id = self.capture_id;
        TLS.try_with(|tls| {
            let slots = tls.slots.try_borrow().ok()?;
            slots.iter().find(|s| s.capture == id).map(f)
        })
        .ok()
        .flatten()
    }

    /// Runs `fill` on `buf`'s records, then hands them to the writer if the
    /// batch is full. False when nothing was recorded (the buffer is closed).
    /// Never panics, never blocks on the writer.
    #[inline(always)]
    pub(crate) fn fill(&self, buf: &ThreadBuf, fill: impl FnOnce(&mut Local)) -> bool {
        let Some(mut local) = buf.try_claim() else { return false };
        if local.closed {
            return false;
        }
        fill(&mut local);
        if local.batch.is_full() {
            self.hand_over(buf.index, &mut local);
        }
        true
    }

    /// Sends the batch of thread `index` to the writer, or drops and counts its
    /// records if the writer is too far behind. Called with the buffer claimed,
    /// so the writer's final drain cannot miss a batch.
    fn hand_over(&self, index: u32, local: &mut Local) {
        let full = std::mem::replace(&mut local.batch, self.fresh_batch());
        let n = full.raws.len() as u64;
        self.writer.ensure_started();
        if let Err(e) = self.tx.try_send(Msg::Batch { thread: index, batch: full }) {
            self.dropped.fetch_add(n, Ordering::Relaxed);
            if let Msg::Batch { mut batch, .. } = e.into_inner() {
                batch.clear();
                local.batch = batch;
            }
        }
    }

    /// Counts a record that could not be stored: late once the capture has
    /// finished, dropped before.
    #[cold]
    pub(crate) fn lost(&self) {
        let counter = if self.closed.load(Ordering::Relaxed) { &self.late } else { &self.dropped };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Clears the thread's hot-path flag, even if a `Debug` impl panics.
struct Busy<'a>(&'a Cell<bool>);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

/// A thread's state for one capture.
pub(crate) struct Slot {
    capture: u64,
    pub buf: Arc<ThreadBuf>,
    /// The capture's subscriber: the sequence number of this thread's next span.
    pub next_seq: Cell<u64>,
    /// The capture's subscriber: the spans entered on this thread, innermost last.
    pub stack: RefCell<Vec<(u64, &'static Metadata<'static>)>>,
}

impl Slot {
    fn new(capture: u64, buf: Arc<ThreadBuf>) -> Slot {
        Slot { capture, buf, next_seq: Cell::new(1), stack: RefCell::new(Vec::new()) }
    }
}

static NEXT_CAPTURE: AtomicU64 = AtomicU64::new(1);

fn next_capture_id() -> u64 {
    NEXT_CAPTURE.fetch_add(1, Ordering::Relaxed)
}

/// The hot path's per-thread state.
struct Tls {
    /// Set while this thread is inside the hot path: a `Debug` impl that logs
    /// while its value is being formatted must not re-enter.
    busy: Cell<bool>,
    /// This thread's state, one per capture it has recorded into.
    slots: RefCell<Vec<Slot>>,
    /// The span this thread created last (capture, span id, callsite): most
    /// spans are entered, exited and closed right where they are created, so
    /// `on_enter` rarely needs a registry lookup, and a span that cannot hold
    /// fields needs neither a creation nor a close record.
    last_new: Cell<Option<(u64, u64, &'static Metadata<'static>)>>,
}

thread_local! {
    static TLS: Tls =
        const { Tls { busy: Cell::new(false), slots: RefCell::new(Vec::new()), last_new: Cell::new(None) } };
}

/// The capture's recording, as a `tracing` layer on the registry when the tool
/// composes a layer of its own ([`crate::Session::start_with_layer`]), and
/// inside the capture's own subscriber otherwise ([`crate::Session::start`]).
/// Exposed so that either dispatcher can be found with
/// `Dispatch::downcast_ref::<CaptureLayer>()`.
pub struct CaptureLayer {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for CaptureLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaptureLayer").field("capture_id", &self.shared.capture_id).finish()
    }
}

impl CaptureLayer {
    /// Runs `fill` on this thread's buffer for this capture, then hands the
    /// buffer to the writer if it is full. Never panics, never blocks on the writer.
    #[inline]
    fn with_local(&self, fill: impl FnOnce(&mut Local)) -> bool {
        let shared = &*self.shared;
        if shared.with_slot(|slot| shared.fill(&slot.buf, fill)) == Some(true) {
            return true;
        }
        shared.lost();
        false
    }

    /// Hands the calling thread's partial batch to the writer.
    pub(crate) fn flush_local(&self) {
        let shared = &*self.shared;
        let _ = shared.peek_slot(|slot| {
            let Some(mut local) = slot.buf.try_claim() else { return };
            if !local.closed && !local.batch.raws.is_empty() {
                shared.hand_over(slot.buf.index, &mut local);
            }
        });
    }

    #[inline]
    fn push(&self, kind: Kind, id: u64, ts: u64, meta: Option<&'static Metadata<'static>>) {
        let _ = self.with_local(|l| l.raw(kind, id, ts, meta));
    }

    #[inline]
    pub(crate) fn push_fields(
        &self,
        kind: Kind,
        id: u64,
        ts: u64,
        meta: Option<&'static Metadata<'static>>,
        record: impl FnOnce(&mut dyn Visit),
    ) {
        let _ = self.with_local(|l| l.raw_fields(kind, id, ts, meta, record));
    }
}

struct FieldVisitor<'a> {
    batch: &'a mut Batch,
}

impl FieldVisitor<'_> {
    fn put(&mut self, field: &TField, value: RawValue) {
        self.batch.values.push(RawField { name: field.name(), value });
    }

    fn put_text(&mut self, field: &TField, write: impl FnOnce(&mut String) -> fmt::Result) {
        let start = self.batch.text.len();
        if write(&mut self.batch.text).is_err() {
            self.batch.text.truncate(start);
            self.batch.text.push_str("<unprintable>");
        }
        let len = self.batch.text.len() - start;
        self.put(field, RawValue::Str { start: start as u32, len: len as u32 });
    }
}

impl Visit for FieldVisitor<'_> {
    fn record_i64(&mut self, field: &TField, value: i64) {
        self.put(field, RawValue::I64(value));
    }
    fn record_u64(&mut self, field: &TField, value: u64) {
        self.put(field, RawValue::U64(value));
    }
    fn record_i128(&mut self, field: &TField, value: i128) {
        match i64::try_from(value) {
            Ok(v) => self.put(field, RawValue::I64(v)),
            Err(_) => self.put_text(field, |s| write!(s, "{value}")),
        }
    }
    fn record_u128(&mut self, field: &TField, value: u128) {
        match u64::try_from(value) {
            Ok(v) => self.put(field, RawValue::U64(v)),
            Err(_) => self.put_text(field, |s| write!(s, "{value}")),
        }
    }
    fn record_f64(&mut self, field: &TField, value: f64) {
        self.put(field, RawValue::F64(value));
    }
    fn record_bool(&mut self, field: &TField, value: bool) {
        self.put(field, RawValue::Bool(value));
    }
    fn record_str(&mut self, field: &TField, value: &str) {
        self.put_text(field, |s| {
            s.push_str(value);
            Ok(())
        });
    }
    fn record_error(&mut self, field: &TField, value: &(dyn std::error::Error + 'static)) {
        self.put_text(field, |s| write!(s, "{value}"));
    }
    fn record_debug(&mut self, field: &TField, value: &dyn fmt::Debug) {
        self.put_text(field, |s| write!(s, "{value:?}"));
    }
}

impl<S> Layer<S> for CaptureLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        let meta = attrs.metadata();
        let id = id.into_u64();
        let capture = self.shared.capture_id;
        let _ = TLS.try_with(|t| t.last_new.set(Some((capture, id, meta))));
        // A span that declares no field can never hold a value: the writer
        // needs nothing from its creation (its enter carries the callsite).
        if !meta.fields().is_empty() {
            self.push_fields(Kind::NewSpan, id, 0, Some(meta), |v| attrs.record(v));
        }
    }

    fn on_record(&self, span: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        if values.is_empty() {
            return;
        }
        let ts = self.shared.stamp();
        self.push_fields(Kind::Record, span.into_u64(), ts, None, |v| values.record(v));
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let ts = self.shared.stamp();
        let id_u64 = id.into_u64();
        let capture = self.shared.capture_id;
        let known = TLS
            .try_with(|t| t.last_new.get())
            .ok()
            .flatten()
            .and_then(|(c, i, meta)| (c == capture && i == id_u64).then_some(meta));
        // Entered away from where it was created: ask the registry.
        let meta = known.or_else(|| ctx.metadata(id));
        self.push(Kind::Enter, id_u64, ts, meta);
    }

    fn on_exit(&self, id: &Id, _ctx: Context<'_, S>) {
        let ts = self.shared.stamp();
        self.push(Kind::Exit, id.into_u64(), ts, None);
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        let id = id.into_u64();
        let capture = self.shared.capture_id;
        let fieldless = TLS
            .try_with(|t| match t.last_new.get() {
                Some((c, i, meta)) if c == capture && i == id => {
                    t.last_new.set(None);
                    meta.fields().is_empty()
                }
                _ => false,
            })
            .unwrap_or(false);
        // The writer keeps state only for spans with fields; a close tells it to drop it.
        if !fieldless {
            self.push(Kind::Close, id, 0, None);
        }
    }

    fn on_event(&self, event: &TEvent<'_>, _ctx: Context<'_, S>) {
        let ts = self.shared.stamp();
        self.push_fields(Kind::Event, 0, ts, Some(event.metadata()), |v| event.record(v));
    }
}
