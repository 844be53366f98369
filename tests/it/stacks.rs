//! Sampled CPU stacks (`CABIN_TRACE_STACKS`) of real threads of this test
//! process: a span that burns CPU and one that sleeps, a helper thread, a
//! tokio worker polling an instrumented task; read back from the folded
//! file, the summary, Perfetto's trace processor and speedscope.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cabin_trace::{Capture, Config, Report, Timings};
use tracing::Instrument;

use crate::support::*;
use crate::trace_processor::{import, query};

/// CPU time each burning span spends in [`burn_in_this_function`].
const BURN: Duration = Duration::from_millis(100);

/// The thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Spins until the thread has used `cpu` more CPU time (not wall time: the
/// machine may be busy). The loop calls nothing, even unoptimised, so that
/// this function is the leaf of its samples.
#[inline(never)]
fn burn_in_this_function(cpu: Duration) -> u64 {
    let until = thread_cpu() + cpu;
    let mut x = 1u64;
    // About a millisecond between two readings of the clock, a system call.
    while thread_cpu() < until {
        let mut i = 0u32;
        while i < 1_000_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            i += 1;
        }
    }
    std::hint::black_box(x)
}

/// The caller the samples must show below the burning function.
#[inline(never)]
fn caller_of_the_burn(cpu: Duration) -> u64 {
    std::hint::black_box(burn_in_this_function(cpu)) + 1
}

/// Captures `f` with stacks at 1 ms, every file written.
fn capture(dir: &Path, f: impl FnOnce()) -> Report {
    let config = Config::from_lookup("TEST", cabin_trace::FORMATS, |name| match name {
        "TEST_TRACE_DIR" => Some(dir.into()),
        "TEST_TRACE_STACKS" => Some("1ms".into()),
        _ => None,
    })
    .unwrap();
    let ((), report) = Capture::from_config(config).run_with_report("stacks", f).unwrap();
    let report = report.unwrap();
    assert!(report.is_complete(), "{:?}", report.warnings());
    assert_eq!(
        report.stacks_error, None,
        "perf events refused here: the tests need perf_event_paranoid <= 2"
    );
    report
}

fn file(report: &Report, suffix: &str) -> PathBuf {
    report
        .files
        .iter()
        .map(|f| f.path.clone())
        .find(|p| p.to_string_lossy().ends_with(suffix))
        .unwrap_or_else(|| panic!("no {suffix} among {:?}", report.files))
}

/// The folded file's lines: frames root first, and the count.
fn folded(report: &Report) -> Vec<(Vec<String>, u64)> {
    let text = std::fs::read_to_string(file(report, ".stacks.folded")).unwrap();
    text.lines()
        .map(|line| {
            let (stack, count) = line.rsplit_once(' ').unwrap_or_else(|| panic!("a folded line: {line}"));
            (stack.split(';').map(str::to_string).collect(), count.parse().unwrap())
        })
        .collect()
}

fn ends_with_name(frame: &str, name: &str) -> bool {
    frame == name || frame.ends_with(&format!("::{name}"))
}

#[test]
fn a_span_burning_cpu_holds_its_samples_with_the_function_on_top_and_its_caller_below_and_a_sleep_almost_none(
) {
    let dir = tempfile::tempdir().unwrap();
    let report = capture(dir.path(), || {
        tracing::info_span!("burn").in_scope(|| caller_of_the_burn(BURN));
        tracing::info_span!("sleep").in_scope(|| std::thread::sleep(BURN));
    });
    let lines = folded(&report);
    let in_span =
        |name: &'static str| lines.iter().filter(move |(f, _)| f.first().is_some_and(|s| s == name));
    let burn: u64 = in_span("span:burn").map(|(_, n)| n).sum();
    let on_top: u64 = in_span("span:burn")
        .filter(|(f, _)| {
            let n = f.len();
            n >= 3
                && ends_with_name(&f[n - 1], "burn_in_this_function")
                && ends_with_name(&f[n - 2], "caller_of_the_burn")
        })
        .map(|(_, n)| n)
        .sum();
    let sleep: u64 = in_span("span:sleep").map(|(_, n)| n).sum();
    assert!(burn >= 80, "{burn} samples in 100 ms of CPU at 1 ms: {lines:#?}");
    assert!(
        on_top * 10 >= burn * 8,
        "{on_top} of {burn} with the burn on top and its caller below: {lines:#?}"
    );
    assert!(sleep <= 5, "{sleep} samples in a span that sleeps");

    // The summary says the same, and how many were whole.
    let timings = Timings::from_path(file(&report, ".timings.json")).unwrap();
    let stacks = &timings.stacks;
    assert_eq!((stacks.status.as_str(), stacks.interval_us), ("on", Some(1000)));
    assert!(stacks.samples_taken >= burn, "{stacks:?}");
    assert!(
        stacks.samples_not_unwound * 20 <= stacks.samples_taken,
        "at least 95% unwound to the thread's start: {stacks:?}"
    );
    let span = stacks.spans.iter().find(|s| s.name == "burn").expect("the burn span's samples");
    assert_eq!(span.samples, burn);
    assert!(ends_with_name(&span.top_functions[0].function, "burn_in_this_function"), "{span:?}");
    assert!(stacks.spans.iter().find(|s| s.name == "sleep").is_none_or(|s| s.samples <= 5));
    let schema = crate::summary::check_schema(&file(&report, ".timings.json"));
    assert!(schema.status.success(), "{}", String::from_utf8_lossy(&schema.stdout));
}

