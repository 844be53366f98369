//! `cabin-trace bench`: run labelled commands in randomized blocks, keep
//! every run, write `samples.json`, then compare.

mod check;
mod machine;
mod plan;
mod run;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use trace_compare::samples::{Sample, Samples, Scenario};
use trace_compare::stats::SplitMix64;

use crate::compare::{OutputArgs, RuleArgs};
use plan::{Flags, Plan};

/// Measure two or more labelled commands in randomized balanced blocks.
///
/// Each block runs every label once, in an order drawn from the seed (with two
/// labels: AB and BA equally often); warm-ups come first and are not kept.
/// Every run gets its own `<PREFIX>_TRACE_DIR`, so the tool's `timings.json`
/// (phases, work counters, Ninja actions) is kept beside the wall time, the
/// CPU times and the peak RSS from `wait4`. Writes `samples.json` in the
/// output directory and `report.html` beside it (the comparison with every
/// sample plotted), then prints the comparison of the first label (or
/// `--base`) against each other label.
///
/// Example: `cabin-trace bench --cmd base='target-a/release/tool build' --cmd
/// head='target-b/release/tool build' --runs 12`.
#[derive(clap::Args)]
#[command(
    after_help = "A scenario file (--scenarios) lists [[scenario]] tables: name, command (with {tool} \
where each --tool LABEL=PATH goes), workdir, prepare, runs, warmups, checks. A run that fails a check \
(exit_status == 0 by default; counters such as ninja_actions == 0) makes its scenario an INVALID \
MEASUREMENT. Exit status: 0; 1 with --fail-on-regression; 2 on bad input."
)]
pub struct Args {
    /// A labelled command, `LABEL=COMMAND`; two or more. The command is split
    /// into words as a POSIX shell would (leading NAME=value words set the
    /// environment) and run without a shell.
    #[arg(long = "cmd", value_name = "LABEL=COMMAND", required_unless_present = "scenarios")]
    cmds: Vec<String>,
    /// A TOML file of scenarios, run with each --tool.
    #[arg(long, value_name = "FILE", conflicts_with = "cmds", requires = "tools")]
    scenarios: Option<PathBuf>,
    /// With --scenarios: a labelled program, `LABEL=PATH`; two or more.
    #[arg(long = "tool", value_name = "LABEL=PATH")]
    tools: Vec<String>,
    /// Measured runs per label (= blocks), unless a scenario says otherwise.
    #[arg(long, default_value_t = 10, value_name = "N")]
    runs: u32,
    /// Warm-up runs per label before the first block, not kept.
    #[arg(long, default_value_t = 1, value_name = "N")]
    warmup: u32,
    /// A shell command run before every run (warm-ups too), untimed.
    #[arg(long, value_name = "CMD")]
    prepare: Option<String>,
    /// The working directory of the runs.
    #[arg(long, value_name = "DIR")]
    workdir: Option<PathBuf>,
    /// A check every run must pass, `<metric> <op> <number>` (e.g.
    /// `ninja_actions == 0`, `count:resolve == 1`); repeatable.
    #[arg(long = "check", value_name = "EXPR")]
    checks: Vec<String>,
    /// The seed of the run order. Default: drawn from the clock; recorded.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// The tool's prefix: each run gets its own `<PREFIX>_TRACE_DIR`.
    #[arg(long, default_value = "CABIN", value_name = "PREFIX")]
    prefix: String,
    /// Where samples.json and every run's directory go; must not hold a
    /// samples.json. Default: target/cabin-trace-bench/UNIX_MS.
    #[arg(long, short, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Run each command through `sh -c` rather than split into words.
    #[arg(long)]
    shell: bool,
    /// Run every run of one label before the next (for calibration: this is
    /// how load that drifts between the two blocks fakes a difference).
    #[arg(long)]
    no_interleave: bool,
    /// No progress bar on stderr.
    #[arg(long)]
    no_progress: bool,
    /// The baseline label of the printed comparison. Default: the first.
    #[arg(long, value_name = "LABEL")]
    base: Option<String>,
    #[command(flatten)]
    rules: RuleArgs,
    #[command(flatten)]
    out: OutputArgs,
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let opts = args.rules.options()?;
    if args.prefix.is_empty()
        || !args.prefix.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    {
        bail!("--prefix `{}`: expected upper-case letters, digits and `_`, e.g. CABIN", args.prefix);
    }
    let flags = Flags {
        runs: args.runs,
        warmups: args.warmup,
        prepare: args.prepare.as_deref(),
        workdir: args.workdir.as_deref(),
        checks: &args.checks,
        shell: args.shell,
    };
    let plans = match &args.scenarios {
        Some(file) => plan::from_file(file, &args.tools, &flags)?,
        None => plan::from_cmds(&args.cmds, &flags)?,
    };
    if let Some(p) = plans.iter().find(|p| p.runs == 0) {
        bail!("scenario `{}`: runs = 0; expected at least 1 (3 or more for a verdict)", p.name);
    }
    let labels: Vec<String> = plans[0].commands.iter().map(|c| c.info.label.clone()).collect();
    let base = args.base.clone().unwrap_or_else(|| labels[0].clone());
    if !labels.contains(&base) {
        bail!("--base `{base}`: expected one of the labels: {}", labels.join(", "));
    }
    let created = unix_ms();
    let out_dir =
        args.output.clone().unwrap_or_else(|| PathBuf::from(format!("target/cabin-trace-bench/{created}")));
    let samples_path = out_dir.join("samples.json");
    if samples_path.exists() {
        bail!(
            "{}: exists; expected an output directory without a samples.json (--output)",
            samples_path.display()
        );
    }
    std::fs::create_dir_all(&out_dir).with_context(|| format!("{}: cannot be created", out_dir.display()))?;
    let out_dir = out_dir.canonicalize().unwrap_or(out_dir);
    let seed = args.seed.unwrap_or_else(|| u64::from(std::process::id()).rotate_left(32) ^ created);
    let mut rng = SplitMix64::new(seed);
    let trace_var = format!("{}_TRACE_DIR", args.prefix);
    let mut machine = machine::describe();

