//! `cabin-trace export`: its arguments, turned into the `trace-export-otlp`
//! crate's options, and its exit status (2 for bad input, 1 when sending
//! failed).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;
use trace_export_otlp::{
    parse_key_values, Encoding, ErrorKind, Export, KeyValueError, Labels, MetricsOptions, SendOptions,
    DEFAULT_RETRIES,
};

/// `cabin-trace export`: send files to a collector, or (`export metrics`)
/// turn summaries into an OTLP metrics file.
#[derive(clap::Args, Clone, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    /// Instead of sending: write metrics.
    #[command(subcommand)]
    command: Option<Command>,
    /// How and where to send.
    #[command(flatten)]
    send: SendArgs,
}

/// The subcommands of `export`.
#[derive(Subcommand, Clone, Debug)]
enum Command {
    /// Turn timings.json summaries into OTLP metrics (OTLP/JSON Lines).
    Metrics(MetricsArgs),
}

/// The labels every data point carries.
#[derive(clap::Args, Clone, Debug)]
struct LabelArgs {
    /// The revision measured (a commit hash), as `vcs.ref.head.revision`.
    #[arg(long)]
    revision: Option<String>,
    /// The machine it ran on, as `host.name`.
    #[arg(long)]
    machine: Option<String>,
    /// The scenario, as `cabin_trace.scenario`.
    #[arg(long)]
    scenario: Option<String>,
}

/// `export metrics [--revision R] [--machine M] [--scenario S] [-o FILE] FILES...`
#[derive(clap::Args, Clone, Debug)]
struct MetricsArgs {
    /// The run's labels.
    #[command(flatten)]
    labels: LabelArgs,
    /// Where to write the metrics (default: standard output).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// timings.json summaries.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// `export [--endpoint URL] [--json] [--timeout S] [--retries N] [--header K=V]... FILES...`
#[derive(clap::Args, Clone, Debug)]
struct SendArgs {
    /// Base URL of the OTLP/HTTP receiver, e.g. http://127.0.0.1:4318
    /// (default: OTEL_EXPORTER_OTLP_ENDPOINT).
    #[arg(long)]
    endpoint: Option<String>,
    /// Send OTLP/JSON instead of protobuf.
    #[arg(long)]
    json: bool,
    /// Seconds one request may take (default 10, or OTEL_EXPORTER_OTLP_TIMEOUT).
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    timeout: Option<Duration>,
    /// Retries on 429, 502, 503 and 504.
    #[arg(long, default_value_t = DEFAULT_RETRIES)]
    retries: u32,
    /// An extra request header, `key=value` (repeatable).
    #[arg(long = "header", value_name = "KEY=VALUE")]
    headers: Vec<String>,
    /// The labels of summaries sent as metrics.
    #[command(flatten)]
    labels: LabelArgs,
    /// Files: trace or metrics files in OTLP/JSON Lines (`*.otlp.json`), and
    /// timings.json summaries (sent as metrics).
    files: Vec<PathBuf>,
}

/// `--timeout`: a positive number of seconds.
fn seconds(text: &str) -> Result<Duration, String> {
    let bad = || format!("`{text}`: expected a positive number of seconds, e.g. `2.5`");
    let secs: f64 = text.trim().parse().map_err(|_| bad())?;
    Duration::try_from_secs_f64(secs).ok().filter(|d| !d.is_zero()).ok_or_else(bad)
}

impl LabelArgs {
    fn into_labels(self) -> Labels {
        Labels { revision: self.revision, machine: self.machine, scenario: self.scenario }
    }
}

impl Args {
    /// The export these arguments ask for; a `--header` that is not
    /// `key=value` is an error naming it.
    fn into_export(self) -> Result<Export, KeyValueError> {
        if let Some(Command::Metrics(m)) = self.command {
            let labels = m.labels.into_labels();
            return Ok(Export::WriteMetrics(MetricsOptions { labels, output: m.output, files: m.files }));
        }
        let s = self.send;
        let mut headers = Vec::new();
        for h in &s.headers {
            headers.extend(parse_key_values("--header", h)?);
        }
        Ok(Export::Send(SendOptions {
            endpoint: s.endpoint,
            encoding: s.json.then_some(Encoding::Json),
            timeout: s.timeout,
            retries: s.retries,
            headers,
            labels: s.labels.into_labels(),
            files: s.files,
        }))
    }
}

pub fn run(args: Args) -> ExitCode {
    let export = match args.into_export() {
        Ok(export) => export,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(super::BAD_INPUT);
        }
    };
    match trace_export_otlp::run(&export) {
        Ok(outcome) => {
            eprintln!("{outcome}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(if e.kind() == ErrorKind::Usage { super::BAD_INPUT } else { 1 })
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn export(argv: &[&str]) -> Result<Export, String> {
        let cli = Cli::try_parse_from(std::iter::once("export").chain(argv.iter().copied()))
            .map_err(|e| e.to_string())?;
        cli.args.into_export().map_err(|e| e.to_string())
    }

    #[test]
    fn every_send_flag_reaches_the_options() {
        let got = export(&[
            "--endpoint",
            "http://127.0.0.1:4318",
            "--json",
            "--timeout",
            "2.5",
            "--retries",
            "1",
            "--header",
            "api-key=s3cr%20t",
            "--header",
            "a=1,b=2",
            "--revision",
            "abc",
            "x.otlp.json",
            "y.timings.json",
        ]);
        let want = Export::Send(SendOptions {
            endpoint: Some("http://127.0.0.1:4318".into()),
            encoding: Some(Encoding::Json),
            timeout: Some(Duration::from_millis(2500)),
            retries: 1,
            headers: [("api-key", "s3cr t"), ("a", "1"), ("b", "2")]
                .map(|(k, v)| (k.into(), v.into()))
                .to_vec(),
            labels: Labels { revision: Some("abc".into()), ..Labels::default() },
            files: vec!["x.otlp.json".into(), "y.timings.json".into()],
        });
        assert_eq!(got, Ok(want));
    }

    #[test]
    fn without_flags_the_library_decides_from_the_otel_variables() {
        let got = export(&["x.otlp.json"]).unwrap();
        let want = SendOptions { files: vec!["x.otlp.json".into()], ..SendOptions::default() };
        assert_eq!(got, Export::Send(want));
    }

    #[test]
    fn export_metrics_takes_its_labels_and_output() {
        let got =
            export(&["metrics", "--machine", "ci-7", "--scenario", "warm", "-o", "m.json", "a.timings.json"]);
        let want = Export::WriteMetrics(MetricsOptions {
            labels: Labels { revision: None, machine: Some("ci-7".into()), scenario: Some("warm".into()) },
            output: Some("m.json".into()),
            files: vec!["a.timings.json".into()],
        });
        assert_eq!(got, Ok(want));
    }

    #[test]
    fn a_bad_timeout_or_header_is_refused_naming_it() {
        for bad in ["0", "-1", "soon", "NaN"] {
            let e = export(&[&format!("--timeout={bad}"), "x.otlp.json"]).unwrap_err();
            assert!(e.contains(&format!("`{bad}`: expected a positive number of seconds")), "{e}");
        }
        let e = export(&["--header", "novalue", "x.otlp.json"]).unwrap_err();
        assert!(e.starts_with("--header=`novalue`"), "{e}");
    }
}
