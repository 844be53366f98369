//! Packets on their way to the file: the chunk they collect in, and its
//! compression into one `compressed_packets` packet.

use std::io::{self, Write};

use flate2::{Compress, Compression, FlushCompress, Status};
use prost::Message;

use crate::format::{
    put_varint, varint_len, Put, Region, Window, COMPRESSED_PACKETS_FIELD, PACKET_KEY, WINDOW_ROOM, WIRE_LEN,
};
use crate::proto::TracePacket;

/// Writes packets into the chunk, and keeps the one buffer a track event
/// needs besides it, so that encoding an event allocates nothing once the
/// buffers have grown (new interned strings aside).
///
/// Packets collect in a chunk of up to [`CHUNK_BYTES`]; a full chunk goes to
/// the file as one `compressed_packets` packet (see [`Chunk`]).
#[derive(Debug, Default)]
pub(crate) struct Encoder {
    pub(crate) chunk: Chunk,
    /// The current event's annotations: each name's iid, and whether the
    /// event is the first to use it.
    pub(crate) annotations: Vec<(u64, bool)>,
}

impl Encoder {
    /// Appends `packet`, a prost message (for the packets that are not track
    /// events: a few per sequence), as one `Trace.packet` entry.
    pub(crate) fn write(&mut self, out: &mut dyn Write, packet: &TracePacket) -> io::Result<()> {
        let len = packet.encoded_len();
        let head = 1 + varint_len(len as u64);
        let room = self.chunk.room(head + len);
        let (key_and_len, mut body) = room.split_at_mut(head);
        let mut r = Region::new(key_and_len);
        r.push(PACKET_KEY);
        put_varint(&mut r, len as u64);
        // The room is the packet's encoded length, so this cannot run out of
        // it; map the error anyway.
        packet.encode(&mut body).map_err(io::Error::other)?;
        self.chunk.filled(head + len);
        self.appended(out)
    }

    /// Sends the chunk to the file once a packet appended to it filled it.
    #[inline(always)]
    pub(crate) fn appended(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if self.chunk.len >= CHUNK_BYTES {
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
/// Room the chunk's buffer holds beyond a full chunk: a packet of up to this
/// many bytes finds its room made.
pub(crate) const SPARE: usize = 4096;
/// The chunk's buffer when its first packet comes.
const FIRST_ROOM: usize = 8 * 1024;
/// A chunk smaller than this goes to the file as it is: the packets of a short
/// capture stay readable by any protobuf decoder, and the compressor (a few
/// hundred KiB of tables) is never set up for them.
pub(crate) const MIN_COMPRESSED_BYTES: usize = 8 * 1024;
/// zlib's fastest level: a chunk of track events shrinks about fivefold even
/// so, and the writer thread spends little on it.
const LEVEL: u32 = 1;

/// Packets on their way to the file, a chunk at a time, compressed when the
/// sink was made with `PerfettoSink::compressed`.
///
/// A full chunk becomes one `TracePacket` holding only `compressed_packets`:
/// the zlib stream of the chunk's `Trace.packet` entries, which the trace
/// processor inflates and reads as if they stood in the file in its place. The
/// compressed packet belongs to no sequence; the packets inside keep theirs,
/// in order, so the file stays a valid trace, and concatenating two files still
/// gives one. A chunk that does not shrink goes out as it is.
///
/// The packets are the first `len` bytes of `buf`; the bytes after them are
/// room already made, zeroed once when the buffer grew and written over by
/// the packets that follow, so that making room for a packet
/// ([`Chunk::room`]) is one comparison, not a fill.
#[derive(Default)]
pub(crate) struct Chunk {
    buf: Vec<u8>,
    len: usize,
    /// Whether full chunks are compressed (`PerfettoSink::compressed`).
    pub(crate) compress: bool,
    compressor: Option<Compress>,
    deflated: Vec<u8>,
    head: Vec<u8>,
}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunk").field("pending", &self.len).finish_non_exhaustive()
    }
}

impl Chunk {
    /// The packets held.
    pub(crate) fn pending(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Drops the packets held.
    #[cfg(test)]
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    /// A chunk holding `bytes` as its packets.
    #[cfg(test)]
    pub(crate) fn holding(bytes: &[u8], compress: bool) -> Chunk {
        let mut chunk = Chunk { compress, ..Chunk::default() };
        chunk.room(bytes.len())[..bytes.len()].copy_from_slice(bytes);
        chunk.filled(bytes.len());
        chunk
    }

    /// At least `room` bytes after the packets held, for the next packet,
    /// which [`Chunk::filled`] then keeps. What they hold is left over from
    /// earlier packets (or zero).
    #[inline]
    pub(crate) fn room(&mut self, room: usize) -> &mut [u8] {
        let end = self.len + room;
        if self.buf.len() < end {
            self.grow(end);
        }
        &mut self.buf[self.len..]
    }

    /// A [`Window`] after the packets held, for the next packet, which
    /// [`Chunk::filled`] then keeps: room of a fixed size, made as
    /// [`Chunk::room`] makes it. None is not expected.
    #[inline(always)]
    pub(crate) fn window(&mut self) -> Option<Window<'_>> {
        // The check that finds the room is the one that says to grow.
        if self.buf.len() < self.len + WINDOW_ROOM {
            self.grow(self.len + WINDOW_ROOM);
        }
        let room = self.buf.get_mut(self.len..)?.first_chunk_mut::<WINDOW_ROOM>()?;
        Some(Window::new(room))
    }

