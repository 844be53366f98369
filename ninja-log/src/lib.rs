//! Reads the actions one Ninja run added to `.ninja_log`, or says why it cannot.
//!
//! # Overview
//!
//! Ninja records each successful action in `.ninja_log` as it finishes: when
//! it started and ended (in milliseconds since that Ninja process started),
//! its outputs and a hash of its command. To show what one build did, take a
//! [`Snapshot`] of the log before starting Ninja, and ask it for the
//! [`Delta`] once Ninja has exited. The delta is either the run's
//! [`Action`]s, with notes on anything worth knowing about how they were read,
//! or unavailable, with a reason naming the file, the line and what it held.
//! It is never an empty list of actions for a log that could not be followed.
//!
//! Ninja does not only append to its log:
//!
//! - **Append.** The usual case: everything past the old bytes is this run's.
//!   This includes Ninja 1.10 and 1.11 appending under another version's header.
//! - **First build.** No log before the run: every line after the header is
//!   this run's.
//! - **Start over.** Ninja 1.12 and later delete a log of another version when
//!   they load it, and every Ninja deletes one without a readable header; the
//!   new log holds only this run's lines.
//! - **Recompaction.** When the log holds more than 100 entries and more than
//!   three per output, Ninja rewrites it as it loads it: a header, then the
//!   latest line of each output it still builds, unchanged but in any order
//!   (the lines of one action may be split apart), then this run's lines. The
//!   reader recognises the kept part line by line against the snapshot.
//! - **Regeneration.** When Ninja rebuilds its manifest it starts over with a
//!   new clock, so times go back. Actions after such a restart get a higher
//!   [`Action::epoch`]; their times cannot be compared with earlier epochs'.
//!
//! Everything else is unavailable: a header of a version this crate does not
//! know, a log deleted or cut short during the run, a line not in the form
//! Ninja writes, and a log rewritten during the run by `ninja -t restat` or
//! `-t recompact` (which regeneration steps of CMake and GN run). Such a
//! rewrite replaces the file while Ninja keeps writing to the old one, so the
//! lines of this run after it are lost; the reader says unavailable whenever
//! the rewrite shows (old lines mixed with new ones, modification times
//! changed, or an old log too small for Ninja to have recompacted it itself).
//!
//! Several outputs of one action are one [`Action`]: the lines of an action
//! share start, end and hash. Ninja logs only actions that succeeded, so after
//! a failed build, pass the exit status to [`Delta::with_exit_status`] and the
//! delta says that the failed action is absent.
//!
//! Output paths are bytes in the log. A path that is not UTF-8 is converted
//! lossily (U+FFFD for the bad bytes) and a note says so: the action and its
//! times are still right, only the name is approximate.
//!
//! The log format's constants are in [`format`](mod@format).
//!
//! # Example
//!
//! ```
//! use ninja_log::{Delta, Snapshot};
//!
//! let before = "# ninja log v5\n0\t5\t100\ta.o\tc0ffee\n";
//! let snapshot = Snapshot::from_bytes(".ninja_log", Some(before.as_bytes().to_vec()));
//! // ... Ninja runs, and appends the lines of one action with two outputs ...
//! let after = format!("{before}0\t7\t200\tb.h\tbeef\n0\t7\t200\tb.c\tbeef\n");
//!
//! match snapshot.delta_from_bytes(Some(after.as_bytes())).with_exit_status(true) {
//!     Delta::Available { actions, .. } => {
//!         assert_eq!(actions.len(), 1);
//!         assert_eq!(actions[0].outputs, ["b.h", "b.c"]);
//!         assert_eq!((actions[0].start_ms, actions[0].end_ms), (0, 7));
//!     }
//!     Delta::Unavailable { reason, .. } => panic!("{reason}"),
//! }
//! ```
//!
//! With files, [`Snapshot::take`] reads the log before the run (a missing
//! file is a snapshot of no log) and [`Snapshot::delta`] reads it after.
//!
//! # Owned or lent
//!
//! The actions come in two forms. A [`Delta`] owns them: each [`Action`]
//! holds its outputs and hash as strings of its own, three allocations per
//! action. A [`DeltaRef`], from [`Snapshot::delta_ref`], lends them: each
//! [`ActionRef`] borrows its hash and outputs from the log's bytes, and all
//! actions share two lists ([`Actions`]), so reading a large log allocates
//! next to nothing per action, and the caller copies only what it keeps
//! ([`ActionRef::to_action`]). One reader makes both, with the same notes
//! and reasons; [`DeltaRef::into_delta`] turns a lent delta into the owned
//! one.
//!
//! ```
//! use ninja_log::Snapshot;
//!
//! let snapshot = Snapshot::from_bytes(".ninja_log", None);
//! let after = b"# ninja log v7\n0\t12\t1700000000000000000\tmain.o\t3f2a\n";
//! let delta = snapshot.delta_ref(Some(after));
//! let main = delta.actions().and_then(|a| a.get(0)).expect("one action");
//! assert_eq!((&*main.outputs[0], main.hash, main.duration_ms()), ("main.o", "3f2a", 12));
//! assert_eq!(delta.into_delta(), snapshot.delta_from_bytes(Some(after)));
//! ```
//!
//! # Environment and features
//!
//! None: the crate reads only the bytes it is given, and depends on nothing.
//!
//! # What it does not do
//!
//! - It does not run Ninja, find its log (a manifest's `builddir` moves it), or
//!   place actions on a wall clock: times are from Ninja's own start, which
//!   the caller must align with the moment it started Ninja.
//! - It cannot see lines Ninja wrote to a file that was replaced during the run
//!   when the replacement looks like something Ninja itself does: a rewrite
//!   that reproduces the old log byte for byte (possible with Ninja 1.10 and
//!   1.11, which keep the modification times of untouched outputs, when the
//!   hash-map order happens to match), one that keeps every old line unchanged
//!   in a log large enough for Ninja to recompact, or any rewrite of a log
//!   that started in this run. Such a delta shows fewer actions than ran.
//! - A restart of Ninja's clock is seen only when times go back; a restart
//!   after a manifest rebuild so short that the next action still ends later
//!   leaves those actions in the earlier epoch.
//! - Two actions with the same command, start and end in one epoch are read as
//!   one action with the outputs of both: the log cannot tell them apart.
//! - A log cut short exactly at the end of a line looks like a log of a run
//!   that did less; only a cut inside a line is detected.
//! - It does not read `.ninja_deps` or the manifest.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

