//! The report of a family merge (`family-<trace id>.family.json`): each
//! command's wall, CPU and peak, and where its time went.

use std::fmt::Write as _;

use trace_merge::FamilySummary;

use super::page::Page;
use super::svg::{self, esc, ms, BarRow};

/// The page for `family`.
pub fn page(family: &FamilySummary) -> Page {
    let mut p = Page::new(&format!("family {}", family.trace_id));
    p.facts(
        "summary",
        "Summary",
        &[
            ("trace id", esc(&family.trace_id)),
            ("processes captured", family.processes.to_string()),
            ("flows (parent to child)", family.flows.to_string()),
            ("top-level capture", esc(family.root_stem.as_deref().unwrap_or("-"))),
            ("wall, first start to last end", ms(family.wall_us as f64 / 1000.0)),
        ],
    );

    let mut t = String::from(
        "<table class=\"commands\"><tr><th>command</th><th>processes</th><th>wall (summed)</th><th>CPU</th>\
         <th>children's CPU</th><th>largest peak RSS</th><th>trace bytes</th></tr>",
    );
    for c in &family.commands {
        let _ = write!(
            t,
            "<tr class=\"command\"><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.1} MiB</td>\
             <td class=\"num\">{}</td></tr>",
            esc(&c.command),
            c.count,
            ms(c.wall_us as f64 / 1000.0),
            ms(c.cpu_us as f64 / 1000.0),
            ms(c.children_cpu_us as f64 / 1000.0),
            c.peak_rss_kib as f64 / 1024.0,
            c.trace_bytes
        );
    }
    t.push_str("</table><p>Walls are summed over a command's processes, which may overlap.</p>");
    let rows: Vec<BarRow> = family
        .commands
        .iter()
        .map(|c| BarRow {
            name: c.command.clone(),
            first: c.wall_us as f64 / 1000.0,
            second: Some((c.cpu_us + c.children_cpu_us) as f64 / 1000.0),
        })
        .collect();
    t.push_str(&svg::bars(&rows, ("wall (summed)", "CPU with children")));
    p.section("commands", "Commands", &t);

    let mut body = String::new();
    for c in &family.commands {
        let _ = write!(body, "<h3 class=\"command-phases\">{}</h3>", esc(&c.command));
        if c.top_phases.is_empty() {
            body.push_str("<p>No phases below the root span.</p>");
            continue;
        }
        let rows: Vec<BarRow> = c
            .top_phases
            .iter()
            .map(|ph| BarRow {
                name: format!("{} (x{})", ph.name, ph.count),
                first: ph.total_us as f64 / 1000.0,
                second: None,
            })
            .collect();
        body.push_str(&svg::bars(&rows, ("inclusive time, summed", "")));
    }
    p.section("phases", "Top phases of each command", &body);
    p
}
