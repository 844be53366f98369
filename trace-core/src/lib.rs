//! The capture engine of cabin-trace: one command's `tracing` spans and events,
//! recorded into files, scoped to that command and never anything else.
//!
//! # Overview
//!
//! - [`Config`] reads the `<P>_TRACE_*` variables under a tool's prefix and
//!   checks every value before the command runs; a filter's bare word must be
//!   a level, so a typo is refused, never a silent capture of nothing.
//! - [`Session`] is one capture: it creates the `.partial` files and a
//!   dispatcher that the command runs under with
//!   `tracing::dispatcher::with_default` (never a global default), so
//!   concurrent captures in one process each record only their own events.
//!   Two thin front-ends speak one record protocol: the capture's own
//!   subscriber ([`Session::start`]), which forwards what the thread's
//!   previous default dispatcher enables to it, so that the tool's own logging
//!   keeps printing; or a [`CaptureLayer`] on a registry
//!   ([`Session::start_with_layer`]).
//! - On the hot path a thread appends raw records (a stamp, a span id, a
//!   `&'static` callsite, field values) to a buffer of its own, claimed with an
//!   atomic swap, never a lock, and hands it over in batches; nothing is
//!   allocated per event once the buffers are warm. Past the memory budget
//!   ([`Config::with_memory_budget`]) the thread waits for the writer
//!   ([`Report::waited_ns`]); only a writer stuck for a second makes the
//!   capture drop batches, counted, their gaps marked.
//! - The writer merges the threads' records in time order, so that every
//!   record of a span reaches it whichever thread wrote it, and feeds every
//!   [`Sink`] a well-formed [`Event`] stream. It is a thread started by the
//!   first batch handed over; a command too short to fill one has its records
//!   written by the thread that finishes the capture, so a sink must not
//!   assume which thread calls it. Each sink writes one file through a
//!   [`CheckedWriter`], which keeps the first I/O error, under `catch_unwind`:
//!   a sink that fails leaves only its own file `.partial`.
//! - A span entered more than once (a future polled again, a span moved to
//!   another thread) is also sent at its close as an [`Event::AsyncSpan`];
//!   [`bind`], [`spawn`] and `follows_from` become flows ([`Event::FlowOut`],
//!   [`Event::FlowIn`]).
//! - Spans at the levels `<P>_TRACE_CPU` selects read the thread's CPU clock
//!   at enter and exit. One sampler thread, shared by the process's captures,
//!   reads the process's memory and CPU ([`os::ProcessSampler`]). With
//!   `<P>_TRACE_STACKS`, sampled CPU stacks are placed in their spans and
//!   handed to every sink before it finishes ([`Sink::stacks`]).
//! - [`Session::finish`] closes what is still open, finishes the sinks and
//!   renames each complete file from `.partial`; the [`Report`] counts what
//!   was dropped, left open or late. [`current`] gives code inside the
//!   command a [`Handle`] to add external lanes.
//!
//! The modules read top-down: `clock` (timestamps and their conversion),
//! `record` (raw records), `buffer` (per-thread buffers, hand-over, budget),
//! `writer` (the merge and the sinks; `writer::fields`, a span's fields;
//! `writer::span_lives`, spans in pieces and flows), `capture` (a capture's
//! state and the record protocol), then the front-ends `subscriber` and
//! `layer`, and `session`.
//!
//! # Example
//!
//! ```
//! use trace_core::{Config, Session};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let config = Config::from_lookup("DEMO", &[], |name| {
//!     (name == "DEMO_TRACE_DIR").then(|| dir.path().into())
//! })
//! .unwrap()
//! .expect("DEMO_TRACE_DIR is set");
//! let session = Session::start(&config, "build", Vec::new()).unwrap();
//! let answer = session.run(|| {
//!     let _phase = tracing::info_span!("compile").entered();
//!     42
//! });
//! let report = session.finish();
//! assert_eq!(answer, 42);
//! assert!(report.is_complete());
//! ```
//!
//! # Environment
//!
//! | variable | meaning |
//! | --- | --- |
//! | `<P>_TRACE_DIR` | turns capture on and names the output directory (created if missing) |
//! | `<P>_TRACE_FILTER` | `tracing-subscriber` `Targets` directives; default `info` |
//! | `<P>_TRACE_FORMAT` | comma list of the sinks to write; default all the caller knows |
//! | `<P>_TRACE_CPU` | the least severe level whose spans read the thread CPU clock at enter and exit ([`Event::SpanBegin`]'s `thread_cpu_ns`, [`Event::SpanEnd`]'s `cpu`): a level name or `off`; default `info` ([`DEFAULT_CPU`]) |
//! | `<P>_TRACE_SAMPLE` | the interval of the sampler thread, which reads the process's resident memory and CPU ([`Event::ProcessSample`]): `1ms` to `1s`, as `<n>ms` or `<n>s`, or `off`; default `10ms` ([`DEFAULT_SAMPLE`]) |
//! | `<P>_TRACE_STACKS` | sampled CPU call stacks of every thread that records into the capture: one sample per `1ms` to `100ms` of a thread's CPU time, or `off`; default `off`. Sinks receive them before they finish ([`Sink::stacks`], [`CpuStacks`]), which can write them as folded stacks. Needs the `stacks` feature (trace-stacks); without it a capture that asks for them warns ([`Report::stacks_error`]) |
//! | `<P>_TRACE_CHILDREN` | `1`: children started with [`Handle::child_env`] capture themselves into this capture's directory even without their own `<P>_TRACE_DIR`; `0` (default): only those whose own directory is set |
//! | `TRACEPARENT`, `CABIN_TRACE_PARENT` | set on children by [`Handle::child_env`]: the family's trace id and parent span (W3C trace context), and the parent capture's directory and stem; read under every prefix. A malformed value is ignored with a warning ([`Config::warnings`]) |
//!
//! # What it does not do
//!
//! It serialises nothing itself (no serde, no protobuf): formats live in the
//! sink crates. It installs no global subscriber and no signal handler, and it
//! does not fsync: a killed process leaves only `.partial` files.

#![deny(missing_docs)]

mod buffer;
mod capture;
mod clock;
mod config;
mod event;
mod family;
mod filter;
mod layer;
pub mod os;
mod record;
mod sampler;
mod session;
mod sink;
mod stacks;
mod subscriber;
mod writer;

pub use capture::ROOT_TARGET;
pub use config::{
    Config, ConfigError, ErrorKind, DEFAULT_CPU, DEFAULT_FILTER, DEFAULT_SAMPLE, MAX_SAMPLE, MAX_STACKS,
    MIN_SAMPLE, MIN_STACKS,
};
pub use event::{
    instant_name, Event, Field, FileStatus, Finish, FlowKind, LaneReport, LaneSlice, Level, ProcessSample,
    Resources, Since, Site, Start, ThreadCpu, Tid, Value, INSTANT_NAME_CHARS,
};
pub use family::{parse_traceparent, Family, TraceId, PARENT_VAR, TRACEPARENT_VAR};
pub use layer::CaptureLayer;
pub use os::ChildUsage;
pub use session::{bind, current, new_stem, spawn, Handle, Report, Session, PARTIAL_SUFFIX};
pub use sink::{CheckedWriter, Sink};
pub use stacks::{CpuStacks, SpanSamples};
