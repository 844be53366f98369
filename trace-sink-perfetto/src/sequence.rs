//! One packet sequence: its first packet, its interning tables and its clock,
//! and the encoder of every packet written on it (track descriptors and track
//! events), field by field through `trace_proto_wire`.

use std::io::{self, Write};

use trace_core::{Field, Value};
use trace_proto_wire as wire;

use crate::chunk::Chunk;
use crate::clock::{SequenceClock, Timestamps};
use crate::format::{annotation, defaults, event, interned, packet, track};
use crate::interning::Interner;

/// What follows a name cut short (`TrackEvent.name` of an instant).
pub(crate) const ELLIPSIS: &str = "…";

/// One track event to write; what it leaves out is not written.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TrackEvent<'a> {
    /// When, in CLOCK_MONOTONIC nanoseconds.
    pub ts: u64,
    /// `TrackEvent.Type` (`event::TYPE_*`).
    pub kind: i64,
    /// The track, when not the sequence's default one.
    pub track: Option<u64>,
    /// Interned: `name_iid`.
    pub name: Option<&'a str>,
    /// A name written in full (`TrackEvent.name`), not interned, and whether
    /// an ellipsis follows it: for names made from messages, which differ
    /// per event and would grow the interning tables for the whole capture.
    pub full_name: Option<(&'a str, bool)>,
    /// Interned: `category_iids`.
    pub category: Option<&'a str>,
    /// Shown as debug annotations, `fields` then `extra`, their names interned.
    pub fields: &'a [Field<'a>],
    pub extra: &'a [Field<'a>],
    /// `counter_value`, for an event on a counter track.
    pub counter: Option<i64>,
    /// `double_counter_value`, for a counter whose values are not whole
    /// (the CPU usage in percent, to tenths).
    pub double_counter: Option<f64>,
    /// One value of another counter track sampled at this event
    /// (`extra_counter_track_uuids`, `extra_counter_values`): the thread
    /// CPU-time counter on a slice's begin and end.
    pub extra_counter: Option<(u64, i64)>,
    /// `flow_ids`: the flows that leave this event.
    pub flow_ids: &'a [u64],
    /// `terminating_flow_ids`: the flows that end at it.
    pub terminating_flow_ids: &'a [u64],
    /// Its names (event, category, annotations) are `'static` text
    /// ([`trace_core::Site::has_static_text`]): interned by address.
    pub static_text: bool,
}

/// A track to declare (`TrackDescriptor`); what it leaves out is not written.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TrackDescriptor<'a> {
    pub uuid: u64,
    pub parent: Option<u64>,
    pub name: Option<&'a str>,
    /// A process's track: `(pid, name)`.
    pub process: Option<(i32, &'a str)>,
    /// A thread's track: `(pid, tid, name)`.
    pub thread: Option<(i32, u64, &'a str)>,
    /// A counter track.
    pub counter: Option<CounterDescriptor<'a>>,
    /// Children sort by their `sibling_order_rank`.
    pub explicit_child_order: bool,
    pub sibling_order_rank: Option<i32>,
    /// Never merged with a sibling of the same name
    /// (`SIBLING_MERGE_BEHAVIOR_NONE`): by default the trace processor merges
    /// sibling tracks of one name whose slices do not overlap.
    pub never_merged: bool,
}

/// What makes a track a counter track (`CounterDescriptor`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CounterDescriptor<'a> {
    /// `BuiltinCounterType`, e.g. the thread's CPU time.
    pub builtin: Option<i64>,
    /// `Unit`.
    pub unit: Option<i64>,
    /// A unit the enum does not have, e.g. `%`.
    pub unit_name: Option<&'a str>,
}

/// One packet sequence (`trusted_packet_sequence_id`) of the file.
#[derive(Debug)]
pub(crate) struct Sequence {
    id: u32,
    clock: SequenceClock,
    event_names: Interner,
    categories: Interner,
    annotation_names: Interner,
    /// The current event's annotations: each name's iid, and whether the
    /// event is the first to use it (reused from event to event).
    annotations: Vec<(u64, bool)>,
}

