//! cabin-trace: capture a performance trace of one invocation of a command-line
//! tool, switched on by an environment variable and free when off.
//!
//! A tool wraps each command in [`run`] (or [`Capture::run`] under its own
//! prefix). With `CABIN_TRACE_DIR=<dir>` set, the command's `tracing` spans and
//! events are written to `<dir>/<stem>.trace.json` (Chrome JSON),
//! `<dir>/<stem>.pftrace` (Perfetto) and `<dir>/<stem>.timings.json` (the
//! summary), and on request `<dir>/<stem>.otlp.json` (OpenTelemetry); unset,
//! the command runs as if this crate were not there.
//!
//! # Where to start
//!
//! - **A tool** wraps each command in [`run`] (the `CABIN_` prefix) or
//!   [`Capture::from_env`]`(prefix)?.`[`run`](Capture::run) (its own), and
//!   starts its threads and children through [`spawn`], [`bind`],
//!   [`command`] and [`run_child`]. Nothing else is needed; the example below
//!   is a whole tool.
//! - **A sink** (a trace format of your own) implements [`Sink`]: it receives
//!   a [`Start`](trace_core::Start), the capture's
//!   [`Event`](trace_core::Event)s in time order and a
//!   [`Finish`](trace_core::Finish) on the writer thread, and is given to
//!   [`Session::start`] with the others.
//! - **A reader of `timings.json`** calls [`Timings::from_path`]: the model of
//!   the summary, documented field by field, refusing any other
//!   `format_version`.
//!
//! # The map of the workspace
//!
//! | crate | what it holds |
//! | --- | --- |
//! | [`trace_core`] | configuration, scoping, the hot path, the event model, the [`Sink`] trait, the writer thread, files |
//! | [`trace_sink_chrome`](https://docs.rs/trace-sink-chrome) | the Chrome trace-event JSON sink (feature `chrome`) |
//! | [`trace_sink_perfetto`](https://docs.rs/trace-sink-perfetto) | the native Perfetto protobuf sink (feature `perfetto`) |
//! | [`trace_sink_otlp`](https://docs.rs/trace-sink-otlp) | the OpenTelemetry sink: OTLP/JSON traces in a file, for CI to send to a collector (feature `otlp`) |
//! | [`trace_summary`] | the `timings.json` summary: model, aggregation, reader |
//! | [`ninja_log`] | what one Ninja run added to `.ninja_log` |
//!
//! This crate only composes them: it reads the environment, picks the sinks,
//! wraps the command, prints warnings, and re-exports what a tool needs.
//!
//! # Example
//!
//! ```
//! fn build() -> Result<(), String> {
//!     let _phase = tracing::info_span!("compile").entered();
//!     Ok(())
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     match cabin_trace::run("build", build) {
//!         Err(config_error) => {
//!             eprintln!("error: {config_error}");
//!             std::process::ExitCode::from(2)
//!         }
//!         Ok(Err(command_error)) => {
//!             eprintln!("error: {command_error}");
//!             std::process::ExitCode::FAILURE
//!         }
//!         Ok(Ok(())) => std::process::ExitCode::SUCCESS,
//!     }
//! }
//! # main();
//! ```
//!
//! # Environment
//!
//! | variable | meaning |
//! | --- | --- |
//! | `CABIN_TRACE_DIR` | turns capture on; the directory is created if missing |
//! | `CABIN_TRACE_FILTER` | `Targets` directives, e.g. `info,cabin_resolver=debug`; default `info` |
//! | `CABIN_TRACE_FORMAT` | comma list of `chrome`, `perfetto`, `otlp`; default: [`FORMATS`], `chrome,perfetto` with the default features. The summary is always written. A format this build left out is refused, naming the feature that compiles it in |
//! | `CABIN_TRACE_CPU` | the least severe level whose spans record their thread CPU time: a level or `off`; default `info` |
//! | `CABIN_TRACE_SAMPLE` | the interval of the resident-memory and CPU counters, `1ms` to `1s` (e.g. `10ms`), or `off`; default `10ms` |
//! | `CABIN_TRACE_STACKS` | sampled CPU call stacks of the capture's threads, one per `1ms` to `100ms` of a thread's CPU time, or `off`; default `off`. Adds `<stem>.stacks.folded`, samples in the `.pftrace` and the summary's `stacks` block (docs/stacks.md). Needs the `stacks` feature (not a default: 13 more crates to build; nothing runs while the variable is unset) |
//! | `CABIN_TRACE_CHILDREN` | `1`: children started through [`command`], [`run_ninja`] or [`run_test`] that use these crates (under any prefix) capture themselves into this directory, in this capture's family; `0` (default): only those whose own `<P>_TRACE_DIR` is set. See docs/family.md |
//! | `TRACEPARENT`, `CABIN_TRACE_PARENT` | set on children by [`command`]; read at the start of a capture (a malformed value is a one-line warning and ignored) |
//! | `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` | with `otlp`: the resource of the OTLP file (see [`trace_sink_otlp`](https://docs.rs/trace-sink-otlp)); a malformed value is a warning, and the file is written without it |
//!
//! Another tool uses its own prefix: `Capture::from_env("KACHE")` reads
//! `KACHE_TRACE_DIR` and so on. Every value is checked before the command runs;
//! a bad one is an error naming the variable, and no file is created.
//!
//! # Features
//!
//! Each trace format is a feature, so that a tool compiles only the formats it
//! writes: `chrome` and `perfetto` (both default), and `otlp`. The summary is
//! always written. With a format left out, `<P>_TRACE_FORMAT` naming it
//! refuses the command before any file exists, with an error that names the
//! feature to enable; the default list holds only the formats compiled in.
//!
//! # Threads and logging
//!
//! The capture is the thread's default dispatcher only while the command runs
//! (never a global default). Threads the command starts join the capture through
//! [`spawn`] or [`bind`]. The tool's own logging prints exactly what it prints
//! without capture: the capture forwards to the dispatcher that was the default
//! when it started (a global `fmt` subscriber, say), with span ids mapped and
//! its own root span hidden; layers given to [`Capture::with_layer`] run on a
//! registry of their own, with capture on and off alike.
//!
//! # Before `main`: the image-start constructor
//!
//! On Linux and macOS, linking this crate adds one constructor that the loader
//! runs before `main`, whether capture is on or off (an `.init_array` entry on
//! Linux, `__mod_init_func` on macOS; nothing on Windows). It reads the
//! monotonic clock and `getrusage(RUSAGE_SELF)`: the CPU time the process had
//! used and its peak resident set at that moment. It stores them in four
//! atomics, and does nothing else: no allocation, no thread, no file, no
//! output. Its cost is that one system call and one clock read, once per
//! process (docs/performance.md gives the figure).
//!
//! Why: a process that exec'd the tool (`cargo run` does) carries what it did
//! before the exec in its totals. The reading at the image start lets the
//! summary say how long the tool took to reach its capture (`startup_us`) and
//! subtract what ran before the exec (`pre_exec_*_us`), so that it is never
//! counted as the tool's (docs/timings.md).
//!
//! # What it does not do
//!
//! It installs no global subscriber, no signal handler and no panic hook, and it
//! never changes the command's result, output or exit status.

#![deny(missing_docs)]

mod child;
mod folded_stacks;
mod lanes;

/// The README's code, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{Layer, Registry};

pub use lanes::{
    run_child, run_ninja, run_test, wait_child, NinjaRun, CHILDREN_LANE, NINJA_LANE, TESTS_LANE,
};
pub use ninja_log;
pub use trace_core::os;
pub use trace_core::{
    bind, current, spawn, ChildUsage, Config, ConfigError, ErrorKind, Family, FileStatus, Handle, Report,
    Session, Sink, PARENT_VAR, TRACEPARENT_VAR,
};
pub use trace_summary::Timings;

/// The prefix `cabin` uses.
pub const CABIN_PREFIX: &str = "CABIN";

/// The trace formats written when `<P>_TRACE_FORMAT` is unset, in its
/// spelling: those of `chrome` and `perfetto` this build compiled in; never
/// `otlp`, which is for CI fleets that send traces on to a collector. (A
/// configuration built with these as its known formats writes exactly these.)
pub const FORMATS: &[&str] = &[
    #[cfg(feature = "chrome")]
    trace_sink_chrome::NAME,
    #[cfg(feature = "perfetto")]
    trace_sink_perfetto::NAME,
];

/// Every trace format this build can write: one for each format feature
/// enabled (`chrome`, `perfetto`, `otlp`).
pub const ALL_FORMATS: &[&str] = &[
    #[cfg(feature = "chrome")]
    trace_sink_chrome::NAME,
    #[cfg(feature = "perfetto")]
    trace_sink_perfetto::NAME,
    #[cfg(feature = "otlp")]
    trace_sink_otlp::NAME,
];

/// Every trace format the crates can write, compiled in or not; each is also
/// the name of the feature of this crate that compiles it in.
const KNOWN_FORMATS: &[&str] = &["chrome", "perfetto", "otlp"];

/// Refuses a configuration that asks for a format missing from `compiled`
/// (this build's [`ALL_FORMATS`]), naming the feature that would compile it in.
fn refuse_left_out(config: &Config, compiled: &[&str]) -> Result<(), ConfigError> {
    let Some(left_out) = config.formats().iter().find(|f| !compiled.contains(&f.as_str())) else {
        return Ok(());
    };
    let writes = if compiled.is_empty() { "only the summary".to_string() } else { compiled.join(", ") };
    Err(ConfigError::new(
        format!("{}_TRACE_FORMAT", config.prefix()),
        config.formats().join(","),
        ErrorKind::Format,
        &format!(
            "names `{left_out}`, a format this build of cabin-trace left out (it writes {writes}); \
             enable the feature `{left_out}` of the cabin-trace crate \
             (`cabin-trace = {{ features = [\"{left_out}\"] }}`), or take `{left_out}` out of the list"
        ),
    ))
}

type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// A configured capture: on (with a checked configuration) or off.
pub struct Capture {
    config: Option<Config>,
    layers: Vec<BoxedLayer>,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture").field("config", &self.config).field("layers", &self.layers.len()).finish()
    }
}

