//! Turns cabin-trace captures and summaries into OpenTelemetry data and sends
//! it to a collector over OTLP/HTTP: the `cabin-trace export` command, as a
//! library.
//!
//! # Overview
//!
//! - **Metrics** ([`metrics`]): `timings.json` summaries (and comparison rows)
//!   become one OTLP `MetricsData`: wall time, CPU, peak RSS, per-phase
//!   inclusive time and count, work counters and Ninja actions, labelled with
//!   command, revision, machine and scenario. `export metrics FILES...` writes
//!   it as OTLP/JSON Lines (`metrics.otlp.json`).
//! - **Sending** ([`Sender`]): `export --endpoint URL FILES...` posts each
//!   body to `URL/v1/traces` or `URL/v1/metrics`: every line of a trace file
//!   the `otlp` sink wrote, every line of a metrics file, and the metrics of
//!   all the summaries given. Protobuf by default, OTLP/JSON with `--json`.
//! - **Bodies** ([`model`], [`proto`]): the OTLP model is `trace-sink-otlp`'s
//!   (the one its files are written with), read from OTLP/JSON and written as
//!   OTLP/JSON or protobuf.
//!
//! The options ([`Export`]) are plain data: the `cabin-trace` command parses
//! its arguments into them.
//!
//! Failures are an [`ExportError`] naming the file or URL: a receiver that is
//! down (nothing listening) fails at once; one that does not answer fails after
//! the timeout (10 s unless `--timeout` or `OTEL_EXPORTER_OTLP_TIMEOUT` says
//! otherwise); 429, 502, 503 and 504 are retried up to `--retries` times (3),
//! after the `Retry-After` the receiver asks for (seconds or an HTTP date, at
//! most 30 s) or else 1 s, 2 s, 4 s; any other status fails at once with the
//! status and the start of the receiver's answer.
//!
//! # Example
//!
//! ```
//! use trace_export_otlp::{run, ErrorKind, Export, Labels, MetricsOptions};
//!
//! // `cabin-trace export metrics --revision abc123 -o out.json a.timings.json`
//! let export = Export::WriteMetrics(MetricsOptions {
//!     labels: Labels { revision: Some("abc123".into()), ..Labels::default() },
//!     output: Some("out.json".into()),
//!     files: vec!["a.timings.json".into()],
//! });
//! // There is no a.timings.json here: the error names it.
//! let e = run(&export).unwrap_err();
//! assert_eq!(e.kind(), ErrorKind::Read);
//! assert!(e.to_string().starts_with("a.timings.json: cannot be read"), "{e}");
//! ```
//!
//! # Environment
//!
//! | variable | meaning |
//! | --- | --- |
//! | `OTEL_EXPORTER_OTLP_ENDPOINT` | base URL when `--endpoint` is not given; `/v1/traces` or `/v1/metrics` is appended |
//! | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` | the full URL for one signal, above the base one |
//! | `OTEL_EXPORTER_OTLP_HEADERS` | `key=value,...` (percent-encoded) request headers, e.g. an API key; `--header` adds more |
//! | `OTEL_EXPORTER_OTLP_TIMEOUT` | milliseconds per request, when `--timeout` is not given |
//! | `OTEL_EXPORTER_OTLP_PROTOCOL` | `http/protobuf` (default) or `http/json`, when `--json` is not given |
//! | `OTEL_SERVICE_NAME` | `service.name` of the metrics' resource (default `cabin-trace`) |
//!
//! Feature `tls` (off by default) enables `https://` endpoints through rustls.
//!
//! # Dependencies, and why
//!
//! - Bodies are encoded by hand (about 200 lines, [`proto`]) rather than with
//!   `opentelemetry-proto` 0.33.1: even with only the features for messages
//!   (`gen-tonic-messages`, `trace`, `metrics`, `with-serde`, no tonic) it
//!   always builds the OpenTelemetry API and SDK crates, 41 crates in all
//!   (futures, rand, two major versions of `syn`, prost 0.14 beside the
//!   workspace's 0.13): 3 min 23 s from clean on the 2-core machine the
//!   tests run on, for the dozen messages used here. Correctness is
//!   checked where it matters: in the tests the official Python classes decode
//!   every body, and re-encode each protobuf body to the very same bytes.
//! - `ureq` (3.x, no default features) is the HTTP client: blocking, small, no
//!   async runtime, well kept. Plain HTTP is what a collector beside a CI job
//!   listens on; `tls` adds rustls for a remote one, so the usual build
//!   compiles no cryptography.
//! - `serde_path_to_error` names the JSON path of what is wrong in a file
//!   read (`$.resourceSpans[0].scopeSpans[0].spans[3].traceId: ...`).
//!
//! This crate is for the command-line tool only: the façade crate does not
//! depend on it, so a tool linking `cabin-trace` builds none of this.
//!
//! # What it does not do
//!
//! No gRPC, no compression, no persistent queue: a failed export is reported
//! and can be run again, the files stay. Only gauge and sum metrics are read
//! from metrics files.

