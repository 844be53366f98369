//! Sampled CPU call stacks of the capture's threads (`<P>_TRACE_STACKS`):
//! the sampler every thread joins when it first records into the capture,
//! the spans' intervals that name each sample's enclosing spans, and what
//! the sinks receive at the finish ([`CpuStacks`], [`crate::Sink::stacks`]).
//!
//! The sampling itself (perf events, unwinding, symbols) is the
//! `trace-stacks` crate's, behind this crate's `stacks` feature; without it
//! a capture that asks for stacks says it has none.

use std::collections::HashMap;
use std::io::{self, Write};
use std::time::Duration;

#[cfg(feature = "stacks")]
use parking_lot::Mutex;

use crate::capture::ROOT_TARGET;
use crate::event::Event;

/// How many functions [`SpanSamples::top_functions`] lists.
#[cfg_attr(not(feature = "stacks"), allow(dead_code))]
const TOP_FUNCTIONS: usize = 5;

/// The capture's sampler, while it runs: in the capture's threads' state, so
/// that each thread joins it where its buffer is created.
#[derive(Default)]
pub(crate) struct StacksSampler {
    #[cfg(feature = "stacks")]
    sampler: Mutex<Option<trace_stacks::Sampler>>,
    /// Threads whose perf event could not be opened.
    threads_refused: std::sync::atomic::AtomicU64,
    /// Set once sampling started, and kept after the finish took the sampler.
    started: std::sync::atomic::AtomicBool,
}

impl StacksSampler {
    /// Starts sampling at `interval`; the error is one line for the user.
    pub(crate) fn start(&self, interval: Duration) -> Result<(), String> {
        #[cfg(feature = "stacks")]
        {
            let sampler = trace_stacks::Sampler::start(interval).map_err(|e| e.to_string())?;
            *self.sampler.lock() = Some(sampler);
            self.started.store(true, std::sync::atomic::Ordering::Release);
            Ok(())
        }
        #[cfg(not(feature = "stacks"))]
        {
            let _ = interval;
            Err("CPU stacks: this build has none (the `stacks` feature of cabin-trace is off)".to_string())
        }
    }

