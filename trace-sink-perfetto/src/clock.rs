//! A sequence's clock: the snapshot that binds it to CLOCK_MONOTONIC (and
//! BOOTTIME, the trace processor's own), and the timestamps of its events.

use trace_proto_wire as wire;

use crate::format::clock::{self, BOOTTIME, INCREMENTAL, MONOTONIC};

/// How a sequence writes its timestamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timestamps {
    /// As deltas on the sequence's own incremental clock, which counts
    /// nanoseconds of CLOCK_MONOTONIC: one thread's events come in time order,
    /// and a delta takes two or three bytes where the absolute time takes nine.
    Incremental,
    /// As CLOCK_MONOTONIC nanoseconds: for events that come in no useful order
    /// (the slices of external lanes, spans written at their close).
    Absolute,
}

/// The clock of one sequence.
#[derive(Debug)]
pub(crate) struct SequenceClock {
    timestamps: Timestamps,
    /// The incremental clock's value: the time of the sequence's last event
    /// written on it.
    last: u64,
}

impl SequenceClock {
    /// A clock that starts at `base_ns` (CLOCK_MONOTONIC).
    pub(crate) fn new(timestamps: Timestamps, base_ns: u64) -> Self {
        SequenceClock { timestamps, last: base_ns }
    }

    /// Writes the `ClockSnapshot` of the sequence's first packet into `buf`
    /// (as field `field` of the packet), taken before any event; returns the
    /// clock its timestamps are on by default.
    pub(crate) fn write_snapshot(&self, buf: &mut Vec<u8>, field: u32) -> u32 {
        let base_ns = self.last;
        let snapshot = wire::open(buf, field);
        let reading = |buf: &mut Vec<u8>, id: u32, timestamp: u64, incremental: bool| {
            let c = wire::open(buf, clock::CLOCKS);
            wire::put_uint(buf, clock::ID, u64::from(id));
            wire::put_uint(buf, clock::TIMESTAMP, timestamp);
            if incremental {
                wire::put_bool(buf, clock::IS_INCREMENTAL, true);
                wire::put_uint(buf, clock::UNIT_MULTIPLIER_NS, 1);
            }
            wire::close(buf, c);
        };
        reading(buf, BOOTTIME, base_ns.saturating_add(boottime_lead_ns()), false);
        reading(buf, MONOTONIC, base_ns, false);
        let default_clock = match self.timestamps {
            Timestamps::Incremental => {
                reading(buf, INCREMENTAL, base_ns, true);
                INCREMENTAL
            }
            Timestamps::Absolute => MONOTONIC,
        };
        wire::close(buf, snapshot);
        default_clock
    }

    /// The packet's `timestamp` and, when it is not the sequence's default
    /// clock, `timestamp_clock_id` for an event at `ts`.
    #[inline]
    pub(crate) fn stamp(&mut self, ts: u64) -> (u64, Option<u32>) {
        match self.timestamps {
            Timestamps::Incremental if ts >= self.last => {
                let delta = ts - self.last;
                self.last = ts;
                (delta, None)
            }
            // Deltas cannot be negative: an event earlier than the last one
            // (never seen from one thread, but cheap to get right) is written
            // on CLOCK_MONOTONIC, which leaves the incremental clock alone.
            Timestamps::Incremental => (ts, Some(MONOTONIC)),
            Timestamps::Absolute => (ts, None),
        }
    }
}

/// What CLOCK_BOOTTIME reads ahead of CLOCK_MONOTONIC (the time spent
/// suspended), where the system has a boot-time clock: read once per
/// process. Each reading jitters by some hundred nanoseconds, and the trace
/// processor refuses a snapshot whose BOOTTIME (its trace clock) goes back
/// against an earlier one (`invalid_clock_snapshots`): two sequences started
/// at the same MONOTONIC time with two readings could do just that. (A
/// process that lives through a suspend keeps the lead it read first: every
/// timestamp is MONOTONIC, so the events stay where they are relative to
/// each other.)
fn boottime_lead_ns() -> u64 {
    static LEAD: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *LEAD.get_or_init(read_boottime_lead_ns)
}

fn read_boottime_lead_ns() -> u64 {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        fn read(clock: libc::clockid_t) -> Option<u64> {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: `ts` is a valid, writable timespec.
            let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
            (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
        }
        // BOOTTIME read between two MONOTONIC readings, against their midpoint.
        match (read(libc::CLOCK_MONOTONIC), read(libc::CLOCK_BOOTTIME), read(libc::CLOCK_MONOTONIC)) {
            (Some(before), Some(boot), Some(after)) => boot.saturating_sub(before / 2 + after / 2),
            _ => 0,
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        // No boot-time clock to relate to: state that the two agree.
        0
    }
}
