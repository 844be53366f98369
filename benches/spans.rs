//! One capture of a loop of spans with two fields, for comparing two builds
//! of the writer quickly: prints the total CPU time of the process per span
//! (every thread, from before the capture starts to after its files are
//! written), the calling thread's, and what the capture dropped or waited.
//!
//! ```text
//! cargo bench -p cabin-trace-benches --bench spans -- [SPANS [SINKS]]
//! ```
//!
//! `SINKS` is `default` (Chrome, Perfetto and the summary), `perfetto`
//! (Perfetto and the summary) or `summary`; `SPANS` defaults to 200,000
//! (2,000 when run as a test by `cargo test --benches`). The
//! loop flushes every 10,000 spans, as the whole benchmark's first workload
//! does, unless `SPANS_NO_FLUSH` is set. With `SPANS_TEXT` set, the second
//! field is a string (a source file's path, as a build tool's spans carry)
//! instead of a number. With `SPANS_EVENTS` set, the loop records events
//! with the same two fields (`info!(a = i, b = 7, "bench event")`) instead
//! of spans, and the figures are per event. With `SPANS_FMT` set, the capture runs with a tool's
//! log layer (`fmt` at WARN on a registry, cabin's set-up), as
//! `Capture::with_layer` runs it. With `SPANS_IDLE=N`, N more threads each
//! record one span before the loop and then wait, idle, until it ends, as a
//! tool's pool of workers does between jobs. Files go to `/dev/shm` where it
//! exists. To compare builds, copy each build's binary
//! (`target/release/deps/spans-*`) aside and run the copies alternately: the
//! machine's noise is larger than most single changes.

use std::time::Instant;

use trace_core::{Config, Session, Sink};

mod support;

fn main() {
    // Run as a test (`cargo test --benches`, no `--bench`), a small loop checks it works.
    let full = std::env::args().any(|a| a == "--bench");
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let default_spans = if full { 200_000 } else { 2_000 };
    let spans: u64 = args.next().and_then(|s| s.replace('_', "").parse().ok()).unwrap_or(default_spans);
    let which = args.next().unwrap_or_else(|| "default".to_string());
    let flush = std::env::var_os("SPANS_NO_FLUSH").is_none();
    let text = std::env::var_os("SPANS_TEXT").is_some();
    let events = std::env::var_os("SPANS_EVENTS").is_some();
    let dir = support::Scratch::new("spans");
    // The directory is the scratch one; the other variables (`SPANS_TRACE_CPU`,
    // `SPANS_TRACE_SAMPLE`, ...) come from the environment, so a run can turn them off.
    let config = Config::from_lookup("SPANS", &["chrome", "perfetto"], |name| {
        if name == "SPANS_TRACE_DIR" {
            Some(dir.path().into())
        } else {
            std::env::var_os(name)
        }
    })
    .expect("a valid configuration")
    .expect("SPANS_TRACE_DIR is set");
    let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
    if which == "default" {
        sinks.push(Box::new(trace_sink_chrome::ChromeSink::new()));
    }
    if which != "summary" {
        sinks.push(Box::new(trace_sink_perfetto::PerfettoSink::new()));
    }
    sinks.push(Box::new(trace_summary::SummarySink::new()));
    let (cpu0, wall) = (support::process_cpu_ns(), Instant::now());
    let session = if std::env::var_os("SPANS_FMT").is_some() {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::Layer;
        let fmt = tracing_subscriber::fmt::layer()
            .with_writer(std::io::sink)
            .with_filter(tracing::level_filters::LevelFilter::WARN);
        let tool = tracing::Dispatch::new(tracing_subscriber::Registry::default().with(fmt));
        Session::start_forwarding(&config, "spans", sinks, Some(tool))
    } else {
        Session::start(&config, "spans", sinks)
    }
    .expect("the capture starts");
    let idle: usize = std::env::var("SPANS_IDLE").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let done_rx = std::sync::Arc::new(std::sync::Mutex::new(done_rx));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let workers: Vec<_> = (0..idle)
        .map(|w| {
            let (dispatch, ready, done) = (session.dispatch().clone(), ready_tx.clone(), done_rx.clone());
            std::thread::spawn(move || {
                tracing::dispatcher::with_default(&dispatch, || {
                    drop(tracing::info_span!("worker_job", w).entered());
                });
                let _ = ready.send(());
                // Every worker waits on the one lock or in `recv`: idle.
                let _ = done.lock().map(|rx| rx.recv());
            })
        })
        .collect();
    for _ in 0..idle {
        ready_rx.recv().expect("a worker is ready");
    }
    let thread0 = support::own_thread_cpu();
    session.in_scope(|| {
        for i in 0..spans {
            if events {
                tracing::info!(a = i, b = 7, "bench event");
            } else if text {
                drop(tracing::info_span!("bench_span", a = i, b = "src/build/compile_unit.c").entered());
            } else {
                drop(tracing::info_span!("bench_span", a = i, b = 7).entered());
            }
            if flush && i % 10_000 == 9_999 {
                session.flush();
            }
        }
    });
    let calling = (support::own_thread_cpu() - thread0).as_nanos();
    drop(done_tx);
    for w in workers {
        w.join().expect("an idle worker");
    }
    let report = session.finish();
    let total = support::process_cpu_ns() - cpu0;
    assert!(report.files.iter().all(|f| f.complete), "{:?}", report.warnings());
    println!(
        "{which}: {spans} spans: total CPU {:.0} ns/span, calling thread {:.0} ns/span, wall {:.0} ns/span; \
         {} records dropped, waited {} ms",
        total as f64 / spans as f64,
        calling as f64 / spans as f64,
        wall.elapsed().as_nanos() as f64 / spans as f64,
        report.dropped_records,
        report.waited_ns / 1_000_000
    );
}
