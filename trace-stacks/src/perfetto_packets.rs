//! The samples as Perfetto `TracePacket`s, written with the workspace's one
//! protobuf wire writer (`trace-proto-wire`, the Perfetto sink's too). Field numbers are those of Perfetto v58's
//! `trace_packet.proto`, `interned_data.proto`, `profile_common.proto` and
//! `profile_packet.proto`.
//!
//! One sequence: a first packet that clears incremental state and interns
//! every mapping, build id, path component, function name, frame and
//! callstack; then one `perf_sample` per sample, timestamped on
//! `CLOCK_MONOTONIC`. Perfetto's trace processor imports them into
//! `perf_sample`, `stack_profile_callsite`, `stack_profile_frame` and
//! `stack_profile_mapping`, and the UI draws a flame graph of a selection.

use std::collections::HashMap;

use trace_proto_wire::{put_bytes, put_uint};

use crate::folded::NOT_UNWOUND_FRAME;
use crate::model::Stacks;

// TracePacket.
const PACKET_TIMESTAMP: u32 = 8;
const PACKET_SEQUENCE_ID: u32 = 10;
const PACKET_INTERNED_DATA: u32 = 12;
const PACKET_SEQUENCE_FLAGS: u32 = 13;
const PACKET_CLOCK_SNAPSHOT: u32 = 6;
const PACKET_TIMESTAMP_CLOCK_ID: u32 = 58;
const PACKET_PERF_SAMPLE: u32 = 66;
const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
/// `Trace.packet`.
const TRACE_PACKET: u32 = 1;

// ClockSnapshot and its Clock.
const SNAPSHOT_CLOCKS: u32 = 1;
const CLOCK_ID: u32 = 1;
const CLOCK_TIMESTAMP: u32 = 2;
const BUILTIN_CLOCK_MONOTONIC: u64 = 3;
const BUILTIN_CLOCK_BOOTTIME: u64 = 6;

// InternedData.
const INTERNED_FUNCTION_NAMES: u32 = 5;
const INTERNED_FRAMES: u32 = 6;
const INTERNED_CALLSTACKS: u32 = 7;
const INTERNED_BUILD_IDS: u32 = 16;
const INTERNED_MAPPING_PATHS: u32 = 17;
const INTERNED_MAPPINGS: u32 = 19;
// InternedString.
const STRING_IID: u32 = 1;
const STRING_STR: u32 = 2;
// Mapping.
const MAPPING_IID: u32 = 1;
const MAPPING_BUILD_ID: u32 = 2;
const MAPPING_START_OFFSET: u32 = 3;
const MAPPING_START: u32 = 4;
const MAPPING_END: u32 = 5;
const MAPPING_PATH_STRING_IDS: u32 = 7;
const MAPPING_EXACT_OFFSET: u32 = 8;
// Frame.
const FRAME_IID: u32 = 1;
const FRAME_FUNCTION_NAME_ID: u32 = 2;
const FRAME_MAPPING_ID: u32 = 3;
const FRAME_REL_PC: u32 = 4;
// Callstack.
const CALLSTACK_IID: u32 = 1;
const CALLSTACK_FRAME_IDS: u32 = 2;
// PerfSample.
const SAMPLE_PID: u32 = 2;
const SAMPLE_TID: u32 = 3;
const SAMPLE_CALLSTACK_IID: u32 = 4;
const SAMPLE_CPU_MODE: u32 = 5;
const CPU_MODE_USER: u64 = 2;

