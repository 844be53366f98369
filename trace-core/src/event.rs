//! The event model sinks receive, on the writer thread.
//!
//! The writer thread turns the raw records of every thread into a well-formed
//! stream before a sink sees it: on each thread, every [`Event::SpanEnd`] closes
//! the innermost open [`Event::SpanBegin`], and spans still open when the capture
//! ends are closed at its end with `unclosed: true`. Timestamps are nanoseconds
//! of `CLOCK_MONOTONIC` (Rust's `Instant` on Linux), so traces from several
//! processes of one machine share a time base.

use std::path::PathBuf;

use crate::family::Family;

pub use tracing_core::Level;

/// An operating-system thread id (the `tid` Perfetto and `ps` show).
pub type Tid = u64;

/// A field's value, borrowed for the duration of one event.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    /// A signed integer.
    I64(i64),
    /// An unsigned integer.
    U64(u64),
    /// A floating-point number.
    F64(f64),
    /// A boolean.
    Bool(bool),
    /// Text: a `&str` field, or a value formatted with `Debug` or `Display`.
    Str(&'a str),
}

impl Value<'_> {
    /// The value as an integer, if it is one and fits in `i128`.
    pub fn as_integer(&self) -> Option<i128> {
        match *self {
            Value::I64(v) => Some(v as i128),
            Value::U64(v) => Some(v as i128),
            _ => None,
        }
    }
}

/// A named field of a span or an event.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Field<'a> {
    /// The field's name as written at the call site.
    pub name: &'a str,
    /// Its value.
    pub value: Value<'a>,
}

/// An instant's name holds at most this many characters of its message.
pub const INSTANT_NAME_CHARS: usize = 60;

/// The name of an instant whose message is `message`: its first line, cut to
/// [`INSTANT_NAME_CHARS`] characters on a character boundary, and whether
/// anything was cut (the name then ends with an ellipsis, `…`, which counts
/// in the [`INSTANT_NAME_CHARS`]). `None` for a message whose first line is
/// empty. Every sink that names instants names them by this rule.
///
/// ```
/// use trace_core::instant_name;
///
/// assert_eq!(instant_name("resolved 3 packages"), Some(("resolved 3 packages", false)));
/// assert_eq!(instant_name("two\nlines"), Some(("two", true)));
/// let long = "é".repeat(70);
/// assert_eq!(instant_name(&long), Some((&long[..2 * 59], true)));
/// ```
pub fn instant_name(message: &str) -> Option<(&str, bool)> {
    // Both line ends are ASCII, so the position found is a character boundary.
    let end = message.bytes().position(|b| b == b'\n' || b == b'\r').unwrap_or(message.len());
    let line = &message[..end];
    if line.is_empty() {
        return None;
    }
    match line.char_indices().nth(INSTANT_NAME_CHARS - 1) {
        // A character past the limit: keep one less, for the ellipsis.
        Some((last, _)) if line[last..].chars().nth(1).is_some() => Some((&line[..last], true)),
        _ => Some((line, end < message.len())),
    }
}

/// Where a span or event came from.
///
/// Made by [`Site::of`] for a `tracing` call site, or by [`Site::new`] from
/// strings of any lifetime (read back from a file, built by a sink's test).
/// Two sites are equal when their fields are, however they were made.
#[derive(Clone, Copy, Debug)]
pub struct Site<'a> {
    /// The span or event name.
    pub name: &'a str,
    /// The target (by default the module path).
    pub target: &'a str,
    /// The verbosity level.
    pub level: Level,
    /// The source file of the call site, as `file!()` gives it, when known.
    pub file: Option<&'a str>,
    /// The line of the call site in [`Site::file`], when known.
    pub line: Option<u32>,
    /// See [`Site::has_static_text`].
    static_text: bool,
}

impl<'a> Site<'a> {
    /// A site from borrowed strings. A sink that recognises strings it has
    /// seen by their address confirms each such hit by comparing the text,
    /// since other text may live at that address by now.
    ///
    /// ```
    /// use trace_core::{Level, Site};
    /// let site = Site::new("compile", "cabin::build", Level::INFO, Some("src/build.rs"), Some(12));
    /// assert!(!site.has_static_text());
    /// ```
    pub const fn new(
        name: &'a str,
        target: &'a str,
        level: Level,
        file: Option<&'a str>,
        line: Option<u32>,
    ) -> Self {
        Site { name, target, level, file, line, static_text: false }
    }