#![deny(missing_docs)]

mod error;
pub mod metrics;
pub mod model;
pub mod proto;
mod send;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use trace_summary::Timings;

pub use error::{ErrorKind, ExportError};
pub use metrics::{comparison_metrics, timings_metrics, ComparisonRow, Labels};
pub use model::{MetricsData, TracesData};
pub use send::{parse_retry_after, Encoding, Posted, Sender, Signal, RETRYABLE};
pub use trace_sink_otlp::{parse_key_values, KeyValueError};

/// The default per-request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The default number of retries on a retryable status.
pub const DEFAULT_RETRIES: u32 = 3;
/// `service.name` of the metrics when `OTEL_SERVICE_NAME` is unset.
pub const DEFAULT_SERVICE: &str = "cabin-trace";

/// What an export is asked to do: the `cabin-trace export` command's
/// options, parsed.
#[derive(Clone, Debug, PartialEq)]
pub enum Export {
    /// Turn summaries (and comparison reports) into OTLP metrics.
    WriteMetrics(MetricsOptions),
    /// Send files to a collector.
    Send(SendOptions),
}

/// Summaries to write as OTLP metrics (OTLP/JSON Lines).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetricsOptions {
    /// The run's labels, on every data point.
    pub labels: Labels,
    /// Where to write the metrics (`None`: standard output).
    pub output: Option<PathBuf>,
    /// `timings.json` summaries and `cabin-trace compare --format json` reports.
    pub files: Vec<PathBuf>,
}

/// Files to send, and how.
#[derive(Clone, Debug, PartialEq)]
pub struct SendOptions {
    /// Base URL of the OTLP/HTTP receiver, e.g. `http://127.0.0.1:4318`
    /// (`None`: the `OTEL_EXPORTER_OTLP_*ENDPOINT` variables).
    pub endpoint: Option<String>,
    /// The body's encoding (`None`: `OTEL_EXPORTER_OTLP_PROTOCOL`, else protobuf).
    pub encoding: Option<Encoding>,
    /// How long one request may take (`None`: `OTEL_EXPORTER_OTLP_TIMEOUT`,
    /// else [`DEFAULT_TIMEOUT`]).
    pub timeout: Option<Duration>,
    /// Retries on 429, 502, 503 and 504.
    pub retries: u32,
    /// Request headers besides those of `OTEL_EXPORTER_OTLP_HEADERS`.
    pub headers: Vec<(String, String)>,
    /// The labels of summaries sent as metrics.
    pub labels: Labels,
    /// Trace or metrics files in OTLP/JSON Lines (`*.otlp.json`), and
    /// `*.timings.json` summaries (sent as metrics).
    pub files: Vec<PathBuf>,
}

impl Default for SendOptions {
    fn default() -> Self {
        SendOptions {
            endpoint: None,
            encoding: None,
            timeout: None,
            retries: DEFAULT_RETRIES,
            headers: Vec::new(),
            labels: Labels::default(),
            files: Vec::new(),
        }
    }
}

/// What an export did.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// `export metrics`: the points written, and where (`None`: stdout).
    Metrics {
        /// The output file.
        output: Option<PathBuf>,
        /// Data points written.
        points: usize,
    },
    /// `export`: each body sent.
    Sent(Vec<Sent>),
}

/// One body that reached the receiver.
#[derive(Clone, Debug, PartialEq)]
pub struct Sent {
    /// Its signal.
    pub signal: Signal,
    /// What it held: spans or data points.
    pub items: usize,
    /// Where it went, and how.
    pub posted: Posted,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Metrics { output: Some(p), points } => {
                write!(f, "wrote {points} data points to {}", p.display())
            }
            Outcome::Metrics { output: None, points } => write!(f, "wrote {points} data points"),
            Outcome::Sent(sent) => {
                for (i, s) in sent.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    let what = match s.signal {
                        Signal::Traces => "spans",
                        Signal::Metrics => "data points",
                    };
                    write!(f, "sent {} {what} to {} (HTTP {}", s.items, s.posted.url, s.posted.status)?;
                    if s.posted.attempts > 1 {
                        write!(f, ", after {} attempts", s.posted.attempts)?;
                    }
                    write!(f, ")")?;
                }
                Ok(())
            }
        }
    }
}

/// Runs `export`, reading `OTEL_*` from the process environment.
pub fn run(export: &Export) -> Result<Outcome, ExportError> {
    run_with_env(export, |name| std::env::var(name).ok())
}

