//! The constants of the Perfetto trace format this sink relies on, in one place,
//! and the framing of one packet in the file.
//!
//! Values are those of `perfetto_trace.proto`; the names say which enum or
//! field they come from.

/// `Trace.packet`: the one field of the file's top-level message.
pub(crate) const TRACE_PACKET_FIELD: u32 = 1;
/// Protobuf wire type of a length-delimited field.
pub(crate) const WIRE_LEN: u32 = 2;

/// `TracePacket.SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED`.
pub(crate) const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
/// `TracePacket.SequenceFlags.SEQ_NEEDS_INCREMENTAL_STATE`.
pub(crate) const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;

/// `TrackEvent.Type.TYPE_SLICE_BEGIN`.
pub(crate) const TYPE_SLICE_BEGIN: i32 = 1;
/// `TrackEvent.Type.TYPE_SLICE_END`.
pub(crate) const TYPE_SLICE_END: i32 = 2;
/// `TrackEvent.Type.TYPE_INSTANT`.
pub(crate) const TYPE_INSTANT: i32 = 3;
/// `TrackEvent.Type.TYPE_COUNTER`: a value of the counter track the event is on.
pub(crate) const TYPE_COUNTER: i32 = 4;

/// `CounterDescriptor.Unit.UNIT_COUNT`: a counter of things (dropped records).
pub(crate) const UNIT_COUNT: i32 = 2;
/// `TrackDescriptor.SiblingMergeBehavior.SIBLING_MERGE_BEHAVIOR_NONE`: the
/// track is never merged with a sibling of the same name.
pub(crate) const SIBLING_MERGE_BEHAVIOR_NONE: i32 = 2;
/// `CounterDescriptor.Unit.UNIT_TIME_NS`: nanoseconds (thread CPU time).
pub(crate) const UNIT_TIME_NS: i32 = 1;
/// `CounterDescriptor.Unit.UNIT_SIZE_BYTES`: bytes (resident memory).
pub(crate) const UNIT_SIZE_BYTES: i32 = 3;
/// `CounterDescriptor.BuiltinCounterType.COUNTER_THREAD_TIME_NS`: the
/// thread's CPU time, which the trace processor reads from a slice's begin
/// and end as the slice's thread timestamp and thread duration.
pub(crate) const COUNTER_THREAD_TIME_NS: i32 = 1;

/// `BuiltinClock.BUILTIN_CLOCK_MONOTONIC`: the clock of every timestamp the
/// capture hands the sink.
pub(crate) const CLOCK_MONOTONIC: u32 = 3;
/// `BuiltinClock.BUILTIN_CLOCK_BOOTTIME`: the trace processor's default trace
/// clock, given in each snapshot so that it can place MONOTONIC on it.
pub(crate) const CLOCK_BOOTTIME: u32 = 6;
/// A sequence-scoped clock id (64-127 are reserved for them): each thread's
/// sequence writes its timestamps as deltas on its own clock of this id.
pub(crate) const CLOCK_INCREMENTAL: u32 = 64;

/// `TrackDescriptor.ChildTracksOrdering.EXPLICIT`: children sort by
/// `sibling_order_rank`, so sub-lane 10 comes after sub-lane 9.
pub(crate) const CHILD_ORDERING_EXPLICIT: i32 = 3;

/// `TracePacket.compressed_packets`: a zlib stream of `Trace.packet` entries,
/// which the trace processor inflates and reads in place of the packet.
pub(crate) const COMPRESSED_PACKETS_FIELD: u32 = 50;

/// The key that opens each packet's entry in the file (`Trace.packet`, length-delimited).
pub(crate) const PACKET_KEY: u8 = ((TRACE_PACKET_FIELD << 3) | WIRE_LEN) as u8;

/// The keys of the fields of a track event's packet, which the sink writes by
/// hand (`track_event.rs`): `(field number << 3) | wire type`, each named
/// after its message and field in the schema.
pub(crate) mod keys {
    use super::{key, WIRE_FIXED64, WIRE_LEN, WIRE_VARINT};

