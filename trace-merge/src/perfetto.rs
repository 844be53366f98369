//! The Perfetto side: the captures' packets copied into one trace, clock
//! snapshots first in time order, and the flows on a sequence of the merge's
//! own.
//!
//! Only what the merge needs of the schema is read, by walking the protobuf
//! wire format: `Trace.packet` (1), and in a `TracePacket` its
//! `clock_snapshot` (6), `trusted_packet_sequence_id` (10),
//! `compressed_packets` (50) and `track_descriptor` (60).

use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::Path;

use flate2::write::ZlibEncoder;
use flate2::Compression;
use trace_proto_wire::{self as wire, Value as Wire};

use crate::{Capture, ErrorKind, Link, MergeError};

const CLOCK_MONOTONIC: u64 = 3;
const CLOCK_BOOTTIME: u64 = 6;
const TYPE_INSTANT: u64 = 3;
const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
/// Packets are compressed in chunks of this many bytes, as the sink does.
const CHUNK: usize = 64 * 1024;

/// The fields of one message, or `None` where the bytes are not a message.
fn fields(buf: &[u8]) -> Option<Vec<(u32, Wire<'_>)>> {
    wire::Fields::new(buf).collect::<Result<_, _>>().ok()
}

/// Like [`fields`], with each field's bytes (key included) in `buf`.
fn raw_fields(buf: &[u8]) -> Option<Vec<(u32, Wire<'_>, std::ops::Range<usize>)>> {
    let mut fields = wire::Fields::new(buf);
    let mut out = Vec::new();
    loop {
        let start = fields.position();
        match fields.next() {
            None => return Some(out),
            Some(Ok((field, value))) => out.push((field, value, start..fields.position())),
            Some(Err(_)) => return None,
        }
    }
}

/// One packet of an input, with what the merge reads of it.
struct Packet {
    bytes: Vec<u8>,
    /// The CLOCK_MONOTONIC time of its clock snapshot, if it holds one.
    snapshot_ns: Option<u64>,
}

/// A track an input declares.
#[derive(Default)]
struct Track {
    uuid: u64,
    name: Option<String>,
    pid: Option<u64>,
    tid: Option<u64>,
}

struct Input {
    packets: Vec<Packet>,
    tracks: Vec<Track>,
    sequences: HashSet<u64>,
}

fn read(path: &Path) -> Result<Input, MergeError> {
    let bytes = std::fs::read(path).map_err(|e| MergeError::new(path, ErrorKind::Read, e.to_string()))?;
    let mut input = Input { packets: Vec::new(), tracks: Vec::new(), sequences: HashSet::new() };
    packets(&bytes, &mut input, true).ok_or_else(|| {
        MergeError::new(path, ErrorKind::Malformed, "is not a Perfetto trace (bad protobuf)")
    })?;
    Ok(input)
}

fn packets(trace: &[u8], input: &mut Input, outer: bool) -> Option<()> {
    for (field, value) in fields(trace)? {
        let (1, Wire::Bytes(packet)) = (field, value) else { continue };
        let mut snapshot_ns = None;
        let mut compressed = None;
        for (f, v) in fields(packet)? {
            match (f, v) {
                (6, Wire::Bytes(snapshot)) => snapshot_ns = monotonic(snapshot),
                (10, Wire::Varint(seq)) => {
                    input.sequences.insert(seq);
                }
                (50, Wire::Bytes(data)) if outer => compressed = Some(data),
                (60, Wire::Bytes(desc)) => input.tracks.push(track(desc)?),
                _ => {}
            }
        }
        match compressed {
            Some(data) => {
                let mut inflated = Vec::new();
                flate2::read::ZlibDecoder::new(data).read_to_end(&mut inflated).ok()?;
                packets(&inflated, input, false)?;
            }
            None => input.packets.push(Packet { bytes: packet.to_vec(), snapshot_ns }),
        }
    }
    Some(())
}

