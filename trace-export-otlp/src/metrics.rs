//! Timings summaries and comparison results as OTLP metrics.
//!
//! Every metric is a gauge (each run is a measurement of its own, not a running
//! total) named `cabin_trace.*`, with units per the OTLP conventions (UCUM:
//! `ms`, `By`, and `{annotation}` for counts). Every data point carries the
//! run's labels, so they survive a backend that drops resource attributes:
//!
//! | attribute | from |
//! | --- | --- |
//! | `cabin_trace.command` | the summary's `command` |
//! | `vcs.ref.head.revision` | [`Labels::revision`] |
//! | `host.name` | [`Labels::machine`] |
//! | `cabin_trace.scenario` | [`Labels::scenario`] |
//!
//! | metric | unit | attributes besides the labels |
//! | --- | --- | --- |
//! | `cabin_trace.command.duration` | `ms` | |
//! | `cabin_trace.startup.duration` | `ms` | (only when the OS told it) |
//! | `cabin_trace.cpu.time` | `ms` | `cpu.mode` (`user`, `system`), `cabin_trace.whose` (`self`, `children`) |
//! | `cabin_trace.memory.peak` | `By` | `cabin_trace.whose` (`self`, `largest_child`) |
//! | `cabin_trace.phase.duration` | `ms` | `cabin_trace.phase`, `code.namespace`: the sum of inclusive times, not elapsed time |
//! | `cabin_trace.phase.count` | `{span}` | `cabin_trace.phase`, `code.namespace` |
//! | `cabin_trace.phase.work` | `{count}` | `cabin_trace.phase`, `code.namespace`, `cabin_trace.counter` (the field) |
//! | `cabin_trace.ninja.actions` | `{action}` | (only when Ninja's log was read) |
//! | `cabin_trace.comparison.ratio` | `1` | `cabin_trace.metric`, `cabin_trace.verdict`, and the row's own |

use trace_summary::Timings;

use crate::model::*;

/// The scope metrics are written under.
pub const SCOPE: &str = "cabin-trace-export";

/// The labels of a run, given on the command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Labels {
    /// The revision measured, e.g. a commit hash.
    pub revision: Option<String>,
    /// The machine it ran on (a CI runner's name).
    pub machine: Option<String>,
    /// The scenario, e.g. `cold-build`.
    pub scenario: Option<String>,
}

impl Labels {
    fn attributes(&self, command: Option<&str>) -> Vec<KeyValue<'static>> {
        let mut out = Vec::new();
        if let Some(c) = command {
            out.push(KeyValue::str("cabin_trace.command", c.to_string()));
        }
        for (key, v) in [
            ("vcs.ref.head.revision", &self.revision),
            ("host.name", &self.machine),
            ("cabin_trace.scenario", &self.scenario),
        ] {
            if let Some(v) = v {
                out.push(KeyValue::str(key, v.clone()));
            }
        }
        out
    }
}

/// One row of a comparison (`cabin-trace compare`): a metric's ratio of the
/// candidate to the baseline and the verdict on it.
#[derive(Clone, Debug, PartialEq)]
pub struct ComparisonRow {
    /// The metric compared, e.g. `wall_us` or a phase name.
    pub metric: String,
    /// Candidate over baseline (1.0: no change).
    pub ratio: f64,
    /// `Regressed`, `Improved`, `Unchanged`, ...
    pub verdict: String,
    /// Anything else the row carries (scenario, method), as string attributes.
    pub attributes: Vec<(String, String)>,
}

/// Gathers metrics into one `MetricsData` with one resource.
struct Builder {
    metrics: Vec<Metric<'static>>,
}

impl Builder {
    fn gauge(&mut self, name: &str, unit: &str, description: &str, point: NumberDataPoint<'static>) {
        match self.metrics.iter_mut().find(|m| m.name == name) {
            Some(Metric { data: MetricData::Gauge(points), .. }) => points.push(point),
            _ => self.metrics.push(Metric {
                name: name.to_string().into(),
                description: description.to_string().into(),
                unit: unit.to_string().into(),
                data: MetricData::Gauge(vec![point]),
            }),
        }
    }

    fn finish(self, service: &str) -> MetricsData<'static> {
        MetricsData {
            resource_metrics: vec![ResourceMetrics {
                resource: Resource { attributes: vec![KeyValue::str("service.name", service.to_string())] },
                scope_metrics: vec![ScopeMetrics {
                    scope: Scope { name: SCOPE.into(), version: env!("CARGO_PKG_VERSION").into() },
                    metrics: self.metrics,
                }],
            }],
        }
    }
}

