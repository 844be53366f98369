//! Starting and finishing one capture, and reaching it from inside the command.

use std::fs::{self, OpenOptions};
use std::io::{self, BufWriter};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use parking_lot::Mutex;
use tracing::dispatcher::{self, Dispatch};
use tracing_subscriber::layer::{Layer, SubscriberExt};
use tracing_subscriber::Registry;

use crate::buffer::{Handoff, Msg, Threads};
use crate::capture::{Core, ROOT_TARGET};
use crate::config::{Config, ConfigError, ErrorKind};
use crate::event::{Field, FileStatus, LaneReport, LaneSlice};
use crate::family::{self, Family};
use crate::layer::{CaptureFilter, CaptureLayer, HideRoot};
use crate::os::{self, Usage};
use crate::record::{CaptureClock, OwnedLane, OwnedValue};
use crate::sink::{CheckedWriter, Sink};
use crate::subscriber::CaptureSubscriber;
use crate::writer::{Ended, Outcome, Pending, SinkFile, StartOwned, Writer, WriterCell};

/// Emptied batches the writer keeps for the threads to reuse.
const RECYCLED_BATCHES: usize = 64;

/// Messages (lane slices and reports, samples, batches) that may wait in the
/// channel for the finish before a lane message starts the writer thread.
const LANE_BACKLOG: usize = 256;

/// The suffix of a file that is still being written.
pub const PARTIAL_SUFFIX: &str = ".partial";

static NEXT_SEQ: AtomicU64 = AtomicU64::new(1);

/// Turns a command name into something safe in a file name.
fn file_safe(command: &str) -> String {
    let s: String = command
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .take(64)
        .collect();
    if s.is_empty() {
        "command".to_string()
    } else {
        s
    }
}

/// The stem `<command>-<unix-ms>-<pid>-<seq>` of a new capture's files.
pub fn new_stem(command: &str, unix_ms: u64) -> String {
    let seq = NEXT_SEQ.fetch_add(1, Ordering::Relaxed);
    format!("{}-{}-{}-{}", file_safe(command), unix_ms, std::process::id(), seq)
}

/// Creates `partial`, which must not exist yet.
fn create_partial(partial: &Path) -> io::Result<fs::File> {
    OpenOptions::new().write(true).create_new(true).open(partial)
}

fn partial_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(PARTIAL_SUFFIX);
    PathBuf::from(s)
}

/// A running capture. Created by [`Session::start`]; the command runs inside
/// [`Session::in_scope`]; [`Session::finish`] writes and renames the files.
///
/// Dropping a session without finishing it (a panic unwinding through the
/// command) finishes it quietly, so its files are still completed.
#[must_use = "a session records nothing unless the command runs in `in_scope`, and dropping it finishes the capture"]
pub struct Session {
    core: Arc<Core>,
    dispatch: Dispatch,
    command: String,
    finished: bool,
    partials: Vec<PathBuf>,
    usage_start: Usage,
    /// The capture's place with the sampler, when `<P>_TRACE_SAMPLE` is not `off` and its thread runs.
    sampler: Option<crate::sampler::Sampler>,
    /// Why the sampler thread did not start, for the report.
    sampler_error: Option<String>,
    /// The interval of the CPU stacks (`<P>_TRACE_STACKS`), when asked for.
    stacks: Option<std::time::Duration>,
    /// Why the CPU stacks could not be sampled, for the report and the summary.
    stacks_error: Option<String>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("stem", &self.core.stem).finish_non_exhaustive()
    }
}

