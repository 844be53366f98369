//! What the benchmark binaries share: the harness settings, the record of
//! every timed sample (for the tables printed at the end of a run), a writer
//! that counts what it is given, an independent reader of Perfetto and Chrome
//! output for the checks, and the scratch directory traces go to.
//!
//! Each benchmark binary includes this module with `mod support;` and uses
//! only part of it.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use criterion::Criterion;
use trace_proto_wire::Value;

/// Samples per benchmark; `--sample-size N` on the command line overrides it.
pub const SAMPLE_SIZE: usize = 25;

/// The harness every binary uses: short runs, so that `cargo bench` stays
/// within minutes on a two-core machine. Command-line flags override these.
pub fn criterion() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_millis(2500))
        .sample_size(SAMPLE_SIZE)
        .configure_from_args()
}

/// The number of measured samples criterion takes per benchmark in this run.
pub fn sample_size() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--sample-size")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(SAMPLE_SIZE)
}

/// Every `(iterations, time)` pair a benchmark's routine reported, in order.
type Samples = BTreeMap<(String, String), Vec<(u64, Duration)>>;

fn samples() -> &'static Mutex<Samples> {
    static SAMPLES: OnceLock<Mutex<Samples>> = OnceLock::new();
    SAMPLES.get_or_init(|| Mutex::new(BTreeMap::new()))
}

/// Notes one call of a benchmark's routine. Criterion calls the routine during
/// warm-up with doubling iteration counts, then once per measured sample.
pub fn record(group: &str, id: &str, iters: u64, time: Duration) {
    let mut all = samples().lock().unwrap_or_else(|e| e.into_inner());
    all.entry((group.to_string(), id.to_string())).or_default().push((iters, time));
}

/// The median time per iteration over the measured samples, in nanoseconds:
/// the same statistic as criterion's "median" point estimate. `None` when the
/// benchmark did not run or ran in test mode (one iteration, no samples).
pub fn median_ns(group: &str, id: &str) -> Option<f64> {
    let all = samples().lock().unwrap_or_else(|e| e.into_inner());
    let calls = all.get(&(group.to_string(), id.to_string()))?;
    let n = sample_size();
    if calls.len() <= n {
        return None;
    }
    let mut per_iter: Vec<f64> =
        calls[calls.len() - n..].iter().map(|(iters, t)| t.as_nanos() as f64 / *iters as f64).collect();
    per_iter.sort_by(|a, b| a.total_cmp(b));
    Some(if n % 2 == 1 { per_iter[n / 2] } else { (per_iter[n / 2 - 1] + per_iter[n / 2]) / 2.0 })
}

/// A number for a table: three significant digits, thousands separated.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "-".to_string();
    }
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    let s = format!("{v:.digits$}");
    let (int, frac) = s.split_once('.').map_or((s.as_str(), None), |(i, f)| (i, Some(f)));
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match frac {
        Some(f) => format!("{grouped}.{f}"),
        None => grouped,
    }
}

/// A ratio for a table, e.g. `0.42x`.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".to_string(),
    }
}

/// A cell holding a median, or `-` when it was not measured.
pub fn cell(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), num)
}

/// Prints a markdown table.
pub fn print_table(title: &str, header: &[&str], rows: &[Vec<String>]) {
    println!("\n{title}\n");
    println!("| {} |", header.join(" | "));
    let align: Vec<&str> =
        header.iter().enumerate().map(|(i, _)| if i == 0 { "---" } else { "---:" }).collect();
    println!("| {} |", align.join(" | "));
    for r in rows {
        println!("| {} |", r.join(" | "));
    }
}

/// The machine and the moment, for the record that goes with the tables.
pub fn print_machine() {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let distance = match cpu_round_trip_ns() {
        Some(ns) => {
            format!("; a cache line's round trip between CPUs 0 and 1 at the end of the run: {ns:.0} ns")
        }
        None => String::new(),
    };
    println!("\n{}; machine: {cores} cores, {cpu}, Linux {kernel}{distance}", utc_now());
}

