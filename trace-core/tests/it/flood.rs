//! Threads that produce far faster than a slow sink writes: past the memory
//! budget they wait for the writer and nothing is lost; a writer stuck past
//! the longest wait makes the capture drop, and every record is either
//! delivered or counted as dropped.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use trace_core::{Config, Event, Finish, Session, Sink};

/// Sleeps on every `pause_every`th event, far slower than the producers;
/// and, with `stuck_ms`, that long on its first event.
struct Slow {
    delivered: Arc<AtomicU64>,
    n: u64,
    stuck_ms: u64,
    /// Sleeps a millisecond every this many events (0: never).
    pause_every: u64,
}

impl Sink for Slow {
    fn name(&self) -> &'static str {
        "slow"
    }
    fn suffix(&self) -> &'static str {
        "slow.txt"
    }
    fn event(&mut self, event: &Event<'_>, _out: &mut dyn Write) -> io::Result<()> {
        if let Event::Instant { .. } = event {
            self.delivered.fetch_add(1, Ordering::Relaxed);
        }
        self.n += 1;
        if self.n == 1 && self.stuck_ms > 0 {
            std::thread::sleep(std::time::Duration::from_millis(self.stuck_ms));
        }
        if self.pause_every > 0 && self.n.is_multiple_of(self.pause_every) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        Ok(())
    }
    fn finish(&mut self, end: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "dropped {}", end.dropped_records)
    }
}

/// The process's resident set now, in KiB (Linux: /proc/self/status).
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Samples the resident set every millisecond until stopped; returns the peak.
fn watch_rss(stop: Arc<std::sync::atomic::AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut peak = 0;
        while !stop.load(Ordering::Relaxed) {
            peak = peak.max(rss_kib());
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        peak
    })
}

/// Makes `THREADS` threads log `PER_THREAD` events each into a capture with a
/// budget of `budget_mib` and the sink `sink`.
fn flood(budget_mib: u64, sink: Slow) -> (trace_core::Report, u64) {
    flood_bytes(budget_mib as usize * 1024 * 1024, PER_THREAD, sink)
}

/// [`flood`] with a budget in bytes and `per_thread` events from each thread.
fn flood_bytes(budget: usize, per_thread: u64, sink: Slow) -> (trace_core::Report, u64) {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::from_lookup("T", &[], |n| (n == "T_TRACE_DIR").then(|| dir.path().into()))
        .unwrap()
        .unwrap()
        .with_memory_budget(budget);
    let rss_before = rss_kib();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = watch_rss(stop.clone());
    let session = Session::start(&config, "flood", vec![Box::new(sink)]).unwrap();
    // Threads given the capture's dispatcher, not `trace_core::spawn`: that
    // would add a flow record to each thread's first batch, which the drop
    // count counts and the sink's count of instants does not.
    let hs: Vec<_> = (0..THREADS)
        .map(|t| {
            let dispatch = session.dispatch().clone();
            std::thread::Builder::new()
                .name(format!("flood-{t}"))
                .spawn(move || {
                    tracing::dispatcher::with_default(&dispatch, || {
                        for i in 0..per_thread {
                            tracing::info!(i, "flood");
                        }
                    })
                })
                .unwrap()
        })
        .collect();
    hs.into_iter().for_each(|h| h.join().unwrap());
    let report = session.finish();
    stop.store(true, Ordering::Relaxed);
    let grew_kib = watcher.join().unwrap().saturating_sub(rss_before);
    (report, grew_kib)
}

const THREADS: u64 = 4;
const PER_THREAD: u64 = 500_000;

#[test]
fn a_flood_past_the_budget_waits_for_the_writer_and_loses_nothing() {
    let _heavy = crate::HEAVY.lock();
    const BUDGET_MIB: u64 = 16;
    let delivered = Arc::new(AtomicU64::new(0));
    let (report, grew_kib) =
        flood(BUDGET_MIB, Slow { delivered: delivered.clone(), n: 0, stuck_ms: 0, pause_every: 1000 });
    let delivered = delivered.load(Ordering::Relaxed);
    assert_eq!(report.dropped_records, 0, "{:?}", report.warnings());
    assert_eq!(delivered, THREADS * PER_THREAD, "every record is written");
    assert!(report.waited_ns > 0, "the writer fell behind on purpose: the threads waited for it");
    // The records waiting for the writer are bounded by the budget
    // (docs/reliability.md): the peak grew by the budget and the batches kept
    // for reuse, far less than the 2,000,000 records would take if kept.
    assert!(grew_kib < (BUDGET_MIB + 64) * 1024, "peak memory grew by {grew_kib} KiB");
    println!(
        "reliability: flood: {} records from {THREADS} threads, all written, the threads waited {} ms \
         for the writer in all, peak memory grew by {} MiB",
        THREADS * PER_THREAD,
        report.waited_ns / 1_000_000,
        grew_kib / 1024
    );
}

/// A budget of a few batches, which the threads' full batches contend for
/// all the time: a thread that finds no room left waits for it, even when the
/// room it saw a moment before was taken by another thread's batch, and even
/// when the writer thread has not started yet.
#[test]
fn threads_contending_for_the_last_room_under_the_budget_wait_and_lose_nothing() {
    let _heavy = crate::HEAVY.lock();
    // A batch of a thread's records (1,024 records and their values) is
    // about 80 KiB. Three of them: the four threads' first batches fill the
    // budget before the first hand-over has started the writer thread.
    // Eight: room for those, and then too little for the four threads.
    const BUDGETS: [usize; 2] = [256 * 1024, 640 * 1024];
    const EACH: u64 = 200_000;
    for budget in BUDGETS {
        for round in 0..3 {
            let delivered = Arc::new(AtomicU64::new(0));
            let sink = Slow { delivered: delivered.clone(), n: 0, stuck_ms: 0, pause_every: 20_000 };
            let (report, _) = flood_bytes(budget, EACH, sink);
            let at = format!("budget {} KiB, round {round}", budget / 1024);
            assert!(report.waited_ns > 0, "{at}: the threads contended for the budget");
            assert_eq!(report.dropped_records, 0, "{at}: {:?}", report.warnings());
            assert_eq!(delivered.load(Ordering::Relaxed), THREADS * EACH, "{at}: every record is written");
        }
    }
}

#[test]
fn a_writer_stuck_past_the_longest_wait_makes_the_capture_drop_and_count() {
    let _heavy = crate::HEAVY.lock();
    const BUDGET_MIB: u64 = 4;
    let delivered = Arc::new(AtomicU64::new(0));
    let (report, grew_kib) =
        flood(BUDGET_MIB, Slow { delivered: delivered.clone(), n: 0, stuck_ms: 1_500, pause_every: 1000 });
    let delivered = delivered.load(Ordering::Relaxed);
    assert!(report.dropped_records > 0, "the writer was stuck on purpose");
    assert_eq!(delivered + report.dropped_records, THREADS * PER_THREAD, "every record is accounted for");
    assert!(report.warnings().iter().any(|w| w.contains("dropped")), "{:?}", report.warnings());
    assert!(report.waited_ns >= 1_000_000_000, "a thread waited the longest wait: {} ns", report.waited_ns);
    assert!(grew_kib < (BUDGET_MIB + 64) * 1024, "peak memory grew by {grew_kib} KiB");
    println!(
        "reliability: stuck writer: {} records from {THREADS} threads, {delivered} written, {} dropped and \
         counted after a wait of {} ms",
        THREADS * PER_THREAD,
        report.dropped_records,
        report.waited_ns / 1_000_000
    );
}
