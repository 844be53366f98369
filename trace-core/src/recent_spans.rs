//! The callsites of a thread's most recent spans, for the capture's own
//! subscriber: entering a span where it was created (the usual case) finds its
//! callsite here without a lock or a table lookup.

use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, Ordering};

use tracing_core::Metadata;

use crate::record::Meta;

/// Entries in a thread's ring of recent spans (a power of two).
pub(crate) const RECENT_SPANS: usize = 256;

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

/// One entry of a [`RecentSpans`]: a span id (0: free) and what is known of it.
#[derive(Default)]
pub(crate) struct RecentSpan {
    pub id: AtomicU64,
    meta: AtomicPtr<Metadata<'static>>,
    inner: AtomicU64,
    captured: AtomicBool,
}

impl RecentSpan {
    /// The entry's span, read by the thread that wrote it.
    #[inline]
    pub(crate) fn own_info(&self) -> SpanInfo {
        // SAFETY: every pointer stored comes from a `&'static Metadata<'static>`
        // (`RecentSpan::store`), and an entry is read only when its id is not
        // 0, that is after a callsite was stored.
        let meta = unsafe { &*self.meta.load(Ordering::Relaxed) };
        SpanInfo {
            meta,
            inner: self.inner.load(Ordering::Relaxed),
            captured: self.captured.load(Ordering::Relaxed),
        }
    }

    /// Stores `info` under `id`: only the owning thread, over a free entry.
    #[inline]
    pub(crate) fn store(&self, id: u64, info: SpanInfo) {
        self.meta.store(info.meta as *const Metadata<'static> as *mut Metadata<'static>, Ordering::Release);
        self.inner.store(info.inner, Ordering::Release);
        self.captured.store(info.captured, Ordering::Release);
        self.id.store(id, Ordering::Release);
    }
}

/// The callsites of one thread's most recent spans, indexed by the low bits of
/// the span's sequence number.
///
/// Only the owning thread stores a new entry (the callsite, then the id, both
/// with release ordering, over an entry whose id is 0). Any thread may clear
/// the id of a span it closes, with a compare-and-swap, and may read an entry
/// seqlock-style: the id, the contents, then the id again.
pub(crate) struct RecentSpans {
    pub entries: [RecentSpan; RECENT_SPANS],
}

impl RecentSpans {
    /// An empty ring: every id 0.
    pub(crate) fn new() -> RecentSpans {
        RecentSpans { entries: std::array::from_fn(|_| RecentSpan::default()) }
    }

    #[inline]
    pub(crate) fn entry(&self, id: u64) -> &RecentSpan {
        &self.entries[(id as usize) & (RECENT_SPANS - 1)]
    }

    /// Another thread's read of `id`, if the ring still holds it.
    pub(crate) fn read(&self, id: u64) -> Option<SpanInfo> {
        let e = self.entry(id);
        if e.id.load(Ordering::Acquire) != id {
            return None;
        }
        let meta = e.meta.load(Ordering::Relaxed);
        let inner = e.inner.load(Ordering::Relaxed);
        let captured = e.captured.load(Ordering::Relaxed);
        // Pairs with the release stores of newer contents: if what was read is
        // newer than `id`, the id read below is too.
        fence(Ordering::Acquire);
        if e.id.load(Ordering::Relaxed) != id {
            return None;
        }
        // SAFETY: as in `RecentSpan::own_info`; the second read of the id shows
        // that `meta` is the callsite stored with it.
        Some(SpanInfo { meta: unsafe { &*meta }, inner, captured })
    }

    /// Another thread clears `id`'s entry; false if the ring no longer holds it.
    pub(crate) fn clear(&self, id: u64) -> bool {
        self.entry(id).id.compare_exchange(id, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    }
}
