//! The capture's own `tracing` subscriber: span ids, reference counts and each
//! thread's stack of entered spans kept next to the per-thread buffers, with
//! no registry underneath; and the tee to the dispatcher that was the default
//! when the capture started, so that the tool's own logging prints exactly
//! what it prints without capture.
//!
//! - A span's id comes from one counter: unique, never zero, never reused
//!   within a capture. What is known of each open span ([`SpanInfo`]) is kept
//!   in one table under a lock, from its creation to its close.
//! - Spans are almost never cloned: a handle's close checks one atomic count of
//!   outstanding clones, and only when it is not zero, a table of extra
//!   references under a lock.
//! - The tee ([`crate::Session::start`]): what the inner dispatcher wants is
//!   forwarded to it with span ids mapped (the inner id is kept beside the
//!   callsite), the capture's root span never, so the tool's subscriber sees
//!   the parents it would see without capture. Limit: an event with an
//!   explicit parent (`info!(parent: &span, ..)`) reaches it unchanged, with
//!   the capture's id for its parent: `tracing` offers no way to rebuild an
//!   event with another parent.
//! - What the filter and the inner dispatcher said of each call site when
//!   `tracing` registered it is kept in a table ([`Answers`]). A
//!   `tracing-subscriber` registry whose layers all have per-layer filters
//!   answers `enabled` with `true` even when every filter said no (it
//!   disables such call sites through their interest instead): a call site
//!   whose interest there is `never` is not forwarded to it, or its spans
//!   would be made, entered and closed in the registry's slab for no layer.

use std::any::TypeId;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tracing_core::span::{Attributes, Current, Id, Record};
use tracing_core::subscriber::Interest;
use tracing_core::{Dispatch, Event, LevelFilter, Metadata, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::{Layer, Registry};

use rustc_hash::FxHashMap;

use crate::buffer::Slot;
use crate::capture::{downcast_raw, wants, Core, ROOT_TARGET};
use crate::layer::max_with_root;
use crate::record::Meta;

/// What the subscriber knows of one open span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SpanInfo {
    pub meta: Meta,
    /// The span's id in the dispatcher the capture forwards to (0: none).
    pub inner: u64,
    /// Whether the capture records the span (its filter enabled it), or only
    /// forwards it.
    pub captured: bool,
}

/// What is known of one call site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Answers {
    /// The capture's filter wants it.
    wanted: bool,
    /// The tool's dispatcher said its interest is `never`.
    inner_never: bool,
}

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
    /// What the filter and `inner` said of each call site, by the address of
    /// its metadata. A call site given at another address (`tracing-log`'s
    /// records) is answered by the filter and by `enabled`.
    sites: Mutex<FxHashMap<usize, Answers>>,
    /// Outstanding extra references, the sum of `refs`.
    clones: AtomicUsize,
    /// Span id to the number of its handles beyond the first.
    refs: Mutex<FxHashMap<u64, usize>>,
    /// Every open span.
    spans: Mutex<FxHashMap<u64, SpanInfo>>,
    /// The id of the next span.
    next_id: AtomicU64,
}

impl CaptureSubscriber {
    pub(crate) fn new(core: Arc<Core>, filter: Targets, inner: Option<Dispatch>) -> CaptureSubscriber {
        let max_level = max_with_root(Layer::<Registry>::max_level_hint(&filter));
        CaptureSubscriber {
            core,
            filter,
            max_level,
            sites: Mutex::new(FxHashMap::default()),
            inner,
            clones: AtomicUsize::new(0),
            refs: Mutex::new(FxHashMap::default()),
            spans: Mutex::new(FxHashMap::default()),
            next_id: AtomicU64::new(1),
        }
    }

