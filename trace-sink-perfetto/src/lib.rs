//! Writes a capture as a native Perfetto trace (`<stem>.pftrace`): protobuf
//! `TrackEvent` packets, appended to the file as the events arrive.
//!
//! # Overview
//!
//! The file is a `perfetto.protos.Trace`, that is, a run of `packet` entries,
//! each a length-delimited `TracePacket`. Nothing precedes or follows them, so
//! the files of several processes (a tool and the tools it starts) can be
//! concatenated into one trace.
//!
//! - The process gets a track with its real pid, named after the command; each
//!   thread a track with its pid, tid and name.
//! - Each thread writes on a packet sequence of its own. The sequence's first
//!   packet clears its incremental state, sets its defaults (the thread's track,
//!   the timestamp clock) and binds its incremental clock to CLOCK_MONOTONIC
//!   with a clock snapshot (BOOTTIME too, the trace processor's own clock).
//! - A span is a `SLICE_BEGIN`/`SLICE_END` pair on its thread's track; its
//!   fields are debug annotations of the begin, fields recorded after the
//!   begin are annotations of the end (viewers merge them into the slice), and
//!   a span the capture had to close itself gets `unclosed = true`.
//! - A span that read the thread CPU clock (`<P>_TRACE_CPU`) samples its
//!   thread's CPU-time counter on its begin and end
//!   (`extra_counter_track_uuids`, `extra_counter_values`): a child track of
//!   the thread's, of the built-in type `COUNTER_THREAD_TIME_NS`, absolute
//!   nanoseconds, with no name of its own. The trace processor fills a
//!   slice's thread timestamp and thread duration (`slice.thread_ts`,
//!   `thread_dur`) from such a track only: a name would opt it out, leaving
//!   an ordinary counter track next to each thread and no slice with a thread
//!   duration. (The trace processor keeps the samples as a counter track it
//!   names `thread_time`, as it does for `TrackEvent.thread_time_absolute_us`,
//!   whose microseconds would lose the clock's resolution.)
//! - A span that ran in pieces (entered more than once, or on more than one
//!   thread: an `.instrument()`ed future, a span moved between threads) also
//!   gets a track of its own, a child of the process's track named after the
//!   span, holding one `SLICE_BEGIN`/`SLICE_END` pair from its first enter to
//!   its close (the finish, marked `unclosed = true`, if it is still open) with
//!   the span's fields; its pieces stay slices on their threads' tracks. Its
//!   packets are written at its close, on the process's sequence with absolute
//!   times: the trace processor orders events by time, not by file position.
//!   Such tracks are never merged with a sibling of the same name.
//! - A flow (a helper started with `spawn`/`bind`, a span that `follows_from`
//!   another) leaves from an `INSTANT` named `spawn` or `follows_from` inside
//!   the source's slice (`flow_ids`), because the source's begin is written
//!   before the link is known, and ends on the begin of the target's slice
//!   (`terminating_flow_ids`), or on an instant inside it when the target was
//!   already running. Flow ids are drawn like track uuids, so that they do not
//!   meet across the files a trace joins.
//! - A `tracing` event is an `INSTANT` named after its message (its first
//!   line, cut to 60 characters with an ellipsis: the name the Chrome sink
//!   gives it), with its fields (the full `message` among them), its `level`
//!   and its source `location` (`file:line`) as annotations. Such a name is
//!   written in full (`TrackEvent.name`), not interned: messages that differ
//!   per event would grow the interning tables for the whole capture. An
//!   event without a message keeps its call site's (interned) name.
//! - Loss is said on the process's track, where a reader looks first: when
//!   records were dropped, an instant `trace records dropped (N)` at the
//!   finish and a counter track `trace records dropped` (unit: count) at 0 at
//!   the start and N at the finish; when spans were left unclosed, an instant
//!   `trace spans unclosed (N)`.
//! - Event names, categories (the span's or event's target) and annotation
//!   names are interned once per sequence (iids from 1, given in the
//!   `interned_data` of the packet that first uses them), and timestamps are
//!   deltas on the sequence's own clock (a sequence-scoped clock id, bound to
//!   CLOCK_MONOTONIC by the snapshot). A `tracing` call site's strings are
//!   `'static`, so the interner answers those it met lately by their address
//!   (a small table per sequence) rather than by hashing their text.
//! - One encoder writes every packet: each field is appended to the chunk in
//!   field-number order through `trace_proto_wire`, and a nested message's
//!   length is filled in once its body is written, so nothing is built or
//!   copied per event, and nothing is allocated once the buffers are warm (a
//!   string interned for the first time aside). The bytes are those prost
//!   writes for the same messages, which the tests check against prost.
//! - Packets go to the file in chunks of up to 64 KiB, as they are. A sink
//!   made with [`PerfettoSink::compressed`] compresses each chunk with zlib
//!   into one packet of its own (`TracePacket.compressed_packets`, which the
//!   trace processor inflates and reads in its place, as it does for the
//!   traces Perfetto's own service compresses). Compression is off by default
//!   because it is most of what the file costs the writer thread, and a trace
//!   is mostly opened once, on the machine that made it. A chunk under 8 KiB
//!   (all of a short capture) goes to the file uncompressed, as does one that
//!   would not shrink.
//! - An external lane (Ninja's actions, test executables) is a process of its
//!   own, named after the lane, under the pid the Chrome JSON gives it too
//!   ([`trace_core::LaneSlice::lane_pid`]: above the kernel's pids, so that
//!   the lanes of two captures merged into one trace stay apart), with one
//!   thread per sub-lane (`ninja 0`, `ninja 1`, ...) holding its slices.
//! - The process's samples (`<P>_TRACE_SAMPLE`) are two counter tracks of the
//!   process: [`MEMORY_COUNTER`] (unit bytes: the resident set at each
//!   sample) and [`CPU_COUNTER`] (unit `%` of one core, a double: the CPU
//!   used from one sample to the next, placed at the first of the two).
//! - The capture's family is an instant [`FAMILY_MARKER`] on the process's
//!   track at the capture's start, with the annotations `trace_id` (32 hex)
//!   and, for a child, `parent_span_id` (16 hex) and `parent_stem`.
//! - Track uuids and sequence ids are drawn so that they do not collide across
//!   captures and processes; the `ids` module's docs give the scheme and the odds.
//!
//! Packets go out a chunk at a time, through the capture's checked writer: at
//! most one chunk of the trace is held in memory, and an I/O error is kept by
//! the capture (the file stays `.partial`) rather than raised. Nothing here
//! panics. What a span costs in bytes and in the writer's time is in
//! `docs/performance.md`.
//!
//! # Example
//!
//! ```
//! use trace_core::{Config, Session, Sink};
//! use trace_sink_perfetto::PerfettoSink;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let config = Config::from_lookup("DEMO", &["perfetto"], |name| {
//!     (name == "DEMO_TRACE_DIR").then(|| dir.path().into())
//! })
//! .unwrap()
//! .expect("DEMO_TRACE_DIR is set");
//! let sinks: Vec<Box<dyn Sink>> = vec![Box::new(PerfettoSink::new())];
//! let session = Session::start(&config, "build", sinks).unwrap();
//! session.in_scope(|| tracing::info_span!("compile", files = 3).in_scope(|| ()));
//! let report = session.finish();
//! assert!(report.is_complete());
//! let path = &report.files[0].path;
//! assert_eq!(path.extension().unwrap(), "pftrace");
//! // Every packet entry opens with the key of `Trace.packet`.
//! assert_eq!(std::fs::read(path).unwrap()[0], 0x0a);
//! ```
//!
//! # Configuration
//!
//! None of its own: no environment variable, no feature flag. A tool writes
//! this file when `perfetto` is among the sinks of `<P>_TRACE_FORMAT` (or the
//! variable is unset), and the capture names it `<stem>.pftrace`.
//!
//! # Opening a trace
//!
//! Open <https://ui.perfetto.dev> and drop the `.pftrace` on the page (or use
//! "Open trace file"): the UI parses it in the browser and uploads nothing.
//! Concatenated files open the same way:
//! `cat a.pftrace b.pftrace > both.pftrace`.
//!
//! The repository checks every trace its tests write against Perfetto's
//! official schema: `scripts/install-perfetto.sh` installs the decoder, and
//! `tools/pftrace_check.py FILE...` validates files (`--help` says what it
//! checks, and inflates the compressed chunks with `--inflate OUT`);
//! `protoc --descriptor_set_in=.tools/perfetto_trace.desc
//! --decode=perfetto.protos.Trace < OUT` prints the result as text.
//!
//! # What it does not do
//!
//! It gives source locations as annotations rather than as
//! Perfetto's interned `SourceLocation`, and interns no annotation values
//! (each string value is written in full; the compression catches repeats).
//! It reads nothing back: a file is only as valid as its bytes, which is why
//! the tests check them with independent decoders. A process killed
//! mid-capture loses the chunk it held as well as what its buffers held (its
//! file stays `.partial`, as always). A thread id the
//! system reuses within one capture shares the first thread's track and name.

