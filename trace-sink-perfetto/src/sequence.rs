//! One packet sequence: its interning tables, its clock, and the encoding of
//! its packets into the file.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, Write};

use flate2::{Compress, Compression, FlushCompress, Status};
use prost::Message;
use trace_core::{Field, Value};

use crate::format::{
    keys, put_varint, varint_len, CLOCK_BOOTTIME, CLOCK_INCREMENTAL, CLOCK_MONOTONIC,
    COMPRESSED_PACKETS_FIELD, PACKET_KEY, SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE,
    WIRE_LEN,
};
use crate::proto::{
    Clock, ClockSnapshot, TracePacket, TracePacketDefaults, TrackDescriptor, TrackEventDefaults,
};

/// Writes packets into the chunk, and keeps the one buffer a track event
/// needs besides it, so that encoding an event allocates nothing once the
/// buffers have grown (new interned strings aside).
///
/// Packets collect in a chunk of up to [`CHUNK_BYTES`]; a full chunk goes to
/// the file as one `compressed_packets` packet (see [`Chunk`]).
#[derive(Debug, Default)]
pub(crate) struct Encoder {
    chunk: Chunk,
    /// The current event's annotations: each name's iid, and whether the
    /// event is the first to use it.
    annotations: Vec<(u64, bool)>,
}

impl Encoder {
    /// Appends `packet`, a prost message (for the packets that are not track
    /// events: a few per sequence), as one `Trace.packet` entry.
    fn write(&mut self, out: &mut dyn Write, packet: &TracePacket) -> io::Result<()> {
        let buf = &mut self.chunk.pending;
        buf.push(PACKET_KEY);
        put_varint(buf, packet.encoded_len() as u64);
        // A Vec grows as needed, so this cannot run out of room; map the error anyway.
        packet.encode(buf).map_err(io::Error::other)?;
        self.appended(out)
    }

    /// Sends the chunk to the file once a packet appended to it filled it.
    #[inline]
    fn appended(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if self.chunk.pending.len() >= CHUNK_BYTES {
            self.chunk.flush(out)?;
        }
        Ok(())
    }

    /// Writes the packets still held to the file: at the end of the capture.
    pub(crate) fn flush(&mut self, out: &mut dyn Write) -> io::Result<()> {
        self.chunk.flush(out)
    }
}

/// Packets held before they go to the file, at most this many bytes of them
/// (and one packet more).
pub(crate) const CHUNK_BYTES: usize = 64 * 1024;
/// A chunk smaller than this goes to the file as it is: the packets of a short
/// capture stay readable by any protobuf decoder, and the compressor (a few
/// hundred KiB of tables) is never set up for them.
pub(crate) const MIN_COMPRESSED_BYTES: usize = 8 * 1024;
/// zlib's fastest level: a chunk of track events shrinks about fivefold even
/// so, and the writer thread spends little on it.
const LEVEL: u32 = 1;

/// Packets on their way to the file, compressed a chunk at a time.
///
/// A full chunk becomes one `TracePacket` holding only `compressed_packets`:
/// the zlib stream of the chunk's `Trace.packet` entries, which the trace
/// processor inflates and reads as if they stood in the file in its place. The
/// compressed packet belongs to no sequence; the packets inside keep theirs,
/// in order, so the file stays a valid trace, and concatenating two files still
/// gives one. A chunk that does not shrink goes out as it is.
#[derive(Default)]
struct Chunk {
    pending: Vec<u8>,
    compressor: Option<Compress>,
    deflated: Vec<u8>,
    head: Vec<u8>,
}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunk").field("pending", &self.pending.len()).finish_non_exhaustive()
    }
}