    let total: u64 = plans.iter().map(|p| u64::from(p.runs + p.warmups) * p.commands.len() as u64).sum();
    let bar = ProgressBar::with_draw_target(
        Some(total),
        if args.no_progress { ProgressDrawTarget::hidden() } else { ProgressDrawTarget::stderr() },
    );
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} runs, {eta} left")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut scenarios = Vec::new();
    for p in &plans {
        bar.set_prefix(p.name.clone());
        scenarios.push(run_scenario(p, !args.no_interleave, &trace_var, &out_dir, &mut rng, &bar)?);
    }
    bar.finish_and_clear();
    machine.load_average_end = machine::load_average();

    let mut samples = Samples::default();
    samples.tool.name = "cabin-trace".into();
    samples.tool.version = env!("CARGO_PKG_VERSION").into();
    samples.created_unix_ms = created;
    samples.seed = seed;
    samples.trace_dir_variable = trace_var;
    samples.machine = machine;
    samples.labels = labels.clone();
    samples.scenarios = scenarios;
    write_json(&samples_path, &samples)?;
    eprintln!("bench: wrote {} (seed {seed})", samples_path.display());

    let src = samples_path.display().to_string();
    let all = crate::report::compare_session(&samples, &src, Some(&base), &opts)?;
    let page = crate::report::write_session(&samples_path, &all)?;
    eprintln!("bench: wrote {}", page.display());
    let mut code = ExitCode::SUCCESS;
    for c in &all {
        if crate::compare::show(&c.report, &args.out)? != ExitCode::SUCCESS {
            code = ExitCode::FAILURE;
        }
    }
    Ok(code)
}

fn run_scenario(
    p: &Plan,
    interleaved: bool,
    trace_var: &str,
    out_dir: &Path,
    rng: &mut SplitMix64,
    bar: &ProgressBar,
) -> anyhow::Result<Scenario> {
    let dir = out_dir.join("runs").join(sanitize(&p.name));
    let workdir = p.workdir.as_deref();
    let (exec, order) = plan::schedule(p.commands.len(), p.runs, interleaved, rng);
    for w in 0..p.warmups {
        for (i, c) in p.commands.iter().enumerate() {
            // Warm-ups alternate which label goes first.
            let c = if w % 2 == 0 { c } else { &p.commands[p.commands.len() - 1 - i] };
            if let Some(prep) = &p.prepare {
                run::prepare_step(prep, workdir)?;
            }
            run::run(c, workdir, trace_var, &dir.join(format!("warmup-{}-{w}", c.info.label)))?;
            bar.inc(1);
        }
    }
    let mut samples = Vec::new();
    let mut position = vec![0u32; p.runs as usize];
    for (block, l) in exec {
        let c = &p.commands[l];
        if let Some(prep) = &p.prepare {
            run::prepare_step(prep, workdir)?;
        }
        let run_dir = dir.join(format!("{}-{block}", c.info.label));
        let o = run::run(c, workdir, trace_var, &run_dir)?;
        let (timings_file, timings, timings_note) = run::timings(&run_dir, out_dir);
        let mut sample = Sample::default();
        sample.label = c.info.label.clone();
        sample.block = block;
        sample.position = position[block as usize];
        sample.process = o;
        sample.trace_dir =
            run_dir.join("trace").strip_prefix(out_dir).unwrap_or(&run_dir).display().to_string();
        sample.timings_file = timings_file;
        sample.timings = timings;
        sample.timings_note = timings_note;
        let metrics = sample.metrics();
        sample.checks = p.checks.iter().map(|ch| ch.eval(o.exit_code, &metrics)).collect();
        if let Some(failed) = sample.checks.iter().find(|c| !c.passed) {
            bar.suspend(|| {
                eprintln!(
                    "bench: {}: {} run of block {block}: `{}` failed (found {}); see {}",
                    p.name,
                    c.info.label,
                    failed.check,
                    failed.found.map_or("nothing".into(), |f| f.to_string()),
                    run_dir.display()
                )
            });
        }
        position[block as usize] += 1;
        samples.push(sample);
        bar.inc(1);
    }
    let labels: Vec<&str> = p.commands.iter().map(|c| c.info.label.as_str()).collect();
    let mut scenario = Scenario::default();
    scenario.name = p.name.clone();
    scenario.workdir = p.workdir.as_ref().map(|w| w.display().to_string());
    scenario.prepare = p.prepare.clone();
    scenario.runs = p.runs;
    scenario.warmups = p.warmups;
    scenario.schedule = if interleaved { "interleaved" } else { "sequential" }.into();
    scenario.checks = p.checks.iter().map(|c| c.text().to_string()).collect();
    scenario.commands = p.commands.iter().map(|c| c.info.clone()).collect();
    scenario.order = order.iter().map(|o| o.iter().map(|&l| labels[l].to_string()).collect()).collect();
    scenario.samples = samples;
    Ok(scenario)
}

/// A scenario name as a directory name.
fn sanitize(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect()
}

/// Writes `value` as pretty JSON, atomically (a `.partial` renamed).
fn write_json(path: &Path, value: &impl serde::Serialize) -> anyhow::Result<()> {
    let partial = path.with_extension("json.partial");
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(&partial, text + "\n")
        .with_context(|| format!("{}: cannot be written", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("{}: cannot be renamed", partial.display()))?;
    Ok(())
}
