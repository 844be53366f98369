//! Threads that produce far faster than a slow sink writes: nothing blocks,
//! and every record is either delivered or counted as dropped.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use trace_core::{Config, Event, Finish, Session, Sink};

/// Sleeps on every thousandth event, far slower than the producers.
struct Slow {
    delivered: Arc<AtomicU64>,
    n: u64,
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
        if self.n.is_multiple_of(1000) {
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

#[test]
fn a_flood_drops_and_counts_instead_of_blocking_or_losing_silently() {
    let _heavy = crate::HEAVY.lock();
    let dir = tempfile::tempdir().unwrap();
    const BUDGET_MIB: u64 = 16;
    let config = Config::from_lookup("T", &[], |n| (n == "T_TRACE_DIR").then(|| dir.path().into()))
        .unwrap()
        .unwrap()
        .with_memory_budget(BUDGET_MIB as usize * 1024 * 1024);
    let rss_before = rss_kib();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = watch_rss(stop.clone());
    let delivered = Arc::new(AtomicU64::new(0));
    let session =
        Session::start(&config, "flood", vec![Box::new(Slow { delivered: delivered.clone(), n: 0 })])
            .unwrap();
    const THREADS: u64 = 4;
    const PER_THREAD: u64 = 500_000;
    session.in_scope(|| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                trace_core::spawn(format!("flood-{t}"), || {
                    for i in 0..PER_THREAD {
                        tracing::info!(i, "flood");
                    }
                })
                .unwrap()
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
    });
    let report = session.finish();
    stop.store(true, Ordering::Relaxed);
    let grew_kib = watcher.join().unwrap().saturating_sub(rss_before);
    let delivered = delivered.load(Ordering::Relaxed);
    assert!(report.dropped_records > 0, "the writer fell behind on purpose");
    assert_eq!(delivered + report.dropped_records, THREADS * PER_THREAD, "every record is accounted for");
    assert!(report.warnings().iter().any(|w| w.contains("dropped")), "{:?}", report.warnings());
    // The records waiting for the writer are bounded by the budget
    // (docs/reliability.md): the peak grew by the budget and the batches kept
    // for reuse, far less than the 2,000,000 records would take if kept.
    assert!(grew_kib < (BUDGET_MIB + 64) * 1024, "peak memory grew by {grew_kib} KiB");
    println!(
        "reliability: flood: {} records from {THREADS} threads, {delivered} written, {} dropped and counted, \
         peak memory grew by {} MiB",
        THREADS * PER_THREAD,
        report.dropped_records,
        grew_kib / 1024
    );
}