#[test]
fn every_sample_lies_inside_the_capture_on_the_thread_that_ran_it_and_the_trace_processor_names_its_leaf() {
    let dir = tempfile::tempdir().unwrap();
    let report = capture(dir.path(), || {
        tracing::info_span!("burn").in_scope(|| caller_of_the_burn(BURN / 2));
        tracing::info_span!("start_helper").in_scope(|| {
            let helper = cabin_trace::spawn("burner", || {
                tracing::info_span!("helper_burn").in_scope(|| caller_of_the_burn(BURN / 2))
            });
            helper.unwrap().join().unwrap();
        });
    });
    let trace = file(&report, ".pftrace");
    let imported = import(&trace);
    assert!(imported.errors.is_empty(), "import errors: {:?}", imported.errors);
    let tables = query(
        &trace,
        &["select s.ts, t.tid, f.name as leaf from perf_sample s join thread t using (utid) \
             join stack_profile_callsite c on c.id = s.callsite_id \
             join stack_profile_frame f on f.id = c.frame_id order by s.ts"],
    );
    let samples: Vec<(i64, i64, String)> = tables[0]
        .records()
        .iter()
        .map(|r| {
            (
                r["ts"].unwrap().parse().unwrap(),
                r["tid"].unwrap().parse().unwrap(),
                r["leaf"].unwrap().to_string(),
            )
        })
        .collect();
    assert!(samples.len() >= 80, "{} samples imported", samples.len());
    let root = imported.slices.iter().find(|s| s.name == "command").expect("the capture's root span");
    let (start, end) = (root.ts, root.ts + root.dur);
    assert!(samples.iter().all(|s| (start..=end).contains(&s.0)), "samples outside [{start}, {end}]");
    let known: Vec<i64> = imported.threads.keys().map(|k| k.1).collect();
    assert!(samples.iter().all(|s| known.contains(&s.1)), "a sample on a thread the capture does not know");
    // Each burning span's samples are on its own thread, leaf named.
    for name in ["burn", "helper_burn"] {
        let span = imported.slices.iter().find(|s| s.name == name).unwrap();
        let inside: Vec<_> =
            samples.iter().filter(|s| (span.ts..=span.ts + span.dur).contains(&s.0)).collect();
        let on_it = inside.iter().filter(|s| Some(s.1) == span.tid).count();
        let named = inside.iter().filter(|s| ends_with_name(&s.2, "burn_in_this_function")).count();
        assert!(on_it >= 40, "{name}: {on_it} of {} samples on its thread", inside.len());
        assert!(named * 10 >= on_it * 8, "{name}: {named} of {on_it} with the leaf named");
    }
}