impl Session {
    /// Starts a capture of `command` with `sinks`, in the order given.
    ///
    /// Creates the directory if needed and every sink's `.partial` file; if any
    /// of that fails, removes what it created and returns an error naming the
    /// directory variable, before the command runs.
    ///
    /// The dispatcher is a subscriber of the capture's own, with no
    /// `tracing_subscriber::Registry` underneath: it supports everything
    /// `tracing` asks of a subscriber (span ids, cloned and moved spans,
    /// `Span::current()`), but offers no `LookupSpan` to layers. Everything it
    /// receives that the calling thread's default dispatcher (the tool's own
    /// logging, typically a global `fmt` subscriber) enables is forwarded to
    /// that dispatcher, so the tool prints what it prints without capture. A
    /// call site whose interest from that dispatcher is `never` is not
    /// forwarded at all (a registry whose layers all have per-layer filters
    /// answers `enabled` with yes even for those), until interest is rebuilt.
    pub fn start(config: &Config, command: &str, sinks: Vec<Box<dyn Sink>>) -> Result<Session, ConfigError> {
        let current = dispatcher::get_default(|d| d.clone());
        let inner = (!current.is::<tracing_core::subscriber::NoSubscriber>()).then_some(current);
        Self::start_forwarding(config, command, sinks, inner)
    }

    /// Like [`Session::start`], forwarding to `inner` (or to nothing) instead
    /// of the calling thread's default dispatcher.
    pub fn start_forwarding(
        config: &Config,
        command: &str,
        sinks: Vec<Box<dyn Sink>>,
        inner: Option<Dispatch>,
    ) -> Result<Session, ConfigError> {
        let filter = config.filter().clone();
        Self::start_inner(config, command, sinks, move |core| {
            Dispatch::new(CaptureSubscriber::new(core, filter, inner))
        })
    }

    /// Starts a capture recorded by a [`CaptureLayer`] on a
    /// `tracing_subscriber::Registry`, composed with `layer` (the tool's own,
    /// which does not see the capture's root span). The other front-end of
    /// the same record protocol as [`Session::start`], for tools that need a
    /// registry's `LookupSpan`; its files are the same.
    pub fn start_with_layer<L>(
        config: &Config,
        command: &str,
        sinks: Vec<Box<dyn Sink>>,
        layer: L,
    ) -> Result<Session, ConfigError>
    where
        L: Layer<Registry> + Send + Sync + 'static,
    {
        let targets = config.filter().clone();
        Self::start_inner(config, command, sinks, move |core| {
            let capture = CaptureLayer { core }.with_filter(CaptureFilter { targets });
            Dispatch::new(Registry::default().with(layer.with_filter(HideRoot)).with(capture))
        })
    }

