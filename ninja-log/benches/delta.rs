//! How fast a delta is read, against counting the newlines of the same bytes.
//!
//! ```text
//! cargo bench -p ninja-log --bench delta
//! ```
//!
//! Three synthetic logs of 100,000 entries, one output per action:
//!
//! - `first_build`: no log before the run; the run wrote all 100,000 lines.
//! - `append`: 50,000 lines before the run, 50,000 appended by it.
//! - `recompacted`: 100,000 lines before the run for 25,000 outputs (four
//!   builds of each), which Ninja recompacts when it loads the log: the log
//!   after holds the 25,000 latest lines in a scrambled order, then the run's
//!   25,000 lines.
//!
//! Each is read through both APIs: `delta` (`Snapshot::delta_from_bytes`, an
//! owned `Delta`) and `delta_ref` (`Snapshot::delta_ref`, a `DeltaRef` whose
//! actions borrow from the log). Each read is measured as bytes per second
//! over everything the reader is handed (the log before and the log after),
//! and so are two newline counts over the same bytes: `newlines_naive`
//! (`bytes.iter().filter(|b| **b == b'\n').count()`, which the compiler
//! vectorises) and `newlines_memchr` (the `memchr` crate's
//! `memchr_iter(b'\n', bytes).count()`). Before timing, each delta must be
//! available with exactly the run's actions and at most one note, and the
//! counts must match.

use std::hint::black_box;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use ninja_log::{Actions, Delta, DeltaRef, Snapshot};

const ENTRIES: u64 = 100_000;
const SAMPLE_SIZE: usize = 25;

/// A deterministic 64-bit mix (splitmix64's finaliser).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Appends one line in Ninja's form for build `round` of output `i`, an
/// action that ended at `end_ms` (Ninja logs actions as they finish, so a
/// run's end times never go back).
fn line(log: &mut Vec<u8>, i: u64, round: u64, end_ms: u64) {
    let start_ms = end_ms.saturating_sub(1 + mix(i ^ (round << 40)) % 900);
    let mtime = 1_700_000_000_000_000_000 + round * 1_000_000_000 + i;
    let hash = mix(i.wrapping_mul(31).wrapping_add(round)) | 1;
    let line = format!(
        "{start_ms}\t{end_ms}\t{mtime}\tobj/lib{:02}/src/module_{:03}/file_{i:06}.cc.o\t{hash:x}\n",
        i % 37,
        i % 211
    );
    log.extend_from_slice(line.as_bytes());
}

const HEADER: &[u8] = b"# ninja log v5\n";

struct Case {
    id: &'static str,
    before: Option<Vec<u8>>,
    after: Vec<u8>,
    actions: usize,
}

impl Case {
    fn bytes(&self) -> u64 {
        (self.before.as_ref().map_or(0, Vec::len) + self.after.len()) as u64
    }

    fn newlines(&self) -> u64 {
        self.before.as_ref().map_or(0, |b| b.iter().filter(|c| **c == b'\n').count()) as u64
            + self.after.iter().filter(|c| **c == b'\n').count() as u64
    }
}

/// One run's lines for outputs `outputs`, two actions finishing per millisecond.
fn run_lines(log: &mut Vec<u8>, outputs: impl Iterator<Item = u64>, round: u64) {
    for (n, i) in outputs.enumerate() {
        line(log, i, round, 1000 + n as u64 / 2);
    }
}

fn cases() -> Vec<Case> {
    let mut first = HEADER.to_vec();
    run_lines(&mut first, 0..ENTRIES, 0);

    let half = ENTRIES / 2;
    let mut before = HEADER.to_vec();
    run_lines(&mut before, 0..half, 0);
    let mut after = before.clone();
    run_lines(&mut after, half..ENTRIES, 1);
    let append = Case { id: "append", before: Some(before), after, actions: half as usize };

    // Four builds of each of a quarter as many outputs: more than three
    // entries per output, so Ninja recompacts the log when it loads it.
    let outputs = ENTRIES / 4;
    let mut before = HEADER.to_vec();
    for round in 0..4 {
        run_lines(&mut before, 0..outputs, round);
    }
    let mut after = HEADER.to_vec();
    // The kept lines, in a scrambled order (a multiplicative permutation of
    // 0..outputs, as Ninja 1.10-1.12's hash-map order scrambles them).
    let mut kept = HEADER.to_vec();
    run_lines(&mut kept, 0..outputs, 3);
    let kept_lines: Vec<&[u8]> = kept[HEADER.len()..].split_inclusive(|c| *c == b'\n').collect();
    for k in 0..outputs {
        let j = (k * 7919) % outputs;
        after.extend_from_slice(kept_lines[j as usize]);
    }
    run_lines(&mut after, 0..outputs, 4);
    let recompacted = Case { id: "recompacted", before: Some(before), after, actions: outputs as usize };

    vec![
        Case { id: "first_build", before: None, after: first, actions: ENTRIES as usize },
        append,
        recompacted,
    ]
}

fn delta(snapshot: &Snapshot, after: &[u8]) -> Delta {
    snapshot.delta_from_bytes(Some(after))
}

fn delta_ref<'a>(snapshot: &Snapshot, after: &'a [u8]) -> DeltaRef<'a> {
    snapshot.delta_ref(Some(after))
}

