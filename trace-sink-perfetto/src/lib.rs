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
//! - A `tracing` event is an `INSTANT` named after its message (its first
//!   line, cut to 60 characters with an ellipsis: the name the Chrome sink
//!   gives it), with its fields (the full `message` among them), its `level`
//!   and its source `location` (`file:line`) as annotations. Such a name is
//!   written in full (`TrackEvent.name`), not interned: messages that differ
//!   per event would grow the interning tables for the whole capture. An
//!   event without a message keeps its call site's (interned) name.
//! - Loss is said on the process's track, where a reader looks first: when
//!   records were dropped, an instant `trace records dropped (N)` at the
//!   finish and a counter track `dropped records` (unit: count) at 0 at the
//!   start and N at the finish; when spans were left unclosed, an instant
//!   `trace spans unclosed (N)`.
//! - Event names, categories (the span's or event's target) and annotation
//!   names are interned once per sequence, and timestamps are deltas on the
//!   sequence's clock: a span with no fields takes about 35 bytes of packets,
//!   begin and end.
//! - A track event's packet is encoded by hand, straight into the chunk it
//!   joins: its length and those of the messages inside it are computed
//!   first, so nothing is built, sized or copied per event, and nothing is
//!   allocated once the buffers are warm (a string interned for the first
//!   time aside). The bytes are those prost would write for the same message,
//!   which a randomised test checks against prost itself. The few other
//!   packets (a sequence's first one, track descriptors) are prost messages.
//! - Packets go to the file in chunks of up to 64 KiB, each compressed with
//!   zlib into one packet of its own (`TracePacket.compressed_packets`, which
//!   the trace processor inflates and reads in its place, as it does for the
//!   traces Perfetto's own service compresses). The span above then takes
//!   about 5 bytes. A chunk under 8 KiB (all of a short capture) goes to the
//!   file uncompressed, as does one that would not shrink.
//! - An external lane (Ninja's actions, test executables) is a top-level track
//!   of its own, named after the lane, with one child track per sub-lane
//!   (`ninja 0`, `ninja 1`, ...) holding its slices.
//! - Track uuids and sequence ids are drawn so that they do not collide across
//!   captures and processes; the `ids` module's docs give the scheme and the odds.
//!
//! Packets go out a chunk at a time, through the capture's checked writer: at
//! most one chunk of the trace is held in memory, and an I/O error is kept by
//! the capture (the file stays `.partial`) rather than raised. Nothing here
//! panics.
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
//! It writes no flows, gives source locations as annotations rather than as
//! Perfetto's interned `SourceLocation`, and interns no annotation values
//! (each string value is written in full; the compression catches repeats).
//! It reads nothing back: a file is only as valid as its bytes, which is why
//! the tests check them with an independent decoder. A process killed
//! mid-capture loses the chunk it held as well as what its buffers held (its
//! file stays `.partial`, as always). A thread id the
//! system reuses within one capture shares the first thread's track and name.

#![deny(missing_docs)]

mod chunk;
mod clock;
mod format;
mod ids;
mod intern;
mod proto;
mod sequence;
mod track_event;

use std::collections::HashMap;
use std::io::{self, Write};

use trace_core::{Event, Field, Finish, LaneSlice, Sink, Site, Start, Tid, Value};
// The one naming rule of instants, so that both files name them alike.
use trace_sink_chrome::instant_name;

use crate::chunk::Encoder;
use crate::clock::Timestamps;
use crate::format::{
    CHILD_ORDERING_EXPLICIT, TYPE_COUNTER, TYPE_INSTANT, TYPE_SLICE_BEGIN, TYPE_SLICE_END, UNIT_COUNT,
};
use crate::ids::{Ids, TrackKind};
use crate::intern::FastHash;
use crate::proto::{CounterDescriptor, ProcessDescriptor, ThreadDescriptor, TrackDescriptor};
use crate::sequence::Sequence;
use crate::track_event::EventSpec;

/// The sink's name in `<P>_TRACE_FORMAT`.
pub const NAME: &str = "perfetto";
/// The file name after the stem.
pub const SUFFIX: &str = "pftrace";

/// The annotation that marks a span the capture closed itself.
const UNCLOSED: [Field<'static>; 1] = [Field { name: "unclosed", value: Value::Bool(true) }];
/// The category of the sink's own events.
const OWN_CATEGORY: &str = "cabin_trace";

/// The Perfetto sink. See the crate docs for what it writes.
#[derive(Default)]
pub struct PerfettoSink {
    state: Option<State>,
}

impl std::fmt::Debug for PerfettoSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfettoSink")
            .field("started", &self.state.is_some())
            .field("threads", &self.state.as_ref().map_or(0, |s| s.threads.len()))
            .finish_non_exhaustive()
    }
}