#![deny(missing_docs)]

mod chunk;
mod clock;
mod format;
mod ids;
mod interning;
#[cfg(test)]
mod proto;
mod sequence;
mod state;

use std::io::{self, Write};

use trace_core::{Event, Finish, Sink, Start};

use crate::state::State;
pub use crate::state::{CPU_COUNTER, FAMILY_MARKER, MEMORY_COUNTER};

/// The sink's name in `<P>_TRACE_FORMAT`.
pub const NAME: &str = "perfetto";
/// The file name after the stem.
pub const SUFFIX: &str = "pftrace";

/// The Perfetto sink. See the crate docs for what it writes.
#[derive(Default)]
pub struct PerfettoSink {
    state: Option<State>,
    compress: bool,
}

impl std::fmt::Debug for PerfettoSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfettoSink")
            .field("started", &self.state.is_some())
            .field("compress", &self.compress)
            .finish_non_exhaustive()
    }
}

impl PerfettoSink {
    /// A new sink, ready to be handed to a capture. Its packets go to the
    /// file as they are.
    pub fn new() -> Self {
        PerfettoSink { state: None, compress: false }
    }

    /// A sink whose chunks of packets are compressed with zlib
    /// (`TracePacket.compressed_packets`): a span then takes a fraction of
    /// the bytes, for more of the writer's time (`docs/performance.md`).
    /// Worth it where the file is kept or sent, not for a trace opened once
    /// on the machine that made it.
    ///
    /// ```
    /// let sink = trace_sink_perfetto::PerfettoSink::compressed();
    /// # let _ = sink;
    /// ```
    pub fn compressed() -> Self {
        PerfettoSink { state: None, compress: true }
    }

