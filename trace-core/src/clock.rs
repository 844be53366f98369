//! The hot path's timestamps, and their conversion to `CLOCK_MONOTONIC`.
//!
//! A span reads the clock twice. Where the processor's time-stamp counter
//! runs at a constant rate on every core and the kernel itself keeps time
//! with it (the `tsc` clock source, which Linux keeps only when the counters
//! agree across cores), the hot path reads the counter, which costs less than
//! `CLOCK_MONOTONIC` through the vDSO (docs/performance.md), and the writer
//! turns ticks into monotonic nanoseconds.
//!
//! The conversion needs no calibration up front, which would cost
//! milliseconds. The writer reads the counter and the monotonic clock side by
//! side (an anchor) when the capture starts, before each batch it takes in, and
//! at the finish; a tick is placed on the straight line between the two anchors
//! around it. Every record of a batch was taken before the batch reached the
//! writer, so the anchor read then lies after all of them: no record needs an
//! anchor that does not exist yet, and a tick keeps the time it was given even
//! when later anchors arrive. The conversion is increasing in the tick, so the
//! order of records is kept; its error is that of one anchor, the few tens of
//! nanoseconds between its two reads, never a drift.
//!
//! Elsewhere (other processors, other systems, a kernel that does not trust the
//! counter) the hot path reads `CLOCK_MONOTONIC` relative to the capture's start.

use std::sync::OnceLock;

use crate::os;

/// Whether the hot path can read the time-stamp counter: decided once per
/// process.
pub(crate) fn counter_usable() -> bool {
    static USABLE: OnceLock<bool> = OnceLock::new();
    #[cfg(test)]
    if tests::MONOTONIC_ONLY.get() {
        return false;
    }
    *USABLE.get_or_init(detect)
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn detect() -> bool {
    // Invariant: the counter runs at a constant rate in every power state
    // (CPUID 0x8000_0007, EDX bit 8).
    let max_extended = std::arch::x86_64::__cpuid(0x8000_0000).eax;
    if max_extended < 0x8000_0007 || std::arch::x86_64::__cpuid(0x8000_0007).edx & (1 << 8) == 0 {
        return false;
    }
    // The kernel keeps time with it: it found the cores' counters in step.
    std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        .is_ok_and(|source| source.trim() == "tsc")
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
fn detect() -> bool {
    false
}

/// The time-stamp counter.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn ticks() -> u64 {
    // SAFETY: RDTSC has no preconditions; `counter_usable` checked that the
    // processor has an invariant counter before any capture reads it.
    #[allow(unused_unsafe)]
    unsafe {
        std::arch::x86_64::_rdtsc()
    }
}

/// Never called where the counter is not usable.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(crate) fn ticks() -> u64 {
    os::monotonic_ns()
}

/// A tick and a monotonic reading taken together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Anchor {
    pub tick: u64,
    pub ns: u64,
}

impl Anchor {
    /// Reads both clocks. Of three tries, keeps the one whose monotonic read
    /// fell between the closest pair of ticks (a try interrupted between its
    /// reads would otherwise put the line off by the interruption), and takes
    /// the tick halfway between that pair.
    pub(crate) fn now() -> Anchor {
        let mut best: Option<(u64, Anchor)> = None;
        for _ in 0..3 {
            let before = ticks();
            let ns = os::monotonic_ns();
            let after = ticks();
            let width = after.wrapping_sub(before);
            if best.is_none_or(|(w, _)| width < w) {
                best = Some((width, Anchor { tick: before + width / 2, ns }));
            }
        }
        best.map_or(Anchor { tick: ticks(), ns: os::monotonic_ns() }, |(_, a)| a)
    }
}

/// Anchors in increasing order of both tick and time, and the conversion.
#[derive(Debug)]
pub(crate) struct Anchors {
    points: Vec<Anchor>,
    /// Each segment's nanoseconds per tick, with 32 fractional bits (rounded
    /// to the nearest): a multiplication per record instead of a 128-bit
    /// division, within half a nanosecond of the exact line.
    rates: Vec<u128>,
}

impl Anchors {
    /// Starts from the capture's first anchor.
    pub(crate) fn new(first: Anchor) -> Anchors {
        Anchors { points: vec![first], rates: Vec::new() }
    }

    /// Adds an anchor after every existing one; ignores one that is not later
    /// on both clocks (it would bend the line backwards).
    pub(crate) fn push(&mut self, a: Anchor) {
        let last = self.points[self.points.len() - 1];
        if a.tick > last.tick && a.ns > last.ns {
            let ticks = u128::from(a.tick - last.tick);
            self.rates.push(((u128::from(a.ns - last.ns) << 32) + ticks / 2) / ticks);
            self.points.push(a);
        }
    }

    /// Adds an anchor read now.
    pub(crate) fn push_now(&mut self) {
        self.push(Anchor::now());
    }

    /// The monotonic time of `tick`: on the line between the anchors around
    /// it; before the first anchor, the first anchor's time; after the last,
    /// on the last segment's line (or the first anchor's time if there is only
    /// one).
    pub(crate) fn ns(&self, tick: u64) -> u64 {
        let mut near = Near::NONE;
        self.ns_search(tick, &mut near)
    }

