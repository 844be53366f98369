//! The capture's own `tracing` subscriber, used when the tool composes no layer
//! of its own: span ids, reference counts and each thread's stack of entered
//! spans are kept next to the per-thread buffers of [`crate::layer`], with no
//! registry underneath. The records it stores are the layer's, written by the
//! same code.
//!
//! - A span's id is its thread's number in the capture (plus one) above
//!   [`SEQ_BITS`] bits of that thread's own count of spans: unique, never zero,
//!   never reused within a capture, and taken without any shared counter.
//! - Each thread keeps the callsites of its last [`RING`] spans in a ring that
//!   other threads can read ([`SpanRing`]); a span still open when its entry is
//!   needed for a newer one moves to a shared table (`overflow`). Entering a
//!   span where it was created reads the ring; anywhere else is the rare path.
//! - Spans are almost never cloned: a handle's close checks one atomic count of
//!   outstanding clones, and only when it is not zero, a table of extra
//!   references under a lock.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;
use tracing_core::span::{Attributes, Current, Id, Record};
use tracing_core::subscriber::Interest;
use tracing_core::{Event, LevelFilter, Metadata, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::{Layer, Registry};

use crate::layer::{CaptureLayer, Kind, ThreadBuf};

/// Bits of a span id that count the spans of one thread.
const SEQ_BITS: u32 = 40;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
/// The largest thread number (plus one) an id can hold; threads beyond it take
/// ids from the shared counter.
const THREAD_MAX: u64 = u64::MAX >> SEQ_BITS;
/// Entries in a thread's ring of recent spans (a power of two).
pub(crate) const RING: usize = 256;

type Meta = &'static Metadata<'static>;

/// One entry of a [`SpanRing`]: a span id (0: free) and its callsite.
#[derive(Default)]
struct SpanEntry {
    id: AtomicU64,
    meta: AtomicPtr<Metadata<'static>>,
}

impl SpanEntry {
    /// The callsite, read by the thread that wrote it.
    #[inline]
    fn own_meta(&self) -> Meta {
        // SAFETY: every pointer stored comes from a `&'static Metadata<'static>`
        // (`CaptureSubscriber::own_id`), and an entry is read only when its id
        // is not 0, that is after a callsite was stored.
        unsafe { &*self.meta.load(Ordering::Relaxed) }
    }
}

/// The callsites of one thread's most recent spans, indexed by the low bits of
/// the span's sequence number.
///
/// Only the owning thread stores a new entry (the callsite, then the id, both
/// with release ordering, over an entry whose id is 0). Any thread may clear
/// the id of a span it closes, with a compare-and-swap, and may read an entry
/// seqlock-style: the id, the callsite, then the id again.
pub(crate) struct SpanRing {
    entries: [SpanEntry; RING],
}

impl SpanRing {
    pub(crate) fn new() -> SpanRing {
        SpanRing { entries: std::array::from_fn(|_| SpanEntry::default()) }
    }

    #[inline]
    fn entry(&self, id: u64) -> &SpanEntry {
        &self.entries[(id as usize) & (RING - 1)]
    }

    /// Another thread's read of `id`'s callsite, if the ring still holds it.
    fn read(&self, id: u64) -> Option<Meta> {
        let e = self.entry(id);
        if e.id.load(Ordering::Acquire) != id {
            return None;
        }
        let meta = e.meta.load(Ordering::Relaxed);
        // Pairs with the release store of a newer callsite: if `meta` is newer
        // than `id`, the id read below is too.
        fence(Ordering::Acquire);
        if e.id.load(Ordering::Relaxed) != id {
            return None;
        }
        // SAFETY: as in `SpanEntry::own_meta`; the second read of the id shows
        // that `meta` is the callsite stored with it.
        Some(unsafe { &*meta })
    }

    /// Another thread clears `id`'s entry; false if the ring no longer holds it.
    fn clear(&self, id: u64) -> bool {
        self.entry(id).id.compare_exchange(id, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    }
}

/// The capture's subscriber. Aligned so that its fields do not share a cache
/// line with the reference count that every span handle changes.
#[repr(align(128))]
pub(crate) struct CaptureSubscriber {
    layer: CaptureLayer,
    filter: Targets,
    max_level: Option<LevelFilter>,
    /// Outstanding extra references, the sum of `refs`.
    clones: AtomicUsize,
    /// Span id to the number of its handles beyond the first.
    refs: Mutex<HashMap<u64, usize>>,
    /// Callsites of open spans that are not in their thread's ring: displaced
    /// by newer spans, or created with an id from `fallback`.
    overflow: Mutex<HashMap<u64, Meta>>,
    /// Ids for spans created where the thread's own count cannot be used.
    fallback: AtomicU64,
}

impl CaptureSubscriber {
    pub(crate) fn new(layer: CaptureLayer, filter: Targets) -> CaptureSubscriber {
        let max_level = Layer::<Registry>::max_level_hint(&filter);
        CaptureSubscriber {
            layer,
            filter,
            max_level,
            clones: AtomicUsize::new(0),
            refs: Mutex::new(HashMap::new()),
            overflow: Mutex::new(HashMap::new()),
            fallback: AtomicU64::new(1),
        }
    }

    fn wants(&self, meta: &Metadata<'_>) -> bool {
        self.filter.would_enable(meta.target(), meta.level())
    }

    /// A new id from the thread's own count, its callsite in the thread's ring.
    #[inline]
    fn own_id(&self, buf: &ThreadBuf, next_seq: &std::cell::Cell<u64>, meta: Meta) -> Option<u64> {
        let thread = u64::from(buf.index) + 1;
        let seq = next_seq.get();
        if thread > THREAD_MAX || seq > SEQ_MASK {
            return None;
        }
        next_seq.set(seq + 1);
        let id = (thread << SEQ_BITS) | seq;
        let e = buf.spans.entry(id);
        let old = e.id.load(Ordering::Relaxed);
        if old != 0 {
            self.displace(e, old);
        }
        e.meta.store(meta as *const Metadata<'static> as *mut Metadata<'static>, Ordering::Release);
        e.id.store(id, Ordering::Release);
        Some(id)
    }

    /// Moves a span that is still open out of its thread's ring, to make room.
    #[cold]
    fn displace(&self, e: &SpanEntry, old: u64) {
        let mut overflow = self.overflow.lock();
        // Under the lock: a thread closing `old` that finds it gone from the
        // ring then looks in `overflow` and waits for this insert.
        if e.id.compare_exchange(old, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            overflow.insert(old, e.own_meta());
        }
    }

    /// An id from the shared counter, its callsite in `overflow`.
    #[cold]
    fn fallback_id(&self, meta: Meta) -> u64 {
        // Thread number 0: never an id of a thread's own count.
        let id = (self.fallback.fetch_add(1, Ordering::Relaxed) & SEQ_MASK).max(1);
        self.overflow.lock().insert(id, meta);
        id
    }

    /// The callsite of span `id`; `own` is the calling thread's buffer.
    #[inline]
    fn meta_of(&self, own: &ThreadBuf, id: u64) -> Option<Meta> {
        if id >> SEQ_BITS == u64::from(own.index) + 1 {
            let e = own.spans.entry(id);
            if e.id.load(Ordering::Relaxed) == id {
                return Some(e.own_meta());
            }
        }
        self.meta_elsewhere(id)
    }

    /// The rare path of [`CaptureSubscriber::meta_of`]: another thread's span,
    /// or one no longer in its ring.
    #[cold]
    fn meta_elsewhere(&self, id: u64) -> Option<Meta> {
        let thread = id >> SEQ_BITS;
        if thread > 0 {
            if let Some(Some(meta)) = self.layer.shared.with_thread_buf(thread - 1, |b| b.spans.read(id)) {
                return Some(meta);
            }
        }
        self.overflow.lock().get(&id).copied()
    }

    /// Forgets the callsite of span `id`, which has closed. Returns it when
    /// known, so that the caller can tell whether the span holds fields.
    #[inline]
    fn forget(&self, own: Option<&ThreadBuf>, id: u64) -> Option<Meta> {
        if let Some(own) = own.filter(|b| id >> SEQ_BITS == u64::from(b.index) + 1) {
            let e = own.spans.entry(id);
            // Only this thread stores into its ring, and only one handle closes
            // a span: nothing can change this entry in between.
            if e.id.load(Ordering::Relaxed) == id {
                let meta = e.own_meta();
                e.id.store(0, Ordering::Relaxed);
                return Some(meta);
            }
        }
        self.forget_elsewhere(id)
    }

    #[cold]
    fn forget_elsewhere(&self, id: u64) -> Option<Meta> {
        let thread = id >> SEQ_BITS;
        if thread > 0 && self.layer.shared.with_thread_buf(thread - 1, |b| b.spans.clear(id)) == Some(true) {
            // Cleared from another thread's ring; its callsite is not needed.
            return None;
        }
        self.overflow.lock().remove(&id)
    }

    /// Takes back one extra reference to `id`; false if it had none.
    #[cold]
    fn release_clone(&self, id: u64) -> bool {
        let mut refs = self.refs.lock();
        let Some(n) = refs.get_mut(&id) else { return false };
        *n -= 1;
        if *n == 0 {
            refs.remove(&id);
        }
        self.clones.fetch_sub(1, Ordering::Relaxed);
        true
    }

    /// The last handle of span `id` has gone.
    fn close(&self, id: u64) {
        let shared = &*self.layer.shared;
        let done = shared.with_slot(|slot| {
            // A span that declares no field left nothing for the writer to forget.
            if self.forget(Some(&slot.buf), id).is_some_and(|m| m.fields().is_empty()) {
                return true;
            }
            shared.fill(&slot.buf, |l| l.raw(Kind::Close, id, 0, None))
        });
        match done {
            Some(true) => {}
            Some(false) => shared.lost(),
            None => {
                let own = shared.peek_slot(|slot| slot.buf.clone());
                if !self.forget(own.as_deref(), id).is_some_and(|m| m.fields().is_empty()) {
                    shared.lost();
                }
            }
        }
    }
}

impl Subscriber for CaptureSubscriber {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if self.wants(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        // Interest is cached for every live dispatcher at once: another one
        // may have wanted a callsite that this filter does not.
        self.wants(meta)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        self.max_level
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let meta = attrs.metadata();
        let fields = !meta.fields().is_empty();
        let shared = &*self.layer.shared;
        let made = shared.with_slot(|slot| {
            let id = match self.own_id(&slot.buf, &slot.next_seq, meta) {
                Some(id) => id,
                None => self.fallback_id(meta),
            };
            // A span that declares no field can never hold a value: the writer
            // needs nothing from its creation (its enter carries the callsite).
            let stored = !fields
                || shared
                    .fill(&slot.buf, |l| l.raw_fields(Kind::NewSpan, id, 0, Some(meta), |v| attrs.record(v)));
            (id, stored)
        });
        let (id, stored) = made.unwrap_or_else(|| (self.fallback_id(meta), !fields));
        if !stored {
            shared.lost();
        }
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        if values.is_empty() {
            return;
        }
        let ts = self.layer.shared.stamp();
        self.layer.push_fields(Kind::Record, span.into_u64(), ts, None, |v| values.record(v));
    }

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let ts = self.layer.shared.stamp();
        self.layer.push_fields(Kind::Event, 0, ts, Some(event.metadata()), |v| event.record(v));
    }

    fn enter(&self, span: &Id) {
        let shared = &*self.layer.shared;
        let ts = shared.stamp();
        let id = span.into_u64();
        let stored = shared.with_slot(|slot| {
            let meta = self.meta_of(&slot.buf, id);
            if let (Some(meta), Ok(mut stack)) = (meta, slot.stack.try_borrow_mut()) {
                stack.push((id, meta));
            }
            shared.fill(&slot.buf, |l| l.raw(Kind::Enter, id, ts, meta))
        });
        if stored != Some(true) {
            shared.lost();
        }
    }

    fn exit(&self, span: &Id) {
        let shared = &*self.layer.shared;
        let ts = shared.stamp();
        let id = span.into_u64();
        let stored = shared.with_slot(|slot| {
            if let Ok(mut stack) = slot.stack.try_borrow_mut() {
                if let Some(at) = stack.iter().rposition(|e| e.0 == id) {
                    stack.remove(at);
                }
            }
            shared.fill(&slot.buf, |l| l.raw(Kind::Exit, id, ts, None))
        });
        if stored != Some(true) {
            shared.lost();
        }
    }

    fn clone_span(&self, span: &Id) -> Id {
        let mut refs = self.refs.lock();
        *refs.entry(span.into_u64()).or_insert(0) += 1;
        self.clones.fetch_add(1, Ordering::Relaxed);
        span.clone()
    }

    fn try_close(&self, span: Id) -> bool {
        let id = span.into_u64();
        // Every clone adds to `clones` before its handle exists, and a handle
        // reaches another thread only through synchronisation: a close that
        // reads 0 here is the close of the last handle.
        if self.clones.load(Ordering::Acquire) != 0 && self.release_clone(id) {
            return false;
        }
        self.close(id);
        true
    }

    fn drop_span(&self, span: Id) {
        let _ = self.try_close(span);
    }

    fn current_span(&self) -> Current {
        self.layer
            .shared
            .peek_slot(|slot| {
                let stack = slot.stack.try_borrow().ok()?;
                stack.last().map(|&(id, meta)| Current::new(Id::from_u64(id), meta))
            })
            .flatten()
            .unwrap_or_else(Current::none)
    }

    unsafe fn downcast_raw(&self, id: TypeId) -> Option<*const ()> {
        if id == TypeId::of::<Self>() {
            Some(self as *const Self as *const ())
        } else if id == TypeId::of::<CaptureLayer>() {
            Some(&self.layer as *const CaptureLayer as *const ())
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    //! The records themselves and the subscriber's tables, with no writer
    //! thread: batches stay in the channel for the test to read.

    use std::sync::Arc;

    use crossbeam_channel::Receiver;
    use tracing::dispatcher::{self, Dispatch};
    use tracing::info_span;

    use super::*;
    use crate::layer::{Shared, CHANNEL_BATCHES};
    use crate::writer::Msg;

    fn rig() -> (Dispatch, Arc<Shared>, Receiver<Msg>) {
        let (tx, rx) = crossbeam_channel::bounded(CHANNEL_BATCHES);
        let (_, recycle) = crossbeam_channel::bounded(1);
        let shared = Arc::new(Shared::new(tx, recycle));
        let layer = CaptureLayer { shared: shared.clone() };
        let dispatch = Dispatch::new(CaptureSubscriber::new(layer, "trace".parse().unwrap()));
        (dispatch, shared, rx)
    }

    fn sub(d: &Dispatch) -> &CaptureSubscriber {
        d.downcast_ref::<CaptureSubscriber>().expect("the capture's own subscriber")
    }

    /// Hands the calling thread's records to the channel.
    fn flush(shared: &Arc<Shared>) {
        CaptureLayer { shared: shared.clone() }.flush_local();
    }

    /// Every record sent so far: (thread, kind, span id, callsite name).
    fn records(rx: &Receiver<Msg>) -> Vec<(u32, Kind, u64, Option<&'static str>)> {
        let mut out = Vec::new();
        for msg in rx.try_iter() {
            if let Msg::Batch { thread, batch } = msg {
                out.extend(batch.raws.iter().map(|r| (thread, r.kind, r.id, r.meta.map(|m| m.name()))));
            }
        }
        out
    }

    fn closes(records: &[(u32, Kind, u64, Option<&str>)], id: u64) -> Vec<u32> {
        records.iter().filter(|r| r.1 == Kind::Close && r.2 == id).map(|r| r.0).collect()
    }

    /// No span is left in any table or ring.
    fn assert_empty(d: &Dispatch, shared: &Shared) {
        let s = sub(d);
        assert!(s.overflow.lock().is_empty(), "overflow: {:?}", s.overflow.lock().keys().collect::<Vec<_>>());
        assert!(s.refs.lock().is_empty());
        assert_eq!(s.clones.load(Ordering::Relaxed), 0);
        for buf in shared.threads.lock().iter() {
            let held: Vec<u64> = buf
                .spans
                .entries
                .iter()
                .map(|e| e.id.load(Ordering::Relaxed))
                .filter(|id| *id != 0)
                .collect();
            assert!(held.is_empty(), "thread {}: {held:?}", buf.index);
        }
    }

    #[test]
    fn the_close_is_recorded_once_where_the_last_handle_goes() {
        let (d, shared, rx) = rig();
        let (with_fields, fieldless, local) = dispatcher::with_default(&d, || {
            let with_fields = info_span!("with_fields", n = 1u64);
            let fieldless = info_span!("fieldless");
            let local = info_span!("local");
            let ids = (with_fields.id().unwrap(), fieldless.id().unwrap(), local.id().unwrap());
            let (a, b) = (with_fields.clone(), fieldless.clone());
            drop((with_fields, fieldless, local));
            let shared2 = shared.clone();
            std::thread::spawn(move || {
                drop((a, b));
                flush(&shared2);
            })
            .join()
            .unwrap();
            flush(&shared);
            (ids.0.into_u64(), ids.1.into_u64(), ids.2.into_u64())
        });
        let records = records(&rx);
        // Thread 0 created them; thread 1 dropped the last handles.
        assert_eq!(closes(&records, with_fields), [1]);
        // Elsewhere the callsite is not looked up: a close is recorded anyway.
        assert_eq!(closes(&records, fieldless), [1]);
        // Where it was created, a span without fields needs no close record.
        assert!(closes(&records, local).is_empty());
        assert_eq!(with_fields >> SEQ_BITS, 1);
        assert_empty(&d, &shared);
    }

    #[test]
    fn a_span_displaced_from_the_ring_is_still_found_and_then_forgotten() {
        let (d, shared, rx) = rig();
        let (old_id, elsewhere) = dispatcher::with_default(&d, || {
            let old = info_span!("old", n = 1u64);
            for _ in 0..RING + 10 {
                info_span!("filler", n = 2u64).in_scope(|| ());
            }
            assert_eq!(sub(&d).overflow.lock().len(), 1, "`old` left the ring for the shared table");
            old.in_scope(|| ());
            let moved = old.clone();
            let shared2 = shared.clone();
            let elsewhere = std::thread::spawn(move || {
                moved.in_scope(|| ());
                flush(&shared2);
            });
            elsewhere.join().unwrap();
            let id = old.id().unwrap().into_u64();
            drop(old);
            flush(&shared);
            (id, 1)
        });
        let records = records(&rx);
        let enters: Vec<_> = records.iter().filter(|r| r.1 == Kind::Enter && r.2 == old_id).collect();
        assert_eq!(enters.len(), 2);
        assert!(enters.iter().all(|r| r.3 == Some("old")), "{enters:?}");
        assert!(enters.iter().any(|r| r.0 == elsewhere));
        assert_eq!(closes(&records, old_id), [0]);
        assert_empty(&d, &shared);
    }

    #[test]
    fn closes_on_another_thread_racing_with_displacement_leave_nothing_behind() {
        let (d, shared, _rx) = rig();
        let (tx, spans) = std::sync::mpsc::sync_channel::<tracing::Span>(RING);
        let closer = std::thread::spawn(move || {
            for span in spans {
                drop(span);
            }
        });
        dispatcher::with_default(&d, || {
            for i in 0..20_000u64 {
                // Still open (queued for the closer) when newer spans need its entry.
                let span = info_span!("queued", i);
                if i % 3 == 0 {
                    span.in_scope(|| ());
                }
                tx.send(span).unwrap();
                if i % 64 == 0 {
                    std::thread::yield_now();
                }
            }
        });
        drop(tx);
        closer.join().unwrap();
        assert_empty(&d, &shared);
    }

    #[test]
    fn ids_carry_the_thread_and_count_up() {
        let (d, shared, _rx) = rig();
        let ids = |n: usize| {
            let d = d.clone();
            move || {
                dispatcher::with_default(&d, || {
                    (0..n).map(|_| info_span!("x").id().unwrap().into_u64()).collect()
                })
            }
        };
        let first: Vec<u64> = ids(3)();
        let second: Vec<u64> = std::thread::spawn(ids(2)).join().unwrap();
        let third: Vec<u64> = ids(1)();
        assert_eq!(first, [(1 << SEQ_BITS) | 1, (1 << SEQ_BITS) | 2, (1 << SEQ_BITS) | 3]);
        assert_eq!(second, [(2 << SEQ_BITS) | 1, (2 << SEQ_BITS) | 2]);
        assert_eq!(third, [(1 << SEQ_BITS) | 4]);
        assert_empty(&d, &shared);
    }
}