/// A clock's id and timestamp in a `ClockSnapshot.Clock`.
fn clock(clock: &[u8]) -> Option<(Option<u64>, Option<u64>)> {
    let mut id = None;
    let mut ts = None;
    for (f, v) in fields(clock)? {
        match (f, v) {
            (1, Wire::Varint(v)) => id = Some(v),
            (2, Wire::Varint(v)) => ts = Some(v),
            _ => {}
        }
    }
    Some((id, ts))
}

fn reading(snapshot: &[u8], wanted: u64) -> Option<u64> {
    fields(snapshot)?.into_iter().find_map(|(f, v)| {
        let (1, Wire::Bytes(c)) = (f, v) else { return None };
        let (id, ts) = clock(c)?;
        (id == Some(wanted)).then_some(ts).flatten()
    })
}

fn monotonic(snapshot: &[u8]) -> Option<u64> {
    reading(snapshot, CLOCK_MONOTONIC)
}

/// The lead of BOOTTIME over MONOTONIC in `packet`'s snapshot.
fn boot_lead(packet: &[u8]) -> Option<u64> {
    fields(packet)?.into_iter().find_map(|(f, v)| {
        let (6, Wire::Bytes(snapshot)) = (f, v) else { return None };
        reading(snapshot, CLOCK_BOOTTIME)?.checked_sub(monotonic(snapshot)?)
    })
}

/// `packet` with the BOOTTIME of its snapshot set to MONOTONIC + `lead`;
/// every other byte as it was.
fn with_boot_lead(packet: &[u8], lead: u64) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(packet.len() + 4);
    for (f, v, range) in raw_fields(packet)? {
        let (6, Wire::Bytes(snapshot)) = (f, v) else {
            out.extend_from_slice(&packet[range]);
            continue;
        };
        let mono = monotonic(snapshot)?;
        let mut snap = Vec::with_capacity(snapshot.len() + 4);
        for (f, v, range) in raw_fields(snapshot)? {
            match (f, v) {
                (1, Wire::Bytes(c)) if clock(c)?.0 == Some(CLOCK_BOOTTIME) => {
                    let mut c2 = Vec::with_capacity(c.len() + 2);
                    for (f, _, r) in raw_fields(c)? {
                        if f != 2 {
                            c2.extend_from_slice(&c[r]);
                        }
                    }
                    wire::put_uint(&mut c2, 2, mono + lead);
                    wire::put_bytes(&mut snap, 1, &c2);
                }
                _ => snap.extend_from_slice(&snapshot[range]),
            }
        }
        wire::put_bytes(&mut out, 6, &snap);
    }
    Some(out)
}

