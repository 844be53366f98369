//! External lanes: a build's actions as Ninja logged them, and test
//! executables, placed on the capture's clock; and the children's usage.

use std::io;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::Instant;

use ninja_log::{Delta, Snapshot};
use trace_core::{ChildUsage, Field, LaneReport, LaneSlice, Value};

/// The lane Ninja's actions are drawn in.
pub const NINJA_LANE: &str = "ninja";
/// The lane test executables are drawn in.
pub const TESTS_LANE: &str = "tests";
/// The lane of the other child processes run with [`run_child`].
pub const CHILDREN_LANE: &str = "children";

/// What one Ninja run did, as its log says.
#[derive(Debug)]
pub struct NinjaRun {
    /// Ninja's exit status.
    pub status: ExitStatus,
    /// The actions this run added to `.ninja_log`, or why they are unknown.
    pub delta: Delta,
    /// Wall time from spawning Ninja to its exit, in microseconds.
    pub wall_us: u64,
    /// How far the actions' placement may be off, in microseconds (see [`run_ninja`]).
    pub alignment_uncertainty_us: u64,
    /// What Ninja and the actions it waited for used (`None` on Windows).
    pub usage: Option<ChildUsage>,
}

/// Waits for a child process the command started, like [`Child::wait`], and
/// adds what it used to the current capture (if any): its CPU to the waited
/// children's, its peak resident set to their largest. Only children waited
/// for this way (and by [`run_ninja`] and [`run_test`]) count towards the
/// summary's `largest_child_max_rss_kib`.
///
/// On Unix the wait is `wait4`; on Windows a plain wait, and no usage.
///
/// ```
/// # #[cfg(unix)] {
/// let child = std::process::Command::new("true").spawn()?;
/// assert!(cabin_trace::wait_child(child)?.success());
/// # }
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn wait_child(child: Child) -> io::Result<ExitStatus> {
    wait_and_report(child).map(|(status, _)| status)
}

fn wait_and_report(child: Child) -> io::Result<(ExitStatus, Option<ChildUsage>)> {
    let (status, usage) = crate::child::wait_with_usage(child)?;
    if let (Some(h), Some(u)) = (trace_core::current(), usage) {
        h.child_exited(&u);
    }
    Ok((status, usage))
}

/// The usage fields of a span or slice: CPU and peak of the child.
fn usage_fields(usage: &ChildUsage) -> [Field<'static>; 3] {
    [
        Field { name: "user_us", value: Value::U64(usage.user_us) },
        Field { name: "system_us", value: Value::U64(usage.system_us) },
        Field { name: "max_rss_kib", value: Value::U64(usage.max_rss_kib) },
    ]
}

/// Runs Ninja and reads the actions it logged, adding them to the current
/// capture (if any) as the `ninja` lane.
///
/// `log` is the build's `.ninja_log` (in Ninja's build directory). Its
/// contents are kept before Ninja starts and only what this run added is read:
/// a no-op build has zero actions, not the last build's. When the log cannot be
/// followed (another Ninja version rewrote it, a `-t restat` rewrote it, ...)
/// the delta is unavailable with a reason, never zero actions.
///
/// Ninja's action times count from its own start, which the caller cannot
/// read; actions are placed from the instant Ninja was spawned. The true start
/// is later by at most the time between the last action's end and Ninja's exit
/// as seen here, which is reported as the alignment uncertainty.
///
/// The command's standard streams are whatever `cmd` says (inherited by
/// default). Ninja and its actions get the capture's context in their
/// environment, as [`crate::command`] sets it. Fails only if Ninja cannot be
/// started or waited for.
///
/// ```no_run
/// let mut ninja = std::process::Command::new("ninja");
/// ninja.arg("-C").arg("build");
/// let run = cabin_trace::run_ninja(&mut ninja, "build/.ninja_log")?;
/// println!("{} actions", run.delta.actions().map_or(0, |a| a.len()));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn run_ninja(cmd: &mut Command, log: impl AsRef<Path>) -> io::Result<NinjaRun> {
    let log = log.as_ref();
    let _span = tracing::info_span!(
        target: "cabin_trace",
        "run_ninja",
        actions = tracing::field::Empty,
        user_us = tracing::field::Empty,
        system_us = tracing::field::Empty,
        max_rss_kib = tracing::field::Empty,
    )
    .entered();
    crate::command(cmd);
    let snapshot = Snapshot::take(log);
    let spawned = Instant::now();
    let (status, usage) = wait_and_report(cmd.spawn()?)?;
    let wall_ns = spawned.elapsed().as_nanos() as u64;
    if let Some(u) = &usage {
        _span.record("user_us", u.user_us);
        _span.record("system_us", u.system_us);
        _span.record("max_rss_kib", u.max_rss_kib);
    }
    let delta = match snapshot {
        Ok(s) => s.delta(log).with_exit_status(status.success()),
        Err(e) => Delta::unavailable(format!("the log before the run could not be read: {e}")),
    };
    let handle = trace_core::current();
    let mut uncertainty_ns = wall_ns;
    if let Some(actions) = delta.actions() {
        _span.record("actions", actions.len() as u64);
        // Epochs (clock restarts after a manifest regeneration) follow each other.
        let mut epoch_base_ms = 0;
        let mut epoch_end_ms = 0;
        let mut current_epoch = 0;
        let mut placed: Vec<(u64, u64, &ninja_log::Action)> = Vec::with_capacity(actions.len());
        for a in actions {
            if a.epoch != current_epoch {
                current_epoch = a.epoch;
                epoch_base_ms = epoch_end_ms;
            }
            let begin_ms = epoch_base_ms + a.start_ms;
            let end_ms = epoch_base_ms + a.end_ms;
            epoch_end_ms = epoch_end_ms.max(end_ms);
            placed.push((begin_ms, end_ms, a));
        }
        uncertainty_ns = wall_ns.saturating_sub(epoch_end_ms * 1_000_000);
        if let Some(h) = &handle {
            let base = h.instant_ns(spawned);
            placed.sort_by_key(|(b, e, _)| (*b, *e));
            for (begin_ms, end_ms, a) in placed {
                let (begin_ns, end_ns) = (base + begin_ms * 1_000_000, base + end_ms * 1_000_000);
                let outputs = a.outputs.join(" ");
                let fields = [
                    Field { name: "outputs", value: Value::Str(&outputs) },
                    Field { name: "duration_ms", value: Value::U64(a.duration_ms()) },
                    Field { name: "hash", value: Value::Str(&a.hash) },
                ];
                let name = a.outputs.first().map(String::as_str).unwrap_or("?");
                h.lane_slice(&LaneSlice {
                    lane: NINJA_LANE,
                    track: h.place(NINJA_LANE, begin_ns, end_ns),
                    begin_ns,
                    end_ns,
                    name,
                    fields: &fields,
                });
            }
        }
    }
    if let Some(h) = &handle {
        h.lane_report(LaneReport {
            lane: NINJA_LANE.to_string(),
            slices: delta.actions().map_or(0, |a| a.len() as u64),
            unavailable: delta.reason().map(str::to_string),
            notes: delta.notes().to_vec(),
            alignment_uncertainty_ns: uncertainty_ns,
        });
    }
    Ok(NinjaRun {
        status,
        delta,
        wall_us: wall_ns / 1000,
        alignment_uncertainty_us: uncertainty_ns / 1000,
        usage,
    })
}