    /// What is known of `meta`: kept when it was registered, or worked out
    /// now for a call site the table does not hold.
    #[inline]
    fn known(&self, meta: &Metadata<'_>) -> Answers {
        let kept = self.sites.lock().get(&(meta as *const Metadata<'_> as usize)).copied();
        kept.unwrap_or_else(|| Answers { wanted: wants(&self.filter, meta), inner_never: false })
    }

    /// [`Self::known`] for a span or event `tracing` gave the subscriber:
    /// with no inner dispatcher, `enabled` said yes for the capture alone,
    /// and there is nothing to look up.
    #[inline]
    fn known_given(&self, meta: &Metadata<'_>) -> Answers {
        match self.inner {
            Some(_) => self.known(meta),
            None => Answers { wanted: true, inner_never: true },
        }
    }

    /// The inner dispatcher, if it wants `meta` and `meta` is not the root's.
    /// A call site whose interest it said is `never` is not asked `enabled`,
    /// which may say yes to it anyway.
    #[inline]
    fn inner_for(&self, meta: &Metadata<'_>, known: Answers) -> Option<&Dispatch> {
        self.inner.as_ref().filter(|d| meta.target() != ROOT_TARGET && !known.inner_never && d.enabled(meta))
    }

    /// The inner dispatcher and the span's id there, if it has the span.
    #[inline]
    fn inner_of(&self, info: Option<SpanInfo>) -> Option<(&Dispatch, Id)> {
        let d = self.inner.as_ref()?;
        let inner = info?.inner;
        (inner != 0).then(|| (d, Id::from_u64(inner)))
    }

    /// What is known of span `id`, if it is open.
    fn info(&self, id: u64) -> Option<SpanInfo> {
        self.spans.lock().get(&id).copied()
    }

    /// Runs `f` on the calling thread's slot and returns what it found of span
    /// `id`; without a slot (the capture finished before this thread's first
    /// record, or a `Debug` impl is logging) counts the record as lost, never
    /// silently, and looks the span up for the tee.
    fn on_slot(&self, id: u64, f: impl FnOnce(&Slot) -> Option<SpanInfo>) -> Option<SpanInfo> {
        match self.core.threads.with_slot(f) {
            Some(info) => info,
            None => {
                self.core.threads.handoff.lost();
                self.info(id)
            }
        }
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
        // Every captured span left state in the writer: its fields, or the
        // writer's note of where it was entered (for its own track when it
        // runs in pieces).
        let forgotten = self.spans.lock().remove(&id);
        if forgotten.is_none_or(|i| i.captured)
            && core.threads.with_slot(|slot| core.close(Some(&slot.buf), id, false)).is_none()
        {
            core.threads.handoff.lost();
        }
    }
}

impl Subscriber for CaptureSubscriber {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        // The inner dispatcher registers the callsite for itself: `tracing`
        // asks every dispatcher and combines the answers. Its answer is kept
        // too, for what to forward to it, and so is the filter's.
        let wanted = wants(&self.filter, meta);
        let inner_never = self.inner.as_ref().is_some_and(|d| d.register_callsite(meta).is_never());
        self.sites.lock().insert(meta as *const Metadata<'static> as usize, Answers { wanted, inner_never });
        if wanted {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        // Interest is cached for every live dispatcher at once: another one
        // may have wanted a callsite that this filter does not.
        let known = self.known(meta);
        known.wanted || (!known.inner_never && self.inner.as_ref().is_some_and(|d| d.enabled(meta)))
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        self.max_level
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let meta = attrs.metadata();
        let known = self.known_given(meta);
        let inner = match self.inner_for(meta, known) {
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
        let captured = known.wanted;
        let info = SpanInfo { meta, inner, captured };
        let core = &*self.core;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.spans.lock().insert(id, info);
        if info.captured {
            let made = core
                .threads
                .with_slot(|slot| core.new_span(Some(&slot.buf), id, meta, false, |v| attrs.record(v)));
            if made.is_none() {
                core.threads.handoff.lost();
            }
        }
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let id = span.into_u64();
        let core = &*self.core;
        let info = self.on_slot(id, |slot| {
            let info = self.info(id);
            if !values.is_empty() && info.is_none_or(|i| i.captured) {
                core.record_values(Some(&slot.buf), id, |v| values.record(v));
            }
            info
        });
        if let Some((d, inner)) = self.inner_of(info) {
            d.record(&inner, values);
        }
    }

    fn record_follows_from(&self, span: &Id, follows: &Id) {
        let (id, origin) = (span.into_u64(), follows.into_u64());
        let (a, b) = (self.info(id), self.info(origin));
        if a.is_none_or(|i| i.captured) && b.is_none_or(|i| i.captured) {
            self.core.follows(None, id, origin);
        }
        if let (Some((d, a)), Some((_, b))) = (self.inner_of(a), self.inner_of(b)) {
            d.record_follows_from(&a, &b);
        }
    }

    fn event(&self, event: &Event<'_>) {
        let meta = event.metadata();
        let known = self.known_given(meta);
        if known.wanted {
            self.core.event(None, meta, |v| event.record(v));
        }
        if let Some(d) = self.inner_for(meta, known) {
            d.event(event);
        }
    }

    fn enter(&self, span: &Id) {
        let id = span.into_u64();
        let core = &*self.core;
        let entered = self.on_slot(id, |slot| {
            let info = self.info(id);
            if let (Some(i), Ok(mut stack)) = (info, slot.stack.try_borrow_mut()) {
                stack.push((id, i));
            }
            if info.is_none_or(|i| i.captured) {
                core.enter(Some(&slot.buf), id, info.map(|i| i.meta));
            }
            info
        });
        if let Some((d, inner)) = self.inner_of(entered) {
            d.enter(&inner);
        }
    }

    fn exit(&self, span: &Id) {
        let id = span.into_u64();
        let core = &*self.core;
        let exited = self.on_slot(id, |slot| {
            let info = slot.stack.try_borrow_mut().ok().and_then(|mut stack| {
                // Most exits are of the innermost span.
                if stack.last().is_some_and(|e| e.0 == id) {
                    return stack.pop().map(|e| e.1);
                }
                let at = stack.iter().rposition(|e| e.0 == id)?;
                Some(stack.remove(at).1)
            });
            if info.is_none_or(|i| i.captured) {
                core.exit(Some(&slot.buf), id, info.map(|i| i.meta));
            }
            info
        });
        if let Some((d, inner)) = self.inner_of(exited) {
            d.exit(&inner);
        }
    }

    fn clone_span(&self, span: &Id) -> Id {
        let id = span.into_u64();
        if let Some((d, inner)) = self.inner.as_ref().and_then(|_| self.inner_of(self.info(id))) {
            let _ = d.clone_span(&inner);
        }
        let mut refs = self.refs.lock();
        *refs.entry(id).or_insert(0) += 1;
        self.clones.fetch_add(1, Ordering::Relaxed);
        span.clone()
    }

    fn try_close(&self, span: Id) -> bool {
        let id = span.into_u64();
        // Every handle's drop reaches the inner dispatcher, which counts its own.
        if let Some((d, inner)) = self.inner.as_ref().and_then(|_| self.inner_of(self.info(id))) {
            let _ = d.try_close(inner);
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
        downcast_raw(self, &self.core, id)
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
    use crate::buffer::{steal_all, Handoff, Msg, Threads};
    use crate::record::{Batch, CaptureClock, Kind};
    use crate::writer::{Pending, StartOwned, WriterCell};

    fn rig() -> (Dispatch, Arc<Core>, Receiver<Msg>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        let (recycle_tx, recycle) = crossbeam_channel::bounded(1);
        let threads = Arc::new(Threads::new(CaptureClock::start(), Handoff::new(tx, recycle, usize::MAX)));
        let pending =
            Pending { rx: rx.clone(), recycle: recycle_tx, sinks: Vec::new(), start: StartOwned::default() };
        let core = Arc::new(Core {
            writer: WriterCell::new(threads.clone(), pending),
            threads,
            base: std::time::Instant::now(),
            lane_tracks: Mutex::new(Vec::new()),
            children: Default::default(),
            family: Default::default(),
            dir: Default::default(),
            stem: "test".into(),
            cpu: tracing_core::LevelFilter::INFO,
        });
        // No writer ever runs: the batches stay in the channel for the test.
        let _ = core.writer.end();
        let dispatch = Dispatch::new(CaptureSubscriber::new(core.clone(), "trace".parse().unwrap(), None));
        (dispatch, core, rx)
    }

    fn sub(d: &Dispatch) -> &CaptureSubscriber {
        d.downcast_ref::<CaptureSubscriber>().expect("the capture's own subscriber")
    }

    /// Every record sent so far: (thread, kind, span id, callsite name).
    fn records(rx: &Receiver<Msg>) -> Vec<(u32, Kind, u64, Option<&'static str>)> {
        let mut out = Vec::new();
        for msg in rx.try_iter() {
            if let Msg::Batch { thread, batch, .. } = msg {
                out.extend(batch.raws.iter().map(|r| (thread, r.kind, r.id, r.meta.map(|m| m.name()))));
            }
        }
        out
    }

    fn closes(records: &[(u32, Kind, u64, Option<&str>)], id: u64) -> Vec<u32> {
        // A close right after the span's exit joins the exit's record.
        let closing = |k: Kind| matches!(k, Kind::Close | Kind::ExitClose);
        records.iter().filter(|r| closing(r.1) && r.2 == id).map(|r| r.0).collect()
    }

    /// No span is left in any table.
    fn assert_empty(d: &Dispatch) {
        let s = sub(d);
        assert!(s.spans.lock().is_empty(), "open: {:?}", s.spans.lock().keys().collect::<Vec<_>>());
        assert!(s.refs.lock().is_empty());
        assert_eq!(s.clones.load(Ordering::Relaxed), 0);
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
                shared2.threads.flush_local();
            })
            .join()
            .unwrap();
            shared.threads.flush_local();
            (ids.0.into_u64(), ids.1.into_u64(), ids.2.into_u64())
        });
        let records = records(&rx);
        // Thread 0 created them; thread 1 dropped the last handles.
        assert_eq!(closes(&records, with_fields), [1]);
        // Elsewhere the callsite is not looked up: a close is recorded anyway.
        assert_eq!(closes(&records, fieldless), [1]);
        // A span without fields is closed too: the writer notes where every
        // span was entered.
        assert_eq!(closes(&records, local), [0]);
        assert_empty(&d);
    }

    /// The heap bytes of each batch sent so far.
    fn sent_sizes(rx: &Receiver<Msg>) -> Vec<usize> {
        rx.try_iter()
            .filter_map(|m| match m {
                Msg::Batch { batch, .. } => Some(batch.bytes()),
                _ => None,
            })
            .collect()
    }

    /// The heap bytes of the batch thread `index` holds now.
    fn held_bytes(shared: &Core, index: usize) -> usize {
        let buf = shared.threads.list.lock()[index].clone();
        let taken = steal_all(&[buf], &shared.threads.clock, Batch::default).pop().flatten();
        // Only its size matters: the test does not look at these records.
        taken.and_then(|t| t.batch).map_or(0, |b| b.bytes())
    }

    #[test]
    fn a_thread_starts_with_a_small_batch_and_an_exiting_one_keeps_none() {
        let (d, shared, rx) = rig();
        let full = Batch::with_capacity().bytes();
        // A thread that records two records and exits: its first batch is
        // small, and the one it is left at its exit holds no memory.
        let d2 = d.clone();
        let first = std::thread::spawn(move || {
            dispatcher::with_default(&d2, || drop(info_span!("short").entered()));
        });
        first.join().unwrap();
        let sent = sent_sizes(&rx);
        assert_eq!(sent.len(), 1, "the exiting thread hands its batch over once");
        assert!(sent[0] < full / 8, "a first batch of {} bytes, against {full} for a full one", sent[0]);
        assert_eq!(held_bytes(&shared, 0), 0, "an exited thread holds a batch of memory");
        // A thread that fills batches gets full ones after its first.
        dispatcher::with_default(&d, || {
            for _ in 0..crate::record::BATCH_RECORDS {
                drop(info_span!("busy").entered());
            }
        });
        let after = sent_sizes(&rx);
        assert!(!after.is_empty(), "a full batch was handed over");
        assert_eq!(held_bytes(&shared, 1), full, "the batch that follows a full one is of full size");
    }
}
