//! One packet sequence: its interning tables, its clock, and the encoding of
//! its packets into the file.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, Write};

use flate2::{Compress, Compression, FlushCompress, Status};
use prost::Message;
use trace_core::{Field, Value};

use crate::format::{
    put_varint, CLOCK_BOOTTIME, CLOCK_INCREMENTAL, CLOCK_MONOTONIC, COMPRESSED_PACKETS_FIELD, PACKET_KEY,
    SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE, WIRE_LEN,
};
use crate::proto::{
    Clock, ClockSnapshot, DebugAnnotation, InternedData, InternedName, TracePacket, TracePacketDefaults,
    TrackDescriptor, TrackEvent, TrackEventDefaults,
};

/// Writes packets and keeps the buffers they are built in, so that encoding an
/// event allocates nothing once the buffers have grown (new interned strings
/// aside).
///
/// Packets collect in a chunk of up to [`CHUNK_BYTES`]; a full chunk goes to
/// the file as one `compressed_packets` packet (see [`Chunk`]).
#[derive(Debug, Default)]
pub(crate) struct Encoder {
    chunk: Chunk,
    event: TrackEvent,
    spare_annotations: Vec<DebugAnnotation>,
    spare_strings: Vec<String>,
}

impl Encoder {
    /// Appends `packet` as one `Trace.packet` entry, to the file when the
    /// chunk it joins is full.
    fn write(&mut self, out: &mut dyn Write, packet: &TracePacket) -> io::Result<()> {
        let buf = &mut self.chunk.pending;
        buf.push(PACKET_KEY);
        put_varint(buf, packet.encoded_len() as u64);
        // A Vec grows as needed, so this cannot run out of room; map the error anyway.
        packet.encode(buf).map_err(io::Error::other)?;
        if buf.len() >= CHUNK_BYTES {
            self.chunk.flush(out)?;
        }
        Ok(())
    }

    /// Writes the packets still held to the file: at the end of the capture.
    pub(crate) fn flush(&mut self, out: &mut dyn Write) -> io::Result<()> {
        self.chunk.flush(out)
    }

    fn annotation(&mut self, name_iid: u64, value: Value<'_>) -> DebugAnnotation {
        let mut a = self.spare_annotations.pop().unwrap_or_default();
        a.name_iid = Some(name_iid);
        match value {
            Value::I64(v) => a.int_value = Some(v),
            Value::U64(v) => a.uint_value = Some(v),
            Value::F64(v) => a.double_value = Some(v),
            Value::Bool(v) => a.bool_value = Some(v),
            Value::Str(s) => {
                let mut text = self.spare_strings.pop().unwrap_or_default();
                text.clear();
                text.push_str(s);
                a.string_value = Some(text);
            }
        }
        a
    }

    /// Takes back a track event's buffers for the next one.
    fn recycle(&mut self, mut event: TrackEvent) {
        for mut a in event.debug_annotations.drain(..) {
            if let Some(text) = a.string_value.take() {
                self.spare_strings.push(text);
            }
            a.name_iid = None;
            a.bool_value = None;
            a.uint_value = None;
            a.int_value = None;
            a.double_value = None;
            self.spare_annotations.push(a);
        }
        event.category_iids.clear();
        self.event = event;
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

/// The bytes `value` takes as a varint.
fn varint_len(value: u64) -> usize {
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

/// Interned strings of one kind on one sequence: iids count from 1.
#[derive(Debug, Default)]
struct Interner {
    iids: HashMap<String, u64, BuildHasherDefault<FastHasher>>,
}

/// A hasher for short interned strings: a word at a time, one multiplication
/// each, instead of SipHash's rounds (no untrusted input reaches it).
#[derive(Default, Clone, Copy)]
struct FastHasher(u64);

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let word = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl Interner {
    /// The iid of `s`; a string seen for the first time is added to `new`, to
    /// go out in the packet that first uses it.
    fn intern(&mut self, s: &str, new: &mut Vec<InternedName>) -> u64 {
        if let Some(&iid) = self.iids.get(s) {
            return iid;
        }
        let iid = self.iids.len() as u64 + 1;
        self.iids.insert(s.to_string(), iid);
        new.push(InternedName { iid: Some(iid), name: Some(s.to_string()) });
        iid
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

    /// Writes one track event.
    pub(crate) fn event(
        &mut self,
        enc: &mut Encoder,
        out: &mut dyn Write,
        spec: &EventSpec<'_>,
    ) -> io::Result<()> {
        let mut interned = InternedData::default();
        let mut event = std::mem::take(&mut enc.event);
        event.r#type = Some(spec.kind);
        event.track_uuid = spec.track;
        event.name_iid = spec.name.map(|name| self.event_names.intern(name, &mut interned.event_names));
        event.category_iids.clear();
        if let Some(category) = spec.category {
            event.category_iids.push(self.categories.intern(category, &mut interned.event_categories));
        }
        for field in spec.fields.iter().chain(spec.extra) {
            let name_iid = self.annotation_names.intern(field.name, &mut interned.debug_annotation_names);
            let annotation = enc.annotation(name_iid, field.value);
            event.debug_annotations.push(annotation);
        }
        let (timestamp, timestamp_clock_id) = self.timestamp(spec.ts);
        let packet = TracePacket {
            timestamp: Some(timestamp),
            timestamp_clock_id,
            trusted_packet_sequence_id: Some(self.id),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            interned_data: (!interned.is_empty()).then_some(interned),
            track_event: Some(event),
            ..Default::default()
        };
        let written = enc.write(out, &packet);
        if let Some(event) = packet.track_event {
            enc.recycle(event);
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::TYPE_SLICE_BEGIN;
    use crate::proto::Trace;

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
}
