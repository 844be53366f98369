//! Configuration read from the environment under a tool's prefix.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use tracing_core::LevelFilter;
use tracing_subscriber::filter::Targets;

use crate::family::{Family, Inherited, PARENT_VAR};
use crate::filter;

/// The filter used when `<P>_TRACE_FILTER` is unset.
pub const DEFAULT_FILTER: &str = "info";

/// The least severe level whose spans record thread CPU time when
/// `<P>_TRACE_CPU` is unset: phases (`info`, `warn`, `error`) pay for it,
/// per-item `debug` and `trace` spans do not.
pub const DEFAULT_CPU: LevelFilter = LevelFilter::INFO;

/// The interval of the memory and CPU samples when `<P>_TRACE_SAMPLE` is unset.
pub const DEFAULT_SAMPLE: Duration = Duration::from_millis(10);

/// The shortest interval `<P>_TRACE_SAMPLE` accepts.
pub const MIN_SAMPLE: Duration = Duration::from_millis(1);
/// The longest interval `<P>_TRACE_SAMPLE` accepts.
pub const MAX_SAMPLE: Duration = Duration::from_secs(1);

/// The shortest interval `<P>_TRACE_STACKS` accepts.
pub const MIN_STACKS: Duration = Duration::from_millis(1);
/// The longest interval `<P>_TRACE_STACKS` accepts.
pub const MAX_STACKS: Duration = Duration::from_millis(100);

/// A validated capture configuration: where to write, what to keep, which sinks.
///
/// Built by [`Config::from_env`] (or [`Config::from_lookup`] in tests); it holds
/// only values that were checked, so a capture started from it fails only if the
/// file system refuses the directory.
#[derive(Clone, Debug)]
pub struct Config {
    prefix: String,
    dir: PathBuf,
    filter: Targets,
    filter_text: String,
    formats: Vec<String>,
    memory_budget: usize,
    family: Family,
    warnings: Vec<String>,
    cpu: LevelFilter,
    sample: Option<Duration>,
    stacks: Option<Duration>,
}

impl Config {
    /// Reads `<prefix>_TRACE_DIR`, `<prefix>_TRACE_FILTER`, `<prefix>_TRACE_FORMAT`,
    /// `<prefix>_TRACE_CPU`, `<prefix>_TRACE_SAMPLE` and `<prefix>_TRACE_STACKS`.
    ///
    /// Returns `Ok(None)` when `<prefix>_TRACE_DIR` is unset: capture is off,
    /// unless the process was started by a capture that asked its children
    /// to join (`CABIN_TRACE_PARENT` with the children flag `1`): then the
    /// capture writes into the parent's directory. `<prefix>_TRACE_CHILDREN`
    /// (`1` or `0`) says whether this capture's own children join it.
    /// `known_formats` lists the sink names the caller can build; the default
    /// format list is all of them.
    ///
    /// ```
    /// # use trace_core::Config;
    /// // Nothing is set under this prefix, so capture is off.
    /// assert!(Config::from_env("DOCTEST_UNSET", &["chrome"]).unwrap().is_none());
    /// ```
    pub fn from_env(prefix: &str, known_formats: &[&str]) -> Result<Option<Config>, ConfigError> {
        Self::from_lookup(prefix, known_formats, |name| std::env::var_os(name))
    }

