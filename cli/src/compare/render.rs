//! The comparison as a terminal table, a Markdown PR comment, or JSON.

use std::fmt::Write as _;

use trace_compare::{GroupReport, Kind, Report, Row, Verdict};

/// The output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for a terminal.
    Table,
    /// One Markdown table, verdicts first, the statistics folded below it.
    Markdown,
    /// The versioned JSON report.
    Json,
}

/// The report in `format`, ending in a newline.
pub fn render(report: &Report, format: Format) -> String {
    match format {
        Format::Table => table(report),
        Format::Markdown => markdown(report),
        Format::Json => {
            let mut s =
                serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
            s.push('\n');
            s
        }
    }
}

/// A value in the metric's unit, for people.
pub(crate) fn value(kind: Kind, v: f64) -> String {
    match kind {
        Kind::Time if v.abs() >= 100.0 => format!("{v:.1} ms"),
        Kind::Time => format!("{v:.2} ms"),
        Kind::Memory => format!("{:.1} MiB", v / 1024.0),
        Kind::Instructions => format!("{v:.4e}"),
        Kind::Work if v.fract() == 0.0 => format!("{v:.0}"),
        Kind::Work => format!("{v:.1}"),
    }
}

fn median(kind: Kind, s: &Option<trace_compare::stats::Spread>) -> String {
    s.map_or("-".to_string(), |s| value(kind, s.median))
}

/// A p-value for people: four decimals, or two significant digits when tiny.
fn p_value(p: f64) -> String {
    if p >= 1e-4 {
        format!("{p:.4}")
    } else {
        format!("{p:.1e}")
    }
}

pub(crate) fn change(row: &Row) -> String {
    row.change_pct.map_or("-".to_string(), |c| format!("{c:+.1}%"))
}

/// What the verdict rests on, in one line.
pub(crate) fn detail(row: &Row, paired: bool) -> String {
    let mut parts = Vec::new();
    if let Some((b, h)) = row.work {
        parts.push(if b == h {
            format!("same work: {} both", value(row.kind, b))
        } else {
            format!("work changed: {} -> {}", value(row.kind, b), value(row.kind, h))
        });
    }
    if let Some(p) = &row.paired {
        let ratio = p.geo_mean_ratio.map_or("-".into(), |r| format!("{r:.4}"));
        let interval = p.interval.map_or("unbounded".into(), |(lo, hi)| format!("[{lo:.4}, {hi:.4}]"));
        parts.push(format!(
            "ratio {ratio}, {:.0}% family interval (m={}) {interval}, sign-flip p={} ({})",
            100.0 * (1.0 - p.alpha),
            p.family_size,
            p_value(p.p),
            p.enumeration
        ));
        parts.extend(p.notes.iter().cloned());
    }
    if let Some(u) = &row.unpaired {
        let head = if paired { format!("unpaired: {}, ", u.verdict.as_str()) } else { String::new() };
        parts.push(format!(
            "{head}U={} p={} ({}), median diff {} vs larger IQR {}",
            u.u,
            p_value(u.p),
            u.method,
            value(row.kind, u.median_diff),
            value(row.kind, u.larger_iqr)
        ));
        parts.extend(u.notes.iter().cloned());
    }
    if row.verdict == Verdict::TooFewSamples {
        let n = |s: &Option<trace_compare::stats::Spread>| s.map_or(0, |s| s.n);
        parts.push(format!("{} v {} samples; at least 3 a side are needed", n(&row.base), n(&row.head)));
    }
    parts.join("; ")
}

pub(crate) fn header(report: &Report) -> String {
    let rule = if let Some(f) = report.family.filter(|_| report.paired) {
        let size = if f.declared {
            format!("m={} declared", f.size)
        } else {
            format!("m={}, the timed comparisons made", f.size)
        };
        let warning = if f.undersized() {
            format!(
                "; WARNING: the report makes {} timed comparisons: the level holds over {} rows chosen \
                 in advance (the gated ones), not over every row",
                f.timed_comparisons, f.size
            )
        } else {
            String::new()
        };
        format!(
            "paired rule (randomized blocks; Bonferroni family of {size}, at {} family-wise{warning})",
            report.options.alpha_paired
        )
    } else {
        format!("unpaired rule (Mann-Whitney U at {} and the IQR)", report.options.alpha_unpaired)
    };
    let side = |s: &trace_compare::SideInfo| {
        if s.label == s.source {
            format!("`{}`", s.label)
        } else {
            format!("`{}` ({})", s.label, s.source)
        }
    };
    format!("base {} vs head {}: {rule}", side(&report.base), side(&report.head))
}

