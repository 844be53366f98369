//! The sink's state for one capture: the process, thread, lane and counter
//! tracks, the sequence each writes on, and the events it writes there.

use std::collections::HashMap;
use std::io::{self, Write};

use trace_core::{Field, Finish, FlowKind, LaneSlice, ProcessSample, Site, ThreadCpu, Tid, Value};
// The one naming rule of instants, so that both files name them alike.
use trace_core::instant_name;

use crate::chunk::Encoder;
use crate::clock::Timestamps;
use crate::format::{
    CHILD_ORDERING_EXPLICIT, COUNTER_THREAD_TIME_NS, SIBLING_MERGE_BEHAVIOR_NONE, TYPE_COUNTER, TYPE_INSTANT,
    TYPE_SLICE_BEGIN, TYPE_SLICE_END, UNIT_COUNT, UNIT_SIZE_BYTES, UNIT_TIME_NS,
};
use crate::ids::{Ids, TrackKind};
use crate::intern::FastHash;
use crate::proto::{CounterDescriptor, ProcessDescriptor, ThreadDescriptor, TrackDescriptor};
use crate::sequence::Sequence;
use crate::track_event::EventSpec;

/// The annotation that marks a span the capture closed itself.
const UNCLOSED: [Field<'static>; 1] = [Field { name: "unclosed", value: Value::Bool(true) }];
/// The category of the sink's own events.
const OWN_CATEGORY: &str = "cabin_trace";

/// Threads whose sequences the state has room for before its list grows.
const THREADS_AT_ONCE: usize = 8;

/// The counter track of the process's resident memory (bytes).
pub const MEMORY_COUNTER: &str = "process resident memory";
/// The counter track of the process's CPU usage (percent of one core).
pub const CPU_COUNTER: &str = "process CPU usage";

/// The name of the instant that gives the capture's family.
pub const FAMILY_MARKER: &str = "trace family";

/// An external lane's tracks.
#[derive(Debug)]
struct Lane {
    name: String,
    uuid: u64,
    /// The lane's process id.
    pid: u64,
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
    /// The sequence of the process and lane tracks and of the lanes' slices.
    process: Sequence,
    /// Each thread's sequence, in the order the threads came.
    pub(crate) threads: Vec<Sequence>,
    /// Where each thread's sequence is in `threads`.
    thread_index: HashMap<Tid, usize, FastHash>,
    /// The thread of the last event and where its sequence is: events come
    /// in runs from one thread, which then need no lookup.
    last_thread: Option<(Tid, usize)>,
    /// Each thread's track and the index of its sequence.
    thread_tracks: HashMap<Tid, (u64, u32), FastHash>,
    /// Each thread's CPU-time counter track, declared on its first use.
    cpu_tracks: HashMap<Tid, u64, FastHash>,
    /// The process's memory and CPU counter tracks, declared with the first sample.
    sample_tracks: Option<(u64, u64)>,
    /// The previous process sample, for the CPU usage between it and the next.
    last_sample: Option<ProcessSample>,
    /// Sequences started so far, the process's included: the next one's index.
    sequences: u32,
    lanes: Vec<Lane>,
    pub(crate) enc: Encoder,
    /// Spans the capture closed itself, for the marker at the finish.
    unclosed: u64,
    /// An instant's `file:line`, reused.
    location: String,
    /// Flows that end at the next slice begun on their thread.
    arriving: Vec<(Tid, u64)>,
    /// The flow ids of the slice being begun, reused.
    ending: Vec<u64>,
}

impl State {
    pub(crate) fn start(
        command: &str,
        pid: u32,
        base_ns: u64,
        start_unix_ms: u64,
        family: Option<&trace_core::Family>,
        compress: bool,
        out: &mut dyn Write,
    ) -> io::Result<State> {
        let ids = Ids::new(pid, base_ns, start_unix_ms);
        // Real pids are below 2^22; the schema's pid is an int32.
        let pid = i32::try_from(pid).unwrap_or(i32::MAX);
        let mut enc = Encoder::default();
        enc.chunk.compress = compress;
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
        if let Some(family) = family {
            let trace_id = family.trace_id_hex();
            let span = family.parent_span_id_hex();
            let mut fields = vec![Field { name: "trace_id", value: Value::Str(&trace_id) }];
            if let Some(span) = &span {
                fields.push(Field { name: "parent_span_id", value: Value::Str(span) });
            }
            if let Some(stem) = &family.parent_stem {
                fields.push(Field { name: "parent_stem", value: Value::Str(stem) });
            }
            let spec = EventSpec {
                ts: base_ns,
                kind: TYPE_INSTANT,
                track: Some(process_track),
                name: Some(FAMILY_MARKER),
                category: Some(OWN_CATEGORY),
                fields: &fields,
                ..EventSpec::default()
            };
            process.event(&mut enc, out, &spec)?;
        }
        Ok(State {
            pid,
            ids,
            base_ns,
            process_track,
            process,
            // Room for a few threads' sequences (5 KiB each, mostly their
            // interners' tables) made at once: growing one push at a time
            // copied them, touching about nine new pages for four threads.
            threads: Vec::with_capacity(THREADS_AT_ONCE),
            thread_index: HashMap::default(),
            last_thread: None,
            thread_tracks: HashMap::default(),
            cpu_tracks: HashMap::default(),
            sample_tracks: None,
            last_sample: None,
            sequences: 1,
            lanes: Vec::new(),
            enc,
            unclosed: 0,
            location: String::new(),
            arriving: Vec::new(),
            ending: Vec::new(),
        })
    }

    /// Starts `thread`'s sequence and declares its track, once.
    pub(crate) fn thread(&mut self, thread: Tid, name: Option<&str>, out: &mut dyn Write) -> io::Result<()> {
        if self.thread_index.contains_key(&thread) {
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
        self.thread_index.insert(thread, self.threads.len());
        self.threads.push(sequence);
        self.thread_tracks.insert(thread, (track, index));
        Ok(())
    }

    /// The uuid of `thread`'s CPU-time counter, declared on its sequence the
    /// first time: a child of the thread's track whose values (absolute
    /// nanoseconds of the thread's CPU clock) the slices' begins and ends
    /// carry, which the trace processor turns into each slice's thread
    /// timestamp and thread duration.
    fn cpu_track(&mut self, thread: Tid, out: &mut dyn Write) -> io::Result<u64> {
        if let Some(&uuid) = self.cpu_tracks.get(&thread) {
            return Ok(uuid);
        }
        self.thread(thread, None, out)?;
        let Some(&(track, index)) = self.thread_tracks.get(&thread) else {
            return Err(io::Error::other("the Perfetto sink lost a thread's track"));
        };
        let uuid = self.ids.track(TrackKind::ThreadCpu, u64::from(index));
        if let Some(sequence) = self.sequence_index(thread).and_then(|i| self.threads.get_mut(i)) {
            sequence.describe(
                &mut self.enc,
                out,
                TrackDescriptor {
                    uuid: Some(uuid),
                    parent_uuid: Some(track),
                    // No name: the trace processor fills a slice's thread
                    // time and duration from an extra counter only when its
                    // track is the built-in thread-time counter it names
                    // itself; a name of our own makes it an ordinary counter.
                    counter: Some(CounterDescriptor {
                        r#type: Some(COUNTER_THREAD_TIME_NS),
                        unit: Some(UNIT_TIME_NS),
                        is_incremental: Some(false),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            )?;
        }
        self.cpu_tracks.insert(thread, uuid);
        Ok(uuid)
    }

    /// The thread CPU-time sample of a slice's begin or end, if it has one.
    #[inline]
    fn cpu_sample(
        &mut self,
        thread: Tid,
        ns: Option<u64>,
        out: &mut dyn Write,
    ) -> io::Result<Option<(u64, i64)>> {
        match ns {
            Some(ns) => Ok(Some((self.cpu_track(thread, out)?, cpu_value(ns)))),
            None => Ok(None),
        }
    }

    /// Where `thread`'s sequence is in `threads`, if it has one.
    #[inline]
    fn sequence_index(&mut self, thread: Tid) -> Option<usize> {
        match self.last_thread {
            Some((last, index)) if last == thread => Some(index),
            _ => {
                let index = *self.thread_index.get(&thread)?;
                self.last_thread = Some((thread, index));
                Some(index)
            }
        }
    }

    /// Where `thread`'s sequence is in `threads`, started first if the
    /// thread has none.
    #[inline]
    fn thread_sequence(&mut self, thread: Tid, out: &mut dyn Write) -> io::Result<Option<usize>> {
        // No lookup for a thread seen just before: most events.
        if let Some(index) = self.sequence_index(thread) {
            return Ok(Some(index));
        }
        self.thread(thread, None, out)?;
        Ok(self.sequence_index(thread))
    }

    /// Writes a track event on `thread`'s sequence.
    fn thread_event(&mut self, thread: Tid, spec: &EventSpec<'_>, out: &mut dyn Write) -> io::Result<()> {
        let index = self.thread_sequence(thread, out)?;
        match index.and_then(|i| self.threads.get_mut(i)) {
            Some(sequence) => sequence.event(&mut self.enc, out, spec),
            None => Ok(()),
        }
    }

    /// The sequence of `thread` (and the encoder) if it is the thread of the
    /// event before (most events), found with no lookup.
    #[inline(always)]
    fn last_sequence(&mut self, thread: Tid) -> Option<(&mut Sequence, &mut Encoder)> {
        match self.last_thread {
            Some((last, index)) if last == thread => Some((self.threads.get_mut(index)?, &mut self.enc)),
            _ => None,
        }
    }

    /// Writes a bare track event ([`EventSpec::is_bare`]) of type `kind` at
    /// `ts` on `thread`'s sequence: most slices' ends.
    #[inline(always)]
    fn thread_bare_event(&mut self, thread: Tid, ts: u64, kind: i32, out: &mut dyn Write) -> io::Result<()> {
        if let Some((sequence, enc)) = self.last_sequence(thread) {
            return sequence.bare_event(enc, out, ts, kind);
        }
        self.other_thread_bare_event(thread, ts, kind, out)
    }

    /// [`State::thread_bare_event`] on a thread other than the last one's.
    #[inline(never)]
    fn other_thread_bare_event(
        &mut self,
        thread: Tid,
        ts: u64,
        kind: i32,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let index = self.thread_sequence(thread, out)?;
        match index.and_then(|i| self.threads.get_mut(i)) {
            Some(sequence) => sequence.bare_event(&mut self.enc, out, ts, kind),
            None => Ok(()),
        }
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
                self.process.describe(
                    &mut self.enc,
                    out,
                    TrackDescriptor {
                        uuid: Some(uuid),
                        process: Some(ProcessDescriptor {
                            pid: Some(i32::try_from(pid).unwrap_or(i32::MAX)),
                            process_name: Some(slice.lane.to_string()),
                        }),
                        child_ordering: Some(CHILD_ORDERING_EXPLICIT),
                        ..Default::default()
                    },
                )?;
                self.lanes.push(Lane { name: slice.lane.to_string(), uuid, pid, tracks: Vec::new() });
                index
            }
        };
        let lane = &mut self.lanes[index];
        if let Some(&(_, uuid)) = lane.tracks.iter().find(|(track, _)| *track == slice.track) {
            return Ok(uuid);
        }
        let uuid = self.ids.track(TrackKind::SubLane, ((index as u64) << 32) | u64::from(slice.track));
        let (parent, pid) = (lane.uuid, lane.pid);
        lane.tracks.push((slice.track, uuid));
        self.process.describe(
            &mut self.enc,
            out,
            TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: Some(parent),
                thread: Some(ThreadDescriptor {
                    pid: Some(i32::try_from(pid).unwrap_or(i32::MAX)),
                    tid: Some(i64::try_from(slice.sub_lane_tid()).unwrap_or(i64::MAX)),
                    thread_name: Some(slice.sub_lane_name()),
                }),
                sibling_order_rank: Some(i32::try_from(slice.track).unwrap_or(i32::MAX)),
                ..Default::default()
            },
        )?;
        Ok(uuid)
    }

    pub(crate) fn lane(&mut self, slice: &LaneSlice<'_>, out: &mut dyn Write) -> io::Result<()> {
        let track = self.lane_track(slice, out)?;
        let begin = EventSpec {
            ts: slice.begin_ns,
            kind: TYPE_SLICE_BEGIN,
            track: Some(track),
            name: Some(slice.name),
            category: Some(slice.lane),
            fields: slice.fields,
            ..EventSpec::default()
        };
        self.process.event(&mut self.enc, out, &begin)?;
        let end = EventSpec {
            ts: slice.end_ns.max(slice.begin_ns),
            kind: TYPE_SLICE_END,
            track: Some(track),
            ..EventSpec::default()
        };
        self.process.event(&mut self.enc, out, &end)
    }
}

/// A thread CPU clock reading as the counter's value (an int64 on the wire):
/// the largest value for one past it.
#[inline]
fn cpu_value(ns: u64) -> i64 {
    i64::try_from(ns).unwrap_or(i64::MAX)
}

impl State {
    /// A `tracing` event: an instant named after its message, with its level
    /// and source location as annotations after its fields.
    #[inline]
    pub(crate) fn instant(
        &mut self,
        thread: Tid,
        ts: u64,
        site: Site<'_>,
        fields: &[Field<'_>],
        out: &mut dyn Write,
    ) -> io::Result<()> {
        // Most instants: on the thread of the event before, at a call site
        // whose bytes its sequence has cached.
        if let Some((sequence, enc)) = self.last_sequence(thread) {
            if let Some(written) = sequence.cached_instant((enc, out), ts, &site, fields) {
                return written;
            }
        }
        self.any_instant((thread, ts), site, fields, out)
    }

    /// [`State::instant`] in full: from the site's cached bytes on a thread
    /// other than the last event's, else through [`Sequence::event`],
    /// caching the site's bytes for the next ones.
    #[inline(never)]
    fn any_instant(
        &mut self,
        (thread, ts): (Tid, u64),
        site: Site<'_>,
        fields: &[Field<'_>],
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let Some(index) = self.thread_sequence(thread, out)? else {
            return Ok(());
        };
        if let Some(sequence) = self.threads.get_mut(index) {
            if let Some(written) = sequence.cached_instant((&mut self.enc, out), ts, &site, fields) {
                return written;
            }
        }
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
            name: if full_name.is_some() { None } else { Some(site.name) },
            category: Some(site.target),
            fields,
            extra: &extra[..extras],
            full_name,
            static_text: site.has_static_text(),
            ..EventSpec::default()
        };
        let written = self.thread_event(thread, &spec, out);
        if written.is_ok() {
            if let Some(sequence) = self.threads.get_mut(index) {
                sequence.cache_instant(&site, &spec);
            }
        }
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
            ..EventSpec::default()
        };
        self.process.event(&mut self.enc, out, &spec)
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
                let percent = CounterDescriptor { unit_name: Some("%".into()), ..Default::default() };
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
            let spec = EventSpec {
                ts,
                kind: TYPE_COUNTER,
                track: Some(cpu),
                double_counter: Some(percent),
                ..EventSpec::default()
            };
            self.process.event(&mut self.enc, out, &spec)?;
        }
        Ok(())
    }

    /// Declares a counter track `name` of the process.
    fn counter_track(
        &mut self,
        uuid: u64,
        name: &str,
        counter: CounterDescriptor,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        self.process.describe(
            &mut self.enc,
            out,
            TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: Some(self.process_track),
                name: Some(name.to_string()),
                counter: Some(counter),
                ..Default::default()
            },
        )
    }

    /// One value of a counter track of the process.
    fn counter_value(&mut self, track: u64, ts: u64, value: i64, out: &mut dyn Write) -> io::Result<()> {
        let spec = EventSpec {
            ts,
            kind: TYPE_COUNTER,
            track: Some(track),
            counter: Some(value),
            ..EventSpec::default()
        };
        self.process.event(&mut self.enc, out, &spec)
    }

    /// A counter track of the process, `trace records dropped`, at 0 at the
    /// capture's start and at `count` at `end_ns`.
    fn dropped_counter(&mut self, end_ns: u64, count: u64, out: &mut dyn Write) -> io::Result<()> {
        let uuid = self.ids.track(TrackKind::Counter, 0);
        let counter = CounterDescriptor { unit: Some(UNIT_COUNT), ..Default::default() };
        self.counter_track(uuid, "trace records dropped", counter, out)?;
        for (ts, value) in [(self.base_ns, 0), (end_ns, i64::try_from(count).unwrap_or(i64::MAX))] {
            self.counter_value(uuid, ts, value, out)?;
        }
        Ok(())
    }

    /// A span was entered: a slice begins on its thread's track.
    #[inline(always)]
    pub(crate) fn span_begin(
        &mut self,
        thread: Tid,
        ts: u64,
        site: &Site<'_>,
        fields: &[Field<'_>],
        thread_cpu_ns: Option<u64>,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        // Most begins: on the thread of the event before, no flow ending
        // there, no CPU time read or that of a counter declared before:
        // written from the site's cached bytes.
        if self.arriving.is_empty() {
            if let Some((sequence, enc)) = self.last_sequence(thread) {
                match (thread_cpu_ns, sequence.cpu_track()) {
                    (None, _) => return sequence.span_begin((enc, out), (ts, site), fields, None),
                    (Some(ns), Some(track)) => {
                        let sample = Some((track, cpu_value(ns)));
                        return sequence.span_begin((enc, out), (ts, site), fields, sample);
                    }
                    (Some(_), None) => {}
                }
            }
        }
        self.any_span_begin((thread, ts, thread_cpu_ns), site, fields, out)
    }

    /// [`State::span_begin`] in full.
    #[inline(never)]
    fn any_span_begin(
        &mut self,
        (thread, ts, thread_cpu_ns): (Tid, u64, Option<u64>),
        site: &Site<'_>,
        fields: &[Field<'_>],
        out: &mut dyn Write,
    ) -> io::Result<()> {
        if self.arriving.is_empty() {
            // No flow ends here: written from the site's iids.
            let extra_counter = self.cpu_sample(thread, thread_cpu_ns, out)?;
            let index = self.thread_sequence(thread, out)?;
            return match index.and_then(|i| self.threads.get_mut(i)) {
                Some(sequence) => {
                    sequence.span_begin((&mut self.enc, out), (ts, site), fields, extra_counter)
                }
                None => Ok(()),
            };
        }
        let mut ending = std::mem::take(&mut self.ending);
        ending.clear();
        ending.extend(self.arriving.iter().filter(|(t, _)| *t == thread).map(|(_, flow)| *flow));
        self.arriving.retain(|(t, _)| *t != thread);
        let spec = EventSpec {
            extra_counter: self.cpu_sample(thread, thread_cpu_ns, out)?,
            terminating_flow_ids: &ending,
            ..EventSpec::slice_begin(ts, site, fields)
        };
        let written = self.thread_event(thread, &spec, out);
        self.ending = ending;
        written
    }

    /// A span ended: its slice ends, with the fields recorded since its begin
    /// (named by `'static` strings when `static_text`).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn span_end(
        &mut self,
        thread: Tid,
        ts: u64,
        recorded: &[Field<'_>],
        static_text: bool,
        unclosed: bool,
        cpu: Option<ThreadCpu>,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        if recorded.is_empty() && !unclosed {
            let Some(cpu) = cpu else {
                return self.thread_bare_event(thread, ts, TYPE_SLICE_END, out);
            };
            // Most ends where the CPU clock is read: the counter's value and
            // nothing else, on a counter declared before.
            if let Some((sequence, enc)) = self.last_sequence(thread) {
                if let Some(track) = sequence.cpu_track() {
                    return sequence.counter_end((enc, out), ts, (track, cpu_value(cpu.end_ns)));
                }
            }
        }
        self.full_span_end((thread, ts), recorded, (static_text, unclosed), cpu, out)
    }

    /// [`State::span_end`] for an end with more than its time.
    #[inline(never)]
    fn full_span_end(
        &mut self,
        (thread, ts): (Tid, u64),
        recorded: &[Field<'_>],
        (static_text, unclosed): (bool, bool),
        cpu: Option<ThreadCpu>,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        self.unclosed += u64::from(unclosed);
        let spec = EventSpec {
            ts,
            kind: TYPE_SLICE_END,
            fields: recorded,
            extra: if unclosed { &UNCLOSED } else { &[] },
            extra_counter: self.cpu_sample(thread, cpu.map(|c| c.end_ns), out)?,
            static_text,
            ..EventSpec::default()
        };
        self.thread_event(thread, &spec, out)
    }

    /// The end of the capture: the loss markers, then the last chunk.
    pub(crate) fn finish(&mut self, end: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
        if end.dropped_records > 0 {
            self.marker(end.end_ns, "trace records dropped", "dropped_records", end.dropped_records, out)?;
            self.dropped_counter(end.end_ns, end.dropped_records, out)?;
        }
        if self.unclosed > 0 {
            let count = self.unclosed;
            self.marker(end.end_ns, "trace spans unclosed", "unclosed_spans", count, out)?;
        }
        self.enc.flush(out)
    }
}

/// Spans that ran in pieces and flows.
impl State {
    /// A span that ran in pieces: a track of its own under the process's
    /// track, named after the span, holding one slice for its whole life.
    /// Written at its close, on the process's sequence (absolute times).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn async_span(
        &mut self,
        id: u64,
        begin_ts: u64,
        end_ts: u64,
        site: Site<'_>,
        fields: &[Field<'_>],
        unclosed: bool,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let uuid = self.ids.track(TrackKind::Async, id);
        self.process.describe(
            &mut self.enc,
            out,
            TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: Some(self.process_track),
                name: Some(site.name.to_string()),
                // Each span in pieces keeps its own track: by default the
                // trace processor merges sibling tracks of one name whose
                // slices do not overlap, where the JSON's async ids keep them
                // apart.
                sibling_merge_behavior: Some(SIBLING_MERGE_BEHAVIOR_NONE),
                ..Default::default()
            },
        )?;
        let begin = EventSpec {
            ts: begin_ts,
            kind: TYPE_SLICE_BEGIN,
            track: Some(uuid),
            name: Some(site.name),
            category: Some(site.target),
            fields,
            static_text: site.has_static_text(),
            ..EventSpec::default()
        };
        self.process.event(&mut self.enc, out, &begin)?;
        let end = EventSpec {
            ts: end_ts.max(begin_ts),
            kind: TYPE_SLICE_END,
            track: Some(uuid),
            extra: if unclosed { &UNCLOSED } else { &[] },
            ..EventSpec::default()
        };
        self.process.event(&mut self.enc, out, &end)
    }

    /// The flow id of the capture's flow `flow`, unique across the files a
    /// trace may join.
    fn flow_id(&self, flow: u64) -> u64 {
        self.ids.track(TrackKind::Flow, flow)
    }

    /// A flow leaves the slice open on `thread` at `ts`: an instant there
    /// (nested in that slice), named after the flow's kind, carrying its id.
    pub(crate) fn flow_out(
        &mut self,
        flow: u64,
        kind: FlowKind,
        thread: Tid,
        ts: u64,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let ids = [self.flow_id(flow)];
        self.flow_instant(kind, thread, ts, (&ids, &[]), out)
    }

    /// A flow arrives on `thread` at `ts`: on the begin of the thread's next
    /// slice, or (`at_begin` false) as an instant in the slice open there.
    pub(crate) fn flow_in(
        &mut self,
        flow: u64,
        kind: FlowKind,
        thread: Tid,
        ts: u64,
        at_begin: bool,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let id = self.flow_id(flow);
        if at_begin {
            self.arriving.push((thread, id));
            return Ok(());
        }
        self.flow_instant(kind, thread, ts, (&[], &[id]), out)
    }

    /// An instant on `thread` at `ts`, named after the flow's kind, that
    /// begins the flows `begins` and ends the flows `ends`.
    fn flow_instant(
        &mut self,
        kind: FlowKind,
        thread: Tid,
        ts: u64,
        (begins, ends): (&[u64], &[u64]),
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let spec = EventSpec {
            ts,
            kind: TYPE_INSTANT,
            name: Some(kind.as_str()),
            category: Some(OWN_CATEGORY),
            flow_ids: begins,
            terminating_flow_ids: ends,
            ..EventSpec::default()
        };
        self.thread_event(thread, &spec, out)
    }
}