    /// Like [`Config::from_env`], reading variables through `lookup` instead of the
    /// process environment.
    ///
    /// ```
    /// # use trace_core::Config;
    /// let err = Config::from_lookup("CABIN", &["chrome"], |name| match name {
    ///     "CABIN_TRACE_DIR" => Some("out".into()),
    ///     "CABIN_TRACE_FILTER" => Some("info,=[".into()),
    ///     _ => None,
    /// })
    /// .unwrap_err();
    /// assert!(err.to_string().starts_with("CABIN_TRACE_FILTER="));
    /// ```
    pub fn from_lookup(
        prefix: &str,
        known_formats: &[&str],
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Option<Config>, ConfigError> {
        Self::from_lookup_with_defaults(prefix, known_formats, known_formats, lookup)
    }

    /// Like [`Config::from_env`], with a default format list of its own:
    /// `default_formats` (a subset of `known_formats`) when `<prefix>_TRACE_FORMAT`
    /// is unset, so a format can be known without being written by default.
    ///
    /// ```
    /// # use trace_core::Config;
    /// let c = Config::from_env_with_defaults("DOCTEST_UNSET", &["chrome", "otlp"], &["chrome"]).unwrap();
    /// assert!(c.is_none());
    /// ```
    pub fn from_env_with_defaults(
        prefix: &str,
        known_formats: &[&str],
        default_formats: &[&str],
    ) -> Result<Option<Config>, ConfigError> {
        Self::from_lookup_with_defaults(prefix, known_formats, default_formats, |name| std::env::var_os(name))
    }

    /// Like [`Config::from_env_with_defaults`], reading variables through `lookup`.
    pub fn from_lookup_with_defaults(
        prefix: &str,
        known_formats: &[&str],
        default_formats: &[&str],
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Option<Config>, ConfigError> {
        let dir_var = format!("{prefix}_TRACE_DIR");
        let filter_var = format!("{prefix}_TRACE_FILTER");
        let format_var = format!("{prefix}_TRACE_FORMAT");
        let children_var = format!("{prefix}_TRACE_CHILDREN");
        let cpu_var = format!("{prefix}_TRACE_CPU");
        let sample_var = format!("{prefix}_TRACE_SAMPLE");
        let stacks_var = format!("{prefix}_TRACE_STACKS");

        // A child joins its parent's capture when its own directory is set,
        // or when the parent asked every child to join.
        let own_dir = lookup(&dir_var);
        let inherited = if own_dir.is_some() || lookup(PARENT_VAR).is_some() {
            Inherited::read(&lookup)
        } else {
            Inherited::default()
        };
        let dir = match (own_dir, &inherited.parent) {
            (Some(dir), _) => dir,
            (None, Some((true, _, parent_dir))) => parent_dir.clone().into_os_string(),
            (None, _) => return Ok(None),
        };
        let children =
            match lookup(&children_var) {
                None => None,
                Some(raw) => match utf8(&children_var, raw, ErrorKind::Children)?.as_str() {
                    "1" => Some(true),
                    "0" => Some(false),
                    other => return Err(ConfigError::new(
                        children_var,
                        other.to_string(),
                        ErrorKind::Children,
                        "expected 1 (children started through cabin_trace::command join this capture) or 0",
                    )),
                },
            };
        if dir.is_empty() {
            return Err(ConfigError::new(
                dir_var,
                String::new(),
                ErrorKind::Directory,
                "expected a directory path to write traces into; unset the variable to turn capture off",
            ));
        }
        let dir = PathBuf::from(dir);
        // One `stat`: a missing directory is created at the start.
        if std::fs::metadata(&dir).is_ok_and(|m| !m.is_dir()) {
            return Err(ConfigError::new(
                dir_var,
                dir.display().to_string(),
                ErrorKind::Directory,
                "is not a directory; expected a directory (created if missing) to write traces into",
            ));
        }

        let (filter, filter_text) = match lookup(&filter_var) {
            None => (
                Targets::from_str(DEFAULT_FILTER).expect("the default filter parses"),
                DEFAULT_FILTER.to_string(),
            ),
            Some(raw) => {
                let text = utf8(&filter_var, raw, ErrorKind::Filter)?;
                match filter::parse(&text) {
                    Ok(parsed) => (parsed.targets, parsed.canonical),
                    Err(why) => {
                        return Err(ConfigError::new(
                            filter_var,
                            text,
                            ErrorKind::Filter,
                            &format!(
                                "{why}; expected target=level directives, e.g. `info,cabin_resolver=debug`"
                            ),
                        ))
                    }
                }
            }
        };

        let formats = match lookup(&format_var) {
            None => default_formats.iter().map(|s| s.to_string()).collect(),
            Some(raw) => {
                let text = utf8(&format_var, raw, ErrorKind::Format)?;
                parse_formats(&text, known_formats).map_err(|why| {
                    ConfigError::new(format_var.clone(), text.clone(), ErrorKind::Format, &why)
                })?
            }
        };

        let cpu = match lookup(&cpu_var) {
            None => DEFAULT_CPU,
            Some(raw) => {
                let text = utf8(&cpu_var, raw, ErrorKind::Cpu)?;
                parse_cpu(&text)
                    .map_err(|why| ConfigError::new(cpu_var, text.clone(), ErrorKind::Cpu, &why))?
            }
        };
        let sample = match lookup(&sample_var) {
            None => Some(DEFAULT_SAMPLE),
            Some(raw) => {
                let text = utf8(&sample_var, raw, ErrorKind::Sample)?;
                parse_interval(&text, MIN_SAMPLE..=MAX_SAMPLE, SAMPLE_EXPECTED)
                    .map_err(|why| ConfigError::new(sample_var, text.clone(), ErrorKind::Sample, &why))?
            }
        };
        let stacks = match lookup(&stacks_var) {
            None => None,
            Some(raw) => {
                let text = utf8(&stacks_var, raw, ErrorKind::Stacks)?;
                parse_interval(&text, MIN_STACKS..=MAX_STACKS, STACKS_EXPECTED)
                    .map_err(|why| ConfigError::new(stacks_var, text.clone(), ErrorKind::Stacks, &why))?
            }
        };

        Ok(Some(Config {
            prefix: prefix.to_string(),
            dir,
            filter,
            filter_text,
            formats,
            memory_budget: crate::buffer::DEFAULT_BUDGET,
            family: inherited.family(children),
            warnings: inherited.warnings,
            cpu,
            sample,
            stacks,
        }))
    }

    /// The prefix the variables were read under, e.g. `CABIN`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The directory traces are written into.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// The filter, as tracing-subscriber `Targets`.
    pub fn filter(&self) -> &Targets {
        &self.filter
    }

    /// The filter's directives as `Targets` received them: the validated
    /// directives of `<P>_TRACE_FILTER`, written canonically (or the default).
    pub fn filter_text(&self) -> &str {
        &self.filter_text
    }

    /// How many bytes of records may wait for the writer; 64 MiB unless set
    /// with [`Config::with_memory_budget`]. A thread whose batch would pass it
    /// waits for the writer to make room (counted in
    /// [`crate::Report::waited_ns`]); only a writer that makes no room within a
    /// second makes the capture drop batches (counted in
    /// [`crate::Report::dropped_records`]) from then on.
    pub fn memory_budget(&self) -> usize {
        self.memory_budget
    }

    /// The same configuration with a memory budget of `bytes` for records
    /// waiting for the writer.
    pub fn with_memory_budget(mut self, bytes: usize) -> Config {
        self.memory_budget = bytes;
        self
    }

    /// The family this capture belongs to: its trace id (inherited from a
    /// well-formed `TRACEPARENT`, or fresh), its parent, and whether its
    /// children join it.
    pub fn family(&self) -> &Family {
        &self.family
    }

    /// The same configuration in `family`.
    pub fn with_family(mut self, family: Family) -> Config {
        self.family = family;
        self
    }

    /// One line per inherited variable that was malformed and ignored
    /// (`TRACEPARENT`, `CABIN_TRACE_PARENT`), ready for stderr.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The selected sink names, in the order given, without duplicates.
    pub fn formats(&self) -> &[String] {
        &self.formats
    }

    /// Whether the sink called `name` is selected.
    pub fn wants(&self, name: &str) -> bool {
        self.formats.iter().any(|f| f == name)
    }

    /// The least severe level whose spans record the thread CPU time spent
    /// inside them (`<P>_TRACE_CPU`; [`DEFAULT_CPU`] when unset):
    /// `LevelFilter::OFF` when no span does.
    pub fn cpu(&self) -> LevelFilter {
        self.cpu
    }

    /// The same configuration with thread CPU time recorded for spans at
    /// `level` and above (`LevelFilter::OFF`: none).
    pub fn with_cpu(mut self, level: LevelFilter) -> Config {
        self.cpu = level;
        self
    }

    /// The interval at which the process's resident memory and CPU are
    /// sampled while the capture runs (`<P>_TRACE_SAMPLE`;
    /// [`DEFAULT_SAMPLE`] when unset), or `None` when sampling is off.
    pub fn sample(&self) -> Option<Duration> {
        self.sample
    }

    /// The same configuration sampling every `interval` (`None`: never).
    pub fn with_sample(mut self, interval: Option<Duration>) -> Config {
        self.sample = interval;
        self
    }

    /// The interval of the sampled CPU call stacks of the capture's threads
    /// (`<P>_TRACE_STACKS`: one sample per this much CPU time of a thread), or
    /// `None` when they are off (the default).
    pub fn stacks(&self) -> Option<Duration> {
        self.stacks
    }

    /// The same configuration sampling CPU stacks every `interval` of a
    /// thread's CPU time (`None`: off).
    pub fn with_stacks(mut self, interval: Option<Duration>) -> Config {
        self.stacks = interval;
        self
    }

    /// The name of the directory variable, e.g. `CABIN_TRACE_DIR`.
    pub fn dir_var(&self) -> String {
        format!("{}_TRACE_DIR", self.prefix)
    }
}

fn utf8(var: &str, raw: OsString, kind: ErrorKind) -> Result<String, ConfigError> {
    raw.into_string().map_err(|raw| {
        ConfigError::new(
            var.to_string(),
            raw.to_string_lossy().into_owned(),
            kind,
            "is not valid UTF-8; expected plain text",
        )
    })
}

fn parse_formats(text: &str, known: &[&str]) -> Result<Vec<String>, String> {
    let expected = format!("expected a comma-separated list of: {}", known.join(", "));
    let mut out: Vec<String> = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(format!("has an empty item; {expected}"));
        }
        if !known.contains(&item) {
            return Err(format!("names an unknown format `{item}`; {expected}"));
        }
        if !out.iter().any(|f| f == item) {
            out.push(item.to_string());
        }
    }
    Ok(out)
}

