//! The part of Perfetto's trace schema the sink writes, as hand-written prost
//! messages: the tests' oracle (prost's bytes for the same message, byte for
//! byte) and their reader of the sink's own output. Only the tests build it.
//!
//! Field numbers and types follow `protos/perfetto/trace/perfetto_trace.proto`
//! (the schema is proto2). Only the fields the sink uses are declared, with one
//! exception: every repeated scalar field of `TrackEvent` is declared, each
//! with `packed = "false"`. prost packs repeated scalars unless told otherwise,
//! the schema declares these unpacked, and Perfetto's own decoder reads them one
//! varint (or fixed64) per field key: a packed run would be misread, while
//! protoc and the Python classes accept either form and so would not notice.
//!
//! Singular fields are `optional` so that a zero (a track event type of
//! `TYPE_UNSPECIFIED` aside) is written when set, as proto2 does.

// The derive reads every field; fields the sink never sets are kept on purpose.
#![allow(dead_code)]

/// `perfetto.protos.Trace`: the whole file, one `packet` entry per packet.
///
/// The sink never builds one (it writes each packet's entry as it goes); the
/// tests use it to read their own bytes back.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Trace {
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

/// `perfetto.protos.TracePacket`. Of its `data` oneof, at most one of
/// `clock_snapshot`, `track_event` and `track_descriptor` is set.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TracePacket {
    #[prost(message, optional, tag = "6")]
    pub clock_snapshot: Option<ClockSnapshot>,
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    #[prost(bytes = "vec", optional, tag = "50")]
    pub compressed_packets: Option<Vec<u8>>,
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
    #[prost(message, optional, tag = "59")]
    pub trace_packet_defaults: Option<TracePacketDefaults>,
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
    #[prost(bool, optional, tag = "87")]
    pub first_packet_on_sequence: Option<bool>,
}

/// `perfetto.protos.TracePacketDefaults`: applies to the later packets of the
/// sequence that leave the field unset.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TracePacketDefaults {
    #[prost(message, optional, tag = "11")]
    pub track_event_defaults: Option<TrackEventDefaults>,
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
}

/// `perfetto.protos.TrackEventDefaults`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TrackEventDefaults {
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    // Unpacked in the schema, like their namesakes in `TrackEvent`.
    #[prost(uint64, repeated, packed = "false", tag = "31")]
    pub extra_counter_track_uuids: Vec<u64>,
    #[prost(uint64, repeated, packed = "false", tag = "45")]
    pub extra_double_counter_track_uuids: Vec<u64>,
}

/// `perfetto.protos.ClockSnapshot`: readings of several clocks at one instant.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ClockSnapshot {
    #[prost(message, repeated, tag = "1")]
    pub clocks: Vec<Clock>,
}

/// `perfetto.protos.ClockSnapshot.Clock`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Clock {
    #[prost(uint32, optional, tag = "1")]
    pub clock_id: Option<u32>,
    #[prost(uint64, optional, tag = "2")]
    pub timestamp: Option<u64>,
    #[prost(bool, optional, tag = "3")]
    pub is_incremental: Option<bool>,
    #[prost(uint64, optional, tag = "4")]
    pub unit_multiplier_ns: Option<u64>,
}

/// `perfetto.protos.TrackDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TrackDescriptor {
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
    #[prost(message, optional, tag = "8")]
    pub counter: Option<CounterDescriptor>,
    /// `ChildTracksOrdering`.
    #[prost(int32, optional, tag = "11")]
    pub child_ordering: Option<i32>,
    #[prost(int32, optional, tag = "12")]
    pub sibling_order_rank: Option<i32>,
    /// `SiblingMergeBehavior`.
    #[prost(int32, optional, tag = "15")]
    pub sibling_merge_behavior: Option<i32>,
}

/// `perfetto.protos.CounterDescriptor`: makes a track a counter track.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CounterDescriptor {
    /// `CounterDescriptor.BuiltinCounterType`.
    #[prost(int32, optional, tag = "1")]
    pub r#type: Option<i32>,
    /// `CounterDescriptor.Unit`.
    #[prost(int32, optional, tag = "3")]
    pub unit: Option<i32>,
    #[prost(bool, optional, tag = "5")]
    pub is_incremental: Option<bool>,
    /// A unit the enum does not have, e.g. `%`.
    #[prost(string, optional, tag = "6")]
    pub unit_name: Option<String>,
}

/// `perfetto.protos.ProcessDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ProcessDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
}

/// `perfetto.protos.ThreadDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ThreadDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(int64, optional, tag = "2")]
    pub tid: Option<i64>,
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

/// `perfetto.protos.TrackEvent`: the fields the sink sets, and every repeated
/// scalar field of the message, unpacked as the schema has them.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TrackEvent {
    #[prost(uint64, repeated, packed = "false", tag = "3")]
    pub category_iids: Vec<u64>,
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    /// `TrackEvent.Type`.
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    #[prost(uint64, optional, tag = "10")]
    pub name_iid: Option<u64>,
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    #[prost(int64, repeated, packed = "false", tag = "12")]
    pub extra_counter_values: Vec<i64>,
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
    #[prost(int64, optional, tag = "30")]
    pub counter_value: Option<i64>,
    #[prost(double, optional, tag = "44")]
    pub double_counter_value: Option<f64>,
    #[prost(uint64, repeated, packed = "false", tag = "31")]
    pub extra_counter_track_uuids: Vec<u64>,
    /// Deprecated in the schema in favour of `flow_ids`; declared for the rule above.
    #[prost(uint64, repeated, packed = "false", tag = "36")]
    pub flow_ids_old: Vec<u64>,
    /// Deprecated in the schema in favour of `terminating_flow_ids`.
    #[prost(uint64, repeated, packed = "false", tag = "42")]
    pub terminating_flow_ids_old: Vec<u64>,
    #[prost(uint64, repeated, packed = "false", tag = "45")]
    pub extra_double_counter_track_uuids: Vec<u64>,
    #[prost(double, repeated, packed = "false", tag = "46")]
    pub extra_double_counter_values: Vec<f64>,
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
}

/// `perfetto.protos.DebugAnnotation`: one named value shown with an event.
/// Of the `value` oneof, exactly one field is set.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct DebugAnnotation {
    #[prost(uint64, optional, tag = "1")]
    pub name_iid: Option<u64>,
    #[prost(bool, optional, tag = "2")]
    pub bool_value: Option<bool>,
    #[prost(uint64, optional, tag = "3")]
    pub uint_value: Option<u64>,
    #[prost(int64, optional, tag = "4")]
    pub int_value: Option<i64>,
    #[prost(double, optional, tag = "5")]
    pub double_value: Option<f64>,
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
}

/// `perfetto.protos.InternedData`: the strings a packet's iids refer to, given
/// once per sequence in the packet that first uses them.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct InternedData {
    #[prost(message, repeated, tag = "1")]
    pub event_categories: Vec<InternedName>,
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<InternedName>,
    #[prost(message, repeated, tag = "3")]
    pub debug_annotation_names: Vec<InternedName>,
}

impl InternedData {
    pub fn is_empty(&self) -> bool {
        self.event_categories.is_empty()
            && self.event_names.is_empty()
            && self.debug_annotation_names.is_empty()
    }
}

/// `EventCategory`, `EventName` and `DebugAnnotationName` have the same two
/// fields, so one message serves all three.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct InternedName {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}
