//! The rules' verdicts on small, hand-made samples.

use trace_compare::compare::compare_metric;
use trace_compare::rules::{paired, unpaired};
use trace_compare::{compare, ErrorKind, Group, Kind, Metric, Options, Run, Side, Verdict};

fn side(label: &str, metric: &Metric, values: &[f64], session: Option<&str>) -> Side {
    Side {
        label: label.into(),
        source: format!("{label}.json"),
        session: session.map(str::to_string),
        groups: vec![Group {
            name: "build".into(),
            runs: values
                .iter()
                .enumerate()
                .map(|(i, &v)| Run { block: Some(i as u64), values: [(metric.clone(), v)].into() })
                .collect(),
            invalid: vec![],
        }],
    }
}

fn verdict(metric: &Metric, base: &[f64], head: &[f64], paired: bool) -> Verdict {
    let s = paired.then_some("one session");
    let r =
        compare(&side("base", metric, base, s), &side("head", metric, head, s), &Options::default()).unwrap();
    r.groups[0].rows[0].verdict
}

fn wall() -> Metric {
    Metric::new("wall", Kind::Time)
}

#[test]
fn one_or_two_samples_a_side_give_too_few_samples_rather_than_a_verdict() {
    assert_eq!(verdict(&wall(), &[10.0], &[20.0], false), Verdict::TooFewSamples);
    assert_eq!(verdict(&wall(), &[10.0, 11.0], &[20.0, 21.0], false), Verdict::TooFewSamples);
    assert_eq!(verdict(&wall(), &[10.0, 11.0], &[20.0, 21.0], true), Verdict::TooFewSamples);
}

#[test]
fn identical_samples_are_unchanged_with_p_one() {
    let u = unpaired(&[5.0; 6], &[5.0; 6], Kind::Time, &Options::default());
    assert_eq!((u.verdict, u.p), (Verdict::Unchanged, 1.0));
}

#[test]
fn a_clear_slowdown_past_the_policy_is_regressed_and_a_small_one_increased() {
    let base = [100.0, 101.0, 99.5, 100.5, 100.2, 99.8];
    let slow: Vec<f64> = base.iter().map(|v| v + 20.0).collect();
    assert_eq!(verdict(&wall(), &base, &slow, false), Verdict::Regressed);
    // +2.5 ms is real (ranks separate, past the IQR) but under 5% of 100 ms.
    let bit: Vec<f64> = [102.4, 102.6, 102.5, 102.7, 102.3, 102.8].into();
    assert_eq!(verdict(&wall(), &base, &bit, false), Verdict::Increased);
    assert_eq!(verdict(&wall(), &slow, &base, false), Verdict::Improved);
}

#[test]
fn a_difference_inside_the_larger_iqr_is_not_real_even_when_ranks_separate() {
    // Ranks separate completely, but head's spread is wider than the shift.
    let base = [10.0, 10.1, 10.2, 10.3, 10.4, 10.5];
    let head = [10.6, 11.0, 14.0, 15.0, 30.0, 40.0];
    let u = unpaired(&base, &head, Kind::Time, &Options::default());
    assert!(u.p < 0.01);
    assert!(!u.real, "median diff {} against IQR {}", u.median_diff, u.larger_iqr);
}

#[test]
fn five_blocks_can_never_reach_five_percent_and_the_report_says_so() {
    let p = paired(&[(1.0, 2.0); 5], &Options::default());
    assert_eq!(p.verdict, Verdict::Inconclusive);
    assert!(p.notes.iter().any(|n| n.contains("can never reach significance")), "{:?}", p.notes);
    let six = paired(
        &[(1.0, 2.0), (1.0, 2.1), (1.0, 1.9), (1.0, 2.2), (1.0, 2.05), (1.0, 2.3)],
        &Options::default(),
    );
    assert_eq!(six.verdict, Verdict::RegressionDetected);
    let (lo, hi) = six.interval.unwrap();
    assert!(lo > 1.0 && hi < 2.31, "{lo} {hi}");
}