    /// [`Anchors::ns`] for a thread whose stamps mostly increase: `near`
    /// keeps the segment of the thread's latest reading, so that a reading in
    /// it is one comparison and one multiplication instead of a search for
    /// the segment (two readings a span).
    #[inline]
    pub(crate) fn ns_near(&self, tick: u64, near: &mut Near) -> u64 {
        if tick >= near.lo && tick < near.hi {
            // Exact in 64 bits: the product is below the segment's length in
            // nanoseconds (see `Near`).
            let off = (u128::from(tick - near.lo) * u128::from(near.rate) + (1 << 31)) >> 32;
            return near.ns + off as u64;
        }
        self.ns_search(tick, near)
    }

    /// [`Anchors::ns_near`] outside the kept segment: finds the segment
    /// (from the kept one when the tick is past it) and keeps it when it has
    /// an anchor at both ends.
    #[cold]
    fn ns_search(&self, tick: u64, near: &mut Near) -> u64 {
        let p = &self.points;
        let n = p.len();
        if n == 1 || tick <= p[0].tick {
            return p[0].ns;
        }
        let last = n - 2;
        let i = match near.segment {
            // CaptureClock mostly increase: the next segments first.
            Some(mut i) if i <= last && tick >= p[i].tick => {
                while i < last && p[i + 1].tick <= tick {
                    i += 1;
                }
                i
            }
            // Most records lie in the last segment: try it before searching.
            _ if tick >= p[last].tick => last,
            _ => p.partition_point(|a| a.tick <= tick) - 1,
        };
        let a = p[i];
        let rate = self.rates[i];
        let off = (u128::from(tick - a.tick) * rate + (1 << 31)) >> 32;
        if let Ok(rate) = u64::try_from(rate) {
            // Past the last anchor the line may bend when the next is added:
            // such a reading is not kept.
            if tick < p[i + 1].tick {
                *near = Near { lo: a.tick, hi: p[i + 1].tick, ns: a.ns, rate, segment: Some(i) };
            }
        }
        a.ns + u64::try_from(off).unwrap_or(u64::MAX - a.ns)
    }
}

/// The anchor segment of a thread's latest reading ([`Anchors::ns_near`]):
/// the ticks `lo..hi` between two anchors, the time at `lo` and the rate.
/// Anchors are only ever added after the last, so a segment between two of
/// them never changes. Within it `(tick - lo) * rate >> 32` is at most the
/// segment's length in nanoseconds (plus one for the rounding), so the time
/// never overflows.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Near {
    lo: u64,
    hi: u64,
    ns: u64,
    rate: u64,
    segment: Option<usize>,
}

impl Near {
    /// No reading yet: matches no tick.
    pub(crate) const NONE: Near = Near { lo: 1, hi: 0, ns: 0, rate: 0, segment: None };
}

#[cfg(test)]
pub(crate) mod tests {
    use std::cell::Cell;
    use std::io::{self, Write};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::{Config, Event, Finish, Session, Sink};

    thread_local! {
        /// Makes captures started on this thread stamp with the monotonic clock.
        pub(crate) static MONOTONIC_ONLY: Cell<bool> = const { Cell::new(false) };
    }

    /// Keeps each span's name, begin and end.
    struct Times(Arc<Mutex<Vec<(String, u64, u64)>>>);

