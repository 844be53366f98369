//! What a session runs: scenarios (from `--cmd` or a TOML file) and the order
//! of their runs.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Deserialize;
use trace_compare::stats::SplitMix64;

use super::check::{self, Check};
use super::run::{self, Prepared};

/// One scenario, ready to run.
pub struct Plan {
    pub name: String,
    pub workdir: Option<PathBuf>,
    pub prepare: Option<String>,
    pub runs: u32,
    pub warmups: u32,
    pub checks: Vec<Check>,
    pub commands: Vec<Prepared>,
}

/// A scenario file:
///
/// ```toml
/// [defaults]            # optional; each key can also be set per scenario
/// runs = 10
/// warmups = 1
///
/// [[scenario]]
/// name = "noop-build"
/// command = "{tool} build"      # {tool}: each --tool LABEL=PATH's path
/// workdir = "project"           # relative to this file; default: the current directory
/// prepare = "touch src/main.c"  # sh -c, before every run, untimed
/// checks = ["exit_status == 0", "ninja_actions == 0"]
/// ```
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    #[serde(default)]
    defaults: Settings,
    #[serde(rename = "scenario", default)]
    scenarios: Vec<ScenarioSpec>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
struct Settings {
    runs: Option<u32>,
    warmups: Option<u32>,
    prepare: Option<String>,
    workdir: Option<String>,
    checks: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioSpec {
    name: String,
    command: String,
    runs: Option<u32>,
    warmups: Option<u32>,
    prepare: Option<String>,
    workdir: Option<String>,
    checks: Option<Vec<String>>,
}

impl ScenarioSpec {
    fn settings(&self) -> Settings {
        Settings {
            runs: self.runs,
            warmups: self.warmups,
            prepare: self.prepare.clone(),
            workdir: self.workdir.clone(),
            checks: self.checks.clone(),
        }
    }
}

/// Settings given on the command line, the defaults of every scenario.
pub struct Flags<'a> {
    pub runs: u32,
    pub warmups: u32,
    pub prepare: Option<&'a str>,
    pub workdir: Option<&'a Path>,
    pub checks: &'a [String],
    pub shell: bool,
}

/// `LABEL=VALUE`, the label checked.
pub fn labelled(arg: &str, flag: &str) -> anyhow::Result<(String, String)> {
    let Some((label, value)) = arg.split_once('=') else {
        bail!("{flag} `{arg}`: expected LABEL=VALUE, e.g. {flag} base='target-a/tool build'")
    };
    if label.is_empty() || !label.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)) {
        bail!("{flag} `{arg}`: the label `{label}` must be letters, digits, `_`, `.` or `-`");
    }
    if value.trim().is_empty() {
        bail!("{flag} `{arg}`: nothing after `=`");
    }
    Ok((label.to_string(), value.to_string()))
}

fn unique_labels(pairs: &[(String, String)], flag: &str) -> anyhow::Result<()> {
    if pairs.len() < 2 {
        bail!("{flag}: found {} labelled value(s); expected two or more (e.g. base and head)", pairs.len());
    }
    for (i, (l, _)) in pairs.iter().enumerate() {
        if pairs[..i].iter().any(|(o, _)| o == l) {
            bail!("{flag}: the label `{l}` is given twice");
        }
    }
    Ok(())
}

/// The one scenario (`default`) of `--cmd LABEL=COMMAND` arguments.
pub fn from_cmds(cmds: &[String], flags: &Flags) -> anyhow::Result<Vec<Plan>> {
    let pairs: Vec<(String, String)> =
        cmds.iter().map(|c| labelled(c, "--cmd")).collect::<anyhow::Result<_>>()?;
    unique_labels(&pairs, "--cmd")?;
    let commands = pairs
        .iter()
        .map(|(l, c)| run::prepare(l, c, flags.shell, flags.workdir))
        .collect::<anyhow::Result<_>>()?;
    Ok(vec![Plan {
        name: "default".into(),
        workdir: flags.workdir.map(Path::to_path_buf),
        prepare: flags.prepare.map(str::to_string),
        runs: flags.runs,
        warmups: flags.warmups,
        checks: check::with_default(flags.checks)?,
        commands,
    }])
}