/// `<P>_TRACE_CPU`: one level name, or `off`, in any case.
fn parse_cpu(text: &str) -> Result<LevelFilter, String> {
    let word = text.trim();
    let expected = format!(
        "expected one level, the least severe whose spans record thread CPU time ({}; default `info`)",
        filter::LEVELS.join(", ")
    );
    if word.is_empty() {
        return Err(format!("is empty; {expected}"));
    }
    match filter::LEVELS.iter().find(|l| l.eq_ignore_ascii_case(word)) {
        Some(level) => LevelFilter::from_str(level).map_err(|e| format!("does not parse ({e}); {expected}")),
        None => Err(format!("is not a level; {expected}; did you mean `{}`?", filter::nearest_level(word))),
    }
}

const SAMPLE_EXPECTED: &str = "expected an interval from `1ms` to `1s` (a whole number followed by `ms` or \
                               `s`, e.g. `10ms`, the default), or `off`";
const STACKS_EXPECTED: &str = "expected an interval of CPU time from `1ms` to `100ms` (a whole number \
                               followed by `ms`, e.g. `1ms`), or `off` (the default)";

/// `<P>_TRACE_SAMPLE` and `<P>_TRACE_STACKS`: `off`, or a whole number of
/// `ms` or `s` within `range`; `expected` ends every refusal.
fn parse_interval(
    text: &str,
    range: std::ops::RangeInclusive<Duration>,
    expected: &str,
) -> Result<Option<Duration>, String> {
    let word = text.trim();
    if word.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let (digits, unit_ms) = if let Some(d) = word.strip_suffix("ms") {
        (d, 1)
    } else if let Some(d) = word.strip_suffix('s') {
        (d, 1000)
    } else {
        return Err(format!("has no unit; {expected}"));
    };
    let digits = digits.trim();
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!("is not a whole number of milliseconds or seconds; {expected}"));
    }
    let interval = digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit_ms))
        .map(Duration::from_millis)
        .filter(|d| range.contains(d))
        .ok_or_else(|| format!("is out of range; {expected}"))?;
    Ok(Some(interval))
}

