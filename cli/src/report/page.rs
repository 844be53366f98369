//! One self-contained HTML page: its style inline, no script, no font, no
//! image from anywhere; a content security policy that forbids every fetch,
//! so that the page opens from `file://` or a CI artifact and reaches nothing.

use std::fmt::Write as _;

use super::svg::esc;

/// No request of any kind; inline style and inline SVG only.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'";

const STYLE: &str = "
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em auto; max-width: 1000px; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1em; margin-bottom: 0.2em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { padding: 2px 8px; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.warning, .invalid { color: #a00; font-weight: bold; }
.regression { color: #a00; font-weight: bold; } .improvement { color: #070; font-weight: bold; }
svg.chart { display: block; width: 100%; height: auto; margin: 0.3em 0; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
.axis, .tick { stroke: #888; } text.tick { stroke: none; fill: #555; }
.grid { stroke: #eee; } .lane-bg { fill: #f7f7f7; }
rect.slice, rect.action, rect.test, rect.child { stroke: #fff; stroke-width: 0.5; }
.slice-name { pointer-events: none; }
rect.bar.first, rect.key.first { fill: #4a7fc1; } rect.bar.second, rect.key.second { fill: #e39b3a; }
polyline.memory { stroke: #4a7fc1; stroke-width: 1.5; } polyline.cpu { stroke: #c14a4a; stroke-width: 1.5; }
polyline.concurrency { stroke: #4a7fc1; } path.steps { stroke: #4a7fc1; stroke-width: 1.5; }
circle.memory-point, circle.concurrency-point { fill: #4a7fc1; } circle.cpu-point { fill: #c14a4a; }
circle.sample { fill: #4a7fc1; fill-opacity: 0.7; } circle.ratio { fill: #666; fill-opacity: 0.7; }
rect.iqr { fill: #4a7fc1; fill-opacity: 0.15; stroke: #4a7fc1; } line.median { stroke: #000; stroke-width: 2; }
line.no-change { stroke: #888; stroke-dasharray: 4 3; }
line.interval, line.interval-end { stroke: #c14a4a; stroke-width: 3; } circle.geo-mean { fill: #c14a4a; }
text.unbounded { fill: #a00; }
section.metric { margin-bottom: 1.2em; }
";

/// A page being built: its title and its sections, in order.
pub struct Page {
    title: String,
    body: String,
}

impl Page {
    /// An empty page titled `title`.
    pub fn new(title: &str) -> Page {
        Page { title: title.to_string(), body: String::new() }
    }

    /// A section `<section id=id>` with a heading and `html` (already escaped).
    pub fn section(&mut self, id: &str, heading: &str, html: &str) {
        let _ = writeln!(self.body, "<section id=\"{}\"><h2>{}</h2>{html}</section>", esc(id), esc(heading));
    }

    /// A section holding a two-column table of facts (values already escaped).
    pub fn facts(&mut self, id: &str, heading: &str, facts: &[(&str, String)]) {
        let mut t = String::from("<table class=\"facts\">");
        for (k, v) in facts {
            let _ = write!(t, "<tr><th>{}</th><td>{v}</td></tr>", esc(k));
        }
        t.push_str("</table>");
        self.section(id, heading, &t);
    }

    /// The whole document.
    pub fn html(&self) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <title>{title}</title><style>{STYLE}</style></head>\n<body><h1>{title}</h1>\n{}\
             <footer><p>Written by cabin-trace {}.</p></footer></body></html>\n",
            self.body,
            env!("CARGO_PKG_VERSION"),
            title = esc(&self.title)
        )
    }
}