    /// Whether this site's strings, and the names of the fields that come with
    /// it in the same event, are a `tracing` call site's: `'static` text that
    /// never changes at its address. A sink may then recognise a string it
    /// has seen by its address and length alone, without comparing the text.
    /// True only for a site made by [`Site::of`]; the writer gives such sites
    /// only the call site's own field names.
    pub const fn has_static_text(&self) -> bool {
        self.static_text
    }
}

impl PartialEq for Site<'_> {
    fn eq(&self, other: &Self) -> bool {
        (self.name, self.target, self.level, self.file, self.line)
            == (other.name, other.target, other.level, other.file, other.line)
    }
}

impl Eq for Site<'_> {}

impl Site<'static> {
    /// The site of a `tracing` callsite: its strings are `'static`
    /// ([`Site::has_static_text`]).
    pub fn of(meta: &'static tracing_core::Metadata<'static>) -> Self {
        Site {
            name: meta.name(),
            target: meta.target(),
            level: *meta.level(),
            file: meta.file(),
            line: meta.line(),
            static_text: true,
        }
    }
}

/// The thread CPU clock ([`crate::os::thread_cpu_ns`]) read at a span's
/// begin and at its end, on the thread it ran on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadCpu {
    /// The reading at the begin, in nanoseconds.
    pub begin_ns: u64,
    /// The reading at the end, in nanoseconds.
    pub end_ns: u64,
}

impl ThreadCpu {
    /// The readings at a span's begin and end. An end read before the begin
    /// (a clock that can step back) is taken as the begin, so that every
    /// format shows the same duration, zero, where the trace processor would
    /// drop a negative one.
    pub fn new(begin_ns: u64, end_ns: u64) -> Self {
        ThreadCpu { begin_ns, end_ns: end_ns.max(begin_ns) }
    }

    /// The CPU time the thread spent inside the span, in nanoseconds (its
    /// children's included, as its wall-clock duration includes them).
    pub fn ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.begin_ns)
    }
}

/// One slice of an external lane: work done outside the traced process (a
/// build action run by Ninja, a test executable), placed on the capture's clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LaneSlice<'a> {
    /// The lane, e.g. `ninja` or `tests`; each lane is drawn as its own process.
    pub lane: &'a str,
    /// The sub-lane (a track within the lane); slices on one sub-lane never overlap.
    pub track: u32,
    /// Start, in monotonic nanoseconds.
    pub begin_ns: u64,
    /// End, in monotonic nanoseconds; never before `begin_ns`.
    pub end_ns: u64,
    /// What ran, e.g. the first output of a build action.
    pub name: &'a str,
    /// Extra details shown with the slice.
    pub fields: &'a [Field<'a>],
}

impl LaneSlice<'_> {
    /// The pid the lane is drawn under, in both trace formats: a process of
    /// its own, one per lane, numbered above the kernel's pids (below 2^22 on
    /// Linux) from the tool's `pid`, so that the lanes of the processes of a
    /// family never meet. `index` is the lane's place among the capture's
    /// lanes, in the order they first appeared.
    pub fn lane_pid(pid: u32, index: usize) -> u64 {
        u64::from(pid) + (1u64 << 22) * (index as u64 + 1)
    }

    /// The thread id of this slice's sub-lane within its lane's process
    /// (tids start at 1: 0 is no thread to a viewer).
    pub fn sub_lane_tid(&self) -> u64 {
        u64::from(self.track) + 1
    }

    /// The name of this slice's sub-lane, e.g. `ninja 0`.
    pub fn sub_lane_name(&self) -> String {
        format!("{} {}", self.lane, self.track)
    }
}

/// What an external lane's source reported, for the summary.
#[derive(Clone, Debug, PartialEq)]
pub struct LaneReport {
    /// The lane, e.g. `ninja`.
    pub lane: String,
    /// How many slices (actions, test executables) were placed.
    pub slices: u64,
    /// `None` when the lane's data was read; otherwise why it is unavailable.
    pub unavailable: Option<String>,
    /// Notes about the data, e.g. that a failed action is absent.
    pub notes: Vec<String>,
    /// How far the lane's times may be off the capture's clock, in nanoseconds.
    pub alignment_uncertainty_ns: u64,
}