    /// `TracePacket.timestamp`, uint64.
    pub(crate) const PACKET_TIMESTAMP: u64 = key(8, WIRE_VARINT);
    /// `TracePacket.trusted_packet_sequence_id`, uint32.
    pub(crate) const PACKET_SEQUENCE_ID: u64 = key(10, WIRE_VARINT);
    /// `TracePacket.track_event`, a `TrackEvent`.
    pub(crate) const PACKET_TRACK_EVENT: u64 = key(11, WIRE_LEN);
    /// `TracePacket.interned_data`, an `InternedData`.
    pub(crate) const PACKET_INTERNED_DATA: u64 = key(12, WIRE_LEN);
    /// `TracePacket.sequence_flags`, uint32.
    pub(crate) const PACKET_SEQUENCE_FLAGS: u64 = key(13, WIRE_VARINT);
    /// `TracePacket.timestamp_clock_id`, uint32 (a two-byte key).
    pub(crate) const PACKET_TIMESTAMP_CLOCK_ID: u64 = key(58, WIRE_VARINT);

    /// `TrackEvent.category_iids`, repeated uint64, unpacked in the schema:
    /// one key per iid.
    pub(crate) const EVENT_CATEGORY_IIDS: u64 = key(3, WIRE_VARINT);
    /// `TrackEvent.debug_annotations`, repeated `DebugAnnotation`.
    pub(crate) const EVENT_DEBUG_ANNOTATIONS: u64 = key(4, WIRE_LEN);
    /// `TrackEvent.type`, the enum `TrackEvent.Type` (an int32 on the wire).
    pub(crate) const EVENT_TYPE: u64 = key(9, WIRE_VARINT);
    /// `TrackEvent.name_iid`, uint64.
    pub(crate) const EVENT_NAME_IID: u64 = key(10, WIRE_VARINT);
    /// `TrackEvent.track_uuid`, uint64.
    pub(crate) const EVENT_TRACK_UUID: u64 = key(11, WIRE_VARINT);
    /// `TrackEvent.name`, a string given in full (a two-byte key): for names
    /// made from a message, which would grow the interning tables without end.
    pub(crate) const EVENT_NAME: u64 = key(23, WIRE_LEN);
    /// `TrackEvent.counter_value`, int64 (a two-byte key).
    pub(crate) const EVENT_COUNTER_VALUE: u64 = key(30, WIRE_VARINT);
    /// `TrackEvent.double_counter_value`, double (a two-byte key).
    pub(crate) const EVENT_DOUBLE_COUNTER_VALUE: u64 = key(44, WIRE_FIXED64);
    /// `TrackEvent.extra_counter_values`, repeated int64, unpacked in the
    /// schema: one key per value.
    pub(crate) const EVENT_EXTRA_COUNTER_VALUES: u64 = key(12, WIRE_VARINT);
    /// `TrackEvent.extra_counter_track_uuids`, repeated uint64, unpacked in
    /// the schema (a two-byte key).
    pub(crate) const EVENT_EXTRA_COUNTER_TRACK_UUIDS: u64 = key(31, WIRE_VARINT);
    /// `TrackEvent.flow_ids`, repeated fixed64, unpacked in the schema (a
    /// two-byte key per id).
    pub(crate) const EVENT_FLOW_IDS: u64 = key(47, WIRE_FIXED64);
    /// `TrackEvent.terminating_flow_ids`, repeated fixed64, unpacked.
    pub(crate) const EVENT_TERMINATING_FLOW_IDS: u64 = key(48, WIRE_FIXED64);

