//! `cabin-trace compare`: two sides, every metric both have, a verdict each.

pub(crate) mod render;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use trace_compare::input::{self, hyperfine, timings, Input};
use trace_compare::{compare::check_options, Options, Policy, Report, Side};

pub use render::Format;

/// Compare a baseline and a head, metric by metric: wall, CPU, peak RSS, each
/// phase's inclusive time, each work counter and Ninja's action count.
///
/// Each side is a `samples.json` from `bench`, a `timings.json` or a
/// directory of them (searched recursively), or a hyperfine JSON export. Two
/// labels of one `samples.json` are compared with the paired rule (randomized
/// blocks); anything else with the unpaired rule.
///
/// Examples: `cabin-trace compare samples.json --base base --head head`;
/// `cabin-trace compare base-runs/ head-runs/`;
/// `cabin-trace compare before.json after.json` (hyperfine exports).
#[derive(clap::Args)]
#[command(after_help = "Exit status: 0; 1 with --fail-on-regression when a primary metric (--gate, \
default wall) is Regressed or a regression of it is detected, or a scenario is an INVALID MEASUREMENT; \
2 on bad input.")]
pub struct Args {
    /// The baseline: a samples.json, a hyperfine export, a timings.json or a
    /// directory of them.
    #[arg(value_name = "BASE")]
    base_path: PathBuf,
    /// The head, in any of the same forms. Leave it out to compare two labels
    /// of one samples.json (or two commands of one hyperfine export).
    #[arg(value_name = "HEAD")]
    head_path: Option<PathBuf>,
    /// The baseline's label in a samples.json, or its command (or 0-based
    /// index) in a hyperfine export. Default: the first.
    #[arg(long, value_name = "LABEL")]
    base: Option<String>,
    /// The head's label or command. Default: the second of a single file,
    /// else the first of HEAD.
    #[arg(long, value_name = "LABEL")]
    head: Option<String>,
    /// Compare two labels of one samples.json with the unpaired rule only.
    #[arg(long)]
    unpaired: bool,
    #[command(flatten)]
    pub rules: RuleArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The rules' settings, shared with `bench`.
#[derive(clap::Args, Clone, Debug)]
pub struct RuleArgs {
    /// Level of the unpaired rule's two-sided Mann-Whitney U test.
    #[arg(long, default_value_t = 0.01, value_name = "P")]
    alpha: f64,
    /// Family-wise level of the paired rule's simultaneous intervals.
    #[arg(long, default_value_t = 0.05, value_name = "P")]
    paired_alpha: f64,
    /// The number of paired comparisons in the family (Bonferroni: each
    /// interval at --paired-alpha / M). Default: the timed comparisons the
    /// report makes (time, memory and instruction rows of valid groups),
    /// counted before any value is read.
    #[arg(long, value_name = "M")]
    family_size: Option<u32>,
    /// Policy: the smallest change that counts, in percent of the baseline.
    #[arg(long, default_value_t = 5.0, value_name = "PCT")]
    min_effect: f64,
    /// Policy: the smallest change of a time that counts, in ms.
    #[arg(long, default_value_t = 2.0, value_name = "MS")]
    floor_time_ms: f64,
    /// Policy: the smallest change of peak RSS that counts, in MiB.
    #[arg(long, default_value_t = 1.0, value_name = "MIB")]
    floor_rss_mib: f64,
    /// Policy: the smallest change of an instruction count that counts.
    #[arg(long, default_value_t = 1e6, value_name = "N")]
    floor_instructions: f64,
    /// Seed of the sign-flip Monte Carlo (used past 20 blocks).
    #[arg(long = "mc-seed", default_value_t = 0, value_name = "N")]
    mc_seed: u64,
}

impl RuleArgs {
    /// The library's options, checked.
    pub fn options(&self) -> anyhow::Result<Options> {
        let opts = Options {
            alpha_unpaired: self.alpha,
            alpha_paired: self.paired_alpha,
            family_size: self.family_size,
            policy: Policy {
                min_effect_pct: self.min_effect,
                floor_time_ms: self.floor_time_ms,
                floor_memory_kib: self.floor_rss_mib * 1024.0,
                floor_instructions: self.floor_instructions,
            },
            seed: self.mc_seed,
        };
        check_options(&opts)?;
        Ok(opts)
    }
}

/// How the comparison is shown and what it exits with; shared with `bench`.
#[derive(clap::Args, Clone, Debug)]
pub struct OutputArgs {
    /// `table` (for a terminal), `markdown` (a PR comment: one table, verdicts
    /// first, the details folded) or `json` (versioned).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Exit 1 when a primary metric (--gate) is Regressed or a regression of
    /// it is detected, or a scenario is an INVALID MEASUREMENT. Other rows
    /// say where a change went; they do not decide.
    #[arg(long)]
    pub fail_on_regression: bool,
    /// The primary metrics --fail-on-regression decides on, e.g. `--gate
    /// wall,cpu_user` (or --gate repeated); a metric the report does not
    /// compare is refused.
    #[arg(long, value_delimiter = ',', default_value = "wall", value_name = "METRIC,...")]
    pub gate: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let opts = args.rules.options()?;
    let (base, head) = sides(&args)?;
    let report = trace_compare::compare(&base, &head, &opts)?;
    show(&report, &args.output)
}

/// Prints `report` and says what to exit with: with --fail-on-regression,
/// 1 when the gate on the primary metrics fails (the reasons on stderr).
/// A gate on a metric the report does not compare is bad input.
pub fn show(report: &Report, out: &OutputArgs) -> anyhow::Result<ExitCode> {
    if out.fail_on_regression {
        let missing = report.missing_metrics(&out.gate);
        if !missing.is_empty() {
            bail!(
                "--gate {}: not compared by this report; expected metrics it has, e.g. wall, cpu_user, \
                 phase:<span>",
                missing.join(" ")
            );
        }
    }
    print!("{}", render::render(report, out.format));
    if !out.fail_on_regression {
        return Ok(ExitCode::SUCCESS);
    }
    let failures = report.gate_failures(&out.gate);
    for f in &failures {
        eprintln!("gate: {f}");
    }
    Ok(if failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn source(p: &Path) -> String {
    p.display().to_string()
}

fn sides(args: &Args) -> anyhow::Result<(Side, Side)> {
    let base_in = input::open(&args.base_path)?;
    let Some(head_path) = &args.head_path else {
        // One file, two labels or commands in it.
        let src = source(&args.base_path);
        return match base_in {
            Input::Samples(s) => {
                let b = args.base.clone().or_else(|| s.labels.first().cloned());
                let h = args.head.clone().or_else(|| s.labels.get(1).cloned());
                let (Some(b), Some(h)) = (b, h) else {
                    bail!(
                        "{src}: holds {} label(s); compare needs two (--base, --head), or a HEAD file",
                        s.labels.len()
                    )
                };
                let (mut bs, mut hs) = (s.side(&b, &src)?, s.side(&h, &src)?);
                if args.unpaired {
                    bs.session = None;
                    hs.session = None;
                }
                Ok((bs, hs))
            }
            Input::Hyperfine(doc) => {
                let all = hyperfine::read("", &src, &doc)?;
                let pick = |want: Option<&str>, default: usize, what: &str| {
                    pick_command(&all, want, default).with_context(|| format!("{src}: {what}"))
                };
                Ok((pick(args.base.as_deref(), 0, "--base")?, pick(args.head.as_deref(), 1, "--head")?))
            }
            Input::Timings(_) => {
                bail!("{src}: a set of timings.json files is one side; give the other side as HEAD")
            }
        };
    };
    let head_in = input::open(head_path)?;
    // Two files are never paired: blocks pair only within one session's file.
    let b = side_of(base_in, &args.base_path, args.base.as_deref())?;
    let h = side_of(head_in, head_path, args.head.as_deref())?;
    Ok((b, h))
}

/// The side a path holds; `label` picks a samples.json's label or a
/// hyperfine command.
fn side_of(input: Input, path: &Path, label: Option<&str>) -> anyhow::Result<Side> {
    let src = source(path);
    Ok(match input {
        Input::Samples(s) => {
            let l = match label {
                Some(l) => l.to_string(),
                None => s.labels.first().cloned().with_context(|| format!("{src}: has no labels"))?,
            };
            let mut side = s.side(&l, &src)?;
            side.session = None;
            side
        }
        Input::Hyperfine(doc) => {
            let all = hyperfine::read(&src, &src, &doc)?;
            match label {
                Some(l) => pick_command(&all, Some(l), 0).with_context(|| src.clone())?,
                None => all,
            }
        }
        Input::Timings(files) => timings::read(&src, &src, &files)?,
    })
}

/// One command of a hyperfine side, by command string or 0-based index.
fn pick_command(all: &Side, want: Option<&str>, default: usize) -> anyhow::Result<Side> {
    let index = match want {
        None => default,
        Some(w) => match all.groups.iter().position(|g| g.name == w) {
            Some(i) => i,
            None => w.parse::<usize>().map_err(|_| {
                anyhow::anyhow!(
                    "no command `{w}`; expected one of: {}, or a 0-based index",
                    all.groups.iter().map(|g| format!("`{}`", g.name)).collect::<Vec<_>>().join(", ")
                )
            })?,
        },
    };
    let group = all.groups.get(index).cloned().ok_or_else(|| {
        anyhow::anyhow!(
            "command index {index} is out of range; the export holds {} command(s)",
            all.groups.len()
        )
    })?;
    Ok(Side { label: group.name.clone(), source: all.source.clone(), session: None, groups: vec![group] })
}