#[test]
fn a_family_of_three_at_one_percent_needs_ten_blocks() {
    let opts = Options { alpha_paired: 0.01, family_size: 3, ..Options::default() };
    let nine: Vec<(f64, f64)> = (0..9).map(|i| (1.0, 1.5 + i as f64 / 100.0)).collect();
    assert_eq!(paired(&nine, &opts).verdict, Verdict::Inconclusive);
    let ten: Vec<(f64, f64)> = (0..10).map(|i| (1.0, 1.5 + i as f64 / 100.0)).collect();
    assert_eq!(paired(&ten, &opts).verdict, Verdict::RegressionDetected);
}

#[test]
fn past_twenty_blocks_the_paired_test_is_a_monte_carlo_with_its_seed_recorded() {
    let pairs: Vec<(f64, f64)> = (0..24).map(|i| (1.0, if i % 3 == 0 { 0.99 } else { 1.05 })).collect();
    let opts = Options { seed: 42, ..Options::default() };
    let p = paired(&pairs, &opts);
    assert_eq!((p.enumeration.as_str(), p.seed, p.draws), ("monte_carlo", Some(42), Some(200_000)));
    assert_eq!(p, paired(&pairs, &opts), "the same seed replays the same draws");
    assert_eq!(p.verdict, Verdict::RegressionDetected);
}

#[test]
fn a_work_counter_that_changes_is_a_change_of_work_whatever_the_clock_says() {
    let spans = Metric::new("count:resolve_package", Kind::Work);
    assert_eq!(verdict(&spans, &[200.0; 4], &[400.0; 4], false), Verdict::Regressed);
    assert_eq!(verdict(&spans, &[200.0; 4], &[400.0; 4], true), Verdict::RegressionDetected);
    assert_eq!(verdict(&spans, &[200.0; 4], &[199.0; 4], false), Verdict::Improved);
    assert_eq!(verdict(&spans, &[200.0; 4], &[200.0; 4], true), Verdict::Unchanged);
}

#[test]
fn a_phase_on_one_side_only_is_an_instrumentation_change_not_a_regression() {
    let phase = Metric::new("phase:link", Kind::Time);
    let row =
        compare_metric(&phase, &[], &[(None, 3.0), (None, 3.1), (None, 2.9)], false, &Options::default());
    assert_eq!(row.verdict, Verdict::InstrumentationChange);
    let rss = Metric::new("peak_rss", Kind::Memory);
    let row = compare_metric(&rss, &[(None, 3.0)], &[], false, &Options::default());
    assert_eq!(row.verdict, Verdict::Incomparable);
}

#[test]
fn non_finite_samples_are_refused_with_an_error_naming_the_metric() {
    let base = side("base", &wall(), &[1.0, f64::NAN, 2.0], None);
    let head = side("head", &wall(), &[1.0, 2.0, 3.0], None);
    let e = compare(&base, &head, &Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NonFinite);
    let text = e.to_string();
    assert!(
        text.contains("build: base: wall[1]") && text.contains("NaN") && text.contains("finite"),
        "{text}"
    );
    let inf = side("head", &wall(), &[1.0, f64::INFINITY, 3.0], None);
    assert_eq!(compare(&head, &inf, &Options::default()).unwrap_err().kind(), ErrorKind::NonFinite);
}

#[test]
fn an_invalid_group_has_no_timing_rows() {
    let mut base = side("base", &wall(), &[1.0, 2.0, 3.0], None);
    base.groups[0].invalid.push("head run of block 2: `ninja_actions == 0` failed (found 8)".into());
    let head = side("head", &wall(), &[1.0, 2.0, 3.0], None);
    let r = compare(&base, &head, &Options::default()).unwrap();
    assert!(r.has_invalid());
    assert!(r.groups[0].rows.is_empty());
}