    /// Whether sampling started (it may have finished since: the writer
    /// may start only at the finish).
    pub(crate) fn started(&self) -> bool {
        self.started.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Samples thread `tid` (the calling thread, as it registers) from now on.
    pub(crate) fn add_thread(&self, tid: u64) {
        #[cfg(feature = "stacks")]
        {
            let sampler = self.sampler.lock();
            let Some(sampler) = sampler.as_ref() else { return };
            let added = u32::try_from(tid).ok().map(|tid| sampler.add_thread(tid));
            if !matches!(added, Some(Ok(()))) {
                self.threads_refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        #[cfg(not(feature = "stacks"))]
        let _ = tid;
    }

    /// Stops sampling and takes what it gave: every later thread is not
    /// sampled.
    pub(crate) fn finish(&self, interval: Option<Duration>, unavailable: Option<String>) -> StacksEnd {
        // Out of the lock before symbolizing: a thread registering waits for it.
        #[cfg(feature = "stacks")]
        let sampler = self.sampler.lock().take();
        StacksEnd {
            interval,
            unavailable,
            threads_refused: self.threads_refused.load(std::sync::atomic::Ordering::Relaxed),
            #[cfg(feature = "stacks")]
            stacks: sampler.map(trace_stacks::Sampler::finish),
        }
    }
}

/// What the session hands the writer at the finish.
#[derive(Default)]
pub(crate) struct StacksEnd {
    interval: Option<Duration>,
    unavailable: Option<String>,
    threads_refused: u64,
    #[cfg(feature = "stacks")]
    stacks: Option<trace_stacks::Stacks>,
}

/// The writer's record of every span's interval on its thread, kept while
/// stacks are sampled, so that each sample finds the spans it lies in.
#[derive(Default)]
pub(crate) struct SpanIntervals {
    names: Vec<String>,
    index: HashMap<String, u32>,
    /// Thread, begin, end, name.
    spans: Vec<(u64, u64, u64, u32)>,
}

impl SpanIntervals {
    /// Keeps the interval of a span that ended on its thread (the capture's
    /// root span aside: every sample lies in it); other events are ignored.
    pub(crate) fn span_end(&mut self, event: &Event<'_>) {
        if let Event::SpanEnd { thread, ts, begin_ts, site, .. } = event {
            if site.target == ROOT_TARGET {
                return;
            }
            let name = match self.index.get(site.name) {
                Some(&i) => i,
                None => {
                    let i = self.names.len() as u32;
                    self.names.push(site.name.to_string());
                    self.index.insert(site.name.to_string(), i);
                    i
                }
            };
            self.spans.push((*thread, *begin_ts, *ts, name));
        }
    }
}

/// The samples of one span name: how many lie inside a span of that name,
/// and the functions they were executing most often.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpanSamples {
    /// The span's name.
    pub name: String,
    /// Samples taken while a span of this name was open on the sampled
    /// thread (once each, however deeply the name nests).
    pub samples: u64,
    /// The functions those samples were executing (their leaf frames), most
    /// samples first, with their counts; at most five.
    pub top_functions: Vec<(String, u64)>,
}

/// The CPU stacks of a capture, as the sinks receive them before they finish
/// ([`crate::Sink::stacks`]): whether they were asked for and taken, the counts, and
/// the samples by span.
#[derive(Debug, Default)]
pub struct CpuStacks {
    /// The sampling interval (`<P>_TRACE_STACKS`), `None` when stacks are off.
    pub interval: Option<Duration>,
    /// Why no stacks were taken although they were asked for (the kernel
    /// refused perf events, another platform, a build without the
    /// `stacks` feature): the warning's text.
    pub unavailable: Option<String>,
    /// Samples taken.
    pub taken: u64,
    /// Samples the kernel dropped (a full ring buffer).
    pub lost: u64,
    /// Samples whose stack was not unwound to the thread's start.
    pub not_unwound: u64,
    /// Threads of the capture whose perf event the kernel refused: not
    /// sampled.
    pub threads_refused: u64,
    /// The wall time symbolization took, on the sampler's own thread
    /// (mostly while the command ran).
    pub symbolization_time: Duration,
    /// The CPU time of the sampler's reader thread.
    pub reader_cpu_time: Duration,
    /// Per span name, the samples inside it: most samples first, then by
    /// name.
    pub spans: Vec<SpanSamples>,
    #[cfg(feature = "stacks")]
    detail: Option<Detail>,
}

/// The samples themselves and their enclosing spans.
#[cfg(feature = "stacks")]
#[derive(Debug)]
struct Detail {
    stacks: trace_stacks::Stacks,
    names: Vec<String>,
    /// Per sample, its enclosing spans, outermost first.
    enclosing: Vec<Vec<u32>>,
}

impl CpuStacks {
    /// Whether samples were taken.
    pub fn is_taken(&self) -> bool {
        #[cfg(feature = "stacks")]
        {
            self.detail.is_some()
        }
        #[cfg(not(feature = "stacks"))]
        {
            false
        }
    }

    /// Puts the samples of `end` in their spans.
    pub(crate) fn new(end: StacksEnd, intervals: Option<SpanIntervals>) -> CpuStacks {
        #[cfg(not(feature = "stacks"))]
        let _ = intervals;
        #[cfg_attr(not(feature = "stacks"), allow(unused_mut))]
        let mut out = CpuStacks {
            interval: end.interval,
            unavailable: end.unavailable,
            threads_refused: end.threads_refused,
            ..CpuStacks::default()
        };
        #[cfg(feature = "stacks")]
        if let Some(stacks) = end.stacks {
            out.taken = stacks.counts.taken;
            out.lost = stacks.counts.lost;
            out.not_unwound = stacks.counts.not_unwound;
            out.symbolization_time = stacks.symbolization_time;
            out.reader_cpu_time = stacks.reader_cpu_time;
            let mut intervals = intervals.unwrap_or_default();
            let enclosing = stacks.enclosing_spans(&mut intervals.spans);
            let mut by_name: Vec<Vec<&trace_stacks::Sample>> = vec![Vec::new(); intervals.names.len()];
            for (sample, spans) in stacks.samples.iter().zip(&enclosing) {
                // Once per name, however deeply it nests.
                for (k, &name) in spans.iter().enumerate() {
                    if !spans[..k].contains(&name) {
                        by_name[name as usize].push(sample);
                    }
                }
            }
            let mut spans: Vec<SpanSamples> = by_name
                .iter()
                .enumerate()
                .filter(|(_, samples)| !samples.is_empty())
                .map(|(name, samples)| SpanSamples {
                    name: intervals.names[name].clone(),
                    samples: samples.len() as u64,
                    top_functions: stacks
                        .top_functions(samples.iter().copied(), TOP_FUNCTIONS)
                        .into_iter()
                        .map(|(f, n)| (f.to_string(), n))
                        .collect(),
                })
                .collect();
            spans.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.name.cmp(&b.name)));
            out.spans = spans;
            out.detail = Some(Detail { stacks, names: intervals.names, enclosing });
        }
        out
    }

    /// Writes the samples as folded stacks (Brendan Gregg's format, read by
    /// inferno, speedscope and flamegraph.pl): one line per distinct stack,
    /// root first, the enclosing spans as its first frames
    /// (`span:build;span:compile;main;...;app::parse 42`). Nothing when no
    /// samples were taken.
    pub fn write_folded(&self, out: &mut dyn Write) -> io::Result<()> {
        #[cfg(feature = "stacks")]
        if let Some(d) = &self.detail {
            return d.stacks.write_folded(out, |index, _| {
                d.enclosing[index].iter().map(|&n| d.names[n as usize].clone()).collect()
            });
        }
        let _ = out;
        Ok(())
    }

    /// The samples as Perfetto `TracePacket`s of process `pid`, on a
    /// sequence of their own (interned mappings, frames and callstacks, then
    /// one `perf_sample` per sample on `CLOCK_MONOTONIC`): bytes to append
    /// to a `.pftrace` whose sequences already relate `CLOCK_MONOTONIC` to
    /// the trace's clock. Empty when no samples were taken.
    pub fn perfetto_packets(&self, pid: u32) -> Vec<u8> {
        #[cfg(feature = "stacks")]
        if let Some(d) = &self.detail {
            // Above the sink's own sequence ids (below 2^28), one per process
            // so that the captures of a family merge.
            let sequence_id = (1 << 28) | (pid & 0x0fff_ffff);
            return trace_stacks::perfetto_packets(&d.stacks, pid, sequence_id);
        }
        let _ = pid;
        Vec::new()
    }
}
