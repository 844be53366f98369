//! The two-sided Mann-Whitney U test, as SciPy's
//! `scipy.stats.mannwhitneyu(x, y, alternative="two-sided", method="auto")`
//! computes it.

use super::normal;

/// Which null distribution gave the p-value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// The exact distribution of U (no ties, and at least one side has at most
    /// [`EXACT_MAX`] samples).
    Exact,
    /// The normal approximation with tie correction and continuity correction.
    Asymptotic,
}

impl Method {
    /// `exact` or `asymptotic`.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Exact => "exact",
            Method::Asymptotic => "asymptotic",
        }
    }
}

/// SciPy's `method="auto"` uses the exact distribution when one side has at
/// most this many samples and there are no ties.
pub const EXACT_MAX: usize = 8;

/// The result of [`mann_whitney_u`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MannWhitney {
    /// U of the first sample: its rank sum (average ranks for ties) less
    /// `n1 (n1 + 1) / 2`. SciPy's `statistic`.
    pub u1: f64,
    /// U of the second sample, `n1 n2 - u1`.
    pub u2: f64,
    /// The two-sided p-value, clipped to at most 1.
    pub p: f64,
    /// Which distribution gave `p`.
    pub method: Method,
    /// Whether any value occurs more than once in the pooled sample.
    pub ties: bool,
}

/// The two-sided test of `x` against `y`. Both must be non-empty and finite
/// (the caller checks; see `crate::rules`).
pub fn mann_whitney_u(x: &[f64], y: &[f64]) -> MannWhitney {
    let (n1, n2) = (x.len(), y.len());
    let mut pooled: Vec<(f64, bool)> =
        x.iter().map(|&v| (v, true)).chain(y.iter().map(|&v| (v, false))).collect();
    pooled.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Average ranks, and the tie term sum(t^3 - t) over groups of equal values.
    let mut r1 = 0.0;
    let mut tie_term = 0.0;
    let mut ties = false;
    let mut i = 0;
    while i < pooled.len() {
        let mut j = i + 1;
        while j < pooled.len() && pooled[j].0 == pooled[i].0 {
            j += 1;
        }
        // Ranks i+1 ..= j share their average.
        let rank = (i + 1 + j) as f64 / 2.0;
        let from_x = pooled[i..j].iter().filter(|p| p.1).count();
        r1 += rank * from_x as f64;
        let t = (j - i) as f64;
        if j - i > 1 {
            ties = true;
            tie_term += t * t * t - t;
        }
        i = j;
    }
    let (f1, f2) = (n1 as f64, n2 as f64);
    let u1 = r1 - f1 * (f1 + 1.0) / 2.0;
    let u2 = f1 * f2 - u1;
    let u = u1.max(u2);
    let method = if (n1 > EXACT_MAX && n2 > EXACT_MAX) || ties { Method::Asymptotic } else { Method::Exact };
    let one_sided = match method {
        Method::Exact => exact_sf(u as u64, n1.min(n2), n1.max(n2)),
        Method::Asymptotic => {
            let mu = f1 * f2 / 2.0;
            let n = f1 + f2;
            let s = (f1 * f2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)))).sqrt();
            let z = (u - mu - 0.5) / s;
            normal::sf(z)
        }
    };
    let p = (2.0 * one_sided).clamp(0.0, 1.0);
    MannWhitney { u1, u2, p, method, ties }
}

/// `P(U >= k)` under the null for samples of `m <= n` values without ties.
///
/// The number of orderings of `m` x's and `n` y's in which U equals `u`
/// follows `f(i, j, u) = f(i - 1, j, u - j) + f(i, j - 1, u)`; built up over
/// `j` with additions only, so counts carry no cancellation error.
fn exact_sf(k: u64, m: usize, n: usize) -> f64 {
    let counts = u_counts(m, n);
    let total: f64 = counts.iter().sum();
    let k = k as usize;
    if k >= counts.len() {
        return 0.0;
    }
    // Sum the upper tail from its small end for accuracy.
    let tail: f64 = counts[k..].iter().rev().sum();
    tail / total
}

/// Counts of the orderings by U, for `u` in `0..=m*n`.
fn u_counts(m: usize, n: usize) -> Vec<f64> {
    // poly[i] holds f(i, j, .) for the current j; f(0, j, .) = [1].
    let mut poly: Vec<Vec<f64>> = (0..=m).map(|i| if i == 0 { vec![1.0] } else { vec![0.0] }).collect();
    // f(i, 0, .) = [1] as well: no y, U = 0.
    for p in poly.iter_mut() {
        p[0] = 1.0;
    }
    for j in 1..=n {
        for i in 1..=m {
            let (before, rest) = poly.split_at_mut(i);
            let prev = &before[i - 1];
            let cur = &mut rest[0];
            cur.resize(i * j + 1, 0.0);
            for (u, &c) in prev.iter().enumerate() {
                cur[u + j] += c;
            }
        }
    }
    poly.pop().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counts_of_two_against_two_are_the_gaussian_binomial() {
        // [4 choose 2]_q = 1 + q + 2q^2 + q^3 + q^4
        assert_eq!(u_counts(2, 2), vec![1.0, 1.0, 2.0, 1.0, 1.0]);
        assert_eq!(u_counts(1, 3), vec![1.0; 4]);
    }

    #[test]
    fn five_against_five_separated_gives_the_smallest_exact_p() {
        let r = mann_whitney_u(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]);
        assert_eq!(r.method, Method::Exact);
        assert!((r.p - 2.0 / 252.0).abs() < 1e-15);
    }
}