impl Sequence {
    /// Starts sequence `id` in the file: a first packet that clears its
    /// incremental state, sets its defaults (clock, and `default_track` for
    /// its track events) and snapshots its clocks at `base_ns`.
    pub(crate) fn start(
        chunk: &mut Chunk,
        out: &mut dyn Write,
        id: u32,
        timestamps: Timestamps,
        default_track: Option<u64>,
        base_ns: u64,
    ) -> io::Result<Sequence> {
        let clock = SequenceClock::new(timestamps, base_ns);
        let entry = chunk.open_packet();
        let buf = &mut chunk.packets;
        let default_clock = clock.write_snapshot(buf, packet::CLOCK_SNAPSHOT);
        wire::put_uint(buf, packet::SEQUENCE_ID, u64::from(id));
        wire::put_uint(buf, packet::SEQUENCE_FLAGS, packet::SEQ_INCREMENTAL_STATE_CLEARED);
        let packet_defaults = wire::open(buf, packet::DEFAULTS);
        if let Some(uuid) = default_track {
            let event_defaults = wire::open(buf, defaults::TRACK_EVENT_DEFAULTS);
            wire::put_uint(buf, defaults::TRACK_UUID, uuid);
            wire::close(buf, event_defaults);
        }
        wire::put_uint(buf, defaults::TIMESTAMP_CLOCK_ID, u64::from(default_clock));
        wire::close(buf, packet_defaults);
        wire::put_bool(buf, packet::FIRST_PACKET_ON_SEQUENCE, true);
        chunk.close_packet(entry, out)?;
        Ok(Sequence {
            id,
            clock,
            event_names: Interner::default(),
            categories: Interner::default(),
            annotation_names: Interner::default(),
            annotations: Vec::new(),
        })
    }

    /// Declares a track, on this sequence.
    pub(crate) fn describe(
        &mut self,
        chunk: &mut Chunk,
        out: &mut dyn Write,
        track: &TrackDescriptor<'_>,
    ) -> io::Result<()> {
        let entry = chunk.open_packet();
        let buf = &mut chunk.packets;
        wire::put_uint(buf, packet::SEQUENCE_ID, u64::from(self.id));
        let descriptor = wire::open(buf, packet::TRACK_DESCRIPTOR);
        wire::put_uint(buf, track::UUID, track.uuid);
        if let Some(name) = track.name {
            wire::put_str(buf, track::NAME, name);
        }
        if let Some((pid, name)) = track.process {
            let process = wire::open(buf, track::PROCESS);
            wire::put_int(buf, track::PROCESS_PID, i64::from(pid));
            wire::put_str(buf, track::PROCESS_NAME, name);
            wire::close(buf, process);
        }
        if let Some((pid, tid, name)) = track.thread {
            let thread = wire::open(buf, track::THREAD);
            wire::put_int(buf, track::THREAD_PID, i64::from(pid));
            wire::put_uint(buf, track::THREAD_TID, tid);
            wire::put_str(buf, track::THREAD_NAME, name);
            wire::close(buf, thread);
        }
        if let Some(parent) = track.parent {
            wire::put_uint(buf, track::PARENT_UUID, parent);
        }
        if let Some(counter) = track.counter {
            let c = wire::open(buf, track::COUNTER);
            if let Some(builtin) = counter.builtin {
                wire::put_int(buf, track::COUNTER_TYPE, builtin);
            }
            if let Some(unit) = counter.unit {
                wire::put_int(buf, track::COUNTER_UNIT, unit);
            }
            if let Some(unit_name) = counter.unit_name {
                wire::put_str(buf, track::COUNTER_UNIT_NAME, unit_name);
            }
            wire::close(buf, c);
        }
        if track.explicit_child_order {
            wire::put_int(buf, track::CHILD_ORDERING, track::CHILD_ORDERING_EXPLICIT);
        }
        if let Some(rank) = track.sibling_order_rank {
            wire::put_int(buf, track::SIBLING_ORDER_RANK, i64::from(rank));
        }
        if track.never_merged {
            wire::put_int(buf, track::SIBLING_MERGE_BEHAVIOR, track::SIBLING_MERGE_BEHAVIOR_NONE);
        }
        wire::close(buf, descriptor);
        chunk.close_packet(entry, out)
    }

