//! `cabin-trace export`: the `trace-export-otlp` crate's command, with its exit
//! status (2 for bad input, 1 when sending failed).

use std::process::ExitCode;

use trace_export_otlp::{ErrorKind, ExportArgs};

pub fn run(args: &ExportArgs) -> ExitCode {
    match trace_export_otlp::run(args) {
        Ok(outcome) => {
            eprintln!("{outcome}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(if e.kind() == ErrorKind::Usage { super::BAD_INPUT } else { 1 })
        }
    }
}
