//! The sink's state for one capture: the process, thread, lane and counter
//! tracks, the sequence each writes on, and what each event becomes.

use rustc_hash::FxHashMap;
use std::io::{self, Write};

// `instant_name`: the one naming rule of instants, so that both files name them alike.
use trace_core::{
    instant_name, Family, Field, Finish, FlowKind, LaneSlice, ProcessSample, Site, ThreadCpu, Tid, Value,
};

use crate::chunk::Chunk;
use crate::clock::Timestamps;
use crate::format::event::{TYPE_COUNTER, TYPE_INSTANT, TYPE_SLICE_BEGIN, TYPE_SLICE_END};
use crate::format::track::{COUNTER_THREAD_TIME_NS, UNIT_COUNT, UNIT_SIZE_BYTES, UNIT_TIME_NS};
use crate::ids::{Ids, TrackKind};
use crate::sequence::{CounterDescriptor, Sequence, TrackDescriptor, TrackEvent};

/// The annotation that marks a span the capture closed itself.
const UNCLOSED: [Field<'static>; 1] = [Field { name: "unclosed", value: Value::Bool(true) }];
/// The category of the sink's own events.
const OWN_CATEGORY: &str = "cabin_trace";

/// The counter track of the process's resident memory (bytes).
pub const MEMORY_COUNTER: &str = "process resident memory";
/// The counter track of the process's CPU usage (percent of one core).
pub const CPU_COUNTER: &str = "process CPU usage";
/// The counter track of the records the capture dropped (count).
const DROPPED_COUNTER: &str = "trace records dropped";
/// The name of the instant that gives the capture's family.
pub const FAMILY_MARKER: &str = "trace family";

/// One thread: its sequence and its tracks.
#[derive(Debug)]
struct Thread {
    sequence: Sequence,
    /// Where its tracks' uuids are drawn from: its sequence's index.
    index: u32,
    track: u64,
    /// Its CPU-time counter track, declared on first use.
    cpu_track: Option<u64>,
}

/// An external lane's tracks.
#[derive(Debug)]
struct Lane {
    name: String,
    uuid: u64,
    /// The lane's process id (the one the Chrome JSON gives it too).
    pid: i32,
    /// `(sub-lane, track uuid)`, in the order they appeared.
    tracks: Vec<(u32, u64)>,
}

/// Everything the sink knows once the capture started.
#[derive(Debug)]
pub(crate) struct State {
    pid: i32,
    ids: Ids,
    /// The capture's start (CLOCK_MONOTONIC ns): where each sequence's clock starts.
    base_ns: u64,
    process_track: u64,
    /// The sequence of the process's own tracks and events (absolute times).
    process: Sequence,
    threads: Vec<Thread>,
    /// Where each thread is in `threads`.
    thread_index: FxHashMap<Tid, usize>,
    lanes: Vec<Lane>,
    /// The process's memory and CPU counter tracks, declared with the first sample.
    sample_tracks: Option<(u64, u64)>,
    /// The previous process sample, for the CPU usage between it and the next.
    last_sample: Option<ProcessSample>,
    pub(crate) chunk: Chunk,
    /// Spans the capture closed itself, for the marker at the finish.
    unclosed: u64,
    /// Flows that end at the next slice begun on their thread.
    arriving: Vec<(Tid, u64)>,
    /// An instant's `file:line`, reused.
    location: String,
}

impl State {
    pub(crate) fn start(
        command: &str,
        pid: u32,
        (base_ns, start_unix_ms): (u64, u64),
        family: Option<&Family>,
        compress: bool,
        out: &mut dyn Write,
    ) -> io::Result<State> {
        let ids = Ids::new(pid, base_ns, start_unix_ms);
        // Real pids are below 2^22; the schema's pid is an int32.
        let pid = i32::try_from(pid).unwrap_or(i32::MAX);
        let mut chunk = Chunk::new(compress);
        let mut process =
            Sequence::start(&mut chunk, out, ids.sequence(0), Timestamps::Absolute, None, base_ns)?;
        let process_track = ids.track(TrackKind::Process, 0);
        let descriptor =
            TrackDescriptor { uuid: process_track, process: Some((pid, command)), ..Default::default() };
        process.describe(&mut chunk, out, &descriptor)?;
        let mut state = State {
            pid,
            ids,
            base_ns,
            process_track,
            process,
            threads: Vec::new(),
            thread_index: FxHashMap::default(),
            lanes: Vec::new(),
            sample_tracks: None,
            last_sample: None,
            chunk,
            unclosed: 0,
            arriving: Vec::new(),
            location: String::new(),
        };
        if let Some(family) = family {
            state.family_marker(family, out)?;
        }
        Ok(state)
    }

    /// The capture's family: an instant on the process's track at its start.
    fn family_marker(&mut self, family: &Family, out: &mut dyn Write) -> io::Result<()> {
        let trace_id = family.trace_id_hex();
        let span = family.parent_span_id_hex();
        let mut fields = vec![Field { name: "trace_id", value: Value::Str(&trace_id) }];
        if let Some(span) = &span {
            fields.push(Field { name: "parent_span_id", value: Value::Str(span) });
        }
        if let Some(stem) = &family.parent_stem {
            fields.push(Field { name: "parent_stem", value: Value::Str(stem) });
        }
        let marker = TrackEvent {
            ts: self.base_ns,
            kind: TYPE_INSTANT,
            track: Some(self.process_track),
            name: Some(FAMILY_MARKER),
            category: Some(OWN_CATEGORY),
            fields: &fields,
            ..TrackEvent::default()
        };
        self.process.event(&mut self.chunk, out, &marker)
    }

    /// Where `thread` is in `threads`: its sequence started and its track
    /// declared (named `name`, or `thread-<tid>`) the first time.
    pub(crate) fn thread(
        &mut self,
        thread: Tid,
        name: Option<&str>,
        out: &mut dyn Write,
    ) -> io::Result<usize> {
        if let Some(&at) = self.thread_index.get(&thread) {
            return Ok(at);
        }
        // The process's sequence is index 0.
        let index = u32::try_from(self.threads.len() + 1).unwrap_or(u32::MAX);
        let track = self.ids.track(TrackKind::Thread, u64::from(index));
        let id = self.ids.sequence(index);
        let mut sequence =
            Sequence::start(&mut self.chunk, out, id, Timestamps::Incremental, Some(track), self.base_ns)?;
        let fallback;
        let name = match name {
            Some(name) => name,
            None => {
                fallback = format!("thread-{thread}");
                &fallback
            }
        };
        let descriptor = TrackDescriptor {
            uuid: track,
            parent: Some(self.process_track),
            thread: Some((self.pid, thread, name)),
            ..Default::default()
        };
        sequence.describe(&mut self.chunk, out, &descriptor)?;
        let at = self.threads.len();
        self.threads.push(Thread { sequence, index, track, cpu_track: None });
        self.thread_index.insert(thread, at);
        Ok(at)
    }

    /// Writes `event` on `thread`'s sequence.
    fn thread_event(&mut self, thread: Tid, event: &TrackEvent<'_>, out: &mut dyn Write) -> io::Result<()> {
        let at = self.thread(thread, None, out)?;
        self.threads[at].sequence.event(&mut self.chunk, out, event)
    }

    /// The thread CPU-time sample `(track, value)` of a slice's begin or end
    /// on the thread at `at`, declaring its counter track the first time: a
    /// child of the thread's track of the built-in type
    /// `COUNTER_THREAD_TIME_NS`, absolute nanoseconds, with *no name*: the
    /// trace processor turns the samples of such a track (and of no other)
    /// into each slice's thread timestamp and thread duration.
    fn cpu_sample(
        &mut self,
        at: usize,
        ns: Option<u64>,
        out: &mut dyn Write,
    ) -> io::Result<Option<(u64, i64)>> {
        let Some(ns) = ns else { return Ok(None) };
        let value = i64::try_from(ns).unwrap_or(i64::MAX);
        let thread = &mut self.threads[at];
        if let Some(uuid) = thread.cpu_track {
            return Ok(Some((uuid, value)));
        }
        let uuid = self.ids.track(TrackKind::ThreadCpu, u64::from(thread.index));
        let counter = CounterDescriptor {
            builtin: Some(COUNTER_THREAD_TIME_NS),
            unit: Some(UNIT_TIME_NS),
            ..Default::default()
        };
        let descriptor = TrackDescriptor {
            uuid,
            parent: Some(thread.track),
            counter: Some(counter),
            ..Default::default()
        };
        thread.sequence.describe(&mut self.chunk, out, &descriptor)?;
        thread.cpu_track = Some(uuid);
        Ok(Some((uuid, value)))
    }

    /// A span was entered: a slice begins on its thread's track, with the
    /// span's fields, the flows that arrive there, and the thread's CPU time.
    pub(crate) fn span_begin(
        &mut self,
        (thread, ts): (Tid, u64),
        site: &Site<'_>,
        fields: &[Field<'_>],
        thread_cpu_ns: Option<u64>,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let at = self.thread(thread, None, out)?;
        let extra_counter = self.cpu_sample(at, thread_cpu_ns, out)?;
        let mut ending = Vec::new();
        if !self.arriving.is_empty() {
            ending.extend(self.arriving.iter().filter(|(t, _)| *t == thread).map(|(_, flow)| *flow));
            self.arriving.retain(|(t, _)| *t != thread);
        }
        let begin = TrackEvent {
            ts,
            kind: TYPE_SLICE_BEGIN,
            name: Some(site.name),
            category: Some(site.target),
            fields,
            extra_counter,
            terminating_flow_ids: &ending,
            static_text: site.has_static_text(),
            ..TrackEvent::default()
        };
        self.threads[at].sequence.event(&mut self.chunk, out, &begin)
    }

    /// A span ended: its slice ends, with the fields recorded since its
    /// begin, its thread's CPU time, and `unclosed = true` if the capture
    /// closed it.
    pub(crate) fn span_end(
        &mut self,
        (thread, ts): (Tid, u64),
        site: &Site<'_>,
        recorded: &[Field<'_>],
        unclosed: bool,
        cpu: Option<ThreadCpu>,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        self.unclosed += u64::from(unclosed);
        let at = self.thread(thread, None, out)?;
        let end = TrackEvent {
            ts,
            kind: TYPE_SLICE_END,
            fields: recorded,
            extra: if unclosed { &UNCLOSED } else { &[] },
            extra_counter: self.cpu_sample(at, cpu.map(|c| c.end_ns), out)?,
            static_text: site.has_static_text(),
            ..TrackEvent::default()
        };
        self.threads[at].sequence.event(&mut self.chunk, out, &end)
    }

    /// A `tracing` event: an instant named after its message (else after its
    /// call site), with its fields, its level and its source location.
    pub(crate) fn instant(
        &mut self,
        (thread, ts): (Tid, u64),
        site: &Site<'_>,
        fields: &[Field<'_>],
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let full_name = fields.iter().find(|f| f.name == "message").and_then(|f| match f.value {
            Value::Str(message) => instant_name(message),
            _ => None,
        });
        // A field of the same name, set by the tool, is not shadowed.
        let has = |name: &str| fields.iter().any(|f| f.name == name);
        let mut location = std::mem::take(&mut self.location);
        location.clear();
        let mut extra = [Field { name: "level", value: Value::Str(site.level.as_str()) }; 2];
        let mut extras = usize::from(!has("level"));
        if let (Some(file), false) = (site.file, has("location")) {
            use std::fmt::Write as _;
            location.push_str(file);
            if let Some(line) = site.line {
                let _ = write!(location, ":{line}");
            }
            extra[extras] = Field { name: "location", value: Value::Str(&location) };
            extras += 1;
        }
        let instant = TrackEvent {
            ts,
            kind: TYPE_INSTANT,
            name: if full_name.is_some() { None } else { Some(site.name) },
            full_name,
            category: Some(site.target),
            fields,
            extra: &extra[..extras],
            static_text: site.has_static_text(),
            ..TrackEvent::default()
        };
        let written = self.thread_event(thread, &instant, out);
        self.location = location;
        written
    }

    /// The uuid of the track of `slice`'s sub-lane, declared with its lane's
    /// track the first time. A lane is a process of its own (the pid the
    /// Chrome sink gives it too) and each sub-lane a thread of it, so that the
    /// trace processor, and the UI, list a lane beside the tool, as they do
    /// the JSON's.
    fn lane_track(&mut self, slice: &LaneSlice<'_>, out: &mut dyn Write) -> io::Result<u64> {
        let index = match self.lanes.iter().position(|l| l.name == slice.lane) {
            Some(index) => index,
            None => {
                let index = self.lanes.len();
                let uuid = self.ids.track(TrackKind::Lane, index as u64);
                let pid = LaneSlice::lane_pid(u32::try_from(self.pid).unwrap_or(0), index);
                let pid = i32::try_from(pid).unwrap_or(i32::MAX);
                let descriptor = TrackDescriptor {
                    uuid,
                    process: Some((pid, slice.lane)),
                    explicit_child_order: true,
                    ..Default::default()
                };
                self.process.describe(&mut self.chunk, out, &descriptor)?;
                self.lanes.push(Lane { name: slice.lane.to_string(), uuid, pid, tracks: Vec::new() });
                index
            }
        };
        let lane = &mut self.lanes[index];
        if let Some(&(_, uuid)) = lane.tracks.iter().find(|(track, _)| *track == slice.track) {
            return Ok(uuid);
        }
        let uuid = self.ids.track(TrackKind::SubLane, ((index as u64) << 32) | u64::from(slice.track));
        lane.tracks.push((slice.track, uuid));
        let name = slice.sub_lane_name();
        let descriptor = TrackDescriptor {
            uuid,
            parent: Some(lane.uuid),
            thread: Some((lane.pid, slice.sub_lane_tid(), &name)),
            sibling_order_rank: Some(i32::try_from(slice.track).unwrap_or(i32::MAX)),
            ..Default::default()
        };
        self.process.describe(&mut self.chunk, out, &descriptor)?;
        Ok(uuid)
    }

    /// A slice of an external lane, on its sub-lane's track.
    pub(crate) fn lane(&mut self, slice: &LaneSlice<'_>, out: &mut dyn Write) -> io::Result<()> {
        let track = self.lane_track(slice, out)?;
        let begin = TrackEvent {
            ts: slice.begin_ns,
            kind: TYPE_SLICE_BEGIN,
            track: Some(track),
            name: Some(slice.name),
            category: Some(slice.lane),
            fields: slice.fields,
            ..TrackEvent::default()
        };
        self.process.event(&mut self.chunk, out, &begin)?;
        let end = TrackEvent {
            ts: slice.end_ns.max(slice.begin_ns),
            kind: TYPE_SLICE_END,
            track: Some(track),
            ..TrackEvent::default()
        };
        self.process.event(&mut self.chunk, out, &end)
    }

    /// A process sample: the resident memory at its time, and the CPU usage
    /// since the previous sample at the previous sample's time (a counter
    /// holds its value until the next one), on two counter tracks of the
    /// process declared with the first sample.
    pub(crate) fn process_sample(&mut self, sample: &ProcessSample, out: &mut dyn Write) -> io::Result<()> {
        let (memory, cpu) = match self.sample_tracks {
            Some(tracks) => tracks,
            None => {
                let tracks = (self.ids.track(TrackKind::Counter, 1), self.ids.track(TrackKind::Counter, 2));
                let bytes = CounterDescriptor { unit: Some(UNIT_SIZE_BYTES), ..Default::default() };
                self.counter_track(tracks.0, MEMORY_COUNTER, bytes, out)?;
                let percent = CounterDescriptor { unit_name: Some("%"), ..Default::default() };
                self.counter_track(tracks.1, CPU_COUNTER, percent, out)?;
                self.sample_tracks = Some(tracks);
                tracks
            }
        };
        let last = self.last_sample.replace(*sample);
        if let Some(bytes) = sample.resident_bytes {
            self.counter_value(memory, sample.ts, i64::try_from(bytes).unwrap_or(i64::MAX), out)?;
        }
        if let Some((ts, percent)) = last.and_then(|last| Some((last.ts, sample.cpu_percent_since(&last)?))) {
            let event = TrackEvent {
                ts,
                kind: TYPE_COUNTER,
                track: Some(cpu),
                double_counter: Some(percent),
                ..TrackEvent::default()
            };
            self.process.event(&mut self.chunk, out, &event)?;
        }
        Ok(())
    }

    /// Declares a counter track `name` of the process.
    fn counter_track(
        &mut self,
        uuid: u64,
        name: &str,
        counter: CounterDescriptor<'_>,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let descriptor = TrackDescriptor {
            uuid,
            parent: Some(self.process_track),
            name: Some(name),
            counter: Some(counter),
            ..Default::default()
        };
        self.process.describe(&mut self.chunk, out, &descriptor)
    }

    /// One value of a counter track of the process.
    fn counter_value(&mut self, track: u64, ts: u64, value: i64, out: &mut dyn Write) -> io::Result<()> {
        let event = TrackEvent {
            ts,
            kind: TYPE_COUNTER,
            track: Some(track),
            counter: Some(value),
            ..TrackEvent::default()
        };
        self.process.event(&mut self.chunk, out, &event)
    }

    /// A span that ran in pieces: a track of its own under the process's
    /// track, named after the span, holding one slice for its whole life.
    /// Written at its close, on the process's sequence (absolute times).
    pub(crate) fn async_span(
        &mut self,
        (id, begin_ts, end_ts): (u64, u64, u64),
        site: &Site<'_>,
        fields: &[Field<'_>],
        unclosed: bool,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let uuid = self.ids.track(TrackKind::Async, id);
        // Each span in pieces keeps its own track, as the JSON's async ids do.
        let descriptor = TrackDescriptor {
            uuid,
            parent: Some(self.process_track),
            name: Some(site.name),
            never_merged: true,
            ..Default::default()
        };
        self.process.describe(&mut self.chunk, out, &descriptor)?;
        let begin = TrackEvent {
            ts: begin_ts,
            kind: TYPE_SLICE_BEGIN,
            track: Some(uuid),
            name: Some(site.name),
            category: Some(site.target),
            fields,
            static_text: site.has_static_text(),
            ..TrackEvent::default()
        };
        self.process.event(&mut self.chunk, out, &begin)?;
        let end = TrackEvent {
            ts: end_ts.max(begin_ts),
            kind: TYPE_SLICE_END,
            track: Some(uuid),
            extra: if unclosed { &UNCLOSED } else { &[] },
            ..TrackEvent::default()
        };
        self.process.event(&mut self.chunk, out, &end)
    }

    /// A flow leaves the slice open on `thread` at `ts`: an instant there
    /// (nested in that slice), named after the flow's kind, carrying its id.
    /// Flow ids are drawn like track uuids, so that they do not meet across
    /// the files a trace joins.
    pub(crate) fn flow_out(
        &mut self,
        flow: u64,
        kind: FlowKind,
        (thread, ts): (Tid, u64),
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let ids = [self.ids.track(TrackKind::Flow, flow)];
        self.flow_instant(kind, (thread, ts), (&ids, &[]), out)
    }

    /// A flow arrives on `thread` at `ts`: on the begin of the thread's next
    /// slice, or (`at_begin` false) as an instant in the slice open there.
    pub(crate) fn flow_in(
        &mut self,
        flow: u64,
        kind: FlowKind,
        (thread, ts): (Tid, u64),
        at_begin: bool,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let id = self.ids.track(TrackKind::Flow, flow);
        if at_begin {
            self.arriving.push((thread, id));
            return Ok(());
        }
        self.flow_instant(kind, (thread, ts), (&[], &[id]), out)
    }

    /// An instant on `thread` at `ts`, named after the flow's kind, that
    /// begins the flows `begins` and ends the flows `ends`.
    fn flow_instant(
        &mut self,
        kind: FlowKind,
        (thread, ts): (Tid, u64),
        (begins, ends): (&[u64], &[u64]),
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let instant = TrackEvent {
            ts,
            kind: TYPE_INSTANT,
            name: Some(kind.as_str()),
            category: Some(OWN_CATEGORY),
            flow_ids: begins,
            terminating_flow_ids: ends,
            ..TrackEvent::default()
        };
        self.thread_event(thread, &instant, out)
    }

    /// An instant on the process's track at `ts`, named `what (count)`, with
    /// the count as the annotation `key`: where a reader looks first.
    fn marker(
        &mut self,
        ts: u64,
        (what, key): (&str, &'static str),
        count: u64,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let name = format!("{what} ({count})");
        let fields = [Field { name: key, value: Value::U64(count) }];
        let marker = TrackEvent {
            ts,
            kind: TYPE_INSTANT,
            track: Some(self.process_track),
            name: Some(&name),
            category: Some(OWN_CATEGORY),
            fields: &fields,
            ..TrackEvent::default()
        };
        self.process.event(&mut self.chunk, out, &marker)
    }

    /// The end of the capture: the loss marks, then the last chunk.
    pub(crate) fn finish(&mut self, end: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
        if end.dropped_records > 0 {
            let count = end.dropped_records;
            self.marker(end.end_ns, (DROPPED_COUNTER, "dropped_records"), count, out)?;
            // A counter track at 0 at the start and at the count at the finish.
            let uuid = self.ids.track(TrackKind::Counter, 0);
            let counter = CounterDescriptor { unit: Some(UNIT_COUNT), ..Default::default() };
            self.counter_track(uuid, DROPPED_COUNTER, counter, out)?;
            self.counter_value(uuid, self.base_ns, 0, out)?;
            self.counter_value(uuid, end.end_ns, i64::try_from(count).unwrap_or(i64::MAX), out)?;
        }
        if self.unclosed > 0 {
            self.marker(end.end_ns, ("trace spans unclosed", "unclosed_spans"), self.unclosed, out)?;
        }
        self.chunk.flush(out)
    }
}