impl PerfettoSink {
    /// A new sink, ready to be handed to a capture.
    pub fn new() -> Self {
        PerfettoSink { state: None }
    }

    /// The capture's state, started with what can be known if the capture
    /// never called `start` (it always does; this only avoids a panic).
    fn state(&mut self, out: &mut dyn Write) -> io::Result<&mut State> {
        if self.state.is_none() {
            self.state = Some(State::start("process", std::process::id(), 0, 0, out)?);
        }
        match self.state.as_mut() {
            Some(state) => Ok(state),
            None => Err(io::Error::other("the Perfetto sink has no state")),
        }
    }
}

/// An external lane's tracks.
#[derive(Debug)]
struct Lane {
    name: String,
    uuid: u64,
    /// `(sub-lane, track uuid)`, in the order they appeared.
    tracks: Vec<(u32, u64)>,
}

/// Everything the sink knows once the capture started.
#[derive(Debug)]
struct State {
    pid: i32,
    ids: Ids,
    /// The capture's start (CLOCK_MONOTONIC ns): where each sequence's clock starts.
    base_ns: u64,
    process_track: u64,
    /// The sequence of the process and lane tracks and of the lanes' slices.
    process: Sequence,
    threads: HashMap<Tid, Sequence, FastHash>,
    /// Sequences started so far, the process's included: the next one's index.
    sequences: u32,
    lanes: Vec<Lane>,
    enc: Encoder,
    /// Spans the capture closed itself, for the marker at the finish.
    unclosed: u64,
    /// An instant's `file:line`, reused.
    location: String,
}

impl State {
    fn start(
        command: &str,
        pid: u32,
        base_ns: u64,
        start_unix_ms: u64,
        out: &mut dyn Write,
    ) -> io::Result<State> {
        let ids = Ids::new(pid, base_ns, start_unix_ms);
        // Real pids are below 2^22; the schema's pid is an int32.
        let pid = i32::try_from(pid).unwrap_or(i32::MAX);
        let mut enc = Encoder::default();
        let mut process =
            Sequence::start(&mut enc, out, ids.sequence(0), Timestamps::Absolute, None, base_ns)?;
        let process_track = ids.track(TrackKind::Process, 0);
        process.describe(
            &mut enc,
            out,
            TrackDescriptor {
                uuid: Some(process_track),
                process: Some(ProcessDescriptor { pid: Some(pid), process_name: Some(command.to_string()) }),
                ..Default::default()
            },
        )?;
        Ok(State {
            pid,
            ids,
            base_ns,
            process_track,
            process,
            threads: HashMap::default(),
            sequences: 1,
            lanes: Vec::new(),
            enc,
            unclosed: 0,
            location: String::new(),
        })
    }

    /// Starts `thread`'s sequence and declares its track, once.
    fn thread(&mut self, thread: Tid, name: Option<&str>, out: &mut dyn Write) -> io::Result<()> {
        if self.threads.contains_key(&thread) {
            return Ok(());
        }
        let index = self.sequences;
        self.sequences = self.sequences.wrapping_add(1);
        let track = self.ids.track(TrackKind::Thread, u64::from(index));
        let mut sequence = Sequence::start(
            &mut self.enc,
            out,
            self.ids.sequence(index),
            Timestamps::Incremental,
            Some(track),
            self.base_ns,
        )?;
        let thread_name = match name {
            Some(name) => name.to_string(),
            None => format!("thread-{thread}"),
        };
        sequence.describe(
            &mut self.enc,
            out,
            TrackDescriptor {
                uuid: Some(track),
                parent_uuid: Some(self.process_track),
                thread: Some(ThreadDescriptor {
                    pid: Some(self.pid),
                    tid: Some(thread as i64),
                    thread_name: Some(thread_name),
                }),
                ..Default::default()
            },
        )?;
        self.threads.insert(thread, sequence);
        Ok(())
    }