/// The round trip of one cache line between two threads pinned to CPUs 0
/// and 1, median of 5 batches of 20,000: how near the two CPUs are now. On
/// a virtual machine it moves with where the host runs them (50-86 ns and
/// 350-420 ns on the machine of docs/performance.md), and with it the cost
/// of every record, which one CPU writes and the other reads. `None` where
/// the threads cannot be pinned (fewer than two CPUs, not Linux).
pub fn cpu_round_trip_ns() -> Option<f64> {
    #[cfg(target_os = "linux")]
    {
        use std::sync::atomic::{AtomicU64, Ordering};
        fn pin(cpu: usize) -> bool {
            // SAFETY: a zeroed cpu_set_t is an empty set, and the call reads
            // only the set it is given, for the calling thread.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
            }
        }
        const TRIPS: u64 = 20_000;
        // About a second of waiting: the other thread is not running.
        const GIVE_UP_SPINS: u64 = 100_000_000;
        let flag = std::sync::Arc::new(AtomicU64::new(0));
        let other = flag.clone();
        let echo = std::thread::spawn(move || {
            if !pin(1) {
                other.store(u64::MAX, Ordering::Release);
                return;
            }
            for i in 0..5 * TRIPS {
                let mut spins = 0u64;
                loop {
                    let v = other.load(Ordering::Acquire);
                    if v == u64::MAX {
                        return;
                    }
                    if v == 2 * i + 1 {
                        break;
                    }
                    spins += 1;
                    if spins > GIVE_UP_SPINS {
                        return;
                    }
                    std::hint::spin_loop();
                }
                other.store(2 * i + 2, Ordering::Release);
            }
        });
        let pinned = std::thread::spawn(move || {
            if !pin(0) {
                return None;
            }
            let mut batches = Vec::new();
            for b in 0..5 {
                let start = std::time::Instant::now();
                for i in b * TRIPS..(b + 1) * TRIPS {
                    if flag.load(Ordering::Acquire) == u64::MAX {
                        return None;
                    }
                    flag.store(2 * i + 1, Ordering::Release);
                    let mut spins = 0u64;
                    while flag.load(Ordering::Acquire) != 2 * i + 2 {
                        spins += 1;
                        if spins > GIVE_UP_SPINS {
                            flag.store(u64::MAX, Ordering::Release);
                            return None;
                        }
                        std::hint::spin_loop();
                    }
                }
                batches.push(start.elapsed().as_nanos() as f64 / TRIPS as f64);
            }
            batches.sort_by(f64::total_cmp);
            Some(batches[2])
        });
        let result = pinned.join().ok().flatten();
        let _ = echo.join();
        result
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
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

/// A shared counter of bytes, newlines and flushes that a writer on another
/// thread updates.
#[derive(Clone, Debug, Default)]
pub struct Counts {
    bytes: Arc<AtomicU64>,
    newlines: Arc<AtomicU64>,
    flushes: Arc<AtomicU64>,
    kept: Option<Arc<Mutex<Vec<u8>>>>,
}

impl Counts {
    /// Counts bytes and flushes only.
    pub fn new() -> Counts {
        Counts::default()
    }

    /// Also keeps every byte, for a check that parses the output.
    pub fn keeping() -> Counts {
        Counts { kept: Some(Arc::new(Mutex::new(Vec::new()))), ..Counts::default() }
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire)
    }

    pub fn newlines(&self) -> u64 {
        self.newlines.load(Ordering::Acquire)
    }

    pub fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::Acquire)
    }

    /// The bytes kept so far (empty unless built with [`Counts::keeping`]).
    pub fn kept(&self) -> Vec<u8> {
        self.kept.as_ref().map(|k| k.lock().unwrap_or_else(|e| e.into_inner()).clone()).unwrap_or_default()
    }

    /// A writer that drops what it is given and counts it.
    pub fn writer(&self, count_newlines: bool) -> CountingWriter {
        CountingWriter { counts: self.clone(), count_newlines }
    }
}

