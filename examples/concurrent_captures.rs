//! Runs several captures at once on concurrent threads of one process, each
//! recording spans labelled with its own number, to show (and test) that every
//! capture holds exactly its own events.
//!
//! ```text
//! CABIN_TRACE_DIR=target/traces cargo run --example concurrent_captures -- [--captures N] [--spans N]
//! ```
//!
//! Prints one line per capture: its number and the stem of its files.

use std::io::Write;
use std::process::ExitCode;
use std::sync::{Arc, Barrier};

fn main() -> ExitCode {
    let mut captures = 16usize;
    let mut spans = 200u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let value = args.next().and_then(|v| v.parse::<u64>().ok());
        match (a.as_str(), value) {
            ("--captures", Some(v)) => captures = v as usize,
            ("--spans", Some(v)) => spans = v,
            _ => {
                eprintln!("error: expected --captures N and/or --spans N, got `{a}`");
                return ExitCode::from(2);
            }
        }
    }
    let config = match cabin_trace::Config::from_env(cabin_trace::CABIN_PREFIX, cabin_trace::FORMATS) {
        Ok(Some(c)) => c,
        Ok(None) => {
            eprintln!("error: set CABIN_TRACE_DIR=<dir>: this example only makes sense with capture on");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let barrier = Arc::new(Barrier::new(captures));
    let threads: Vec<_> = (0..captures as u64)
        .map(|capture| {
            let config = config.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let c = cabin_trace::Capture::from_config(Some(config));
                let (ok, report) = c
                    .run_with_report("concurrent", || {
                        barrier.wait(); // every capture is live before any records
                        for i in 0..spans {
                            let _s = tracing::info_span!("labelled", capture, i).entered();
                        }
                        true
                    })
                    .expect("the directory was usable a moment ago");
                let report = report.expect("capture is on");
                (capture, ok && report.is_complete(), report.stem)
            })
        })
        .collect();
    let mut all_ok = true;
    let mut stdout = std::io::stdout().lock();
    for t in threads {
        match t.join() {
            Ok((capture, ok, stem)) => {
                all_ok &= ok;
                let state = if ok { "complete" } else { "INCOMPLETE" };
                // A closed stdout is the reader's business, not a failure of the captures.
                let _ = writeln!(stdout, "{capture} {stem} {state}");
            }
            Err(_) => {
                eprintln!("error: a capture thread panicked");
                all_ok = false;
            }
        }
    }
    if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
