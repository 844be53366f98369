//! Packets on their way to the file: the chunk they collect in, and its
//! compression into one `compressed_packets` packet.

use std::io::{self, Write};

use flate2::{Compress, Compression, FlushCompress, Status};
use trace_proto_wire as wire;

use crate::format::{packet, trace};

/// Packets held before they go to the file: a chunk goes out once it holds
/// this many bytes (and so holds at most this many and one packet more).
pub(crate) const CHUNK_BYTES: usize = 64 * 1024;
/// A chunk smaller than this goes to the file as it is, also when compressing:
/// the packets of a short capture stay readable by any protobuf decoder, and
/// the compressor (a few hundred KiB of tables) is never set up for them.
pub(crate) const MIN_COMPRESSED_BYTES: usize = 8 * 1024;
/// zlib's fastest level: a chunk of track events shrinks about fivefold even
/// so, and the writer thread spends little on it.
const LEVEL: u32 = 1;

/// Packets on their way to the file, a chunk at a time, compressed when the
/// sink was made with `PerfettoSink::compressed`.
///
/// Packets are appended to [`Chunk::packets`] as `Trace.packet` entries. A
/// full chunk goes to the file as it is or, compressed, as one `TracePacket`
/// holding only `compressed_packets`: the zlib stream of the chunk's entries,
/// which the trace processor inflates and reads as if they stood in the file
/// in its place (the packet belongs to no sequence; the packets inside keep
/// theirs, in order, so the file stays a valid trace, and concatenating two
/// files still gives one). A chunk that does not shrink goes out as it is.
pub(crate) struct Chunk {
    /// The packets held, as `Trace.packet` entries.
    pub(crate) packets: Vec<u8>,
    compress: bool,
    compressor: Option<Compress>,
    deflated: Vec<u8>,
    /// The compressed packet's key and length, and its field's (reused).
    head: Vec<u8>,
}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunk").field("pending", &self.packets.len()).finish_non_exhaustive()
    }
}

impl Chunk {
    /// An empty chunk; `compress` says whether full chunks are compressed.
    pub(crate) fn new(compress: bool) -> Self {
        // A full chunk and room for the packet that fills it, made once: the
        // pages are touched only as packets fill them.
        let packets = Vec::with_capacity(CHUNK_BYTES + 4096);
        Chunk { packets, compress, compressor: None, deflated: Vec::new(), head: Vec::new() }
    }

    /// Opens the next packet's entry: write its fields into
    /// [`Chunk::packets`], then [`Chunk::close_packet`].
    #[inline]
    pub(crate) fn open_packet(&mut self) -> wire::Nested {
        wire::open(&mut self.packets, trace::PACKET)
    }

    /// Closes the packet opened by [`Chunk::open_packet`], and sends the
    /// chunk to the file if that filled it.
    #[inline]
    pub(crate) fn close_packet(&mut self, entry: wire::Nested, out: &mut dyn Write) -> io::Result<()> {
        wire::close(&mut self.packets, entry);
        if self.packets.len() >= CHUNK_BYTES {
            self.flush(out)?;
        }
        Ok(())
    }

    /// Writes the packets held to the file.
    pub(crate) fn flush(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if self.packets.is_empty() {
            return Ok(());
        }
        let written = if self.compress && self.packets.len() >= MIN_COMPRESSED_BYTES && self.deflate()? {
            let head = &mut self.head;
            head.clear();
            let len = self.deflated.len() as u64;
            let field_key = wire::key(packet::COMPRESSED_PACKETS, wire::WireType::Len);
            let packet_len = wire::varint_len(field_key) as u64 + wire::varint_len(len) as u64 + len;
            wire::put_key(head, trace::PACKET, wire::WireType::Len);
            wire::put_varint(head, packet_len);
            wire::put_key(head, packet::COMPRESSED_PACKETS, wire::WireType::Len);
            wire::put_varint(head, len);
            out.write_all(head).and_then(|()| out.write_all(&self.deflated))
        } else {
            out.write_all(&self.packets)
        };
        self.packets.clear();
        written
    }

