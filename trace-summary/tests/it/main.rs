//! The summary as a sink of real captures, and its reader.

use std::io::{self, Write};
use std::path::Path;

use trace_core::{Config, Event, Finish, Session, Sink};
use trace_summary::{ReadError, SummarySink, Timings};

fn config(dir: &Path) -> Config {
    Config::from_lookup("T", &[], |n| (n == "T_TRACE_DIR").then(|| dir.into())).unwrap().unwrap()
}

/// A trace sink whose writes start failing after `ok_events` events, as a full
/// disk would make them.
struct FailsMidRun {
    ok_events: usize,
    seen: usize,
}

impl Sink for FailsMidRun {
    fn name(&self) -> &'static str {
        "flaky"
    }
    fn suffix(&self) -> &'static str {
        "flaky.txt"
    }
    fn event(&mut self, _: &Event<'_>, out: &mut dyn Write) -> io::Result<()> {
        self.seen += 1;
        if self.seen > self.ok_events {
            return Err(io::Error::other("no space left on the test's device"));
        }
        writeln!(out, "event {}", self.seen)
    }
    fn finish(&mut self, _: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "end")
    }
}

#[test]
fn with_a_trace_sink_failing_mid_run_the_summary_is_written_and_names_the_incomplete_file() {
    let dir = tempfile::tempdir().unwrap();
    let sinks: Vec<Box<dyn Sink>> =
        vec![Box::new(FailsMidRun { ok_events: 5, seen: 0 }), Box::new(SummarySink::new())];
    let session = Session::start(&config(dir.path()), "flaky", sinks).unwrap();
    session.in_scope(|| {
        for i in 0..20u64 {
            tracing::info_span!("step", i).in_scope(|| ());
        }
    });
    let report = session.finish();
    assert!(!report.files[0].complete);
    assert!(report.files[1].complete, "the summary itself is complete");
    let partial = dir.path().join(format!("{}.flaky.txt.partial", report.stem));
    assert!(partial.exists(), "the failed file stays .partial");
    assert!(!dir.path().join(format!("{}.flaky.txt", report.stem)).exists());
    assert!(report.warnings()[0].contains(&partial.display().to_string()), "{:?}", report.warnings());

    let t = Timings::from_path(&report.files[1].path).unwrap();
    assert!(!t.trace_complete);
    assert_eq!(t.files.len(), 1);
    assert_eq!(t.files[0].file, format!("{}.flaky.txt", report.stem));
    assert!(!t.files[0].complete);
    assert!(t.files[0].error.as_deref().unwrap().contains("no space left"));
    // The summary still counts every span: it does not depend on the trace file.
    let step = t.spans.iter().find(|s| s.name == "step").unwrap();
    assert_eq!((step.count, step.field_sums["i"]), (20, 190));
}

/// A trace sink that panics on its 100th event.
struct PanicsOnTheHundredth(u64);

impl Sink for PanicsOnTheHundredth {
    fn name(&self) -> &'static str {
        "panicky"
    }
    fn suffix(&self) -> &'static str {
        "panicky.txt"
    }
    fn event(&mut self, _: &Event<'_>, out: &mut dyn Write) -> io::Result<()> {
        self.0 += 1;
        assert!(self.0 < 100, "the sink's own bug at event {}", self.0);
        writeln!(out, "event {}", self.0)
    }
    fn finish(&mut self, _: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "end")
    }
}

#[test]
fn with_a_trace_sink_that_panics_the_summary_completes_and_names_the_sink() {
    let dir = tempfile::tempdir().unwrap();
    let sinks: Vec<Box<dyn Sink>> = vec![Box::new(PanicsOnTheHundredth(0)), Box::new(SummarySink::new())];
    let session = Session::start(&config(dir.path()), "panicky", sinks).unwrap();
    session.in_scope(|| {
        for i in 0..300u64 {
            tracing::info_span!("step", i).in_scope(|| ());
        }
    });
    let report = session.finish();
    assert!(!report.files[0].complete);
    assert!(report.files[1].complete, "the summary itself is complete: {report:?}");
    assert!(dir.path().join(format!("{}.panicky.txt.partial", report.stem)).exists());
    let t = Timings::from_path(&report.files[1].path).unwrap();
    assert!(!t.trace_complete);
    let why = t.files[0].error.as_deref().unwrap();
    assert!(why.contains("panicky sink panicked") && why.contains("event 100"), "{why}");
    let step = t.spans.iter().find(|s| s.name == "step").unwrap();
    assert_eq!(step.count, 300, "the summary saw every span");
}

