//! A tool that logs the usual way, for the test that its output is the same
//! with capture on and off (tests/it/logging.rs).
//!
//! `logtool global` installs a global `fmt` subscriber (`fmt().init()`);
//! `logtool layer` hands an `fmt` layer to `Capture::with_layer`, and
//! `logtool warn-layer` the same layer at WARN, as cabin runs it (the spans
//! at INFO are then the capture's alone). Either way
//! it logs from the main thread, a thread started with `cabin_trace::spawn`,
//! one started with `bind`, a plain `std` thread and a scoped thread, inside
//! and outside spans, then prints `built` on stdout.

use std::process::ExitCode;

use tracing::level_filters::LevelFilter;
use tracing::{debug, info, info_span, warn};
use tracing_subscriber::Layer;

fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let capture = match mode.as_str() {
        "global" => {
            tracing_subscriber::fmt()
                .without_time()
                .with_ansi(false)
                .with_writer(std::io::stderr)
                .with_max_level(LevelFilter::INFO)
                .init();
            cabin_trace::Capture::from_env("CABIN")
        }
        "layer" | "warn-layer" => cabin_trace::Capture::from_env("CABIN").map(|c| {
            let level = if mode == "layer" { LevelFilter::INFO } else { LevelFilter::WARN };
            c.with_layer(
                tracing_subscriber::fmt::layer()
                    .without_time()
                    .with_ansi(false)
                    .with_writer(std::io::stderr)
                    .with_filter(level),
            )
        }),
        _ => {
            eprintln!("usage: logtool global|layer|warn-layer");
            return ExitCode::from(2);
        }
    };
    let capture = match capture {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match capture.run("build", work) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn work() {
    info!("starting");
    let phase = info_span!("resolve", packages = 3u64).entered();
    warn!(attempt = 1u64, "retrying a download");
    let fetch = cabin_trace::spawn("fetch", || {
        info_span!("fetch", url = "https://example.invalid/a").in_scope(|| info!(bytes = 10u64, "fetched"))
    });
    fetch.expect("spawn").join().expect("join");
    std::thread::spawn(cabin_trace::bind(|| info!("from a bound thread"))).join().expect("join");
    std::thread::spawn(|| info!("from a plain thread")).join().expect("join");
    drop(phase);
    let moved = info_span!("compile", unit = "lib", cached = tracing::field::Empty);
    std::thread::scope(|s| {
        s.spawn(cabin_trace::bind(|| {
            moved.in_scope(|| {
                moved.record("cached", false);
                info!("compiled");
            })
        }));
    });
    debug!("not shown at info");
    println!("built");
}
