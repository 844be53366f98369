//! `cabin-trace report`: one self-contained HTML file of a capture, a family
//! merge, a `bench` session or a comparison.
//!
//! The charts are SVG written as text by [`svg`] into a page whose style is
//! inline ([`page`]): no script, no font, no request, so the file opens from
//! `file://` and from a CI artifact. A plotting library was weighed and not
//! taken: `plotters` lays out its axes by measuring text, which needs a font
//! backend (`ab_glyph` with a font file, or the system's fonts through
//! `font-kit`), and has no chart of slices in lanes, which is most of what is
//! drawn here; a template engine would hold the page's few lines of markup.
//! The charts are rectangles, circles and lines with `<title>`s, a few
//! hundred lines that `write!` them with every text escaped.

mod capture;
mod comparison;
mod family;
mod page;
mod svg;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use trace_compare::samples::Samples;
use trace_compare::{Options, Report};

pub use comparison::Compared;

/// Write one self-contained HTML report (no script, no request) of a capture
/// (`<stem>.timings.json`, with its `.trace.json` beside it), a family merge
/// (`.family.json`), a `bench` session (`samples.json`) or a comparison
/// (`compare --format json`).
///
/// Example: `cabin-trace report target/traces/build-1-2-1.timings.json`
/// writes `build-1-2-1.report.html` beside it and prints its path.
#[derive(clap::Args)]
#[command(after_help = "Exit status: 0; 2 on bad input (a file that cannot be read or is none of the four).")]
pub struct Args {
    /// A `.timings.json`, `.family.json`, `samples.json`, or a JSON comparison report.
    #[arg(value_name = "FILE")]
    input: PathBuf,
    /// Where to write the page. Default: beside FILE, `<name>.report.html`
    /// (`report.html` for a samples.json).
    #[arg(long, short, value_name = "FILE.html")]
    output: Option<PathBuf>,
    /// For a samples.json: the baseline label. Default: the first.
    #[arg(long, value_name = "LABEL")]
    base: Option<String>,
    #[command(flatten)]
    rules: crate::compare::RuleArgs,
}

/// What a report file holds, told by its keys.
enum Input {
    Capture(Box<trace_summary::Timings>),
    Family(trace_merge::FamilySummary),
    Samples(Samples),
    Comparison(Box<Report>),
}

fn read(path: &Path) -> anyhow::Result<Input> {
    let text = std::fs::read(path).with_context(|| format!("{}: cannot be read", path.display()))?;
    let doc: serde_json::Value = serde_json::from_slice(&text).with_context(|| {
        format!(
            "{}: not JSON; expected a .timings.json, a .family.json, a samples.json or a `compare --format json` \
             report (a .pftrace opens with `cabin-trace open`)",
            path.display()
        )
    })?;
    let has = |k: &str| doc.get(k).is_some();
    let kind = |what: &str| format!("{}: not a readable {what}", path.display());
    Ok(if has("scenarios") && has("labels") {
        Input::Samples(Samples::from_value(doc).with_context(|| kind("samples.json"))?)
    } else if has("groups") && has("base") && has("head") {
        Input::Comparison(Box::new(serde_json::from_value(doc).with_context(|| kind("comparison report"))?))
    } else if has("commands") && has("processes") && has("trace_id") {
        Input::Family(serde_json::from_value(doc).with_context(|| kind("family summary"))?)
    } else if has("spans") && has("stem") {
        Input::Capture(Box::new(
            trace_summary::Timings::from_path(path).with_context(|| kind("timings summary"))?,
        ))
    } else {
        bail!(
            "{}: expected a .timings.json, a .family.json, a samples.json or a `compare --format json` report",
            path.display()
        )
    })
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let opts = args.rules.options()?;
    let input = read(&args.input)?;
    let name = args.input.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let default_name = match &input {
        Input::Samples(_) => "report.html".to_string(),
        _ => format!("{}.report.html", name.trim_end_matches(".json").trim_end_matches(".timings")),
    };
    let page = match &input {
        Input::Capture(t) => capture::page(&args.input, t)?,
        Input::Family(f) => family::page(f),
        Input::Samples(s) => {
            let all = compare_session(s, &args.input.display().to_string(), args.base.as_deref(), &opts)?;
            comparison::page(&format!("bench session {name}"), &all)
        }
        Input::Comparison(r) => comparison::page(
            &format!("comparison {name}"),
            &[Compared { report: (**r).clone(), sides: None }],
        ),
    };
    let out = args.output.clone().unwrap_or_else(|| args.input.with_file_name(default_name));
    write(&out, &page.html())?;
    println!("{}", out.display());
    Ok(ExitCode::SUCCESS)
}

/// The session's base label against each other label.
pub fn compare_session(
    s: &Samples,
    source: &str,
    base: Option<&str>,
    opts: &Options,
) -> anyhow::Result<Vec<Compared>> {
    let base = base.map(str::to_string).or_else(|| s.labels.first().cloned()).context("no labels")?;
    let b = s.side(&base, source)?;
    let mut all = Vec::new();
    for head in s.labels.iter().filter(|l| **l != base) {
        let h = s.side(head, source)?;
        all.push(Compared { report: trace_compare::compare(&b, &h, opts)?, sides: Some((b.clone(), h)) });
    }
    Ok(all)
}

/// The page of a `bench` session, `report.html` beside its `samples.json`.
pub fn write_session(samples_path: &Path, all: &[Compared]) -> anyhow::Result<PathBuf> {
    let page = comparison::page("bench session", all);
    let out = samples_path.with_file_name("report.html");
    write(&out, &page.html())?;
    Ok(out)
}

fn write(path: &Path, html: &str) -> anyhow::Result<()> {
    let partial = path.with_extension("html.partial");
    std::fs::write(&partial, html).with_context(|| format!("{}: cannot be written", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("{}: cannot be renamed", partial.display()))?;
    Ok(())
}