fn write_with_version(dir: &Path, version: &str) -> std::path::PathBuf {
    let sinks: Vec<Box<dyn Sink>> = vec![Box::new(SummarySink::new())];
    let report = Session::start(&config(dir), "v", sinks).unwrap().finish();
    let path = &report.files[0].path;
    let text = std::fs::read_to_string(path).unwrap();
    let changed = text.replacen("\"format_version\": 3", &format!("\"format_version\": {version}"), 1);
    let out = dir.join(format!("v{version}.timings.json"));
    std::fs::write(&out, changed).unwrap();
    out
}

#[test]
fn reading_another_format_version_fails_naming_the_file_and_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    // Format 1 counted a child's peak from before an exec; format 4 is the future.
    for found in [1, 4] {
        let path = write_with_version(dir.path(), &found.to_string());
        let err = Timings::from_path(&path).unwrap_err();
        assert!(matches!(err, ReadError::Version { found: Some(f), expected: 3, .. } if f == found));
        let msg = err.to_string();
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(
            msg.contains(&format!("format_version {found}")) && msg.contains("format_version 3"),
            "{msg}"
        );
    }
}

#[test]
fn a_missing_or_non_numeric_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = Timings::from_path(write_with_version(dir.path(), "\"one\"")).unwrap_err();
    assert!(matches!(err, ReadError::Version { found: None, .. }), "{err}");
}

#[test]
fn unknown_fields_are_ignored_by_the_reader() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_with_version(dir.path(), "3, \"from_the_future\": {\"x\": 1}");
    let t = Timings::from_path(&path).unwrap();
    assert_eq!(t.format_version, 3);
}

#[test]
fn a_format_2_file_reads_with_its_stacks_off() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_with_version(dir.path(), "2");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("stacks");
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    let t = Timings::from_path(&path).unwrap();
    assert_eq!((t.format_version, t.stacks.status.as_str(), t.stacks.interval_us), (2, "off", None));
}

#[test]
fn a_file_that_is_not_json_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.timings.json");
    std::fs::write(&path, b"[1, 2").unwrap();
    let err = Timings::from_path(&path).unwrap_err();
    assert!(matches!(err, ReadError::Parse { .. }));
    assert!(err.to_string().starts_with(&path.display().to_string()));
    let missing = Timings::from_path(dir.path().join("missing.json")).unwrap_err();
    assert!(matches!(missing, ReadError::Io { .. }));
}

#[test]
fn the_table_lists_the_top_spans_by_total_time() {
    let dir = tempfile::tempdir().unwrap();
    let sinks: Vec<Box<dyn Sink>> = vec![Box::new(SummarySink::new())];
    let session = Session::start(&config(dir.path()), "t", sinks).unwrap();
    session.in_scope(|| {
        tracing::info_span!("slow").in_scope(|| std::thread::sleep(std::time::Duration::from_millis(5)));
        tracing::info_span!("fast", hits = 2u64).in_scope(|| ());
    });
    let report = session.finish();
    let table = Timings::from_path(&report.files[0].path).unwrap().table(10);
    let slow = table.find("slow (").unwrap();
    let fast = table.find("fast (").unwrap();
    assert!(slow < fast, "largest first:\n{table}");
    assert!(table.contains("hits=2"), "{table}");
    assert!(table.contains("ninja: not_run"), "{table}");
}