    /// The capture's state, started with what can be known if the capture
    /// never called `start` (it always does; this only avoids a panic).
    fn state(&mut self, out: &mut dyn Write) -> io::Result<&mut State> {
        if self.state.is_none() {
            let state = State::start("process", std::process::id(), (0, 0), None, self.compress, out)?;
            self.state = Some(state);
        }
        match self.state.as_mut() {
            Some(state) => Ok(state),
            None => Err(io::Error::other("the Perfetto sink has no state")),
        }
    }
}

impl Sink for PerfettoSink {
    fn name(&self) -> &'static str {
        NAME
    }

    fn suffix(&self) -> &'static str {
        SUFFIX
    }

    fn start(&mut self, start: &Start<'_>, out: &mut dyn Write) -> io::Result<()> {
        let times = (start.start_ns, start.start_unix_ms);
        self.state = Some(State::start(start.command, start.pid, times, start.family, self.compress, out)?);
        Ok(())
    }

    fn event(&mut self, event: &Event<'_>, out: &mut dyn Write) -> io::Result<()> {
        let state = self.state(out)?;
        match *event {
            Event::ThreadName { thread, name, .. } => state.thread(thread, Some(name), out).map(drop),
            Event::SpanBegin { thread, ts, ref site, fields, thread_cpu_ns, .. } => {
                state.span_begin((thread, ts), site, fields, thread_cpu_ns, out)
            }
            Event::SpanEnd { thread, ts, ref site, recorded, unclosed, cpu, .. } => {
                state.span_end((thread, ts), site, recorded, unclosed, cpu, out)
            }
            Event::Instant { thread, ts, ref site, fields, .. } => {
                state.instant((thread, ts), site, fields, out)
            }
            Event::Lane(ref slice) => state.lane(slice, out),
            Event::ProcessSample(ref sample) => state.process_sample(sample, out),
            Event::AsyncSpan { id, begin_ts, end_ts, ref site, fields, unclosed, .. } => {
                state.async_span((id, begin_ts, end_ts), site, fields, unclosed, out)
            }
            Event::FlowOut { flow, kind, thread, ts, .. } => state.flow_out(flow, kind, (thread, ts), out),
            Event::FlowIn { flow, kind, thread, ts, at_begin, .. } => {
                state.flow_in(flow, kind, (thread, ts), at_begin, out)
            }
            // A lane's report is the summary's.
            _ => Ok(()),
        }
    }

    /// The sampled CPU stacks, on a sequence of their own (their packets
    /// are trace-core's, encoded by trace-stacks).
    fn stacks(&mut self, stacks: &trace_core::CpuStacks, out: &mut dyn Write) -> io::Result<()> {
        out.write_all(&stacks.perfetto_packets(std::process::id()))
    }

    fn finish(&mut self, end: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
        self.state(out)?.finish(end, out)
    }
}

