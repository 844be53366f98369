//! The model of `<stem>.timings.json`, format 3, field by field.
//!
//! Each struct may gain fields as the format does (a new field does not
//! change `format_version`), so they are `#[non_exhaustive]`: read them
//! field by field, and make them by reading a file ([`Timings::from_path`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use trace_core::Since;

/// The whole report. Every duration is in microseconds and every size in KiB,
/// as the field names say.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// The format's version: 3 (2 lacks `stacks`; 1 counted a child's peak
    /// from before an exec, and lacks `start_ns` and the family's fields).
    pub format_version: u32,
    /// The command that was captured, e.g. `build`.
    pub command: String,
    /// The files' stem, `<command>-<unix-ms>-<pid>-<seq>`.
    pub stem: String,
    /// The tool's process id.
    pub pid: u32,
    /// Start of the capture, in milliseconds since the Unix epoch (wall clock).
    pub start_unix_ms: u64,
    /// Start of the capture on CLOCK_MONOTONIC, in nanoseconds: the clock
    /// every capture of one machine shares (0 in a format-1 file).
    #[serde(default)]
    pub start_ns: u64,
    /// The family's trace id, 32 hex digits: the same in every capture of a
    /// tool and the tools it started (empty in a format-1 file).
    #[serde(default)]
    pub trace_id: String,
    /// The stem of the capture of the process that started this one, when
    /// it was started by a capture.
    #[serde(default)]
    pub parent_stem: Option<String>,
    /// The id (16 hex digits) of the parent's span that started this
    /// process, from its `TRACEPARENT`.
    #[serde(default)]
    pub parent_span_id: Option<String>,
    /// Wall time of the command: from the capture's start to its end, on the
    /// monotonic clock, in microseconds. The capture's root covers the command's
    /// whole run, so this is the root span's wall time.
    pub wall_us: u64,
    /// Time from the start of the tool's image (its exec) to the capture's
    /// start, in microseconds; where the image start is not recorded, from the
    /// creation of its process, which includes whatever ran in the process
    /// before an exec (`startup_since` says which). `null` where neither is known.
    pub startup_us: Option<u64>,
    /// What `startup_us` counts from: `image_start` or `process_creation`;
    /// `null` with `startup_us`.
    pub startup_since: Option<String>,
    /// The resolution of `startup_us`, in microseconds: 1 from the image start;
    /// from the process's creation, Linux's clock tick (usually 10,000).
    pub startup_resolution_us: u64,
    /// The `<P>_TRACE_FILTER` in force.
    pub filter: String,
    /// True when every trace file was written whole and nothing was dropped.
    pub trace_complete: bool,
    /// The trace files of this capture (not this summary itself).
    pub files: Vec<TraceFile>,
    /// Records lost because the writer fell behind; 0 when none.
    pub dropped_records: u64,
    /// Per span name and target, sorted by `total_us`, largest first.
    pub spans: Vec<SpanTotals>,
    /// How many `tracing` events (instants) were recorded.
    pub events: u64,
    /// CPU time and peak memory, stating whose.
    pub resources: ResourceSummary,
    /// The Ninja actions of the run.
    pub ninja: Ninja,
    /// Other external lanes (such as `tests`), by lane name.
    pub lanes: BTreeMap<String, Lane>,
    /// The sampled CPU stacks (`<P>_TRACE_STACKS`): whether they were taken,
    /// their counts, and per span name its samples and top functions (`off`
    /// in a format-2 file).
    #[serde(default)]
    pub stacks: StackSummary,
}

/// The sampled CPU stacks of the capture (`<P>_TRACE_STACKS`).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackSummary {
    /// `off` (not asked for), `on` (sampled), or `unavailable` (asked for,
    /// but the system or the build could not sample: `reason` says why).
    pub status: String,
    /// The interval: one sample per this much CPU time of a thread, in
    /// microseconds; `null` when off.
    pub interval_us: Option<u64>,
    /// Why stacks are unavailable (`unavailable` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Samples taken.
    pub samples_taken: u64,
    /// Samples the kernel dropped because a ring buffer was full.
    pub samples_lost: u64,
    /// Samples whose stack was not unwound to the thread's start (their
    /// folded lines start with `[not unwound]`).
    pub samples_not_unwound: u64,
    /// Threads of the capture the kernel refused to sample.
    pub threads_not_sampled: u64,
    /// Wall time the sampler's symbolizer thread spent symbolizing (while
    /// the command ran and at the finish), in microseconds.
    pub symbolization_us: u64,
    /// CPU time of the sampler's reader thread (reading and unwinding every
    /// sample), in microseconds.
    pub reader_cpu_us: u64,
    /// Per span name, the samples taken inside it, most first.
    pub spans: Vec<SpanStacks>,
}