/// Like [`run`], reading variables through `env`.
pub fn run_with_env(export: &Export, env: impl Fn(&str) -> Option<String>) -> Result<Outcome, ExportError> {
    let service = env("OTEL_SERVICE_NAME").filter(|s| !s.trim().is_empty()).unwrap_or(DEFAULT_SERVICE.into());
    match export {
        Export::WriteMetrics(options) => write_metrics(options, &service),
        Export::Send(options) => send(options, &env, &service),
    }
}

fn write_metrics(args: &MetricsOptions, service: &str) -> Result<Outcome, ExportError> {
    let mut summaries = Vec::new();
    let mut rows = Vec::new();
    for path in &args.files {
        match read_comparison(path)? {
            Some(found) => rows.extend(found),
            None => summaries.push(read_timings(path)?),
        }
    }
    let labels = &args.labels;
    let mut data = timings_metrics(&summaries, labels, service);
    if !rows.is_empty() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let compared = comparison_metrics(&rows, labels, service, now);
        if summaries.is_empty() {
            data = compared;
        } else {
            data.resource_metrics.extend(compared.resource_metrics);
        }
    }
    let mut line = data.to_json_line();
    line.push('\n');
    let written = match &args.output {
        Some(path) => std::fs::write(path, &line).map_err(|e| (path.display().to_string(), e)),
        None => {
            std::io::stdout().lock().write_all(line.as_bytes()).map_err(|e| ("standard output".into(), e))
        }
    };
    written
        .map_err(|(what, e)| ExportError::new(ErrorKind::Write, format!("{what}: cannot be written: {e}")))?;
    Ok(Outcome::Metrics { output: args.output.clone(), points: data.point_count() })
}

/// The rows of a `cabin-trace compare --format json` report, or `None` when
/// `path` holds something else (a summary). Read as plain JSON, so that this
/// crate does not depend on the comparison's: per row the metric, the ratio
/// head / base (the paired geometric mean where there is one, else the ratio
/// of the medians) and the verdict; the group (scenario) as an attribute.
fn read_comparison(path: &Path) -> Result<Option<Vec<ComparisonRow>>, ExportError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ExportError::new(ErrorKind::Read, format!("{}: cannot be read: {e}", path.display())))?;
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else { return Ok(None) };
    let Some(groups) = value.get("groups").and_then(|g| g.as_array()) else { return Ok(None) };
    let bad = |what: &str| {
        ExportError::new(ErrorKind::Parse, format!("{}: a comparison report whose {what}", path.display()))
    };
    let mut rows = Vec::new();
    for group in groups {
        let scenario = group.get("name").and_then(|n| n.as_str()).unwrap_or_default();
        for row in group.get("rows").and_then(|r| r.as_array()).ok_or_else(|| bad("group has no `rows`"))? {
            let metric =
                row.get("metric").and_then(|m| m.as_str()).ok_or_else(|| bad("row has no `metric`"))?;
            let verdict =
                row.get("verdict").and_then(|v| v.as_str()).ok_or_else(|| bad("row has no `verdict`"))?;
            let median = |side: &str| row.get(side).and_then(|s| s.get("median")).and_then(|m| m.as_f64());
            let paired = row.get("paired").and_then(|p| p.get("geo_mean_ratio")).and_then(|r| r.as_f64());
            let ratio = paired.or_else(|| match (median("base"), median("head")) {
                (Some(b), Some(h)) if b != 0.0 => Some(h / b),
                _ => None,
            });
            // A metric on one side only has no ratio: nothing to plot.
            let Some(ratio) = ratio else { continue };
            rows.push(ComparisonRow {
                metric: metric.to_string(),
                ratio,
                verdict: verdict.to_string(),
                attributes: vec![("cabin_trace.scenario".to_string(), scenario.to_string())],
            });
        }
    }
    Ok(Some(rows))
}

fn read_timings(path: &Path) -> Result<Timings, ExportError> {
    Timings::from_path(path).map_err(|e| {
        let kind = match e {
            trace_summary::ReadError::Io { .. } => ErrorKind::Read,
            _ => ErrorKind::Parse,
        };
        ExportError::new(kind, e.to_string())
    })
}

/// One body to send.
struct Body {
    signal: Signal,
    items: usize,
    protobuf: Vec<u8>,
    json: String,
}

