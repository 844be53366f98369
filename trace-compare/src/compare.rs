//! Comparing two sides: every metric both sides have, under the unpaired rule
//! and (for blocks of one `bench` session) the paired rule.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind};
use crate::metric::{Group, Kind, Metric, Side};
use crate::rules::{self, check_finite, Options, Paired, Unpaired, Verdict, MIN_SAMPLES};
use crate::stats::Spread;

/// The version of the JSON report ([`Report`]); it bumps with every change of
/// meaning.
pub const REPORT_FORMAT_VERSION: u32 = 2;

/// The comparison of two sides, as `compare --format json` writes it.
///
/// [`compare()`] makes it, or reading the JSON back; it and its parts
/// ([`SideInfo`], [`GroupReport`], [`Row`]) may gain fields, so they are
/// `#[non_exhaustive]`.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`REPORT_FORMAT_VERSION`].
    pub format_version: u32,
    /// The baseline's label and source.
    pub base: SideInfo,
    /// The head's label and source.
    pub head: SideInfo,
    /// True when the sides are blocks of one `bench` session and the paired
    /// rule decides.
    pub paired: bool,
    /// The settings the rules ran with; for paired sides `family_size` is the
    /// size the intervals were computed for.
    pub options: Options,
    /// The paired rule's family, `null` for unpaired sides.
    pub family: Option<Family>,
    /// One entry per group (scenario or command) matched between the sides.
    pub groups: Vec<GroupReport>,
}

/// The family of the paired rule: the comparisons whose simultaneous
/// intervals hold together at the family-wise level (Bonferroni).
///
/// By default it is every timed comparison the report makes: each metric of
/// kind time, memory or instructions that both sides of a valid group have,
/// with at least [`MIN_SAMPLES`] runs a side, over all groups. Which rows
/// those are follows from which metrics exist, never from their values, so
/// the family is fixed before any value is seen. Work counters are not in it:
/// a constant one is compared as work, and one that varies from run to run is
/// shown with its interval but decides nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Family {
    /// `m`: each interval is at `alpha_paired / m`.
    pub size: u32,
    /// How many timed comparisons the report makes (the default `m`).
    pub timed_comparisons: u32,
    /// True when `m` was given (`--family-size`) rather than counted.
    pub declared: bool,
}

impl Family {
    /// True when a declared family is smaller than the timed comparisons
    /// made: the family-wise level then does not hold over the report.
    pub fn undersized(&self) -> bool {
        self.size < self.timed_comparisons
    }
}

/// A side's label and where it was read from.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideInfo {
    /// Its label.
    pub label: String,
    /// Its source (a path).
    pub source: String,
}

/// The comparison of one group.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupReport {
    /// The group's name (the baseline's, or both joined by ` | ` when they
    /// were matched by position).
    pub name: String,
    /// Why this is not a measurement: a failed check or run. When non-empty,
    /// `rows` is empty: an INVALID MEASUREMENT is never a timing.
    pub invalid: Vec<String>,
    /// Notes on the group as a whole (e.g. present on one side only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// One row per metric, in report order.
    pub rows: Vec<Row>,
}

/// The comparison of one metric.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The metric's name (see [`Metric`]).
    pub metric: String,
    /// What it measures.
    pub kind: Kind,
    /// Its unit: `ms`, `KiB`, `instructions` or `count`.
    pub unit: String,
    /// The baseline's median, quartiles and IQR; `null` when absent.
    pub base: Option<Spread>,
    /// The head's; `null` when absent.
    pub head: Option<Spread>,
    /// Head's median against the baseline's, in percent; `null` when either
    /// is absent or the baseline's median is 0.
    pub change_pct: Option<f64>,
    /// For a work counter constant on both sides: the two values. Any
    /// difference is a change of the work done, whatever the clock says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<(f64, f64)>,
    /// The unpaired rule, when both sides have enough samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unpaired: Option<Unpaired>,
    /// The paired rule, for blocks of one session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired: Option<Paired>,
    /// The verdict that decides: the paired one for paired sides, else the
    /// unpaired one; the work verdict for a constant work counter.
    pub verdict: Verdict,
}

impl Report {
    /// True when a row is Regressed or a regression was detected.
    pub fn has_regression(&self) -> bool {
        self.groups.iter().flat_map(|g| &g.rows).any(|r| r.verdict.is_regression())
    }

    /// What a gate on the `primary` metrics fails on, one line each: every
    /// INVALID MEASUREMENT, and every row of a primary metric that is
    /// Regressed or a detected regression. Other rows inform; they do not
    /// decide. Empty when the gate passes.
    pub fn gate_failures(&self, primary: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        for g in &self.groups {
            if !g.invalid.is_empty() {
                out.push(format!("{}: INVALID MEASUREMENT: {}", g.name, g.invalid.join("; ")));
            }
            for r in g.rows.iter().filter(|r| primary.contains(&r.metric) && r.verdict.is_regression()) {
                out.push(format!("{}: {}: {}", g.name, r.metric, r.verdict.as_str()));
            }
        }
        out
    }

