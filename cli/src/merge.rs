//! `cabin-trace merge`: one trace per family (a tool and the tools it ran)
//! from the captures in directories or files (the `trace-merge` crate).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};

/// Merge the captures of each family (every capture with one trace id) into
/// `family-<trace id>.pftrace`, `.trace.json` and `.family.json`.
#[derive(clap::Args)]
pub struct Args {
    /// Directories of captures, or capture files (`*.timings.json` and their
    /// trace files beside them).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Where to write the merged files (default: the first input directory,
    /// or the first file's).
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let first = &args.inputs[0];
    let out = args.out.clone().unwrap_or_else(|| {
        if first.is_dir() {
            first.clone()
        } else {
            first.parent().map(PathBuf::from).unwrap_or_default()
        }
    });
    let scan = trace_merge::scan(&args.inputs)?;
    for note in &scan.incomplete {
        eprintln!("warning: {note}");
    }
    let merged = trace_merge::merge(&scan, &out)?;
    if merged.is_empty() {
        bail!(
            "no complete capture found in {}",
            args.inputs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        );
    }
    for m in merged {
        println!("{}: {} processes, {} flows", m.trace_id, m.processes, m.flows);
        println!("  {}\n  {}\n  {}", m.pftrace.display(), m.chrome.display(), m.summary.display());
    }
    Ok(ExitCode::SUCCESS)
}
