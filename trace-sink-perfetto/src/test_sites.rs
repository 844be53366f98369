//! `tracing` call sites for the tests, their strings `'static` as a
//! capture gets them ([`trace_core::Site::has_static_text`]).

use std::sync::{Arc, Mutex};

/// A subscriber that wants everything and keeps the metadata of each span
/// and event made under it.
struct Collect(Arc<Mutex<Vec<&'static tracing::Metadata<'static>>>>);

impl Collect {
    fn keep(&self, meta: &'static tracing::Metadata<'static>) {
        if let Ok(mut seen) = self.0.lock() {
            seen.push(meta);
        }
    }
}

impl tracing::Subscriber for Collect {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        self.keep(span.metadata());
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        self.keep(event.metadata());
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// The metadata of the spans and events `make` makes, in order.
pub(crate) fn metadata_of(make: impl FnOnce()) -> Vec<&'static tracing::Metadata<'static>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    tracing::subscriber::with_default(Collect(Arc::clone(&seen)), make);
    let metas = seen.lock().map(|seen| seen.clone()).unwrap_or_default();
    metas
}
