//! The capture as a `tracing-subscriber` layer, for a tool that composes its
//! own registry: a thin adapter that takes span ids and callsites from the
//! registry and speaks [`crate::capture`]'s record protocol.

use std::any::TypeId;
use std::fmt;
use std::sync::Arc;

use tracing_core::span::{Attributes, Id, Record};
use tracing_core::subscriber::Interest;
use tracing_core::{Event as TEvent, LevelFilter, Metadata, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Filter};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::capture::{downcast_raw, wants, Core, ROOT_TARGET};

/// The capture's recording as a `tracing` layer on the registry
/// ([`crate::Session::start_with_layer`] composes it); also the type through
/// which code inside a capture finds it, whichever front-end records it.
pub struct CaptureLayer {
    pub(crate) core: Arc<Core>,
}

impl fmt::Debug for CaptureLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaptureLayer").field("capture_id", &self.core.threads.capture_id).finish()
    }
}

impl<S> Layer<S> for CaptureLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        // Registry ids are reused once a span closes: the creation gets a stamp
        // of its own, to come after the close of the span that had its id.
        self.core.new_span(None, id.into_u64(), attrs.metadata(), true, |v| attrs.record(v));
    }

    fn on_record(&self, span: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        if !values.is_empty() {
            self.core.record_values(None, span.into_u64(), |v| values.record(v));
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        self.core.enter(None, id.into_u64(), ctx.metadata(id));
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        // The callsite, for its level, only when some spans read the CPU clock.
        let meta = if self.core.reads_cpu() { ctx.metadata(id) } else { None };
        self.core.exit(None, id.into_u64(), meta);
    }

    fn on_follows_from(&self, span: &Id, follows: &Id, _ctx: Context<'_, S>) {
        self.core.follows(None, span.into_u64(), follows.into_u64());
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        // Every span left state in the writer (its fields, where it was entered).
        let _ = self.core.close(None, id.into_u64(), true);
    }

    fn on_event(&self, event: &TEvent<'_>, _ctx: Context<'_, S>) {
        self.core.event(None, event.metadata(), |v| event.record(v));
    }

    unsafe fn downcast_raw(&self, id: TypeId) -> Option<*const ()> {
        downcast_raw(self, &self.core, id)
    }
}

/// The capture's filter as a per-layer filter: its `Targets`, and the
/// capture's root span whatever they say.
pub(crate) struct CaptureFilter {
    pub targets: Targets,
}

impl<S> Filter<S> for CaptureFilter {
    fn enabled(&self, meta: &Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        wants(&self.targets, meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if wants(&self.targets, meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        max_with_root(Layer::<tracing_subscriber::Registry>::max_level_hint(&self.targets))
    }
}

/// A filter's level hint, raised to let the root span (at `INFO`) through.
pub(crate) fn max_with_root(hint: Option<LevelFilter>) -> Option<LevelFilter> {
    hint.map(|h| h.max(LevelFilter::INFO))
}

/// A per-layer filter that hides the capture's root span from a tool's layer.
pub(crate) struct HideRoot;

impl<S> Filter<S> for HideRoot {
    fn enabled(&self, meta: &Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        meta.target() != ROOT_TARGET
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if meta.target() == ROOT_TARGET {
            Interest::never()
        } else {
            Interest::always()
        }
    }
}
