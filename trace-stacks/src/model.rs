//! What a sampling run gives: samples, the frames they name and the mappings
//! those frames lie in, symbolized once at the finish.

use std::collections::BTreeMap;
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
    /// How long symbolization took: the wall time the sampler's symbolizer
    /// thread spent opening objects' symbols and naming addresses, while
    /// the program ran and at the finish.
    pub symbolization_time: Duration,
    /// The CPU time of the sampler's reader thread: reading `/proc/self/maps`
    /// and the objects' unwind sections, waiting on the buffers, parsing
    /// and unwinding every sample.
    pub reader_cpu_time: Duration,
}

impl Stacks {
    /// The `n` functions that the given samples were executing most often
    /// (their self samples: the leaf frame, an inlined function if the leaf
    /// was inlined), most first, ties by name; for the summary's top
    /// functions of a span.
    pub fn top_functions<'a>(
        &'a self,
        samples: impl IntoIterator<Item = &'a Sample>,
        n: usize,
    ) -> Vec<(&'a str, u64)> {
        let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
        for sample in samples {
            let leaf = sample.frames.first().and_then(|&i| self.frames.get(i as usize));
            *counts.entry(leaf.map_or("??", |f| f.function.as_str())).or_default() += 1;
        }
        let mut top: Vec<(&str, u64)> = counts.into_iter().collect();
        top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        top.truncate(n);
        top
    }

    /// For each sample, the caller's spans open around it on its thread,
    /// outermost first, as the `name` each was given: `spans` are
    /// `(thread, begin_ns, end_ns, name)` on the samples' clock (sorted here).
    /// A thread's spans nest (each ends before the one it was entered in), so
    /// one sweep in time order finds them.
    pub fn enclosing_spans(&self, spans: &mut [(u64, u64, u64, u32)]) -> Vec<Vec<u32>> {
        // Outermost first where two begin together.
        spans.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)).then(b.2.cmp(&a.2)));
        let samples: Vec<(u64, u64)> = self.samples.iter().map(|s| (u64::from(s.tid), s.time_ns)).collect();
        let mut order: Vec<usize> = (0..samples.len()).collect();
        order.sort_unstable_by_key(|&i| samples[i]);
        let mut out = vec![Vec::new(); samples.len()];
        let mut next = 0;
        let mut open: Vec<(u64, u64, u32)> = Vec::new();
        let mut thread = None;
        for i in order {
            let (tid, time) = samples[i];
            if thread != Some(tid) {
                thread = Some(tid);
                open.clear();
                while next < spans.len() && spans[next].0 < tid {
                    next += 1;
                }
            }
            while let Some(&(t, begin, end, name)) = spans.get(next) {
                if t != tid || begin > time {
                    break;
                }
                while open.last().is_some_and(|o| o.1 < begin) {
                    open.pop();
                }
                open.push((begin, end, name));
                next += 1;
            }
            while open.last().is_some_and(|o| o.1 < time) {
                open.pop();
            }
            // A span that ended before an outer one still open is gone too.
            out[i] = open.iter().filter(|o| o.0 <= time && time <= o.1).map(|o| o.2).collect();
        }
        out
    }
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

/// A frame of the given name and nothing else, for tests.
#[cfg(test)]
pub(crate) fn frame(name: &str) -> Frame {
    Frame { function: name.to_string(), file: None, line: None, mapping: None, rel_pc: 0, inlined: false }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_top_functions_count_leaf_frames_most_first_and_ties_by_name() {
        let stacks = Stacks {
            frames: vec![frame("lex"), frame("parse"), frame("main"), frame("hash")],
            samples: vec![
                Sample { tid: 1, time_ns: 1, frames: vec![0, 1, 2], unwound: true },
                Sample { tid: 1, time_ns: 2, frames: vec![1, 2], unwound: true },
                Sample { tid: 1, time_ns: 3, frames: vec![0, 2], unwound: true },
                Sample { tid: 1, time_ns: 4, frames: vec![3, 2], unwound: true },
                Sample { tid: 2, time_ns: 5, frames: vec![3], unwound: false },
                Sample { tid: 2, time_ns: 6, frames: vec![], unwound: false },
            ],
            ..Stacks::default()
        };
        assert_eq!(stacks.top_functions(&stacks.samples, 2), [("hash", 2), ("lex", 2)]);
        let first_thread = stacks.samples.iter().filter(|s| s.tid == 1);
        assert_eq!(stacks.top_functions(first_thread, 5), [("lex", 2), ("hash", 1), ("parse", 1)]);
        assert_eq!(stacks.top_functions(&stacks.samples[5..], 5), [("??", 1)]);
    }

    #[test]
    fn each_sample_finds_the_spans_open_around_it_on_its_own_thread_outermost_first() {
        let at = |tid, time_ns| Sample { tid, time_ns, frames: Vec::new(), unwound: true };
        let samples = [(1, 50), (1, 125), (1, 150), (2, 150), (1, 205), (1, 220), (1, 2000), (3, 10)];
        let stacks =
            Stacks { samples: samples.iter().map(|&(t, ns)| at(t, ns)).collect(), ..Stacks::default() };
        // build 0, compile 1, link 2, other 3.
        let mut spans =
            [(1, 100, 200, 1), (1, 210, 250, 2), (1, 0, 1000, 0), (2, 0, 1000, 3), (1, 120, 130, 2)];
        let got = stacks.enclosing_spans(&mut spans);
        assert_eq!(got, [vec![0], vec![0, 1, 2], vec![0, 1], vec![3], vec![0], vec![0, 2], vec![], vec![]]);
    }
}
