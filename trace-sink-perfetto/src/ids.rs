//! Track uuids and packet sequence ids that stay unique when files meet.
//!
//! Perfetto keys incremental state (interned strings, the incremental clock) by
//! `trusted_packet_sequence_id`, and tracks by uuid, across the whole trace: two
//! files concatenated must not share either, or one file's events would land on
//! the other's tracks or resolve against the other's strings.
//!
//! The choice: each capture draws a 64-bit seed by hashing the process id, a
//! per-process capture counter and the capture's start on the monotonic and the
//! wall clock with SipHash under the process's random hash keys (std's
//! `RandomState`, seeded by the operating system). The pid and the counter keep
//! captures of one process, and of processes alive at the same time, apart even
//! if two clocks read alike; the random keys and the time keep apart a pid reused
//! later. From the seed:
//!
//! - a track uuid is `mix(seed + key)`, where `key` packs the kind of track
//!   (process, thread, lane, sub-lane, counter, async span; flow ids are drawn
//!   the same way) and its index in the capture, and `mix`
//!   is the SplitMix64 finaliser, a bijection: distinct keys give distinct
//!   uuids within a capture by construction, never 0 (the seed keeps
//!   `seed + key` away from 0), and across captures two uuids meet with a
//!   chance of about 2^-62 per pair;
//! - sequence ids are consecutive from a base drawn from the seed in
//!   `[2, 2^28)`: distinct within a capture by construction (0 means "no
//!   sequence" and 1 is the tracing service's own), and four bytes at most on
//!   the wire, since every packet carries one. Two captures of `n` and `m`
//!   sequences overlap with a chance of about `(n + m) / 2^28`: 1 in 13 million
//!   for two ten-thread captures.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

/// Captures started in this process, for the seed.
static CAPTURES: AtomicU64 = AtomicU64::new(0);

/// Sequence ids lie in `[FIRST_SEQUENCE_ID, FIRST_SEQUENCE_ID + SEQUENCE_ID_SPAN)`.
const FIRST_SEQUENCE_ID: u32 = 2;
const SEQUENCE_ID_SPAN: u32 = (1 << 28) - FIRST_SEQUENCE_ID;

/// The kinds of track, the top byte of a uuid key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TrackKind {
    Process = 0,
    Thread = 1,
    Lane = 2,
    SubLane = 3,
    Counter = 4,
    /// A thread's CPU-time counter, indexed by its thread's sequence.
    ThreadCpu = 5,
    /// The track of a span that ran in pieces.
    Async = 6,
    /// Not a track: a flow id (`TrackEvent.flow_ids`), which the trace
    /// processor keys across the whole trace as it does track uuids.
    Flow = 7,
}

/// The ids of one capture.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ids {
    seed: u64,
    sequence_base: u32,
}

/// SplitMix64's finaliser: a bijection on `u64` that scatters nearby inputs.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
thread_local! {
    /// The hash [`Ids::new`] takes on this thread when set: for tests that
    /// compare two captures byte for byte.
    pub(crate) static FIXED_HASH: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

impl Ids {
    /// The ids of a new capture of process `pid` started at `start_ns`
    /// (monotonic) and `start_unix_ms` (wall clock).
    pub(crate) fn new(pid: u32, start_ns: u64, start_unix_ms: u64) -> Ids {
        let capture = CAPTURES.fetch_add(1, Ordering::Relaxed);
        #[cfg(test)]
        if let Some(hash) = FIXED_HASH.with(std::cell::Cell::get) {
            return Ids::from_hash(hash);
        }
        Ids::from_hash(RandomState::new().hash_one((pid, capture, start_ns, start_unix_ms)))
    }

    /// The ids for a given hash, for tests.
    pub(crate) fn from_hash(hash: u64) -> Ids {
        // Keys are below 2^58, so a seed in [2^62, 2^63) never sums to 0, the
        // one input `mix` maps to 0.
        let seed = (hash >> 2) | (1 << 62);
        let sequence_base = (mix(seed ^ 0x5e9_1d5) % u64::from(SEQUENCE_ID_SPAN)) as u32;
        Ids { seed, sequence_base }
    }

    /// The uuid of the `index`-th track of `kind` (index below 2^56).
    pub(crate) fn track(&self, kind: TrackKind, index: u64) -> u64 {
        let key = ((kind as u64) << 56) | (index & ((1 << 56) - 1));
        mix(self.seed.wrapping_add(key))
    }

    /// The id of the capture's `index`-th packet sequence.
    pub(crate) fn sequence(&self, index: u32) -> u32 {
        let offset = (u64::from(self.sequence_base) + u64::from(index)) % u64::from(SEQUENCE_ID_SPAN);
        FIRST_SEQUENCE_ID + offset as u32
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn track_uuids_of_one_capture_are_distinct_and_never_zero() {
        for hash in [0, 1, u64::MAX, 0x0123_4567_89ab_cdef, 3 << 62] {
            let ids = Ids::from_hash(hash);
            let mut seen = HashSet::new();
            for kind in [
                TrackKind::Process,
                TrackKind::Thread,
                TrackKind::Lane,
                TrackKind::SubLane,
                TrackKind::Counter,
                TrackKind::Async,
                TrackKind::Flow,
            ] {
                for index in (0..1000).chain([(1 << 32) | 7, (1 << 56) - 1]) {
                    let uuid = ids.track(kind, index);
                    assert_ne!(uuid, 0);
                    assert!(seen.insert(uuid), "uuid {uuid} repeated for {kind:?} {index}");
                }
            }
        }
    }

    #[test]
    fn sequence_ids_are_distinct_within_a_capture_and_stay_in_range() {
        for hash in [0, 1, u64::MAX, 0x0123_4567_89ab_cdef] {
            let ids = Ids::from_hash(hash);
            let mut seen = HashSet::new();
            for index in 0..10_000 {
                let id = ids.sequence(index);
                assert!((2..1 << 28).contains(&id), "sequence id {id} out of range");
                assert!(seen.insert(id), "sequence id {id} repeated");
            }
        }
    }

    #[test]
    fn sequence_ids_wrap_inside_the_range() {
        let ids = Ids { seed: 1 << 62, sequence_base: SEQUENCE_ID_SPAN - 1 };
        assert_eq!(ids.sequence(0), (1 << 28) - 1);
        assert_eq!(ids.sequence(1), 2);
    }

    #[test]
    fn two_captures_in_one_process_get_different_ids() {
        let a = Ids::new(42, 1_000, 7);
        let b = Ids::new(42, 1_000, 7);
        assert_ne!(a.track(TrackKind::Process, 0), b.track(TrackKind::Process, 0));
        assert_ne!(a.sequence(0), b.sequence(0));
    }
}