    /// The `primary` metrics that no group of the report compares: a gate
    /// on them would decide on nothing.
    pub fn missing_metrics<'a>(&self, primary: &'a [String]) -> Vec<&'a str> {
        primary
            .iter()
            .filter(|m| !self.groups.iter().flat_map(|g| &g.rows).any(|r| &r.metric == *m))
            .map(String::as_str)
            .collect()
    }

    /// True when a group is an INVALID MEASUREMENT.
    pub fn has_invalid(&self) -> bool {
        self.groups.iter().any(|g| !g.invalid.is_empty())
    }
}

/// Compares `head` against `base`. The sides are paired by block when both
/// carry the same [`Side::session`]. Non-finite values are refused.
pub fn compare(base: &Side, head: &Side, opts: &Options) -> Result<Report, Error> {
    let paired = base.session.is_some() && base.session == head.session;
    let matched = match_groups(base, head);
    let family = paired.then(|| {
        let timed_comparisons = matched
            .iter()
            .filter_map(|(_, b, h)| b.zip(*h))
            .map(|(b, h)| timed_comparisons(b, h))
            .sum::<u32>();
        Family {
            size: opts.family_size.unwrap_or(timed_comparisons.max(1)),
            timed_comparisons,
            declared: opts.family_size.is_some(),
        }
    });
    let opts = &Options { family_size: family.map(|f| f.size).or(opts.family_size), ..*opts };
    let mut groups = Vec::new();
    for (name, b, h) in matched {
        groups.push(match (b, h) {
            (Some(b), Some(h)) => compare_group(name, b, h, paired, opts)?,
            (Some(_), None) | (None, Some(_)) => GroupReport {
                name,
                invalid: Vec::new(),
                notes: vec![format!("only in {}", if b.is_some() { &base.label } else { &head.label })],
                rows: Vec::new(),
            },
            (None, None) => continue,
        });
    }
    Ok(Report {
        format_version: REPORT_FORMAT_VERSION,
        base: SideInfo { label: base.label.clone(), source: base.source.clone() },
        head: SideInfo { label: head.label.clone(), source: head.source.clone() },
        paired,
        options: *opts,
        family,
        groups,
    })
}

/// How many timed comparisons (see [`Family`]) a group makes: counted from
/// which metrics its runs recorded, not from their values.
fn timed_comparisons(b: &Group, h: &Group) -> u32 {
    if !b.invalid.is_empty() || !h.invalid.is_empty() {
        return 0;
    }
    let runs = |g: &Group, m: &Metric| g.runs.iter().filter(|r| r.values.contains_key(m)).count();
    let tested = b
        .metrics()
        .into_iter()
        .filter(|m| m.kind != Kind::Work && runs(b, m) >= MIN_SAMPLES && runs(h, m) >= MIN_SAMPLES)
        .count();
    u32::try_from(tested).unwrap_or(u32::MAX)
}

/// Groups matched by name; the groups left over, when both sides have as
/// many, by position (two hyperfine exports of different binaries); the rest
/// are on one side only.
fn match_groups<'a>(base: &'a Side, head: &'a Side) -> Vec<(String, Option<&'a Group>, Option<&'a Group>)> {
    let named = |g: &Group, other: &Side| other.groups.iter().any(|o| o.name == g.name);
    let left_b: Vec<&Group> = base.groups.iter().filter(|g| !named(g, head)).collect();
    let left_h: Vec<&Group> = head.groups.iter().filter(|g| !named(g, base)).collect();
    let by_position = left_b.len() == left_h.len();
    let mut out = Vec::new();
    let mut next_h = left_h.iter();
    for b in &base.groups {
        match head.groups.iter().find(|h| h.name == b.name) {
            Some(h) => out.push((b.name.clone(), Some(b), Some(h))),
            None if by_position => {
                let h = next_h.next().copied();
                out.push((format!("{} | {}", b.name, h.map_or("", |h| h.name.as_str())), Some(b), h));
            }
            None => out.push((b.name.clone(), Some(b), None)),
        }
    }
    if !by_position {
        out.extend(left_h.iter().map(|h| (h.name.clone(), None, Some(*h))));
    }
    out
}

