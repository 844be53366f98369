//! The report's charts, written as SVG text: time lines of slices in lanes,
//! bars, a line over time, samples as points with their median and
//! interquartile range, and paired ratios with their interval.
//!
//! Every plotted mark carries a class (`slice`, `bar`, `sample`, `ratio`,
//! ...) and a `<title>` (the browser shows it on hover), so that a reader can
//! check a value and a test can count the marks against the input.

use std::fmt::Write as _;

/// The width of every chart, in SVG units (the page scales it to fit).
pub const WIDTH: f64 = 960.0;
/// The column of lane and row names on the left.
const LABELS: f64 = 170.0;
/// Right margin.
const RIGHT: f64 = 16.0;
/// Height of one row of slices.
const ROW: f64 = 18.0;
/// Height of the time axis under a chart.
const AXIS: f64 = 26.0;

/// `s` with the five characters that HTML and SVG text treat specially
/// replaced by entities.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A duration given in ms, for people.
pub fn ms(v: f64) -> String {
    if v == 0.0 {
        "0 ms".to_string()
    } else if v.abs() >= 1000.0 {
        format!("{:.2} s", v / 1000.0)
    } else if v.abs() >= 10.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.3} ms")
    }
}

/// A fill colour that stays the same for a name across charts.
pub fn colour(name: &str) -> String {
    // FNV-1a: a stable hash, so that a name keeps its colour between reports.
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    format!("hsl({},55%,62%)", h % 360)
}

/// A linear map from a value range onto a range of SVG coordinates.
#[derive(Clone, Copy)]
struct Scale {
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
}

impl Scale {
    fn new((lo, hi): (f64, f64), from: f64, to: f64) -> Scale {
        let hi = if hi > lo { hi } else { lo + 1.0 };
        Scale { lo, hi, from, to }
    }

    fn at(&self, v: f64) -> f64 {
        self.from + (v - self.lo) / (self.hi - self.lo) * (self.to - self.from)
    }
}

/// About `n` round tick values covering `[lo, hi]`.
fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if hi <= lo || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

fn open(s: &mut String, class: &str, height: f64) {
    let _ = write!(
        s,
        r#"<svg class="chart {class}" viewBox="0 0 {WIDTH} {height:.0}" width="{WIDTH}" height="{height:.0}" role="img" xmlns="http://www.w3.org/2000/svg">"#
    );
}

