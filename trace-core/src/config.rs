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
        let var = |name: &str| format!("{prefix}_TRACE_{name}");
        let dir_var = var("DIR");

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
        let children = read(&lookup, var("CHILDREN"), ErrorKind::Children, |text| match text {
            "1" => Ok(true),
            "0" => Ok(false),
            _ => Err(CHILDREN_EXPECTED.to_string()),
        })?;
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
        let (filter, filter_text) = read(&lookup, var("FILTER"), ErrorKind::Filter, |text| {
            filter::parse(text).map_err(|why| {
                format!("{why}; expected target=level directives, e.g. `info,cabin_resolver=debug`")
            })
        })?
        .unwrap_or_else(|| filter::parse(DEFAULT_FILTER).expect("the default filter parses"));
        let formats =
            read(&lookup, var("FORMAT"), ErrorKind::Format, |text| parse_formats(text, known_formats))?
                .unwrap_or_else(|| default_formats.iter().map(|s| s.to_string()).collect());
        let cpu = read(&lookup, var("CPU"), ErrorKind::Cpu, parse_cpu)?.unwrap_or(DEFAULT_CPU);
        let sample = read(&lookup, var("SAMPLE"), ErrorKind::Sample, |text| {
            parse_interval(text, MIN_SAMPLE..=MAX_SAMPLE, SAMPLE_EXPECTED)
        })?
        .unwrap_or(Some(DEFAULT_SAMPLE));
        let stacks = read(&lookup, var("STACKS"), ErrorKind::Stacks, |text| {
            parse_interval(text, MIN_STACKS..=MAX_STACKS, STACKS_EXPECTED)
        })?
        .flatten();

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
    /// with [`Config::with_memory_budget`]. Past it a thread waits for the
    /// writer ([`crate::Report::waited_ns`]); only a writer that makes no room
    /// within a second has batches dropped ([`crate::Report::dropped_records`]).
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

