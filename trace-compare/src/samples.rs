//! `samples.json`, format 1: every raw sample of a `cabin-trace bench`
//! session, documented field by field, and the reader that turns one label
//! of it into a [`Side`].
//!
//! Its JSON Schema is `trace-compare/schema/samples-v1.schema.json`. Times are
//! in the unit their field names say (`_ns`, `_us`), sizes in KiB or bytes.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use trace_summary::Timings;

use crate::error::{Error, ErrorKind};
use crate::metric::{Group, Kind, Metric, Run, Side};

/// The version of `samples.json`; it bumps with every change of meaning.
pub const SAMPLES_FORMAT_VERSION: u32 = 1;

/// The whole file.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Samples {
    /// [`SAMPLES_FORMAT_VERSION`].
    pub format_version: u32,
    /// The tool that wrote the file.
    pub tool: ToolInfo,
    /// When the session started, in milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
    /// The seed of the run order (every scenario's blocks are drawn from it).
    pub seed: u64,
    /// The variable that gave each run its own trace directory, e.g.
    /// `CABIN_TRACE_DIR`.
    pub trace_dir_variable: String,
    /// The machine the session ran on.
    pub machine: Machine,
    /// The labels compared, in the order given (`base`, `head`, ...).
    pub labels: Vec<String>,
    /// One entry per scenario (a `--cmd` session has one, named `default`).
    pub scenarios: Vec<Scenario>,
}

/// The tool that wrote the file.
#[non_exhaustive]
#[derive(Clone, Default, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// `cabin-trace`.
    pub name: String,
    /// Its version, e.g. `0.1.0`.
    pub version: String,
}

/// The machine a session ran on.
#[non_exhaustive]
#[derive(Clone, Default, Debug, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// The CPU's model name, when the system tells it.
    pub cpu_model: Option<String>,
    /// Logical CPUs available to the session.
    pub cores: u32,
    /// The operating system family, e.g. `linux`.
    pub os: String,
    /// The distribution or release name, when known (e.g. `Debian GNU/Linux 13`).
    pub os_release: Option<String>,
    /// The kernel's release, when known.
    pub kernel: Option<String>,
    /// The CPU architecture, e.g. `x86_64`.
    pub arch: String,
    /// The 1-minute load average when the session started, when known.
    pub load_average_start: Option<f64>,
    /// The 1-minute load average when it ended, when known.
    pub load_average_end: Option<f64>,
}

/// One scenario: a command template run under each label.
#[non_exhaustive]
#[derive(Clone, Default, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// Its name.
    pub name: String,
    /// The working directory of its runs; `null` for the session's own.
    pub workdir: Option<String>,
    /// The shell command run before every run (warm-ups too), untimed.
    pub prepare: Option<String>,
    /// Measured runs per label (= blocks).
    pub runs: u32,
    /// Unrecorded warm-up runs per label, before the first block.
    pub warmups: u32,
    /// `interleaved` (randomized balanced blocks: each block runs every label
    /// once, in the block's order) or `sequential` (every run of one label,
    /// then the next; for calibration only).
    pub schedule: String,
    /// The checks every run must pass, e.g. `exit_status == 0`,
    /// `ninja_actions == 0`. A failed check makes the scenario an INVALID
    /// MEASUREMENT.
    pub checks: Vec<String>,
    /// The command of each label.
    pub commands: Vec<CommandInfo>,
    /// The order of each block: `order[b]` lists the labels in the order they
    /// ran in block `b`.
    pub order: Vec<Vec<String>>,
    /// Every measured run, in the order they ran.
    pub samples: Vec<Sample>,
}

/// The command of one label.
#[non_exhaustive]
#[derive(Clone, Default, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommandInfo {
    /// The label.
    pub label: String,
    /// The command as given.
    pub command: String,
    /// The words it was split into (leading `NAME=value` words are set in the
    /// environment); empty when it runs through `sh -c`.
    pub argv: Vec<String>,
    /// The program run (the first word resolved on `PATH`), when found.
    pub binary: Option<Binary>,
}

/// A program file's identity.
#[non_exhaustive]
#[derive(Clone, Default, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binary {
    /// Its resolved path.
    pub path: String,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// The SHA-256 of its bytes, lowercase hex.
    pub sha256: String,
}

/// One measured run.
#[non_exhaustive]
#[derive(Clone, Default, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Its label.
    pub label: String,
    /// Its block (0-based); the runs of one block are a pair.
    pub block: u64,
    /// Its position in the block (0-based).
    pub position: u32,
    /// What the process measured (flattened into the sample's object).
    #[serde(flatten)]
    pub process: Process,
    /// The run's own trace directory, relative to the file's directory.
    pub trace_dir: String,
    /// The run's `timings.json`, relative to the file's directory; `null` when
    /// the run wrote none.
    pub timings_file: Option<String>,
    /// The run's timings summary as read (format 1), `null` when none.
    pub timings: Option<Timings>,
    /// Why `timings` is `null` or partial, when it is.
    pub timings_note: Option<String>,
    /// Each check's result.
    pub checks: Vec<CheckResult>,
}