/// The scenarios of a TOML file, each run with every `--tool LABEL=PATH`.
pub fn from_file(path: &Path, tools: &[String], flags: &Flags) -> anyhow::Result<Vec<Plan>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("{}: cannot be read", path.display()))?;
    let file: ScenarioFile = toml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display().to_string().trim_end()))?;
    if file.scenarios.is_empty() {
        bail!("{}: no [[scenario]] table; expected at least one", path.display());
    }
    let tools: Vec<(String, String)> =
        tools.iter().map(|t| labelled(t, "--tool")).collect::<anyhow::Result<_>>()?;
    unique_labels(&tools, "--tool")?;
    let here = path.parent().unwrap_or(Path::new("."));
    let mut plans: Vec<Plan> = Vec::new();
    for (i, sc) in file.scenarios.iter().enumerate() {
        let at = format!("{}: scenario {} (`{}`)", path.display(), i + 1, sc.name);
        if plans.iter().any(|p| p.name == sc.name) {
            bail!("{at}: the name is used twice");
        }
        if !sc.command.contains("{tool}") {
            bail!("{at}: command `{}` has no `{{tool}}`; expected where each --tool's path goes", sc.command);
        }
        let s = &sc.settings();
        let d = &file.defaults;
        let workdir = s.workdir.as_ref().or(d.workdir.as_ref()).map(|w| here.join(w));
        let workdir = workdir.or_else(|| flags.workdir.map(Path::to_path_buf));
        let checks = s.checks.as_ref().or(d.checks.as_ref()).map_or(flags.checks, |c| c.as_slice());
        let commands = tools
            .iter()
            .map(|(label, tool)| {
                let quoted = shlex::try_quote(tool).map_err(|e| anyhow::anyhow!("--tool {label}: {e}"))?;
                run::prepare(label, &sc.command.replace("{tool}", &quoted), flags.shell, workdir.as_deref())
            })
            .collect::<anyhow::Result<_>>()
            .with_context(|| at.clone())?;
        plans.push(Plan {
            name: sc.name.clone(),
            prepare: s.prepare.clone().or(d.prepare.clone()).or(flags.prepare.map(str::to_string)),
            runs: s.runs.or(d.runs).unwrap_or(flags.runs),
            warmups: s.warmups.or(d.warmups).unwrap_or(flags.warmups),
            checks: check::with_default(checks).with_context(|| at.clone())?,
            workdir,
            commands,
        });
    }
    Ok(plans)
}

/// The order of a scenario's runs: `(block, label index)` in execution order,
/// and each block's order of labels.
///
/// Interleaved: each block runs every label once; the blocks' orders are the
/// rotations of one random permutation (so with two labels, AB and BA in
/// equal numbers when the blocks are even), shuffled. Sequential (for
/// calibration): every run of one label, then the next, in a random order of
/// labels; block `b` pairs each label's `b`-th run.
pub fn schedule(
    labels: usize,
    runs: u32,
    interleaved: bool,
    rng: &mut SplitMix64,
) -> (Vec<(u64, usize)>, Vec<Vec<usize>>) {
    let mut first: Vec<usize> = (0..labels).collect();
    rng.shuffle(&mut first);
    if !interleaved {
        let order = vec![first.clone(); runs as usize];
        let exec = first.iter().flat_map(|&l| (0..u64::from(runs)).map(move |b| (b, l))).collect();
        return (exec, order);
    }
    let mut order: Vec<Vec<usize>> = (0..runs as usize)
        .map(|b| {
            let mut o = first.clone();
            o.rotate_left(b % labels);
            o
        })
        .collect();
    rng.shuffle(&mut order);
    let exec = order.iter().enumerate().flat_map(|(b, o)| o.iter().map(move |&l| (b as u64, l))).collect();
    (exec, order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_labels_in_an_even_number_of_blocks_run_ab_and_ba_equally_often() {
        let mut rng = SplitMix64::new(7);
        let (exec, order) = schedule(2, 10, true, &mut rng);
        assert_eq!(exec.len(), 20);
        let ab = order.iter().filter(|o| o[..] == [0, 1]).count();
        assert_eq!((ab, order.len() - ab), (5, 5));
        // The same seed gives the same order.
        assert_eq!(schedule(2, 10, true, &mut SplitMix64::new(7)).1, order);
    }

    #[test]
    fn a_sequential_schedule_runs_every_run_of_one_label_first() {
        let (exec, _) = schedule(2, 3, false, &mut SplitMix64::new(1));
        let labels: Vec<usize> = exec.iter().map(|e| e.1).collect();
        assert!(labels == [0, 0, 0, 1, 1, 1] || labels == [1, 1, 1, 0, 0, 0], "{labels:?}");
    }
}
