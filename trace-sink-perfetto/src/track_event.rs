//! The hand encoder of track events: one event's packet written straight
//! into the chunk, its lengths worked out first so that nothing is built,
//! sized or copied on the way.
//!
//! The bytes are those prost writes for the same `TracePacket` (see
//! `proto.rs`): fields in field-number order, every set field written
//! (proto2), `category_iids` unpacked. The tests in `sequence.rs` hold the two
//! to that, byte for byte.

use trace_core::{Field, Value};

use crate::format::{keys, put_varint, varint_len, Put, Region, PACKET_KEY, SEQ_NEEDS_INCREMENTAL_STATE};

/// One track event to write; what it leaves out defaults to none.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct EventSpec<'a> {
    /// When, in CLOCK_MONOTONIC nanoseconds.
    pub ts: u64,
    /// `TrackEvent.Type`.
    pub kind: i32,
    /// The track, when not the sequence's default one.
    pub track: Option<u64>,
    pub name: Option<&'a str>,
    pub category: Option<&'a str>,
    /// Shown as debug annotations, `fields` then `extra`.
    pub fields: &'a [Field<'a>],
    pub extra: &'a [Field<'a>],
    /// A name written in full (`TrackEvent.name`) rather than interned, and
    /// whether an ellipsis follows it: for names made from a message.
    pub full_name: Option<(&'a str, bool)>,
    /// `TrackEvent.counter_value`, for a counter event.
    pub counter: Option<i64>,
    /// One value of another counter track sampled at this event
    /// (`extra_counter_track_uuids`, `extra_counter_values`): the thread
    /// CPU-time counter on a slice's begin and end.
    pub extra_counter: Option<(u64, i64)>,
    /// `TrackEvent.flow_ids`: the flows that leave this event's slice.
    pub flow_ids: &'a [u64],
    /// `TrackEvent.terminating_flow_ids`: the flows that end at it.
    pub terminating_flow_ids: &'a [u64],
}

impl EventSpec<'_> {
    /// True when the event has nothing but its time and type (a slice's end
    /// on the sequence's own track, most of a trace's events), which
    /// [`put_bare_event`] writes.
    #[inline]
    pub(crate) fn is_bare(&self) -> bool {
        // Every field is named, so that one added later has to be decided here.
        let EventSpec {
            ts: _,
            kind: _,
            track,
            name,
            category,
            fields,
            extra,
            full_name,
            counter,
            extra_counter,
            flow_ids,
            terminating_flow_ids,
        } = self;
        track.is_none()
            && extra_counter.is_none()
            && flow_ids.is_empty()
            && terminating_flow_ids.is_empty()
            && name.is_none()
            && category.is_none()
            && fields.is_empty()
            && extra.is_empty()
            && full_name.is_none()
            && counter.is_none()
    }
}

/// Appends the packet of a bare track event ([`EventSpec::is_bare`]): the
/// bytes [`put_track_event`] writes for it, without the work of the fields it
/// does not have.
#[inline]
pub(crate) fn put_bare_event(
    buf: &mut Vec<u8>,
    sequence_id: u32,
    (timestamp, clock_id): (u64, Option<u32>),
    kind: i32,
) {
    let kind = kind as u64;
    let event_len = 1 + varint_len(kind);
    let packet_len = packet_fields_len(timestamp, sequence_id, clock_id) + nested_len(event_len);
    let mut region = open_packet(buf, packet_len, timestamp, sequence_id, event_len);
    let buf = &mut region;
    put_field(buf, keys::EVENT_TYPE, kind);
    close_packet(buf, clock_id);
    debug_assert!(region.filled(), "the packet's lengths were worked out wrong");
}

/// The bytes of a packet's own fields (timestamp, sequence id, flags, clock),
/// keys included: all of it but its track event and interned data.
#[inline]
fn packet_fields_len(timestamp: u64, sequence_id: u32, clock_id: Option<u32>) -> usize {
    let mut len = 1 + varint_len(timestamp) + 1 + varint_len(u64::from(sequence_id));
    len += 1 + varint_len(u64::from(SEQ_NEEDS_INCREMENTAL_STATE));
    if let Some(clock) = clock_id {
        len += varint_len(keys::PACKET_TIMESTAMP_CLOCK_ID) + varint_len(u64::from(clock));
    }
    len
}

