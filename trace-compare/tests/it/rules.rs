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
    let opts = Options { alpha_paired: 0.01, family_size: Some(3), ..Options::default() };
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

/// One session's two sides with `metrics` (name, kind, base value, head value)
/// in each of 6 blocks, every head value 1.5 times slower on odd blocks.
fn session(metrics: &[(&str, Kind, f64)]) -> (Side, Side) {
    let side = |label: &str, scale: f64| Side {
        label: label.into(),
        source: "samples.json".into(),
        session: Some("one session".into()),
        groups: vec![Group {
            name: "build".into(),
            runs: (0..6u64)
                .map(|b| Run {
                    block: Some(b),
                    values: metrics
                        .iter()
                        .map(|&(n, k, v)| {
                            let jitter = if k == Kind::Work { 0.0 } else { b as f64 * 0.01 };
                            (Metric::new(n, k), v * scale + jitter)
                        })
                        .collect(),
                })
                .collect(),
            invalid: vec![],
        }],
    };
    (side("base", 1.0), side("head", 1.5))
}

#[test]
fn a_paired_report_s_family_is_every_timed_row_it_tests_and_work_counters_are_not_in_it() {
    let (base, head) = session(&[
        ("wall", Kind::Time, 10.0),
        ("peak_rss", Kind::Memory, 2048.0),
        ("phase:link", Kind::Time, 3.0),
        ("count:link", Kind::Work, 1.0),
    ]);
    let r = compare(&base, &head, &Options::default()).unwrap();
    let family = r.family.expect("a paired report has a family");
    assert_eq!((family.size, family.timed_comparisons, family.declared), (3, 3, false));
    assert_eq!(r.options.family_size, Some(3));
    assert!(r.groups[0].rows.iter().filter_map(|row| row.paired.as_ref()).all(|p| p.family_size == 3));
    // Six blocks reach 2/64 = 0.031, above 0.05/3: no timed row can be detected,
    // while the work counter's change (1 -> 1.5) is a change of work whatever the family.
    for row in &r.groups[0].rows {
        assert_eq!(row.verdict.is_regression(), row.kind == Kind::Work, "{row:#?}");
    }

    let declared = Options { family_size: Some(1), ..Options::default() };
    let r = compare(&base, &head, &declared).unwrap();
    let family = r.family.unwrap();
    assert_eq!((family.size, family.declared, family.undersized()), (1, true, true));
    assert_eq!(r.groups[0].rows[0].verdict, Verdict::RegressionDetected, "wall, at a family of one");
}

#[test]
fn an_unpaired_report_has_no_family() {
    let base = side("base", &wall(), &[1.0, 2.0, 3.0], None);
    let r = compare(&base, &base, &Options::default()).unwrap();
    assert_eq!(r.family, None);
}

#[test]
fn a_work_counter_that_varies_between_paired_runs_is_shown_but_decides_nothing() {
    let (base, mut head) = session(&[("wall", Kind::Time, 10.0)]);
    let cache_hits = Metric::new("field:fetch.hits", Kind::Work);
    for (side, scale) in [(&mut head, 3.0)] {
        for (i, run) in side.groups[0].runs.iter_mut().enumerate() {
            run.values.insert(cache_hits.clone(), scale * (10.0 + i as f64));
        }
    }
    let mut base = base;
    for (i, run) in base.groups[0].runs.iter_mut().enumerate() {
        run.values.insert(cache_hits.clone(), 10.0 + i as f64);
    }
    let r = compare(&base, &head, &Options::default()).unwrap();
    assert_eq!(r.family.unwrap().size, 1, "the counter is not in the family");
    let row = r.groups[0].rows.iter().find(|row| row.metric == "field:fetch.hits").unwrap();
    assert_eq!(row.verdict, Verdict::Inconclusive);
    assert!(row.paired.as_ref().unwrap().notes.iter().any(|n| n.contains("outside the family")));
}

#[test]
fn a_gate_fails_on_its_primary_metrics_and_on_invalid_measurements_only() {
    let (base, head) = session(&[("wall", Kind::Time, 10.0), ("phase:link", Kind::Time, 3.0)]);
    let one = Options { family_size: Some(1), ..Options::default() };
    let r = compare(&base, &head, &one).unwrap();
    assert!(r.has_regression());
    let wall = vec!["wall".to_string()];
    assert_eq!(r.gate_failures(&wall), vec!["build: wall: regression detected".to_string()]);
    let link_only = vec!["cpu_user".to_string()];
    assert!(r.gate_failures(&link_only).is_empty(), "phase:link is not gated on");
    assert_eq!(r.missing_metrics(&link_only), vec!["cpu_user"]);

    let (mut base, mut head) = session(&[("wall", Kind::Time, 10.0)]);
    for s in [&mut base, &mut head] {
        s.groups[0].invalid.push("a run of block 0: `exit_status == 0` failed (found 1)".into());
    }
    let r = compare(&base, &head, &Options::default()).unwrap();
    let failures = r.gate_failures(&wall);
    assert_eq!(failures.len(), 1);
    assert!(failures[0].contains("INVALID MEASUREMENT"), "{failures:?}");
}
