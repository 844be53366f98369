//! The capture's own `tracing` subscriber: span ids, reference counts and each
//! thread's stack of entered spans kept next to the per-thread buffers, with
//! no registry underneath; and the tee to the dispatcher that was the default
//! when the capture started, so that the tool's own logging prints exactly
//! what it prints without capture.
//!
//! - A span's id is its thread's number in the capture (plus one) above
//!   [`SEQ_BITS`] bits of that thread's own count of spans: unique, never zero,
//!   never reused within a capture, and taken without any shared counter.
//! - Each thread keeps its last [`RING`] spans in a ring that other threads can
//!   read ([`SpanRing`]); a span still open when its entry is needed for a
//!   newer one moves to a shared table (`overflow`). Entering a span where it
//!   was created reads the ring; anywhere else is the rare path.
//! - Spans are almost never cloned: a handle's close checks one atomic count of
//!   outstanding clones, and only when it is not zero, a table of extra
//!   references under a lock.
//! - The tee: every call the inner dispatcher enables is forwarded to it, with
//!   span ids mapped (the inner id is kept beside the callsite). The capture's
//!   root span is never forwarded, so the tool's subscriber sees its spans with
//!   the parents it would see without capture. With no inner dispatcher the
//!   tee costs one branch per call. Limit: an event with an explicit parent
//!   (`info!(parent: &span, ..)`) reaches the inner dispatcher unchanged, with
//!   the capture's id for its parent, because `tracing` offers no way to
//!   rebuild an event with another parent.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tracing_core::span::{Attributes, Current, Id, Record};
use tracing_core::subscriber::Interest;
use tracing_core::{Dispatch, Event, LevelFilter, Metadata, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::{Layer, Registry};

use crate::buffer::ThreadBuf;
use crate::capture::{wants, Core, ROOT_TARGET};
use crate::layer::max_with_root;
use crate::ring::{SpanEntry, SpanInfo};

/// Bits of a span id that count the spans of one thread.
const SEQ_BITS: u32 = 40;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
/// The largest thread number (plus one) an id can hold; threads beyond it take
/// ids from the shared counter.
const THREAD_MAX: u64 = u64::MAX >> SEQ_BITS;

/// The capture's subscriber. Aligned so that its fields do not share a cache
/// line with the reference count that every span handle changes.
#[repr(align(128))]
pub(crate) struct CaptureSubscriber {
    core: Arc<Core>,
    filter: Targets,
    max_level: Option<LevelFilter>,
    /// The dispatcher that was the default when the capture started (the
    /// tool's own logging), if any.
    inner: Option<Dispatch>,
    /// Outstanding extra references, the sum of `refs`.
    clones: AtomicUsize,
    /// Span id to the number of its handles beyond the first.
    refs: Mutex<HashMap<u64, usize>>,
    /// Open spans that are not in their thread's ring: displaced by newer
    /// spans, or created with an id from `fallback`.
    overflow: Mutex<HashMap<u64, SpanInfo>>,
    /// Ids for spans created where the thread's own count cannot be used.
    fallback: AtomicU64,
}

impl CaptureSubscriber {
    pub(crate) fn new(core: Arc<Core>, filter: Targets, inner: Option<Dispatch>) -> CaptureSubscriber {
        let max_level = max_with_root(Layer::<Registry>::max_level_hint(&filter));
        CaptureSubscriber {
            core,
            filter,
            max_level,
            inner,
            clones: AtomicUsize::new(0),
            refs: Mutex::new(HashMap::new()),
            overflow: Mutex::new(HashMap::new()),
            fallback: AtomicU64::new(1),
        }
    }

    #[inline]
    fn wants(&self, meta: &Metadata<'_>) -> bool {
        wants(&self.filter, meta)
    }

    /// The inner dispatcher, if it wants `meta` and `meta` is not the root's.
    #[inline]
    fn inner_for(&self, meta: &Metadata<'_>) -> Option<&Dispatch> {
        self.inner.as_ref().filter(|d| meta.target() != ROOT_TARGET && d.enabled(meta))
    }

    /// A new id from the thread's own count, its span in the thread's ring.
    #[inline]
    fn own_id(&self, buf: &ThreadBuf, next_seq: &std::cell::Cell<u64>, info: SpanInfo) -> Option<u64> {
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
        e.store(id, info);
        Some(id)
    }

    /// Moves a span that is still open out of its thread's ring, to make room.
    #[cold]
    fn displace(&self, e: &SpanEntry, old: u64) {
        let mut overflow = self.overflow.lock();
        // Under the lock: a thread closing `old` that finds it gone from the
        // ring then looks in `overflow` and waits for this insert.
        let info = e.own_info();
        if e.id.compare_exchange(old, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            overflow.insert(old, info);
        }
    }

    /// An id from the shared counter, its span in `overflow`.
    #[cold]
    fn fallback_id(&self, info: SpanInfo) -> u64 {
        // Thread number 0: never an id of a thread's own count.
        let id = (self.fallback.fetch_add(1, Ordering::Relaxed) & SEQ_MASK).max(1);
        self.overflow.lock().insert(id, info);
        id
    }

    /// What is known of span `id`; `own` is the calling thread's buffer.
    #[inline]
    fn info_of(&self, own: Option<&ThreadBuf>, id: u64) -> Option<SpanInfo> {
        if let Some(own) = own.filter(|b| id >> SEQ_BITS == u64::from(b.index) + 1) {
            let e = own.spans.entry(id);
            if e.id.load(Ordering::Relaxed) == id {
                return Some(e.own_info());
            }
        }
        self.info_elsewhere(id)
    }

    /// The rare path of [`CaptureSubscriber::info_of`]: another thread's span,
    /// or one no longer in its ring.
    #[cold]
    fn info_elsewhere(&self, id: u64) -> Option<SpanInfo> {
        let thread = id >> SEQ_BITS;
        if thread > 0 {
            if let Some(Some(info)) = self.core.threads.with_buf(thread - 1, |b| b.spans.read(id)) {
                return Some(info);
            }
        }
        self.overflow.lock().get(&id).copied()
    }

    /// What is known of span `id`, from any thread.
    fn info(&self, id: u64) -> Option<SpanInfo> {
        let own = self.core.threads.peek_slot(|slot| slot.buf.clone());
        self.info_of(own.as_deref(), id)
    }

    /// Forgets span `id`, which has closed. Returns what was known of it when
    /// that is at hand, so that the caller can tell whether it holds fields.
    #[inline]
    fn forget(&self, own: Option<&ThreadBuf>, id: u64) -> Option<SpanInfo> {
        if let Some(own) = own.filter(|b| id >> SEQ_BITS == u64::from(b.index) + 1) {
            let e = own.spans.entry(id);
            // Only this thread stores into its ring, and only one handle closes
            // a span: nothing can change this entry in between.
            if e.id.load(Ordering::Relaxed) == id {
                let info = e.own_info();
                e.id.store(0, Ordering::Relaxed);
                return Some(info);
            }
        }
        self.forget_elsewhere(id)
    }

    #[cold]
    fn forget_elsewhere(&self, id: u64) -> Option<SpanInfo> {
        let thread = id >> SEQ_BITS;
        if thread > 0 && self.core.threads.with_buf(thread - 1, |b| b.spans.clear(id)) == Some(true) {
            // Cleared from another thread's ring; what it held is not needed.
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
        let core = &*self.core;
        // Only a captured span that declares fields left state in the writer.
        let needs_record =
            |info: Option<SpanInfo>| info.is_none_or(|i| i.captured && !i.meta.fields().is_empty());
        let done = core.threads.with_slot(|slot| {
            if !needs_record(self.forget(Some(&slot.buf), id)) {
                return true;
            }
            core.close(Some(&slot.buf), id, false)
        });
        if done.is_none() {
            let own = core.threads.peek_slot(|slot| slot.buf.clone());
            if needs_record(self.forget(own.as_deref(), id)) {
                core.threads.handoff.lost();
            }
        }
    }
}

impl Subscriber for CaptureSubscriber {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        // The inner dispatcher registers the callsite for itself: `tracing`
        // asks every dispatcher and combines the answers.
        if self.wants(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        // Interest is cached for every live dispatcher at once: another one
        // may have wanted a callsite that this filter does not.
        self.wants(meta) || self.inner.as_ref().is_some_and(|d| d.enabled(meta))
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        self.max_level
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let meta = attrs.metadata();
        let inner = match self.inner_for(meta) {
            Some(d) => {
                let mapped = attrs.parent().map(|p| self.info(p.into_u64()).map_or(0, |i| i.inner));
                let id = match mapped {
                    Some(parent) if parent != 0 => {
                        d.new_span(&Attributes::child_of(Id::from_u64(parent), meta, attrs.values()))
                    }
                    // A parent the inner dispatcher never saw (the root):
                    // its own current span is the parent it would see.
                    Some(_) => d.new_span(&Attributes::new(meta, attrs.values())),
                    None if attrs.is_root() => d.new_span(&Attributes::new_root(meta, attrs.values())),
                    None => d.new_span(attrs),
                };
                id.into_u64()
            }
            None => 0,
        };
        let info = SpanInfo { meta, inner, captured: self.wants(meta) };
        let core = &*self.core;
        let made = core.threads.with_slot(|slot| {
            let id = match self.own_id(&slot.buf, &slot.next_seq, info) {
                Some(id) => id,
                None => self.fallback_id(info),
            };
            if info.captured {
                core.new_span(Some(&slot.buf), id, meta, false, |v| attrs.record(v));
            }
            id
        });
        let id = made.unwrap_or_else(|| {
            if info.captured && !meta.fields().is_empty() {
                core.threads.handoff.lost();
            }
            self.fallback_id(info)
        });
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let id = span.into_u64();
        let core = &*self.core;
        let info = core
            .threads
            .with_slot(|slot| {
                let info = self.info_of(Some(&slot.buf), id);
                if !values.is_empty() && info.is_none_or(|i| i.captured) {
                    core.record_values(Some(&slot.buf), id, |v| values.record(v));
                }
                info
            })
            .flatten();
        if let (Some(d), Some(i)) = (&self.inner, info) {
            if i.inner != 0 {
                d.record(&Id::from_u64(i.inner), values);
            }
        }
    }

    fn record_follows_from(&self, span: &Id, follows: &Id) {
        if let Some(d) = &self.inner {
            let (a, b) = (self.info(span.into_u64()), self.info(follows.into_u64()));
            if let (Some(a), Some(b)) = (a, b) {
                if a.inner != 0 && b.inner != 0 {
                    d.record_follows_from(&Id::from_u64(a.inner), &Id::from_u64(b.inner));
                }
            }
        }
    }

    fn event(&self, event: &Event<'_>) {
        let meta = event.metadata();
        if self.wants(meta) {
            self.core.event(None, meta, |v| event.record(v));
        }
        if let Some(d) = self.inner_for(meta) {
            d.event(event);
        }
    }

    fn enter(&self, span: &Id) {
        let id = span.into_u64();
        let core = &*self.core;
        let entered = core.threads.with_slot(|slot| {
            let info = self.info_of(Some(&slot.buf), id);
            if let (Some(i), Ok(mut stack)) = (info, slot.stack.try_borrow_mut()) {
                stack.push((id, i));
            }
            if info.is_none_or(|i| i.captured) {
                core.enter(Some(&slot.buf), id, info.map(|i| i.meta));
            }
            info
        });
        if let (Some(d), Some(Some(i))) = (&self.inner, entered) {
            if i.inner != 0 {
                d.enter(&Id::from_u64(i.inner));
            }
        }
    }

    fn exit(&self, span: &Id) {
        let id = span.into_u64();
        let core = &*self.core;
        let exited = core.threads.with_slot(|slot| {
            let info = slot.stack.try_borrow_mut().ok().and_then(|mut stack| {
                let at = stack.iter().rposition(|e| e.0 == id)?;
                Some(stack.remove(at).1)
            });
            if info.is_none_or(|i| i.captured) {
                core.exit(Some(&slot.buf), id);
            }
            info
        });
        if let (Some(d), Some(Some(i))) = (&self.inner, exited) {
            if i.inner != 0 {
                d.exit(&Id::from_u64(i.inner));
            }
        }
    }

    fn clone_span(&self, span: &Id) -> Id {
        let id = span.into_u64();
        if let Some(d) = &self.inner {
            if let Some(i) = self.info(id).filter(|i| i.inner != 0) {
                let _ = d.clone_span(&Id::from_u64(i.inner));
            }
        }
        let mut refs = self.refs.lock();
        *refs.entry(id).or_insert(0) += 1;
        self.clones.fetch_add(1, Ordering::Relaxed);
        span.clone()
    }

    fn try_close(&self, span: Id) -> bool {
        let id = span.into_u64();
        if let Some(d) = &self.inner {
            // Every handle's drop reaches the inner dispatcher, which counts its own.
            if let Some(i) = self.info(id).filter(|i| i.inner != 0) {
                let _ = d.try_close(Id::from_u64(i.inner));
            }
        }
        // Every clone adds to `clones` before its handle exists, and a handle
        // reaches another thread only through synchronisation: a close that
        // reads 0 here is the close of the last handle.
        if self.clones.load(Ordering::Acquire) != 0 && self.release_clone(id) {
            return false;
        }
        self.close(id);
        true
    }

    #[allow(deprecated)]
    fn drop_span(&self, span: Id) {
        let _ = self.try_close(span);
    }

    fn current_span(&self) -> Current {
        self.core
            .threads
            .peek_slot(|slot| {
                let stack = slot.stack.try_borrow().ok()?;
                stack.last().map(|&(id, info)| Current::new(Id::from_u64(id), info.meta))
            })
            .flatten()
            .unwrap_or_else(Current::none)
    }

    unsafe fn downcast_raw(&self, id: TypeId) -> Option<*const ()> {
        if id == TypeId::of::<Self>() {
            Some(self as *const Self as *const ())
        } else if id == TypeId::of::<Arc<Core>>() {
            Some(&self.core as *const Arc<Core> as *const ())
        } else {
            None
        }
    }
}