fn compare_group(
    name: String,
    b: &Group,
    h: &Group,
    paired: bool,
    opts: &Options,
) -> Result<GroupReport, Error> {
    // Two labels of one session carry the same reasons: keep each once.
    let mut invalid = b.invalid.clone();
    invalid.extend(h.invalid.iter().filter(|r| !b.invalid.contains(r)).cloned());
    if !invalid.is_empty() {
        return Ok(GroupReport { name, invalid, notes: Vec::new(), rows: Vec::new() });
    }
    let mut metrics = b.metrics();
    metrics.extend(h.metrics());
    metrics.sort();
    metrics.dedup();
    let mut rows = Vec::new();
    for metric in metrics {
        let bv = b.values(&metric);
        let hv = h.values(&metric);
        let place = |side: &str| format!("{name}: {side}: {}", metric.name);
        check_finite(&bv.iter().map(|v| v.1).collect::<Vec<_>>(), &place("base"))?;
        check_finite(&hv.iter().map(|v| v.1).collect::<Vec<_>>(), &place("head"))?;
        rows.push(compare_metric(&metric, &bv, &hv, paired, opts));
    }
    Ok(GroupReport { name, invalid, notes: Vec::new(), rows })
}

/// One metric's row from its values on each side, `(block, value)`.
pub fn compare_metric(
    metric: &Metric,
    bv: &[(Option<u64>, f64)],
    hv: &[(Option<u64>, f64)],
    paired: bool,
    opts: &Options,
) -> Row {
    let base: Vec<f64> = bv.iter().map(|v| v.1).collect();
    let head: Vec<f64> = hv.iter().map(|v| v.1).collect();
    let spread = |v: &[f64]| (!v.is_empty()).then(|| Spread::of(v));
    let (bs, hs) = (spread(&base), spread(&head));
    let change_pct = match (bs, hs) {
        (Some(b), Some(h)) if b.median != 0.0 => Some(100.0 * (h.median - b.median) / b.median.abs()),
        _ => None,
    };
    let mut row = Row {
        metric: metric.name.clone(),
        kind: metric.kind,
        unit: metric.kind.unit().to_string(),
        base: bs,
        head: hs,
        change_pct,
        work: None,
        unpaired: None,
        paired: None,
        verdict: Verdict::Incomparable,
    };
    if base.is_empty() || head.is_empty() {
        if metric.from_instrumentation() {
            row.verdict = Verdict::InstrumentationChange;
        }
        return row;
    }
    if base.len() < MIN_SAMPLES || head.len() < MIN_SAMPLES {
        row.verdict = Verdict::TooFewSamples;
        return row;
    }
    let constant = |v: &[f64]| v.iter().all(|&x| x == v[0]);
    if metric.kind == Kind::Work && constant(&base) && constant(&head) {
        row.work = Some((base[0], head[0]));
        row.verdict = match (head[0].total_cmp(&base[0]), paired) {
            (std::cmp::Ordering::Equal, _) => Verdict::Unchanged,
            (std::cmp::Ordering::Greater, false) => Verdict::Regressed,
            (std::cmp::Ordering::Less, false) => Verdict::Improved,
            (std::cmp::Ordering::Greater, true) => Verdict::RegressionDetected,
            (std::cmp::Ordering::Less, true) => Verdict::ImprovementDetected,
        };
        return row;
    }
    let unpaired = rules::unpaired(&base, &head, metric.kind, opts);
    row.verdict = unpaired.verdict;
    row.unpaired = Some(unpaired);
    if paired {
        let by_block: BTreeMap<u64, f64> = bv.iter().filter_map(|&(b, v)| b.map(|b| (b, v))).collect();
        let pairs: Vec<(f64, f64)> =
            hv.iter().filter_map(|&(blk, h)| blk.and_then(|k| by_block.get(&k)).map(|&b| (b, h))).collect();
        let mut p = rules::paired(&pairs, opts);
        if metric.kind == Kind::Work {
            // Its membership of the family would depend on its values.
            p.verdict = Verdict::Inconclusive;
            p.notes.push("a work counter that varies from run to run: outside the family, shown only".into());
        }
        row.verdict = p.verdict;
        row.paired = Some(p);
    }
    row
}

/// Refuses an option out of range, naming it.
pub fn check_options(opts: &Options) -> Result<(), Error> {
    let level = |name: &str, v: f64| {
        if v > 0.0 && v < 1.0 {
            Ok(())
        } else {
            Err(Error::new(ErrorKind::Argument, name, v.to_string(), "a level between 0 and 1, e.g. 0.01"))
        }
    };
    level("alpha (unpaired)", opts.alpha_unpaired)?;
    level("alpha (paired)", opts.alpha_paired)?;
    if opts.family_size == Some(0) {
        return Err(Error::new(ErrorKind::Argument, "family size", "0", "at least 1"));
    }
    let p = &opts.policy;
    for (name, v) in [
        ("minimum effect", p.min_effect_pct),
        ("time floor", p.floor_time_ms),
        ("memory floor", p.floor_memory_kib),
        ("instructions floor", p.floor_instructions),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(Error::new(ErrorKind::Argument, name, v.to_string(), "a finite number >= 0"));
        }
    }
    Ok(())
}
