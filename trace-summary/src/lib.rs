//! The timings summary of a capture: `<stem>.timings.json`, a small, versioned
//! JSON report of where the time went, written for every capture.
//!
//! # Overview
//!
//! - [`SummarySink`] aggregates on the capture's writer thread as the events go
//!   by (the trace files are never re-read) and writes the report when the
//!   capture finishes, also when a trace file failed (then `trace_complete` is
//!   false and the file is named).
//! - [`Timings`] is the report's model, documented field by field; units are in
//!   the field names (`_us`, `_kib`, `_ms`). [`Timings::from_path`] reads formats
//!   3 and 2 and refuses any other version.
//! - [`Timings::table`] is a human view: the top span names by total time.
//! - `schema/timings-v3.schema.json` is the JSON Schema of format 3.
//!
//! Per span name, `total_inclusive_us` is a sum of inclusive lifetimes over
//! threads and nesting: not elapsed time. Which span names appear follows the
//! code's instrumentation; a name present in one report and not in another is a
//! change of instrumentation, not a regression.
//!
//! # Example
//!
//! ```
//! use trace_core::{Config, Session, Sink};
//! use trace_summary::{SummarySink, Timings};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let config = Config::from_lookup("DEMO", &[], |n| {
//!     (n == "DEMO_TRACE_DIR").then(|| dir.path().into())
//! })
//! .unwrap()
//! .unwrap();
//! let sinks: Vec<Box<dyn Sink>> = vec![Box::new(SummarySink::new())];
//! let session = Session::start(&config, "fetch", sinks).unwrap();
//! session.in_scope(|| {
//!     for _ in 0..3 {
//!         tracing::info_span!("http_get", bytes = 100u64).in_scope(|| ());
//!     }
//! });
//! let report = session.finish();
//! let timings = Timings::from_path(&report.files[0].path).unwrap();
//! let get = timings.spans.iter().find(|s| s.name == "http_get").unwrap();
//! assert_eq!((get.count, get.field_sums["bytes"]), (3, 300));
//! ```
//!
//! # What it does not do
//!
//! No exclusive time and no critical path: spans overlap across threads, and
//! the parallel part of a build is shown as Ninja logged it. Comparing two
//! reports is later work.

#![deny(missing_docs)]

mod format;
mod model;
mod read;
mod sink;

pub use format::{
    FORMAT_VERSION, NAME, NINJA_AVAILABLE, NINJA_NOT_RUN, NINJA_UNAVAILABLE, OLDEST_READ_VERSION,
    SINCE_IMAGE_START, SINCE_PROCESS_CREATION, STACKS_OFF, STACKS_ON, STACKS_UNAVAILABLE, SUFFIX,
};
pub use model::{
    FunctionSamples, Lane, Ninja, ResourceSummary, SpanStacks, SpanTotals, StackSummary, Timings, TraceFile,
};
pub use read::ReadError;
pub use sink::SummarySink;