    /// Writes a track event on `thread`'s sequence.
    fn thread_event(&mut self, thread: Tid, spec: &EventSpec<'_>, out: &mut dyn Write) -> io::Result<()> {
        // One lookup for a thread seen before: every event but its first.
        if let Some(sequence) = self.threads.get_mut(&thread) {
            return sequence.event(&mut self.enc, out, spec);
        }
        self.thread(thread, None, out)?;
        match self.threads.get_mut(&thread) {
            Some(sequence) => sequence.event(&mut self.enc, out, spec),
            None => Ok(()),
        }
    }

    /// The uuid of the track of `slice`'s sub-lane, declared with its lane's
    /// track the first time.
    fn lane_track(&mut self, slice: &LaneSlice<'_>, out: &mut dyn Write) -> io::Result<u64> {
        let index = match self.lanes.iter().position(|l| l.name == slice.lane) {
            Some(index) => index,
            None => {
                let index = self.lanes.len();
                let uuid = self.ids.track(TrackKind::Lane, index as u64);
                self.process.describe(
                    &mut self.enc,
                    out,
                    TrackDescriptor {
                        uuid: Some(uuid),
                        name: Some(slice.lane.to_string()),
                        child_ordering: Some(CHILD_ORDERING_EXPLICIT),
                        ..Default::default()
                    },
                )?;
                self.lanes.push(Lane { name: slice.lane.to_string(), uuid, tracks: Vec::new() });
                index
            }
        };
        let lane = &mut self.lanes[index];
        if let Some(&(_, uuid)) = lane.tracks.iter().find(|(track, _)| *track == slice.track) {
            return Ok(uuid);
        }
        let uuid = self.ids.track(TrackKind::SubLane, ((index as u64) << 32) | u64::from(slice.track));
        let parent = lane.uuid;
        lane.tracks.push((slice.track, uuid));
        self.process.describe(
            &mut self.enc,
            out,
            TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: Some(parent),
                name: Some(format!("{} {}", slice.lane, slice.track)),
                sibling_order_rank: Some(i32::try_from(slice.track).unwrap_or(i32::MAX)),
                ..Default::default()
            },
        )?;
        Ok(uuid)
    }

    fn lane(&mut self, slice: &LaneSlice<'_>, out: &mut dyn Write) -> io::Result<()> {
        let track = self.lane_track(slice, out)?;
        let begin = EventSpec {
            ts: slice.begin_ns,
            kind: TYPE_SLICE_BEGIN,
            track: Some(track),
            name: Some(slice.name),
            category: Some(slice.lane),
            fields: slice.fields,
            extra: &[],
            full_name: None,
            counter: None,
        };
        self.process.event(&mut self.enc, out, &begin)?;
        let end = EventSpec {
            ts: slice.end_ns.max(slice.begin_ns),
            kind: TYPE_SLICE_END,
            track: Some(track),
            name: None,
            category: None,
            fields: &[],
            extra: &[],
            full_name: None,
            counter: None,
        };
        self.process.event(&mut self.enc, out, &end)
    }
}

impl State {
    /// A `tracing` event: an instant named after its message, with its level
    /// and source location as annotations after its fields.
    fn instant(
        &mut self,
        thread: Tid,
        ts: u64,
        site: Site<'_>,
        fields: &[Field<'_>],
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let has = |name: &str| fields.iter().any(|f| f.name == name);
        let full_name = fields.iter().find(|f| f.name == "message").and_then(|f| match f.value {
            Value::Str(m) => instant_name(m),
            _ => None,
        });
        let mut location = std::mem::take(&mut self.location);
        location.clear();
        let mut extra = [Field { name: "level", value: Value::Str(site.level.as_str()) }; 2];
        let mut extras = 0;
        // A field of the same name, set by the tool, is not shadowed.
        if !has("level") {
            extras += 1;
        }
        if let (Some(file), false) = (site.file, has("location")) {
            use std::fmt::Write as _;
            location.push_str(file);
            if let Some(line) = site.line {
                let _ = write!(location, ":{line}");
            }
            extra[extras] = Field { name: "location", value: Value::Str(&location) };
            extras += 1;
        }
        let spec = EventSpec {
            ts,
            kind: TYPE_INSTANT,
            track: None,
            name: if full_name.is_some() { None } else { Some(site.name) },
            category: Some(site.target),
            fields,
            extra: &extra[..extras],
            full_name,
            counter: None,
        };
        let written = self.thread_event(thread, &spec, out);
        self.location = location;
        written
    }

    /// An instant on the process's track at `ts`, named `what (count)`, with
    /// the count as the annotation `key`: where a reader looks first.
    fn marker(
        &mut self,
        ts: u64,
        what: &str,
        key: &'static str,
        count: u64,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let name = format!("{what} ({count})");
        let fields = [Field { name: key, value: Value::U64(count) }];
        let spec = EventSpec {
            ts,
            kind: TYPE_INSTANT,
            track: Some(self.process_track),
            name: Some(&name),
            category: Some(OWN_CATEGORY),
            fields: &fields,
            extra: &[],
            full_name: None,
            counter: None,
        };
        self.process.event(&mut self.enc, out, &spec)
    }

    /// A counter track of the process, `dropped records`, at 0 at the
    /// capture's start and at `count` at `end_ns`.
    fn dropped_counter(&mut self, end_ns: u64, count: u64, out: &mut dyn Write) -> io::Result<()> {
        let uuid = self.ids.track(TrackKind::Counter, 0);
        self.process.describe(
            &mut self.enc,
            out,
            TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: Some(self.process_track),
                name: Some("dropped records".to_string()),
                counter: Some(CounterDescriptor { unit: Some(UNIT_COUNT) }),
                ..Default::default()
            },
        )?;
        for (ts, value) in [(self.base_ns, 0), (end_ns, i64::try_from(count).unwrap_or(i64::MAX))] {
            let spec = EventSpec {
                ts,
                kind: TYPE_COUNTER,
                track: Some(uuid),
                name: None,
                category: None,
                fields: &[],
                extra: &[],
                full_name: None,
                counter: Some(value),
            };
            self.process.event(&mut self.enc, out, &spec)?;
        }
        Ok(())
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
        self.state = Some(State::start(start.command, start.pid, start.start_ns, start.start_unix_ms, out)?);
        Ok(())
    }