/// Makes room at the end of `buf` for a packet of `packet_len` bytes and
/// writes its key and length, its timestamp and sequence id, and the key and
/// length of its track event (of `event_len` bytes), which comes next.
#[inline]
fn open_packet(
    buf: &mut Vec<u8>,
    packet_len: usize,
    timestamp: u64,
    sequence_id: u32,
    event_len: usize,
) -> Region<'_> {
    let total = 1 + varint_len(packet_len as u64) + packet_len;
    let at = buf.len();
    buf.resize(at + total, 0);
    let mut region = Region::new(&mut buf[at..]);
    region.push(PACKET_KEY);
    put_varint(&mut region, packet_len as u64);
    put_field(&mut region, keys::PACKET_TIMESTAMP, timestamp);
    put_field(&mut region, keys::PACKET_SEQUENCE_ID, u64::from(sequence_id));
    put_field(&mut region, keys::PACKET_TRACK_EVENT, event_len as u64);
    region
}

/// Writes a packet's last fields, after its track event and interned data.
#[inline]
fn close_packet(buf: &mut Region<'_>, clock_id: Option<u32>) {
    put_field(buf, keys::PACKET_SEQUENCE_FLAGS, u64::from(SEQ_NEEDS_INCREMENTAL_STATE));
    if let Some(clock) = clock_id {
        put_field(buf, keys::PACKET_TIMESTAMP_CLOCK_ID, u64::from(clock));
    }
}

/// The bytes of one flow id: its two-byte key and eight bytes of fixed64.
const FLOW_ID_LEN: usize = 2 + 8;

/// What follows a name that was cut.
const ELLIPSIS: &str = "…";

/// The bytes of a full name, its ellipsis included.
#[inline]
fn full_name_len((name, cut): (&str, bool)) -> usize {
    name.len() + if cut { ELLIPSIS.len() } else { 0 }
}

/// An interned string of an event: its iid, whether this event is the first
/// to use it (its packet then gives the string), and the string.
pub(crate) type Interned<'a> = Option<((u64, bool), &'a str)>;

/// Appends the packet of one track event to `buf`.
///
/// `stamp` is the packet's timestamp and clock (see
/// `SequenceClock::stamp`); `name` and `category` the event's interned
/// strings; `annotations` the iid of each annotation's name, for
/// `spec.fields` then `spec.extra`.
pub(crate) fn put_track_event(
    buf: &mut Vec<u8>,
    sequence_id: u32,
    (timestamp, clock_id): (u64, Option<u32>),
    spec: &EventSpec<'_>,
    (name, category): (Interned<'_>, Interned<'_>),
    annotations: &[(u64, bool)],
) {
    let fields = || spec.fields.iter().chain(spec.extra).zip(annotations);
    // An int32 goes on the wire sign-extended to 64 bits, as prost writes it.
    let kind = spec.kind as u64;

    // The lengths, innermost first.
    let mut event_len = 1 + varint_len(kind);
    let mut interned_len = 0;
    if let Some(((iid, new), s)) = category {
        event_len += 1 + varint_len(iid);
        if new {
            interned_len += nested_len(interned_name_len(iid, s));
        }
    }
    if let Some(((iid, new), s)) = name {
        event_len += 1 + varint_len(iid);
        if new {
            interned_len += nested_len(interned_name_len(iid, s));
        }
    }
    if let Some(track) = spec.track {
        event_len += 1 + varint_len(track);
    }
    if let Some(full) = spec.full_name {
        let len = full_name_len(full);
        event_len += varint_len(keys::EVENT_NAME) + varint_len(len as u64) + len;
    }
    if let Some(value) = spec.counter {
        event_len += varint_len(keys::EVENT_COUNTER_VALUE) + varint_len(value as u64);
    }
    if let Some((track, value)) = spec.extra_counter {
        event_len += varint_len(keys::EVENT_EXTRA_COUNTER_VALUES) + varint_len(value as u64);
        event_len += varint_len(keys::EVENT_EXTRA_COUNTER_TRACK_UUIDS) + varint_len(track);
    }
    event_len += (spec.flow_ids.len() + spec.terminating_flow_ids.len()) * FLOW_ID_LEN;
    for (field, &(iid, new)) in fields() {
        event_len += nested_len(annotation_len(iid, field.value));
        if new {
            interned_len += nested_len(interned_name_len(iid, field.name));
        }
    }
    let mut packet_len = packet_fields_len(timestamp, sequence_id, clock_id) + nested_len(event_len);
    if interned_len > 0 {
        packet_len += nested_len(interned_len);
    }

    // The packet, fields in field-number order at each level, written into a
    // region of the chunk sized to the packet.
    let mut region = open_packet(buf, packet_len, timestamp, sequence_id, event_len);
    let buf = &mut region;
    if let Some(((iid, _), _)) = category {
        put_field(buf, keys::EVENT_CATEGORY_IIDS, iid);
    }
    for (field, &(iid, _)) in fields() {
        put_field(buf, keys::EVENT_DEBUG_ANNOTATIONS, annotation_len(iid, field.value) as u64);
        put_annotation(buf, iid, field.value);
    }
    put_field(buf, keys::EVENT_TYPE, kind);
    if let Some(((iid, _), _)) = name {
        put_field(buf, keys::EVENT_NAME_IID, iid);
    }
    if let Some(track) = spec.track {
        put_field(buf, keys::EVENT_TRACK_UUID, track);
    }
    if let Some((_, value)) = spec.extra_counter {
        // Unpacked, one key per value, as the schema declares it.
        put_field(buf, keys::EVENT_EXTRA_COUNTER_VALUES, value as u64);
    }
    if let Some(full @ (name, cut)) = spec.full_name {
        put_field(buf, keys::EVENT_NAME, full_name_len(full) as u64);
        buf.extend_from_slice(name.as_bytes());
        if cut {
            buf.extend_from_slice(ELLIPSIS.as_bytes());
        }
    }
    if let Some(value) = spec.counter {
        // An int64 goes on the wire as its two's complement, as prost writes it.
        put_field(buf, keys::EVENT_COUNTER_VALUE, value as u64);
    }
    if let Some((track, _)) = spec.extra_counter {
        put_field(buf, keys::EVENT_EXTRA_COUNTER_TRACK_UUIDS, track);
    }
    for (key, ids) in
        [(keys::EVENT_FLOW_IDS, spec.flow_ids), (keys::EVENT_TERMINATING_FLOW_IDS, spec.terminating_flow_ids)]
    {
        for id in ids {
            put_varint(buf, key);
            buf.extend_from_slice(&id.to_le_bytes());
        }
    }
    if interned_len > 0 {
        put_field(buf, keys::PACKET_INTERNED_DATA, interned_len as u64);
        if let Some(((iid, true), s)) = category {
            put_interned_name(buf, keys::INTERNED_CATEGORIES, iid, s);
        }
        if let Some(((iid, true), s)) = name {
            put_interned_name(buf, keys::INTERNED_EVENT_NAMES, iid, s);
        }
        for (field, &(iid, new)) in fields() {
            if new {
                put_interned_name(buf, keys::INTERNED_ANNOTATION_NAMES, iid, field.name);
            }
        }
    }
    close_packet(buf, clock_id);
    debug_assert!(region.filled(), "the packet's lengths were worked out wrong");
}

