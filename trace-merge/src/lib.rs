//! Merges the captures of a tool and of the tools it ran (a *family*: every
//! capture with the same trace id) into one Perfetto trace, one Chrome JSON
//! trace and one family summary per family.
//!
//! # Overview
//!
//! - [`scan`] reads a directory (or a list of files) of captures: each
//!   capture is found by its `<stem>.timings.json`, which names its family
//!   (`trace_id`), its parent (`parent_stem`), its pid, command and its start
//!   on CLOCK_MONOTONIC. A capture that left only `.partial` files (its
//!   process failed or was killed before it finished) is reported in
//!   [`Scan::incomplete`] and left out; the merge goes on.
//! - [`merge`] writes, per family, `family-<trace id>.pftrace`,
//!   `family-<trace id>.trace.json` and `family-<trace id>.family.json`.
//!   One process per captured process, with its real pid and name; the
//!   external lanes (Ninja's actions, tests) stay processes of their own, as
//!   each capture wrote them (their pids are derived from their capture's).
//!   Every capture of one machine is on CLOCK_MONOTONIC already, so no time
//!   is shifted. (Across machines there is no shared clock: captures of
//!   another machine would be placed on a clock that is not theirs, so do
//!   not merge them.)
//! - A flow goes from the parent to each child's root slice: from the Ninja
//!   action that ran the child when there is one (matched by the output path
//!   a child names in a span field `output`, else by time), otherwise from
//!   the parent's main thread at the child's start. In the Perfetto trace the
//!   flow's ends are two instants carrying `flow_ids` and
//!   `terminating_flow_ids`; in the Chrome trace, `s`/`f` events.
//! - The Perfetto inputs' packets are copied, not re-encoded: track uuids and
//!   sequence ids are already distinct across captures (the sink draws them
//!   so). The packets that hold a sequence's clock snapshot go first, ordered
//!   by time, so that no snapshot goes back against an earlier one.
//!
//! # Example
//!
//! ```no_run
//! let scan = trace_merge::scan(&["target/traces".into()])?;
//! for note in &scan.incomplete {
//!     eprintln!("{note}");
//! }
//! for family in trace_merge::merge(&scan, "target/traces".as_ref())? {
//!     println!("{}: {} processes, {}", family.trace_id, family.processes, family.pftrace.display());
//! }
//! # Ok::<(), trace_merge::MergeError>(())
//! ```
//!
//! # What it does not do
//!
//! It reads no environment variable and starts no process. It does not
//! re-align clocks (there is one per machine) and does not merge a capture
//! that is incomplete.

#![deny(missing_docs)]

mod chrome;
mod perfetto;
mod summary;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use trace_summary::Timings;

pub use summary::{CommandTotals, FamilySummary, Phase};

/// The stem prefix of the merge's own files (which a scan skips).
pub const FAMILY_PREFIX: &str = "family-";

/// One capture of a family, as its summary describes it.
#[derive(Clone, Debug)]
pub struct Capture {
    /// The capture's summary.
    pub timings: Timings,
    /// Its Chrome trace, when complete.
    pub chrome: Option<PathBuf>,
    /// Its Perfetto trace, when complete.
    pub pftrace: Option<PathBuf>,
}

/// What [`scan`] found.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    /// The complete captures, by trace id, each family ordered by start.
    pub families: BTreeMap<String, Vec<Capture>>,
    /// One line per capture (or file) left out, saying why.
    pub incomplete: Vec<String>,
}

/// What [`merge`] wrote for one family.
#[derive(Clone, Debug)]
pub struct Merged {
    /// The family's trace id.
    pub trace_id: String,
    /// How many captured processes it holds.
    pub processes: usize,
    /// How many parent-to-child flows were drawn.
    pub flows: usize,
    /// The merged Perfetto trace.
    pub pftrace: PathBuf,
    /// The merged Chrome JSON trace.
    pub chrome: PathBuf,
    /// The family summary.
    pub summary: PathBuf,
}

/// Why a merge failed.
#[derive(Debug)]
pub struct MergeError {
    path: PathBuf,
    kind: ErrorKind,
    reason: String,
}

/// What a [`MergeError`] is about.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// An input could not be read.
    Read,
    /// An input is not what its name says (bad JSON, bad protobuf).
    Malformed,
    /// An output could not be written.
    Write,
}