    /// `DebugAnnotation.name_iid`, uint64.
    pub(crate) const ANNOTATION_NAME_IID: u64 = key(1, WIRE_VARINT);
    /// `DebugAnnotation.bool_value`.
    pub(crate) const ANNOTATION_BOOL: u64 = key(2, WIRE_VARINT);
    /// `DebugAnnotation.uint_value`, uint64.
    pub(crate) const ANNOTATION_UINT: u64 = key(3, WIRE_VARINT);
    /// `DebugAnnotation.int_value`, int64 (a negative value takes ten bytes).
    pub(crate) const ANNOTATION_INT: u64 = key(4, WIRE_VARINT);
    /// `DebugAnnotation.double_value`, little-endian IEEE 754.
    pub(crate) const ANNOTATION_DOUBLE: u64 = key(5, WIRE_FIXED64);
    /// `DebugAnnotation.string_value`.
    pub(crate) const ANNOTATION_STRING: u64 = key(6, WIRE_LEN);

    /// `InternedData.event_categories`, repeated `EventCategory`.
    pub(crate) const INTERNED_CATEGORIES: u64 = key(1, WIRE_LEN);
    /// `InternedData.event_names`, repeated `EventName`.
    pub(crate) const INTERNED_EVENT_NAMES: u64 = key(2, WIRE_LEN);
    /// `InternedData.debug_annotation_names`, repeated `DebugAnnotationName`.
    pub(crate) const INTERNED_ANNOTATION_NAMES: u64 = key(3, WIRE_LEN);

    /// `iid` (uint64) of `EventCategory`, `EventName` and `DebugAnnotationName`.
    pub(crate) const NAME_IID: u64 = key(1, WIRE_VARINT);
    /// `name` (string) of the same three messages.
    pub(crate) const NAME_NAME: u64 = key(2, WIRE_LEN);
}

/// Protobuf wire type of a varint field.
pub(crate) const WIRE_VARINT: u32 = 0;
/// Protobuf wire type of a 64-bit fixed-width field.
pub(crate) const WIRE_FIXED64: u32 = 1;

/// The key that opens a field: its number and wire type, as one varint.
pub(crate) const fn key(field: u32, wire: u32) -> u64 {
    ((field << 3) | wire) as u64
}

/// Where bytes are put: a growing vector, or a region sized beforehand.
///
/// The methods are named after `Vec`'s so that an encoder reads the same over
/// either.
pub(crate) trait Put {
    /// Appends one byte.
    fn push(&mut self, byte: u8);
    /// Appends `bytes`.
    fn extend_from_slice(&mut self, bytes: &[u8]);
}

impl Put for Vec<u8> {
    #[inline]
    fn push(&mut self, byte: u8) {
        Vec::push(self, byte);
    }
    #[inline]
    fn extend_from_slice(&mut self, bytes: &[u8]) {
        Vec::extend_from_slice(self, bytes);
    }
}

/// Room made for one packet, in which it is written in one pass: each
/// length-delimited message's length goes into one byte held for it by
/// [`Room::open`] and is written there by [`Room::close`] once its body is.
///
/// Two kinds: a [`Region`] holds any packet (a length of 128 or more moves the
/// body on), a [`Window`] only a short one, with fewer checks per byte. The
/// encoders are written once over either, so that both write the same bytes.
pub(crate) trait Room: Put + Sized {
    /// The bytes written so far.
    fn len(&self) -> usize;
    /// Writes the first `len` bytes of `bytes` (all of them where there is
    /// room: one store of a fixed size; the bytes past `len` are written over
    /// by what comes next, or cut with the room left over).
    fn put_padded<const N: usize>(&mut self, bytes: &[u8; N], len: usize);
    /// Writes the key of a length-delimited field and holds one byte for its
    /// length; returns where, for [`Room::close`].
    #[inline]
    fn open(&mut self, key: u64) -> usize {
        put_varint(self, key);
        let at = self.len();
        self.push(0);
        at
    }
    /// Writes the length of the field opened at `at`, whose body is
    /// everything written since.
    fn close(&mut self, at: usize);
}