/// A null writer that counts: [`Counts::writer`].
#[derive(Clone, Debug)]
pub struct CountingWriter {
    counts: Counts,
    count_newlines: bool,
}

impl Write for CountingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.counts.bytes.fetch_add(buf.len() as u64, Ordering::Release);
        if self.count_newlines {
            let n = buf.iter().filter(|b| **b == b'\n').count() as u64;
            self.counts.newlines.fetch_add(n, Ordering::Release);
        }
        if let Some(k) = &self.counts.kept {
            k.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.counts.flushes.fetch_add(1, Ordering::Release);
        Ok(())
    }
}

/// What a Perfetto trace holds, counted by an independent reader of the
/// protobuf wire format (it knows only the field numbers it needs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerfettoCounts {
    pub packets: u64,
    pub slice_begins: u64,
    pub slice_ends: u64,
    pub instants: u64,
}

/// Calls `f(field, payload)` for each field of a message; a varint's payload
/// is its value in `Ok`, a length-delimited field's is its bytes in `Err`
/// (fixed-width fields are skipped).
fn fields<'a>(
    msg: &'a [u8],
    mut f: impl FnMut(u64, Result<u64, &'a [u8]>) -> Result<(), String>,
) -> Result<(), String> {
    for field in trace_proto_wire::Fields::new(msg) {
        match field.map_err(|e| e.to_string())? {
            (number, Value::Varint(v)) => f(number.into(), Ok(v))?,
            (number, Value::Bytes(bytes)) => f(number.into(), Err(bytes))?,
            _ => {}
        }
    }
    Ok(())
}

/// Counts the `TrackEvent`s of a `perfetto.protos.Trace` by type
/// (`Trace.packet` = 1, `TracePacket.track_event` = 11, `TrackEvent.type` = 9).
pub fn perfetto_counts(trace: &[u8]) -> Result<PerfettoCounts, String> {
    let mut c = PerfettoCounts::default();
    count_packets(trace, &mut c)?;
    Ok(c)
}

/// Counts the packets of `trace`, those inside compressed packets included.
fn count_packets(trace: &[u8], c: &mut PerfettoCounts) -> Result<(), String> {
    fields(trace, |field, payload| {
        let (1, Err(packet)) = (field, payload) else {
            return Err(format!("a top-level field {field} that is not a packet"));
        };
        let mut compressed = None;
        fields(packet, |field, payload| {
            match (field, payload) {
                (11, Err(event)) => fields(event, |field, payload| {
                    if let (9, Ok(kind)) = (field, payload) {
                        match kind {
                            1 => c.slice_begins += 1,
                            2 => c.slice_ends += 1,
                            3 => c.instants += 1,
                            _ => {}
                        }
                    }
                    Ok(())
                })?,
                (50, Err(deflated)) => compressed = Some(deflated),
                _ => {}
            }
            Ok(())
        })?;
        match compressed {
            Some(deflated) => {
                let mut inflated = Vec::new();
                std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(deflated), &mut inflated)
                    .map_err(|e| format!("compressed packets that do not inflate: {e}"))?;
                count_packets(&inflated, c)
            }
            None => {
                c.packets += 1;
                Ok(())
            }
        }
    })
}

/// What a Chrome trace-event JSON array holds, for one span name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChromeCounts {
    /// Entries of any kind.
    pub entries: u64,
    /// Spans of the name: `B` and `X` entries (an `E` closes a `B`).
    pub spans: u64,
    /// Instant (`i`) entries.
    pub instants: u64,
}

/// Parses a Chrome trace and counts spans named `span` and instants.
pub fn chrome_counts(json: &[u8], span: &str) -> Result<ChromeCounts, String> {
    let v: serde_json::Value = serde_json::from_slice(json).map_err(|e| format!("not JSON: {e}"))?;
    let array = v.as_array().ok_or("not a JSON array")?;
    let mut c = ChromeCounts { entries: array.len() as u64, ..ChromeCounts::default() };
    for e in array {
        match e["ph"].as_str() {
            Some("B" | "X") if e["name"] == span => c.spans += 1,
            Some("i" | "I") => c.instants += 1,
            _ => {}
        }
    }
    Ok(c)
}