// The crate's own tests include test files written for `tests/`, which name
// it `ninja_log`.
#[cfg(test)]
extern crate self as ninja_log;

pub mod format;
mod hash;
mod line;
mod read;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// The log as it was before Ninja started: its bytes, or the fact that there
/// was none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    path: PathBuf,
    bytes: Option<Vec<u8>>,
}

impl Snapshot {
    /// Reads the log at `path`; a missing file is a snapshot of no log.
    ///
    /// # Errors
    ///
    /// Any other I/O error, with the path in its message.
    ///
    /// # Example
    ///
    /// ```
    /// # fn main() -> std::io::Result<()> {
    /// use ninja_log::Snapshot;
    ///
    /// let dir = std::env::temp_dir().join(format!("ninja-log-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let log = dir.join(".ninja_log");
    /// let snapshot = Snapshot::take(&log)?; // no log yet: a first build
    ///
    /// // Ninja runs, and writes one action.
    /// std::fs::write(&log, "# ninja log v7\n0\t12\t1700000000000000000\tmain.o\t3f2a\n")?;
    ///
    /// let delta = snapshot.delta(&log).with_exit_status(true);
    /// assert_eq!(delta.actions().map(|a| a[0].outputs.clone()), Some(vec!["main.o".to_owned()]));
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn take(path: impl AsRef<Path>) -> io::Result<Snapshot> {
        let path = path.as_ref();
        let bytes = read_if_present(path)?;
        Ok(Snapshot { path: path.to_owned(), bytes })
    }

    /// A snapshot of bytes read elsewhere; `None` means there was no log.
    /// `path` is only used to name the file in notes and reasons.
    pub fn from_bytes(path: impl Into<PathBuf>, bytes: Option<Vec<u8>>) -> Snapshot {
        Snapshot { path: path.into(), bytes }
    }

    /// The path the snapshot names in notes and reasons.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The log's bytes before the run, or `None` if there was no log.
    pub fn bytes(&self) -> Option<&[u8]> {
        self.bytes.as_deref()
    }