fn table(report: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", header(report));
    for g in &report.groups {
        let _ = writeln!(s, "\n== {} ==", g.name);
        for n in &g.notes {
            let _ = writeln!(s, "  {n}");
        }
        if !g.invalid.is_empty() {
            let _ = writeln!(s, "  INVALID MEASUREMENT: not a timing");
            for why in &g.invalid {
                let _ = writeln!(s, "    {why}");
            }
            continue;
        }
        let cells: Vec<[String; 6]> = g
            .rows
            .iter()
            .map(|r| {
                [
                    r.metric.clone(),
                    median(r.kind, &r.base),
                    median(r.kind, &r.head),
                    change(r),
                    r.verdict.as_str().to_string(),
                    detail(r, report.paired),
                ]
            })
            .collect();
        let titles = ["metric", "base", "head", "change", "verdict", "detail"];
        let mut width = titles.map(str::len);
        for c in &cells {
            for (w, v) in width.iter_mut().zip(c.iter()) {
                *w = (*w).max(v.chars().count());
            }
        }
        let line = |s: &mut String, c: [&str; 6]| {
            let _ = writeln!(
                s,
                "  {:<w0$}  {:>w1$}  {:>w2$}  {:>w3$}  {:<w4$}  {}",
                c[0],
                c[1],
                c[2],
                c[3],
                c[4],
                c[5],
                w0 = width[0],
                w1 = width[1],
                w2 = width[2],
                w3 = width[3],
                w4 = width[4]
            );
        };
        line(&mut s, titles);
        for c in &cells {
            line(&mut s, [&c[0], &c[1], &c[2], &c[3], &c[4], &c[5]]);
        }
    }
    s
}

/// Report order: what needs attention first.
pub(crate) fn severity(v: Verdict) -> u8 {
    match v {
        Verdict::Regressed | Verdict::RegressionDetected => 1,
        Verdict::Improved | Verdict::ImprovementDetected => 2,
        Verdict::Increased | Verdict::Decreased => 3,
        Verdict::InstrumentationChange => 4,
        Verdict::Incomparable | Verdict::TooFewSamples => 5,
        Verdict::Inconclusive => 6,
        Verdict::Unchanged => 7,
    }
}

/// A Markdown table cell: pipes escaped, no line breaks.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn markdown(report: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "**cabin-trace compare**: {}\n", cell(&header(report)));
    let _ = writeln!(s, "| verdict | scenario | metric | base | head | change |");
    let _ = writeln!(s, "| --- | --- | --- | ---: | ---: | ---: |");
    let mut rows: Vec<(&GroupReport, &Row)> = Vec::new();
    for g in &report.groups {
        if !g.invalid.is_empty() {
            let _ = writeln!(
                s,
                "| **INVALID MEASUREMENT** | {} | - | - | - | {} |",
                cell(&g.name),
                cell(&g.invalid.join("; "))
            );
        }
        rows.extend(g.rows.iter().map(|r| (g, r)));
    }
    rows.sort_by_key(|(_, r)| severity(r.verdict));
    for (g, r) in &rows {
        let verdict = if severity(r.verdict) <= 2 {
            format!("**{}**", r.verdict.as_str())
        } else {
            r.verdict.as_str().to_string()
        };
        let _ = writeln!(
            s,
            "| {verdict} | {} | {} | {} | {} | {} |",
            cell(&g.name),
            cell(&r.metric),
            median(r.kind, &r.base),
            median(r.kind, &r.head),
            change(r)
        );
    }
    let _ = writeln!(s, "\n<details><summary>Statistics of every row</summary>\n");
    let _ = writeln!(s, "| scenario | metric | base median [Q1, Q3] | head median [Q1, Q3] | detail |");
    let _ = writeln!(s, "| --- | --- | ---: | ---: | --- |");
    let spread = |kind: Kind, sp: &Option<trace_compare::stats::Spread>| {
        sp.map_or("-".to_string(), |x| {
            format!("{} [{}, {}], n={}", value(kind, x.median), value(kind, x.q1), value(kind, x.q3), x.n)
        })
    };
    for g in &report.groups {
        for n in &g.notes {
            let _ = writeln!(s, "| {} | - | - | - | {} |", cell(&g.name), cell(n));
        }
        for r in &g.rows {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                cell(&g.name),
                cell(&r.metric),
                spread(r.kind, &r.base),
                spread(r.kind, &r.head),
                cell(&detail(r, report.paired))
            );
        }
    }
    let _ = writeln!(s, "\n</details>");
    s
}
