//! `cabin-trace`: the command-line tool of the cabin-trace workspace.
//!
//! - `bench` runs labelled commands in randomized blocks, keeps every run's
//!   trace directory and writes `samples.json`, then compares;
//! - `compare` compares two sides (a `samples.json`, `timings.json` files, a
//!   hyperfine export) metric by metric;
//! - `summarize` prints the top phases of `timings.json` files;
//! - `report` writes one self-contained HTML page of a capture, a family, a
//!   `bench` session or a comparison (see the `report` module for why its
//!   charts are SVG written as text);
//! - `open` serves one trace on 127.0.0.1:9001 for the Perfetto UI and opens
//!   the UI on it;
//! - `merge` writes one trace per family of captures (a tool and the tools
//!   it ran; the `trace-merge` crate);
//! - `export` sends OTLP files to a collector over OTLP/HTTP, or (`export
//!   metrics`) turns summaries into an OTLP metrics file (the
//!   `trace-export-otlp` crate).
//!
//! Each subcommand is a module with its own `Args` and `run`; adding one is a
//! module and a variant of [`Command`]. Exit status: 0, 1 when
//! `--fail-on-regression` finds a regression (or an invalid measurement), 2 on
//! bad input.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod compare;
mod export;
mod merge;
mod open;
mod report;
mod summarize;

/// Did a change make a command faster or slower: measure it (`bench`), decide
/// it with sound statistics (`compare`), look at a run or a comparison
/// (`report`, `open`), and read one run's summary (`summarize`).
#[derive(Parser)]
#[command(name = "cabin-trace", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Bench(bench::Args),
    Compare(compare::Args),
    Summarize(summarize::Args),
    Report(report::Args),
    Open(open::Args),
    /// Merge the captures of a tool and the tools it ran into one trace.
    Merge(merge::Args),
    /// Send OTLP files (and summaries as metrics) to an OpenTelemetry
    /// collector, or write summaries as OTLP metrics (`export metrics`).
    Export(export::Args),
}

/// Exit status for bad input (files, options, commands that cannot run).
const BAD_INPUT: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(a) => bench::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Summarize(a) => summarize::run(a),
        Command::Report(a) => report::run(a),
        Command::Open(a) => open::run(a),
        Command::Merge(a) => merge::run(a),
        Command::Export(a) => return export::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(BAD_INPUT)
        }
    }
}
