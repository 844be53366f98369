//! The Chrome JSON side: reading each capture's events (which also give the
//! children's root slices and the parents' Ninja actions) and writing the
//! family's trace.

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde_json::{json, Value};

use crate::{Capture, ErrorKind, Link, MergeError};

/// The Ninja lane's category (the lane's name, as the sinks write it).
const NINJA_LANE: &str = "ninja";
/// The category of a capture's root span.
const ROOT_CATEGORY: &str = "cabin_trace";

/// A child's root slice.
#[derive(Clone, Debug)]
pub(crate) struct Root {
    pub tid: u64,
    pub begin_ns: u64,
    pub end_ns: u64,
}

/// A Ninja action of a parent.
#[derive(Clone, Debug)]
pub(crate) struct Action {
    /// The action's ids in the parent's own file (the same in both formats).
    pub pid: u64,
    pub tid: u64,
    pub begin_ns: u64,
    pub end_ns: u64,
    pub outputs: Vec<String>,
}

pub(crate) fn read(path: &Path) -> Result<Vec<Value>, MergeError> {
    let bytes = std::fs::read(path).map_err(|e| MergeError::new(path, ErrorKind::Read, e.to_string()))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| MergeError::new(path, ErrorKind::Malformed, format!("is not a Chrome JSON trace: {e}")))
}

fn ns(micros: &Value) -> u64 {
    (micros.as_f64().unwrap_or(0.0) * 1000.0).round().max(0.0) as u64
}

fn id(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

fn root(capture: &Capture, events: Option<&Vec<Value>>) -> Root {
    let t = &capture.timings;
    let found = events.into_iter().flatten().find(|e| {
        e["ph"] == "X"
            && e["cat"] == ROOT_CATEGORY
            && e["name"] == "command"
            && id(e, "pid") == u64::from(t.pid)
    });
    match found {
        Some(e) => Root { tid: id(e, "tid"), begin_ns: ns(&e["ts"]), end_ns: ns(&e["ts"]) + ns(&e["dur"]) },
        None => Root { tid: u64::from(t.pid), begin_ns: t.start_ns, end_ns: t.start_ns + t.wall_us * 1000 },
    }
}

fn actions(capture: &Capture, events: &[Value]) -> Vec<Action> {
    let pid = u64::from(capture.timings.pid);
    events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == NINJA_LANE && id(e, "pid") != pid)
        .map(|e| {
            let (p, t) = (id(e, "pid"), id(e, "tid"));
            Action {
                pid: p,
                tid: t,
                begin_ns: ns(&e["ts"]),
                end_ns: ns(&e["ts"]) + ns(&e["dur"]),
                outputs: e["args"]["outputs"].as_str().unwrap_or("").split(' ').map(str::to_string).collect(),
            }
        })
        .collect()
}

/// What a child says it builds: the first span field `output`.
fn output(events: &[Value]) -> Option<&str> {
    events.iter().find_map(|e| e["args"]["output"].as_str())
}

/// Each child's link to its parent (a child whose parent is not in the
/// family has none).
pub(crate) fn links(family: &[Capture], events: &[Option<Vec<Value>>]) -> Vec<Link> {
    let by_stem: HashMap<&str, usize> =
        family.iter().enumerate().map(|(i, c)| (c.timings.stem.as_str(), i)).collect();
    let parent_actions: Vec<Vec<Action>> = family
        .iter()
        .zip(events)
        .map(|(c, e)| e.as_deref().map(|e| actions(c, e)).unwrap_or_default())
        .collect();
    let mut out = Vec::new();
    for (child, capture) in family.iter().enumerate() {
        let Some(parent) = capture.timings.parent_stem.as_deref().and_then(|s| by_stem.get(s)).copied()
        else {
            continue;
        };
        let root = root(capture, events[child].as_ref());
        // Ninja's times are whole milliseconds, placed from its spawn: the
        // true times are later by up to the stated uncertainty.
        let slack = family[parent].timings.ninja.alignment_uncertainty_us.unwrap_or(0) * 1000 + 1_000_000;
        let distance = |a: &Action| a.begin_ns.abs_diff(root.begin_ns);
        let fits = |a: &&Action| a.begin_ns <= root.begin_ns + 1_000_000 && root.begin_ns <= a.end_ns + slack;
        let candidates = &parent_actions[parent];
        let wanted = events[child].as_deref().and_then(output);
        let by_output = wanted.and_then(|w| {
            candidates.iter().filter(|a| a.outputs.iter().any(|o| o == w)).min_by_key(|a| distance(a))
        });
        let action =
            by_output.or_else(|| candidates.iter().filter(fits).min_by_key(|a| distance(a))).cloned();
        let parent_tid = self::root(&family[parent], events[parent].as_ref()).tid;
        out.push(Link { child, parent, action, root, parent_tid });
    }
    out
}

