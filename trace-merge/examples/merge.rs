//! Merges the captures in directories or files into one trace per family.
//!
//! ```text
//! cargo run -p trace-merge --example merge -- [--out DIR] DIR|FILE...
//! ```
//!
//! Writes `family-<trace id>.pftrace`, `.trace.json` and `.family.json` into
//! `--out` (default: the first input directory, or the first file's).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};

fn main() -> Result<()> {
    let mut out = None;
    let mut inputs = Vec::new();
    let mut args = std::env::args_os().skip(1);
    while let Some(a) = args.next() {
        if a == "--out" {
            out = Some(PathBuf::from(args.next().context("--out needs a directory")?));
        } else {
            inputs.push(PathBuf::from(a));
        }
    }
    let Some(first) = inputs.first() else {
        bail!("usage: merge [--out DIR] DIR|FILE...");
    };
    let out = out.unwrap_or_else(|| {
        if first.is_dir() {
            first.clone()
        } else {
            first.parent().map(PathBuf::from).unwrap_or_default()
        }
    });
    let scan = trace_merge::scan(&inputs)?;
    for note in &scan.incomplete {
        eprintln!("warning: {note}");
    }
    let merged = trace_merge::merge(&scan, &out)?;
    if merged.is_empty() {
        bail!("no complete capture found in the inputs");
    }
    for m in merged {
        println!("{}: {} processes, {} flows", m.trace_id, m.processes, m.flows);
        println!("  {}\n  {}\n  {}", m.pftrace.display(), m.chrome.display(), m.summary.display());
    }
    Ok(())
}