impl Capture {
    /// Reads `<prefix>_TRACE_DIR`, `<prefix>_TRACE_FILTER` and
    /// `<prefix>_TRACE_FORMAT`; capture is off when the directory is unset.
    ///
    /// ```
    /// let capture = cabin_trace::Capture::from_env("DOCTEST_NOT_SET").unwrap();
    /// assert!(!capture.is_enabled());
    /// ```
    pub fn from_env(prefix: &str) -> Result<Capture, ConfigError> {
        Ok(Capture {
            config: Config::from_env_with_defaults(prefix, KNOWN_FORMATS, FORMATS)?,
            layers: Vec::new(),
        })
    }

    /// A capture from a configuration built elsewhere (`None`: off).
    pub fn from_config(config: Option<Config>) -> Capture {
        Capture { config, layers: Vec::new() }
    }

    /// Whether running a command will capture it.
    pub fn is_enabled(&self) -> bool {
        self.config.is_some()
    }

    /// The configuration, when capture is on.
    pub fn config(&self) -> Option<&Config> {
        self.config.as_ref()
    }

    /// Adds the tool's own layer (its log output, for example): the command
    /// runs under a `tracing_subscriber::Registry` with every layer given, in
    /// order, whether capture is on or off, so it prints the same either way.
    /// The capture forwards to that registry and hides its own root span from
    /// it. Without any layer, the capture forwards to the thread's default
    /// dispatcher instead (a tool's global subscriber).
    pub fn with_layer<L>(mut self, layer: L) -> Capture
    where
        L: Layer<Registry> + Send + Sync + 'static,
    {
        self.layers.push(Box::new(layer));
        self
    }