/// The bytes a length-delimited field of a one-byte key takes, for a body of `len`.
#[inline]
fn nested_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// The bytes of a `DebugAnnotation` body: its name's iid and its value.
#[inline]
fn annotation_len(name_iid: u64, value: Value<'_>) -> usize {
    1 + varint_len(name_iid)
        + match value {
            Value::I64(v) => 1 + varint_len(v as u64),
            Value::U64(v) => 1 + varint_len(v),
            Value::F64(_) => 1 + 8,
            Value::Bool(_) => 1 + 1,
            Value::Str(s) => nested_len(s.len()),
        }
}

/// Appends a `DebugAnnotation` body (`annotation_len` bytes).
#[inline]
fn put_annotation(buf: &mut impl Put, name_iid: u64, value: Value<'_>) {
    put_field(buf, keys::ANNOTATION_NAME_IID, name_iid);
    match value {
        Value::I64(v) => put_field(buf, keys::ANNOTATION_INT, v as u64),
        Value::U64(v) => put_field(buf, keys::ANNOTATION_UINT, v),
        Value::F64(v) => {
            put_varint(buf, keys::ANNOTATION_DOUBLE);
            buf.extend_from_slice(&v.to_le_bytes());
        }
        Value::Bool(v) => put_field(buf, keys::ANNOTATION_BOOL, u64::from(v)),
        Value::Str(s) => put_bytes(buf, keys::ANNOTATION_STRING, s.as_bytes()),
    }
}

/// The bytes of an interned string's body (`EventName` and its kin).
#[inline]
fn interned_name_len(iid: u64, name: &str) -> usize {
    1 + varint_len(iid) + nested_len(name.len())
}

/// Appends an interned string as the field `key`, body and all.
#[inline]
fn put_interned_name(buf: &mut impl Put, key: u64, iid: u64, name: &str) {
    put_field(buf, key, interned_name_len(iid, name) as u64);
    put_field(buf, keys::NAME_IID, iid);
    put_bytes(buf, keys::NAME_NAME, name.as_bytes());
}

/// Appends a key and a varint: the whole of a varint field, or the key and
/// length of a length-delimited one.
#[inline]
fn put_field(buf: &mut impl Put, key: u64, value: u64) {
    put_varint(buf, key);
    put_varint(buf, value);
}

/// Appends a length-delimited field of `bytes`.
#[inline]
fn put_bytes(buf: &mut impl Put, key: u64, bytes: &[u8]) {
    put_field(buf, key, bytes.len() as u64);
    buf.extend_from_slice(bytes);
}