/// A region of room made beforehand, filled from its start: each byte is a
/// store, with none of a vector's capacity checks and length updates. What
/// would run past the end is dropped, and [`Region::fits`] then says so.
///
/// A length-delimited message is written in one pass: [`Room::open`] holds
/// one byte for its length, [`Room::close`] writes the length there once the
/// body is written (moving the body on in the rare case that the length takes
/// more than one byte), so no length is worked out before its body.
pub(crate) struct Region<'b> {
    buf: &'b mut [u8],
    pos: usize,
}

impl<'b> Region<'b> {
    pub(crate) fn new(buf: &'b mut [u8]) -> Self {
        Region { buf, pos: 0 }
    }

    /// True when everything written fitted in the region.
    #[inline]
    pub(crate) fn fits(&self) -> bool {
        self.pos <= self.buf.len()
    }

    /// [`Room::put_padded`] near the end of the room: apart, so that the
    /// store of a fixed size stays one.
    #[cold]
    #[inline(never)]
    fn put_short(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }

    /// [`Room::close`] for a body of 128 bytes or more: the body moves on
    /// to make room for the longer length.
    #[cold]
    fn close_long(&mut self, at: usize, len: usize) {
        let extra = varint_len(len as u64) - 1;
        let end = self.pos;
        if end + extra > self.buf.len() {
            // No room: leave the region marked as overfull.
            self.pos = end + extra;
            return;
        }
        self.buf.copy_within(at + 1..end, at + 1 + extra);
        self.pos = at;
        put_varint(self, len as u64);
        self.pos = end + extra;
    }
}

impl Put for Region<'_> {
    #[inline]
    fn push(&mut self, byte: u8) {
        if let Some(slot) = self.buf.get_mut(self.pos) {
            *slot = byte;
        }
        self.pos += 1;
    }
    #[inline]
    fn extend_from_slice(&mut self, bytes: &[u8]) {
        // Past the end, `pos` counts on (and `fits` says so) without a store.
        if let Some(to) = self.buf.get_mut(self.pos..).and_then(|rest| rest.get_mut(..bytes.len())) {
            to.copy_from_slice(bytes);
        }
        self.pos += bytes.len();
    }
}

impl Room for Region<'_> {
    #[inline]
    fn len(&self) -> usize {
        self.pos
    }

    #[inline]
    fn put_padded<const N: usize>(&mut self, bytes: &[u8; N], len: usize) {
        match self.buf.get_mut(self.pos..).and_then(<[u8]>::first_chunk_mut::<N>) {
            Some(to) => {
                *to = *bytes;
                self.pos += len;
            }
            None => self.put_short(&bytes[..len.min(N)]),
        }
    }

    #[inline]
    fn close(&mut self, at: usize) {
        let len = self.pos - at - 1;
        if len < 0x80 {
            if let Some(slot) = self.buf.get_mut(at) {
                *slot = len as u8;
            }
        } else {
            self.close_long(at, len);
        }
    }
}

/// The room a [`Window`] takes: twice the offsets it writes at, so that no
/// store of up to [`WINDOW_ROOM`]` / 2` bytes from one of them runs past it.
pub(crate) const WINDOW_ROOM: usize = 512;
/// The offsets a window writes at: the packet's, cut to their low eight bits.
const WINDOW_OFFSETS: usize = WINDOW_ROOM / 2 - 1;
/// The longest packet a window keeps: its key, one byte of length, and a body
/// of up to 127 bytes, so that every length in it takes one byte.
pub(crate) const WINDOW_PACKET: usize = 2 + 0x7f;

/// Room of a fixed size for one short packet (most track events): the
/// packet is kept only if it is at most [`WINDOW_PACKET`] bytes, so that
/// every message's length is under 128 and fills the one byte held for it,
/// with nothing to move; a longer one is written again in a [`Region`].
///
/// Each store goes at the packet's offset cut to its low eight bits, in a
/// buffer twice that long: the compiler sees that no store of a fixed size
/// runs past it, and checks none of them. Past [`WINDOW_PACKET`] the bytes
/// are garbage (the offsets wrap), which [`Window::finish`] refuses.
pub(crate) struct Window<'b> {
    buf: &'b mut [u8; WINDOW_ROOM],
    pos: usize,
}