/// A horizontal axis at `y` under the plot, with ticks labelled by `label`.
fn x_axis(s: &mut String, x: Scale, y: f64, label: impl Fn(f64) -> String) {
    let _ = write!(s, r#"<line class="axis" x1="{:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}"/>"#, x.from, x.to);
    for t in ticks(x.lo, x.hi, 8) {
        let px = x.at(t);
        let _ = write!(
            s,
            r#"<line class="tick" x1="{px:.1}" x2="{px:.1}" y1="{y:.1}" y2="{:.1}"/><text class="tick" x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            y + 4.0,
            y + 16.0,
            esc(&label(t))
        );
    }
}

/// One interval on a lane: a span, an action, a test.
#[derive(Clone)]
pub struct Slice {
    /// Start, in ms from the chart's origin.
    pub start: f64,
    /// Duration, in ms.
    pub dur: f64,
    /// What it is.
    pub name: String,
    /// Its row inside the lane (nesting depth, or sub-lane).
    pub row: usize,
    /// More to say on hover (fields, thread CPU).
    pub detail: String,
}

/// A row of the time line: a thread, a sub-lane group.
pub struct Lane {
    /// Its name, shown on the left.
    pub name: String,
    /// Its slices.
    pub slices: Vec<Slice>,
}

/// Lanes of slices over `span` (ms); each slice a `rect` of class `class`.
pub fn timeline(lanes: &[Lane], span: (f64, f64), class: &str) -> String {
    let rows: Vec<usize> =
        lanes.iter().map(|l| l.slices.iter().map(|s| s.row + 1).max().unwrap_or(1)).collect();
    let height = rows.iter().map(|&r| r as f64 * ROW + 6.0).sum::<f64>() + AXIS + 4.0;
    let x = Scale::new(span, LABELS, WIDTH - RIGHT);
    let mut s = String::new();
    open(&mut s, "timeline", height);
    let mut y = 2.0;
    for (lane, &n) in lanes.iter().zip(&rows) {
        let h = n as f64 * ROW;
        let _ = write!(
            s,
            r#"<g class="lane" data-lane="{name}"><rect class="lane-bg" x="{LABELS}" y="{y:.1}" width="{:.1}" height="{h:.1}"/><text class="lane-name" x="{:.1}" y="{:.1}" text-anchor="end">{name}</text>"#,
            WIDTH - RIGHT - LABELS,
            LABELS - 6.0,
            y + 13.0,
            name = esc(&lane.name)
        );
        for sl in &lane.slices {
            let x0 = x.at(sl.start);
            let w = (x.at(sl.start + sl.dur) - x0).max(1.0);
            let top = y + sl.row as f64 * ROW + 1.0;
            let _ = write!(
                s,
                r#"<rect class="{class}" x="{x0:.2}" y="{top:.1}" width="{w:.2}" height="{:.1}" fill="{}"><title>{} ({} at {}){}</title></rect>"#,
                ROW - 2.0,
                colour(&sl.name),
                esc(&sl.name),
                ms(sl.dur),
                ms(sl.start),
                esc(&sl.detail)
            );
            // A label only where it fits (about 6.5 units a character).
            if w > 6.5 * sl.name.chars().count() as f64 + 6.0 {
                let _ = write!(
                    s,
                    r#"<text class="slice-name" x="{:.1}" y="{:.1}">{}</text>"#,
                    x0 + 3.0,
                    top + 12.0,
                    esc(&sl.name)
                );
            }
        }
        s.push_str("</g>");
        y += h + 6.0;
    }
    x_axis(&mut s, x, y, ms);
    s.push_str("</svg>");
    s
}

/// A value over time: `points` (ms, value) as one polyline of class `class`
/// (its `points` attribute holds exactly one pair per input point), drawn as
/// steps when `steps` (a count that holds until the next point).
pub fn line(points: &[(f64, f64)], span: (f64, f64), unit: &str, class: &str, steps: bool) -> String {
    let height = 150.0;
    let top = 8.0;
    let bottom = height - AXIS;
    let max = points.iter().map(|p| p.1).fold(0.0, f64::max);
    let x = Scale::new(span, LABELS, WIDTH - RIGHT);
    let y = Scale::new((0.0, if max > 0.0 { max * 1.05 } else { 1.0 }), bottom, top);
    let mut s = String::new();
    open(&mut s, "line", height);
    for t in ticks(y.lo, y.hi, 4) {
        let py = y.at(t);
        let _ = write!(
            s,
            r#"<line class="grid" x1="{LABELS}" x2="{:.1}" y1="{py:.1}" y2="{py:.1}"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{} {}</text>"#,
            WIDTH - RIGHT,
            LABELS - 6.0,
            py + 4.0,
            number(t),
            esc(unit)
        );
    }
    let mut pts = String::new();
    for &(t, v) in points {
        let _ = write!(pts, "{:.2},{:.2} ", x.at(t), y.at(v));
    }
    // The points themselves; a count is drawn as steps by a path over them.
    let stroke = if steps { r#" stroke-opacity="0""# } else { "" };
    let _ = write!(s, r#"<polyline class="{class}" fill="none"{stroke} points="{}"/>"#, pts.trim_end());
    // A few samples (one alone draws no line) are shown as dots too.
    if points.len() <= 60 {
        for &(t, v) in points {
            let _ = write!(
                s,
                r#"<circle class="{class}-point" cx="{:.2}" cy="{:.2}" r="2.5"><title>{}: {} {}</title></circle>"#,
                x.at(t),
                y.at(v),
                ms(t),
                number(v),
                esc(unit)
            );
        }
    }
    if steps && points.len() > 1 {
        let mut d = String::new();
        for (i, &(t, v)) in points.iter().enumerate() {
            let (px, py) = (x.at(t), y.at(v));
            if i == 0 {
                let _ = write!(d, "M{px:.2},{py:.2}");
            } else {
                let _ = write!(d, " H{px:.2} V{py:.2}");
            }
        }
        let _ = write!(s, r#"<path class="steps" fill="none" d="{d}"/>"#);
    }
    x_axis(&mut s, x, bottom, ms);
    s.push_str("</svg>");
    s
}

/// A number for an axis: no more digits than it needs.
fn number(v: f64) -> String {
    if v == 0.0 || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// One row of [`bars`]: a name and up to two values (ms).
pub struct BarRow {
    /// The row's name.
    pub name: String,
    /// The first value (e.g. wall).
    pub first: f64,
    /// The second value (e.g. thread CPU), when known.
    pub second: Option<f64>,
}

/// Pairs of horizontal bars per row: the first value (class `bar first`)
/// over the second (class `bar second`).
pub fn bars(rows: &[BarRow], names: (&str, &str)) -> String {
    let per = 2.0 * 12.0 + 8.0;
    let height = rows.len() as f64 * per + AXIS + 24.0;
    let max = rows.iter().map(|r| r.first.max(r.second.unwrap_or(0.0))).fold(0.0, f64::max);
    let x = Scale::new((0.0, if max > 0.0 { max * 1.02 } else { 1.0 }), LABELS, WIDTH - RIGHT - 70.0);
    let mut s = String::new();
    open(&mut s, "bars", height);
    let _ = write!(
        s,
        r#"<rect class="key first" x="{LABELS}" y="4" width="12" height="10"/><text class="key" x="{:.0}" y="13">{}</text>"#,
        LABELS + 16.0,
        esc(names.0)
    );
    if !names.1.is_empty() {
        let _ = write!(
            s,
            r#"<rect class="key second" x="{:.0}" y="4" width="12" height="10"/><text class="key" x="{:.0}" y="13">{}</text>"#,
            LABELS + 160.0,
            LABELS + 176.0,
            esc(names.1)
        );
    }
    let mut y = 22.0;
    for r in rows {
        let _ = write!(
            s,
            r#"<text class="row-name" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LABELS - 6.0,
            y + 16.0,
            esc(&r.name)
        );
        for (i, (v, which, name)) in
            [(Some(r.first), "first", names.0), (r.second, "second", names.1)].into_iter().enumerate()
        {
            let Some(v) = v else { continue };
            let top = y + i as f64 * 12.0;
            let w = (x.at(v) - LABELS).max(1.0);
            let _ = write!(
                s,
                r#"<rect class="bar {which}" x="{LABELS}" y="{top:.1}" width="{w:.1}" height="11"><title>{}: {} {}</title></rect><text class="value" x="{:.1}" y="{:.1}">{}</text>"#,
                esc(&r.name),
                esc(name),
                ms(v),
                LABELS + w + 4.0,
                top + 9.5,
                ms(v)
            );
        }
        y += per;
    }
    x_axis(&mut s, x, y, ms);
    s.push_str("</svg>");
    s
}

/// The spread of one side's samples: its median and quartiles.
pub struct Spread {
    /// The median.
    pub median: f64,
    /// The first quartile.
    pub q1: f64,
    /// The third quartile.
    pub q3: f64,
}

/// One side of [`samples`]: its label, its values and their spread.
pub struct SideSamples<'a> {
    /// The label.
    pub label: &'a str,
    /// Every sample, in the metric's unit.
    pub values: &'a [f64],
    /// Its median and quartiles.
    pub spread: Option<Spread>,
}

/// Each side's samples as points on one row (class `sample`, `data-side`),
/// with the interquartile range as a box (class `iqr`) and the median as a
/// bar (class `median`). `show` writes a value in the metric's unit.
pub fn samples(sides: &[SideSamples<'_>], show: &dyn Fn(f64) -> String) -> String {
    let per = 26.0;
    let height = sides.len() as f64 * per + AXIS + 8.0;
    let spreads = sides.iter().filter_map(|s| s.spread.as_ref()).flat_map(|s| [s.q1, s.median, s.q3]);
    let all = sides.iter().flat_map(|s| s.values.iter().copied()).chain(spreads);
    let (lo, hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    let pad = if hi > lo { (hi - lo) * 0.05 } else { lo.abs().max(1.0) * 0.05 };
    let x = Scale::new((lo - pad, hi + pad), LABELS, WIDTH - RIGHT);
    let mut s = String::new();
    open(&mut s, "samples", height);
    let mut y = 6.0;
    for side in sides {
        let mid = y + per / 2.0 - 2.0;
        let _ = write!(
            s,
            r#"<text class="row-name" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LABELS - 6.0,
            mid + 4.0,
            esc(side.label)
        );
        if let Some(sp) = &side.spread {
            let (a, b) = (x.at(sp.q1), x.at(sp.q3));
            let _ = write!(
                s,
                r#"<rect class="iqr" x="{a:.2}" y="{:.1}" width="{:.2}" height="16"><title>{}: interquartile range {} to {}</title></rect><line class="median" x1="{m:.2}" x2="{m:.2}" y1="{:.1}" y2="{:.1}"><title>{}: median {}</title></line>"#,
                mid - 8.0,
                (b - a).max(1.0),
                esc(side.label),
                show(sp.q1),
                show(sp.q3),
                mid - 10.0,
                mid + 10.0,
                esc(side.label),
                show(sp.median),
                m = x.at(sp.median)
            );
        }
        for (i, &v) in side.values.iter().enumerate() {
            let _ = write!(
                s,
                r#"<circle class="sample" data-side="{label}" cx="{:.2}" cy="{mid:.1}" r="3.5"><title>{label} run {i}: {}</title></circle>"#,
                x.at(v),
                show(v),
                label = esc(side.label)
            );
        }
        y += per;
    }
    x_axis(&mut s, x, y, show);
    s.push_str("</svg>");
    s
}

/// Paired ratios head/base (class `ratio`), their geometric mean (class
/// `geo-mean`) and the family's interval (class `interval`; when unbounded,
/// a note says so), against a line at 1 (no change).
pub fn ratios(ratios: &[f64], geo_mean: Option<f64>, interval: Option<(f64, f64)>) -> String {
    let height = 64.0 + AXIS;
    let mut lo = ratios.iter().copied().fold(1.0, f64::min);
    let mut hi = ratios.iter().copied().fold(1.0, f64::max);
    if let Some((a, b)) = interval {
        lo = lo.min(a);
        hi = hi.max(b);
    }
    let pad = ((hi - lo) * 0.08).max(0.01);
    let x = Scale::new((lo - pad, hi + pad), LABELS, WIDTH - RIGHT);
    let mut s = String::new();
    open(&mut s, "ratios", height);
    let one = x.at(1.0);
    let _ = write!(
        s,
        r#"<line class="no-change" x1="{one:.2}" x2="{one:.2}" y1="4" y2="60"/><text class="row-name" x="{:.1}" y="22" text-anchor="end">ratio per block</text><text class="row-name" x="{:.1}" y="48" text-anchor="end">family interval</text>"#,
        LABELS - 6.0,
        LABELS - 6.0
    );
    for (i, &r) in ratios.iter().enumerate() {
        let _ = write!(
            s,
            r#"<circle class="ratio" cx="{:.2}" cy="18" r="3.5"><title>block {i}: {r:.4}</title></circle>"#,
            x.at(r)
        );
    }
    match interval {
        Some((a, b)) => {
            let _ = write!(
                s,
                r#"<line class="interval" x1="{:.2}" x2="{:.2}" y1="44" y2="44"><title>interval [{a:.4}, {b:.4}]</title></line><line class="interval-end" x1="{pa:.2}" x2="{pa:.2}" y1="38" y2="50"/><line class="interval-end" x1="{pb:.2}" x2="{pb:.2}" y1="38" y2="50"/>"#,
                x.at(a),
                x.at(b),
                pa = x.at(a),
                pb = x.at(b)
            );
        }
        None => {
            let _ = write!(
                s,
                r#"<text class="unbounded" x="{:.1}" y="48">unbounded: too few blocks for this family</text>"#,
                LABELS + 4.0
            );
        }
    }
    if let Some(g) = geo_mean {
        let _ = write!(
            s,
            r#"<circle class="geo-mean" cx="{:.2}" cy="44" r="4.5"><title>geometric mean {g:.4}</title></circle>"#,
            x.at(g)
        );
    }
    x_axis(&mut s, x, 64.0, |v| format!("{v:.3}"));
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_html_and_svg() {
        assert_eq!(esc(r#"<a href="x">&'"#), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
    }

    #[test]
    fn ticks_are_round_and_inside_the_range() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert!(ticks(3.2, 3.9, 4).iter().all(|t| (3.2..=3.9).contains(t)));
    }

    #[test]
    fn a_line_has_one_point_pair_per_input_point() {
        let svg = line(&[(0.0, 1.0), (5.0, 2.0), (9.0, 0.5)], (0.0, 10.0), "MiB", "memory", false);
        let points = svg.split("points=\"").nth(1).unwrap().split('"').next().unwrap();
        assert_eq!(points.split(' ').count(), 3);
    }
}