    /// Writes one track event, with the strings it uses interned on this
    /// sequence: the packet that uses a string first gives it
    /// (`interned_data`). Fields go in field-number order, as protobuf
    /// libraries write them.
    pub(crate) fn event(
        &mut self,
        chunk: &mut Chunk,
        out: &mut dyn Write,
        e: &TrackEvent<'_>,
    ) -> io::Result<()> {
        let intern = |interner: &mut Interner, s: &str| match e.static_text {
            true => interner.intern_static(s),
            false => interner.intern(s),
        };
        let name = e.name.map(|s| intern(&mut self.event_names, s));
        let category = e.category.map(|s| intern(&mut self.categories, s));
        self.annotations.clear();
        for field in e.fields.iter().chain(e.extra) {
            self.annotations.push(intern(&mut self.annotation_names, field.name));
        }
        let new_strings = name.is_some_and(|(_, new)| new)
            || category.is_some_and(|(_, new)| new)
            || self.annotations.iter().any(|&(_, new)| new);
        let (timestamp, clock_id) = self.clock.stamp(e.ts);

        let entry = chunk.open_packet();
        let buf = &mut chunk.packets;
        wire::put_uint(buf, packet::TIMESTAMP, timestamp);
        wire::put_uint(buf, packet::SEQUENCE_ID, u64::from(self.id));
        let track_event = wire::open(buf, packet::TRACK_EVENT);
        if let Some((iid, _)) = category {
            wire::put_uint(buf, event::CATEGORY_IIDS, iid);
        }
        for (field, &(iid, _)) in e.fields.iter().chain(e.extra).zip(&self.annotations) {
            let a = wire::open(buf, event::DEBUG_ANNOTATIONS);
            wire::put_uint(buf, annotation::NAME_IID, iid);
            match field.value {
                Value::Bool(v) => wire::put_bool(buf, annotation::BOOL, v),
                Value::U64(v) => wire::put_uint(buf, annotation::UINT, v),
                Value::I64(v) => wire::put_int(buf, annotation::INT, v),
                Value::F64(v) => wire::put_double(buf, annotation::DOUBLE, v),
                Value::Str(s) => wire::put_str(buf, annotation::STRING, s),
            }
            wire::close(buf, a);
        }
        wire::put_int(buf, event::TYPE, e.kind);
        if let Some((iid, _)) = name {
            wire::put_uint(buf, event::NAME_IID, iid);
        }
        if let Some(uuid) = e.track {
            wire::put_uint(buf, event::TRACK_UUID, uuid);
        }
        if let Some((_, value)) = e.extra_counter {
            wire::put_int(buf, event::EXTRA_COUNTER_VALUES, value);
        }
        if let Some((text, cut)) = e.full_name {
            let ellipsis = if cut { ELLIPSIS } else { "" };
            wire::put_key(buf, event::NAME, wire::WireType::Len);
            wire::put_varint(buf, (text.len() + ellipsis.len()) as u64);
            buf.extend_from_slice(text.as_bytes());
            buf.extend_from_slice(ellipsis.as_bytes());
        }
        if let Some(value) = e.counter {
            wire::put_int(buf, event::COUNTER_VALUE, value);
        }
        if let Some((uuid, _)) = e.extra_counter {
            wire::put_uint(buf, event::EXTRA_COUNTER_TRACK_UUIDS, uuid);
        }
        if let Some(value) = e.double_counter {
            wire::put_double(buf, event::DOUBLE_COUNTER_VALUE, value);
        }
        for &id in e.flow_ids {
            wire::put_fixed64(buf, event::FLOW_IDS, id);
        }
        for &id in e.terminating_flow_ids {
            wire::put_fixed64(buf, event::TERMINATING_FLOW_IDS, id);
        }
        wire::close(buf, track_event);
        if new_strings {
            let data = wire::open(buf, packet::INTERNED_DATA);
            if let (Some((iid, true)), Some(s)) = (category, e.category) {
                put_interned(buf, interned::EVENT_CATEGORIES, iid, s);
            }
            if let (Some((iid, true)), Some(s)) = (name, e.name) {
                put_interned(buf, interned::EVENT_NAMES, iid, s);
            }
            for (field, &(iid, new)) in e.fields.iter().chain(e.extra).zip(&self.annotations) {
                if new {
                    put_interned(buf, interned::DEBUG_ANNOTATION_NAMES, iid, field.name);
                }
            }
            wire::close(buf, data);
        }
        wire::put_uint(buf, packet::SEQUENCE_FLAGS, packet::SEQ_NEEDS_INCREMENTAL_STATE);
        if let Some(id) = clock_id {
            wire::put_uint(buf, packet::TIMESTAMP_CLOCK_ID, u64::from(id));
        }
        chunk.close_packet(entry, out)
    }
}