    /// Compresses the packets held into `deflated`; false when that saved nothing.
    fn deflate(&mut self) -> io::Result<bool> {
        let compressor = self.compressor.get_or_insert_with(|| Compress::new(Compression::new(LEVEL), true));
        compressor.reset();
        self.deflated.clear();
        let input = &self.packets[..];
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
        Ok(self.deflated.len() + 8 < self.packets.len())
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::proto::{Trace, TracePacket};

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

    /// Appends one small packet (a timestamp and a sequence id) to `chunk`.
    fn small_packet(chunk: &mut Chunk, ts: u64, out: &mut Vec<u8>) {
        let entry = chunk.open_packet();
        wire::put_uint(&mut chunk.packets, packet::TIMESTAMP, ts);
        wire::put_uint(&mut chunk.packets, packet::SEQUENCE_ID, 7);
        chunk.close_packet(entry, out).unwrap();
    }

    #[test]
    fn a_full_chunk_goes_out_as_one_compressed_packet_holding_the_same_packets() {
        let mut chunk = Chunk::new(true);
        let mut out = Vec::new();
        let mut ts = 0;
        while chunk.packets.len() < CHUNK_BYTES - 64 {
            ts += 300 + ts % 7;
            small_packet(&mut chunk, ts, &mut out);
        }
        assert!(out.is_empty(), "nothing reaches the file before the chunk is full");
        let plain = chunk.packets.clone();
        chunk.flush(&mut out).unwrap();
        let packets = decode(&out);
        assert_eq!(packets.len(), 1, "one packet holds the chunk");
        let compressed = packets[0].compressed_packets.clone().unwrap_or_default();
        let only = TracePacket { compressed_packets: Some(compressed.clone()), ..Default::default() };
        assert!(packets[0] == only, "the packet holds nothing but the compressed packets");
        assert!(inflate(&compressed) == plain, "it inflates to the packets, byte for byte");
        assert!(out.len() * 2 < plain.len(), "{} bytes for {} of packets", out.len(), plain.len());
        // A chunk that fills up goes out by itself.
        out.clear();
        while out.is_empty() {
            ts += 1;
            small_packet(&mut chunk, ts, &mut out);
        }
        assert_eq!(decode(&out).len(), 1);
        assert!(chunk.packets.is_empty());
    }

    #[test]
    fn without_compression_a_full_chunk_goes_out_as_it_is() {
        let mut chunk = Chunk::new(false);
        let mut out = Vec::new();
        while out.is_empty() {
            small_packet(&mut chunk, 1 << 40, &mut out);
        }
        assert!(out.len() >= CHUNK_BYTES);
        let packets = decode(&out);
        assert!(packets.len() > 1000 && packets.iter().all(|p| p.timestamp == Some(1 << 40)), "as they are");
    }

    #[test]
    fn a_short_chunk_goes_out_as_it_is_and_a_second_flush_writes_nothing() {
        let mut chunk = Chunk::new(true);
        let mut out = Vec::new();
        small_packet(&mut chunk, 5, &mut out);
        let plain = chunk.packets.clone();
        assert!(plain.len() < MIN_COMPRESSED_BYTES);
        chunk.flush(&mut out).unwrap();
        assert_eq!(out, plain);
        chunk.flush(&mut out).unwrap();
        assert_eq!(out, plain);
    }

    #[test]
    fn a_chunk_that_does_not_shrink_goes_out_as_it_is() {
        // A xorshift stream: nothing for the compressor to find.
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let mut chunk = Chunk::new(true);
        chunk.packets.extend((0..MIN_COMPRESSED_BYTES * 2).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        }));
        let plain = chunk.packets.clone();
        let mut out = Vec::new();
        chunk.flush(&mut out).unwrap();
        assert_eq!(out, plain);
    }
}