/// Runs a test executable to completion, capturing its output, and adds it to
/// the current capture (if any) as a slice of the `tests` lane named after
/// the executable, with its exit code and (on Unix) its CPU and peak
/// resident set, which also count towards the capture's children (see
/// [`wait_child`]).
///
/// Its standard input is closed and its standard output and error are
/// captured, whatever `cmd` set for them.
///
/// The executable gets the capture's context in its environment, as
/// [`crate::command`] sets it.
///
/// ```no_run
/// let out = cabin_trace::run_test(&mut std::process::Command::new("build/unit_tests"))?;
/// assert!(out.status.success());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn run_test(cmd: &mut Command) -> io::Result<Output> {
    let name = program_name(cmd);
    let _span = tracing::info_span!(target: "cabin_trace", "run_test", test = %name).entered();
    run_on_lane(cmd, TESTS_LANE, &name)
}

/// Runs any child process to completion, capturing its output, and adds it
/// to the current capture (if any) as a slice of the `children` lane named
/// after the program, with its exit code and (on Unix) its CPU and peak
/// resident set, which also count towards the capture's children (see
/// [`wait_child`]): a compiler, a linker, a code generator the command waits
/// for. It opens no span of its own: the command's span around the call says
/// why the child ran.
///
/// Its standard input is closed and its standard output and error are
/// captured, whatever `cmd` set for them; the child gets the capture's
/// context in its environment, as [`crate::command`] sets it.
///
/// ```
/// # #[cfg(unix)] {
/// let out = cabin_trace::run_child(std::process::Command::new("echo").arg("hi"))?;
/// assert_eq!(out.stdout, b"hi\n");
/// # }
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn run_child(cmd: &mut Command) -> io::Result<Output> {
    let name = program_name(cmd);
    run_on_lane(cmd, CHILDREN_LANE, &name)
}

/// The file name of `cmd`'s program (all of it when it has none).
fn program_name(cmd: &Command) -> String {
    Path::new(cmd.get_program())
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| cmd.get_program().to_string_lossy().into_owned())
}

/// Runs `cmd` to completion and adds it to the current capture as a slice
/// named `name` of `lane`, with its exit code and usage.
fn run_on_lane(cmd: &mut Command, lane: &str, name: &str) -> io::Result<Output> {
    crate::command(cmd);
    let handle = trace_core::current();
    let begin_ns = handle.as_ref().map(|h| h.now_ns());
    let (output, usage) = output_with_usage(cmd)?;
    if let (Some(h), Some(begin_ns)) = (handle, begin_ns) {
        let end_ns = h.now_ns();
        let code = output.status.code().map_or(Value::Str("signal"), |c| Value::I64(c.into()));
        let mut fields = vec![Field { name: "exit_code", value: code }];
        fields.extend(usage.as_ref().map(usage_fields).into_iter().flatten());
        h.lane_slice(&LaneSlice {
            lane,
            track: h.place(lane, begin_ns, end_ns),
            begin_ns,
            end_ns,
            name,
            fields: &fields,
        });
        h.lane_report(LaneReport {
            lane: lane.to_string(),
            slices: 1,
            unavailable: None,
            notes: Vec::new(),
            alignment_uncertainty_ns: 0,
        });
    }
    Ok(output)
}

/// `cmd.output()`, waiting with [`wait_and_report`] so that the child's usage
/// is read. Both pipes are read to their end (`child::read_pipes`:
/// a child filling one pipe never blocks on the other), and the child is
/// waited for even when reading fails.
fn output_with_usage(cmd: &mut Command) -> io::Result<(Output, Option<ChildUsage>)> {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    let (stdout, stderr) = crate::child::read_pipes(child.stdout.take(), child.stderr.take());
    let (status, usage) = wait_and_report(child)?;
    Ok((Output { status, stdout: stdout?, stderr: stderr? }, usage))
}