/// A `ClockSnapshot` packet relating `CLOCK_MONOTONIC`, the samples' clock,
/// to `CLOCK_BOOTTIME`, the trace's default clock, read at one moment. A
/// trace whose other packets already relate them needs none.
pub fn perfetto_clock_snapshot(boottime_ns: u64, monotonic_ns: u64) -> Vec<u8> {
    let clock = |id: u64, ns: u64| {
        let mut clock = Vec::new();
        put_uint(&mut clock, CLOCK_ID, id);
        put_uint(&mut clock, CLOCK_TIMESTAMP, ns);
        clock
    };
    let mut snapshot = Vec::new();
    put_bytes(&mut snapshot, SNAPSHOT_CLOCKS, &clock(BUILTIN_CLOCK_BOOTTIME, boottime_ns));
    put_bytes(&mut snapshot, SNAPSHOT_CLOCKS, &clock(BUILTIN_CLOCK_MONOTONIC, monotonic_ns));
    let mut packet = Vec::new();
    put_uint(&mut packet, PACKET_TIMESTAMP, boottime_ns);
    put_bytes(&mut packet, PACKET_CLOCK_SNAPSHOT, &snapshot);
    let mut out = Vec::new();
    put_bytes(&mut out, TRACE_PACKET, &packet);
    out
}