#[test]
fn spans_are_totalled_by_name_and_target_whatever_their_call_site() {
    use trace_core::{Field, Level, Site, Start, Value};

    let mut sink = SummarySink::default();
    let mut out = Vec::new();
    let mut start = Start::default();
    start.command = "c";
    start.stem = "s";
    start.pid = 1;
    start.filter = "trace";
    sink.start(&start, &mut out).unwrap();
    // Two call sites of one name and target (their strings at different
    // addresses), and the same name under another target.
    let (name_a, name_b) = (String::from("compile"), String::from("compile"));
    // The thread CPU time of a slice that carries it adds to its name's;
    // one that does not (unclosed, or below `<P>_TRACE_CPU`) adds nothing.
    let cpu = |ns: u64| Some(trace_core::ThreadCpu { begin_ns: 7_000, end_ns: 7_000 + ns });
    let ends = [
        (name_a.as_str(), "cabin::build", 1_000_000, 3, false, cpu(400_000)),
        (name_b.as_str(), "cabin::build", 2_000_000, 4, true, None),
        (name_a.as_str(), "cabin::fetch", 5_000_000, 7, false, None),
    ];
    for (name, target, ns, files, unclosed, cpu) in ends {
        let fields = [Field { name: "files", value: Value::U64(files) }];
        let site = Site::new(name, target, Level::INFO, None, None);
        let end = Event::SpanEnd {
            thread: 1,
            ts: 10_000_000 + ns,
            begin_ts: 10_000_000,
            site,
            fields: &fields,
            recorded: &[],
            unclosed,
            cpu,
        };
        sink.event(&end, &mut out).unwrap();
    }
    let mut finish = Finish::default();
    finish.end_ns = 20_000_000;
    sink.finish(&finish, &mut out).unwrap();
    let t = Timings::from_slice(&out, Path::new("s.timings.json")).unwrap();
    let rows: Vec<(&str, &str, u64, u64, u64, i128)> = t
        .spans
        .iter()
        .map(|s| {
            let files = s.field_sums.get("files").copied().unwrap_or(-1);
            (s.name.as_str(), s.target.as_str(), s.count, s.total_inclusive_us, s.unclosed, files)
        })
        .collect();
    assert_eq!(
        rows,
        [("compile", "cabin::fetch", 1, 5_000, 0, 7), ("compile", "cabin::build", 2, 3_000, 1, 7)]
    );
    let cpu: Vec<Option<u64>> = t.spans.iter().map(|s| s.total_inclusive_thread_cpu_us).collect();
    assert_eq!(cpu, [None, Some(400)]);
    // The table gives it beside the inclusive time, `-` where no slice carried one.
    let table = t.table(8);
    let rows: Vec<Vec<&str>> =
        table.lines().skip(2).take(2).map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[0][..3], ["5.000", "-", "1"], "{table}");
    assert_eq!(rows[1][..3], ["3.000", "0.400", "2"], "{table}");
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.matches("total_inclusive_thread_cpu_us").count(), 1, "absent where none: {text}");
}

#[test]
fn the_children_a_capture_waited_for_give_its_child_figures_and_only_they_do() {
    use trace_core::ChildUsage;

    let dir = tempfile::tempdir().unwrap();
    let sinks: Vec<Box<dyn Sink>> = vec![Box::new(SummarySink::new())];
    let session = Session::start(&config(dir.path()), "kids", sinks).unwrap();
    // Another capture's child, on another thread: not this capture's.
    let other = Session::start(&config(dir.path()), "other", vec![Box::new(SummarySink::new())]).unwrap();
    other.in_scope(|| {
        let h = trace_core::current().unwrap();
        h.child_exited(&ChildUsage { user_us: 1_000_000, system_us: 1_000_000, max_rss_kib: 9_999_999 });
    });
    session.in_scope(|| {
        let h = trace_core::current().unwrap();
        h.child_exited(&ChildUsage { user_us: 700, system_us: 30, max_rss_kib: 5_000 });
        h.child_exited(&ChildUsage { user_us: 300, system_us: 20, max_rss_kib: 12_000 });
    });
    let report = session.finish();
    drop(other);
    let summary = Timings::from_path(&report.files[0].path).unwrap().resources;
    let r = summary.figures;
    if let Some(missing) = trace_core::os::missing() {
        // Windows: no figure is read, and the summary says so.
        assert_eq!(summary.missing.as_deref(), Some(missing));
        assert_eq!((r.waited_children, r.largest_child_max_rss_kib, r.self_user_us), (None, None, None));
        return;
    }
    assert_eq!(summary.missing, None);
    assert_eq!(r.waited_children, Some(2));
    assert_eq!((r.waited_children_user_us, r.waited_children_system_us), (Some(1_000), Some(50)));
    assert_eq!(r.largest_child_max_rss_kib, Some(12_000), "the largest peak, not a sum");
    assert!(r.self_user_us.is_some() && r.self_max_rss_kib.unwrap() > 0, "{r:?}");
}

#[test]
fn a_capture_that_waited_for_no_child_has_no_child_peak() {
    let dir = tempfile::tempdir().unwrap();
    let sinks: Vec<Box<dyn Sink>> = vec![Box::new(SummarySink::new())];
    let report = Session::start(&config(dir.path()), "alone", sinks).unwrap().finish();
    let t = Timings::from_path(&report.files[0].path).unwrap();
    assert_eq!(t.resources.figures.largest_child_max_rss_kib, None);
    assert_eq!(t.resources.figures.waited_children, trace_core::os::missing().is_none().then_some(0));
    // Where the image start is recorded, startup counts from it, to the microsecond.
    if t.startup_since.as_deref() == Some(trace_summary::SINCE_IMAGE_START) {
        assert_eq!(t.startup_resolution_us, 1);
        assert!(t.startup_us.is_some());
    }
}