/// The value of `var`, read through `lookup` as UTF-8 text and parsed;
/// `None` when it is unset. A refusal names the variable and its value.
fn read<T>(
    lookup: &impl Fn(&str) -> Option<OsString>,
    var: String,
    kind: ErrorKind,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<Option<T>, ConfigError> {
    let Some(raw) = lookup(&var) else { return Ok(None) };
    let text = match raw.into_string() {
        Ok(text) => text,
        Err(raw) => {
            let value = raw.to_string_lossy().into_owned();
            return Err(ConfigError::new(var, value, kind, "is not valid UTF-8; expected plain text"));
        }
    };
    match parse(&text) {
        Ok(value) => Ok(Some(value)),
        Err(why) => Err(ConfigError::new(var, text, kind, &why)),
    }
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

const CHILDREN_EXPECTED: &str =
    "expected 1 (children started through cabin_trace::command join this capture) or 0";
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
    //! The reading of each variable; tests/it/bad_input.rs and
    //! tests/it/filter_props.rs try every kind of value against it.

    use super::*;

    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| OsString::from(v))
    }

    /// A configuration under `CABIN` with the directory and `vars` set.
    fn with_all(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: Vec<_> = [("CABIN_TRACE_DIR", "out")].into_iter().chain(vars.iter().copied()).collect();
        Config::from_lookup("CABIN", &["chrome", "perfetto"], lookup(&vars))
            .map(|c| c.expect("the directory is set"))
    }

    fn with(var: &str, value: &str) -> Result<Config, ConfigError> {
        with_all(&[(var, value)])
    }

    /// The error for `var` set to `value`, checked to name both.
    fn refused(var: &str, value: &str, kind: ErrorKind) -> String {
        let e = with(var, value).unwrap_err();
        assert_eq!(e.kind(), kind, "{value}");
        let msg = e.to_string();
        assert!(msg.starts_with(&format!("{var}=`{value}`: ")), "{msg}");
        msg
    }

    #[test]
    fn capture_is_off_when_the_directory_variable_is_unset() {
        assert!(Config::from_lookup("CABIN", &["chrome"], lookup(&[])).unwrap().is_none());
    }

    #[test]
    fn defaults_are_the_info_filter_every_format_cpu_at_info_samples_every_10ms_and_no_stacks() {
        let c = with_all(&[]).unwrap();
        assert_eq!(c.filter_text(), "info");
        assert_eq!(c.formats(), ["chrome", "perfetto"]);
        assert_eq!(c.cpu(), LevelFilter::INFO);
        assert_eq!(c.sample(), Some(Duration::from_millis(10)));
        assert_eq!(c.stacks(), None);
    }

    #[test]
    fn a_known_format_outside_the_defaults_is_written_only_when_asked_for() {
        let known = ["chrome", "perfetto", "otlp"];
        let defaults = ["chrome", "perfetto"];
        let read = |vars: &[(&str, &str)]| {
            Config::from_lookup_with_defaults("CABIN", &known, &defaults, lookup(vars)).unwrap().unwrap()
        };
        assert_eq!(read(&[("CABIN_TRACE_DIR", "d")]).formats(), defaults);
        let asked = read(&[("CABIN_TRACE_DIR", "d"), ("CABIN_TRACE_FORMAT", "otlp,chrome")]);
        assert_eq!(asked.formats(), ["otlp", "chrome"]);
    }

    #[test]
    fn a_malformed_filter_names_the_variable_its_value_and_the_expected_form() {
        let msg = refused("CABIN_TRACE_FILTER", "info,=[", ErrorKind::Filter);
        assert!(msg.contains("expected target=level directives"), "{msg}");
    }

    #[test]
    fn formats_are_trimmed_and_deduplicated_and_an_unknown_one_is_refused_with_the_known_ones_listed() {
        assert_eq!(with("CABIN_TRACE_FORMAT", " perfetto , perfetto").unwrap().formats(), ["perfetto"]);
        let msg = refused("CABIN_TRACE_FORMAT", "chrome,flame", ErrorKind::Format);
        assert!(msg.contains("`flame`") && msg.contains("chrome, perfetto"), "{msg}");
    }

    #[test]
    fn a_regular_file_or_an_empty_value_as_the_directory_is_refused() {
        let f = tempfile::NamedTempFile::new().unwrap();
        let path = f.path().to_str().unwrap().to_string();
        for value in [path.as_str(), ""] {
            let e =
                Config::from_lookup("CABIN", &["chrome"], lookup(&[("CABIN_TRACE_DIR", value)])).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Directory);
            assert!(e.to_string().starts_with(&format!("CABIN_TRACE_DIR=`{value}`")), "{e}");
        }
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
            assert_eq!(with("CABIN_TRACE_CHILDREN", value).unwrap().family().children, children);
        }
        let msg = refused("CABIN_TRACE_CHILDREN", "true", ErrorKind::Children);
        assert!(msg.contains(": expected 1"), "{msg}");
    }

    #[test]
    fn a_malformed_context_is_a_warning_and_a_fresh_family() {
        let c = with_all(&[("TRACEPARENT", "00-zz-01"), ("CABIN_TRACE_PARENT", "2\tx\ty")]).unwrap();
        assert_eq!(c.warnings().len(), 2, "{:?}", c.warnings());
        assert!(c.warnings()[0].starts_with("warning: TRACEPARENT=\"00-zz-01\" is ignored"));
        assert!(c.warnings()[1].starts_with("warning: CABIN_TRACE_PARENT="));
        assert!(c.family().parent_span_id.is_none() && c.family().trace_id != [0; 16]);
    }

    #[test]
    fn a_cpu_level_names_the_least_severe_level_whose_spans_read_the_clock() {
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
            let msg = refused("CABIN_TRACE_CPU", bad, ErrorKind::Cpu);
            assert!(msg.contains("expected one level"), "{msg}");
            if let Some(nearest) = nearest {
                assert!(msg.contains(&format!("did you mean `{nearest}`")), "{msg}");
            }
        }
    }

    #[test]
    fn cpu_stacks_take_an_interval_from_1ms_to_100ms_or_off() {
        for (value, interval) in [
            ("off", None),
            ("1ms", Some(Duration::from_millis(1))),
            (" 20ms ", Some(Duration::from_millis(20))),
            ("100ms", Some(Duration::from_millis(100))),
        ] {
            assert_eq!(with("CABIN_TRACE_STACKS", value).unwrap().stacks(), interval, "{value}");
        }
        for bad in ["0ms", "500ms", "1s", "fast", "1", ""] {
            let msg = refused("CABIN_TRACE_STACKS", bad, ErrorKind::Stacks);
            assert!(msg.contains("expected an interval of CPU time from `1ms` to `100ms`"), "{msg}");
        }
    }
}