/// What one run's process measured.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    /// Wall time from spawn to reaped, on the monotonic clock, in ns.
    pub wall_ns: u64,
    /// The child's user CPU (with its waited-for descendants) from `wait4`, in
    /// µs; `null` where `wait4` is not available.
    pub user_us: Option<u64>,
    /// The child's system CPU, likewise, in µs.
    pub system_us: Option<u64>,
    /// The child's peak resident set (the largest of it and its waited-for
    /// descendants) from `wait4`, in KiB; `null` where not available.
    pub max_rss_kib: Option<u64>,
    /// Its exit code; `null` when killed by a signal.
    pub exit_code: Option<i32>,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
}

/// One check of one run.
#[non_exhaustive]
#[derive(Clone, Default, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    /// The check, e.g. `ninja_actions == 0`.
    pub check: String,
    /// Whether it held.
    pub passed: bool,
    /// The value found, `null` when the run did not record the metric.
    pub found: Option<f64>,
}

/// An empty session of the current format ([`SAMPLES_FORMAT_VERSION`]): the
/// model's structs may gain fields (`#[non_exhaustive]`), so a writer starts
/// from `default()` and sets the fields it knows.
impl Default for Samples {
    fn default() -> Samples {
        Samples {
            format_version: SAMPLES_FORMAT_VERSION,
            tool: ToolInfo::default(),
            created_unix_ms: 0,
            seed: 0,
            trace_dir_variable: String::new(),
            machine: Machine::default(),
            labels: Vec::new(),
            scenarios: Vec::new(),
        }
    }
}

impl Sample {
    /// The run's metrics: `wall`, `cpu_user`, `cpu_system`, `peak_rss` from the
    /// process, and those of its timings' spans and Ninja actions.
    pub fn metrics(&self) -> BTreeMap<Metric, f64> {
        let mut m = self.timings.as_ref().map(crate::input::timings::span_metrics).unwrap_or_default();
        let p = &self.process;
        m.insert(Metric::new("wall", Kind::Time), p.wall_ns as f64 / 1e6);
        let mut put = |name: &str, kind, v: Option<u64>, scale: f64| {
            if let Some(v) = v {
                m.insert(Metric::new(name, kind), v as f64 / scale);
            }
        };
        put("cpu_user", Kind::Time, p.user_us, 1000.0);
        put("cpu_system", Kind::Time, p.system_us, 1000.0);
        put("peak_rss", Kind::Memory, p.max_rss_kib, 1.0);
        m
    }
}

impl Samples {
    /// Reads a `samples.json`; refuses other format versions.
    pub fn from_path(path: &Path) -> Result<Samples, Error> {
        let text = std::fs::read(path)
            .map_err(|e| Error::new(ErrorKind::Io, "", e.to_string(), "a readable file").in_file(path))?;
        let doc: serde_json::Value = serde_json::from_slice(&text).map_err(|e| {
            Error::new(ErrorKind::Format, format!("line {}", e.line()), e.to_string(), "JSON").in_file(path)
        })?;
        Self::from_value(doc).map_err(|e| e.in_file(path))
    }

    /// From a parsed document.
    pub fn from_value(doc: serde_json::Value) -> Result<Samples, Error> {
        let found = doc.get("format_version").and_then(|v| v.as_u64());
        if found != Some(u64::from(SAMPLES_FORMAT_VERSION)) {
            return Err(Error::new(
                ErrorKind::Version,
                "format_version",
                found.map_or("none".to_string(), |v| v.to_string()),
                format!("samples format_version {SAMPLES_FORMAT_VERSION}"),
            ));
        }
        serde_json::from_value(doc)
            .map_err(|e| Error::new(ErrorKind::Format, "", e.to_string(), "a samples.json of format 1"))
    }

    /// The session's identity: sides from one session are paired by block.
    pub fn session(&self) -> String {
        format!("{}-{}", self.created_unix_ms, self.seed)
    }

    /// The side of `label`: one group per scenario. A scenario with a failed
    /// check on any run (of any label) is invalid.
    pub fn side(&self, label: &str, source: &str) -> Result<Side, Error> {
        if !self.labels.iter().any(|l| l == label) {
            return Err(Error::new(
                ErrorKind::Argument,
                "label",
                format!("`{label}`"),
                format!("one of the file's labels: {}", self.labels.join(", ")),
            )
            .in_file(source));
        }
        let groups = self
            .scenarios
            .iter()
            .map(|sc| {
                let invalid = sc
                    .samples
                    .iter()
                    .flat_map(|s| {
                        s.checks.iter().filter(|c| !c.passed).map(move |c| {
                            let found = c.found.map_or("nothing".to_string(), |v| v.to_string());
                            format!(
                                "{} run of block {}: `{}` failed (found {found})",
                                s.label, s.block, c.check
                            )
                        })
                    })
                    .collect();
                let runs = sc
                    .samples
                    .iter()
                    .filter(|s| s.label == label)
                    .map(|s| Run { block: Some(s.block), values: s.metrics() })
                    .collect();
                Group { name: sc.name.clone(), runs, invalid }
            })
            .collect();
        Ok(Side {
            label: label.to_string(),
            source: source.to_string(),
            session: Some(self.session()),
            groups,
        })
    }
}