/// The samples of `stacks`, taken in process `pid`, as `Trace.packet`
/// entries on sequence `sequence_id` (unique in the trace): bytes that can
/// be appended to a `.pftrace` file. Frames inlined into a call share its
/// `rel_pc` and keep their own names; a stack not unwound to the thread's
/// start has [`NOT_UNWOUND_FRAME`] at its root.
pub fn perfetto_packets(stacks: &Stacks, pid: u32, sequence_id: u32) -> Vec<u8> {
    let mut interned = Vec::new();
    let mut strings = Interner::default();
    let mut paths = Interner::default();
    let mut build_ids = Interner::default();
    // Mapping iids are their index + 1; one more, empty, for frames outside
    // every mapping and for the root of stacks not unwound.
    let unknown_mapping = stacks.mappings.len() as u64 + 1;
    for (index, mapping) in stacks.mappings.iter().enumerate() {
        let mut message = Vec::new();
        put_uint(&mut message, MAPPING_IID, index as u64 + 1);
        if let Some(id) = &mapping.build_id {
            let (iid, new) = build_ids.intern(id);
            if new {
                put_bytes(&mut interned, INTERNED_BUILD_IDS, &string(iid, id));
            }
            put_uint(&mut message, MAPPING_BUILD_ID, iid);
        }
        put_uint(&mut message, MAPPING_START_OFFSET, mapping.offset);
        put_uint(&mut message, MAPPING_START, mapping.start);
        put_uint(&mut message, MAPPING_END, mapping.end);
        for component in mapping.path.split('/').filter(|c| !c.is_empty()) {
            let (iid, new) = paths.intern(component.as_bytes());
            if new {
                put_bytes(&mut interned, INTERNED_MAPPING_PATHS, &string(iid, component.as_bytes()));
            }
            put_uint(&mut message, MAPPING_PATH_STRING_IDS, iid);
        }
        put_uint(&mut message, MAPPING_EXACT_OFFSET, mapping.offset);
        put_bytes(&mut interned, INTERNED_MAPPINGS, &message);
    }
    let mut message = Vec::new();
    put_uint(&mut message, MAPPING_IID, unknown_mapping);
    put_bytes(&mut interned, INTERNED_MAPPINGS, &message);

    let mut frame = |interned: &mut Vec<u8>, iid: u64, name: &str, mapping: u64, rel_pc: u64| {
        let (name_iid, new) = strings.intern(name.as_bytes());
        if new {
            put_bytes(interned, INTERNED_FUNCTION_NAMES, &string(name_iid, name.as_bytes()));
        }
        let mut message = Vec::new();
        put_uint(&mut message, FRAME_IID, iid);
        put_uint(&mut message, FRAME_FUNCTION_NAME_ID, name_iid);
        put_uint(&mut message, FRAME_MAPPING_ID, mapping);
        put_uint(&mut message, FRAME_REL_PC, rel_pc);
        put_bytes(interned, INTERNED_FRAMES, &message);
    };
    // Frame iids are their index + 1; one more for the not-unwound root.
    for (index, f) in stacks.frames.iter().enumerate() {
        let mapping = f.mapping.map_or(unknown_mapping, |m| u64::from(m) + 1);
        frame(&mut interned, index as u64 + 1, &f.function, mapping, f.rel_pc);
    }
    let not_unwound_frame = stacks.frames.len() as u64 + 1;
    frame(&mut interned, not_unwound_frame, NOT_UNWOUND_FRAME, unknown_mapping, 0);

    let mut callstacks: HashMap<Vec<u64>, u64> = HashMap::new();
    let mut sample_callstacks = Vec::with_capacity(stacks.samples.len());
    for sample in &stacks.samples {
        // Root first.
        let mut ids: Vec<u64> = Vec::with_capacity(sample.frames.len() + 1);
        if !sample.unwound {
            ids.push(not_unwound_frame);
        }
        ids.extend(sample.frames.iter().rev().map(|&f| u64::from(f) + 1));
        let next = callstacks.len() as u64 + 1;
        let iid = *callstacks.entry(ids).or_insert_with_key(|ids| {
            let mut message = Vec::new();
            put_uint(&mut message, CALLSTACK_IID, next);
            for &id in ids {
                put_uint(&mut message, CALLSTACK_FRAME_IDS, id);
            }
            put_bytes(&mut interned, INTERNED_CALLSTACKS, &message);
            next
        });
        sample_callstacks.push(iid);
    }

    let mut out = Vec::new();
    let mut first = Vec::new();
    let first_time = stacks.samples.iter().map(|s| s.time_ns).min().unwrap_or(0);
    put_uint(&mut first, PACKET_TIMESTAMP, first_time);
    put_uint(&mut first, PACKET_TIMESTAMP_CLOCK_ID, BUILTIN_CLOCK_MONOTONIC);
    put_uint(&mut first, PACKET_SEQUENCE_ID, u64::from(sequence_id));
    put_uint(&mut first, PACKET_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
    put_bytes(&mut first, PACKET_INTERNED_DATA, &interned);
    put_bytes(&mut out, TRACE_PACKET, &first);

    let mut packet = Vec::new();
    let mut sample_message = Vec::new();
    for (sample, callstack) in stacks.samples.iter().zip(sample_callstacks) {
        sample_message.clear();
        put_uint(&mut sample_message, SAMPLE_PID, u64::from(pid));
        put_uint(&mut sample_message, SAMPLE_TID, u64::from(sample.tid));
        put_uint(&mut sample_message, SAMPLE_CALLSTACK_IID, callstack);
        put_uint(&mut sample_message, SAMPLE_CPU_MODE, CPU_MODE_USER);
        packet.clear();
        put_uint(&mut packet, PACKET_TIMESTAMP, sample.time_ns);
        put_uint(&mut packet, PACKET_TIMESTAMP_CLOCK_ID, BUILTIN_CLOCK_MONOTONIC);
        put_uint(&mut packet, PACKET_SEQUENCE_ID, u64::from(sequence_id));
        put_uint(&mut packet, PACKET_SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
        put_bytes(&mut packet, PACKET_PERF_SAMPLE, &sample_message);
        put_bytes(&mut out, TRACE_PACKET, &packet);
    }
    out
}

/// Iids for distinct byte strings of one interning table, from 1.
#[derive(Default)]
struct Interner {
    iids: HashMap<Vec<u8>, u64>,
}

impl Interner {
    /// The string's iid, and whether it is new (to be written).
    fn intern(&mut self, bytes: &[u8]) -> (u64, bool) {
        if let Some(&iid) = self.iids.get(bytes) {
            return (iid, false);
        }
        let iid = self.iids.len() as u64 + 1;
        self.iids.insert(bytes.to_vec(), iid);
        (iid, true)
    }
}

/// An `InternedString` message.
fn string(iid: u64, bytes: &[u8]) -> Vec<u8> {
    let mut message = Vec::new();
    put_uint(&mut message, STRING_IID, iid);
    put_bytes(&mut message, STRING_STR, bytes);
    message
}
