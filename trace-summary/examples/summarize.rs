//! Prints the top span names of each `timings.json` given on the command line.
//!
//! `cargo run -p trace-summary --example summarize -- FILE... [--top N]`

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut top = 15;
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--top" {
            match args.next().and_then(|n| n.parse().ok()) {
                Some(n) => top = n,
                None => {
                    eprintln!("error: --top takes a whole number");
                    return ExitCode::from(2);
                }
            }
        } else {
            files.push(a);
        }
    }
    if files.is_empty() {
        eprintln!("usage: summarize FILE.timings.json... [--top N]");
        return ExitCode::from(2);
    }
    let mut status = ExitCode::SUCCESS;
    for f in files {
        match trace_summary::Timings::from_path(&f) {
            Ok(t) => print!("{}", t.table(top)),
            Err(e) => {
                eprintln!("error: {e}");
                status = ExitCode::FAILURE;
            }
        }
    }
    status
}
