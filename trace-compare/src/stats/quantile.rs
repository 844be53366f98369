//! Medians and interquartile ranges, computed as numpy's default percentile
//! (`method="linear"`) computes them, to the last bit.

/// The `q`-th quantile (`0.0..=1.0`) of `sorted` (ascending, finite, non-empty),
/// by linear interpolation between the closest ranks.
///
/// numpy computes the virtual index `(n - 1) * q`, then interpolates with
/// `a + (b - a) * t` below `t = 0.5` and `b - (b - a) * (1 - t)` from it on;
/// the same operations in the same order give the same bits.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    debug_assert!(!sorted.is_empty());
    let n = sorted.len();
    let virtual_index = (n - 1) as f64 * q;
    let below = virtual_index.floor();
    let t = virtual_index - below;
    let lo = (below as usize).min(n - 1);
    let hi = (lo + 1).min(n - 1);
    let (a, b) = (sorted[lo], sorted[hi]);
    let diff = b - a;
    if t >= 0.5 {
        b - diff * (1.0 - t)
    } else {
        a + diff * t
    }
}

/// Median, quartiles and interquartile range of one sample.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Spread {
    /// How many values.
    pub n: usize,
    /// The 50th percentile.
    pub median: f64,
    /// The 25th percentile.
    pub q1: f64,
    /// The 75th percentile.
    pub q3: f64,
    /// `q3 - q1`.
    pub iqr: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

impl Spread {
    /// The spread of `values` (finite, non-empty; the caller checks).
    pub fn of(values: &[f64]) -> Spread {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let q1 = quantile_sorted(&sorted, 0.25);
        let q3 = quantile_sorted(&sorted, 0.75);
        Spread {
            n: sorted.len(),
            median: quantile_sorted(&sorted, 0.5),
            q1,
            q3,
            iqr: q3 - q1,
            min: sorted[0],
            max: sorted[sorted.len() - 1],
        }
    }
}
