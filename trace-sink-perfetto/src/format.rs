//! The constants of the Perfetto trace format this sink writes, in one place:
//! field numbers, by message, and the values of the enums it uses.
//!
//! Values are those of `protos/perfetto/trace/perfetto_trace.proto` (proto2);
//! each name says which message or enum it comes from. The wire format itself
//! (varints, keys, nested lengths) is `trace_proto_wire`'s.

/// `perfetto.protos.Trace`: the file, a run of `packet` entries.
pub(crate) mod trace {
    /// `Trace.packet`, repeated `TracePacket`.
    pub(crate) const PACKET: u32 = 1;
}

/// `perfetto.protos.TracePacket`.
pub(crate) mod packet {
    /// `clock_snapshot`, a `ClockSnapshot`.
    pub(crate) const CLOCK_SNAPSHOT: u32 = 6;
    /// `timestamp`, uint64, on the packet's clock.
    pub(crate) const TIMESTAMP: u32 = 8;
    /// `trusted_packet_sequence_id`, uint32: the sequence the packet belongs to.
    pub(crate) const SEQUENCE_ID: u32 = 10;
    /// `track_event`, a `TrackEvent`.
    pub(crate) const TRACK_EVENT: u32 = 11;
    /// `interned_data`, an `InternedData`.
    pub(crate) const INTERNED_DATA: u32 = 12;
    /// `sequence_flags`, uint32 (`SequenceFlags`).
    pub(crate) const SEQUENCE_FLAGS: u32 = 13;
    /// `compressed_packets`, bytes: a zlib stream of `Trace.packet` entries,
    /// which the trace processor inflates and reads in the packet's place.
    pub(crate) const COMPRESSED_PACKETS: u32 = 50;
    /// `timestamp_clock_id`, uint32: the clock of `timestamp` when it is not
    /// the sequence's default.
    pub(crate) const TIMESTAMP_CLOCK_ID: u32 = 58;
    /// `trace_packet_defaults`, a `TracePacketDefaults`.
    pub(crate) const DEFAULTS: u32 = 59;
    /// `track_descriptor`, a `TrackDescriptor`.
    pub(crate) const TRACK_DESCRIPTOR: u32 = 60;
    /// `first_packet_on_sequence`, bool.
    pub(crate) const FIRST_PACKET_ON_SEQUENCE: u32 = 87;

    /// `SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED`.
    pub(crate) const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
    /// `SequenceFlags.SEQ_NEEDS_INCREMENTAL_STATE`.
    pub(crate) const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
}

/// `perfetto.protos.TracePacketDefaults` and `TrackEventDefaults`.
pub(crate) mod defaults {
    /// `TracePacketDefaults.track_event_defaults`, a `TrackEventDefaults`.
    pub(crate) const TRACK_EVENT_DEFAULTS: u32 = 11;
    /// `TracePacketDefaults.timestamp_clock_id`, uint32.
    pub(crate) const TIMESTAMP_CLOCK_ID: u32 = 58;
    /// `TrackEventDefaults.track_uuid`, uint64.
    pub(crate) const TRACK_UUID: u32 = 11;
}

/// `perfetto.protos.ClockSnapshot` and `ClockSnapshot.Clock`, and the
/// `BuiltinClock` ids.
pub(crate) mod clock {
    /// `ClockSnapshot.clocks`, repeated `Clock`.
    pub(crate) const CLOCKS: u32 = 1;
    /// `Clock.clock_id`, uint32.
    pub(crate) const ID: u32 = 1;
    /// `Clock.timestamp`, uint64.
    pub(crate) const TIMESTAMP: u32 = 2;
    /// `Clock.is_incremental`, bool.
    pub(crate) const IS_INCREMENTAL: u32 = 3;
    /// `Clock.unit_multiplier_ns`, uint64.
    pub(crate) const UNIT_MULTIPLIER_NS: u32 = 4;