/// One entry of `InternedData`: an iid and its string.
fn put_interned(buf: &mut Vec<u8>, field: u32, iid: u64, name: &str) {
    let entry = wire::open(buf, field);
    wire::put_uint(buf, interned::IID, iid);
    wire::put_str(buf, interned::NAME, name);
    wire::close(buf, entry);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use prost::Message;
    use trace_core::Field;

    use super::*;
    use crate::format::clock::{INCREMENTAL, MONOTONIC};
    use crate::format::event::{TYPE_INSTANT, TYPE_SLICE_BEGIN};
    use crate::proto;

    fn decode(bytes: &[u8]) -> Vec<proto::TracePacket> {
        match proto::Trace::decode(bytes) {
            Ok(trace) => trace.packet,
            Err(e) => panic!("our own bytes do not decode: {e}"),
        }
    }

    /// A sequence started on a fresh chunk, and the chunk, its first packet dropped.
    fn started(id: u32, timestamps: Timestamps, base_ns: u64) -> (Sequence, Chunk) {
        let mut chunk = Chunk::new(false);
        let seq = Sequence::start(&mut chunk, &mut Vec::new(), id, timestamps, None, base_ns).unwrap();
        chunk.packets.clear();
        (seq, chunk)
    }

    /// The packets `write` puts in `chunk`, flushed to bytes.
    fn written(chunk: &mut Chunk, write: impl FnOnce(&mut Chunk, &mut Vec<u8>)) -> Vec<u8> {
        let mut out = Vec::new();
        write(chunk, &mut out);
        chunk.flush(&mut out).unwrap();
        out
    }

    #[test]
    fn a_string_is_interned_in_the_first_packet_that_uses_it_and_only_there() {
        let (mut seq, mut chunk) = started(7, Timestamps::Incremental, 1_000);
        let fields = [Field { name: "n", value: Value::U64(3) }];
        let bytes = written(&mut chunk, |chunk, out| {
            for ts in [1_500, 2_000] {
                let begin = TrackEvent {
                    ts,
                    kind: TYPE_SLICE_BEGIN,
                    name: Some("compile"),
                    category: Some("cabin::build"),
                    fields: &fields,
                    ..TrackEvent::default()
                };
                seq.event(chunk, out, &begin).unwrap();
            }
        });
        let packets = decode(&bytes);
        let first = packets[0].interned_data.clone().unwrap_or_default();
        let named = |name: &str| vec![proto::InternedName { iid: Some(1), name: Some(name.into()) }];
        assert_eq!(first.event_names, named("compile"));
        assert_eq!(first.event_categories, named("cabin::build"));
        assert_eq!(first.debug_annotation_names, named("n"));
        assert_eq!(packets[1].interned_data, None);
        assert_eq!((packets[0].timestamp, packets[1].timestamp), (Some(500), Some(500)));
        let event = packets[1].track_event.clone().unwrap_or_default();
        assert_eq!((event.name_iid, event.category_iids.as_slice()), (Some(1), &[1][..]));
        assert_eq!(event.debug_annotations[0].uint_value, Some(3));
    }

    #[test]
    fn an_event_earlier_than_the_last_is_written_on_the_monotonic_clock() {
        let (mut seq, mut chunk) = started(7, Timestamps::Incremental, 1_000);
        let bytes = written(&mut chunk, |chunk, out| {
            for ts in [5_000, 4_000, 6_000] {
                seq.event(chunk, out, &TrackEvent { ts, kind: TYPE_SLICE_BEGIN, ..TrackEvent::default() })
                    .unwrap();
            }
        });
        let stamps: Vec<_> = decode(&bytes).iter().map(|p| (p.timestamp, p.timestamp_clock_id)).collect();
        assert_eq!(stamps, [(Some(4_000), None), (Some(4_000), Some(MONOTONIC)), (Some(1_000), None)]);
    }

    #[test]
    fn the_first_packet_clears_the_sequence_and_binds_its_clock_to_monotonic() {
        let mut chunk = Chunk::new(false);
        let bytes = written(&mut chunk, |chunk, out| {
            Sequence::start(chunk, out, 7, Timestamps::Incremental, Some(99), 1_000).unwrap();
        });
        let first = &decode(&bytes)[0];
        assert_eq!(first.sequence_flags, Some(1), "SEQ_INCREMENTAL_STATE_CLEARED");
        assert_eq!((first.trusted_packet_sequence_id, first.first_packet_on_sequence), (Some(7), Some(true)));
        let defaults = first.trace_packet_defaults.clone().unwrap_or_default();
        assert_eq!(defaults.timestamp_clock_id, Some(INCREMENTAL));
        assert_eq!(defaults.track_event_defaults.and_then(|d| d.track_uuid), Some(99));
        let clocks = first.clock_snapshot.clone().unwrap_or_default().clocks;
        let clock = |id| clocks.iter().find(|c| c.clock_id == Some(id)).cloned().unwrap_or_default();
        assert_eq!(
            (clock(INCREMENTAL).is_incremental, clock(INCREMENTAL).timestamp),
            (Some(true), Some(1_000))
        );
        assert_eq!(clock(MONOTONIC).timestamp, Some(1_000));
    }

    #[test]
    fn every_repeated_scalar_of_a_track_event_is_written_unpacked() {
        let (mut seq, mut chunk) = started(7, Timestamps::Incremental, 0);
        let event = TrackEvent {
            ts: 1,
            kind: TYPE_INSTANT,
            category: Some("c"),
            extra_counter: Some((5, -1)),
            flow_ids: &[11, 12],
            terminating_flow_ids: &[13, 14],
            ..TrackEvent::default()
        };
        let bytes = written(&mut chunk, |chunk, out| seq.event(chunk, out, &event).unwrap());
        // Trace.packet, then TracePacket.track_event.
        let field = |bytes, number| {
            wire::Fields::new(bytes).map(Result::unwrap).find(|(f, _)| *f == number).map(|(_, v)| v)
        };
        let Some(wire::Value::Bytes(packet)) = field(&bytes, 1) else { panic!("no packet") };
        let Some(wire::Value::Bytes(event)) = field(packet, packet::TRACK_EVENT) else { panic!("no event") };
        let mut seen = Vec::new();
        for (number, value) in wire::Fields::new(event).map(Result::unwrap) {
            let wire = match value {
                wire::Value::Varint(_) => 0,
                wire::Value::Fixed64(_) => 1,
                wire::Value::Bytes(_) => 2,
                wire::Value::Fixed32(_) => 5,
            };
            seen.push((number, wire));
        }
        let expected = [(3, 0), (9, 0), (12, 0), (31, 0), (47, 1), (47, 1), (48, 1), (48, 1)];
        assert_eq!(seen, expected, "one key per value; a packed run would be wire type 2");
    }

    #[test]
    fn events_of_static_text_are_the_bytes_of_the_same_events_looked_up_by_text() {
        static NAMES: [&str; 6] = ["compile", "link", "unit", "bytes", "compile_unit", "cabin::build"];
        let [(mut by_address, mut a), (mut by_text, mut b)] =
            [0, 1].map(|_| started(3, Timestamps::Incremental, 0));
        for round in 0..200u64 {
            let i = (round * 7 % 5) as usize;
            let fields = [
                Field { name: NAMES[(i + 2) % 6], value: Value::U64(round) },
                Field { name: &NAMES[(i + 3) % 6][..(round % 4) as usize], value: Value::Bool(true) },
            ];
            let event = |static_text| TrackEvent {
                ts: round * 10,
                kind: TYPE_SLICE_BEGIN,
                name: Some(NAMES[i]),
                category: Some(&NAMES[(i + 1) % 6][..(round % 3) as usize + 1]),
                fields: &fields,
                static_text,
                ..TrackEvent::default()
            };
            let ours = written(&mut a, |chunk, out| by_address.event(chunk, out, &event(true)).unwrap());
            let theirs = written(&mut b, |chunk, out| by_text.event(chunk, out, &event(false)).unwrap());
            assert_eq!(ours, theirs, "round {round}");
        }
    }

    /// The oracle: the same packet built as a prost message, with interning
    /// tables of its own, encoded by prost as one `Trace.packet` entry.
    #[derive(Default)]
    struct Oracle {
        names: Vec<String>,
        categories: Vec<String>,
        annotation_names: Vec<String>,
    }

    fn intern(table: &mut Vec<String>, s: &str, new: &mut Vec<proto::InternedName>) -> u64 {
        if let Some(at) = table.iter().position(|t| t == s) {
            return at as u64 + 1;
        }
        table.push(s.to_string());
        let iid = table.len() as u64;
        new.push(proto::InternedName { iid: Some(iid), name: Some(s.to_string()) });
        iid
    }

    impl Oracle {
        fn event(
            &mut self,
            id: u32,
            (timestamp, clock_id): (u64, Option<u32>),
            e: &TrackEvent<'_>,
        ) -> Vec<u8> {
            let mut interned = proto::InternedData::default();
            let category_iids: Vec<u64> = e
                .category
                .map(|s| intern(&mut self.categories, s, &mut interned.event_categories))
                .into_iter()
                .collect();
            let name_iid = e.name.map(|s| intern(&mut self.names, s, &mut interned.event_names));
            let mut debug_annotations = Vec::new();
            for field in e.fields.iter().chain(e.extra) {
                let iid =
                    intern(&mut self.annotation_names, field.name, &mut interned.debug_annotation_names);
                let mut a = proto::DebugAnnotation { name_iid: Some(iid), ..Default::default() };
                match field.value {
                    Value::I64(v) => a.int_value = Some(v),
                    Value::U64(v) => a.uint_value = Some(v),
                    Value::F64(v) => a.double_value = Some(v),
                    Value::Bool(v) => a.bool_value = Some(v),
                    Value::Str(s) => a.string_value = Some(s.to_string()),
                }
                debug_annotations.push(a);
            }
            let packet = proto::TracePacket {
                timestamp: Some(timestamp),
                timestamp_clock_id: clock_id,
                trusted_packet_sequence_id: Some(id),
                sequence_flags: Some(2),
                interned_data: (!interned.is_empty()).then_some(interned),
                track_event: Some(proto::TrackEvent {
                    r#type: Some(e.kind as i32),
                    track_uuid: e.track,
                    name_iid,
                    category_iids,
                    debug_annotations,
                    name: e.full_name.map(|(s, cut)| if cut { format!("{s}…") } else { s.to_string() }),
                    counter_value: e.counter,
                    double_counter_value: e.double_counter,
                    extra_counter_track_uuids: e.extra_counter.map(|(t, _)| t).into_iter().collect(),
                    extra_counter_values: e.extra_counter.map(|(_, v)| v).into_iter().collect(),
                    flow_ids: e.flow_ids.to_vec(),
                    terminating_flow_ids: e.terminating_flow_ids.to_vec(),
                    ..Default::default()
                }),
                ..Default::default()
            };
            proto::Trace { packet: vec![packet] }.encode_to_vec()
        }
    }

    #[test]
    fn track_descriptors_are_byte_for_byte_what_prost_writes() {
        let counter = CounterDescriptor { builtin: Some(1), unit: Some(3), unit_name: Some("%") };
        let cases = [
            TrackDescriptor { uuid: 1, process: Some((4321, "build")), ..Default::default() },
            TrackDescriptor {
                uuid: u64::MAX,
                parent: Some(1),
                thread: Some((-1, 1 << 40, "main")),
                ..Default::default()
            },
            TrackDescriptor { uuid: 3, parent: Some(1), counter: Some(counter), ..Default::default() },
            TrackDescriptor {
                uuid: 4,
                parent: Some(1),
                name: Some("ninja"),
                explicit_child_order: true,
                sibling_order_rank: Some(-3),
                never_merged: true,
                ..Default::default()
            },
        ];
        for track in cases {
            let (mut seq, mut chunk) = started(0x0fff_ffff, Timestamps::Absolute, 0);
            let ours = written(&mut chunk, |chunk, out| seq.describe(chunk, out, &track).unwrap());
            let descriptor = proto::TrackDescriptor {
                uuid: Some(track.uuid),
                name: track.name.map(String::from),
                process: track.process.map(|(pid, name)| proto::ProcessDescriptor {
                    pid: Some(pid),
                    process_name: Some(name.into()),
                }),
                thread: track.thread.map(|(pid, tid, name)| proto::ThreadDescriptor {
                    pid: Some(pid),
                    tid: Some(tid as i64),
                    thread_name: Some(name.into()),
                }),
                parent_uuid: track.parent,
                counter: track.counter.map(|c| proto::CounterDescriptor {
                    r#type: c.builtin.map(|v| v as i32),
                    unit: c.unit.map(|v| v as i32),
                    is_incremental: None,
                    unit_name: c.unit_name.map(String::from),
                }),
                child_ordering: track.explicit_child_order.then_some(3),
                sibling_order_rank: track.sibling_order_rank,
                sibling_merge_behavior: track.never_merged.then_some(2),
            };
            let packet = proto::TracePacket {
                trusted_packet_sequence_id: Some(0x0fff_ffff),
                track_descriptor: Some(descriptor),
                ..Default::default()
            };
            assert_eq!(ours, proto::Trace { packet: vec![packet] }.encode_to_vec(), "{track:?}");
        }
    }

    /// A field value, owned.
    #[derive(Clone, Debug)]
    enum Owned {
        I64(i64),
        U64(u64),
        F64(f64),
        Bool(bool),
        Str(String),
    }

    impl Owned {
        fn value(&self) -> Value<'_> {
            match self {
                Owned::I64(v) => Value::I64(*v),
                Owned::U64(v) => Value::U64(*v),
                Owned::F64(v) => Value::F64(*v),
                Owned::Bool(v) => Value::Bool(*v),
                Owned::Str(s) => Value::Str(s),
            }
        }
    }

    /// One event to write, owned: its step from the time before, and its parts.
    #[derive(Clone, Debug)]
    struct Ev {
        step: i64,
        kind: i64,
        track: Option<u64>,
        name: Option<String>,
        category: Option<String>,
        fields: Vec<(String, Owned)>,
        extra: Vec<(String, Owned)>,
        full_name: Option<(String, bool)>,
        counter: Option<i64>,
        double_counter: Option<f64>,
        extra_counter: Option<(u64, i64)>,
        flows: (Vec<u64>, Vec<u64>),
    }

    /// Names and texts: a few that recur (interned once, then reused),
    /// fresh short ones, long ones whose lengths take two varint bytes (and so
    /// do the lengths of every message around them), and now and then one of
    /// three.
    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            6 => prop::sample::select(vec!["a", "b", "message", "compile", "cabin::build", ""]).prop_map(String::from),
            3 => "[a-z_:]{1,12}",
            2 => ".{60,200}",
            1 => (16_380usize..16_400).prop_map(|n| "x".repeat(n)),
        ]
    }

    fn value() -> impl Strategy<Value = Owned> {
        prop_oneof![
            any::<i64>().prop_map(Owned::I64),
            (-300..300i64).prop_map(Owned::I64),
            any::<u64>().prop_map(Owned::U64),
            (0..20_000u64).prop_map(Owned::U64),
            any::<f64>().prop_map(Owned::F64),
            any::<bool>().prop_map(Owned::Bool),
            text().prop_map(Owned::Str),
        ]
    }

    fn event() -> impl Strategy<Value = Ev> {
        let names =
            (prop::option::of(text()), prop::option::of(text()), prop::option::of((text(), any::<bool>())));
        let fields =
            (prop::collection::vec((text(), value()), 0..6), prop::collection::vec((text(), value()), 0..2));
        let numbers = (
            prop_oneof![4 => 0..5_000i64, 1 => any::<i64>()],
            prop_oneof![4 => 1..=4i64, 1 => any::<i32>().prop_map(i64::from)],
            prop::option::of(any::<u64>()),
            prop::option::of(prop_oneof![any::<i64>(), 0..300i64]),
            prop::option::of((any::<u64>(), prop_oneof![any::<i64>(), 0..1_000_000_000i64])),
            prop::option::of(any::<f64>().prop_filter("NaN is not equal to itself", |x| !x.is_nan())),
        );
        let flows = (prop::collection::vec(any::<u64>(), 0..3), prop::collection::vec(any::<u64>(), 0..3));
        (names, fields, numbers, flows).prop_map(
            |(
                (name, category, full_name),
                (fields, extra),
                (step, kind, track, counter, extra_counter, double_counter),
                flows,
            )| Ev {
                step,
                kind,
                track,
                name,
                category,
                fields,
                extra,
                full_name,
                counter,
                double_counter,
                extra_counter,
                flows,
            },
        )
    }

    fn fields(owned: &[(String, Owned)]) -> Vec<Field<'_>> {
        owned.iter().map(|(name, v)| Field { name, value: v.value() }).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn track_events_are_byte_for_byte_what_prost_writes(
            id in any::<u32>(),
            incremental in any::<bool>(),
            base in prop_oneof![0..1_000_000u64, any::<u64>()],
            events in prop::collection::vec(event(), 1..30),
        ) {
            let timestamps = if incremental { Timestamps::Incremental } else { Timestamps::Absolute };
            let (mut seq, mut chunk) = started(id, timestamps, base);
            let mut oracle = Oracle::default();
            let mut oracle_clock = SequenceClock::new(timestamps, base);
            let mut ts = base;
            for (i, ev) in events.iter().enumerate() {
                // Mostly later; now and then earlier (not on the incremental clock).
                ts = ts.saturating_add_signed(ev.step);
                let (f, x) = (fields(&ev.fields), fields(&ev.extra));
                let event = TrackEvent {
                    ts,
                    kind: ev.kind,
                    track: ev.track,
                    name: ev.name.as_deref(),
                    category: ev.category.as_deref(),
                    fields: &f,
                    extra: &x,
                    full_name: ev.full_name.as_ref().map(|(s, cut)| (s.as_str(), *cut)),
                    counter: ev.counter,
                    double_counter: ev.double_counter,
                    extra_counter: ev.extra_counter,
                    flow_ids: &ev.flows.0,
                    terminating_flow_ids: &ev.flows.1,
                    // Owned strings: looked up by their text.
                    static_text: false,
                };
                let ours = written(&mut chunk, |chunk, out| seq.event(chunk, out, &event).unwrap());
                let expected = oracle.event(id, oracle_clock.stamp(ts), &event);
                prop_assert!(ours == expected, "event {i}: ours {:02x?}\nprost {:02x?}", ours, expected);
            }
        }
    }
}
