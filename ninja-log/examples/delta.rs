//! Prints what one Ninja run added to its log, as JSON.
//!
//! ```text
//! cp build/.ninja_log before.log 2>/dev/null || rm -f before.log
//! ninja -C build
//! cargo run -p ninja-log --example delta -- before.log build/.ninja_log
//! ```
//!
//! BEFORE is a copy of the log taken before the run; a path that does not
//! exist means there was no log. AFTER is the log after the run (it too may be
//! missing). Prints `{"status": "available", "actions": [...], "notes": [...]}`
//! or `{"status": "unavailable", "reason": "..."}` and exits 0 either way; exits
//! 2 on bad usage or a file that exists but cannot be read.

use std::process::ExitCode;

use ninja_log::{Delta, Snapshot};
use serde_json::json;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [before, after] = args.as_slice() else {
        eprintln!("usage: delta BEFORE AFTER");
        eprintln!("  BEFORE  a copy of .ninja_log from before the run (a missing file: no log)");
        eprintln!("  AFTER   .ninja_log after the run");
        return ExitCode::from(2);
    };
    let snapshot = match Snapshot::take(before) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("delta: cannot read BEFORE: {e}");
            return ExitCode::from(2);
        }
    };
    // The delta itself reports an unreadable log as unavailable; this front
    // treats it as a usage problem instead, so check first.
    if let Err(e) = std::fs::read(after) {
        if e.kind() != std::io::ErrorKind::NotFound {
            eprintln!("delta: cannot read AFTER: {after}: {e}");
            return ExitCode::from(2);
        }
    }
    let value = match snapshot.delta(after) {
        Delta::Available { actions, notes, .. } => json!({
            "status": "available",
            "actions": actions
                .iter()
                .map(|a| json!({
                    "start_ms": a.start_ms,
                    "end_ms": a.end_ms,
                    "outputs": a.outputs,
                    "hash": a.hash,
                    "epoch": a.epoch,
                }))
                .collect::<Vec<_>>(),
            "notes": notes,
        }),
        Delta::Unavailable { reason, .. } => json!({
            "status": "unavailable",
            "reason": reason,
        }),
    };
    match serde_json::to_string_pretty(&value) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("delta: cannot write JSON: {e}");
            ExitCode::FAILURE
        }
    }
}