/// The samples of one span name.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanStacks {
    /// The span's name.
    pub name: String,
    /// Samples taken while a span of this name was open on the sampled
    /// thread (counted once however deeply the name nests).
    pub samples: u64,
    /// The functions those samples were executing (their leaf frames), most
    /// first: at most five.
    pub top_functions: Vec<FunctionSamples>,
}

/// A function and how many samples it was executing.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionSamples {
    /// The function, demangled (`my_crate::parse::lex`).
    pub function: String,
    /// Samples whose leaf frame it is.
    pub self_samples: u64,
}

impl Default for StackSummary {
    /// Stacks off.
    fn default() -> Self {
        StackSummary {
            status: crate::format::STACKS_OFF.to_string(),
            interval_us: None,
            reason: None,
            samples_taken: 0,
            samples_lost: 0,
            samples_not_unwound: 0,
            threads_not_sampled: 0,
            symbolization_us: 0,
            reader_cpu_us: 0,
            spans: Vec::new(),
        }
    }
}

impl StackSummary {
    /// The summary of what a capture's stacks sinks received.
    pub fn from_stacks(stacks: &trace_core::CpuStacks) -> StackSummary {
        let status = match (&stacks.interval, &stacks.unavailable) {
            (None, _) => crate::format::STACKS_OFF,
            (Some(_), Some(_)) => crate::format::STACKS_UNAVAILABLE,
            (Some(_), None) => crate::format::STACKS_ON,
        };
        StackSummary {
            status: status.to_string(),
            interval_us: stacks.interval.map(|d| d.as_micros() as u64),
            reason: stacks.unavailable.clone(),
            samples_taken: stacks.taken,
            samples_lost: stacks.lost,
            samples_not_unwound: stacks.not_unwound,
            threads_not_sampled: stacks.threads_refused,
            symbolization_us: stacks.symbolization_time.as_micros() as u64,
            reader_cpu_us: stacks.reader_cpu_time.as_micros() as u64,
            spans: stacks
                .spans
                .iter()
                .map(|s| SpanStacks {
                    name: s.name.clone(),
                    samples: s.samples,
                    top_functions: s
                        .top_functions
                        .iter()
                        .map(|(f, n)| FunctionSamples { function: f.clone(), self_samples: *n })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// One trace file of the capture.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceFile {
    /// The sink that wrote it: `chrome` or `perfetto`.
    pub format: String,
    /// Its file name, in the capture directory. While incomplete, the file on
    /// disk is this name with `.partial` appended.
    pub file: String,
    /// True when every byte was written.
    pub complete: bool,
    /// The first write error, when incomplete.
    pub error: Option<String>,
}

/// Totals of one span name (and target).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpanTotals {
    /// The span's name.
    pub name: String,
    /// Its target (by default the module path).
    pub target: String,
    /// How many times a span of this name was entered and exited (each a slice
    /// in the trace).
    pub count: u64,
    /// The sum of the slices' inclusive lifetimes, in microseconds: summed over
    /// threads and nesting, so it is not elapsed time and may exceed `wall_us`.
    pub total_inclusive_us: u64,
    /// The sum of the thread CPU time spent inside the slices, in
    /// microseconds, labelled like `total_inclusive_us`: inclusive (a
    /// slice's CPU time includes its children's) and summed over threads and
    /// nesting, so it is not the process's CPU time. Only slices at the levels
    /// `<P>_TRACE_CPU` selects that ended by themselves carry one; absent (or
    /// `null`) when none of this name did, and in files written before it
    /// existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_inclusive_thread_cpu_us: Option<u64>,
    /// How many of the slices were still open when the capture ended (closed at
    /// its end) or lost their end with dropped records.
    pub unclosed: u64,
    /// The sum of each integer field over the slices, by field name (work
    /// counters: requests, rounds, cache hits).
    pub field_sums: BTreeMap<String, i128>,
}

/// CPU and memory, each figure stating whose and over what interval:
/// trace-core's [`trace_core::Resources`], whose docs give each figure, and
/// what this platform does not read. In the file, one object: the figures
/// (durations in microseconds, sizes in KiB, as their names say; `null` where
/// the platform does not read one), then `missing`. CPU figures are
/// differences of two readings, so what a process did before it exec'd the
/// tool is never counted as the tool's; peaks are never summed.
/// `self_max_rss_since` is `image_start` or `process_creation`.
#[non_exhaustive]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceSummary {
    /// The capture's figures.
    #[serde(flatten, with = "ResourcesJson")]
    pub figures: trace_core::Resources,
    /// What this platform does not read, when some figures are `null` for that reason.
    pub missing: Option<String>,
}

/// How [`trace_core::Resources`] is written: its fields in its order, under
/// their own names (serde's remote derive, which checks each name and type
/// against trace-core's at compile time).
#[derive(Serialize, Deserialize)]
#[serde(remote = "trace_core::Resources")]
struct ResourcesJson {
    self_user_us: Option<u64>,
    self_system_us: Option<u64>,
    self_max_rss_kib: Option<u64>,
    #[serde(with = "since_name")]
    self_max_rss_since: Option<Since>,
    startup_user_us: Option<u64>,
    startup_system_us: Option<u64>,
    pre_exec_user_us: Option<u64>,
    pre_exec_system_us: Option<u64>,
    children_user_us: Option<u64>,
    children_system_us: Option<u64>,
    waited_children: Option<u64>,
    waited_children_user_us: Option<u64>,
    waited_children_system_us: Option<u64>,
    largest_child_max_rss_kib: Option<u64>,
}

/// A [`Since`] as the file names it ([`crate::format::SINCE_IMAGE_START`],
/// [`crate::format::SINCE_PROCESS_CREATION`]).
pub(crate) mod since_name {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};
    use trace_core::Since;

    use crate::format::{SINCE_IMAGE_START, SINCE_PROCESS_CREATION};

    /// The name of `since`.
    pub(crate) fn name(since: Since) -> &'static str {
        match since {
            Since::ImageStart => SINCE_IMAGE_START,
            Since::ProcessCreation => SINCE_PROCESS_CREATION,
        }
    }

