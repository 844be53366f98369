//! Sides made of `timings.json` files (unpaired): one run per file, grouped
//! by the captured command.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use trace_summary::{Timings, NINJA_AVAILABLE, SUFFIX};

use crate::error::{Error, ErrorKind};
use crate::metric::{Group, Kind, Metric, Run, Side};

/// The metrics one `timings.json` holds: `wall`, `cpu_user` and `cpu_system`
/// (the tool's and its waited-for children's), `peak_rss` (the larger of the
/// tool's and its largest child's: peaks are never summed), `ninja_actions`
/// (when available), and per span name `phase:`, `count:` and each integer
/// field's `field:` (summed over targets).
pub fn metrics(t: &Timings) -> BTreeMap<Metric, f64> {
    let mut m = BTreeMap::new();
    let r = &t.resources.figures;
    m.insert(Metric::new("wall", Kind::Time), t.wall_us as f64 / 1000.0);
    // A figure the platform does not give (null in the summary) is no metric.
    let sum = |a: Option<u64>, b: Option<u64>| a.map(|a| a + b.unwrap_or(0));
    let children_user = r.waited_children_user_us.or(r.children_user_us);
    let children_system = r.waited_children_system_us.or(r.children_system_us);
    if let Some(us) = sum(r.self_user_us, children_user) {
        m.insert(Metric::new("cpu_user", Kind::Time), us as f64 / 1000.0);
    }
    if let Some(us) = sum(r.self_system_us, children_system) {
        m.insert(Metric::new("cpu_system", Kind::Time), us as f64 / 1000.0);
    }
    if let Some(kib) = r.self_max_rss_kib.max(r.largest_child_max_rss_kib) {
        m.insert(Metric::new("peak_rss", Kind::Memory), kib as f64);
    }
    m.extend(span_metrics(t));
    m
}

/// The metrics of the spans (`phase:`, `count:`, `field:`) and Ninja's
/// actions, for runs whose process metrics come from elsewhere.
pub fn span_metrics(t: &Timings) -> BTreeMap<Metric, f64> {
    let mut m: BTreeMap<Metric, f64> = BTreeMap::new();
    for s in &t.spans {
        *m.entry(Metric::new(format!("phase:{}", s.name), Kind::Time)).or_default() +=
            s.total_inclusive_us as f64 / 1000.0;
        *m.entry(Metric::new(format!("count:{}", s.name), Kind::Work)).or_default() += s.count as f64;
        for (field, sum) in &s.field_sums {
            *m.entry(Metric::new(format!("field:{}.{field}", s.name), Kind::Work)).or_default() +=
                *sum as f64;
        }
    }
    if t.ninja.status == NINJA_AVAILABLE {
        if let Some(a) = t.ninja.actions {
            m.insert(Metric::new("ninja_actions", Kind::Work), a as f64);
        }
    }
    m
}

/// Every `*.timings.json` under `path` (a directory, searched recursively, or
/// one file), sorted by path.
pub fn files(path: &Path) -> Result<Vec<PathBuf>, Error> {
    let io = |e: std::io::Error, p: &Path| {
        Error::new(ErrorKind::Io, "", e.to_string(), "a readable file or directory").in_file(p)
    };
    let meta = std::fs::metadata(path).map_err(|e| io(e, path))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut out = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| io(e, &dir))? {
            let p = entry.map_err(|e| io(e, &dir))?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(SUFFIX) {
                out.push(p);
            }
        }
    }
    if out.is_empty() {
        return Err(Error::new(
            ErrorKind::Io,
            "",
            "no file ending in `timings.json`",
            "a directory of timings files",
        )
        .in_file(path));
    }
    out.sort();
    Ok(out)
}

/// A side from `timings.json` files (each one run), grouped by `command`.
pub fn read(label: &str, source: &str, paths: &[PathBuf]) -> Result<Side, Error> {
    let mut groups: Vec<Group> = Vec::new();
    for p in paths {
        let t = Timings::from_path(p).map_err(|e| Error::message(ErrorKind::Format, e.to_string()))?;
        let run = Run { block: None, values: metrics(&t) };
        match groups.iter_mut().find(|g| g.name == t.command) {
            Some(g) => g.runs.push(run),
            None => groups.push(Group { name: t.command.clone(), runs: vec![run], invalid: Vec::new() }),
        }
    }
    Ok(Side { label: label.to_string(), source: source.to_string(), session: None, groups })
}