/// Our capture's configuration with only `BENCH_TRACE_DIR=dir` set: the
/// defaults for everything else.
pub fn config(dir: &Path) -> cabin_trace::Config {
    cabin_trace::Config::from_lookup("BENCH", cabin_trace::FORMATS, |name| {
        (name == "BENCH_TRACE_DIR").then(|| dir.into())
    })
    .expect("the benchmark's configuration is valid")
    .expect("BENCH_TRACE_DIR is set")
}

/// A directory for trace files, in memory where the system has one, so that
/// writing them costs no disk I/O, or under `BENCH_SCRATCH_DIR` when that is
/// set (e.g. a directory on a disk, where a tool would write its traces: the
/// page cache there costs the writing process less per byte than tmpfs, and
/// the write-back is the kernel's). Removed when dropped.
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    pub fn new(what: &str) -> Scratch {
        let shm = Path::new("/dev/shm");
        let base = match std::env::var_os("BENCH_SCRATCH_DIR") {
            Some(dir) => PathBuf::from(dir),
            None if shm.is_dir() => shm.to_path_buf(),
            None => std::env::temp_dir(),
        };
        let dir = base.join(format!("cabin-trace-bench-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the benchmark's scratch directory");
        Scratch { dir }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The ids of this process's threads (Linux; empty elsewhere).
pub fn thread_ids() -> Vec<u64> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    let mut ids: Vec<u64> = dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    ids.sort_unstable();
    ids
}

/// CPU time a thread of this process has run, in nanoseconds (Linux's
/// schedstat; `None` elsewhere or once the thread has exited).
pub fn thread_cpu_ns(tid: u64) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// CPU time of the whole process so far, every thread, user and system, in
/// nanoseconds (`getrusage(RUSAGE_SELF)`, microsecond resolution; 0 where
/// there is no `getrusage`: the benchmarks measure on Unix).
#[cfg(unix)]
pub fn process_cpu_ns() -> u64 {
    let (user, system) = process_user_system_ns();
    user + system
}

/// The CPU time of the whole process so far, all threads, split into user
/// and system (kernel) time, in nanoseconds (`getrusage(RUSAGE_SELF)`; zeros
/// where it fails).
#[cfg(unix)]
pub fn process_user_system_ns() -> (u64, u64) {
    // SAFETY: an all-zero rusage is valid, and getrusage only writes to it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return (0, 0);
    }
    let ns = |t: libc::timeval| (t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64) * 1000;
    (ns(ru.ru_utime), ns(ru.ru_stime))
}

/// Not measured off Unix (see the Unix version).
#[cfg(not(unix))]
pub fn process_cpu_ns() -> u64 {
    0
}

/// Not measured off Unix (see the Unix version).
#[cfg(not(unix))]
pub fn process_user_system_ns() -> (u64, u64) {
    (0, 0)
}

/// A line of `/proc/self/status` in KiB, e.g. `VmRSS` or `VmHWM` (Linux;
/// `None` elsewhere).
pub fn status_kib(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.split(':').next() == Some(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The median of `xs` (`NaN` when empty).
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// `min-max` of `xs`, as table numbers.
pub fn spread(xs: &[f64]) -> String {
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{}-{}", num(min), num(max))
}

/// CPU time the calling thread has run, user and system, in nanoseconds
/// (`CLOCK_THREAD_CPUTIME_ID`): unlike a wall clock, it does not count the
/// time the thread waits while other processes have the machine's cores.
#[cfg(unix)]
pub fn own_thread_cpu() -> Duration {
    // SAFETY: an all-zero timespec is valid, and clock_gettime only writes to it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `ts` is a valid, writable timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Not measured off Unix (see the Unix version).
#[cfg(not(unix))]
pub fn own_thread_cpu() -> Duration {
    Duration::ZERO
}
