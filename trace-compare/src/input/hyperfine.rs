//! Sides made of a hyperfine JSON export (`hyperfine --export-json`), from
//! hyperfine 1.15 to the current release: one group per command, one run per
//! entry of `times`.
//!
//! The fields read: `results[].command`, `results[].times` (seconds per run),
//! `results[].exit_codes` (1.12+; `null` for a run killed by a signal),
//! `results[].memory_usage_byte` (per-run peak RSS, 1.20+), and `user` /
//! `system` (CPU means only: hyperfine keeps no per-run CPU, so those rows get
//! one sample a side and no verdict). Unknown fields are ignored.

use serde_json::Value;

use crate::error::{Error, ErrorKind};
use crate::metric::{Group, Kind, Metric, Run, Side};

/// True when `doc` looks like a hyperfine export (an object with `results`).
pub fn is_export(doc: &Value) -> bool {
    doc.get("results").is_some_and(Value::is_array)
}

fn field_error(place: String, found: &Value, expected: &str) -> Error {
    let mut shown = found.to_string();
    if shown.len() > 40 {
        shown.truncate(40);
        shown.push_str("...");
    }
    Error::new(ErrorKind::Format, place, shown, expected)
}

fn numbers(v: &Value, place: &str, unit: &str) -> Result<Vec<f64>, Error> {
    let arr = v.as_array().ok_or_else(|| field_error(place.to_string(), v, "an array of numbers"))?;
    arr.iter()
        .enumerate()
        .map(|(i, x)| {
            let n = x.as_f64().ok_or_else(|| field_error(format!("{place}[{i}]"), x, unit))?;
            crate::error::finite(n, || format!("{place}[{i}]"))
        })
        .collect()
}

/// A side from a parsed hyperfine export. A run with a non-zero or missing
/// exit code makes its command's group invalid.
pub fn read(label: &str, source: &str, doc: &Value) -> Result<Side, Error> {
    let results = doc
        .get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| field_error("results".into(), doc, "an array of hyperfine results"))?;
    let mut groups = Vec::new();
    for (i, r) in results.iter().enumerate() {
        let at = |f: &str| format!("results[{i}].{f}");
        let command = r.get("command").and_then(Value::as_str).ok_or_else(|| {
            field_error(at("command"), r.get("command").unwrap_or(&Value::Null), "a string")
        })?;
        let times = numbers(r.get("times").unwrap_or(&Value::Null), &at("times"), "a number of seconds")?;
        let memory = match r.get("memory_usage_byte") {
            None | Some(Value::Null) => None,
            Some(v) => Some(numbers(v, &at("memory_usage_byte"), "a number of bytes")?),
        };
        if let Some(m) = &memory {
            if m.len() != times.len() {
                return Err(Error::new(
                    ErrorKind::Format,
                    at("memory_usage_byte"),
                    format!("{} values", m.len()),
                    format!("one per run, as `times` has ({})", times.len()),
                ));
            }
        }
        let mut invalid = Vec::new();
        if let Some(codes) = r.get("exit_codes").and_then(Value::as_array) {
            for (k, c) in codes.iter().enumerate() {
                match c.as_i64() {
                    Some(0) => {}
                    Some(code) => invalid.push(format!("run {k} exited with status {code}")),
                    None if c.is_null() => invalid.push(format!("run {k} was killed by a signal")),
                    None => {
                        return Err(field_error(
                            format!("{}[{k}]", at("exit_codes")),
                            c,
                            "an integer or null",
                        ))
                    }
                }
            }
        }
        let mut runs: Vec<Run> = times
            .iter()
            .enumerate()
            .map(|(k, &t)| {
                let mut run = Run::default();
                run.values.insert(Metric::new("wall", Kind::Time), t * 1000.0);
                if let Some(m) = &memory {
                    run.values.insert(Metric::new("peak_rss", Kind::Memory), m[k] / 1024.0);
                }
                run
            })
            .collect();
        // CPU means: one value each, on a run of their own, so they are
        // shown and never tested.
        let mut means = Run::default();
        for (key, name) in [("user", "cpu_user"), ("system", "cpu_system")] {
            if let Some(v) = r.get(key).filter(|v| !v.is_null()) {
                let s = v.as_f64().ok_or_else(|| field_error(at(key), v, "a number of seconds"))?;
                let s = crate::error::finite(s, || at(key))?;
                means.values.insert(Metric::new(name, Kind::Time), s * 1000.0);
            }
        }
        if !means.values.is_empty() {
            runs.push(means);
        }
        groups.push(Group { name: command.to_string(), runs, invalid });
    }
    Ok(Side { label: label.to_string(), source: source.to_string(), session: None, groups })
}