    impl Sink for Times {
        fn name(&self) -> &'static str {
            "times"
        }
        fn suffix(&self) -> &'static str {
            "times.txt"
        }
        fn event(&mut self, event: &Event<'_>, _out: &mut dyn Write) -> io::Result<()> {
            if let Event::SpanEnd { ts, begin_ts, site, .. } = event {
                self.0.lock().unwrap().push((site.name.to_string(), *begin_ts, *ts));
            }
            Ok(())
        }
        fn finish(&mut self, _end: &Finish<'_>, _out: &mut dyn Write) -> io::Result<()> {
            Ok(())
        }
    }

    /// Runs a capture of spans around sleeps, with `spans` quick spans after
    /// them, and checks every time against monotonic readings taken around it.
    fn times_agree_with_the_monotonic_clock(spans: usize) {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::from_lookup("T", &[], |n| (n == "T_TRACE_DIR").then(|| dir.path().into()))
            .unwrap()
            .unwrap();
        let times = Arc::new(Mutex::new(Vec::new()));
        let session = Session::start(&config, "clock", vec![Box::new(Times(times.clone()))]).unwrap();
        let mut around = Vec::new();
        session.in_scope(|| {
            for ms in [1u64, 5, 20] {
                let before = os::monotonic_ns();
                {
                    let _s = tracing::info_span!("sleep").entered();
                    std::thread::sleep(Duration::from_millis(ms));
                }
                around.push((before, os::monotonic_ns(), ms));
            }
            for _ in 0..spans {
                let _s = tracing::info_span!("quick").entered();
            }
        });
        assert!(session.finish().is_complete());
        let times = times.lock().unwrap();
        let sleeps: Vec<_> = times.iter().filter(|t| t.0 == "sleep").collect();
        assert_eq!(sleeps.len(), 3);
        // The anchors' own error is a few hundred nanoseconds at worst.
        const SLACK: u64 = 20_000;
        for (s, (before, after, ms)) in sleeps.iter().zip(&around) {
            assert!(s.1 + SLACK >= *before && s.2 <= after + SLACK, "{s:?} outside {before}..{after}");
            assert!(s.2 - s.1 >= ms * 1_000_000 - SLACK, "{s:?} is shorter than {ms} ms");
        }
        assert_eq!(times.iter().filter(|t| t.0 == "quick").count(), spans);
        let mut last_end = 0;
        for t in times.iter() {
            assert!(t.1 <= t.2 && t.1 >= last_end, "{t:?} after an end at {last_end}");
            last_end = t.2;
        }
    }

    #[test]
    fn spans_stamped_with_the_counter_keep_the_monotonic_clocks_times() {
        // A short capture (finished on this thread) and one with many batches.
        times_agree_with_the_monotonic_clock(10);
        times_agree_with_the_monotonic_clock(20_000);
    }

    #[test]
    fn spans_stamped_with_the_monotonic_clock_keep_its_times() {
        MONOTONIC_ONLY.set(true);
        times_agree_with_the_monotonic_clock(10);
        times_agree_with_the_monotonic_clock(20_000);
        MONOTONIC_ONLY.set(false);
    }

    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[test]
    fn the_counter_is_used_where_the_kernel_keeps_time_with_it() {
        let source =
            std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
                .unwrap_or_default();
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let invariant = cpuinfo.contains(" constant_tsc") && cpuinfo.contains(" nonstop_tsc");
        assert_eq!(counter_usable(), source.trim() == "tsc" && invariant, "clock source {source:?}");
    }

    fn a(tick: u64, ns: u64) -> Anchor {
        Anchor { tick, ns }
    }

    #[test]
    fn a_tick_lies_on_the_line_between_its_anchors() {
        let mut anchors = Anchors::new(a(1_000, 50));
        anchors.push(a(3_000, 1_050)); // 2 ticks a nanosecond
        anchors.push(a(4_000, 2_050)); // 1 tick a nanosecond
        assert_eq!(anchors.ns(1_000), 50);
        assert_eq!(anchors.ns(2_000), 550);
        assert_eq!(anchors.ns(3_000), 1_050);
        assert_eq!(anchors.ns(3_500), 1_550);
        assert_eq!(anchors.ns(4_000), 2_050);
        // After the last anchor, on the last segment's line; before the first, clamped.
        assert_eq!(anchors.ns(4_100), 2_150);
        assert_eq!(anchors.ns(10), 50);
    }

    #[test]
    fn an_anchor_that_is_not_later_on_both_clocks_is_ignored() {
        let mut anchors = Anchors::new(a(1_000, 50));
        anchors.push(a(900, 60));
        anchors.push(a(2_000, 50));
        anchors.push(a(1_000, 1_000));
        assert_eq!(anchors.points.len(), 1);
        assert_eq!(anchors.ns(5_000), 50);
    }

    /// `n` anchors at uneven steps of both clocks, and the last one's tick and time.
    fn uneven_anchors(n: u64) -> (Anchors, u64, u64) {
        let mut anchors = Anchors::new(a(0, 0));
        let (mut tick, mut ns) = (0u64, 0u64);
        for i in 1..n {
            tick += 1 + (i * 7919) % 5_000;
            ns += 1 + (i * 104_729) % 3_000;
            anchors.push(a(tick, ns));
        }
        (anchors, tick, ns)
    }

    #[test]
    fn the_conversion_keeps_the_order_of_ticks_over_many_uneven_anchors() {
        let (anchors, tick, ns) = uneven_anchors(200);
        let mut last = 0;
        for t in (0..tick + 10_000).step_by(37) {
            let now = anchors.ns(t);
            assert!(now >= last, "tick {t}: {now} after {last}");
            last = now;
        }
        assert_eq!(anchors.ns(tick), ns);
    }

    #[test]
    fn a_search_from_a_nearby_segment_gives_the_same_time_as_a_full_one() {
        let (anchors, tick, _) = uneven_anchors(100);
        // Mostly forward, as a thread's stamps go, with jumps back and past the end.
        let mut near = Near::NONE;
        let mut t = 0u64;
        for i in 0..5_000u64 {
            t = match i % 97 {
                0 => t / 3,
                1 => tick + 1_000 + i,
                _ => t + 1 + (i * 31) % 400,
            };
            let full = anchors.ns(t);
            assert_eq!(anchors.ns_near(t, &mut near), full, "tick {t}");
            assert!(near.segment.is_none_or(|s| s < anchors.points.len() - 1));
            if t > 0 && t < tick {
                // Between two anchors: the segment is kept for the next reading.
                assert!(near.lo <= t && t < near.hi, "tick {t} outside {near:?}");
            }
        }
    }
}