/// One item of the capture's event stream.
#[non_exhaustive]
#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    /// A thread's name, given once before the thread's first span or instant.
    ThreadName {
        /// The thread.
        thread: Tid,
        /// Its name (`main`, the `std::thread` name, or `thread-<tid>`).
        name: &'a str,
    },
    /// A span was entered on a thread.
    SpanBegin {
        /// The thread.
        thread: Tid,
        /// When, in monotonic nanoseconds.
        ts: u64,
        /// The span's call site.
        site: Site<'a>,
        /// The fields known when it was entered.
        fields: &'a [Field<'a>],
        /// The thread's CPU clock when it was entered, in nanoseconds, for
        /// spans at the levels `<P>_TRACE_CPU` selects; `None` otherwise.
        thread_cpu_ns: Option<u64>,
    },
    /// The innermost open span of a thread was exited.
    SpanEnd {
        /// The thread.
        thread: Tid,
        /// When, in monotonic nanoseconds.
        ts: u64,
        /// When the matching [`Event::SpanBegin`] was.
        begin_ts: u64,
        /// The span's call site.
        site: Site<'a>,
        /// Every field value the span holds at its end.
        fields: &'a [Field<'a>],
        /// The fields recorded while it was open (after its begin).
        recorded: &'a [Field<'a>],
        /// True when the span did not end by itself: still open when the capture
        /// finished, or its end was lost with a dropped batch.
        unclosed: bool,
        /// The thread's CPU clock at the begin and at the end, for spans at
        /// the levels `<P>_TRACE_CPU` selects that ended by themselves;
        /// `None` otherwise.
        cpu: Option<ThreadCpu>,
    },
    /// A `tracing` event: a point in time.
    Instant {
        /// The thread.
        thread: Tid,
        /// When, in monotonic nanoseconds.
        ts: u64,
        /// The event's call site.
        site: Site<'a>,
        /// Its fields, `message` included.
        fields: &'a [Field<'a>],
    },
    /// A span that ran in pieces: entered more than once, or on more than one
    /// thread (an `.instrument()`ed future, a span moved to another thread).
    /// Its whole life, from its first enter to its close, for a track of its
    /// own; its pieces are [`Event::SpanBegin`]/[`Event::SpanEnd`] pairs on the
    /// threads that ran them, as for any span.
    ///
    /// Sent once, at its close (or at the finish), so after its pieces: its
    /// times are earlier than those of the events sent just before it.
    AsyncSpan {
        /// Numbers the capture's async spans, from 1.
        id: u64,
        /// The thread of its first enter.
        thread: Tid,
        /// Its first enter, in monotonic nanoseconds.
        begin_ts: u64,
        /// Its close (never before the end of its last piece), or the finish.
        end_ts: u64,
        /// The span's call site.
        site: Site<'a>,
        /// Every field value the span holds at its end.
        fields: &'a [Field<'a>],
        /// True when it was still open at the finish.
        unclosed: bool,
    },
    /// A flow leaves the slice open innermost on `thread` at `ts`.
    FlowOut {
        /// Numbers the capture's flows, from 1; the [`Event::FlowIn`] of the
        /// same number follows.
        flow: u64,
        /// What links the two ends.
        kind: FlowKind,
        /// The source's thread.
        thread: Tid,
        /// When, in monotonic nanoseconds.
        ts: u64,
    },
    /// Flow `flow` arrives on `thread` at `ts`.
    FlowIn {
        /// The number of its [`Event::FlowOut`].
        flow: u64,
        /// What links the two ends.
        kind: FlowKind,
        /// The target's thread.
        thread: Tid,
        /// When, in monotonic nanoseconds.
        ts: u64,
        /// True when the flow arrives at the slice whose [`Event::SpanBegin`]
        /// is the thread's next event, at `ts`; false when it arrives in the
        /// slice open innermost on `thread` at `ts` (a span that was already
        /// running when it was linked).
        at_begin: bool,
    },
    /// A slice of an external lane.
    Lane(LaneSlice<'a>),
    /// What an external lane's source reported (sent once per lane).
    LaneReport(&'a LaneReport),
    /// A sample of the process's resident memory and CPU time, taken every
    /// `<P>_TRACE_SAMPLE` interval while the capture runs (and once at its
    /// start and finish). Samples come in time order among themselves, not
    /// necessarily among the spans' events.
    ProcessSample(ProcessSample),
}

/// One reading of the process's resident memory and CPU time, taken by the
/// capture's sampler (`<P>_TRACE_SAMPLE`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessSample {
    /// When, in monotonic nanoseconds.
    pub ts: u64,
    /// The process's resident set (its working set on Windows), in bytes;
    /// `None` where it could not be read.
    pub resident_bytes: Option<u64>,
    /// CPU time (user and system, every thread) the process has used since
    /// it started, in nanoseconds; `None` where it could not be read.
    pub cpu_ns: Option<u64>,
}

