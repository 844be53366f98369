//! Trace and span ids: random enough to be unique across a CI fleet, with no
//! random-number crate.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A 128-bit trace id (never all zero, as OTLP requires).
pub type TraceId = [u8; 16];
/// A 64-bit span id (never all zero).
pub type SpanId = [u8; 8];

/// One 64-bit draw. `RandomState` is keyed from the operating system's random
/// source once per thread and stepped on every `new`, so two draws differ even
/// with equal inputs; the inputs (wall time, pid, a process-wide counter) make
/// draws of different processes differ too.
fn draw() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.write_u32(std::process::id());
    h.finish()
}

/// A fresh random trace id.
pub fn fresh_trace_id() -> TraceId {
    loop {
        let id = (u128::from(draw()) << 64 | u128::from(draw())).to_be_bytes();
        if id != [0; 16] {
            return id;
        }
    }
}

/// Span ids of one capture: distinct by construction (a bijective mix of a
/// random seed stepped by an odd constant), so no two spans of a trace share one.
#[derive(Debug)]
pub(crate) struct SpanIds {
    state: u64,
}

impl SpanIds {
    pub(crate) fn new() -> Self {
        SpanIds { state: draw() }
    }

    pub(crate) fn next_id(&mut self) -> SpanId {
        loop {
            // SplitMix64: each step of the state gives a distinct output.
            self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            if z != 0 {
                return z.to_be_bytes();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_ids_differ_from_one_draw_to_the_next() {
        let ids: std::collections::HashSet<TraceId> = (0..1000).map(|_| fresh_trace_id()).collect();
        assert_eq!(ids.len(), 1000);
    }

    #[test]
    fn span_ids_of_one_capture_never_repeat_and_are_never_zero() {
        let mut g = SpanIds::new();
        let ids: std::collections::HashSet<SpanId> = (0..100_000).map(|_| g.next_id()).collect();
        assert_eq!(ids.len(), 100_000);
        assert!(!ids.contains(&[0; 8]));
    }
}
