//! trace-core's integration tests: the event stream sinks see, the hot path's
//! allocations, what happens when the writer falls behind, and the capture's
//! own subscriber.

mod alloc;
mod async_spans_and_flows;
mod bad_input;
mod collect;
mod cpu;
mod cross_thread;
mod filter_props;
mod flood;
mod isolation;
mod platform;
mod samples;
mod stacks;
mod stream;
mod subscriber;
mod writer_start;

/// Counts heap allocations made by threads that opted in, so tests running in
/// parallel in this binary do not disturb each other.
#[global_allocator]
static COUNTING: alloc::Counting = alloc::Counting;

/// Held by the tests that load both cores, so that they do not skew each other.
pub static HEAVY: parking_lot::Mutex<()> = parking_lot::const_mutex(());
