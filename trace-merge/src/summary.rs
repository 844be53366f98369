//! The family summary: per command, how many processes ran it and what they
//! cost, and where their time went.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{Capture, ErrorKind, MergeError};

/// How many phases each command lists.
const TOP_PHASES: usize = 8;

/// `family-<trace id>.family.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FamilySummary {
    /// The format's version: 1.
    pub format_version: u32,
    /// The family's trace id.
    pub trace_id: String,
    /// How many captured processes the family holds.
    pub processes: u64,
    /// How many parent-to-child flows the merged traces draw.
    pub flows: u64,
    /// The stem of the family's top-level capture (the one without a parent
    /// in the family), when there is one.
    pub root_stem: Option<String>,
    /// Wall time from the first capture's start to the last one's end, in µs.
    pub wall_us: u64,
    /// Per command, in order of total wall time, largest first.
    pub commands: Vec<CommandTotals>,
}

/// What the processes of one command cost, summed over them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommandTotals {
    /// The command, e.g. `ccwrap`.
    pub command: String,
    /// How many captured processes ran it.
    pub count: u64,
    /// Their wall times, summed, in µs (processes may overlap).
    pub wall_us: u64,
    /// Their own CPU time (user and system), summed, in µs.
    pub cpu_us: u64,
    /// The CPU time (user and system) of the child processes they waited
    /// for (a compiler a wrapper ran), summed, in µs.
    pub children_cpu_us: u64,
    /// The largest peak resident set among them, in KiB.
    pub peak_rss_kib: u64,
    /// The trace files' bytes of these captures, summed (`.pftrace` and
    /// `.trace.json`): the size they add to the merged trace.
    pub trace_bytes: u64,
    /// The phases (span names other than the root) with the largest total
    /// inclusive time, largest first.
    pub top_phases: Vec<Phase>,
}

/// One span name's totals over a command's processes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Phase {
    /// The span's name.
    pub name: String,
    /// How many slices.
    pub count: u64,
    /// Their inclusive time, summed, in µs.
    pub total_us: u64,
}

pub(crate) fn build(trace_id: &str, family: &[Capture], flows: usize) -> FamilySummary {
    let mut by_command: BTreeMap<&str, (CommandTotals, BTreeMap<&str, Phase>)> = BTreeMap::new();
    for c in family {
        let t = &c.timings;
        let (totals, phases) = by_command.entry(t.command.as_str()).or_insert_with(|| {
            (
                CommandTotals {
                    command: t.command.clone(),
                    count: 0,
                    wall_us: 0,
                    cpu_us: 0,
                    children_cpu_us: 0,
                    peak_rss_kib: 0,
                    trace_bytes: 0,
                    top_phases: Vec::new(),
                },
                BTreeMap::new(),
            )
        });
        totals.count += 1;
        totals.wall_us += t.wall_us;
        // A figure the platform does not give (null in the summary) counts as none.
        let r = &t.resources.figures;
        totals.cpu_us += r.self_user_us.unwrap_or(0) + r.self_system_us.unwrap_or(0);
        totals.children_cpu_us += r.children_user_us.unwrap_or(0) + r.children_system_us.unwrap_or(0);
        totals.peak_rss_kib = totals.peak_rss_kib.max(r.self_max_rss_kib.unwrap_or(0));
        totals.trace_bytes += [&c.chrome, &c.pftrace]
            .into_iter()
            .flatten()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum::<u64>();
        for s in t.spans.iter().filter(|s| !(s.name == "command" && s.target == "cabin_trace")) {
            let p = phases.entry(s.name.as_str()).or_insert_with(|| Phase {
                name: s.name.clone(),
                count: 0,
                total_us: 0,
            });
            p.count += s.count;
            p.total_us += s.total_inclusive_us;
        }
    }
    let mut commands: Vec<CommandTotals> = by_command
        .into_values()
        .map(|(mut totals, phases)| {
            let mut phases: Vec<Phase> = phases.into_values().collect();
            phases.sort_by(|a, b| b.total_us.cmp(&a.total_us).then_with(|| a.name.cmp(&b.name)));
            phases.truncate(TOP_PHASES);
            totals.top_phases = phases;
            totals
        })
        .collect();
    commands.sort_by(|a, b| b.wall_us.cmp(&a.wall_us).then_with(|| a.command.cmp(&b.command)));
    let start = family.iter().map(|c| c.timings.start_ns).min().unwrap_or(0);
    let end = family.iter().map(|c| c.timings.start_ns + c.timings.wall_us * 1000).max().unwrap_or(0);
    let stems: Vec<&str> = family.iter().map(|c| c.timings.stem.as_str()).collect();
    FamilySummary {
        format_version: 1,
        trace_id: trace_id.to_string(),
        processes: family.len() as u64,
        flows: flows as u64,
        root_stem: family
            .iter()
            .find(|c| c.timings.parent_stem.as_deref().is_none_or(|p| !stems.contains(&p)))
            .map(|c| c.timings.stem.clone()),
        wall_us: end.saturating_sub(start) / 1000,
        commands,
    }
}

pub(crate) fn write(trace_id: &str, family: &[Capture], flows: usize, path: &Path) -> Result<(), MergeError> {
    let summary = build(trace_id, family, flows);
    let text = serde_json::to_string_pretty(&summary)
        .map_err(|e| MergeError::new(path, ErrorKind::Write, e.to_string()))?;
    std::fs::write(path, text + "\n").map_err(|e| MergeError::new(path, ErrorKind::Write, e.to_string()))
}
