//! One capture's state, and the record protocol both front-ends speak.
//!
//! The front-ends ([`crate::subscriber`], the capture's own subscriber, and
//! [`crate::layer`], a layer on the registry) only resolve span ids and
//! callsites; what a `tracing` call turns into is decided here, once.

use std::any::TypeId;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use tracing_core::field::Visit;
use tracing_core::Metadata;

use crate::buffer::{Filled, ThreadBuf, Threads};
use crate::record::{Batch, Kind, Meta};
use crate::writer::WriterCell;

/// The target of the span a capture wraps its command in (`command`, with the
/// command's name as a field). A capture records it whatever its filter, and
/// never shows it to the tool's own subscriber or layers.
pub const ROOT_TARGET: &str = "cabin_trace";

/// Numbers the flows of [`crate::bind`], for every capture of the process.
pub(crate) static FLOWS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// One capture's state, shared by its front-end, its threads, its session and
/// its handles.
pub(crate) struct Core {
    pub threads: Arc<Threads>,
    pub writer: WriterCell,
    /// The capture's start as an `Instant`, read with `threads.clock`.
    pub base: Instant,
    /// Per external lane, the end of the last slice on each of its tracks.
    pub lane_tracks: Mutex<Vec<(String, Vec<u64>)>>,
    /// The children the command's helpers waited for ([`crate::Handle::child_exited`]).
    pub children: crate::os::ChildTotals,
    /// The capture's family, directory and stem, for its children's environment.
    pub family: crate::family::Family,
    pub dir: std::path::PathBuf,
    pub stem: String,
    /// The least severe level whose spans read the thread CPU clock at
    /// enter and exit (`<P>_TRACE_CPU`); `OFF` for none.
    pub cpu: tracing_core::LevelFilter,
}

impl Core {
    /// Appends a record to `buf` (the calling thread's), starting the writer
    /// thread when a batch was handed over. False when the capture no longer
    /// takes records.
    #[inline(always)]
    pub(crate) fn store(&self, buf: &ThreadBuf, stamp: bool, f: impl FnOnce(&mut Batch, u64)) -> bool {
        match self.threads.fill(buf, stamp, f) {
            Filled::Stored => true,
            Filled::HandedOver => {
                self.writer.ensure_started();
                true
            }
            Filled::NeedsWriter => {
                self.writer.ensure_started();
                self.threads.hand_over_after_waiting(buf);
                true
            }
            Filled::Closed => false,
        }
    }

    /// Appends a record to `buf`, the calling thread's buffer (looked up when
    /// the front-end does not have it at hand), counting it as lost if it
    /// cannot be stored.
    #[inline(always)]
    fn record(&self, buf: Option<&ThreadBuf>, stamp: bool, f: impl FnOnce(&mut Batch, u64)) -> bool {
        let stored = match buf {
            Some(buf) => self.store(buf, stamp, f),
            None => self.threads.with_slot(|slot| self.store(&slot.buf, stamp, f)) == Some(true),
        };
        if !stored {
            self.threads.handoff.lost();
        }
        stored
    }

    /// A span was created. `stamp`: whether the creation needs a stamp of its
    /// own (ids that can be reused, as the registry's, need one so that the
    /// creation is ordered after the close of the span that had the id
    /// before); otherwise it takes the thread's latest stamp, which is enough
    /// to order it before anything else about the span.
    #[inline]
    pub(crate) fn new_span(
        &self,
        buf: Option<&ThreadBuf>,
        id: u64,
        meta: Meta,
        stamp: bool,
        values: impl FnOnce(&mut dyn Visit),
    ) {
        // Recorded even for a span that declares no field: an enter that
        // follows at once turns it into the span's first enter
        // ([`Batch::push_enter`]), which spares the writer the span table.
        let _ = self.record(buf, stamp, |b, ts| b.push_fields(Kind::NewSpan, id, ts, Some(meta), values));
    }

    /// Values were recorded into span `id`.
    #[inline]
    pub(crate) fn record_values(
        &self,
        buf: Option<&ThreadBuf>,
        id: u64,
        values: impl FnOnce(&mut dyn Visit),
    ) {
        let _ = self.record(buf, true, |b, ts| b.push_fields(Kind::Record, id, ts, None, values));
    }

