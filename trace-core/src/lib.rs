//! The capture engine of cabin-trace: one command's `tracing` spans and events,
//! recorded into files, scoped to that command and never anything else.
//!
//! # Overview
//!
//! - [`Config`] reads `<P>_TRACE_DIR`, `<P>_TRACE_FILTER`, `<P>_TRACE_FORMAT`,
//!   `<P>_TRACE_CPU` and `<P>_TRACE_SAMPLE` under a tool's prefix and checks
//!   every value before the command runs; a filter's bare word must be a
//!   level, so a typo is refused, never a silent capture of nothing.
//! - Spans at the levels `<P>_TRACE_CPU` selects (info and above by
//!   default) read the thread's CPU clock at enter and exit, into the enter
//!   and exit records themselves (no larger record); the others pay one
//!   comparison. The process's resident memory and CPU
//!   ([`os::ProcessSampler`]) are read for counters when a capture starts and
//!   finishes, and every `<P>_TRACE_SAMPLE` in between by one sampler thread
//!   the process's captures share (started by the first, ended when the
//!   last one running stops, so that it is gone before the process exits);
//!   if the system refuses the thread, the capture goes on with its first
//!   sample only and its [`Report`] says so.
//! - [`Session`] is one capture: it creates the `.partial` files and builds a
//!   dispatcher that the command runs under with
//!   `tracing::dispatcher::with_default` (never a global default), so repeated
//!   and concurrent captures in one process each record only their own events.
//!   [`Session::run`] wraps the command in the capture's root span.
//! - One record protocol, two thin front-ends: the capture's own subscriber
//!   ([`Session::start`]: span ids and each thread's entered spans kept beside
//!   its buffer, no registry), or a [`CaptureLayer`] on a
//!   `tracing_subscriber::Registry` ([`Session::start_with_layer`]). Both only
//!   resolve span ids and callsites; both write the same records.
//! - The tool's own logging keeps printing: the own subscriber forwards what
//!   the thread's previous default dispatcher enables (a global `fmt`
//!   subscriber, or the registry a tool's layers run on) to it, with span ids
//!   mapped and the capture's root span hidden ([`Session::start_forwarding`]).
//! - On the hot path each thread appends raw records (a stamp on one clock for
//!   every thread, a span id, a `&'static` callsite, field values) to a buffer
//!   of its own for that capture and hands it over in batches; nothing is
//!   allocated per event once the buffers are warm. A record claims its
//!   buffer with an atomic swap (the writer may take a partial batch at any
//!   time), never a lock. Batches wait for the
//!   writer up to a memory budget ([`Config::with_memory_budget`], 64 MiB);
//!   past it the thread waits for the writer to make room
//!   ([`Report::waited_ns`]). Only a writer that makes no progress for a
//!   second makes the capture drop batches, counted, their gaps marked, so
//!   that spans they cut end where the loss began.
//! - The writer merges the threads' records in time order (taking a thread's
//!   partial batch itself when that thread holds the merge back), so every
//!   record of a span is applied to it whichever thread wrote it; it turns
//!   them into a well-formed [`Event`] stream and feeds every [`Sink`]. Each
//!   sink writes one file through a [`CheckedWriter`] that keeps the first I/O
//!   error instead of panicking, and each sink call runs under `catch_unwind`:
//!   a sink that panics leaves only its own file `.partial`.
//! - A span entered more than once (a future polled again, a span entered on
//!   another thread) is sent once more at its close as an
//!   [`Event::AsyncSpan`], its whole life, for a track of its own. Links
//!   become flows ([`Event::FlowOut`], [`Event::FlowIn`]): from the span open
//!   where [`bind`] or [`spawn`] started a helper to the helper's first span,
//!   and from a span to one that `follows_from` it. The writer notes where
//!   each span was entered until its close, which is why every span's close
//!   is recorded.
//! - The writer is a thread of its own, started when the first batch is
//!   handed over (or on [`Session::flush`]); a command too short to fill a
//!   batch never starts it, and its records become events on the thread that
//!   finishes the capture. A sink must therefore not assume which thread
//!   calls it.
//! - With `<P>_TRACE_STACKS`, the session starts a stacks sampler (the
//!   `stacks` feature, trace-stacks) that each thread joins as it registers
//!   with the capture; the writer keeps every span's interval on its thread,
//!   and at the finish, after the sampler has stopped and symbolized, it
//!   puts each sample in the spans open around it and hands the result to
//!   every sink ([`Sink::stacks`]) before they finish.
//! - [`Session::finish`] closes what is still open, finishes the sinks, joins
//!   the writer (or runs it, if it never started) and renames each complete
//!   file from `.partial`. The [`Report`] counts what was dropped, the spans
//!   still open and the records that arrived while it finished.
//! - [`bind`] and [`spawn`] carry the capture to helper threads; [`current`]
//!   gives code inside the command a [`Handle`] to add external lanes.
//!
//! The modules read top-down: `clock` (timestamps and their conversion),
//! `record` (raw records), `buffer` (per-thread buffers, hand-over, budget),
//! `writer` (the merge and the sinks; `writer::fields`, a span's fields;
//! `writer::span_lives`, spans in pieces and flows), `capture` (a capture's
//! state and the record protocol), then the front-ends `subscriber` (with
//! `recent_spans` and `callsite_answers`, what it keeps per thread and per
//! call site) and `layer`, and `session`.
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
//! | `<P>_TRACE_STACKS` | sampled CPU call stacks of every thread that records into the capture: one sample per `1ms` to `100ms` of a thread's CPU time, or `off`; default `off`. Sinks receive them before they finish ([`Sink::stacks`], [`CpuStacks`]); [`FoldedStacksSink`] writes them as folded stacks. Needs the `stacks` feature (trace-stacks); without it a capture that asks for them warns ([`Report::stacks_error`]) |
//! | `<P>_TRACE_CHILDREN` | `1`: children started with [`Handle::child_env`] capture themselves into this capture's directory even without their own `<P>_TRACE_DIR`; `0` (default): only those whose own directory is set |
//! | `TRACEPARENT`, `CABIN_TRACE_PARENT` | set on children by [`Handle::child_env`]: the family's trace id and parent span (W3C trace context), and the parent capture's directory and stem; read under every prefix. A malformed value is ignored with a warning ([`Config::warnings`]) |
//!
//! # What it does not do
//!
//! It serialises nothing itself (no serde, no protobuf): formats live in the
//! sink crates. It installs no global subscriber and no signal handler, and it
//! does not fsync: a killed process leaves only `.partial` files.

#![deny(missing_docs)]

// Layers, top-down: raw records, per-thread buffers and their hand-over, the
// writer, the capture's state and record protocol, then the two front-ends
// (the capture's own subscriber and a registry layer), and the session.
mod buffer;
mod callsite_answers;
mod capture;
mod clock;
mod config;
mod event;
mod family;
mod filter;
mod layer;
pub mod os;
mod recent_spans;
mod record;
mod sampler;
mod session;
mod sink;
mod stacks;
mod subscriber;
#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod test_child;
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
pub use stacks::{CpuStacks, FoldedStacksSink, SpanSamples, FOLDED_SUFFIX};