/// What part of the configuration an error is about.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// `<P>_TRACE_DIR`: missing, not a directory, or not writable.
    Directory,
    /// `<P>_TRACE_FILTER`: not valid directives.
    Filter,
    /// `<P>_TRACE_FORMAT`: an unknown or empty format.
    Format,
    /// `<P>_TRACE_CHILDREN`: neither `1` nor `0`.
    Children,
    /// `<P>_TRACE_CPU`: not a level name or `off`.
    Cpu,
    /// `<P>_TRACE_SAMPLE`: not an interval from 1 ms to 1 s, nor `off`.
    Sample,
    /// `<P>_TRACE_STACKS`: not an interval from 1 ms to 100 ms, nor `off`.
    Stacks,
}

/// A configuration the capture refuses, naming the variable, its value and what
/// is expected. Its `Display` is meant to be printed to the user as is.
#[derive(Clone, Debug)]
pub struct ConfigError {
    variable: String,
    value: String,
    kind: ErrorKind,
    reason: String,
}

impl ConfigError {
    /// An error about `variable` set to `value`; `reason` says what was wrong
    /// and what is expected, and follows `VARIABLE=`value`: ` in the message.
    /// For a front-end that checks more than this crate does (the façade
    /// refuses a format its build left out).
    pub fn new(variable: String, value: String, kind: ErrorKind, reason: &str) -> Self {
        ConfigError { variable, value, kind, reason: reason.to_string() }
    }