impl MergeError {
    fn new(path: &Path, kind: ErrorKind, reason: impl Into<String>) -> Self {
        MergeError { path: path.to_path_buf(), kind, reason: reason.into() }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What kind of error it is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

impl std::error::Error for MergeError {}

const SUMMARY_SUFFIX: &str = ".timings.json";
const PARTIAL: &str = ".partial";

/// Reads the captures in `inputs`: directories (every capture in them) or
/// files of captures (any of a capture's files names it).
pub fn scan(inputs: &[PathBuf]) -> Result<Scan, MergeError> {
    let mut summaries: Vec<PathBuf> = Vec::new();
    let mut partial_stems: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut consider = |path: PathBuf| {
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_string) else {
            return;
        };
        if name.starts_with(FAMILY_PREFIX) {
            return;
        }
        if let Some(stem) = name.strip_suffix(PARTIAL) {
            if let Some(stem) = stem_of(stem) {
                partial_stems.insert(stem.to_string(), path.clone());
            }
        } else if let Some(stem) = stem_of(&name) {
            let summary = path.with_file_name(format!("{stem}{SUMMARY_SUFFIX}"));
            if !summaries.contains(&summary) {
                summaries.push(summary);
            }
        }
    };
    for input in inputs {
        if input.is_dir() {
            let rd = std::fs::read_dir(input)
                .map_err(|e| MergeError::new(input, ErrorKind::Read, format!("cannot be listed: {e}")))?;
            for entry in rd {
                let entry = entry
                    .map_err(|e| MergeError::new(input, ErrorKind::Read, format!("cannot be listed: {e}")))?;
                consider(entry.path());
            }
        } else {
            consider(input.clone());
        }
    }
    summaries.sort();
    let mut scan = Scan::default();
    for path in summaries {
        let stem =
            path.file_name().and_then(|n| n.to_str()).and_then(stem_of).unwrap_or_default().to_string();
        if !path.exists() {
            let why = match partial_stems.get(&stem) {
                Some(_) => "its process did not finish the capture (failed or killed): only .partial files",
                None => "it has no summary",
            };
            scan.incomplete.push(format!("capture {stem} is left out: {why}"));
            continue;
        }
        let timings = Timings::from_path(&path)
            .map_err(|e| MergeError::new(&path, ErrorKind::Malformed, e.to_string()))?;
        let file = |format: &str| {
            timings
                .files
                .iter()
                .find(|f| f.format == format && f.complete)
                .map(|f| path.with_file_name(&f.file))
                .filter(|p| p.exists())
        };
        let (chrome, pftrace) = (file("chrome"), file("perfetto"));
        for f in timings.files.iter().filter(|f| !f.complete) {
            scan.incomplete.push(format!(
                "capture {stem}: its {} file is incomplete ({}) and is left out",
                f.format,
                f.error.as_deref().unwrap_or("no reason given")
            ));
        }
        if timings.trace_id.is_empty() {
            scan.incomplete
                .push(format!("capture {stem} is left out: its summary names no trace id (format 1)"));
            continue;
        }
        scan.families.entry(timings.trace_id.clone()).or_default().push(Capture { timings, chrome, pftrace });
    }
    for (stem, path) in &partial_stems {
        let summarised = scan.families.values().flatten().any(|c| &c.timings.stem == stem);
        let noted = scan.incomplete.iter().any(|n| n.contains(stem.as_str()));
        if !summarised && !noted {
            scan.incomplete.push(format!(
                "capture {stem} is left out: its process did not finish the capture (failed or killed): {} is partial",
                path.display()
            ));
        }
    }
    for family in scan.families.values_mut() {
        family.sort_by_key(|c| (c.timings.start_ns, c.timings.pid));
    }
    Ok(scan)
}

/// The stem of a capture's file name: what precedes `.trace.json`,
/// `.pftrace`, `.timings.json` or `.otlp.json`.
fn stem_of(name: &str) -> Option<&str> {
    [".trace.json", ".pftrace", SUMMARY_SUFFIX, ".otlp.json"].iter().find_map(|s| name.strip_suffix(s))
}

/// A child and where its flow comes from.
#[derive(Clone, Debug)]
pub(crate) struct Link {
    /// Index of the child in the family.
    pub child: usize,
    /// Index of the parent in the family.
    pub parent: usize,
    /// The Ninja action of the parent that ran the child: its sub-lane
    /// (`ninja 3`) and interval, when matched.
    pub action: Option<chrome::Action>,
    /// The child's root slice: thread and interval, in nanoseconds.
    pub root: chrome::Root,
    /// The thread of the parent's root slice (which started the child when
    /// no Ninja action did).
    pub parent_tid: u64,
}

/// Writes each family of `scan` into `out_dir` (created if missing).
pub fn merge(scan: &Scan, out_dir: &Path) -> Result<Vec<Merged>, MergeError> {
    std::fs::create_dir_all(out_dir)
        .map_err(|e| MergeError::new(out_dir, ErrorKind::Write, format!("cannot be created: {e}")))?;
    let mut out = Vec::new();
    for (trace_id, family) in &scan.families {
        let events = family
            .iter()
            .map(|c| c.chrome.as_deref().map(chrome::read).transpose())
            .collect::<Result<Vec<_>, _>>()?;
        let links = chrome::links(family, &events);
        let stem = out_dir.join(format!("{FAMILY_PREFIX}{trace_id}"));
        let with = |suffix: &str| {
            let mut s = stem.clone().into_os_string();
            s.push(suffix);
            PathBuf::from(s)
        };
        let (pf, js, sm) = (with(".pftrace"), with(".trace.json"), with(".family.json"));
        chrome::write(family, &events, &links, &js)?;
        perfetto::write(family, &links, &pf)?;
        summary::write(trace_id, family, links.len(), &sm)?;
        out.push(Merged {
            trace_id: trace_id.clone(),
            processes: family.len(),
            flows: links.len(),
            pftrace: pf,
            chrome: js,
            summary: sm,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_with_only_partial_files_is_named_and_left_out() {
        let dir = tempfile::tempdir().unwrap();
        for suffix in [".pftrace.partial", ".trace.json.partial", ".timings.json.partial"] {
            std::fs::write(dir.path().join(format!("ccwrap-1-2-3{suffix}")), b"").unwrap();
        }
        std::fs::write(dir.path().join("family-x.trace.json"), b"[]").unwrap();
        let scan = scan(&[dir.path().to_path_buf()]).unwrap();
        assert!(scan.families.is_empty());
        assert_eq!(scan.incomplete.len(), 1, "{:?}", scan.incomplete);
        assert!(scan.incomplete[0].contains("ccwrap-1-2-3") && scan.incomplete[0].contains("killed"));
    }
}