    /// `BuiltinClock.BUILTIN_CLOCK_MONOTONIC`: the clock of every timestamp
    /// the capture hands the sink (Rust's `Instant`).
    pub(crate) const MONOTONIC: u32 = 3;
    /// `BuiltinClock.BUILTIN_CLOCK_BOOTTIME`: the trace processor's default
    /// trace clock, given in each snapshot so that it can place MONOTONIC on it.
    pub(crate) const BOOTTIME: u32 = 6;
    /// A sequence-scoped clock id (64-127 are reserved for them): each
    /// thread's sequence writes its timestamps as deltas on its own clock.
    pub(crate) const INCREMENTAL: u32 = 64;
}

/// `perfetto.protos.TrackDescriptor` and the descriptors it holds.
pub(crate) mod track {
    /// `TrackDescriptor.uuid`, uint64.
    pub(crate) const UUID: u32 = 1;
    /// `TrackDescriptor.name`, string.
    pub(crate) const NAME: u32 = 2;
    /// `TrackDescriptor.process`, a `ProcessDescriptor`.
    pub(crate) const PROCESS: u32 = 3;
    /// `TrackDescriptor.thread`, a `ThreadDescriptor`.
    pub(crate) const THREAD: u32 = 4;
    /// `TrackDescriptor.parent_uuid`, uint64.
    pub(crate) const PARENT_UUID: u32 = 5;
    /// `TrackDescriptor.counter`, a `CounterDescriptor`: a counter track.
    pub(crate) const COUNTER: u32 = 8;
    /// `TrackDescriptor.child_ordering`, `ChildTracksOrdering`.
    pub(crate) const CHILD_ORDERING: u32 = 11;
    /// `TrackDescriptor.sibling_order_rank`, int32.
    pub(crate) const SIBLING_ORDER_RANK: u32 = 12;
    /// `TrackDescriptor.sibling_merge_behavior`, `SiblingMergeBehavior`.
    pub(crate) const SIBLING_MERGE_BEHAVIOR: u32 = 15;
    /// `SiblingMergeBehavior.SIBLING_MERGE_BEHAVIOR_NONE`: the track is never
    /// merged with a sibling of the same name.
    pub(crate) const SIBLING_MERGE_BEHAVIOR_NONE: i64 = 2;

    /// `ChildTracksOrdering.EXPLICIT`: children sort by `sibling_order_rank`,
    /// so that sub-lane 10 comes after sub-lane 9.
    pub(crate) const CHILD_ORDERING_EXPLICIT: i64 = 3;

    /// `ProcessDescriptor.pid`, int32.
    pub(crate) const PROCESS_PID: u32 = 1;
    /// `ProcessDescriptor.process_name`, string.
    pub(crate) const PROCESS_NAME: u32 = 6;

    /// `ThreadDescriptor.pid`, int32.
    pub(crate) const THREAD_PID: u32 = 1;
    /// `ThreadDescriptor.tid`, int32 in the schema (written as a varint either way).
    pub(crate) const THREAD_TID: u32 = 2;
    /// `ThreadDescriptor.thread_name`, string.
    pub(crate) const THREAD_NAME: u32 = 5;

    /// `CounterDescriptor.type`, `BuiltinCounterType`.
    pub(crate) const COUNTER_TYPE: u32 = 1;
    /// `CounterDescriptor.unit`, `Unit`.
    pub(crate) const COUNTER_UNIT: u32 = 3;
    /// `CounterDescriptor.unit_name`, string: a unit the enum lacks (`%`).
    pub(crate) const COUNTER_UNIT_NAME: u32 = 6;

    /// `BuiltinCounterType.COUNTER_THREAD_TIME_NS`: the thread's CPU time.
    /// A track of this type *with no name of its own* is the one the trace
    /// processor reads a slice's thread timestamp and duration from (it names
    /// it `thread_time` itself, and matches that name).
    pub(crate) const COUNTER_THREAD_TIME_NS: i64 = 1;
    /// `Unit.UNIT_TIME_NS`: nanoseconds (thread CPU time).
    pub(crate) const UNIT_TIME_NS: i64 = 1;
    /// `Unit.UNIT_COUNT`: a count of things (dropped records).
    pub(crate) const UNIT_COUNT: i64 = 2;
    /// `Unit.UNIT_SIZE_BYTES`: bytes (resident memory).
    pub(crate) const UNIT_SIZE_BYTES: i64 = 3;
}