    fn start_inner(
        config: &Config,
        command: &str,
        sinks: Vec<Box<dyn Sink>>,
        dispatch: impl FnOnce(Arc<Core>) -> Dispatch,
    ) -> Result<Session, ConfigError> {
        let dir_error = |what: String| {
            ConfigError::new(
                config.dir_var(),
                config.dir().display().to_string(),
                ErrorKind::Directory,
                &what,
            )
        };
        let start_unix_ms = os::unix_ms();
        let stem = new_stem(command, start_unix_ms);
        let mut files: Vec<SinkFile> = Vec::with_capacity(sinks.len());
        let mut partials = Vec::with_capacity(sinks.len());
        for sink in sinks {
            let path = config.dir().join(format!("{stem}.{}", sink.suffix()));
            let partial = partial_path(&path);
            // No `stat` of the directory first: in the usual case, where it
            // exists, creating the first file is the only check it needs.
            let created = match create_partial(&partial) {
                Err(e) if e.kind() == io::ErrorKind::NotFound && files.is_empty() => {
                    fs::create_dir_all(config.dir()).map_err(|e| {
                        dir_error(format!("cannot be created ({e}); expected a writable directory"))
                    })?;
                    create_partial(&partial)
                }
                other => other,
            };
            match created {
                Ok(file) => {
                    files.push(SinkFile {
                        sink,
                        // Small: the trace sinks gather their own 32-64 KiB
                        // before they write, which then passes this buffer by
                        // instead of being copied into it; it only gathers
                        // the small writes (the summary, the starts).
                        out: CheckedWriter::new(BufWriter::with_capacity(16 * 1024, file)),
                        path,
                        error: None,
                    });
                    partials.push(partial);
                }
                Err(e) => {
                    drop(files);
                    for p in &partials {
                        let _ = fs::remove_file(p);
                    }
                    return Err(dir_error(format!(
                        "cannot be written: creating {} failed ({e}); expected a writable directory",
                        partial.display()
                    )));
                }
            }
        }

        let (tx, rx) = crossbeam_channel::unbounded();
        let (recycle_tx, recycle_rx) = crossbeam_channel::bounded(RECYCLED_BATCHES);
        let start = StartOwned {
            command: command.to_string(),
            stem: stem.clone(),
            pid: std::process::id(),
            start_unix_ms,
            startup_us: os::startup_us(),
            filter: config.filter_text().to_string(),
            family: config.family().clone(),
        };
        let clock = CaptureClock::start();
        let base = Instant::now();
        let threads = Arc::new(Threads::new(clock, Handoff::new(tx, recycle_rx, config.memory_budget())));
        let pending = Pending { rx, recycle: recycle_tx, sinks: files, start };
        let core = Arc::new(Core {
            writer: WriterCell::new(threads.clone(), pending),
            threads,
            base,
            lane_tracks: Mutex::new(Vec::new()),
            children: Default::default(),
            family: config.family().clone(),
            dir: config.dir().to_path_buf(),
            stem,
            cpu: config.cpu(),
        });
        let dispatch = dispatch(core.clone());
        let (sampler, sampler_error) = match config.sample() {
            None => (None, None),
            Some(interval) => match crate::sampler::Sampler::start(interval, core.threads.handoff.tx.clone())
            {
                Ok(s) => (Some(s), None),
                // The capture goes on without memory and CPU counters, and says so.
                Err(e) => (None, Some(e.to_string())),
            },
        };
        // The stacks sampler starts before any thread records, so each
        // joins it as it registers; without it the command runs the same.
        let stacks_error = config.stacks().and_then(|interval| core.threads.stacks.start(interval).err());
        Ok(Session {
            core,
            dispatch,
            command: command.to_string(),
            finished: false,
            partials,
            usage_start: Usage::now(),
            sampler,
            sampler_error,
            stacks: config.stacks(),
            stacks_error,
        })
    }

    /// The capture's dispatcher, to hand to threads the command starts.
    pub fn dispatch(&self) -> &Dispatch {
        &self.dispatch
    }

    /// The stem of this capture's files.
    pub fn stem(&self) -> &str {
        &self.core.stem
    }

    /// The capture's family: its trace id, and its parent when it has one.
    pub fn family(&self) -> &Family {
        &self.core.family
    }

    /// Runs `f` with this capture as the thread's default dispatcher.
    pub fn in_scope<T>(&self, f: impl FnOnce() -> T) -> T {
        dispatcher::with_default(&self.dispatch, f)
    }

