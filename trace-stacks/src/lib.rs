//! Sampled CPU call stacks of chosen threads of this process: which code
//! burns the CPU, symbolized once at the finish, with no signal ever sent to
//! the program.
//!
//! # Overview
//!
//! - [`Sampler::start`] asks the kernel once whether this process may sample
//!   itself and starts a reader and a symbolizer thread; [`Sampler::add_thread`] (or
//!   [`Sampler::add_current_thread`]) opens a perf event on a thread:
//!   `perf_event_open(2)` with the software clock `PERF_COUNT_SW_TASK_CLOCK`
//!   (one sample per interval of the thread's CPU time), user space only
//!   (`exclude_kernel`, so `perf_event_paranoid` 2 allows it), times on
//!   `CLOCK_MONOTONIC` (`use_clockid`, the clock of `Instant`), and a copy
//!   of the user registers and the top 32 KiB of the user stack.
//! - The kernel writes each sample into the event's mmap'd ring buffer; no
//!   signal, no `EINTR`, no handler reaches the program. The reader thread
//!   waits on every buffer with `poll` (woken when one is a quarter full), and
//!   unwinds each sample as it reads it, keeping only its addresses. Samples
//!   the kernel could not store are counted from `PERF_RECORD_LOST`.
//! - Unwinding uses the `.eh_frame` (DWARF CFI) of every loaded object, so
//!   release builds without frame pointers unwind to the thread's start;
//!   where an address has no unwind information, the frame-pointer chain.
//!   Samples that do not reach the thread's start are counted.
//! - A second thread of the sampler symbolizes, each distinct address once,
//!   as the reader hands it batches of samples: demangled function names,
//!   inlined frames and `file:line` where the object has DWARF, the symbol
//!   table otherwise, shared libraries and the vdso through their mappings.
//!   It opens the program's executable as soon as it starts, and reads the
//!   DWARF one compilation unit at a time, the units the samples touch.
//! - [`Sampler::finish`] stops the events, drains them and waits for the
//!   last batch to be symbolized. The result is a [`Stacks`]: samples
//!   (thread, time, frames), frames, mappings, counts and the symbolization
//!   time. [`Stacks::write_folded`] writes folded stacks with the caller's
//!   span names as their first frames. Both threads free what they hold
//!   after handing it over, while the program goes on.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! let sampler = trace_stacks::Sampler::start(Duration::from_millis(1))?;
//! sampler.add_current_thread()?;
//! let mut x = 0u64;
//! for i in 0..50_000_000u64 { x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i)); }
//! let stacks = sampler.finish();
//! println!("{} samples, {} not unwound", stacks.counts.taken, stacks.counts.not_unwound);
//! stacks.write_folded(std::io::stdout(), |_, _| Vec::new())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Environment and features
//!
//! No environment variable and no feature: the caller chooses the interval
//! and the threads. The kernel's `kernel.perf_event_paranoid` must be 2 or
//! less, and the locked-memory limit must hold a 512 KiB buffer per thread
//! (the sampler tries 256, 128 and 64 KiB before it gives up on a
//! thread).
//!
//! # Choice of crates
//!
//! - Unwinding: samply's `framehop`, which unwinds x86-64 and aarch64 from
//!   `.eh_frame` given registers and stack bytes, caches rules per address
//!   and falls back to frame pointers where an address has no unwind
//!   information.
//! - Objects: `object`, reading only the sections unwinding needs through
//!   a read cache, not whole files.
//! - Symbols: `gimli` read directly (the gimli framehop uses), a
//!   compilation unit at a time: `.debug_aranges` says which unit holds an
//!   address (the units' own ranges where an object has no such section),
//!   and only that unit's line table and entries are parsed.
//!   `addr2line`, which gives the same answers, first reads every unit's
//!   header, line-table header and ranges: in a Rust binary that links a
//!   thousand units, that was most of the time a short capture waited for
//!   (figures: the notebook, `docs/dev/performance-history.md`). A test holds
//!   the frames, names, files and lines to addr2line's for every function
//!   of its own binary (addr2line is a dev-dependency only). `memmap2` maps
//!   the file, `object` reads its sections and symbol table,
//!   `rustc-demangle` demangles.
//! - Frame pointers alone would not do: a Rust build keeps none by default,
//!   in debug as in release, so the kernel's call chains
//!   (`PERF_SAMPLE_CALLCHAIN`) stop or go astray after the leaf; every whole stack of the
//!   tests is unwound from `.eh_frame`.
//!
//! # What it does not do
//!
//! - It samples no thread it is not given, and no child process.
//! - Nothing in kernel space: a thread inside a system call is not sampled.
//! - No sampler off Linux x86-64: [`Sampler::start`] returns
//!   [`StacksErrorKind::Unsupported`] there, and everything else compiles.
//! - No DWARF lookup for an address `.debug_aranges` does not cover (a unit
//!   the compiler left out of it): it gets the symbol table's name. (An
//!   object without the section at all, as clang builds by default, is
//!   read through its units' own ranges.) No
//!   compressed debug sections, split DWARF (`.dwo`, `.dwp`) or separate
//!   debug files (`.gnu_debuglink`), and no
//!   unwinding of code without unwind information and frame pointers (a
//!   JIT's): such samples are counted as not unwound.
//! - No trace file of its own: [`perfetto_packets`] gives the packets the
//!   Perfetto sink appends (through trace-core's `CpuStacks`), written with
//!   `trace-proto-wire`, the workspace's one protobuf writer.

#![deny(missing_docs)]

mod error;
mod folded;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod linux;
mod model;
mod perfetto_packets;
mod sampler;

pub use error::{StacksError, StacksErrorKind};
pub use folded::NOT_UNWOUND_FRAME;
pub use model::{Frame, Mapping, Sample, SampleCounts, Stacks};
pub use perfetto_packets::{perfetto_clock_snapshot, perfetto_packets};
pub use sampler::{current_thread_id, Sampler};