    /// Reads the log at `after_path` (normally the snapshot's own path) and
    /// returns what the run added. A missing file means there is no log after
    /// the run; a file that cannot be read makes the delta unavailable.
    pub fn delta(&self, after_path: impl AsRef<Path>) -> Delta {
        let after_path = after_path.as_ref();
        match read_if_present(after_path) {
            Ok(after) => read::delta(&self.path, self.bytes(), after_path, after.as_deref()),
            Err(e) => Delta::Unavailable { reason: format!("{e}: the log after the run cannot be read") },
        }
    }

    /// Returns what the run added, given the log's bytes after it (`None`:
    /// there is no log). Notes and reasons name the snapshot's path.
    ///
    /// The same as `self.delta_ref(after).into_delta()` (the same reader
    /// makes both), but faster than converting.
    pub fn delta_from_bytes(&self, after: Option<&[u8]>) -> Delta {
        read::delta(&self.path, self.bytes(), &self.path, after)
    }

    /// Returns what the run added, like [`Snapshot::delta_from_bytes`], but
    /// lends the actions out: their hashes and outputs are slices of `after`,
    /// so nothing is allocated per action, and the caller copies only what it
    /// keeps. Notes and reasons are the same, word for word.
    ///
    /// # Example
    ///
    /// ```
    /// use ninja_log::{DeltaRef, Snapshot};
    ///
    /// let before = "# ninja log v5\n0\t5\t100\ta.o\tc0ffee\n";
    /// let snapshot = Snapshot::from_bytes(".ninja_log", Some(before.as_bytes().to_vec()));
    /// let after = format!("{before}0\t7\t200\tb.h\tbeef\n0\t7\t200\tb.c\tbeef\n9\t12\t201\tc.o\tcafe\n");
    ///
    /// match snapshot.delta_ref(Some(after.as_bytes())).with_exit_status(true) {
    ///     DeltaRef::Available { actions, .. } => {
    ///         assert_eq!(actions.len(), 2);
    ///         // Each action borrows from `after`: keep only what is needed.
    ///         let longest = actions.iter().max_by_key(|a| a.duration_ms()).map(|a| a.outputs[0].to_string());
    ///         assert_eq!(longest.as_deref(), Some("b.h"));
    ///         let first = actions.get(0).expect("two actions");
    ///         assert_eq!(first.outputs, ["b.h", "b.c"]);
    ///         assert_eq!((first.start_ms, first.end_ms, first.hash), (0, 7, "beef"));
    ///     }
    ///     DeltaRef::Unavailable { reason, .. } => panic!("{reason}"),
    /// }
    /// ```
    ///
    /// With files, read the log after the run yourself (a missing file is
    /// `None`), and keep its bytes while the delta lives.
    pub fn delta_ref<'a>(&self, after: Option<&'a [u8]>) -> DeltaRef<'a> {
        read::delta_ref(&self.path, self.bytes(), &self.path, after)
    }
}

fn read_if_present(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
}

/// The note [`Delta::with_exit_status`] and [`DeltaRef::with_exit_status`]
/// add after a failure.
const FAILED: &str = "Ninja exited with a failure: the log holds only actions that succeeded, so \
                      the action that failed, and any stopped with it, are absent";

/// What one Ninja run added to its log.
///
/// Each variant may gain fields: match with `..`, and make one with
/// [`Delta::available`] or [`Delta::unavailable`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delta {
    /// The run's actions, sure to be all the log holds of this run.
    #[non_exhaustive]
    Available {
        /// In the order Ninja finished them (the order of their first lines).
        actions: Vec<Action>,
        /// How the log was read, when it was not a plain append, and anything
        /// that qualifies the actions (a clock restart, paths that are not
        /// UTF-8, a failed build). A note about the log starts with `path:`
        /// or `path:line:`; the one [`Delta::with_exit_status`] adds is about
        /// the run and names no file.
        notes: Vec<String>,
    },
    /// The log could not be followed, so the run's actions are unknown.
    #[non_exhaustive]
    Unavailable {
        /// Why, starting with `path:` or `path:line:` and quoting what was
        /// found there.
        reason: String,
    },
}

impl Delta {
    /// A delta whose actions are known.
    pub fn available(actions: Vec<Action>, notes: Vec<String>) -> Delta {
        Delta::Available { actions, notes }
    }