impl ProcessSample {
    /// The CPU the process used between `earlier` and this sample, in
    /// percent of one core (200 is two cores busy), rounded to tenths of a
    /// percent (as fine as a millisecond's interval resolves), so that every
    /// format shows the same value; `None` when either lacks its CPU time or
    /// no time passed.
    pub fn cpu_percent_since(&self, earlier: &ProcessSample) -> Option<f64> {
        let cpu = self.cpu_ns?.checked_sub(earlier.cpu_ns?)?;
        let wall = self.ts.checked_sub(earlier.ts).filter(|ns| *ns > 0)?;
        Some((cpu as f64 * 1000.0 / wall as f64).round() / 10.0)
    }
}

/// What a flow links.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowKind {
    /// A helper started with [`crate::spawn`] or [`crate::bind`]: from the
    /// span open where it was started to the helper's first span.
    Spawn,
    /// A span that `follows_from` another: from the origin to the follower.
    FollowsFrom,
}

impl FlowKind {
    /// The flow's name in the files: `spawn` or `follows_from`.
    pub fn as_str(self) -> &'static str {
        match self {
            FlowKind::Spawn => "spawn",
            FlowKind::FollowsFrom => "follows_from",
        }
    }
}

/// Facts about the capture, given to each sink before the first event.
///
/// It will gain fields, so it is `#[non_exhaustive]`: make one with
/// `Start::default()` and set the fields you know.
#[non_exhaustive]
#[derive(Clone, Debug, Default)]
pub struct Start<'a> {
    /// The command being captured, e.g. `build`.
    pub command: &'a str,
    /// The file stem, `<command>-<unix-ms>-<pid>-<seq>`.
    pub stem: &'a str,
    /// The process id.
    pub pid: u32,
    /// Wall-clock start of the capture, in milliseconds since the Unix epoch.
    pub start_unix_ms: u64,
    /// Start of the capture, in monotonic nanoseconds.
    pub start_ns: u64,
    /// Time from the tool's image start (its exec) to the capture's start, in
    /// microseconds, or from its process's creation where the image start is
    /// not recorded ([`crate::os::startup_since`] says which); `None` where
    /// neither is known.
    pub startup_us: Option<u64>,
    /// The filter in force, as text.
    pub filter: &'a str,
    /// The capture's family (trace id, parent span and stem), when known.
    pub family: Option<&'a Family>,
}

/// What a figure counts from: the tool's image (its exec), or the creation of
/// its process, which is earlier when the process exec'd (`cargo run` execs
/// the tool it built).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Since {
    /// From the start of the tool's image: its exec, or its process's creation
    /// if it did not exec.
    ImageStart,
    /// From the creation of the process, before any exec.
    ProcessCreation,
}

