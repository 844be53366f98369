//! `cabin-trace summarize`: the top span names of each `timings.json`.

use std::path::PathBuf;
use std::process::ExitCode;

/// Print the top span names of each timings summary, by total inclusive time
/// (summed over threads and nesting), with their counts and field sums.
#[derive(clap::Args)]
pub struct Args {
    /// `*.timings.json` files.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// How many span names to show per file.
    #[arg(long, default_value_t = 15, value_name = "N")]
    top: usize,
}

/// Prints each file's table; a file that cannot be read is reported and the
/// others are still printed (exit 2 then).
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut status = ExitCode::SUCCESS;
    for f in &args.files {
        match trace_summary::Timings::from_path(f) {
            Ok(t) => print!("{}", t.table(args.top)),
            Err(e) => {
                eprintln!("error: {e}");
                status = ExitCode::from(crate::BAD_INPUT);
            }
        }
    }
    Ok(status)
}