    /// A delta whose actions are unknown, and why (start with `path:` or
    /// `path:line:`).
    pub fn unavailable(reason: impl Into<String>) -> Delta {
        Delta::Unavailable { reason: reason.into() }
    }

    /// Records Ninja's exit status. After a failure, an available delta gets
    /// a note that the action that failed is absent: Ninja logs only the
    /// actions that succeeded. An unavailable delta is returned unchanged.
    #[must_use]
    pub fn with_exit_status(self, success: bool) -> Delta {
        match self {
            Delta::Available { actions, mut notes } if !success => {
                notes.push(FAILED.to_owned());
                Delta::Available { actions, notes }
            }
            delta => delta,
        }
    }

    /// Whether the run's actions are known.
    pub fn is_available(&self) -> bool {
        matches!(self, Delta::Available { .. })
    }

    /// The run's actions, if known.
    pub fn actions(&self) -> Option<&[Action]> {
        match self {
            Delta::Available { actions, .. } => Some(actions),
            Delta::Unavailable { .. } => None,
        }
    }

    /// The notes of an available delta; empty for an unavailable one.
    pub fn notes(&self) -> &[String] {
        match self {
            Delta::Available { notes, .. } => notes,
            Delta::Unavailable { .. } => &[],
        }
    }

    /// Why the delta is unavailable, if it is.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Delta::Available { .. } => None,
            Delta::Unavailable { reason } => Some(reason),
        }
    }
}

/// One action of the run: a command Ninja ran and that succeeded.
///
/// It may gain fields; [`Action::new`] makes one.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Action {
    /// When the command started, in milliseconds since Ninja's clock started.
    pub start_ms: u64,
    /// When Ninja saw it finish, on the same clock.
    pub end_ms: u64,
    /// Its outputs, as the manifest names them, in the order of their lines.
    pub outputs: Vec<String>,
    /// The hash of its command line as written in the log: lowercase hex
    /// without leading zeros (MurmurHash64A in v5 and v6, rapidhash in v7).
    pub hash: String,
    /// Which of Ninja's clocks the times are on: 0 from Ninja's start, one more
    /// after each restart (Ninja restarts after regenerating its manifest, and
    /// its clock with it). A later epoch's clock started after the previous
    /// epoch's actions ended, by an amount the log does not say.
    pub epoch: u32,
}

impl Action {
    /// An action that ran from `start_ms` to `end_ms` on the clock of
    /// `epoch`, wrote `outputs`, and whose command line hashes to `hash`.
    pub fn new(
        start_ms: u64,
        end_ms: u64,
        outputs: Vec<String>,
        hash: impl Into<String>,
        epoch: u32,
    ) -> Action {
        Action { start_ms, end_ms, outputs, hash: hash.into(), epoch }
    }

    /// How long the command ran, in milliseconds.
    pub fn duration_ms(&self) -> u64 {
        self.end_ms - self.start_ms
    }
}

/// What one Ninja run added to its log, with the actions lent out of the log
/// after the run ([`Snapshot::delta_ref`]): [`Delta`] without a copy of each
/// action. [`DeltaRef::into_delta`] makes the [`Delta`] that
/// [`Snapshot::delta_from_bytes`] returns.
///
/// Each variant may gain fields: match with `..`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeltaRef<'a> {
    /// The run's actions, sure to be all the log holds of this run.
    #[non_exhaustive]
    Available {
        /// In the order Ninja finished them (the order of their first lines).
        actions: Actions<'a>,
        /// As in [`Delta::Available`].
        notes: Vec<String>,
    },
    /// The log could not be followed, so the run's actions are unknown.
    #[non_exhaustive]
    Unavailable {
        /// As in [`Delta::Unavailable`].
        reason: String,
    },
}

