//! The smallest tool that links cabin-trace: one command with one phase,
//! wrapped in `cabin_trace::run`. `scripts/measure-minimal-tool.sh` counts the
//! crates it compiles with the façade's default features and times its clean
//! release build (docs/performance.md); its tests check, on a build with the
//! default features, that a format left out is refused.

use std::process::ExitCode;

fn sum() -> u64 {
    let _phase = tracing::info_span!("sum").entered();
    (1..=1000).sum()
}

fn main() -> ExitCode {
    match cabin_trace::run("sum", sum) {
        Err(config_error) => {
            eprintln!("error: {config_error}");
            ExitCode::from(2)
        }
        Ok(total) => {
            println!("{total}");
            ExitCode::SUCCESS
        }
    }
}