impl Chunk {
    fn flush(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let written = if self.pending.len() >= MIN_COMPRESSED_BYTES && self.deflate()? {
            // The packet's key and length, then `compressed_packets`' key and length.
            let field_key = u64::from((COMPRESSED_PACKETS_FIELD << 3) | WIRE_LEN);
            let len = self.deflated.len() as u64;
            self.head.clear();
            self.head.push(PACKET_KEY);
            put_varint(&mut self.head, varint_len(field_key) as u64 + varint_len(len) as u64 + len);
            put_varint(&mut self.head, field_key);
            put_varint(&mut self.head, len);
            out.write_all(&self.head).and_then(|()| out.write_all(&self.deflated))
        } else {
            out.write_all(&self.pending)
        };
        self.pending.clear();
        written
    }

    /// Compresses the pending packets into `deflated`; false when that saved nothing.
    fn deflate(&mut self) -> io::Result<bool> {
        let compressor = self.compressor.get_or_insert_with(|| Compress::new(Compression::new(LEVEL), true));
        compressor.reset();
        self.deflated.clear();
        let input = &self.pending[..];
        loop {
            let consumed = usize::try_from(compressor.total_in()).unwrap_or(usize::MAX).min(input.len());
            if self.deflated.capacity() - self.deflated.len() < 1024 {
                self.deflated.reserve(input.len() / 4 + 1024);
            }
            let before = (compressor.total_in(), compressor.total_out());
            match compressor.compress_vec(&input[consumed..], &mut self.deflated, FlushCompress::Finish) {
                Ok(Status::StreamEnd) => break,
                Ok(_) if (compressor.total_in(), compressor.total_out()) != before => {}
                Ok(_) => return Err(io::Error::other("the compressor made no progress")),
                Err(e) => return Err(io::Error::other(e)),
            }
        }
        Ok(self.deflated.len() + 8 < self.pending.len())
    }
}

/// Interned strings of one kind on one sequence: iids count from 1.
#[derive(Debug, Default)]
struct Interner {
    iids: HashMap<String, u64, FastHash>,
}

/// The maps the writer thread looks up per event: keyed by short strings and
/// thread ids, which [`FastHasher`] hashes for less than SipHash.
pub(crate) type FastHash = BuildHasherDefault<FastHasher>;

/// A hasher for short interned strings and integer keys: a word at a time, one
/// multiplication each, instead of SipHash's rounds (no untrusted input
/// reaches it).
#[derive(Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }
    #[inline]
    fn write_u64(&mut self, value: u64) {
        self.add(value);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

impl Interner {
    /// The iid of `s`, and whether this is its first use (its packet then
    /// gives the string with the iid).
    #[inline]
    fn intern(&mut self, s: &str) -> (u64, bool) {
        if let Some(&iid) = self.iids.get(s) {
            return (iid, false);
        }
        let iid = self.iids.len() as u64 + 1;
        self.iids.insert(s.to_string(), iid);
        (iid, true)
    }
}

/// How a sequence writes its timestamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timestamps {
    /// As deltas on the sequence's own incremental clock, which counts
    /// nanoseconds of CLOCK_MONOTONIC: one thread's events come in time order,
    /// and a delta takes two or three bytes where the absolute time takes nine.
    Incremental,
    /// As CLOCK_MONOTONIC nanoseconds: for events that come in no useful order
    /// (the slices of external lanes).
    Absolute,
}

/// One track event to write.
#[derive(Clone, Copy, Debug)]
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
}

/// One packet sequence (`trusted_packet_sequence_id`) of the file.
#[derive(Debug)]
pub(crate) struct Sequence {
    id: u32,
    timestamps: Timestamps,
    /// The incremental clock's value: the time of the sequence's last event
    /// written on it.
    clock: u64,
    event_names: Interner,
    categories: Interner,
    annotation_names: Interner,
}