impl<'a> DeltaRef<'a> {
    /// Records Ninja's exit status, as [`Delta::with_exit_status`] does.
    #[must_use]
    pub fn with_exit_status(self, success: bool) -> DeltaRef<'a> {
        match self {
            DeltaRef::Available { actions, mut notes } if !success => {
                notes.push(FAILED.to_owned());
                DeltaRef::Available { actions, notes }
            }
            delta => delta,
        }
    }

    /// The same delta with each action copied into an [`Action`] of its own.
    pub fn into_delta(self) -> Delta {
        match self {
            DeltaRef::Available { actions, notes } => {
                Delta::Available { actions: actions.iter().map(|a| a.to_action()).collect(), notes }
            }
            DeltaRef::Unavailable { reason } => Delta::Unavailable { reason },
        }
    }

    /// Whether the run's actions are known.
    pub fn is_available(&self) -> bool {
        matches!(self, DeltaRef::Available { .. })
    }

    /// The run's actions, if known.
    pub fn actions(&self) -> Option<&Actions<'a>> {
        match self {
            DeltaRef::Available { actions, .. } => Some(actions),
            DeltaRef::Unavailable { .. } => None,
        }
    }

    /// The notes of an available delta; empty for an unavailable one.
    pub fn notes(&self) -> &[String] {
        match self {
            DeltaRef::Available { notes, .. } => notes,
            DeltaRef::Unavailable { .. } => &[],
        }
    }

    /// Why the delta is unavailable, if it is.
    pub fn reason(&self) -> Option<&str> {
        match self {
            DeltaRef::Available { .. } => None,
            DeltaRef::Unavailable { reason } => Some(reason),
        }
    }
}

impl From<DeltaRef<'_>> for Delta {
    fn from(delta: DeltaRef<'_>) -> Delta {
        delta.into_delta()
    }
}

/// The actions of a [`DeltaRef`], in the order Ninja finished them. Each is
/// an [`ActionRef`] that borrows this list (for its outputs) and the log.
///
/// Two allocations hold them all, however many there are: one entry per
/// action, and one list of every output, where each action's outputs are
/// next to each other.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Actions<'a> {
    pub(crate) heads: Vec<Head<'a>>,
    pub(crate) outputs: Vec<Cow<'a, str>>,
}

/// An action of [`Actions`] without its outputs: which of them are its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head<'a> {
    pub(crate) start_ms: u64,
    pub(crate) end_ms: u64,
    pub(crate) hash: &'a str,
    pub(crate) epoch: u32,
    /// The index of its first output in `Actions::outputs`.
    pub(crate) first: usize,
    /// How many outputs it has.
    pub(crate) len: usize,
}

impl<'a> Actions<'a> {
    /// How many actions there are.
    pub fn len(&self) -> usize {
        self.heads.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }

    /// The action at `index`, if there are that many.
    pub fn get(&self, index: usize) -> Option<ActionRef<'_, 'a>> {
        self.heads.get(index).map(|h| self.lend(h))
    }

    /// The actions in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = ActionRef<'_, 'a>> + DoubleEndedIterator + Clone {
        self.heads.iter().map(|h| self.lend(h))
    }

    fn lend(&self, h: &Head<'a>) -> ActionRef<'_, 'a> {
        ActionRef {
            start_ms: h.start_ms,
            end_ms: h.end_ms,
            outputs: &self.outputs[h.first..h.first + h.len],
            hash: h.hash,
            epoch: h.epoch,
        }
    }
}

impl fmt::Debug for Actions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// One action of the run, as [`Action`] but lent: `'a` is the log after the
/// run, `'d` the [`Actions`] it is one of. It may gain fields, as [`Action`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ActionRef<'d, 'a> {
    /// When the command started, in milliseconds since Ninja's clock started.
    pub start_ms: u64,
    /// When Ninja saw it finish, on the same clock.
    pub end_ms: u64,
    /// Its outputs, as the manifest names them, in the order of their lines.
    /// Each is a slice of the log, except a path that is not UTF-8: that one
    /// is converted lossily (U+FFFD for the bad bytes) into a string of its
    /// own, as in [`Action::outputs`].
    pub outputs: &'d [Cow<'a, str>],
    /// The hash of its command line as written in the log (see
    /// [`Action::hash`]).
    pub hash: &'a str,
    /// Which of Ninja's clocks the times are on (see [`Action::epoch`]).
    pub epoch: u32,
}

impl ActionRef<'_, '_> {
    /// How long the command ran, in milliseconds.
    pub fn duration_ms(&self) -> u64 {
        self.end_ms - self.start_ms
    }

    /// A copy that owns its outputs and hash.
    pub fn to_action(&self) -> Action {
        Action {
            start_ms: self.start_ms,
            end_ms: self.end_ms,
            outputs: self.outputs.iter().map(|o| o[..].to_owned()).collect(),
            hash: self.hash.to_owned(),
            epoch: self.epoch,
        }
    }
}
