//! What is compared: metrics, their kinds and units, and the runs that hold
//! their values.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a metric measures, which decides its unit, its policy floor, and
/// whether a change is a statistical question at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A duration, in milliseconds (wall, CPU, a phase's inclusive time).
    Time,
    /// A size, in KiB (peak resident set).
    Memory,
    /// A count of retired instructions (measured: it drifts with load).
    Instructions,
    /// A deterministic count of work: span counts, integer field sums, Ninja
    /// actions. Any change is a change of the work done.
    Work,
}

impl Kind {
    /// The unit the values are in: `ms`, `KiB`, `instructions`, `count`.
    pub fn unit(self) -> &'static str {
        match self {
            Kind::Time => "ms",
            Kind::Memory => "KiB",
            Kind::Instructions => "instructions",
            Kind::Work => "count",
        }
    }
}

/// One metric: its name and kind. Names are `wall`, `cpu_user`, `cpu_system`,
/// `peak_rss`, `ninja_actions`, `phase:<span>` (inclusive time of a span
/// name), `count:<span>` (how many such spans), `field:<span>.<field>` (an
/// integer field's sum).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Metric {
    /// The metric's name, as above.
    pub name: String,
    /// What it measures.
    pub kind: Kind,
}

impl Metric {
    /// A metric of `kind` named `name`.
    pub fn new(name: impl Into<String>, kind: Kind) -> Metric {
        Metric { name: name.into(), kind }
    }

    /// True for metrics that follow the code's spans (`phase:`, `count:`,
    /// `field:`): one present on one side only is a change of instrumentation.
    pub fn from_instrumentation(&self) -> bool {
        ["phase:", "count:", "field:"].iter().any(|p| self.name.starts_with(p))
    }

    /// Report order: process metrics first, then phases, counts and fields.
    fn order(&self) -> (u8, &str) {
        let rank = match self.name.as_str() {
            "wall" => 0,
            "cpu_user" => 1,
            "cpu_system" => 2,
            "peak_rss" => 3,
            "instructions" => 4,
            "ninja_actions" => 5,
            n if n.starts_with("phase:") => 6,
            n if n.starts_with("count:") => 7,
            n if n.starts_with("field:") => 8,
            _ => 9,
        };
        (rank, &self.name)
    }
}

impl PartialOrd for Metric {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Metric {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.order().cmp(&other.order()).then(self.kind.cmp(&other.kind))
    }
}

/// One run of a command: its block (in randomized-block samples) and the
/// value of each metric it recorded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Run {
    /// The block the run belongs to, when it comes from `bench`; runs of two
    /// labels in one block are a pair.
    pub block: Option<u64>,
    /// Each metric's value, in its kind's unit.
    pub values: BTreeMap<Metric, f64>,
}

/// The runs of one command or scenario on one side.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Group {
    /// The scenario's name, or the command.
    pub name: String,
    /// Its runs.
    pub runs: Vec<Run>,
    /// Why the group is not a measurement (a failed check, a failed run);
    /// empty when it is one.
    pub invalid: Vec<String>,
}

/// One side of a comparison.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Side {
    /// Its label (`base`, `head`, a file name).
    pub label: String,
    /// Where it was read from.
    pub source: String,
    /// An identity of the measurement session (a `samples.json`'s seed and
    /// creation time): two sides with the same one are paired by block.
    pub session: Option<String>,
    /// Its groups, in input order.
    pub groups: Vec<Group>,
}

impl Group {
    /// Every metric any run of the group recorded, in report order.
    pub fn metrics(&self) -> Vec<Metric> {
        let mut all: Vec<Metric> = self.runs.iter().flat_map(|r| r.values.keys().cloned()).collect();
        all.sort();
        all.dedup();
        all
    }

    /// The values of `metric` over the runs that recorded it, with their blocks.
    pub fn values(&self, metric: &Metric) -> Vec<(Option<u64>, f64)> {
        self.runs.iter().filter_map(|r| r.values.get(metric).map(|&v| (r.block, v))).collect()
    }
}
