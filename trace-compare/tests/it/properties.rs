//! Properties: swapping the sides flips the verdict; scaling every sample by
//! one constant leaves the p-values unchanged.

use proptest::prelude::*;
use trace_compare::rules::{paired, unpaired, Options, Policy};
use trace_compare::{Kind, Verdict};

/// Whole numbers (as µs timings are), so that scaling by an integer is exact.
fn sample() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(1u32..2000, 3..14).prop_map(|v| v.into_iter().map(f64::from).collect())
}

fn no_policy() -> Options {
    Options {
        policy: Policy {
            min_effect_pct: 0.0,
            floor_time_ms: 0.0,
            floor_memory_kib: 0.0,
            floor_instructions: 0.0,
        },
        ..Options::default()
    }
}

proptest! {
    #[test]
    fn swapping_base_and_head_flips_the_unpaired_verdict(a in sample(), b in sample()) {
        let opts = no_policy();
        let ab = unpaired(&a, &b, Kind::Time, &opts);
        let ba = unpaired(&b, &a, Kind::Time, &opts);
        prop_assert_eq!(ab.verdict.swapped(), ba.verdict);
        prop_assert!((ab.p - ba.p).abs() <= 1e-15);
        // With the default policy, whether a difference is real and its
        // direction do not depend on the baseline either.
        let d = Options::default();
        let (x, y) = (unpaired(&a, &b, Kind::Time, &d), unpaired(&b, &a, Kind::Time, &d));
        prop_assert_eq!(x.real, y.real);
        prop_assert_eq!(x.median_diff, -y.median_diff);
    }

    #[test]
    fn swapping_base_and_head_flips_the_paired_verdict(
        pairs in prop::collection::vec((1u32..1000, 1u32..1000), 1..12)
    ) {
        let ab: Vec<(f64, f64)> = pairs.iter().map(|&(b, h)| (f64::from(b), f64::from(h))).collect();
        let ba: Vec<(f64, f64)> = ab.iter().map(|&(b, h)| (h, b)).collect();
        let (x, y) = (paired(&ab, &Options::default()), paired(&ba, &Options::default()));
        prop_assert_eq!(x.verdict.swapped(), y.verdict);
        prop_assert_eq!(x.p, y.p);
    }

    #[test]
    fn scaling_every_sample_by_a_constant_leaves_p_unchanged(a in sample(), b in sample(), c in 2u32..1000) {
        let c = f64::from(c);
        let scale = |v: &[f64]| v.iter().map(|x| x * c).collect::<Vec<_>>();
        let opts = Options::default();
        let plain = unpaired(&a, &b, Kind::Time, &opts);
        let scaled = unpaired(&scale(&a), &scale(&b), Kind::Time, &opts);
        prop_assert_eq!(plain.p, scaled.p);
        prop_assert_eq!(plain.u, scaled.u);
        let n = a.len().min(b.len());
        let pairs: Vec<(f64, f64)> = a.iter().zip(&b).take(n).map(|(&x, &y)| (x, y)).collect();
        let scaled_pairs: Vec<(f64, f64)> = pairs.iter().map(|&(x, y)| (x * c, y * c)).collect();
        let (p1, p2) = (paired(&pairs, &opts), paired(&scaled_pairs, &opts));
        prop_assert_eq!(p1.p, p2.p);
        prop_assert_eq!(p1.verdict, p2.verdict);
    }
}

#[test]
fn an_unpaired_regression_swapped_is_an_improvement() {
    let a = [10.0, 10.1, 10.2, 10.0, 10.1, 10.3];
    let b = [20.0, 20.1, 20.2, 20.0, 20.1, 20.3];
    let opts = Options::default();
    assert_eq!(unpaired(&a, &b, Kind::Time, &opts).verdict, Verdict::Regressed);
    assert_eq!(unpaired(&b, &a, Kind::Time, &opts).verdict, Verdict::Improved);
}
