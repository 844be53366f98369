//! The paired randomization test: a two-sided sign-flip permutation test over
//! the log-ratios of randomized blocks, and the simultaneous interval found by
//! inverting it.
//!
//! Under the null hypothesis (no effect) each block's log-ratio is as likely
//! to have either sign, so the observed sum of log-ratios is compared with the
//! sums under all `2^n` sign assignments. Flipping the signs of a set `F`
//! moves the sum below the observed one exactly when the mean of `F`'s values
//! exceeds the shift tested, so the test inverts into the subset means
//! (Hartigan 1969): with the `2^n - 1` means of the non-empty subsets sorted,
//! `M_(k) <= shift <= M_(N-k)` (`N = 2^n`, `k = floor(N alpha / 2)`) is the
//! interval of shifts the test does not reject at `alpha`.

use super::rng::SplitMix64;

/// Up to this many blocks the p-value and the interval are exact: every sign
/// assignment (every subset) is enumerated. Beyond, both come from
/// [`MONTE_CARLO_DRAWS`] random ones drawn from a recorded seed.
pub const EXACT_MAX_BLOCKS: usize = 20;

/// Random sign assignments (subsets) drawn beyond [`EXACT_MAX_BLOCKS`].
pub const MONTE_CARLO_DRAWS: usize = 200_000;

/// How the p-value and the interval were computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enumeration {
    /// Over all `2^n` sign assignments.
    Exact,
    /// Over random sign assignments drawn from this seed.
    MonteCarlo {
        /// The generator's seed ([`SplitMix64`]).
        seed: u64,
        /// How many were drawn.
        draws: usize,
    },
}

/// The result of [`sign_flip`].
#[derive(Clone, Debug, PartialEq)]
pub struct SignFlip {
    /// How many blocks (log-ratios).
    pub n: usize,
    /// The mean log-ratio; `exp` of it is the geometric mean of the ratios.
    pub mean: f64,
    /// The two-sided p-value: the share of sign assignments whose sum is at
    /// least as far from zero as the observed one (the observed counted).
    pub p: f64,
    /// The interval of mean log-ratios not rejected at the family's level,
    /// `None` when the blocks are too few for it to be bounded.
    pub interval: Option<(f64, f64)>,
    /// `k = floor(2^n alpha / (2 m))`: the rank of the interval's ends.
    pub k: u64,
    /// How `p` and `interval` were computed.
    pub enumeration: Enumeration,
}

/// The smallest two-sided p-value `n` blocks can give: `2 / 2^n`.
pub fn smallest_p(n: usize) -> f64 {
    2.0 / (n as f64).exp2()
}

/// The sign-flip test of `d` (finite log-ratios, non-empty; the caller
/// checks) and its interval at `alpha` for a family of `family` comparisons
/// (Bonferroni: each at `alpha / family`). `seed` drives the Monte Carlo
/// beyond [`EXACT_MAX_BLOCKS`] and is unused below it.
pub fn sign_flip(d: &[f64], alpha: f64, family: u32, seed: u64) -> SignFlip {
    let n = d.len();
    let observed: f64 = d.iter().sum();
    // Sums that differ from the observed one by rounding alone count as equal.
    let scale: f64 = d.iter().map(|v| v.abs()).sum();
    let threshold = observed.abs() - 1e-12 * scale;
    let mean = observed / n as f64;
    if n <= EXACT_MAX_BLOCKS {
        let total = 1u64 << n;
        let mut extreme = 0u64;
        let mut means = Vec::with_capacity(total as usize - 1);
        for mask in 0..total {
            let (sum, subset, size) = flipped(d, |i| mask >> i & 1 == 1);
            if sum.abs() >= threshold {
                extreme += 1;
            }
            if size > 0 {
                means.push(subset / size as f64);
            }
        }
        let (interval, k) = invert(&mut means, total as f64, alpha, family);
        SignFlip { n, mean, p: extreme as f64 / total as f64, interval, k, enumeration: Enumeration::Exact }
    } else {
        let mut rng = SplitMix64::new(seed);
        let draws = MONTE_CARLO_DRAWS;
        let mut extreme = 0u64;
        let mut means = Vec::with_capacity(draws);
        let mut bits = Vec::with_capacity(n);
        for _ in 0..draws {
            bits.clear();
            bits.extend((0..n).map(|_| rng.next_u64() >> 63 == 1));
            let (sum, subset, size) = flipped(d, |i| bits[i]);
            if sum.abs() >= threshold {
                extreme += 1;
            }
            if size > 0 {
                means.push(subset / size as f64);
            }
        }
        // The observed assignment counts as one of the draws.
        let p = (extreme + 1) as f64 / (draws + 1) as f64;
        let (interval, k) = invert(&mut means, draws as f64 + 1.0, alpha, family);
        SignFlip { n, mean, p, interval, k, enumeration: Enumeration::MonteCarlo { seed, draws } }
    }
}

/// For the sign assignment that flips the elements `flip` selects: the signed
/// sum, and the sum and size of the flipped subset.
fn flipped(d: &[f64], flip: impl Fn(usize) -> bool) -> (f64, f64, usize) {
    let (mut sum, mut subset, mut size) = (0.0, 0.0, 0);
    for (i, &v) in d.iter().enumerate() {
        if flip(i) {
            sum -= v;
            subset += v;
            size += 1;
        } else {
            sum += v;
        }
    }
    (sum, subset, size)
}

/// `[M_(k), M_(N-k)]` of the sorted subset means (1-based), with
/// `k = floor(N alpha / (2 family))`; `None` when `k = 0`.
fn invert(means: &mut [f64], total: f64, alpha: f64, family: u32) -> (Option<(f64, f64)>, u64) {
    let k = (total * alpha / (2.0 * f64::from(family))).floor() as u64;
    if k == 0 || means.is_empty() {
        return (None, k);
    }
    means.sort_by(f64::total_cmp);
    let last = means.len() as u64; // N - 1 means, so M_(N-k) is index N-k-1 = last-k
    let lo = means[(k - 1) as usize];
    let hi = means[(last - k) as usize];
    (Some((lo, hi)), k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn six_blocks_all_slower_give_the_smallest_p() {
        let d = [0.1, 0.2, 0.15, 0.12, 0.3, 0.05];
        let r = sign_flip(&d, 0.05, 1, 0);
        assert_eq!(r.p, smallest_p(6));
        // k = floor(64 * 0.05 / 2) = 1: the smallest and largest subset means.
        assert_eq!(r.k, 1);
        assert_eq!(r.interval, Some((0.05, 0.3)));
    }

    #[test]
    fn five_blocks_cannot_bound_the_interval_at_five_percent() {
        let r = sign_flip(&[0.1; 5], 0.05, 1, 0);
        assert_eq!((r.k, r.interval), (0, None));
    }
}
