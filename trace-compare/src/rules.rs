//! The two decision rules and the policy: when is a difference real, and when
//! is it worth reporting as a regression.

use serde::{Deserialize, Serialize};

use crate::error::{finite, Error};
use crate::metric::Kind;
use crate::stats::{self, mann_whitney_u, sign_flip, Enumeration, Method, Spread};

/// Below this many samples a side gets [`Verdict::TooFewSamples`].
pub const MIN_SAMPLES: usize = 3;

/// The policy applied to a real unpaired difference: it is Regressed or
/// Improved only past both the minimum effect and the kind's absolute floor.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// The smallest change of the median that counts, in percent of the
    /// baseline's median. Default 5.
    pub min_effect_pct: f64,
    /// The smallest change of a time that counts, in ms. Default 2.
    pub floor_time_ms: f64,
    /// The smallest change of peak RSS that counts, in KiB. Default 1024 (1 MiB).
    pub floor_memory_kib: f64,
    /// The smallest change of an instruction count that counts. Default 1e6.
    pub floor_instructions: f64,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy { min_effect_pct: 5.0, floor_time_ms: 2.0, floor_memory_kib: 1024.0, floor_instructions: 1e6 }
    }
}

impl Policy {
    /// The absolute floor of `kind`, in its unit (0 for work counters: any
    /// change of work counts).
    pub fn floor(&self, kind: Kind) -> f64 {
        match kind {
            Kind::Time => self.floor_time_ms,
            Kind::Memory => self.floor_memory_kib,
            Kind::Instructions => self.floor_instructions,
            Kind::Work => 0.0,
        }
    }
}

/// The settings of a comparison.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// The unpaired rule's two-sided level. Default 0.01.
    pub alpha_unpaired: f64,
    /// The paired rule's family-wise two-sided level. Default 0.05.
    pub alpha_paired: f64,
    /// The number of paired comparisons in the family (Bonferroni: each is
    /// tested at `alpha_paired / family_size`). `None` (the default): the
    /// timed comparisons the report makes, which [`crate::compare()`] counts
    /// before it looks at any value (see [`crate::Family`]). A single call of
    /// [`paired`] with `None` is a family of one.
    pub family_size: Option<u32>,
    /// The policy for unpaired differences.
    pub policy: Policy,
    /// The seed of the sign-flip Monte Carlo beyond
    /// [`stats::signflip::EXACT_MAX_BLOCKS`] blocks. Default 0.
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            alpha_unpaired: 0.01,
            alpha_paired: 0.05,
            family_size: None,
            policy: Policy::default(),
            seed: 0,
        }
    }
}

/// A verdict on one metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Unpaired: real and past the policy, higher.
    Regressed,
    /// Unpaired: real and past the policy, lower.
    Improved,
    /// Unpaired: real, higher, below the policy.
    Increased,
    /// Unpaired: real, lower, below the policy.
    Decreased,
    /// Unpaired: not a real difference (or, for a work counter, the same work).
    Unchanged,
    /// The metric is on one side only.
    Incomparable,
    /// A span metric on one side only: the instrumentation changed.
    InstrumentationChange,
    /// One or two samples on a side: no verdict.
    TooFewSamples,
    /// Paired: the simultaneous interval lies above no change.
    RegressionDetected,
    /// Paired: the simultaneous interval lies below no change.
    ImprovementDetected,
    /// Paired: the interval holds no change or is unbounded. Not parity.
    Inconclusive,
}