    // A build without any format feature writes only the summary.
    #[cfg_attr(
        not(any(feature = "chrome", feature = "perfetto", feature = "otlp")),
        allow(unused_variables, clippy::vec_init_then_push)
    )]
    fn sinks(config: &Config) -> Vec<Box<dyn Sink>> {
        let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
        #[cfg(feature = "chrome")]
        if config.wants(trace_sink_chrome::NAME) {
            sinks.push(Box::new(trace_sink_chrome::ChromeSink::new()));
        }
        #[cfg(feature = "perfetto")]
        if config.wants(trace_sink_perfetto::NAME) {
            sinks.push(Box::new(trace_sink_perfetto::PerfettoSink::new()));
        }
        #[cfg(feature = "otlp")]
        if config.wants(trace_sink_otlp::NAME) {
            let sink = trace_sink_otlp::OtlpSink::try_from_env().unwrap_or_else(|e| {
                eprintln!("warning: {e}; the OTLP trace is written without these resource attributes");
                trace_sink_otlp::OtlpSink::new()
            });
            let family = config.family();
            let sink = sink.with_context(trace_sink_otlp::TraceContext {
                trace_id: family.trace_id,
                parent_span_id: family.parent_span_id,
            });
            sinks.push(Box::new(sink));
        }
        // Only when asked for (`<P>_TRACE_STACKS`): folded stacks for flame graphs.
        if config.stacks().is_some() {
            sinks.push(Box::new(folded_stacks::FoldedStacksSink));
        }
        // The summary goes last: it reports whether the others' files are complete.
        sinks.push(Box::new(trace_summary::SummarySink::new()));
        sinks
    }

    /// Runs `command` under capture and returns its result.
    ///
    /// Fails only before the command runs: when the directory cannot be used,
    /// or the configuration asks for a format this build left out.
    /// Problems while writing are printed on stderr as one-line warnings; they
    /// never change the result.
    pub fn run<T>(self, command: &str, f: impl FnOnce() -> T) -> Result<T, ConfigError> {
        self.run_with_report(command, f).map(|(value, _)| value)
    }

    /// Like [`Capture::run`], also returning what the capture wrote (`None` when off).
    pub fn run_with_report<T>(
        self,
        command: &str,
        f: impl FnOnce() -> T,
    ) -> Result<(T, Option<Report>), ConfigError> {
        let Capture { config, layers } = self;
        // The tool's layers, on a registry of their own: the same dispatcher
        // with capture on (forwarded to) and off (the default).
        let tool = (!layers.is_empty()).then(|| tracing::Dispatch::new(Registry::default().with(layers)));
        let Some(config) = config else {
            let value = match &tool {
                Some(tool) => tracing::dispatcher::with_default(tool, f),
                None => f(),
            };
            return Ok((value, None));
        };
        refuse_left_out(&config, ALL_FORMATS)?;
        for warning in config.warnings() {
            eprintln!("{warning}");
        }
        let sinks = Self::sinks(&config);
        let session = match tool {
            Some(tool) => Session::start_forwarding(&config, command, sinks, Some(tool))?,
            None => Session::start(&config, command, sinks)?,
        };
        let value = session.run(f);
        let report = session.finish();
        for warning in report.warnings() {
            eprintln!("{warning}");
        }
        Ok((value, Some(report)))
    }
}