fn track(desc: &[u8]) -> Option<Track> {
    let mut t = Track::default();
    for (f, v) in fields(desc)? {
        match (f, v) {
            (1, Wire::Varint(uuid)) => t.uuid = uuid,
            (2, Wire::Bytes(name)) => t.name = Some(String::from_utf8_lossy(name).into_owned()),
            (3, Wire::Bytes(process)) => {
                for (f, v) in fields(process)? {
                    if let (1, Wire::Varint(pid)) = (f, v) {
                        t.pid = Some(pid);
                    }
                }
            }
            (4, Wire::Bytes(thread)) => {
                for (f, v) in fields(thread)? {
                    match (f, v) {
                        (1, Wire::Varint(pid)) => t.pid = Some(pid),
                        (2, Wire::Varint(tid)) => t.tid = Some(tid),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Some(t)
}

impl Input {
    fn thread_track(&self, pid: u64, tid: u64) -> Option<u64> {
        self.tracks.iter().find(|t| t.pid == Some(pid) && t.tid == Some(tid)).map(|t| t.uuid)
    }

    fn process_track(&self, pid: u64) -> Option<u64> {
        self.tracks.iter().find(|t| t.pid == Some(pid) && t.tid.is_none()).map(|t| t.uuid)
    }
}

/// Packets to the file, compressed a chunk at a time.
struct Out<W: Write> {
    w: W,
    chunk: Vec<u8>,
}

impl<W: Write> Out<W> {
    fn packet(&mut self, packet: &[u8]) -> std::io::Result<()> {
        wire::put_bytes(&mut self.chunk, 1, packet);
        if self.chunk.len() >= CHUNK {
            self.flush_chunk()?;
        }
        Ok(())
    }

    fn flush_chunk(&mut self) -> std::io::Result<()> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        let mut z = ZlibEncoder::new(Vec::new(), Compression::default());
        z.write_all(&self.chunk)?;
        let data = z.finish()?;
        let mut entry = Vec::with_capacity(data.len() + 16);
        let packet = wire::open(&mut entry, 1);
        wire::put_bytes(&mut entry, 50, &data);
        wire::close(&mut entry, packet);
        self.w.write_all(&entry)?;
        self.chunk.clear();
        Ok(())
    }
}

/// An instant at `ts` on `track`, beginning (`flow_field` 47) or ending
/// (48) flow `flow`.
fn flow_packet(
    seq: u64,
    ts: u64,
    track: u64,
    name: &str,
    flow_field: u32,
    flow: u64,
    first: bool,
) -> Vec<u8> {
    let mut event = Vec::new();
    wire::put_uint(&mut event, 9, TYPE_INSTANT);
    wire::put_uint(&mut event, 11, track);
    wire::put_str(&mut event, 23, name);
    // Repeated fixed64, unpacked: one key per value, as the schema declares.
    wire::put_fixed64(&mut event, flow_field, flow);
    let mut p = Vec::new();
    wire::put_uint(&mut p, 8, ts);
    wire::put_uint(&mut p, 10, seq);
    wire::put_bytes(&mut p, 11, &event);
    if first {
        wire::put_uint(&mut p, 13, SEQ_INCREMENTAL_STATE_CLEARED);
    }
    wire::put_uint(&mut p, 58, CLOCK_MONOTONIC);
    p
}

pub(crate) fn write(family: &[Capture], links: &[Link], path: &Path) -> Result<(), MergeError> {
    let inputs: Vec<Option<Input>> =
        family.iter().map(|c| c.pftrace.as_deref().map(read).transpose()).collect::<Result<_, _>>()?;
    let err = |e: std::io::Error| MergeError::new(path, ErrorKind::Write, e.to_string());
    let file = std::fs::File::create(path).map_err(err)?;
    let mut out = Out { w: std::io::BufWriter::new(file), chunk: Vec::with_capacity(CHUNK * 2) };

    // Every sequence's first packet (its clock snapshot) first, by time;
    // then the other packets, input by input, in their order.
    let mut firsts: Vec<(u64, &Packet)> = inputs
        .iter()
        .flatten()
        .flat_map(|i| i.packets.iter())
        .filter_map(|p| p.snapshot_ns.map(|t| (t, p)))
        .collect();
    firsts.sort_by_key(|(t, _)| *t);
    // BOOTTIME runs ahead of MONOTONIC by the time the machine spent
    // suspended: one lead for the whole family (the earliest snapshot's), so
    // that the jitter of each sequence's reading of it (a few hundred ns)
    // cannot make BOOTTIME go back where MONOTONIC goes forward.
    let lead = firsts.first().and_then(|(_, p)| boot_lead(&p.bytes));
    for (_, p) in &firsts {
        match lead.and_then(|lead| with_boot_lead(&p.bytes, lead)) {
            Some(bytes) => out.packet(&bytes).map_err(err)?,
            None => out.packet(&p.bytes).map_err(err)?,
        }
    }
    for input in inputs.iter().flatten() {
        for p in input.packets.iter().filter(|p| p.snapshot_ns.is_none()) {
            out.packet(&p.bytes).map_err(err)?;
        }
    }

    // The flows, on a sequence no input uses.
    let used: HashSet<u64> = inputs.iter().flatten().flat_map(|i| i.sequences.iter().copied()).collect();
    let seq = (1..).find(|s| !used.contains(s)).unwrap_or(1);
    let mut first = true;
    for (n, link) in links.iter().enumerate() {
        let (Some(parent), Some(child)) = (&inputs[link.parent], &inputs[link.child]) else { continue };
        let ppid = u64::from(family[link.parent].timings.pid);
        let cpid = u64::from(family[link.child].timings.pid);
        let (source, ts) = match &link.action {
            Some(a) => (parent.thread_track(a.pid, a.tid), link.root.begin_ns.clamp(a.begin_ns, a.end_ns)),
            None => (
                parent.thread_track(ppid, link.parent_tid).or(parent.process_track(ppid)),
                link.root.begin_ns,
            ),
        };
        let target = child.thread_track(cpid, link.root.tid).or(child.process_track(cpid));
        let (Some(source), Some(target)) = (source, target) else { continue };
        let flow = n as u64 + 1;
        let name = format!("start {} (pid {cpid})", family[link.child].timings.command);
        out.packet(&flow_packet(seq, ts, source, &name, 47, flow, first)).map_err(err)?;
        first = false;
        // Just inside the child's root slice, so that the instant is one of
        // its descendants rather than its sibling.
        let at = (link.root.begin_ns + 1).min(link.root.end_ns);
        let name = format!("started by {}", family[link.parent].timings.command);
        out.packet(&flow_packet(seq, at, target, &name, 48, flow, false)).map_err(err)?;
    }
    out.flush_chunk().map_err(err)?;
    out.w.flush().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock_msg(id: u64, ts: u64) -> Vec<u8> {
        let mut c = Vec::new();
        wire::put_uint(&mut c, 1, id);
        wire::put_uint(&mut c, 2, ts);
        c
    }

    #[test]
    fn a_snapshot_gets_the_familys_boottime_lead_and_keeps_everything_else() {
        let mut snap = Vec::new();
        wire::put_bytes(&mut snap, 1, &clock_msg(CLOCK_BOOTTIME, 1_000_777));
        wire::put_bytes(&mut snap, 1, &clock_msg(CLOCK_MONOTONIC, 1_000_000));
        let mut packet = Vec::new();
        wire::put_bytes(&mut packet, 6, &snap);
        wire::put_uint(&mut packet, 10, 42);
        assert_eq!(boot_lead(&packet), Some(777));
        let fixed = with_boot_lead(&packet, 500).unwrap();
        assert_eq!(boot_lead(&fixed), Some(500));
        let seq = fields(&fixed).unwrap().into_iter().find_map(|(f, v)| match (f, v) {
            (10, Wire::Varint(s)) => Some(s),
            _ => None,
        });
        assert_eq!(seq, Some(42));
    }

    #[test]
    fn a_flow_instant_carries_one_unpacked_fixed64_flow_id() {
        let p = flow_packet(7, 123, 99, "start", 47, 0xdead_beef, true);
        let event = fields(&p)
            .unwrap()
            .into_iter()
            .find_map(|(f, v)| match (f, v) {
                (11, Wire::Bytes(e)) => Some(e.to_vec()),
                _ => None,
            })
            .unwrap();
        let raw = raw_fields(&event).unwrap();
        let flows: Vec<_> = raw.iter().filter(|(f, _, _)| *f == 47).collect();
        assert_eq!(flows.len(), 1);
        let r = flows[0].2.clone();
        assert_eq!(event[r.start], (47 << 3 | 1) as u8 | 0x80, "key of a fixed64, unpacked");
        assert_eq!(&event[r.end - 8..r.end], &0xdead_beefu64.to_le_bytes());
    }

    #[test]
    fn bytes_that_are_not_protobuf_are_refused() {
        assert!(fields(&[0x0a, 0x05, 1]).is_none(), "a length past the end");
        assert!(fields(&[0x0f]).is_none(), "an unknown wire type");
    }
}
