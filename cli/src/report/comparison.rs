//! The report of a comparison: the verdicts first (INVALID MEASUREMENT
//! reasons first of all), then per metric both sides' samples as points with
//! their median and interquartile range, and the paired ratios with the
//! family's interval.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use trace_compare::{Metric, Report, Row, Side, Verdict};

use super::page::Page;
use super::svg::{self, esc, SideSamples, Spread};
use crate::compare::render::{change, detail, header, severity, value};

/// One comparison, with the sides it was made from when they are known (a
/// `samples.json` has every sample; a JSON report only the statistics).
pub struct Compared {
    /// The comparison.
    pub report: Report,
    /// Its two sides, when known.
    pub sides: Option<(Side, Side)>,
}

fn verdict_class(v: Verdict) -> &'static str {
    match v {
        Verdict::Regressed | Verdict::RegressionDetected => "regression",
        Verdict::Improved | Verdict::ImprovementDetected => "improvement",
        _ => "",
    }
}

/// The page for one or more comparisons of one session (base against each
/// head).
pub fn page(title: &str, all: &[Compared]) -> Page {
    let mut p = Page::new(title);
    let invalid: Vec<String> = all
        .iter()
        .flat_map(|c| &c.report.groups)
        .filter(|g| !g.invalid.is_empty())
        .flat_map(|g| g.invalid.iter().map(move |why| format!("{}: {why}", g.name)))
        .collect();
    if !invalid.is_empty() {
        let mut body = String::from(
            "<p class=\"invalid\">INVALID MEASUREMENT: these scenarios are not timings; a run failed or a \
             check did not hold.</p><ul>",
        );
        for why in invalid.iter().collect::<std::collections::BTreeSet<_>>() {
            let _ = write!(body, "<li class=\"invalid-reason\">{}</li>", esc(why));
        }
        body.push_str("</ul>");
        p.section("invalid", "INVALID MEASUREMENT", &body);
    }

    let mut body = String::new();
    for c in all {
        verdict_table(&mut body, &c.report);
    }
    p.section("verdicts", "Verdicts", &body);

    let mut body = String::new();
    for c in all {
        metrics(&mut body, c);
    }
    p.section("metrics", "Every metric", &body);
    p
}

fn verdict_table(s: &mut String, r: &Report) {
    let _ = write!(s, "<p class=\"heading\">{}</p>", esc(&header(r)));
    let _ = write!(
        s,
        "<table class=\"verdicts\"><tr><th>verdict</th><th>scenario</th><th>metric</th><th>{}</th><th>{}</th>\
         <th>change</th></tr>",
        esc(&r.base.label),
        esc(&r.head.label)
    );
    let mut rows: Vec<(&str, &Row)> =
        r.groups.iter().flat_map(|g| g.rows.iter().map(move |row| (g.name.as_str(), row))).collect();
    rows.sort_by_key(|(_, row)| severity(row.verdict));
    let median = |row: &Row, s: &Option<trace_compare::stats::Spread>| {
        s.map_or("-".to_string(), |s| value(row.kind, s.median))
    };
    for (group, row) in rows {
        let _ = write!(
            s,
            "<tr class=\"verdict-row\"><td class=\"{}\">{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            verdict_class(row.verdict),
            esc(row.verdict.as_str()),
            esc(group),
            esc(&row.metric),
            median(row, &row.base),
            median(row, &row.head),
            change(row)
        );
    }
    s.push_str("</table>");
}

/// The values of `metric` in `side`'s group `name`, by block.
fn values(side: &Side, group: &str, metric: &Metric) -> Vec<(Option<u64>, f64)> {
    side.groups.iter().find(|g| g.name == group).map(|g| g.values(metric)).unwrap_or_default()
}

fn metrics(s: &mut String, c: &Compared) {
    let r = &c.report;
    for g in r.groups.iter().filter(|g| g.invalid.is_empty()) {
        let _ = write!(s, "<h3>{}: {} against {}</h3>", esc(&g.name), esc(&r.head.label), esc(&r.base.label));
        for row in &g.rows {
            let _ = write!(
                s,
                "<section class=\"metric\" data-scenario=\"{}\" data-metric=\"{}\"><h4>{} <span class=\"{}\">{}</span> \
                 {}</h4><p class=\"detail\">{}</p>",
                esc(&g.name),
                esc(&row.metric),
                esc(&row.metric),
                verdict_class(row.verdict),
                esc(row.verdict.as_str()),
                esc(&change(row)),
                esc(&detail(row, r.paired))
            );
            let show = |v: f64| value(row.kind, v);
            let spread = |x: &Option<trace_compare::stats::Spread>| {
                x.map(|x| Spread { median: x.median, q1: x.q1, q3: x.q3 })
            };
            let metric = Metric::new(row.metric.clone(), row.kind);
            match &c.sides {
                // A counter constant on each side: its two values say it all.
                _ if row.work.is_some() => {}
                Some((base, head)) => {
                    let bv = values(base, &g.name, &metric);
                    let hv = values(head, &g.name, &metric);
                    let (b, h): (Vec<f64>, Vec<f64>) =
                        (bv.iter().map(|v| v.1).collect(), hv.iter().map(|v| v.1).collect());
                    if !b.is_empty() || !h.is_empty() {
                        let sides = [
                            SideSamples { label: &r.base.label, values: &b, spread: spread(&row.base) },
                            SideSamples { label: &r.head.label, values: &h, spread: spread(&row.head) },
                        ];
                        s.push_str(&svg::samples(&sides, &show));
                    }
                    if let Some(pr) = &row.paired {
                        let by_block: BTreeMap<u64, f64> =
                            bv.iter().filter_map(|&(k, v)| k.map(|k| (k, v))).collect();
                        let ratios: Vec<f64> = hv
                            .iter()
                            .filter_map(|&(k, h)| k.and_then(|k| by_block.get(&k)).map(|&b| h / b))
                            .filter(|q| q.is_finite() && *q > 0.0)
                            .collect();
                        s.push_str(&svg::ratios(&ratios, pr.geo_mean_ratio, pr.interval));
                    }
                }
                None => {
                    // A JSON report holds no samples: the spreads alone.
                    let sides = [
                        SideSamples { label: &r.base.label, values: &[], spread: spread(&row.base) },
                        SideSamples { label: &r.head.label, values: &[], spread: spread(&row.head) },
                    ];
                    if row.base.is_some() || row.head.is_some() {
                        s.push_str(&svg::samples(&sides, &show));
                    }
                    if let Some(pr) = &row.paired {
                        s.push_str(&svg::ratios(&[], pr.geo_mean_ratio, pr.interval));
                    }
                }
            }
            s.push_str("</section>");
        }
    }
}