/// The bodies of one OTLP/JSON Lines file: one per line.
fn read_otlp_lines(path: &Path) -> Result<Vec<Body>, ExportError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ExportError::new(ErrorKind::Read, format!("{}: cannot be read: {e}", path.display())))?;
    let mut bodies = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at =
            |why: String| ExportError::new(ErrorKind::Parse, format!("{}:{}: {why}", path.display(), n + 1));
        let doc: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| at(format!("not JSON ({e}); expected OTLP/JSON Lines")))?;
        let body = if doc.get("resourceSpans").is_some() {
            let data = model::traces_from_json(&doc).map_err(at)?;
            Body {
                signal: Signal::Traces,
                items: data.span_count(),
                protobuf: proto::encode_traces(&data),
                json: line.into(),
            }
        } else if doc.get("resourceMetrics").is_some() {
            let data = model::metrics_from_json(&doc).map_err(at)?;
            Body {
                signal: Signal::Metrics,
                items: data.point_count(),
                protobuf: proto::encode_metrics(&data),
                json: line.into(),
            }
        } else {
            return Err(at("neither `resourceSpans` nor `resourceMetrics`; expected OTLP/JSON Lines".into()));
        };
        bodies.push(body);
    }
    Ok(bodies)
}

fn send(
    args: &SendOptions,
    env: &impl Fn(&str) -> Option<String>,
    service: &str,
) -> Result<Outcome, ExportError> {
    let usage = |m: String| ExportError::new(ErrorKind::Usage, m);
    if args.files.is_empty() {
        return Err(usage("export: no files given; expected *.otlp.json or *.timings.json files".into()));
    }
    let base =
        args.endpoint.clone().or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT")).filter(|s| !s.trim().is_empty());
    let url_for = |signal: Signal| -> Result<String, ExportError> {
        if args.endpoint.is_none() {
            if let Some(u) = env(signal.endpoint_var()).filter(|s| !s.trim().is_empty()) {
                return Ok(u);
            }
        }
        match &base {
            Some(b) => Ok(format!("{}{}", b.trim().trim_end_matches('/'), signal.path())),
            None => Err(usage(format!(
                "export: no endpoint; pass --endpoint URL or set OTEL_EXPORTER_OTLP_ENDPOINT (or {})",
                signal.endpoint_var()
            ))),
        }
    };
    let mut headers = match env("OTEL_EXPORTER_OTLP_HEADERS") {
        Some(text) => trace_sink_otlp::parse_key_values("OTEL_EXPORTER_OTLP_HEADERS", &text)
            .map_err(|e| usage(e.to_string()))?,
        None => Vec::new(),
    };
    headers.extend(args.headers.iter().cloned());
    let timeout = match (args.timeout, env("OTEL_EXPORTER_OTLP_TIMEOUT")) {
        (Some(t), _) => t,
        (None, Some(ms)) => ms.trim().parse::<u64>().map(Duration::from_millis).map_err(|_| {
            usage(format!("OTEL_EXPORTER_OTLP_TIMEOUT=`{ms}`: expected whole milliseconds, e.g. `10000`"))
        })?,
        (None, None) => DEFAULT_TIMEOUT,
    };
    let encoding = match (args.encoding, env("OTEL_EXPORTER_OTLP_PROTOCOL").as_deref().map(str::trim)) {
        (Some(e), _) => e,
        (None, Some("http/json")) => Encoding::Json,
        (None, None | Some("http/protobuf") | Some("")) => Encoding::Protobuf,
        (None, Some(other)) => {
            return Err(usage(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL=`{other}`: expected `http/protobuf` or `http/json` (gRPC is not supported)"
            )))
        }
    };

    // Read everything first: a bad file fails before anything is sent.
    let mut bodies = Vec::new();
    let mut summaries = Vec::new();
    for path in &args.files {
        if path.to_string_lossy().ends_with(".timings.json") {
            summaries.push(read_timings(path)?);
        } else {
            bodies.extend(read_otlp_lines(path)?);
        }
    }
    if !summaries.is_empty() {
        let data = timings_metrics(&summaries, &args.labels, service);
        bodies.push(Body {
            signal: Signal::Metrics,
            items: data.point_count(),
            protobuf: proto::encode_metrics(&data),
            json: data.to_json_line(),
        });
    }

    let sender = Sender::new(headers, timeout, args.retries);
    let mut sent = Vec::new();
    for body in &bodies {
        let url = url_for(body.signal)?;
        if cfg!(not(feature = "tls")) && url.trim_start().to_ascii_lowercase().starts_with("https:") {
            return Err(usage(format!(
                "{url}: HTTPS needs trace-export-otlp's `tls` feature, which this build lacks; \
                 use an http:// endpoint (a collector beside the job) or rebuild with `--features tls`"
            )));
        }
        let bytes = match encoding {
            Encoding::Protobuf => body.protobuf.as_slice(),
            Encoding::Json => body.json.as_bytes(),
        };
        let posted = sender.post(&url, encoding, bytes)?;
        sent.push(Sent { signal: body.signal, items: body.items, posted });
    }
    Ok(Outcome::Sent(sent))
}
