//! A counting allocator, and the proof that the hot path allocates nothing in
//! steady state.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use crate::collect::{session, Collected};

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

pub struct Counting;

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn note() {
    // try_with: the thread-locals may be gone while a thread shuts down.
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        }
    });
}

/// Allocations the calling thread makes while running `f`.
fn allocations_in(f: impl FnOnce()) -> u64 {
    COUNT.with(|c| c.set(0));
    COUNTING.with(|on| on.set(true));
    f();
    COUNTING.with(|on| on.set(false));
    COUNT.with(|c| c.get())
}

fn workload(round: u64) {
    // Fewer records than a batch holds: at most one hand-over per round.
    for i in 0..150u64 {
        let span = tracing::info_span!("step", i, round, name = "fixed", ok = true, ratio = 0.5);
        let _g = span.enter();
        span.record("ok", false);
        tracing::info!(i, size = 12u64, "an event with a message");
    }
}

#[test]
fn spans_and_events_allocate_nothing_on_the_calling_thread_in_steady_state() {
    let _heavy = crate::HEAVY.lock();
    let (session, collected): (_, Collected) = session("alloc");
    session.in_scope(|| {
        // Warm up: buffers grow to their working size and start coming back.
        for round in 0..20 {
            workload(round);
            session.flush();
        }
        let mut total = 0;
        for round in 0..100 {
            // Let the writer hand the batches back, as it does when it keeps up.
            session.flush();
            total += allocations_in(|| workload(round));
        }
        assert_eq!(total, 0, "heap allocations in 15,000 spans and 15,000 events after warm-up");
    });
    let report = session.finish();
    assert_eq!(report.dropped_records, 0);
    let c = collected.lock();
    assert_eq!(c.begins.iter().filter(|b| b.1 == "step").count(), 18_000);
    assert_eq!(c.instants, 18_000);
}