    pub(crate) fn serialize<S: Serializer>(since: &Option<Since>, s: S) -> Result<S::Ok, S::Error> {
        match since {
            Some(since) => s.serialize_some(name(*since)),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Since>, D::Error> {
        match Option::<String>::deserialize(d)?.as_deref() {
            None => Ok(None),
            Some(SINCE_IMAGE_START) => Ok(Some(Since::ImageStart)),
            Some(SINCE_PROCESS_CREATION) => Ok(Some(Since::ProcessCreation)),
            Some(other) => Err(D::Error::custom(format!(
                "`{other}`: expected `{SINCE_IMAGE_START}` or `{SINCE_PROCESS_CREATION}`"
            ))),
        }
    }
}

/// What the capture knows of Ninja's actions in this run.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ninja {
    /// `not_run`, `available` or `unavailable`.
    pub status: String,
    /// How many actions the run's log delta holds (`available` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actions: Option<u64>,
    /// Why the actions are unavailable (`unavailable` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How far the actions' placement may be off: the time from spawning Ninja
    /// to its first action, which Ninja spends loading the manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alignment_uncertainty_us: Option<u64>,
    /// Notes, e.g. that a failed action is absent from the log.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Ninja {
    /// The value for a command that ran no Ninja.
    pub fn not_run() -> Ninja {
        Ninja {
            status: crate::format::NINJA_NOT_RUN.to_string(),
            actions: None,
            reason: None,
            alignment_uncertainty_us: None,
            notes: Vec::new(),
        }
    }
}

/// What an external lane (other than Ninja) holds.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lane {
    /// How many slices (e.g. test executables) it holds.
    pub slices: u64,
    /// Why it is incomplete or unavailable, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// Notes from its source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}