impl Verdict {
    /// How reports spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Regressed => "Regressed",
            Verdict::Improved => "Improved",
            Verdict::Increased => "Increased",
            Verdict::Decreased => "Decreased",
            Verdict::Unchanged => "Unchanged",
            Verdict::Incomparable => "Incomparable",
            Verdict::InstrumentationChange => "instrumentation change",
            Verdict::TooFewSamples => "too few samples",
            Verdict::RegressionDetected => "regression detected",
            Verdict::ImprovementDetected => "improvement detected",
            Verdict::Inconclusive => "inconclusive",
        }
    }

    /// True for the verdicts `--fail-on-regression` fails on.
    pub fn is_regression(self) -> bool {
        matches!(self, Verdict::Regressed | Verdict::RegressionDetected)
    }

    /// The verdict with base and head swapped.
    pub fn swapped(self) -> Verdict {
        match self {
            Verdict::Regressed => Verdict::Improved,
            Verdict::Improved => Verdict::Regressed,
            Verdict::Increased => Verdict::Decreased,
            Verdict::Decreased => Verdict::Increased,
            Verdict::RegressionDetected => Verdict::ImprovementDetected,
            Verdict::ImprovementDetected => Verdict::RegressionDetected,
            v => v,
        }
    }
}

/// The unpaired rule's figures and verdict for one metric.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Unpaired {
    /// Mann-Whitney U of the baseline (SciPy's `statistic`).
    pub u: f64,
    /// The two-sided p-value.
    pub p: f64,
    /// `exact` or `asymptotic`.
    pub method: String,
    /// Head's median less the baseline's, in the metric's unit.
    pub median_diff: f64,
    /// The larger of the two interquartile ranges.
    pub larger_iqr: f64,
    /// True when `p < alpha` and `|median_diff| > larger_iqr`.
    pub real: bool,
    /// True when real and past the minimum effect and the floor.
    pub past_policy: bool,
    /// The verdict.
    pub verdict: Verdict,
    /// Why the verdict is what it is, when not plain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Checks that every value is finite; `what` names the values in errors.
pub fn check_finite(values: &[f64], what: &str) -> Result<(), Error> {
    for (i, &v) in values.iter().enumerate() {
        finite(v, || format!("{what}[{i}]"))?;
    }
    Ok(())
}

/// The unpaired rule (both sides have at least [`MIN_SAMPLES`] finite values;
/// see [`crate::compare::compare_metric`] for the checks): two-sided Mann-Whitney U at
/// `alpha_unpaired` AND medians apart by more than the larger IQR; then the
/// policy.
pub fn unpaired(base: &[f64], head: &[f64], kind: Kind, opts: &Options) -> Unpaired {
    let (b, h) = (Spread::of(base), Spread::of(head));
    let test = mann_whitney_u(base, head);
    let median_diff = h.median - b.median;
    let larger_iqr = b.iqr.max(h.iqr);
    let real = test.p < opts.alpha_unpaired && median_diff.abs() > larger_iqr;
    let mut notes = Vec::new();
    let floor = opts.policy.floor(kind);
    let effect_pct = if b.median != 0.0 { 100.0 * median_diff / b.median.abs() } else { f64::INFINITY };
    let past_policy = real && effect_pct.abs() >= opts.policy.min_effect_pct && median_diff.abs() >= floor;
    let verdict = match (real, past_policy, median_diff > 0.0) {
        (false, _, _) => Verdict::Unchanged,
        (true, true, true) => Verdict::Regressed,
        (true, true, false) => Verdict::Improved,
        (true, false, true) => Verdict::Increased,
        (true, false, false) => Verdict::Decreased,
    };
    if test.method == Method::Exact && !test.ties {
        let smallest = smallest_exact_p(base.len(), head.len());
        if smallest >= opts.alpha_unpaired {
            notes.push(format!(
                "{} v {} samples cannot reach p < {}: the smallest exact p is {:.3}",
                base.len(),
                head.len(),
                opts.alpha_unpaired,
                smallest
            ));
        }
    }
    Unpaired {
        u: test.u1,
        p: test.p,
        method: test.method.as_str().to_string(),
        median_diff,
        larger_iqr,
        real,
        past_policy,
        verdict,
        notes,
    }
}