#[cfg(test)]
mod tests {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    use prost::Message;
    use trace_core::{Field, LaneSlice, Site, Value};

    use super::*;
    use crate::format::event::{TYPE_SLICE_BEGIN, TYPE_SLICE_END};
    use crate::proto::Trace;

    /// Counts the calling thread's allocations, for the steady-state test.
    struct Counting;

    thread_local! {
        static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    }

    // SAFETY: every call goes to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
            System.alloc(layout)
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            System.dealloc(ptr, layout)
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
            System.realloc(ptr, layout, new_size)
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    fn allocations() -> u64 {
        ALLOCATIONS.with(Cell::get)
    }

    const COMPILE: Site<'static> =
        Site::new("compile", "cabin::build", trace_core::Level::INFO, Some("src/build.rs"), Some(12));

    fn test_start() -> Start<'static> {
        let mut start = Start::default();
        start.command = "build";
        start.stem = "build-1-2-3";
        start.pid = 4321;
        start.start_unix_ms = 1;
        start.start_ns = 10_000;
        start.filter = "info";
        start
    }

    #[test]
    fn a_steady_stream_of_events_is_encoded_without_allocating() {
        for sink in [PerfettoSink::new(), PerfettoSink::compressed()] {
            steady_stream_allocates_nothing(sink);
        }
    }

    fn steady_stream_allocates_nothing(mut sink: PerfettoSink) {
        let mut out = io::sink();
        sink.start(&test_start(), &mut out).unwrap();
        let site = COMPILE;
        let fields = [
            Field { name: "unit", value: Value::Str("src/main.c") },
            Field { name: "bytes", value: Value::U64(4096) },
            Field { name: "delta", value: Value::I64(-2) },
            Field { name: "ratio", value: Value::F64(0.25) },
            Field { name: "fresh", value: Value::Bool(true) },
        ];
        let lane_fields = [Field { name: "hash", value: Value::Str("1f2e") }];
        let message = format!("compiled {}", "src/main.c ".repeat(10));
        let mut instant_fields = vec![Field { name: "message", value: Value::Str(&message) }];
        instant_fields.extend_from_slice(&fields);
        let mut round = |ts: u64, out: &mut dyn Write| {
            let cpu = trace_core::ThreadCpu { begin_ns: ts, end_ns: ts + 1 };
            let events = [
                Event::SpanBegin { thread: 7, ts, site, fields: &fields, thread_cpu_ns: Some(ts) },
                Event::Instant { thread: 7, ts: ts + 1, site, fields: &instant_fields },
                Event::SpanEnd {
                    thread: 7,
                    ts: ts + 2,
                    begin_ts: ts,
                    site,
                    fields: &fields,
                    recorded: &fields[..1],
                    unclosed: ts.is_multiple_of(20),
                    cpu: Some(cpu),
                },
                Event::Lane(LaneSlice {
                    lane: "ninja",
                    track: 1,
                    begin_ns: ts,
                    end_ns: ts + 2,
                    name: "a.o",
                    fields: &lane_fields,
                }),
            ];
            for e in &events {
                sink.event(e, out).unwrap();
            }
        };
        // Past the first full chunk, so that the compressor and its buffers exist.
        for i in 0..1_000 {
            round(20_000 + i * 10, &mut out);
        }
        let before = allocations();
        for i in 0..1_000 {
            round(30_000 + i * 10, &mut out);
        }
        assert_eq!(allocations() - before, 0, "allocations while encoding 4,000 warm events");
        let probe = allocations();
        drop(std::hint::black_box(vec![1u8]));
        assert_eq!(allocations() - probe, 1, "the counter sees an allocation");
    }

    #[test]
    fn a_span_on_a_new_thread_writes_the_sequence_start_the_track_and_the_events() {
        let mut sink = PerfettoSink::new();
        let mut out = Vec::new();
        sink.start(&test_start(), &mut out).unwrap();
        let site = COMPILE;
        let events = [
            Event::ThreadName { thread: 77, name: "main" },
            Event::SpanBegin { thread: 77, ts: 10_100, site, fields: &[], thread_cpu_ns: None },
            Event::SpanEnd {
                thread: 77,
                ts: 10_300,
                begin_ts: 10_100,
                site,
                fields: &[],
                recorded: &[],
                unclosed: true,
                cpu: None,
            },
        ];
        for e in &events {
            sink.event(e, &mut out).unwrap();
        }
        assert!(out.is_empty(), "packets wait in the chunk");
        sink.state.as_mut().unwrap().chunk.flush(&mut out).unwrap();
        let packets = Trace::decode(&out[..]).unwrap().packet;
        assert_eq!(packets.len(), 6, "{packets:#?}");
        let process = packets[1].track_descriptor.clone().unwrap();
        assert_eq!(process.process.unwrap().pid, Some(4321));
        let thread = packets[3].track_descriptor.clone().unwrap();
        assert_eq!(thread.parent_uuid, process.uuid);
        assert_eq!(thread.thread.unwrap().tid, Some(77));
        assert_ne!(packets[0].trusted_packet_sequence_id, packets[2].trusted_packet_sequence_id);
        let begin = packets[4].track_event.clone().unwrap();
        assert_eq!((begin.r#type, packets[4].timestamp), (Some(TYPE_SLICE_BEGIN as i32), Some(100)));
        let end = packets[5].track_event.clone().unwrap();
        assert_eq!((end.r#type, packets[5].timestamp), (Some(TYPE_SLICE_END as i32), Some(200)));
        assert_eq!(end.debug_annotations[0].bool_value, Some(true));
        let names = packets[5].interned_data.clone().unwrap().debug_annotation_names;
        assert_eq!(names[0].name.as_deref(), Some("unclosed"));
    }

    #[test]
    fn the_thread_cpu_counter_track_has_no_name_and_is_the_builtin_thread_time_child_of_its_thread() {
        let mut sink = PerfettoSink::new();
        let mut out = Vec::new();
        sink.start(&test_start(), &mut out).unwrap();
        let cpu = trace_core::ThreadCpu { begin_ns: 5_000, end_ns: 7_000 };
        let events = [
            Event::SpanBegin {
                thread: 9,
                ts: 10_100,
                site: COMPILE,
                fields: &[],
                thread_cpu_ns: Some(5_000),
            },
            Event::SpanEnd {
                thread: 9,
                ts: 10_300,
                begin_ts: 10_100,
                site: COMPILE,
                fields: &[],
                recorded: &[],
                unclosed: false,
                cpu: Some(cpu),
            },
        ];
        for e in &events {
            sink.event(e, &mut out).unwrap();
        }
        sink.state.as_mut().unwrap().chunk.flush(&mut out).unwrap();
        let packets = Trace::decode(&out[..]).unwrap().packet;
        let tracks: Vec<_> = packets.iter().filter_map(|p| p.track_descriptor.clone()).collect();
        let thread = tracks.iter().find(|t| t.thread.is_some()).unwrap();
        let counter = tracks.iter().find(|t| t.counter.is_some()).unwrap();
        assert_eq!(counter.name, None, "a name would opt the track out of thread durations");
        assert_eq!(counter.parent_uuid, thread.uuid);
        assert_eq!(counter.counter.clone().unwrap().r#type, Some(1), "COUNTER_THREAD_TIME_NS");
        let samples: Vec<_> = packets
            .iter()
            .filter_map(|p| p.track_event.clone())
            .map(|e| (e.extra_counter_track_uuids, e.extra_counter_values))
            .collect();
        let uuid = counter.uuid.unwrap();
        assert_eq!(samples, [(vec![uuid], vec![5_000]), (vec![uuid], vec![7_000])]);
    }
}