    fn event(&mut self, event: &Event<'_>, out: &mut dyn Write) -> io::Result<()> {
        let state = self.state(out)?;
        match *event {
            Event::ThreadName { thread, name, .. } => state.thread(thread, Some(name), out),
            Event::SpanBegin { thread, ts, site, fields, .. } => {
                let spec = EventSpec {
                    ts,
                    kind: TYPE_SLICE_BEGIN,
                    track: None,
                    name: Some(site.name),
                    category: Some(site.target),
                    fields,
                    extra: &[],
                    full_name: None,
                    counter: None,
                };
                state.thread_event(thread, &spec, out)
            }
            Event::SpanEnd { thread, ts, recorded, unclosed, .. } => {
                state.unclosed += u64::from(unclosed);
                let spec = EventSpec {
                    ts,
                    kind: TYPE_SLICE_END,
                    track: None,
                    name: None,
                    category: None,
                    fields: recorded,
                    extra: if unclosed { &UNCLOSED } else { &[] },
                    full_name: None,
                    counter: None,
                };
                state.thread_event(thread, &spec, out)
            }
            Event::Instant { thread, ts, site, fields, .. } => state.instant(thread, ts, site, fields, out),
            Event::Lane(ref slice) => state.lane(slice, out),
            _ => Ok(()),
        }
    }

    fn finish(&mut self, end: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
        let state = self.state(out)?;
        if end.dropped_records > 0 {
            state.marker(end.end_ns, "trace records dropped", "dropped_records", end.dropped_records, out)?;
            state.dropped_counter(end.end_ns, end.dropped_records, out)?;
        }
        if state.unclosed > 0 {
            let count = state.unclosed;
            state.marker(end.end_ns, "trace spans unclosed", "unclosed_spans", count, out)?;
        }
        state.enc.flush(out)
    }
}

#[cfg(test)]
mod tests {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    use prost::Message;

    use super::*;
    use crate::proto::{Trace, TrackEvent};

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