/// `perfetto.protos.TrackEvent`.
///
/// Its repeated scalar fields (`category_iids`, `extra_counter_values`,
/// `extra_counter_track_uuids`, `flow_ids`, `terminating_flow_ids`) are
/// unpacked in the schema, and Perfetto's decoder reads them one key per
/// value: each value is written as a field of its own, never as a packed run.
pub(crate) mod event {
    /// `category_iids`, repeated uint64 (unpacked).
    pub(crate) const CATEGORY_IIDS: u32 = 3;
    /// `debug_annotations`, repeated `DebugAnnotation`.
    pub(crate) const DEBUG_ANNOTATIONS: u32 = 4;
    /// `type`, `TrackEvent.Type`.
    pub(crate) const TYPE: u32 = 9;
    /// `name_iid`, uint64.
    pub(crate) const NAME_IID: u32 = 10;
    /// `track_uuid`, uint64: the track, when not the sequence's default one.
    pub(crate) const TRACK_UUID: u32 = 11;
    /// `extra_counter_values`, repeated int64 (unpacked).
    pub(crate) const EXTRA_COUNTER_VALUES: u32 = 12;
    /// `name`, string: a name given in full rather than interned.
    pub(crate) const NAME: u32 = 23;
    /// `counter_value`, int64.
    pub(crate) const COUNTER_VALUE: u32 = 30;
    /// `extra_counter_track_uuids`, repeated uint64 (unpacked).
    pub(crate) const EXTRA_COUNTER_TRACK_UUIDS: u32 = 31;
    /// `double_counter_value`, double: a counter's value that is not whole.
    pub(crate) const DOUBLE_COUNTER_VALUE: u32 = 44;
    /// `flow_ids`, repeated fixed64 (unpacked).
    pub(crate) const FLOW_IDS: u32 = 47;
    /// `terminating_flow_ids`, repeated fixed64 (unpacked).
    pub(crate) const TERMINATING_FLOW_IDS: u32 = 48;

    /// `Type.TYPE_SLICE_BEGIN`.
    pub(crate) const TYPE_SLICE_BEGIN: i64 = 1;
    /// `Type.TYPE_SLICE_END`: closes the innermost open slice of its track.
    pub(crate) const TYPE_SLICE_END: i64 = 2;
    /// `Type.TYPE_INSTANT`.
    pub(crate) const TYPE_INSTANT: i64 = 3;
    /// `Type.TYPE_COUNTER`: a value of the counter track the event is on.
    pub(crate) const TYPE_COUNTER: i64 = 4;
}

/// `perfetto.protos.DebugAnnotation`: one named value of an event.
pub(crate) mod annotation {
    /// `name_iid`, uint64.
    pub(crate) const NAME_IID: u32 = 1;
    /// `bool_value`.
    pub(crate) const BOOL: u32 = 2;
    /// `uint_value`, uint64.
    pub(crate) const UINT: u32 = 3;
    /// `int_value`, int64.
    pub(crate) const INT: u32 = 4;
    /// `double_value`.
    pub(crate) const DOUBLE: u32 = 5;
    /// `string_value`.
    pub(crate) const STRING: u32 = 6;
}

/// `perfetto.protos.InternedData`, and the `EventCategory`, `EventName` and
/// `DebugAnnotationName` messages it holds (the same two fields each).
pub(crate) mod interned {
    /// `event_categories`, repeated `EventCategory`.
    pub(crate) const EVENT_CATEGORIES: u32 = 1;
    /// `event_names`, repeated `EventName`.
    pub(crate) const EVENT_NAMES: u32 = 2;
    /// `debug_annotation_names`, repeated `DebugAnnotationName`.
    pub(crate) const DEBUG_ANNOTATION_NAMES: u32 = 3;
    /// `iid`, uint64, of each of the three.
    pub(crate) const IID: u32 = 1;
    /// `name`, string, of each of the three.
    pub(crate) const NAME: u32 = 2;
}