/// `2 / C(n1 + n2, n1)`: the smallest exact two-sided p of `n1` v `n2`.
pub fn smallest_exact_p(n1: usize, n2: usize) -> f64 {
    let (k, n) = (n1.min(n2), n1 + n2);
    let mut c = 1.0;
    for i in 0..k {
        c = c * (n - i) as f64 / (i + 1) as f64;
    }
    (2.0 / c).min(1.0)
}

/// The paired rule's figures and verdict for one metric.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Paired {
    /// How many blocks (pairs).
    pub blocks: usize,
    /// The geometric mean of the head/base ratios (`null` without ratios).
    pub geo_mean_ratio: Option<f64>,
    /// The two-sided sign-flip p-value of the log-ratios (unadjusted).
    pub p: f64,
    /// `exact`, or `monte_carlo` (then `seed` and `draws` say how).
    pub enumeration: String,
    /// The Monte Carlo's seed, when one was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The Monte Carlo's draws, when one was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draws: Option<usize>,
    /// The simultaneous interval of the geometric mean ratio (Bonferroni over
    /// the family), `null` when unbounded.
    pub interval: Option<(f64, f64)>,
    /// The family's level and size the interval is for.
    pub alpha: f64,
    /// The family size.
    pub family_size: u32,
    /// The verdict: regression detected, improvement detected or inconclusive.
    pub verdict: Verdict,
    /// Why the verdict is what it is, when not plain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The paired rule over `(base, head)` pairs of finite values: per pair the
/// ratio head/base, the sign-flip test of the log-ratios, and the simultaneous
/// interval. A value that is zero or negative has no log-ratio: the result is
/// inconclusive and says so.
pub fn paired(pairs: &[(f64, f64)], opts: &Options) -> Paired {
    let alpha = opts.alpha_paired;
    let m = opts.family_size.unwrap_or(1).max(1);
    let mut notes = Vec::new();
    let n = pairs.len();
    let level = alpha / f64::from(m);
    if n > 0 && stats::smallest_p(n) > level {
        let need = (1..64).find(|&k| stats::smallest_p(k) <= level).unwrap_or(64);
        notes.push(format!(
            "{n} blocks can never reach significance for a family of {m} at {alpha}: \
             the smallest p is 2/2^{n} = {:.4} > {level:.4}; {need} blocks are needed",
            stats::smallest_p(n)
        ));
    }
    let inconclusive = |notes: Vec<String>| Paired {
        blocks: n,
        geo_mean_ratio: None,
        p: 1.0,
        enumeration: "exact".into(),
        seed: None,
        draws: None,
        interval: None,
        alpha,
        family_size: m,
        verdict: Verdict::Inconclusive,
        notes,
    };
    if let Some((i, _)) = pairs.iter().enumerate().find(|(_, (b, h))| *b <= 0.0 || *h <= 0.0) {
        notes.push(format!("block {i} has a value of zero or less: no ratio"));
        return inconclusive(notes);
    }
    if n == 0 {
        notes.push("no blocks".into());
        return inconclusive(notes);
    }
    let d: Vec<f64> = pairs.iter().map(|(b, h)| (h / b).ln()).collect();
    let r = sign_flip(&d, alpha, m, opts.seed);
    let interval = r.interval.map(|(lo, hi)| (lo.exp(), hi.exp()));
    let verdict = match r.interval {
        Some((lo, _)) if lo > 0.0 => Verdict::RegressionDetected,
        Some((_, hi)) if hi < 0.0 => Verdict::ImprovementDetected,
        _ => Verdict::Inconclusive,
    };
    let (enumeration, seed, draws) = match r.enumeration {
        Enumeration::Exact => ("exact".to_string(), None, None),
        Enumeration::MonteCarlo { seed, draws } => ("monte_carlo".to_string(), Some(seed), Some(draws)),
    };
    Paired {
        blocks: n,
        geo_mean_ratio: Some(r.mean.exp()),
        p: r.p,
        enumeration,
        seed,
        draws,
        interval,
        alpha,
        family_size: m,
        verdict,
        notes,
    }
}