    const COMPILE: Site<'static> = Site {
        name: "compile",
        target: "cabin::build",
        level: trace_core::Level::INFO,
        file: Some("src/build.rs"),
        line: Some(12),
    };

    fn test_start() -> Start<'static> {
        Start {
            command: "build",
            stem: "build-1-2-3",
            pid: 4321,
            start_unix_ms: 1,
            start_ns: 10_000,
            startup_us: None,
            filter: "info",
        }
    }

    #[test]
    fn a_steady_stream_of_events_is_encoded_without_allocating() {
        let mut sink = PerfettoSink::new();
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
            let events = [
                Event::SpanBegin { thread: 7, ts, site, fields: &fields },
                Event::Instant { thread: 7, ts: ts + 1, site, fields: &instant_fields },
                Event::SpanEnd {
                    thread: 7,
                    ts: ts + 2,
                    begin_ts: ts,
                    site,
                    fields: &fields,
                    recorded: &fields[..1],
                    unclosed: ts.is_multiple_of(20),
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
        for i in 0..600 {
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

    /// Wire types of protobuf: a field key is `(field << 3) | wire type`.
    const VARINT: u8 = 0;
    const FIXED64: u8 = 1;

    #[test]
    fn two_category_iids_are_written_as_two_varint_fields_not_one_packed_run() {
        let event = TrackEvent { category_iids: vec![1, 2], ..Default::default() };
        // Field 3, wire type 0 (0x18), twice; packed would be 0x1a 0x02 0x01 0x02.
        assert_eq!(event.encode_to_vec(), [0x18, 0x01, 0x18, 0x02]);
    }

    #[test]
    fn every_repeated_scalar_of_a_track_event_is_unpacked() {
        let event = TrackEvent {
            category_iids: vec![1, 2],
            extra_counter_values: vec![-1, 300],
            extra_counter_track_uuids: vec![3, 4],
            flow_ids_old: vec![5, 6],
            terminating_flow_ids_old: vec![7, 8],
            extra_double_counter_track_uuids: vec![9, 10],
            extra_double_counter_values: vec![0.5, 1.5],
            flow_ids: vec![11, 12],
            terminating_flow_ids: vec![13, 14],
            ..Default::default()
        };
        let bytes = event.encode_to_vec();
        // Walk the fields; record each key.
        let mut keys = Vec::new();
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let key = match prost::encoding::decode_varint(&mut rest) {
                Ok(key) => key,
                Err(e) => panic!("bad key: {e}"),
            };
            let (field, wire) = (key >> 3, (key & 7) as u8);
            match wire {
                VARINT => {
                    let _ = prost::encoding::decode_varint(&mut rest);
                }
                FIXED64 => rest = &rest[8..],
                other => panic!("field {field} has wire type {other}: packed"),
            }
            keys.push((field, wire));
        }
        let expected = [
            (3, VARINT),
            (12, VARINT),
            (31, VARINT),
            (36, VARINT),
            (42, VARINT),
            (45, VARINT),
            (46, FIXED64),
            (47, FIXED64),
            (48, FIXED64),
        ];
        for (field, wire) in expected {
            assert_eq!(keys.iter().filter(|k| **k == (field, wire)).count(), 2, "field {field}: {keys:?}");
        }
        assert_eq!(keys.len(), 2 * expected.len());
    }

    #[test]
    fn a_span_on_a_new_thread_writes_the_sequence_start_the_track_and_the_events() {
        let mut sink = PerfettoSink::new();
        let mut out = Vec::new();
        sink.start(&test_start(), &mut out).unwrap();
        let site = COMPILE;
        let events = [
            Event::ThreadName { thread: 77, name: "main" },
            Event::SpanBegin { thread: 77, ts: 10_100, site, fields: &[] },
            Event::SpanEnd {
                thread: 77,
                ts: 10_300,
                begin_ts: 10_100,
                site,
                fields: &[],
                recorded: &[],
                unclosed: true,
            },
        ];
        for e in &events {
            sink.event(e, &mut out).unwrap();
        }
        assert!(out.is_empty(), "packets wait in the chunk");
        sink.state.as_mut().unwrap().enc.flush(&mut out).unwrap();
        let packets = Trace::decode(&out[..]).unwrap().packet;
        assert_eq!(packets.len(), 6, "{packets:#?}");
        let process = packets[1].track_descriptor.clone().unwrap();
        assert_eq!(process.process.unwrap().pid, Some(4321));
        let thread = packets[3].track_descriptor.clone().unwrap();
        assert_eq!(thread.parent_uuid, process.uuid);
        assert_eq!(thread.thread.unwrap().tid, Some(77));
        assert_ne!(packets[0].trusted_packet_sequence_id, packets[2].trusted_packet_sequence_id);
        let begin = packets[4].track_event.clone().unwrap();
        assert_eq!((begin.r#type, packets[4].timestamp), (Some(TYPE_SLICE_BEGIN), Some(100)));
        let end = packets[5].track_event.clone().unwrap();
        assert_eq!((end.r#type, packets[5].timestamp), (Some(TYPE_SLICE_END), Some(200)));
        assert_eq!(end.debug_annotations[0].bool_value, Some(true));
        let names = packets[5].interned_data.clone().unwrap().debug_annotation_names;
        assert_eq!(names[0].name.as_deref(), Some("unclosed"));
    }
}