impl<'b> Window<'b> {
    pub(crate) fn new(buf: &'b mut [u8; WINDOW_ROOM]) -> Self {
        Window { buf, pos: 0 }
    }

    /// Where the next byte goes.
    #[inline(always)]
    fn at(&self) -> usize {
        self.pos & WINDOW_OFFSETS
    }

    /// The packet's length, if it is short enough to be kept (each of its
    /// lengths then took one byte, as [`Room::close`] wrote it).
    #[inline(always)]
    pub(crate) fn finish(&self) -> Option<usize> {
        (self.pos <= WINDOW_PACKET).then_some(self.pos)
    }
}

impl Put for Window<'_> {
    #[inline(always)]
    fn push(&mut self, byte: u8) {
        let at = self.at();
        self.buf[at] = byte;
        self.pos += 1;
    }

    #[inline(always)]
    fn extend_from_slice(&mut self, bytes: &[u8]) {
        // Checked only for a length not known when compiled (a string's).
        let at = self.at();
        if let Some(to) = self.buf.get_mut(at..at + bytes.len()) {
            to.copy_from_slice(bytes);
        }
        self.pos += bytes.len();
    }
}

impl Room for Window<'_> {
    #[inline(always)]
    fn len(&self) -> usize {
        self.pos
    }

    #[inline(always)]
    fn put_padded<const N: usize>(&mut self, bytes: &[u8; N], len: usize) {
        let at = self.at();
        if let Some(to) = self.buf.get_mut(at..).and_then(<[u8]>::first_chunk_mut::<N>) {
            *to = *bytes;
        }
        self.pos += len;
    }

    #[inline(always)]
    fn close(&mut self, at: usize) {
        // Under 128 in a packet that is kept: one byte.
        let len = self.pos.wrapping_sub(at + 1);
        self.buf[at & WINDOW_OFFSETS] = len as u8;
    }
}

/// Appends `value` as a protobuf varint.
#[inline]
pub(crate) fn put_varint(buf: &mut impl Put, mut value: u64) {
    while value >= 0x80 {
        buf.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

/// The bytes `value` takes as a varint.
#[inline]
pub(crate) fn varint_len(value: u64) -> usize {
    // One byte per started group of seven significant bits, 0 taking one.
    ((64 - (value | 1).leading_zeros() as usize) * 9 + 64) / 64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_match_the_protobuf_encoding_at_every_length_boundary() {
        let cases: &[(u64, &[u8])] = &[
            (0, &[0x00]),
            (1, &[0x01]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (300, &[0xac, 0x02]),
            (16_383, &[0xff, 0x7f]),
            (16_384, &[0x80, 0x80, 0x01]),
            ((1 << 28) - 1, &[0xff, 0xff, 0xff, 0x7f]),
            (1 << 28, &[0x80, 0x80, 0x80, 0x80, 0x01]),
            (u64::MAX, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
        ];
        for &(value, expected) in cases {
            let mut buf = Vec::new();
            put_varint(&mut buf, value);
            assert_eq!(buf, expected, "varint of {value}");
            assert_eq!(buf.len(), prost::encoding::encoded_len_varint(value), "length of {value}");
        }
    }

    #[test]
    fn varints_agree_with_prost_on_a_sweep_of_values() {
        let mut value = 1u64;
        while value != 0 {
            for v in [value - 1, value, value | 1, value.wrapping_mul(3)] {
                let mut ours = Vec::new();
                put_varint(&mut ours, v);
                let mut theirs = Vec::new();
                prost::encoding::encode_varint(v, &mut theirs);
                assert_eq!(ours, theirs, "varint of {v}");
            }
            value <<= 1;
        }
    }

    #[test]
    fn the_packet_key_is_field_one_length_delimited() {
        assert_eq!(PACKET_KEY, 0x0a);
    }
}
