//! What a sampling run gives: samples, the frames they name and the mappings
//! those frames lie in, symbolized once at the finish.

use std::time::Duration;

/// Everything one [`Sampler`](crate::Sampler) recorded, unwound and
/// symbolized: what [`Sampler::finish`](crate::Sampler::finish) returns.
#[derive(Clone, Debug, Default)]
pub struct Stacks {
    /// The sampling interval: one sample per this much CPU time of a thread.
    pub interval: Duration,
    /// The executable mappings the frames lie in ([`Frame::mapping`] indexes
    /// this), one per loaded object.
    pub mappings: Vec<Mapping>,
    /// Every distinct frame seen, symbolized ([`Sample::frames`] indexes
    /// this). One return address gives several frames where functions were
    /// inlined into it.
    pub frames: Vec<Frame>,
    /// The samples in the order they were read: per thread in time order.
    pub samples: Vec<Sample>,
    /// How many samples were taken, lost and not unwound.
    pub counts: SampleCounts,
    /// How long symbolization took at the finish (wall time, on the thread
    /// that called `finish`).
    pub symbolization_time: Duration,
    /// The CPU time of the sampler's reader thread: reading `/proc/self/maps`
    /// and the objects' unwind sections, waiting on the buffers, parsing
    /// and unwinding every sample.
    pub reader_cpu_time: Duration,
}

/// One sample: where one thread was when it had used one more interval of
/// CPU time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    /// The thread's id (`gettid`).
    pub tid: u32,
    /// When the sample was taken, on `CLOCK_MONOTONIC` in nanoseconds: the
    /// clock of Rust's `Instant` on Linux.
    pub time_ns: u64,
    /// The stack, leaf first (the executing function at index 0, the thread's
    /// start last), as indices into [`Stacks::frames`].
    pub frames: Vec<u32>,
    /// Whether the stack was unwound to the thread's start (`_start` for the
    /// main thread, `clone3` for the others). When false, `frames` holds the
    /// part that could be unwound, leaf first.
    pub unwound: bool,
}

/// One frame of a stack, symbolized.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The function, demangled without its hash (`my_crate::parse::lex`); for
    /// an address no symbol covers, `0x<rel_pc> in <file name>` or
    /// `0x<address>` outside any mapping.
    pub function: String,
    /// The source file, where the object has debug information.
    pub file: Option<String>,
    /// The line in [`Frame::file`], where known.
    pub line: Option<u32>,
    /// The mapping the address lies in, an index into [`Stacks::mappings`].
    pub mapping: Option<u32>,
    /// The address relative to the mapped file: `address - start + offset` of
    /// its mapping, i.e. the file offset of the instruction (for a return
    /// address, of the byte before it, inside the call instruction). Outside
    /// any mapping it is the absolute address.
    pub rel_pc: u64,
    /// Whether this frame was inlined into the next one (its caller, which
    /// has the same `rel_pc`).
    pub inlined: bool,
}

/// One loaded object's executable mapping, as `/proc/self/maps` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// The file's path, or the kernel's name in brackets (`[vdso]`).
    pub path: String,
    /// The ELF build id (`.note.gnu.build-id`), when the object has one.
    pub build_id: Option<Vec<u8>>,
    /// The first address of the mapping.
    pub start: u64,
    /// The address one past its end.
    pub end: u64,
    /// The file offset mapped at `start`.
    pub offset: u64,
}

/// How many samples a run took and how many of them are whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleCounts {
    /// Samples read from the kernel (every one is in [`Stacks::samples`]).
    pub taken: u64,
    /// Samples the kernel dropped because a ring buffer was full
    /// (`PERF_RECORD_LOST`).
    pub lost: u64,
    /// Samples whose stack could not be unwound to the thread's start (too
    /// deep for the stack copy, or code without unwind information).
    pub not_unwound: u64,
}
