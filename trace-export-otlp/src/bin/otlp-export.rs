//! `otlp-export`: the `cabin-trace export` command on its own, for testing
//! the export end to end before the `cabin-trace` command wires it in.
//!
//! ```text
//! otlp-export metrics [--revision R] [--machine M] [--scenario S] [-o FILE] FILES...
//! otlp-export [--endpoint URL] [--json] [--timeout SECS] [--retries N] [--header K=V]... FILES...
//! ```
//!
//! Exit status: 0 when everything was written or sent, 1 when the export
//! failed (the error names the file or URL), 2 for a usage error.

use std::process::ExitCode;

use clap::Parser;
use trace_export_otlp::{ErrorKind, ExportArgs};

/// Export cabin-trace captures and summaries as OpenTelemetry (OTLP).
#[derive(Parser)]
#[command(name = "otlp-export", version)]
struct Cli {
    #[command(flatten)]
    export: ExportArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match trace_export_otlp::run(&cli.export) {
        Ok(outcome) => {
            eprintln!("{outcome}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            if e.kind() == ErrorKind::Usage {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