/// Prepares `cmd` to start a child of the current capture (if any): sets on
/// it, with `Command::env`, `TRACEPARENT` (the family's trace id and the id
/// of the calling thread's current span) and `CABIN_TRACE_PARENT` (the
/// capture's directory and stem, and whether children join). A child that
/// uses these crates, under any prefix, then captures itself into the same
/// directory and family when its own `<P>_TRACE_DIR` is set, or when this
/// capture was started with `<P>_TRACE_CHILDREN=1`. Without a capture, `cmd`
/// is left as it is. The process's own environment is never changed.
///
/// ```
/// let mut cc = std::process::Command::new("cc");
/// cabin_trace::command(&mut cc).arg("--version");
/// assert_eq!(cc.get_envs().count(), 0, "no capture runs here");
/// ```
pub fn command(cmd: &mut std::process::Command) -> &mut std::process::Command {
    if let Some(handle) = trace_core::current() {
        for (name, value) in handle.child_env() {
            cmd.env(name, value);
        }
    }
    cmd
}

/// Runs `command` under capture configured by `CABIN_TRACE_*`.
///
/// `Err` is a refused configuration: print it and exit non-zero; the command
/// did not run. `Ok` holds the command's own result, unchanged.
pub fn run<T>(command: &str, f: impl FnOnce() -> T) -> Result<T, ConfigError> {
    Capture::from_env(CABIN_PREFIX)?.run(command, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(format: &str) -> Config {
        let dir = std::env::temp_dir();
        Config::from_lookup("KACHE", KNOWN_FORMATS, |name| match name {
            "KACHE_TRACE_DIR" => Some(dir.clone().into()),
            "KACHE_TRACE_FORMAT" => Some(format.into()),
            _ => None,
        })
        .unwrap()
        .unwrap()
    }

    #[test]
    fn a_format_the_build_left_out_is_refused_naming_the_variable_the_value_and_the_feature() {
        let error = refuse_left_out(&config("chrome, otlp"), &["chrome", "perfetto"]).unwrap_err();
        assert_eq!(error.variable(), "KACHE_TRACE_FORMAT");
        assert_eq!(error.value(), "chrome,otlp");
        assert_eq!(error.kind(), ErrorKind::Format);
        assert_eq!(
            error.to_string(),
            "KACHE_TRACE_FORMAT=`chrome,otlp`: names `otlp`, a format this build of cabin-trace left out \
             (it writes chrome, perfetto); enable the feature `otlp` of the cabin-trace crate \
             (`cabin-trace = { features = [\"otlp\"] }`), or take `otlp` out of the list"
        );
    }

    #[test]
    fn a_build_without_formats_says_it_writes_only_the_summary() {
        let error = refuse_left_out(&config("perfetto"), &[]).unwrap_err();
        assert!(error.to_string().contains("(it writes only the summary)"), "{error}");
    }

    #[test]
    fn formats_the_build_compiled_in_are_accepted() {
        assert!(refuse_left_out(&config("perfetto,chrome"), &["chrome", "perfetto"]).is_ok());
    }

    #[test]
    fn the_known_formats_are_the_sinks_own_names_and_the_defaults_leave_otlp_out() {
        // The tests build with every format feature (the dev-dependency on itself).
        assert_eq!(ALL_FORMATS, KNOWN_FORMATS);
        assert_eq!(FORMATS, ["chrome", "perfetto"]);
    }
}