fn ms(us: u64) -> Number {
    Number::Double(us as f64 / 1000.0)
}

fn count(n: u64) -> Number {
    Number::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

/// The metrics of timings summaries, one `MetricsData` for all of them (one
/// data point per summary and metric).
pub fn timings_metrics(summaries: &[Timings], labels: &Labels, service: &str) -> MetricsData<'static> {
    let mut b = Builder { metrics: Vec::new() };
    for t in summaries {
        let start = t.start_unix_ms.saturating_mul(1_000_000);
        let time = start.saturating_add(t.wall_us.saturating_mul(1000));
        let base = labels.attributes(Some(&t.command));
        let point = |value: Number, extra: &[KeyValue<'static>]| {
            let mut attributes = base.clone();
            attributes.extend_from_slice(extra);
            NumberDataPoint { attributes, start_time_unix_nano: start, time_unix_nano: time, value }
        };
        b.gauge("cabin_trace.command.duration", "ms", "Wall time of the command", point(ms(t.wall_us), &[]));
        if let Some(s) = t.startup_us {
            b.gauge(
                "cabin_trace.startup.duration",
                "ms",
                "Time from the process's start to the capture's start",
                point(ms(s), &[]),
            );
        }
        let r = &t.resources.figures;
        for (whose, mode, us) in [
            ("self", "user", r.self_user_us),
            ("self", "system", r.self_system_us),
            ("children", "user", r.children_user_us),
            ("children", "system", r.children_system_us),
        ] {
            // A figure the platform does not give (null in the summary) is left out.
            let Some(us) = us else { continue };
            let extra = [KeyValue::str("cpu.mode", mode), KeyValue::str("cabin_trace.whose", whose)];
            b.gauge("cabin_trace.cpu.time", "ms", "CPU time during the capture", point(ms(us), &extra));
        }
        for (whose, kib) in [("self", r.self_max_rss_kib), ("largest_child", r.largest_child_max_rss_kib)] {
            let Some(kib) = kib else { continue };
            let extra = [KeyValue::str("cabin_trace.whose", whose)];
            let bytes = count(kib.saturating_mul(1024));
            b.gauge(
                "cabin_trace.memory.peak",
                "By",
                "Peak resident set (never summed)",
                point(bytes, &extra),
            );
        }
        for s in &t.spans {
            let phase = [
                KeyValue::str("cabin_trace.phase", s.name.clone()),
                KeyValue::str("code.namespace", s.target.clone()),
            ];
            b.gauge(
                "cabin_trace.phase.duration",
                "ms",
                "Sum of the inclusive times of a phase's spans (over threads and nesting: not elapsed time)",
                point(ms(s.total_inclusive_us), &phase),
            );
            b.gauge("cabin_trace.phase.count", "{span}", "Spans of a phase", point(count(s.count), &phase));
            for (field, sum) in &s.field_sums {
                let mut extra = phase.to_vec();
                extra.push(KeyValue::str("cabin_trace.counter", field.clone()));
                let value =
                    Number::Int(i64::try_from(*sum).unwrap_or(if *sum < 0 { i64::MIN } else { i64::MAX }));
                b.gauge(
                    "cabin_trace.phase.work",
                    "{count}",
                    "Sum of a phase's integer field (a work counter)",
                    point(value, &extra),
                );
            }
        }
        if let Some(actions) = t.ninja.actions {
            b.gauge("cabin_trace.ninja.actions", "{action}", "Ninja actions run", point(count(actions), &[]));
        }
    }
    b.finish(service)
}

/// The metrics of a comparison's rows, measured at `time_unix_nano`.
pub fn comparison_metrics(
    rows: &[ComparisonRow],
    labels: &Labels,
    service: &str,
    time_unix_nano: u64,
) -> MetricsData<'static> {
    let mut b = Builder { metrics: Vec::new() };
    for row in rows {
        let mut attributes = labels.attributes(None);
        attributes.push(KeyValue::str("cabin_trace.metric", row.metric.clone()));
        attributes.push(KeyValue::str("cabin_trace.verdict", row.verdict.clone()));
        attributes.extend(row.attributes.iter().map(|(k, v)| KeyValue::str(k.clone(), v.clone())));
        let point = NumberDataPoint {
            attributes,
            start_time_unix_nano: 0,
            time_unix_nano,
            value: Number::Double(row.ratio),
        };
        b.gauge("cabin_trace.comparison.ratio", "1", "Candidate over baseline, with the verdict", point);
    }
    b.finish(service)
}