    /// Runs the command `f` inside this capture's root span (`command`, with
    /// the command's name as a field, target [`ROOT_TARGET`]): recorded
    /// whatever the filter, never shown to the tool's own subscriber or layers.
    pub fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        self.in_scope(|| {
            let _root =
                tracing::info_span!(target: ROOT_TARGET, "command", command = %self.command).entered();
            f()
        })
    }

    /// Hands the calling thread's buffered records to the writer and waits (up
    /// to a second) until the writer has processed everything sent so far,
    /// starting the writer thread if needed (at once back if the system
    /// refuses it). Not needed for correctness ([`Session::finish`] collects
    /// every thread's records): it bounds what is held in memory, and lets a
    /// test observe a steady state.
    pub fn flush(&self) {
        self.core.threads.flush_local();
        // A writer thread that could not start answers nothing: do not wait for it.
        if !self.core.writer.ensure_started() {
            return;
        }
        let (tx, rx) = crossbeam_channel::bounded(1);
        if self.core.threads.handoff.tx.send(Msg::Sync(tx)).is_ok() {
            let _ = rx.recv_timeout(std::time::Duration::from_secs(1));
        }
    }

    /// Ends the capture: closes open spans, finishes every sink, joins the
    /// writer thread, and renames each complete file from `.partial`.
    pub fn finish(mut self) -> Report {
        self.finish_inner()
    }

    fn finish_inner(&mut self) -> Report {
        if std::mem::replace(&mut self.finished, true) {
            return Report { stem: self.core.stem.clone(), ..Report::default() };
        }
        // Its last sample comes before the end.
        if let Some(mut sampler) = self.sampler.take() {
            sampler.stop();
        }
        let end_rel = self.core.threads.clock.rel_now();
        let resources = Usage::now().since(&self.usage_start, &self.core.children);
        // Stopped and symbolized here, before the sinks finish.
        let stacks = self.core.threads.stacks.finish(self.stacks, self.stacks_error.clone());
        let outcome = match self.core.writer.end() {
            Ended::Thread(writer) => {
                let _ = self.core.threads.handoff.tx.send(Msg::Finish {
                    end_rel,
                    resources,
                    stacks: Box::new(stacks),
                });
                writer.join().ok().flatten()
            }
            // Nothing was ever sent: the records are all in the threads'
            // buffers, and this thread turns them into the files.
            Ended::Inline(pending) => {
                let threads = self.core.threads.clone();
                panic::catch_unwind(AssertUnwindSafe(|| {
                    Writer::start(threads, pending).finish(end_rel, resources, stacks)
                }))
                .ok()
            }
            Ended::Gone => None,
        };
        let unclosed_spans = outcome.as_ref().map_or(0, |o| o.unclosed_spans);
        let mut files = outcome.map(|o: Outcome| o.files).unwrap_or_else(|| {
            self.partials
                .iter()
                .map(|p| FileStatus {
                    sink: String::new(),
                    path: p.with_extension(""),
                    complete: false,
                    error: Some("the trace writer panicked".to_string()),
                })
                .collect()
        });
        for f in files.iter_mut().filter(|f| f.complete) {
            if let Err(e) = fs::rename(partial_path(&f.path), &f.path) {
                f.complete = false;
                f.error = Some(format!("renaming it from {PARTIAL_SUFFIX} failed: {e}"));
            }
        }
        let handoff = &self.core.threads.handoff;
        Report {
            stem: self.core.stem.clone(),
            files,
            dropped_records: handoff.dropped.load(Ordering::Relaxed),
            unclosed_spans,
            late_records: handoff.late.load(Ordering::Relaxed),
            waited_ns: handoff.waited_ns.load(Ordering::Relaxed),
            sampler_error: self.sampler_error.take(),
            stacks_error: self.stacks_error.take(),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.finish_inner();
        }
    }
}

/// What a finished capture wrote. It will gain fields (`#[non_exhaustive]`);
/// [`Session::finish`] makes it.
#[non_exhaustive]
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The files' stem.
    pub stem: String,
    /// Every file, in the sinks' order, complete or not.
    pub files: Vec<FileStatus>,
    /// Records lost because the writer fell behind past the memory budget.
    pub dropped_records: u64,
    /// Spans still open when the capture finished: written as ending at the
    /// finish, marked unclosed.
    pub unclosed_spans: u64,
    /// Records that arrived while the capture was finishing, after it had
    /// taken its threads' last records (a thread the command left running):
    /// not written. Records arriving after [`Session::finish`] returned are
    /// not counted anywhere.
    pub late_records: u64,
    /// Nanoseconds the command's threads spent, all together, waiting for the
    /// trace writer to make room under the memory budget
    /// ([`crate::Config::with_memory_budget`]); 0 when the writer kept up.
    pub waited_ns: u64,
    /// Why the sampler of memory and CPU (`<P>_TRACE_SAMPLE`) could not
    /// start its thread: the trace then has no such counters. `None` when it
    /// ran or was off.
    pub sampler_error: Option<String>,
    /// Why the CPU stacks asked for (`<P>_TRACE_STACKS`) could not be
    /// sampled: the trace then has none. `None` when they ran or were off.
    pub stacks_error: Option<String>,
}