pub(crate) fn write(
    family: &[Capture],
    events: &[Option<Vec<Value>>],
    links: &[Link],
    path: &Path,
) -> Result<(), MergeError> {
    let err = |e: std::io::Error| MergeError::new(path, ErrorKind::Write, e.to_string());
    let file = std::fs::File::create(path).map_err(err)?;
    let mut w = BufWriter::new(file);
    let mut first = true;
    let mut put = |w: &mut BufWriter<std::fs::File>, v: &Value| -> std::io::Result<()> {
        w.write_all(if first { b"[\n" } else { b",\n" })?;
        first = false;
        serde_json::to_writer(&mut *w, v).map_err(std::io::Error::other)
    };
    for (i, capture) in family.iter().enumerate() {
        let pid = u64::from(capture.timings.pid);
        let children: HashMap<(u64, u64, u64), &Capture> = links
            .iter()
            .filter(|l| l.parent == i)
            .filter_map(|l| l.action.as_ref().map(|a| ((a.pid, a.tid, a.begin_ns), &family[l.child])))
            .collect();
        let Some(evs) = &events[i] else {
            put(
                &mut w,
                &json!({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                "args": {"name": capture.timings.command}}),
            )
            .map_err(err)?;
            continue;
        };
        for e in evs {
            let epid = id(e, "pid");
            // An external lane's action that ran a child of the family names it.
            let child = (epid != pid && e["ph"] == "X")
                .then(|| children.get(&(epid, id(e, "tid"), ns(&e["ts"]))))
                .flatten();
            match child {
                Some(child) => {
                    let mut e = e.clone();
                    if let Some(args) = e["args"].as_object_mut() {
                        args.insert("child_pid".into(), json!(child.timings.pid));
                        args.insert("child_stem".into(), json!(child.timings.stem));
                    }
                    put(&mut w, &e).map_err(err)?;
                }
                None => put(&mut w, e).map_err(err)?,
            }
        }
    }
    for (n, link) in links.iter().enumerate() {
        let parent = &family[link.parent];
        let child = &family[link.child];
        let ppid = u64::from(parent.timings.pid);
        let (from, ts) = match &link.action {
            Some(a) => ((a.pid, a.tid), link.root.begin_ns.clamp(a.begin_ns, a.end_ns)),
            None => ((ppid, link.parent_tid), link.root.begin_ns),
        };
        let flow = n as u64 + 1;
        let us = |t: u64| t as f64 / 1000.0;
        put(
            &mut w,
            &json!({"name": "spawn", "cat": "family", "ph": "s", "id": flow,
            "pid": from.0, "tid": from.1, "ts": us(ts)}),
        )
        .map_err(err)?;
        put(
            &mut w,
            &json!({"name": "spawn", "cat": "family", "ph": "f", "bp": "e", "id": flow,
            "pid": child.timings.pid, "tid": link.root.tid, "ts": us(link.root.begin_ns)}),
        )
        .map_err(err)?;
    }
    if first {
        w.write_all(b"[").map_err(err)?;
    }
    w.write_all(b"\n]\n").map_err(err)?;
    w.flush().map_err(err)
}