/// The APIs measured, by the names of their rows.
const APIS: [&str; 2] = ["delta", "delta_ref"];

static SAMPLES: Mutex<Vec<(String, String, u64, Duration)>> = Mutex::new(Vec::new());

/// The median time per iteration over the measured samples, in nanoseconds.
fn median_ns(group: &str, id: &str) -> Option<f64> {
    let all = SAMPLES.lock().unwrap_or_else(|e| e.into_inner());
    let calls: Vec<&(String, String, u64, Duration)> =
        all.iter().filter(|(g, i, _, _)| g == group && i == id).collect();
    let n = std::env::args()
        .skip_while(|a| a != "--sample-size")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(SAMPLE_SIZE);
    if calls.len() <= n {
        return None;
    }
    let mut v: Vec<f64> =
        calls[calls.len() - n..].iter().map(|(_, _, it, t)| t.as_nanos() as f64 / *it as f64).collect();
    v.sort_by(|a, b| a.total_cmp(b));
    Some((v[(n - 1) / 2] + v[n / 2]) / 2.0)
}

/// The current time as `YYYY-MM-DD HH:MM UTC`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    // Days since the epoch to a civil date (Howard Hinnant's algorithm).
    let days = (secs / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let doe = days.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m) = (secs % 86_400 / 3600, secs % 3600 / 60);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02} UTC")
}

/// The moment and the machine, printed with the table.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).map(|l| l.to_string()))
        .and_then(|l| l.split_once(':').map(|(_, v)| v.trim().to_string()))
        .unwrap_or_else(|| "unknown CPU".to_string());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{}; machine: {cores} cores, {cpu}, Linux {kernel}", utc_now())
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_millis(2500))
        .sample_size(SAMPLE_SIZE)
        .configure_from_args();
    let cases = cases();
    type Count = fn(&[u8]) -> usize;
    let naive: Count = |b| b.iter().filter(|c| **c == b'\n').count();
    let memchr: Count = |b| memchr::memchr_iter(b'\n', b).count();
    for case in &cases {
        let snapshot = Snapshot::from_bytes(".ninja_log", case.before.clone());
        let d = delta(&snapshot, &case.after);
        let lent = delta_ref(&snapshot, &case.after);
        for (api, actions, notes) in [
            ("delta", d.actions().map(<[_]>::len), d.notes()),
            ("delta_ref", lent.actions().map(Actions::len), lent.notes()),
        ] {
            let reason = d.reason().or(lent.reason()).unwrap_or_default();
            assert_eq!(actions, Some(case.actions), "{} {api}: {reason}", case.id);
            // Only how the log was read: no clock restart, nothing odd.
            assert!(notes.len() <= 1, "{} {api}: {notes:?}", case.id);
        }
        assert!(lent.clone().into_delta() == d, "{}: the two APIs differ", case.id);
        let before = case.before.as_deref().unwrap_or_default();
        for count in [naive, memchr] {
            assert_eq!((count(before) + count(&case.after)) as u64, case.newlines(), "{}", case.id);
        }

        let mut group = c.benchmark_group(case.id);
        group.throughput(Throughput::Bytes(case.bytes()));
        let mut timed = |id: &str, f: &dyn Fn() -> usize| {
            group.bench_function(id, |b| {
                b.iter_custom(|iters| {
                    let start = Instant::now();
                    for _ in 0..iters {
                        black_box(f());
                    }
                    let t = start.elapsed();
                    SAMPLES.lock().unwrap_or_else(|e| e.into_inner()).push((
                        case.id.into(),
                        id.into(),
                        iters,
                        t,
                    ));
                    t
                })
            });
        };
        timed("delta", &|| delta(&snapshot, black_box(&case.after)).actions().map_or(0, <[_]>::len));
        timed("delta_ref", &|| {
            delta_ref(&snapshot, black_box(&case.after)).actions().map_or(0, Actions::len)
        });
        timed("newlines_naive", &|| naive(black_box(before)) + naive(black_box(&case.after)));
        timed("newlines_memchr", &|| memchr(black_box(before)) + memchr(black_box(&case.after)));
        group.finish();
    }
    c.final_summary();

    if cases.iter().any(|k| APIS.iter().any(|api| median_ns(k.id, api).is_some())) {
        println!("\n{}", machine());
        println!("\nninja-log delta against newline counts of the same bytes (medians of samples)\n");
        println!("| log | API | bytes read | delta MB/s | naive count MB/s | memchr count MB/s | delta / naive | delta / memchr |");
        println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
        for k in &cases {
            let mbs = |id: &str| median_ns(k.id, id).map(|ns| k.bytes() as f64 / ns * 1e3);
            let (n, m) = (mbs("newlines_naive"), mbs("newlines_memchr"));
            let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
            let r = |a: Option<f64>, b: Option<f64>| {
                a.zip(b).map_or("-".to_string(), |(a, b)| format!("{:.3}x", a / b))
            };
            for api in APIS {
                let d = mbs(api);
                println!(
                    "| {} | {api} | {} | {} | {} | {} | {} | {} |",
                    k.id,
                    k.bytes(),
                    f(d),
                    f(n),
                    f(m),
                    r(d, n),
                    r(d, m)
                );
            }
        }
    }
}