impl Report {
    /// True when every file is complete, nothing was dropped or late, and
    /// every span was closed.
    pub fn is_complete(&self) -> bool {
        self.dropped_records == 0
            && self.unclosed_spans == 0
            && self.late_records == 0
            && self.files.iter().all(|f| f.complete)
    }

    /// One line per problem, ready for stderr; empty when the capture is complete.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for f in self.files.iter().filter(|f| !f.complete) {
            out.push(format!(
                "warning: trace file {} is incomplete: {}",
                partial_path(&f.path).display(),
                f.error.as_deref().unwrap_or("unknown error")
            ));
        }
        if self.dropped_records > 0 {
            out.push(format!(
                "warning: {} trace records were dropped because the trace writer fell behind",
                self.dropped_records
            ));
        }
        if self.unclosed_spans > 0 {
            out.push(format!(
                "warning: {} spans were still open when the trace finished; they end at the finish, marked unclosed",
                self.unclosed_spans
            ));
        }
        if let Some(e) = &self.sampler_error {
            out.push(format!(
                "warning: the trace has no memory and CPU counters: their sampler thread did not start ({e})"
            ));
        }
        if let Some(e) = &self.stacks_error {
            out.push(format!("warning: the trace has no CPU stacks: {e}"));
        }
        if self.late_records > 0 {
            out.push(format!(
                "warning: {} trace records arrived after the trace finished and were not written",
                self.late_records
            ));
        }
        out
    }
}

/// A handle on the capture the calling thread records into, for code that adds
/// external lanes (Ninja's actions, test executables) to it.
#[derive(Clone)]
pub struct Handle {
    core: Arc<Core>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle").field("capture_id", &self.core.threads.capture_id).finish()
    }
}

/// The capture the calling thread records into, if any.
///
/// ```
/// assert!(trace_core::current().is_none());
/// ```
pub fn current() -> Option<Handle> {
    dispatcher::get_default(|d| d.downcast_ref::<Arc<Core>>().map(|core| Handle { core: core.clone() }))
}

impl Handle {
    /// Now, on the capture's clock (monotonic nanoseconds).
    pub fn now_ns(&self) -> u64 {
        self.core.threads.clock.base_mono_ns + self.core.threads.clock.rel_now()
    }

    /// The capture's clock reading for `instant`.
    pub fn instant_ns(&self, instant: Instant) -> u64 {
        let base = self.core.base;
        let base_ns = self.core.threads.clock.base_mono_ns;
        if instant >= base {
            base_ns + (instant - base).as_nanos() as u64
        } else {
            base_ns.saturating_sub((base - instant).as_nanos() as u64)
        }
    }

    /// Picks the track of `lane` for a slice from `begin_ns` to `end_ns`: the
    /// first whose last slice has ended by `begin_ns`, or a new one. Slices
    /// placed in order of their begin never overlap on a track.
    pub fn place(&self, lane: &str, begin_ns: u64, end_ns: u64) -> u32 {
        let mut lanes = self.core.lane_tracks.lock();
        let i = match lanes.iter().position(|(n, _)| n == lane) {
            Some(i) => i,
            None => {
                lanes.push((lane.to_string(), Vec::new()));
                lanes.len() - 1
            }
        };
        let tracks = &mut lanes[i].1;
        let track = match tracks.iter().position(|end| *end <= begin_ns) {
            Some(t) => t,
            None => {
                tracks.push(0);
                tracks.len() - 1
            }
        };
        tracks[track] = end_ns.max(begin_ns);
        track as u32
    }