    /// Makes the buffer `end` bytes long at least: a few times a capture,
    /// since its length doubles from [`FIRST_ROOM`] up to [`CHUNK_BYTES`] and
    /// [`SPARE`] (a chunk goes out once it holds that many). A short capture,
    /// whose packets are a few KiB, does not touch the pages of a full
    /// chunk: in a fresh process each costs a page fault.
    #[cold]
    fn grow(&mut self, end: usize) {
        // Allocated whole at once, so that growing never moves it; its pages
        // are touched as it grows.
        self.buf.reserve_exact((CHUNK_BYTES + SPARE).saturating_sub(self.buf.len()));
        let doubled = (self.buf.len() * 2).clamp(FIRST_ROOM, CHUNK_BYTES + SPARE);
        self.buf.resize(end.max(doubled), 0);
    }

    /// Keeps the first `written` bytes of the room as the next packet.
    #[inline(always)]
    pub(crate) fn filled(&mut self, written: usize) {
        self.len = (self.len + written).min(self.buf.len());
    }

    pub(crate) fn flush(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        let written = if self.compress && self.len >= MIN_COMPRESSED_BYTES && self.deflate()? {
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
            out.write_all(self.pending())
        };
        self.len = 0;
        written
    }

    /// Compresses the pending packets into `deflated`; false when that saved nothing.
    fn deflate(&mut self) -> io::Result<bool> {
        let compressor = self.compressor.get_or_insert_with(|| Compress::new(Compression::new(LEVEL), true));
        compressor.reset();
        self.deflated.clear();
        let input = &self.buf[..self.len];
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
        Ok(self.deflated.len() + 8 < self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Timestamps;
    use crate::format::TYPE_SLICE_BEGIN;
    use crate::proto::Trace;
    use crate::sequence::Sequence;
    use crate::track_event::EventSpec;

    #[test]
    fn a_short_capture_touches_a_small_buffer_that_grows_in_place_to_a_full_chunk() {
        let mut chunk = Chunk::default();
        chunk.room(100)[..3].copy_from_slice(b"abc");
        chunk.filled(3);
        assert_eq!(chunk.buf.len(), FIRST_ROOM, "the first room is small");
        let at = chunk.buf.as_ptr();
        while chunk.len < CHUNK_BYTES {
            let room = chunk.room(1000);
            room[..1000].fill(7);
            chunk.filled(1000);
        }
        assert_eq!(chunk.buf.as_ptr(), at, "allocated once, grown in place");
        assert!(chunk.buf.len() <= CHUNK_BYTES + SPARE, "{}", chunk.buf.len());
        assert_eq!(&chunk.pending()[..4], b"abc\x07");
    }

    fn decode(bytes: &[u8]) -> Vec<TracePacket> {
        match Trace::decode(bytes) {
            Ok(trace) => trace.packet,
            Err(e) => panic!("our own bytes do not decode: {e}"),
        }
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
        enc.chunk.compress = true;
        let mut out = Vec::new();
        let mut seq = Sequence::start(&mut enc, &mut out, 7, Timestamps::Incremental, Some(99), 0).unwrap();
        let mut ts = 0;
        let mut step = |enc: &mut Encoder, out: &mut Vec<u8>| {
            ts += 300 + ts % 7;
            let spec = EventSpec {
                ts,
                kind: TYPE_SLICE_BEGIN,
                name: Some("step"),
                category: Some("bench"),
                ..EventSpec::default()
            };
            seq.event(enc, out, &spec).unwrap();
        };
        while enc.chunk.pending().len() < CHUNK_BYTES - 64 {
            step(&mut enc, &mut out);
        }
        assert!(out.is_empty(), "nothing reaches the file before the chunk is full");
        let plain = enc.chunk.pending().to_vec();
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
        assert!(enc.chunk.pending().is_empty());
    }

    #[test]
    fn without_compression_a_full_chunk_goes_out_as_it_is() {
        let plain = vec![7; MIN_COMPRESSED_BYTES * 4];
        let mut chunk = Chunk::holding(&plain, false);
        let mut out = Vec::new();
        chunk.flush(&mut out).unwrap();
        assert_eq!(out, plain);
    }

    #[test]
    fn a_short_chunk_goes_out_as_it_is() {
        let mut enc = Encoder::default();
        let mut out = Vec::new();
        Sequence::start(&mut enc, &mut out, 7, Timestamps::Incremental, Some(99), 0).unwrap();
        let plain = enc.chunk.pending().to_vec();
        assert!(!plain.is_empty() && plain.len() < MIN_COMPRESSED_BYTES);
        enc.flush(&mut out).unwrap();
        assert_eq!(out, plain);
        enc.flush(&mut out).unwrap();
        assert_eq!(out, plain, "a second flush writes nothing");
    }

    #[test]
    fn a_chunk_that_does_not_shrink_goes_out_as_it_is() {
        // A xorshift stream: nothing for the compressor to find.
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let plain: Vec<u8> = (0..MIN_COMPRESSED_BYTES * 2)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let mut chunk = Chunk::holding(&plain, true);
        let mut out = Vec::new();
        chunk.flush(&mut out).unwrap();
        assert_eq!(out, plain);
    }
}