    /// Span `id` (callsite `meta`, when known) was entered on this thread.
    #[inline]
    pub(crate) fn enter(&self, buf: Option<&ThreadBuf>, id: u64, meta: Option<Meta>) {
        // Read before the buffer is claimed, so that a steal never waits for the clock.
        let cpu = self.thread_cpu(meta);
        let _ = self.record(buf, true, |b, ts| b.push_enter(id, ts, meta, cpu));
    }

    /// Span `id` (callsite `meta`, when known) was exited on this thread.
    #[inline]
    pub(crate) fn exit(&self, buf: Option<&ThreadBuf>, id: u64, meta: Option<Meta>) {
        let cpu = self.thread_cpu(meta);
        let _ = self.record(buf, true, |b, ts| b.push_cpu(Kind::Exit, id, ts, None, cpu));
    }

    /// Whether any span reads the thread CPU clock, for a front-end that
    /// looks a callsite up only when one may.
    #[inline]
    pub(crate) fn reads_cpu(&self) -> bool {
        self.cpu != tracing_core::LevelFilter::OFF
    }

    /// The thread CPU clock, read for spans at the levels `<P>_TRACE_CPU`
    /// selects: one comparison for the others (kept inline; the reading
    /// itself is a call).
    #[inline(always)]
    fn thread_cpu(&self, meta: Option<Meta>) -> Option<u64> {
        match meta {
            Some(m) if *m.level() <= self.cpu => read_thread_cpu(),
            _ => None,
        }
    }

    /// The last handle of span `id` is gone. `stamp` as for
    /// [`Core::new_span`]: where ids are never reused, the close only frees
    /// the writer's state, and the thread's latest stamp orders it well enough.
    /// A close right after the span's exit joins the exit's record
    /// ([`Batch::push_close`]).
    #[inline]
    pub(crate) fn close(&self, buf: Option<&ThreadBuf>, id: u64, stamp: bool) -> bool {
        self.record(buf, stamp, |b, ts| b.push_close(id, ts))
    }

    /// Span `id` follows from span `follows` (`record_follows_from`).
    #[inline]
    pub(crate) fn follows(&self, buf: Option<&ThreadBuf>, id: u64, follows: u64) {
        let _ = self.record(buf, true, |b, ts| b.push_link(Kind::Follows, id, follows, ts));
    }

    /// A helper started on this thread will run with flow `flow` ([`crate::bind`]).
    pub(crate) fn flow_out(&self, flow: u64) {
        let _ = self.record(None, true, |b, ts| b.push(Kind::FlowOut, flow, ts, None));
    }

    /// This thread runs the helper of flow `flow`. Not counted as lost when
    /// the capture has finished: the helper may outlive it.
    pub(crate) fn flow_in(&self, flow: u64) {
        let _ = self
            .threads
            .with_slot(|slot| self.store(&slot.buf, true, |b, ts| b.push(Kind::FlowIn, flow, ts, None)));
    }

    /// An event at callsite `meta`.
    #[inline]
    pub(crate) fn event(&self, buf: Option<&ThreadBuf>, meta: Meta, values: impl FnOnce(&mut dyn Visit)) {
        let _ = self.record(buf, true, |b, ts| b.push_fields(Kind::Event, 0, ts, Some(meta), values));
    }
}

/// The thread CPU clock, out of the record path's line.
#[inline(never)]
fn read_thread_cpu() -> Option<u64> {
    crate::os::thread_cpu_ns()
}

/// `downcast_raw` of a front-end, `this`, that records into `core`: the
/// front-end itself, or the capture that [`crate::current`] and [`crate::bind`]
/// look for.
pub(crate) fn downcast_raw<T: 'static>(this: &T, core: &Arc<Core>, id: TypeId) -> Option<*const ()> {
    if id == TypeId::of::<T>() {
        Some(this as *const T as *const ())
    } else if id == TypeId::of::<Arc<Core>>() {
        Some(core as *const Arc<Core> as *const ())
    } else {
        None
    }
}

/// Whether a capture with `filter` records spans and events of `meta`.
#[inline]
pub(crate) fn wants(filter: &tracing_subscriber::filter::Targets, meta: &Metadata<'_>) -> bool {
    filter.would_enable(meta.target(), meta.level()) || meta.target() == ROOT_TARGET
}