    /// The capture's family: its trace id, and its parent when it has one.
    pub fn family(&self) -> &Family {
        &self.core.family
    }

    /// The stem of the capture's files.
    pub fn stem(&self) -> &str {
        &self.core.stem
    }

    /// The variables to set on a child process started now, on this thread,
    /// so that it knows its family: `TRACEPARENT` (the trace id and a stable
    /// id of the thread's current span) and `CABIN_TRACE_PARENT` (this
    /// capture's directory and stem, and whether children join). Set them
    /// with `Command::env`: the process's own environment is never changed.
    pub fn child_env(&self) -> [(&'static str, String); 2] {
        let span = tracing::Span::current().id().map_or(0, |id| id.into_u64());
        let id = family::span_id(&self.core.family, &self.core.stem, span);
        family::child_env(&self.core.family, id, &self.core.stem, &self.core.dir)
    }

    /// Adds one slice to an external lane.
    pub fn lane_slice(&self, slice: &LaneSlice<'_>) {
        let fields =
            slice.fields.iter().map(|f: &Field<'_>| (f.name.to_string(), OwnedValue::from_value(&f.value)));
        self.send(Msg::Lane(OwnedLane {
            lane: slice.lane.to_string(),
            track: slice.track,
            begin_ns: slice.begin_ns,
            end_ns: slice.end_ns,
            name: slice.name.to_string(),
            fields: fields.collect(),
        }));
    }

    /// Adds a child process that the command ran and waited for to the
    /// capture's figures: its CPU to the waited children's sum, its peak to
    /// their largest.
    pub fn child_exited(&self, usage: &os::ChildUsage) {
        self.core.children.add(usage);
    }

    /// Says what an external lane's source reported, for the summary.
    pub fn lane_report(&self, report: LaneReport) {
        self.send(Msg::LaneReport(report));
    }

    /// Sends `msg` to the writer. Never blocks. A short command that runs one
    /// child sends two messages, which cost the finish less than starting
    /// the writer thread for them: only from [`LANE_BACKLOG`] waiting messages
    /// on is the thread started (if it cannot be, the finish takes them).
    fn send(&self, msg: Msg) {
        let tx = &self.core.threads.handoff.tx;
        if tx.len() >= LANE_BACKLOG {
            self.core.writer.ensure_started();
        }
        if tx.send(msg).is_err() {
            self.core.threads.handoff.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Wraps `f` so that it runs with the calling thread's current dispatcher,
/// wherever it runs: hand the result to `std::thread::spawn`, a scoped thread or
/// a pool, and its spans land in the same capture, on their own thread's lane.
///
/// ```
/// let task = trace_core::bind(|| 1 + 1);
/// assert_eq!(std::thread::spawn(task).join().unwrap(), 2);
/// ```
///
/// Under a capture, the span open on the calling thread is linked by a flow to
/// the first span the wrapped closure enters: the trace draws an arrow from the
/// work that started the helper to the helper's work.
pub fn bind<T, F: FnOnce() -> T>(f: F) -> impl FnOnce() -> T {
    let dispatch = dispatcher::get_default(|d| d.clone());
    let flow = dispatch.downcast_ref::<Arc<Core>>().map(|core| {
        let flow = crate::capture::FLOWS.fetch_add(1, Ordering::Relaxed);
        core.flow_out(flow);
        flow
    });
    move || {
        dispatcher::with_default(&dispatch, || {
            if let (Some(flow), Some(core)) = (flow, dispatch.downcast_ref::<Arc<Core>>()) {
                core.flow_in(flow);
            }
            f()
        })
    }
}

/// Spawns a named thread that records into the calling thread's capture.
///
/// ```
/// let h = trace_core::spawn("fetch", || 42).unwrap();
/// assert_eq!(h.join().unwrap(), 42);
/// ```
pub fn spawn<T, F>(name: impl Into<String>, f: F) -> std::io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    std::thread::Builder::new().name(name.into()).spawn(bind(f))
}