/// CPU time and peak memory, stating whose and over what interval.
///
/// A figure is `None` where the platform does not read it
/// ([`crate::os::missing`] says which). CPU times are differences of two
/// readings, so nothing a process did before an exec is counted as the
/// tool's; peaks are never summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// User CPU time of the tool's process (every thread) during the capture, in microseconds.
    pub self_user_us: Option<u64>,
    /// System CPU time of the tool's process (every thread) during the capture, in microseconds.
    pub self_system_us: Option<u64>,
    /// Peak resident set of the tool's process, in KiB, since [`Resources::self_max_rss_since`].
    pub self_max_rss_kib: Option<u64>,
    /// What `self_max_rss_kib` counts from: the image start (always on
    /// Linux), or the process's creation (macOS, after an exec that left a
    /// larger peak than the tool reached).
    pub self_max_rss_since: Option<Since>,
    /// User CPU time of the tool from its image start to the capture's start, in microseconds.
    pub startup_user_us: Option<u64>,
    /// System CPU time of the tool from its image start to the capture's start, in microseconds.
    pub startup_system_us: Option<u64>,
    /// User CPU time the process had used when the tool's image started, in
    /// microseconds: what ran in it before an exec (cargo, for `cargo run`)
    /// and the dynamic loader. Not the tool's.
    pub pre_exec_user_us: Option<u64>,
    /// System CPU time the process had used when the tool's image started, in
    /// microseconds. Not the tool's.
    pub pre_exec_system_us: Option<u64>,
    /// User CPU time of every child process the tool's process waited for
    /// during the capture (and of the children they waited for), in microseconds.
    pub children_user_us: Option<u64>,
    /// System CPU time of the same children, in microseconds.
    pub children_system_us: Option<u64>,
    /// How many children the capture's helpers ran and waited for with their
    /// usage ([`crate::Handle::child_exited`]).
    pub waited_children: Option<u64>,
    /// User CPU time of those children, summed, in microseconds.
    pub waited_children_user_us: Option<u64>,
    /// System CPU time of those children, summed, in microseconds.
    pub waited_children_system_us: Option<u64>,
    /// Peak resident set of the largest of those children (or of the
    /// processes they waited for), in KiB; `None` when there were none.
    pub largest_child_max_rss_kib: Option<u64>,
}

/// The fate of one file of the capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStatus {
    /// The sink that wrote it.
    pub sink: String,
    /// The final path (the file is `<path>.partial` until it is complete).
    pub path: PathBuf,
    /// True when every byte was written; false leaves only the `.partial` file.
    pub complete: bool,
    /// The first error, when incomplete.
    pub error: Option<String>,
}

/// Facts about the end of the capture, given to each sink's `finish`.
///
/// It will gain fields, so it is `#[non_exhaustive]`: make one with
/// `Finish::default()` and set the fields you know.
#[non_exhaustive]
#[derive(Clone, Debug, Default)]
pub struct Finish<'a> {
    /// End of the capture, in monotonic nanoseconds.
    pub end_ns: u64,
    /// Records lost because the writer fell behind (counted, never hidden).
    pub dropped_records: u64,
    /// Spans still open at the finish: their [`Event::SpanEnd`] came with
    /// `unclosed: true` at the finish's time.
    pub unclosed_spans: u64,
    /// The files of the sinks finished before this one.
    pub files: &'a [FileStatus],
    /// CPU and memory of the tool and of its children, over the capture.
    pub resources: Resources,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule as it reads: split on either line end, count characters.
    fn instant_name_by_chars(message: &str) -> Option<(&str, bool)> {
        let line = message.split(['\n', '\r']).next().unwrap_or("");
        if line.is_empty() {
            return None;
        }
        Some(match line.char_indices().nth(INSTANT_NAME_CHARS) {
            Some(_) => {
                let end = line.char_indices().nth(INSTANT_NAME_CHARS - 1).map_or(line.len(), |(i, _)| i);
                (&line[..end], true)
            }
            None => (line, line.len() < message.len()),
        })
    }

    #[test]
    fn an_instant_name_is_what_counting_characters_gives() {
        let pieces = ["", "a", "é", "€", "🦀", "\n", "\r", "\r\n", " ", "xxxxxxx"];
        let mut checked = 0;
        for len in [0usize, 1, 2, 30, 58, 59, 60, 61, 62, 90, 130, 250] {
            for (i, p) in pieces.iter().enumerate() {
                for (j, q) in pieces.iter().enumerate() {
                    // `len` times one piece, with the other before, after or between.
                    let body: String = std::iter::repeat_n(*p, len).collect();
                    for m in [format!("{body}{q}"), format!("{q}{body}"), format!("{body}{q}{body}")] {
                        assert_eq!(instant_name(&m), instant_name_by_chars(&m), "{i} {j} {len}: {m:?}");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 3_000, "{checked}");
    }
}