/// What CLOCK_BOOTTIME reads ahead of CLOCK_MONOTONIC (the time spent
/// suspended), where the system has a boot-time clock.
fn boottime_lead_ns() -> u64 {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        fn read(clock: libc::clockid_t) -> Option<u64> {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: `ts` is a valid, writable timespec.
            let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
            (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
        }
        // BOOTTIME read between two MONOTONIC readings, against their midpoint.
        match (read(libc::CLOCK_MONOTONIC), read(libc::CLOCK_BOOTTIME), read(libc::CLOCK_MONOTONIC)) {
            (Some(before), Some(boot), Some(after)) => boot.saturating_sub(before / 2 + after / 2),
            _ => 0,
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        // No boot-time clock to relate to: state that the two agree.
        0
    }
}

impl Sequence {
    /// Starts sequence `id` in the file: a first packet that clears its
    /// incremental state, sets its defaults (clock, and `default_track` for its
    /// track events) and snapshots its clocks at `base_ns`.
    pub(crate) fn start(
        enc: &mut Encoder,
        out: &mut dyn Write,
        id: u32,
        timestamps: Timestamps,
        default_track: Option<u64>,
        base_ns: u64,
    ) -> io::Result<Sequence> {
        let clock = |clock_id: u32, timestamp: u64| Clock {
            clock_id: Some(clock_id),
            timestamp: Some(timestamp),
            is_incremental: None,
            unit_multiplier_ns: None,
        };
        let mut clocks = vec![
            clock(CLOCK_BOOTTIME, base_ns.saturating_add(boottime_lead_ns())),
            clock(CLOCK_MONOTONIC, base_ns),
        ];
        let timestamp_clock_id = match timestamps {
            Timestamps::Incremental => {
                clocks.push(Clock {
                    clock_id: Some(CLOCK_INCREMENTAL),
                    timestamp: Some(base_ns),
                    is_incremental: Some(true),
                    unit_multiplier_ns: Some(1),
                });
                CLOCK_INCREMENTAL
            }
            Timestamps::Absolute => CLOCK_MONOTONIC,
        };
        let packet = TracePacket {
            trusted_packet_sequence_id: Some(id),
            first_packet_on_sequence: Some(true),
            sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
            trace_packet_defaults: Some(TracePacketDefaults {
                timestamp_clock_id: Some(timestamp_clock_id),
                track_event_defaults: default_track
                    .map(|uuid| TrackEventDefaults { track_uuid: Some(uuid), ..Default::default() }),
            }),
            clock_snapshot: Some(ClockSnapshot { clocks }),
            ..Default::default()
        };
        enc.write(out, &packet)?;
        Ok(Sequence {
            id,
            timestamps,
            clock: base_ns,
            event_names: Interner::default(),
            categories: Interner::default(),
            annotation_names: Interner::default(),
        })
    }

    /// The packet's `timestamp` and, when it is not the sequence's default
    /// clock, `timestamp_clock_id` for an event at `ts`.
    fn timestamp(&mut self, ts: u64) -> (u64, Option<u32>) {
        match self.timestamps {
            Timestamps::Incremental if ts >= self.clock => {
                let delta = ts - self.clock;
                self.clock = ts;
                (delta, None)
            }
            // Deltas cannot be negative: an event earlier than the last one
            // (never seen from one thread, but cheap to get right) is written
            // on CLOCK_MONOTONIC, which leaves the incremental clock alone.
            Timestamps::Incremental => (ts, Some(CLOCK_MONOTONIC)),
            Timestamps::Absolute => (ts, None),
        }
    }

    /// Declares a track, on this sequence.
    pub(crate) fn describe(
        &mut self,
        enc: &mut Encoder,
        out: &mut dyn Write,
        track: TrackDescriptor,
    ) -> io::Result<()> {
        let packet = TracePacket {
            trusted_packet_sequence_id: Some(self.id),
            track_descriptor: Some(track),
            ..Default::default()
        };
        enc.write(out, &packet)
    }

    /// Writes one track event, encoded by hand straight into the chunk: the
    /// lengths of the packet and of each message in it are worked out first,
    /// then every field is written once, with nothing built or copied on the
    /// way.
    ///
    /// The bytes are those prost writes for the same `TracePacket` (see
    /// `proto.rs`): fields in field-number order, every set field written
    /// (proto2), `category_iids` unpacked. The tests hold the two to that,
    /// byte for byte.
    pub(crate) fn event(
        &mut self,
        enc: &mut Encoder,
        out: &mut dyn Write,
        spec: &EventSpec<'_>,
    ) -> io::Result<()> {
        let name = spec.name.map(|s| (self.event_names.intern(s), s));
        let category = spec.category.map(|s| (self.categories.intern(s), s));
        enc.annotations.clear();
        for field in spec.fields.iter().chain(spec.extra) {
            enc.annotations.push(self.annotation_names.intern(field.name));
        }
        let (timestamp, clock_id) = self.timestamp(spec.ts);
        let annotations = &enc.annotations[..];
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
        for (field, &(iid, new)) in fields() {
            event_len += nested_len(annotation_len(iid, field.value));
            if new {
                interned_len += nested_len(interned_name_len(iid, field.name));
            }
        }
        let mut packet_len = 1 + varint_len(timestamp) + 1 + varint_len(u64::from(self.id));
        packet_len += nested_len(event_len);
        if interned_len > 0 {
            packet_len += nested_len(interned_len);
        }
        packet_len += 1 + varint_len(u64::from(SEQ_NEEDS_INCREMENTAL_STATE));
        if let Some(clock) = clock_id {
            packet_len += varint_len(keys::PACKET_TIMESTAMP_CLOCK_ID) + varint_len(u64::from(clock));
        }

        // The packet, fields in field-number order at each level.
        let buf = &mut enc.chunk.pending;
        buf.reserve(1 + varint_len(packet_len as u64) + packet_len);
        let at = buf.len();
        buf.push(PACKET_KEY);
        put_varint(buf, packet_len as u64);
        put_field(buf, keys::PACKET_TIMESTAMP, timestamp);
        put_field(buf, keys::PACKET_SEQUENCE_ID, u64::from(self.id));
        put_field(buf, keys::PACKET_TRACK_EVENT, event_len as u64);
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
        put_field(buf, keys::PACKET_SEQUENCE_FLAGS, u64::from(SEQ_NEEDS_INCREMENTAL_STATE));
        if let Some(clock) = clock_id {
            put_field(buf, keys::PACKET_TIMESTAMP_CLOCK_ID, u64::from(clock));
        }
        debug_assert_eq!(buf.len() - at, 1 + varint_len(packet_len as u64) + packet_len);
        enc.appended(out)
    }
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
fn put_annotation(buf: &mut Vec<u8>, name_iid: u64, value: Value<'_>) {
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
fn put_interned_name(buf: &mut Vec<u8>, key: u64, iid: u64, name: &str) {
    put_field(buf, key, interned_name_len(iid, name) as u64);
    put_field(buf, keys::NAME_IID, iid);
    put_bytes(buf, keys::NAME_NAME, name.as_bytes());
}

/// Appends a key and a varint: the whole of a varint field, or the key and
/// length of a length-delimited one.
#[inline]
fn put_field(buf: &mut Vec<u8>, key: u64, value: u64) {
    put_varint(buf, key);
    put_varint(buf, value);
}

/// Appends a length-delimited field of `bytes`.
#[inline]
fn put_bytes(buf: &mut Vec<u8>, key: u64, bytes: &[u8]) {
    put_field(buf, key, bytes.len() as u64);
    buf.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::TYPE_SLICE_BEGIN;
    use crate::proto::{DebugAnnotation, InternedData, InternedName, Trace, TrackEvent};

    fn decode(bytes: &[u8]) -> Vec<TracePacket> {
        match Trace::decode(bytes) {
            Ok(trace) => trace.packet,
            Err(e) => panic!("our own bytes do not decode: {e}"),
        }
    }

    #[test]
    fn a_string_is_interned_in_the_first_packet_that_uses_it_and_only_there() {
        let mut enc = Encoder::default();
        let mut out = Vec::new();
        let mut seq =
            Sequence::start(&mut enc, &mut out, 7, Timestamps::Incremental, Some(99), 1_000).unwrap();
        let fields = [Field { name: "n", value: Value::U64(3) }];
        for ts in [1_500, 2_000] {
            let spec = EventSpec {
                ts,
                kind: TYPE_SLICE_BEGIN,
                track: None,
                name: Some("compile"),
                category: Some("cabin::build"),
                fields: &fields,
                extra: &[],
            };
            seq.event(&mut enc, &mut out, &spec).unwrap();
        }
        enc.flush(&mut out).unwrap();
        let packets = decode(&out);
        assert_eq!(packets.len(), 3);
        let first = packets[1].interned_data.clone().unwrap_or_default();
        assert_eq!(first.event_names, [InternedName { iid: Some(1), name: Some("compile".into()) }]);
        assert_eq!(
            first.event_categories,
            [InternedName { iid: Some(1), name: Some("cabin::build".into()) }]
        );
        assert_eq!(first.debug_annotation_names, [InternedName { iid: Some(1), name: Some("n".into()) }]);
        assert_eq!(packets[2].interned_data, None);
        assert_eq!(packets[1].timestamp, Some(500));
        assert_eq!(packets[2].timestamp, Some(500));
        let event = packets[2].track_event.clone().unwrap_or_default();
        assert_eq!((event.name_iid, event.category_iids.as_slice()), (Some(1), &[1][..]));
        assert_eq!(event.debug_annotations[0].uint_value, Some(3));
    }

    #[test]
    fn an_event_earlier_than_the_last_is_written_on_the_monotonic_clock() {
        let mut enc = Encoder::default();
        let mut out = Vec::new();
        let mut seq =
            Sequence::start(&mut enc, &mut out, 7, Timestamps::Incremental, Some(99), 1_000).unwrap();
        for ts in [5_000, 4_000, 6_000] {
            let spec = EventSpec {
                ts,
                kind: TYPE_SLICE_BEGIN,
                track: None,
                name: None,
                category: None,
                fields: &[],
                extra: &[],
            };
            seq.event(&mut enc, &mut out, &spec).unwrap();
        }
        enc.flush(&mut out).unwrap();
        let stamps: Vec<_> = decode(&out)[1..].iter().map(|p| (p.timestamp, p.timestamp_clock_id)).collect();
        assert_eq!(stamps, [(Some(4_000), None), (Some(4_000), Some(CLOCK_MONOTONIC)), (Some(1_000), None)]);
    }

    #[test]
    fn the_first_packet_clears_the_sequence_and_binds_its_clock_to_monotonic() {
        let mut enc = Encoder::default();
        let mut out = Vec::new();
        Sequence::start(&mut enc, &mut out, 7, Timestamps::Incremental, Some(99), 1_000).unwrap();
        enc.flush(&mut out).unwrap();
        let first = &decode(&out)[0];
        assert_eq!(first.sequence_flags, Some(SEQ_INCREMENTAL_STATE_CLEARED));
        assert_eq!(first.trusted_packet_sequence_id, Some(7));
        let defaults = first.trace_packet_defaults.clone().unwrap_or_default();
        assert_eq!(defaults.timestamp_clock_id, Some(CLOCK_INCREMENTAL));
        assert_eq!(defaults.track_event_defaults.and_then(|d| d.track_uuid), Some(99));
        let clocks = first.clock_snapshot.clone().unwrap_or_default().clocks;
        let incremental = clocks.iter().find(|c| c.clock_id == Some(CLOCK_INCREMENTAL)).cloned();
        let monotonic = clocks.iter().find(|c| c.clock_id == Some(CLOCK_MONOTONIC)).cloned();
        assert_eq!(incremental.as_ref().and_then(|c| c.is_incremental), Some(true));
        assert_eq!(incremental.and_then(|c| c.timestamp), Some(1_000));
        assert_eq!(monotonic.and_then(|c| c.timestamp), Some(1_000));
    }

    #[test]
    fn recycled_buffers_carry_no_value_into_the_next_event() {
        let mut enc = Encoder::default();
        let mut out = Vec::new();
        let mut seq = Sequence::start(&mut enc, &mut out, 7, Timestamps::Absolute, None, 0).unwrap();
        let first = [Field { name: "a", value: Value::Str("text") }];
        let second = [Field { name: "a", value: Value::Bool(false) }];
        for fields in [&first[..], &second[..]] {
            let spec = EventSpec {
                ts: 1,
                kind: TYPE_SLICE_BEGIN,
                track: Some(5),
                name: None,
                category: None,
                fields,
                extra: &[],
            };
            seq.event(&mut enc, &mut out, &spec).unwrap();
        }
        enc.flush(&mut out).unwrap();
        let packets = decode(&out);
        let a = &packets[2].track_event.clone().unwrap_or_default().debug_annotations[0];
        assert_eq!((a.bool_value, a.string_value.as_deref()), (Some(false), None));
    }

    /// Inflates one zlib stream.
    fn inflate(deflated: &[u8]) -> Vec<u8> {
        let mut d = flate2::Decompress::new(true);
        let mut out = Vec::with_capacity(2 * CHUNK_BYTES);
        match d.decompress_vec(deflated, &mut out, flate2::FlushDecompress::Finish) {
            Ok(Status::StreamEnd) => out,
            other => panic!("the stream does not inflate in one go: {other:?}"),
        }
    }

    #[test]
    fn a_full_chunk_goes_out_as_one_compressed_packet_holding_the_same_packets() {
        let mut enc = Encoder::default();
        let mut out = Vec::new();
        let mut seq = Sequence::start(&mut enc, &mut out, 7, Timestamps::Incremental, Some(99), 0).unwrap();
        let mut ts = 0;
        let mut step = |enc: &mut Encoder, out: &mut Vec<u8>| {
            ts += 300 + ts % 7;
            let spec = EventSpec {
                ts,
                kind: TYPE_SLICE_BEGIN,
                track: None,
                name: Some("step"),
                category: Some("bench"),
                fields: &[],
                extra: &[],
            };
            seq.event(enc, out, &spec).unwrap();
        };
        while enc.chunk.pending.len() < CHUNK_BYTES - 64 {
            step(&mut enc, &mut out);
        }
        assert!(out.is_empty(), "nothing reaches the file before the chunk is full");
        let plain = enc.chunk.pending.clone();
        enc.flush(&mut out).unwrap();
        let packets = decode(&out);
        assert_eq!(packets.len(), 1, "one packet holds the chunk");
        let compressed = packets[0].compressed_packets.clone().unwrap_or_default();
        let only = TracePacket { compressed_packets: Some(compressed.clone()), ..Default::default() };
        assert!(packets[0] == only, "the packet holds nothing but the compressed packets");
        assert!(inflate(&compressed) == plain, "it inflates to the packets, byte for byte");
        assert!(out.len() * 4 < plain.len(), "{} bytes for {} of packets", out.len(), plain.len());
        // A chunk that fills up goes out by itself.
        out.clear();
        while out.is_empty() {
            step(&mut enc, &mut out);
        }
        assert_eq!(decode(&out).len(), 1);
        assert!(enc.chunk.pending.is_empty());
    }

    #[test]
    fn a_short_chunk_goes_out_as_it_is() {
        let mut enc = Encoder::default();
        let mut out = Vec::new();
        Sequence::start(&mut enc, &mut out, 7, Timestamps::Incremental, Some(99), 0).unwrap();
        let plain = enc.chunk.pending.clone();
        assert!(!plain.is_empty() && plain.len() < MIN_COMPRESSED_BYTES);
        enc.flush(&mut out).unwrap();
        assert_eq!(out, plain);
        enc.flush(&mut out).unwrap();
        assert_eq!(out, plain, "a second flush writes nothing");
    }

    #[test]
    fn a_chunk_that_does_not_shrink_goes_out_as_it_is() {
        let mut chunk = Chunk::default();
        // A xorshift stream: nothing for the compressor to find.
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        chunk.pending = (0..MIN_COMPRESSED_BYTES * 2)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let plain = chunk.pending.clone();
        let mut out = Vec::new();
        chunk.flush(&mut out).unwrap();
        assert_eq!(out, plain);
    }

    #[test]
    fn varint_lengths_match_the_encoder_at_every_boundary() {
        for value in [0, 1, 127, 128, 16_383, 16_384, (1 << 21) - 1, 1 << 21, u64::MAX] {
            let mut buf = Vec::new();
            put_varint(&mut buf, value);
            assert_eq!(varint_len(value), buf.len(), "{value}");
        }
    }

    /// The oracle: the same track event built as a prost `TracePacket` and
    /// encoded by prost, as the sink wrote them before it encoded them by
    /// hand, on the same interning tables and clock.
    fn event_with_prost(
        seq: &mut Sequence,
        enc: &mut Encoder,
        out: &mut dyn Write,
        spec: &EventSpec<'_>,
    ) -> io::Result<()> {
        fn intern(interner: &mut Interner, s: &str, new: &mut Vec<InternedName>) -> u64 {
            let (iid, first) = interner.intern(s);
            if first {
                new.push(InternedName { iid: Some(iid), name: Some(s.to_string()) });
            }
            iid
        }
        let mut interned = InternedData::default();
        let name_iid = spec.name.map(|s| intern(&mut seq.event_names, s, &mut interned.event_names));
        let category_iids: Vec<u64> = spec
            .category
            .map(|s| intern(&mut seq.categories, s, &mut interned.event_categories))
            .into_iter()
            .collect();
        let mut debug_annotations = Vec::new();
        for field in spec.fields.iter().chain(spec.extra) {
            let name_iid =
                intern(&mut seq.annotation_names, field.name, &mut interned.debug_annotation_names);
            let mut a = DebugAnnotation { name_iid: Some(name_iid), ..Default::default() };
            match field.value {
                Value::I64(v) => a.int_value = Some(v),
                Value::U64(v) => a.uint_value = Some(v),
                Value::F64(v) => a.double_value = Some(v),
                Value::Bool(v) => a.bool_value = Some(v),
                Value::Str(s) => a.string_value = Some(s.to_string()),
            }
            debug_annotations.push(a);
        }
        let (timestamp, timestamp_clock_id) = seq.timestamp(spec.ts);
        let packet = TracePacket {
            timestamp: Some(timestamp),
            timestamp_clock_id,
            trusted_packet_sequence_id: Some(seq.id),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            interned_data: (!interned.is_empty()).then_some(interned),
            track_event: Some(TrackEvent {
                r#type: Some(spec.kind),
                track_uuid: spec.track,
                name_iid,
                category_iids,
                debug_annotations,
                ..Default::default()
            }),
            ..Default::default()
        };
        enc.write(out, &packet)
    }

    mod against_prost {
        use proptest::prelude::*;

        use super::*;

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

        /// How an event's time relates to the one before it.
        #[derive(Clone, Copy, Debug)]
        enum Step {
            /// A little later (or at the same time), as a thread's events come.
            Later(u64),
            /// Any time at all: a large jump either way.
            Anywhere(u64),
            /// Earlier: the incremental clock cannot go back.
            Earlier(u64),
        }

        #[derive(Clone, Debug)]
        struct Ev {
            step: Step,
            kind: i32,
            track: Option<u64>,
            name: Option<String>,
            category: Option<String>,
            fields: Vec<(String, Owned)>,
            extra: Vec<(String, Owned)>,
        }

        /// Names and texts: a few that recur (interned once, then reused),
        /// fresh short ones, long ones whose lengths take two varint bytes
        /// (and so do the lengths of every message around them), and now and
        /// then one of three.
        fn text() -> impl Strategy<Value = String> {
            prop_oneof![
                6 => prop::sample::select(vec!["a", "b", "message", "compile", "cabin::build", ""])
                    .prop_map(String::from),
                3 => "[a-z_:]{1,12}",
                2 => ".{60,200}",
                1 => (16_380usize..16_400).prop_map(|n| "x".repeat(n)),
            ]
        }

        fn value() -> impl Strategy<Value = Owned> {
            prop_oneof![
                any::<i64>().prop_map(Owned::I64),
                prop_oneof![0..300i64, -300..0i64].prop_map(Owned::I64),
                any::<u64>().prop_map(Owned::U64),
                (0..20_000u64).prop_map(Owned::U64),
                any::<f64>().prop_map(Owned::F64),
                any::<bool>().prop_map(Owned::Bool),
                text().prop_map(Owned::Str),
            ]
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                4 => (0..5_000u64).prop_map(Step::Later),
                1 => any::<u64>().prop_map(Step::Later),
                1 => any::<u64>().prop_map(Step::Anywhere),
                1 => any::<u64>().prop_map(Step::Earlier),
            ]
        }

        fn event() -> impl Strategy<Value = Ev> {
            (
                step(),
                prop_oneof![4 => 1..=3i32, 1 => any::<i32>()],
                prop::option::of(any::<u64>()),
                prop::option::of(text()),
                prop::option::of(text()),
                prop::collection::vec((text(), value()), 0..6),
                prop::collection::vec((text(), value()), 0..2),
            )
                .prop_map(|(step, kind, track, name, category, fields, extra)| Ev {
                    step,
                    kind,
                    track,
                    name,
                    category,
                    fields,
                    extra,
                })
        }

        fn fields(owned: &[(String, Owned)]) -> Vec<Field<'_>> {
            owned.iter().map(|(name, v)| Field { name, value: v.value() }).collect()
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            #[test]
            fn hand_encoded_track_events_are_byte_for_byte_what_prost_writes(
                id in any::<u32>(),
                incremental in any::<bool>(),
                base in prop_oneof![0..1_000_000u64, any::<u64>()],
                events in prop::collection::vec(event(), 1..30),
            ) {
                let timestamps = if incremental { Timestamps::Incremental } else { Timestamps::Absolute };
                let (mut hand_enc, mut prost_enc) = (Encoder::default(), Encoder::default());
                let (mut hand_out, mut prost_out) = (Vec::new(), Vec::new());
                let mut hand = Sequence::start(&mut hand_enc, &mut hand_out, id, timestamps, None, base).unwrap();
                let mut oracle = Sequence::start(&mut prost_enc, &mut prost_out, id, timestamps, None, base).unwrap();
                // The first packets differ in their BOOTTIME reading: compare the events only.
                hand_enc.chunk.pending.clear();
                prost_enc.chunk.pending.clear();
                let mut ts = base;
                for (i, ev) in events.iter().enumerate() {
                    ts = match ev.step {
                        Step::Later(d) => ts.saturating_add(d),
                        Step::Anywhere(t) => t,
                        Step::Earlier(d) => ts.saturating_sub(d),
                    };
                    let (f, x) = (fields(&ev.fields), fields(&ev.extra));
                    let spec = EventSpec {
                        ts,
                        kind: ev.kind,
                        track: ev.track,
                        name: ev.name.as_deref(),
                        category: ev.category.as_deref(),
                        fields: &f,
                        extra: &x,
                    };
                    hand.event(&mut hand_enc, &mut hand_out, &spec).unwrap();
                    event_with_prost(&mut oracle, &mut prost_enc, &mut prost_out, &spec).unwrap();
                    prop_assert!(
                        hand_enc.chunk.pending == prost_enc.chunk.pending,
                        "event {i}: hand {:02x?}\nprost {:02x?}",
                        hand_enc.chunk.pending,
                        prost_enc.chunk.pending
                    );
                    prop_assert!(hand_out == prost_out, "event {i}: the flushed chunks differ");
                    hand_enc.chunk.pending.clear();
                    prost_enc.chunk.pending.clear();
                }
            }
        }
    }
}
