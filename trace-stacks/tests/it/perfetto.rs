//! The samples as Perfetto packets, imported by Perfetto's own trace
//! processor (v58.2, the engine of the Perfetto UI). The binary is found
//! through `TRACE_PROCESSOR_SHELL`, else at
//! `.tools/perfetto/trace_processor_shell` in the workspace, which
//! `scripts/install-test-tools.sh` installs.

use std::path::{Path, PathBuf};
use std::process::Command;

use trace_stacks::{perfetto_clock_snapshot, perfetto_packets, Sampler};

use crate::sampling::{caller_of_the_burn, clock_ns, run_sampled, BURN_CPU_NS, INTERVAL};

fn shell() -> PathBuf {
    let path = match std::env::var_os("TRACE_PROCESSOR_SHELL") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tools/perfetto/trace_processor_shell"),
    };
    assert!(
        path.exists(),
        "Perfetto's trace processor is missing at {}: run scripts/install-test-tools.sh, or set \
         TRACE_PROCESSOR_SHELL to a trace_processor_shell v58.2",
        path.display()
    );
    path
}

/// The rows of `sql` on `trace`, each a line of comma-separated values,
/// without the header.
fn query(trace: &Path, sql: &str) -> Vec<String> {
    let file = trace.with_extension("sql");
    std::fs::write(&file, sql).unwrap();
    let output = Command::new(shell()).arg("-q").arg(&file).arg(trace).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{sql}: {}\n{stdout}", String::from_utf8_lossy(&output.stderr));
    stdout.lines().skip(1).map(|l| l.replace('"', "")).collect()
}

#[test]
fn the_trace_processor_imports_every_sample_with_its_leaf_function_named_and_no_error() {
    let sampler = Sampler::start(INTERVAL).unwrap();
    let burner = run_sampled(&sampler, || {
        caller_of_the_burn(BURN_CPU_NS / 2);
    });
    let stacks = sampler.finish();
    let mine = stacks.samples.iter().filter(|s| s.tid == burner.tid).count();
    assert!(mine >= 40, "{mine} samples of 50 ms of CPU");

    let dir = std::env::temp_dir().join(format!("trace-stacks-perfetto-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("stacks.pftrace");
    let mut bytes = perfetto_clock_snapshot(clock_ns(libc::CLOCK_BOOTTIME), clock_ns(libc::CLOCK_MONOTONIC));
    bytes.extend(perfetto_packets(&stacks, std::process::id(), 7));
    std::fs::write(&trace, &bytes).unwrap();

    let problems = query(
        &trace,
        "select name, idx, value from stats where value > 0 and severity in ('error', 'data_loss');",
    );
    assert!(problems.is_empty(), "import problems: {problems:?}");
    let imported = query(&trace, "select count(*) from perf_sample;");
    assert_eq!(imported, [stacks.samples.len().to_string()]);
    let leaves = query(
        &trace,
        &format!(
            "select count(*) from perf_sample s join thread t using (utid) \
             join stack_profile_callsite c on s.callsite_id = c.id \
             join stack_profile_frame f on c.frame_id = f.id \
             where t.tid = {} and f.name like '%::burn_in_this_function';",
            burner.tid
        ),
    );
    let leaves: usize = leaves[0].parse().unwrap();
    assert!(leaves * 100 >= mine * 80, "{leaves} of {mine} samples have the burn on top");
    // The samples keep their times: the trace's clock is the samples' own
    // shifted by the snapshot, so their span is the thread's at most.
    let span = query(&trace, "select max(ts) - min(ts) from perf_sample;");
    let span: u64 = span[0].parse().unwrap();
    assert!(span <= burner.to_ns - burner.from_ns, "{span} ns of samples");
    std::fs::remove_dir_all(&dir).ok();
}