    /// The variable the error is about, e.g. `CABIN_TRACE_FILTER`.
    pub fn variable(&self) -> &str {
        &self.variable
    }

    /// The value that was refused.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// What kind of setting was refused.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}=`{}`: {}", self.variable, self.value, self.reason)
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| OsString::from(v))
    }

    #[test]
    fn capture_is_off_when_the_directory_variable_is_unset() {
        assert!(Config::from_lookup("CABIN", &["chrome"], lookup(&[])).unwrap().is_none());
    }

    #[test]
    fn defaults_are_the_info_filter_and_every_format() {
        let c = Config::from_lookup("CABIN", &["chrome", "perfetto"], lookup(&[("CABIN_TRACE_DIR", "d")]))
            .unwrap()
            .unwrap();
        assert_eq!(c.filter_text(), "info");
        assert_eq!(c.formats(), ["chrome", "perfetto"]);
    }

    #[test]
    fn a_known_format_outside_the_defaults_is_written_only_when_asked_for() {
        let known = ["chrome", "perfetto", "otlp"];
        let defaults = ["chrome", "perfetto"];
        let c = Config::from_lookup_with_defaults(
            "CABIN",
            &known,
            &defaults,
            lookup(&[("CABIN_TRACE_DIR", "d")]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.formats(), defaults);
        let vars = [("CABIN_TRACE_DIR", "d"), ("CABIN_TRACE_FORMAT", "otlp,chrome")];
        let c =
            Config::from_lookup_with_defaults("CABIN", &known, &defaults, lookup(&vars)).unwrap().unwrap();
        assert_eq!(c.formats(), ["otlp", "chrome"]);
    }

    #[test]
    fn a_malformed_filter_names_the_variable_its_value_and_the_expected_form() {
        let e = Config::from_lookup(
            "KACHE",
            &["chrome"],
            lookup(&[("KACHE_TRACE_DIR", "d"), ("KACHE_TRACE_FILTER", "info,=[")]),
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Filter);
        let msg = e.to_string();
        assert!(msg.starts_with("KACHE_TRACE_FILTER=`info,=[`"), "{msg}");
        assert!(msg.contains("expected target=level directives"), "{msg}");
    }

    #[test]
    fn a_directive_with_an_empty_side_is_refused() {
        for bad in ["=", "info,=debug", "cabin=", "info, = "] {
            let e = Config::from_lookup(
                "CABIN",
                &["chrome"],
                lookup(&[("CABIN_TRACE_DIR", "d"), ("CABIN_TRACE_FILTER", bad)]),
            )
            .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Filter, "{bad}");
        }
    }

    #[test]
    fn ordinary_directives_are_accepted() {
        for good in
            ["info", "debug", "info,cabin_resolver=debug", "cabin=info", "warn,cabin::build=trace", "off"]
        {
            let c = Config::from_lookup(
                "CABIN",
                &["chrome"],
                lookup(&[("CABIN_TRACE_DIR", "d"), ("CABIN_TRACE_FILTER", good)]),
            );
            assert!(c.is_ok(), "{good}: {:?}", c.err());
        }
    }

    #[test]
    fn an_empty_filter_is_refused() {
        let e = Config::from_lookup(
            "CABIN",
            &["chrome"],
            lookup(&[("CABIN_TRACE_DIR", "d"), ("CABIN_TRACE_FILTER", " ")]),
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Filter);
    }

    #[test]
    fn an_unknown_format_is_refused_with_the_known_ones_listed() {
        let e = Config::from_lookup(
            "CABIN",
            &["chrome", "perfetto"],
            lookup(&[("CABIN_TRACE_DIR", "d"), ("CABIN_TRACE_FORMAT", "chrome,flame")]),
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Format);
        assert!(e.to_string().contains("`flame`"), "{e}");
        assert!(e.to_string().contains("chrome, perfetto"), "{e}");
    }

    #[test]
    fn formats_are_trimmed_and_deduplicated() {
        let c = Config::from_lookup(
            "CABIN",
            &["chrome", "perfetto"],
            lookup(&[("CABIN_TRACE_DIR", "d"), ("CABIN_TRACE_FORMAT", " perfetto , perfetto")]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.formats(), ["perfetto"]);
    }

    #[test]
    fn a_regular_file_as_the_directory_is_refused() {
        let f = tempfile::NamedTempFile::new().unwrap();
        let path = f.path().to_str().unwrap().to_string();
        let e = Config::from_lookup("CABIN", &["chrome"], lookup(&[("CABIN_TRACE_DIR", &path)])).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Directory);
        assert!(e.to_string().starts_with("CABIN_TRACE_DIR="), "{e}");
    }

    #[test]
    fn an_empty_directory_value_is_refused() {
        let e = Config::from_lookup("CABIN", &["chrome"], lookup(&[("CABIN_TRACE_DIR", "")])).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Directory);
    }

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn a_child_joins_its_parents_directory_only_when_the_parent_asks() {
        let asked = [("TRACEPARENT", PARENT), ("CABIN_TRACE_PARENT", "1\tbuild-1-2-3\t/tmp/traces")];
        let c = Config::from_lookup("KACHE", &["chrome"], lookup(&asked)).unwrap().expect("joins");
        assert_eq!(c.dir(), std::path::Path::new("/tmp/traces"));
        assert_eq!(c.family().trace_id_hex(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(c.family().parent_span_id_hex().as_deref(), Some("b7ad6b7169203331"));
        assert_eq!(c.family().parent_stem.as_deref(), Some("build-1-2-3"));
        assert!(c.family().children, "the flag is passed on");
        let not_asked = [("TRACEPARENT", PARENT), ("CABIN_TRACE_PARENT", "0\tbuild-1-2-3\t/tmp/traces")];
        assert!(Config::from_lookup("KACHE", &["chrome"], lookup(&not_asked)).unwrap().is_none());
        let own = [("KACHE_TRACE_DIR", "/tmp/own"), not_asked[0], not_asked[1]];
        let c = Config::from_lookup("KACHE", &["chrome"], lookup(&own)).unwrap().expect("its own directory");
        assert_eq!((c.dir(), c.family().parent_stem.is_some()), (std::path::Path::new("/tmp/own"), true));
    }

    #[test]
    fn the_children_flag_is_1_or_0_and_anything_else_names_the_variable() {
        for (value, children) in [("1", true), ("0", false)] {
            let vars = [("CABIN_TRACE_DIR", "out"), ("CABIN_TRACE_CHILDREN", value)];
            let c = Config::from_lookup("CABIN", &["chrome"], lookup(&vars)).unwrap().unwrap();
            assert_eq!(c.family().children, children);
        }
        let vars = [("CABIN_TRACE_DIR", "out"), ("CABIN_TRACE_CHILDREN", "true")];
        let e = Config::from_lookup("CABIN", &["chrome"], lookup(&vars)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Children);
        assert!(e.to_string().starts_with("CABIN_TRACE_CHILDREN=`true`: expected 1"), "{e}");
    }

    #[test]
    fn a_malformed_context_is_a_warning_and_a_fresh_family() {
        let vars =
            [("CABIN_TRACE_DIR", "out"), ("TRACEPARENT", "00-zz-01"), ("CABIN_TRACE_PARENT", "2\tx\ty")];
        let c = Config::from_lookup("CABIN", &["chrome"], lookup(&vars)).unwrap().unwrap();
        assert_eq!(c.warnings().len(), 2, "{:?}", c.warnings());
        assert!(c.warnings()[0].starts_with("warning: TRACEPARENT=\"00-zz-01\" is ignored"));
        assert!(c.warnings()[1].starts_with("warning: CABIN_TRACE_PARENT="));
        assert!(c.family().parent_span_id.is_none() && c.family().trace_id != [0; 16]);
    }

    fn with(var: &str, value: &str) -> Result<Config, ConfigError> {
        let vars = [("CABIN_TRACE_DIR", "out"), (var, value)];
        Config::from_lookup("CABIN", &["chrome"], lookup(&vars)).map(|c| c.expect("the directory is set"))
    }

    #[test]
    fn cpu_time_is_recorded_for_info_spans_and_above_unless_told_otherwise() {
        let c = Config::from_lookup("CABIN", &["chrome"], lookup(&[("CABIN_TRACE_DIR", "out")]))
            .unwrap()
            .unwrap();
        assert_eq!(c.cpu(), LevelFilter::INFO);
        for (value, level) in [
            ("off", LevelFilter::OFF),
            ("OFF", LevelFilter::OFF),
            ("error", LevelFilter::ERROR),
            (" warn ", LevelFilter::WARN),
            ("Debug", LevelFilter::DEBUG),
            ("trace", LevelFilter::TRACE),
        ] {
            assert_eq!(with("CABIN_TRACE_CPU", value).unwrap().cpu(), level, "{value}");
        }
    }

    #[test]
    fn a_cpu_level_with_a_typo_names_the_variable_the_value_and_the_nearest_level() {
        for (bad, nearest) in
            [("inof", Some("info")), ("debgu", Some("debug")), ("", None), ("info,debug", None)]
        {
            let vars = [("KACHE_TRACE_DIR", "out"), ("KACHE_TRACE_CPU", bad)];
            let e = Config::from_lookup("KACHE", &["chrome"], lookup(&vars)).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Cpu, "{bad}");
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("KACHE_TRACE_CPU=`{bad}`: ")), "{msg}");
            assert!(msg.contains("expected one level"), "{msg}");
            if let Some(nearest) = nearest {
                assert!(msg.contains(&format!("did you mean `{nearest}`")), "{msg}");
            }
        }
    }

    #[test]
    fn the_sample_interval_is_10ms_unless_told_otherwise_and_off_turns_it_off() {
        let c = Config::from_lookup("CABIN", &["chrome"], lookup(&[("CABIN_TRACE_DIR", "out")]))
            .unwrap()
            .unwrap();
        assert_eq!(c.sample(), Some(Duration::from_millis(10)));
        for (value, interval) in [
            ("off", None),
            ("Off", None),
            ("1ms", Some(Duration::from_millis(1))),
            ("250ms", Some(Duration::from_millis(250))),
            (" 1s ", Some(Duration::from_secs(1))),
            ("1000ms", Some(Duration::from_secs(1))),
        ] {
            assert_eq!(with("CABIN_TRACE_SAMPLE", value).unwrap().sample(), interval, "{value}");
        }
    }

    #[test]
    fn a_sample_interval_without_a_unit_or_out_of_range_is_refused_naming_the_variable() {
        for bad in ["10", "0ms", "2s", "1.5ms", "-5ms", "10 us", "ms", "", "10min", "99999999999999999999s"] {
            let e = with("CABIN_TRACE_SAMPLE", bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Sample, "{bad}");
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("CABIN_TRACE_SAMPLE=`{bad}`: ")), "{msg}");
            assert!(msg.contains("expected an interval from `1ms` to `1s`"), "{msg}");
        }
    }

    #[test]
    fn cpu_stacks_are_off_unless_an_interval_from_1ms_to_100ms_is_given() {
        let c = Config::from_lookup("CABIN", &["chrome"], lookup(&[("CABIN_TRACE_DIR", "out")]))
            .unwrap()
            .unwrap();
        assert_eq!(c.stacks(), None);
        for (value, interval) in [
            ("off", None),
            ("1ms", Some(Duration::from_millis(1))),
            (" 20ms ", Some(Duration::from_millis(20))),
            ("100ms", Some(Duration::from_millis(100))),
        ] {
            assert_eq!(with("CABIN_TRACE_STACKS", value).unwrap().stacks(), interval, "{value}");
        }
    }

    #[test]
    fn a_stacks_interval_out_of_range_or_not_an_interval_is_refused_naming_the_variable() {
        for bad in ["0ms", "500ms", "1s", "fast", "1", ""] {
            let e = with("CABIN_TRACE_STACKS", bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Stacks, "{bad}");
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("CABIN_TRACE_STACKS=`{bad}`: ")), "{msg}");
            assert!(msg.contains("expected an interval of CPU time from `1ms` to `100ms`"), "{msg}");
        }
    }
}