#[test]
fn an_instrumented_tokio_tasks_samples_are_on_the_worker_that_polled_it() {
    let dir = tempfile::tempdir().unwrap();
    let report = capture(dir.path(), || {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
        runtime.block_on(async {
            let task = async { caller_of_the_burn(BURN / 2) }.instrument(tracing::info_span!("task"));
            let task = tracing::instrument::WithSubscriber::with_current_subscriber(task);
            tokio::spawn(task).await.unwrap();
        });
    });
    let imported = import(&file(&report, ".pftrace"));
    // The poll, on the thread's track of the worker that ran it.
    let poll = imported
        .slices
        .iter()
        .find(|s| s.name == "task" && s.scope == "thread")
        .expect("the task's poll on its worker's track");
    let worker = imported.threads.iter().find(|(k, _)| Some(k.1) == poll.tid).map(|(_, n)| n.clone());
    assert!(worker.clone().flatten().is_some_and(|n| n.contains("tokio")), "{poll:?} on {worker:?}");
    let lines = folded(&report);
    let in_task: u64 =
        lines.iter().filter(|(f, _)| f.first().is_some_and(|s| s == "span:task")).map(|l| l.1).sum();
    assert!(in_task >= 40, "{in_task} samples in the task's span: {lines:#?}");
    let tables = query(
        &file(&report, ".pftrace"),
        &[&format!(
            "select count(*) as n, sum(t.tid = {}) as on_worker from perf_sample s join thread t using (utid) \
             where s.ts between {} and {}",
            poll.tid.unwrap(),
            poll.ts,
            poll.ts + poll.dur
        )],
    );
    let row = &tables[0].records()[0];
    let (n, on_worker): (u64, u64) =
        (row["n"].unwrap().parse().unwrap(), row["on_worker"].unwrap().parse().unwrap());
    assert!(n >= 40 && on_worker * 10 >= n * 9, "{on_worker} of {n} samples during the poll on its worker");
}

#[test]
fn speedscope_opens_the_folded_stacks_with_the_spans_as_their_first_frames() {
    let dir = tempfile::tempdir().unwrap();
    let report = capture(dir.path(), || {
        tracing::info_span!("burn").in_scope(|| caller_of_the_burn(BURN / 2));
    });
    let folded = file(&report, ".stacks.folded");
    let artifacts = crate::viewer::artifacts();
    std::fs::copy(&folded, artifacts.join("stacks.folded")).expect("keep the folded stacks");
    let screenshot = artifacts.join("speedscope-stacks.png");
    let _ = std::fs::remove_file(&screenshot);

    let report = crate::viewer::speedscope(&folded, &screenshot, "span:burn");

    assert_eq!(report["page_errors"], serde_json::json!([]), "uncaught errors in the page");
    let messages = report["console"].as_array().unwrap();
    let from_page: Vec<_> = messages.iter().filter(|m| !crate::viewer::from_the_software_gpu(m)).collect();
    assert!(from_page.is_empty(), "console warnings or errors: {from_page:#?}");
    assert_eq!(report["frame_names"], serde_json::json!(["span:burn"]), "{report}");
    let png = std::fs::read(&screenshot).expect("the screenshot is kept");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "a real screenshot: {} bytes", png.len());
    println!("stacks: screenshot {}", screenshot.display());
}

#[test]
fn a_malformed_stacks_interval_refuses_to_run_naming_the_variable_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("traces");
    for value in ["0ms", "500ms", "fast"] {
        let out = std::process::Command::new(example_exe("resources"))
            .args(["--cpu-ms", "1"])
            .env("CABIN_TRACE_DIR", &target)
            .env("CABIN_TRACE_STACKS", value)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{value}: {}", stderr(&out));
        let message = stderr(&out);
        assert!(
            message.contains(&format!("error: CABIN_TRACE_STACKS=`{value}`: "))
                && message.contains("expected an interval of CPU time from `1ms` to `100ms`"),
            "{message}"
        );
        assert!(out.stdout.is_empty(), "the command did not run");
        assert!(!target.exists(), "no directory or file for CABIN_TRACE_STACKS={value}");
    }
}

#[test]
fn with_stacks_on_the_demo_prints_and_exits_the_same_and_its_summary_says_they_were_on() {
    let plain = demo(&[], &[]);
    let dir = tempfile::tempdir().unwrap();
    let traced = demo(&[], &[("CABIN_TRACE_DIR", dir.path()), ("CABIN_TRACE_STACKS", Path::new("1ms"))]);
    assert_eq!(plain.status.code(), traced.status.code());
    assert_eq!(plain.stdout, traced.stdout);
    assert!(!stderr(&traced).contains("CPU stacks"), "no warning: perf events are allowed here");
    // The demo uses about a millisecond of CPU: a sample or two.
    let _folded = one(dir.path(), ".stacks.folded");
    let timings = Timings::from_path(one(dir.path(), ".timings.json")).unwrap();
    assert_eq!((timings.stacks.status.as_str(), timings.stacks.interval_us), ("on", Some(1000)));
    assert_eq!(timings.stacks.threads_not_sampled, 0);
}
