//! Deciding which lines of the log after a run that run wrote.
//!
//! The log after the run is one of:
//!
//! - the log before it with lines appended (read directly);
//! - a new log, because there was none, or because Ninja deleted one it does
//!   not keep (another version, or no header) and started over;
//! - a recompacted log: the same or a newer header, one unchanged line per
//!   kept output of the old log in any order, then this run's lines.
//!
//! Anything else, and anything that fits one of these only by luck that the
//! facts cannot rule out, is reported as unavailable with the line that shows
//! it.
//!
//! # Speed
//!
//! What this says is exactly what the straightforward reader it replaced
//! said (`tests/it/reference.rs` keeps that reader, and the tests and the
//! fuzzer hold the two side by side); how it gets there is built for speed:
//!
//! - An append reads only the bytes past the old log (after checking that
//!   the old bytes are a prefix), and the lines of the old log are only
//!   counted, for line numbers.
//! - A line is read in one pass, without allocating (`line::parse_line`).
//! - Lines, outputs and hashes are slices of the logs, never copied. For a
//!   [`DeltaRef`], the actions lend their hashes and outputs from the log
//!   after the run and share two lists (one entry per action, and every
//!   output); only a [`Delta`] allocates per action, for the [`Action`]s it
//!   returns. One reader makes both ([`Collect`]).
//! - The large tables, one entry per line or output of a log, are
//!   [`Index`]es: a `u64` per slot, keyed by a fast hash, holding offsets
//!   into the log and asking the caller to compare the bytes there. They are
//!   filled and read in tight loops, or in batches, so that the processor
//!   overlaps their cache misses, and most lookups that would miss are
//!   first ruled out by a small bitmap.
//! - An output logged twice in an epoch is looked for once the epoch is
//!   read, from a hash per line, instead of in a map updated line by line.

use std::borrow::Cow;
use std::path::Path;

use rustc_hash::FxHashMap;

use crate::format;
use crate::hash::{hash_bytes, Index, Slot};
use crate::line::{self, show, Line, Lines};
use crate::{Action, Actions, Delta, DeltaRef, Head};

/// The header of the log after the run.
struct Header<'a> {
    /// The header line without its newline.
    line: &'a [u8],
    version: u32,
    /// Offset just past the header's newline.
    end: usize,
}

/// What the log before the run held, as Ninja would load it.
struct OldLog<'a> {
    bytes: &'a [u8],
    /// The first line (or, with no newline at all, everything).
    first: &'a [u8],
    /// How many lines after the first one Ninja would load.
    entries: usize,
    /// The first of those lines that is not in the exact form Ninja writes.
    first_unparsed: Option<Line<'a>>,
    /// For each output, the offset in `bytes` of its latest line.
    latest: Index,
    /// For each line Ninja would load, in order, its [`line_key`] and offset.
    keys: Vec<(u64, usize)>,
    /// For each slot of `latest`, whether the recompacted part of the log
    /// after the run keeps that output's latest line.
    kept: Vec<bool>,
}

impl<'a> OldLog<'a> {
    fn load(bytes: &'a [u8]) -> Self {
        let first_end = line::find(b'\n', bytes).unwrap_or(bytes.len());
        let mut log = OldLog {
            bytes,
            first: &bytes[..first_end],
            entries: 0,
            first_unparsed: None,
            // Small, to stay in the caches: it grows as outputs come.
            latest: Index::new(1024, bytes.len()),
            keys: Vec::new(),
            kept: Vec::new(),
        };
        let mut lines = Lines::new(bytes, 1);
        lines.next();
        loop {
            let at = lines.offset();
            let Some((l, read)) = lines.next_read() else {
                break;
            };
            // A line in Ninja's form is one Ninja loads, with that output.
            let output = match read {
                Some(e) => e.output,
                None => match line::loaded_output(l.bytes) {
                    Some(output) => {
                        log.first_unparsed.get_or_insert(l);
                        output
                    }
                    None => continue,
                },
            };
            log.entries += 1;
            log.keys.push((line_key(l.bytes), at));
            let hash = hash_bytes(output);
            let slot = log.latest.find(hash, |at| has_output(bytes, at, output));
            log.latest.set(slot, hash, at, |at| hash_bytes(output_at(bytes, at)));
        }
        log.kept = vec![false; log.latest.slots()];
        log
    }

    /// The line starting at offset `at`, without its newline.
    fn line_at(&self, at: usize) -> &'a [u8] {
        line_at(self.bytes, at)
    }

    /// The loaded line starting at `at`, with its number.
    fn numbered(&self, at: usize) -> Line<'a> {
        let at = at.min(self.bytes.len());
        Line { no: 1 + line::count(b'\n', &self.bytes[..at]), bytes: self.line_at(at) }
    }

    /// The slot in `latest` of `output`, and the offset of its latest line.
    fn latest(&self, output: &[u8]) -> Option<(usize, usize)> {
        match self.latest.find(hash_bytes(output), |at| has_output(self.bytes, at, output)) {
            Slot::Taken { slot, position } => Some((slot, position)),
            Slot::Free(_) => None,
        }
    }

    /// Marks as kept the latest lines of distinct outputs that `lines` start
    /// with, and says how many there are: what a recompaction keeps.
    fn keep_leading(&mut self, lines: &[Line<'_>]) -> usize {
        // In batches: first where each line's output has its latest line,
        // then whether that line is this one. Those reads go anywhere in the
        // old log; in a loop of their own, the processor overlaps them.
        const BATCH: usize = 32;
        let mut kept = 0;
        let mut guesses = [None; BATCH];
        for batch in lines.chunks(BATCH) {
            for (guess, l) in guesses.iter_mut().zip(batch) {
                *guess = line::loaded_output(l.bytes).and_then(|o| {
                    // The first slot whose bits of hash match: most likely the
                    // output's own.
                    match self.latest.find(hash_bytes(o), |_| true) {
                        Slot::Taken { slot, position } => Some((slot, position)),
                        Slot::Free(_) => None,
                    }
                });
            }
            for (guess, l) in guesses.iter().zip(batch) {
                let slot = match *guess {
                    // No slot with those bits: the output has no old line.
                    None => return kept,
                    // The line is there, so that is its output's slot.
                    Some((slot, at)) if is_line_at(self.bytes, at, l.bytes) => Some(slot),
                    Some(_) => line::loaded_output(l.bytes).and_then(|o| self.latest_is(o, l.bytes)),
                };
                match slot {
                    Some(slot) if !self.kept[slot] => {
                        self.kept[slot] = true;
                        kept += 1;
                    }
                    _ => return kept,
                }
            }
        }
        kept
    }

    /// The first of `lines` whose output has a latest line that is not
    /// kept, with that output and the offset of that line.
    fn first_dropped<'l>(&self, lines: &[Line<'l>]) -> Option<(Line<'l>, &'l [u8], usize)> {
        // In batches, as in `keep_leading`.
        const BATCH: usize = 32;
        let mut guesses = [None; BATCH];
        for batch in lines.chunks(BATCH) {
            for (guess, l) in guesses.iter_mut().zip(batch) {
                *guess =
                    line::loaded_output(l.bytes).map(|o| match self.latest.find(hash_bytes(o), |_| true) {
                        Slot::Taken { slot, position } => (o, Some((slot, position))),
                        Slot::Free(_) => (o, None),
                    });
            }
            for (guess, l) in guesses.iter().zip(batch) {
                let found = match *guess {
                    None | Some((_, None)) => continue,
                    Some((o, Some((slot, at)))) if has_output(self.bytes, at, o) => (o, Some((slot, at))),
                    Some((o, _)) => (o, self.latest(o)),
                };
                if let (o, Some((slot, at))) = found {
                    if !self.kept[slot] {
                        return Some((*l, o, at));
                    }
                }
            }
        }
        None
    }

    /// The slot in `latest` of the output of `line`, if its latest line is
    /// `line` (which Ninja would load).
    fn latest_is(&self, output: &[u8], line: &[u8]) -> Option<usize> {
        match self.latest.find(hash_bytes(output), |at| is_line_at(self.bytes, at, line)) {
            Slot::Taken { slot, .. } => Some(slot),
            Slot::Free(_) => None,
        }
    }
}

/// Whether the line of `bytes` starting at `at` is `line` (which holds no
/// newline).
fn is_line_at(bytes: &[u8], at: usize, line: &[u8]) -> bool {
    let rest = bytes.get(at..).unwrap_or_default();
    rest.starts_with(line) && rest.get(line.len()) == Some(&b'\n')
}

/// Whether the line of `bytes` starting at `at`, which Ninja would load, has
/// the output `output` (a field: it holds no tab or newline). Faster than
/// comparing with [`output_at`]: it need not find the end of the output.
fn has_output(bytes: &[u8], at: usize, output: &[u8]) -> bool {
    let mut rest = bytes.get(at..).unwrap_or_default();
    for _ in 0..format::SEPARATORS_TO_LOAD - 1 {
        match line::find(format::FIELD_SEPARATOR, rest) {
            Some(tab) => rest = &rest[tab + 1..],
            None => return false,
        }
    }
    rest.starts_with(output) && rest.get(output.len()) == Some(&format::FIELD_SEPARATOR)
}

/// A hash of a line's length and its first and last 16 bytes: it tells lines
/// apart almost as well as a hash of all their bytes (times come first, the
/// command's hash last), in a third of the time.
fn line_key(line: &[u8]) -> u64 {
    use crate::hash::{hash_words, word};
    let n = line.len();
    if n < 32 {
        return hash_bytes(line);
    }
    let head = hash_words(n as u64, word(line), word(&line[8..]));
    crate::hash::weakened(hash_words(head, word(&line[n - 16..]), word(&line[n - 8..])))
}

/// The line of `bytes` starting at offset `at`, without its newline.
fn line_at(bytes: &[u8], at: usize) -> &[u8] {
    let rest = bytes.get(at..).unwrap_or_default();
    &rest[..line::find(b'\n', rest).unwrap_or(rest.len())]
}

/// The output of the loaded line of `bytes` starting at `at`.
fn output_at(bytes: &[u8], at: usize) -> &[u8] {
    line::loaded_output(line_at(bytes, at)).unwrap_or_default()
}

/// What the reader found: the run's actions (collected in `C`) and notes, or
/// why the delta is unavailable.
type Read<C> = Result<(C, Vec<String>), String>;

/// The delta, each action owning its outputs and hash.
pub(crate) fn delta(
    before_path: &Path,
    before: Option<&[u8]>,
    after_path: &Path,
    after: Option<&[u8]>,
) -> Delta {
    match read::<Vec<Action>>(before_path, before, after_path, after) {
        Ok((actions, notes)) => Delta::Available { actions, notes },
        Err(reason) => Delta::Unavailable { reason },
    }
}

/// The delta, its actions lent from `after`.
pub(crate) fn delta_ref<'a>(
    before_path: &Path,
    before: Option<&[u8]>,
    after_path: &Path,
    after: Option<&'a [u8]>,
) -> DeltaRef<'a> {
    match read::<Gather<'a>>(before_path, before, after_path, after) {
        Ok((actions, notes)) => DeltaRef::Available { actions: actions.finish(), notes },
        Err(reason) => DeltaRef::Unavailable { reason },
    }
}

fn read<'a, C: Collect<'a>>(
    before_path: &Path,
    before: Option<&[u8]>,
    after_path: &Path,
    after: Option<&'a [u8]>,
) -> Read<C> {
    let (bp, ap) = (before_path.display(), after_path.display());
    let after = match (before, after) {
        (_, Some(a)) if !a.is_empty() => a,
        (None | Some([]), after) => {
            let found = if after.is_some() { "empty" } else { "missing" };
            return Ok((
                C::default(),
                vec![format!(
                    "{ap}: the log is {found} after the run and held nothing before it, so Ninja \
                     recorded no successful action in it (nothing to do, a dry run, or a failure \
                     before any action succeeded); if the manifest sets `builddir`, the log is in \
                     that directory instead"
                )],
            ));
        }
        (Some(b), None) => {
            return unavailable(format!(
                "{ap}: the log is missing after the run; before it, it held {}: it was deleted \
                 during the run (Ninja 1.12 and later delete a log of another version and write a \
                 new one only once an action succeeds), so what the run did cannot be read",
                describe(b)
            ))
        }
        (Some(b), Some(_)) => {
            return unavailable(format!(
                "{ap}: the log is empty after the run; before it, it held {}: it was truncated",
                describe(b)
            ))
        }
    };

    let before_bytes = before.unwrap_or_default();
    if after.starts_with(before_bytes) {
        return match header(after_path, after) {
            Ok(h) => appended(before_path, before, after_path, after, &h),
            Err(reason) => unavailable(reason),
        };
    }
    if before_bytes.starts_with(after) {
        return unavailable(format!(
            "{ap}: the log after the run is the first {} of the {} bytes it held before: it was \
             cut short",
            after.len(),
            before_bytes.len()
        ));
    }
    let h = match header(after_path, after) {
        Ok(h) => h,
        Err(reason) => return unavailable(reason),
    };
    let (lines, unterminated) = line::split(&after[h.end..], 2);
    if let Some(t) = unterminated {
        return cut_short(after_path, t);
    }
    let mut old = OldLog::load(before_bytes);

    // The longest run of leading lines that are each the latest old line of
    // a distinct output: what a recompaction keeps.
    let kept = old.keep_leading(&lines);
    let new = &lines[kept..];
    // The same lines, to read them again.
    let kept_bytes: usize = lines[..kept].iter().map(|l| l.bytes.len() + 1).sum();
    let new_lines = Lines::new(&after[h.end + kept_bytes..], kept + 2);

    if kept == 0 {
        let old_version = format::version_as_ninja_reads_it(old.first);
        let everyone_starts_over = old_version.is_none_or(|v| v < format::OLDEST_VERSION_KEPT);
        let newer_starts_over = format::VERSIONS_THAT_START_OVER.contains(&h.version) && old.first != h.line;
        if !(everyone_starts_over || newer_starts_over) {
            return unavailable(replaced(before_path, &old, after_path, &h, &lines));
        }
        if let Err(reason) = no_old_lines(before_path, &old, after_path, new) {
            return unavailable(reason);
        }
        let who = if everyone_starts_over {
            "every Ninja".to_owned()
        } else {
            format!("{} (which writes {})", format::writers_of(h.version), show(h.line))
        };
        let note = format!(
            "{ap}:1: Ninja started a new log: the log before the run began with {}, which {who} \
             deletes when it loads it, so every line after the header is from this run",
            show(old.first)
        );
        return finish(after_path, new_lines, &LineNumbers::as_they_are(), vec![note]);
    }

    // A recompaction. Check that the old log was one Ninja would recompact,
    // and that nothing after the kept lines could be an old line.
    if !format::header_version(old.first).is_some_and(|v| format::KNOWN_VERSIONS.contains(&v)) {
        return unavailable(format!(
            "{bp}:1: the log before the run starts with {}, not a header this crate knows, and \
             the log was rewritten during the run",
            show(old.first)
        ));
    }
    if let Some((l, what)) = old.first_unparsed.and_then(|l| line::parse(l.bytes).err().map(|what| (l, what)))
    {
        return unavailable(format!(
            "{bp}:{}: {}: {what}; Ninja loads such a line but rewrites it in its own form when it \
             recompacts, so the rewritten log cannot be matched against the old one",
            l.no,
            show(l.bytes)
        ));
    }
    let (entries, outputs) = (old.entries, old.latest.len());
    if !format::recompacts_at_load(entries, outputs) {
        return unavailable(format!(
            "{ap}: the log was rewritten during the run: its first {} lines are kept unchanged \
             from the log before the run, but that log held {entries} entries for {outputs} \
             outputs, too few for Ninja to recompact it when loading it (it needs more than {} \
             entries and more than {} per output); a rewrite from inside the build (`ninja -t \
             restat` or `-t recompact`, as regeneration steps run) replaces the file, and what \
             Ninja writes after that goes to the replaced file",
            kept,
            format::RECOMPACT_MIN_ENTRIES,
            format::RECOMPACT_RATIO,
        ));
    }
    if let Err(reason) = no_old_lines(before_path, &old, after_path, new) {
        return unavailable(reason);
    }
    if let Some((l, o, at)) = old.first_dropped(new) {
        return unavailable(format!(
            "{ap}:{}: {}: output {} had a line in the log before the run ({bp}:{}) that the \
             recompacted part of the log does not keep; Ninja keeps every output it still \
             builds, so the log was rewritten during the run (as `ninja -t restat` does) and \
             this line may be an old one rewritten",
            l.no,
            show(l.bytes),
            show(o),
            old.numbered(at).no
        ));
    }
    let first_new = new.first().map_or(lines.len() + 2, |l| l.no);
    let mut notes = vec![format!(
        "{ap}: Ninja recompacted the log when it loaded it: lines 2-{} keep {} of the {outputs} \
         outputs of the log before the run ({} dropped as no longer built), and this run's lines \
         start at line {first_new}",
        kept + 1,
        kept,
        outputs - kept,
    )];
    if old.first != h.line {
        notes.push(format!(
            "{ap}:1: the header changed from {} to {}: the log was recompacted by {}",
            show(old.first),
            show(h.line),
            format::writers_of(h.version)
        ));
    }
    finish(after_path, new_lines, &LineNumbers::as_they_are(), notes)
}

/// A log that grew: the bytes past the old ones are this run's.
fn appended<'a, C: Collect<'a>>(
    before_path: &Path,
    before: Option<&[u8]>,
    after_path: &Path,
    after: &'a [u8],
    h: &Header<'_>,
) -> Read<C> {
    let b = before.unwrap_or_default();
    let start = b.len().max(h.end);
    // The lines of the run are numbered from 0 here, and `numbers` counts
    // the lines before them only if a message needs a number: in a large
    // log, counting them can take longer than reading the run.
    let numbers = LineNumbers::after(&after[..start]);
    let tail = &after[start..];
    if tail.last().is_some_and(|&c| c != b'\n') {
        let mut lines = Lines::new(tail, 0);
        lines.by_ref().for_each(drop);
        let rest = lines.rest();
        return cut_short(after_path, Line { no: numbers.of(rest.no), bytes: rest.bytes });
    }
    let ap = after_path.display();
    let mut notes = Vec::new();
    if before.is_none() {
        notes.push(format!(
            "{ap}: there was no log before the run, so every line after the header is from this \
             run"
        ));
    } else if b.len() > h.end && !b.ends_with(b"\n") {
        notes.push(format!(
            "{}:{}: the log before the run ended inside a line; this run's first line was \
             written straight after it",
            before_path.display(),
            numbers.of(0)
        ));
    }
    finish(after_path, Lines::new(tail, 0), &numbers, notes)
}

/// The numbers of the lines of a run, given their numbers counted from
/// some line on: the lines before that are counted only when asked.
struct LineNumbers<'a> {
    /// The bytes before the first line counted.
    before: &'a [u8],
    /// The number of the first line counted.
    first: std::cell::OnceCell<usize>,
}

impl<'a> LineNumbers<'a> {
    /// For lines counted from 0 just after `before`.
    fn after(before: &'a [u8]) -> Self {
        LineNumbers { before, first: std::cell::OnceCell::new() }
    }

    /// For lines counted as they are numbered.
    fn as_they_are() -> Self {
        LineNumbers { before: &[], first: std::cell::OnceCell::from(0) }
    }

    /// The number of the line counted as `no`.
    fn of(&self, no: usize) -> usize {
        self.first.get_or_init(|| 1 + line::count(b'\n', self.before)) + no
    }
}

/// Reads the lines of this run into actions.
fn finish<'a, C: Collect<'a>>(
    after_path: &Path,
    mut lines: Lines<'a>,
    numbers: &LineNumbers<'_>,
    mut notes: Vec<String>,
) -> Read<C> {
    let ap = after_path.display();
    // Not sized up front, nor is any list below: growing them turned out
    // faster (with glibc, a large buffer allocated at once, and freed after
    // each read, makes the allocator hand the heap back to the system, and
    // the next read fault it in again, page by page).
    let mut actions = C::default();
    // The outputs of this epoch's lines, checked for one logged twice when
    // the epoch ends (see `Outputs`).
    let mut outputs = Outputs::new(lines.clone());
    let mut epoch = 0u32;
    let mut previous: Option<(u64, usize)> = None;
    // The lines of one action share epoch, start, end and hash. Within an
    // epoch end times never go back, so lines with the same end are adjacent,
    // and the actions they make are those made since that end was first seen.
    let mut block = Block::default();
    let mut not_utf8: Option<(usize, usize)> = None;
    loop {
        let here = lines.clone();
        let Some((l, read)) = lines.next_read() else {
            break;
        };
        let e = match read.map_or_else(|| line::parse(l.bytes), Ok) {
            Ok(e) => e,
            Err(what) => {
                // An output logged twice on an earlier line is the first
                // problem.
                if let Some(repeat) = outputs.check(after_path, numbers) {
                    return repeat;
                }
                return unavailable(format!(
                    "{ap}:{}: {}: {what}; Ninja writes `start\\tend\\tmtime\\toutput\\thash`",
                    numbers.of(l.no),
                    show(l.bytes)
                ));
            }
        };
        if let Some((end, no)) = previous {
            if e.end_ms < end {
                if let Some(repeat) = outputs.check(after_path, numbers) {
                    return repeat;
                }
                outputs.restart(here);
                epoch += 1;
                notes.push(format!(
                    "{ap}:{}: times go back (this action ends at {} ms, the one on line {} at \
                     {end} ms): Ninja restarted its clock, as it does after regenerating its \
                     manifest; actions from here on have epoch {epoch}, on a clock that started \
                     after the actions before them ended",
                    numbers.of(l.no),
                    e.end_ms,
                    numbers.of(no)
                ));
            }
            if e.end_ms != end {
                block.restart(actions.len());
            }
        }
        previous = Some((e.end_ms, l.no));
        outputs.push(e.output);
        let output = match std::str::from_utf8(e.output) {
            Ok(s) => Cow::Borrowed(s),
            Err(_) => {
                let (first, count) = not_utf8.get_or_insert((l.no, 0));
                *first = (*first).min(l.no);
                *count += 1;
                String::from_utf8_lossy(e.output)
            }
        };
        match block.find(e.start_ms, e.hash_value) {
            Some(i) => actions.add_output(i, output),
            None => {
                block.add(e.start_ms, e.hash_value, actions.len());
                // Lowercase hex digits (`line::Entry`), so always UTF-8.
                let hash = std::str::from_utf8(e.hash).unwrap_or_default();
                actions.add(e.start_ms, e.end_ms, hash, epoch, output);
            }
        }
    }
    if let Some(repeat) = outputs.check(after_path, numbers) {
        return repeat;
    }
    if let Some((first, count)) = not_utf8 {
        notes.push(format!(
            "{ap}:{}: {count} output path(s) from here on are not UTF-8; they are shown with \
             U+FFFD in place of the bytes that are not",
            numbers.of(first)
        ));
    }
    Ok((actions, notes))
}

/// Where [`finish`] puts the run's actions as it reads their lines: each
/// line adds an action, or an output to one. A [`Delta`] collects them in a
/// `Vec<Action>`, a [`DeltaRef`] in a [`Gather`]; the reader is the same.
///
/// Converting a [`DeltaRef`] into a [`Delta`] gives the same result, but
/// collecting the owned actions directly is faster: with the lent lists and
/// the owned actions alive at once, glibc hands the heap back to the system
/// once they are freed, and the next read faults it in again (a read of a
/// 100,000-line first build took twice as long that way).
trait Collect<'a>: Default {
    /// How many actions there are.
    fn len(&self) -> usize;

    /// Adds an action with its first output.
    fn add(&mut self, start_ms: u64, end_ms: u64, hash: &'a str, epoch: u32, output: Cow<'a, str>);

    /// Adds an output to the action at `index`.
    fn add_output(&mut self, index: usize, output: Cow<'a, str>);
}

impl<'a> Collect<'a> for Vec<Action> {
    fn len(&self) -> usize {
        Vec::len(self)
    }

    #[inline]
    fn add(&mut self, start_ms: u64, end_ms: u64, hash: &'a str, epoch: u32, output: Cow<'a, str>) {
        self.push(Action {
            start_ms,
            end_ms,
            outputs: vec![output.into_owned()],
            hash: hash.to_owned(),
            epoch,
        });
    }

    #[inline]
    fn add_output(&mut self, index: usize, output: Cow<'a, str>) {
        self[index].outputs.push(output.into_owned());
    }
}

/// The actions of a [`DeltaRef`] as they are read. An action's outputs are
/// kept next to each other in [`Actions::outputs`], as [`Actions`] needs
/// them.
#[derive(Default)]
struct Gather<'a> {
    actions: Actions<'a>,
    /// Empty while each line is of the latest action or a new one, and
    /// outputs are only ever added at the end of the latest action's. Once a
    /// line is of an earlier action (which has the same end time, so the
    /// lines of two actions are interleaved), the action of each output, to
    /// put them in order at the end.
    owners: Vec<usize>,
}

impl<'a> Collect<'a> for Gather<'a> {
    fn len(&self) -> usize {
        self.actions.heads.len()
    }

    #[inline]
    fn add(&mut self, start_ms: u64, end_ms: u64, hash: &'a str, epoch: u32, output: Cow<'a, str>) {
        let first = self.actions.outputs.len();
        if !self.owners.is_empty() {
            self.owners.push(self.len());
        }
        self.actions.heads.push(Head { start_ms, end_ms, hash, epoch, first, len: 1 });
        self.actions.outputs.push(output);
    }

    #[inline]
    fn add_output(&mut self, index: usize, output: Cow<'a, str>) {
        if self.owners.is_empty() && index + 1 != self.len() {
            self.owners = self
                .actions
                .heads
                .iter()
                .enumerate()
                .flat_map(|(i, h)| std::iter::repeat_n(i, h.len))
                .collect();
        }
        if !self.owners.is_empty() {
            self.owners.push(index);
        }
        self.actions.heads[index].len += 1;
        self.actions.outputs.push(output);
    }
}

impl<'a> Gather<'a> {
    /// The actions, each one's outputs in the order of their lines.
    fn finish(self) -> Actions<'a> {
        let Gather { mut actions, owners } = self;
        if !owners.is_empty() {
            // A stable sort: the outputs of each action stay in the order of
            // their lines.
            let mut pairs: Vec<(usize, Cow<'a, str>)> = owners.into_iter().zip(actions.outputs).collect();
            pairs.sort_by_key(|&(owner, _)| owner);
            actions.outputs = pairs.into_iter().map(|(_, output)| output).collect();
            let mut first = 0;
            for h in &mut actions.heads {
                h.first = first;
                first += h.len;
            }
        }
        actions
    }
}

/// The outputs of the lines of one epoch, to find one logged twice: one
/// Ninja build logs each output once. Checking all lines of an epoch at once,
/// from a hash of each output, is several times faster than a map of outputs
/// updated line by line, whose every update is a cache miss once it is large.
struct Outputs<'a> {
    /// The lines, from the epoch's first.
    lines: Lines<'a>,
    /// The hash of each line's output.
    hashes: Vec<u64>,
}

impl<'a> Outputs<'a> {
    fn new(lines: Lines<'a>) -> Self {
        Outputs { lines, hashes: Vec::new() }
    }

    #[inline]
    fn push(&mut self, output: &[u8]) {
        self.hashes.push(hash_bytes(output));
    }

    /// Starts a new epoch at the next line of `lines`.
    fn restart(&mut self, lines: Lines<'a>) {
        self.lines = lines;
        self.hashes.clear();
    }

    /// Why the delta is unavailable, if a line's output was logged by an
    /// earlier line of the epoch: for the first such line.
    fn check<T>(&self, after_path: &Path, numbers: &LineNumbers<'_>) -> Option<Result<T, String>> {
        let line = |i: usize| self.lines.clone().nth(i);
        let same = |a: usize, b: usize| {
            line(a).zip(line(b)).is_some_and(|(a, b)| output_of(a.bytes) == output_of(b.bytes))
        };
        let (earlier, later) = first_repeat(&self.hashes, same)?;
        let (earlier, later) = (line(earlier)?, line(later)?);
        Some(unavailable(format!(
            "{}:{}: {}: output {} was already logged on line {}, and Ninja's clock did not restart \
             in between; one Ninja build writes each output once, so these lines are not the \
             record of one run",
            after_path.display(),
            numbers.of(later.no),
            show(later.bytes),
            show(output_of(later.bytes)),
            numbers.of(earlier.no)
        )))
    }
}

/// The output of a line that parsed.
fn output_of(bytes: &[u8]) -> &[u8] {
    line::parse(bytes).map_or(bytes, |e| e.output)
}

/// The first index (in order) whose item an earlier one equals, and that
/// earlier one, given the items' hashes and a test of equality (asked only
/// when hashes match).
///
/// First a bitmap of 16 bits per item, which stays in the processor's
/// caches, finds the few items whose bit another item shares: only those can
/// repeat. Then an [`Index`] of those alone finds the first repeat.
fn first_repeat(hashes: &[u64], same: impl Fn(usize, usize) -> bool) -> Option<(usize, usize)> {
    let n = hashes.len();
    if n < 2 {
        return None;
    }
    let bits = (n * 16).next_power_of_two().max(64);
    let shift = u64::BITS - bits.trailing_zeros();
    let bit = |hash: u64| ((hash >> shift) as usize / 64, 1u64 << ((hash >> shift) % 64));
    let (mut once, mut shared) = (vec![0u64; bits / 64], vec![0u64; bits / 64]);
    for &hash in hashes {
        let (word, mask) = bit(hash);
        shared[word] |= once[word] & mask;
        once[word] |= mask;
    }
    let mut index = Index::new(n / 16, n);
    for (i, &hash) in hashes.iter().enumerate() {
        let (word, mask) = bit(hash);
        if shared[word] & mask == 0 {
            continue;
        }
        match index.find(hash, |earlier| same(earlier, i)) {
            Slot::Taken { position, .. } => return Some((position, i)),
            free => index.set(free, hash, i, |j| hashes[j]),
        }
    }
    None
}

/// The actions made since the end time last changed (see [`finish`]), to
/// find the one a line belongs to: a scan while there are few, a map once
/// there are many.
#[derive(Default)]
struct Block {
    /// The index of the first of these actions.
    first: usize,
    /// The start and hash value of each.
    keys: Vec<(u64, u64)>,
    /// Built from `keys` once they are many: each key's index among them.
    map: Option<FxHashMap<(u64, u64), usize>>,
}

impl Block {
    /// Past this many actions, a map finds an action faster than a scan.
    const SCAN: usize = 16;

    fn restart(&mut self, first: usize) {
        self.first = first;
        self.keys.clear();
        // A fresh map: clearing a large one would cost its capacity again.
        self.map = None;
    }

    #[inline]
    fn find(&self, start_ms: u64, hash_value: u64) -> Option<usize> {
        let key = (start_ms, hash_value);
        let i = match &self.map {
            Some(map) => *map.get(&key)?,
            None => self.keys.iter().position(|k| *k == key)?,
        };
        Some(self.first + i)
    }

    /// Records a new action, at `index` in the list of actions.
    fn add(&mut self, start_ms: u64, hash_value: u64, index: usize) {
        let i = index - self.first;
        self.keys.push((start_ms, hash_value));
        match &mut self.map {
            Some(map) => {
                map.insert((start_ms, hash_value), i);
            }
            None if self.keys.len() > Self::SCAN => {
                self.map = Some(self.keys.iter().enumerate().map(|(i, k)| (*k, i)).collect());
            }
            None => {}
        }
    }
}

/// Fails if a line meant to be this run's is byte for byte a line of the old
/// log: then old and new lines are mixed and cannot be told apart.
fn no_old_lines(
    before_path: &Path,
    old: &OldLog<'_>,
    after_path: &Path,
    new: &[Line<'_>],
) -> Result<(), String> {
    let Some(first) = new.first() else {
        return Ok(());
    };
    // An index of the new lines Ninja would load (only those can be equal
    // to an old line Ninja loads), then one pass over the old lines.
    let keys: Vec<u64> = new.iter().map(|l| line_key(l.bytes)).collect();
    let mut index = Index::new(new.len(), new.len());
    // For each new line, the first new line with the same bytes.
    let mut first_same = vec![None; new.len()];
    for (i, l) in new.iter().enumerate() {
        if line::loaded_output(l.bytes).is_none() {
            continue;
        }
        match index.find(keys[i], |j| new[j].bytes == l.bytes) {
            Slot::Taken { position, .. } => first_same[i] = Some(position),
            free => {
                index.set(free, keys[i], i, |j| keys[j]);
                first_same[i] = Some(i);
            }
        }
    }
    if index.len() == 0 {
        return Ok(());
    }
    // A bitmap of their keys, 8 bits per line, looked at first: most old
    // lines are no new line, and the bitmap stays in the fastest caches.
    let bits = (index.len() * 8).next_power_of_two().max(64);
    let shift = u64::BITS - bits.trailing_zeros();
    let mut bitmap = vec![0u64; bits / 64];
    for (i, &key) in keys.iter().enumerate() {
        if first_same[i] == Some(i) {
            let bit = (key >> shift) as usize;
            bitmap[bit / 64] |= 1 << (bit % 64);
        }
    }
    // For each of those, the offset of the first old line it is.
    let mut was = vec![None; new.len()];
    for &(key, at) in &old.keys {
        let bit = (key >> shift) as usize;
        if bitmap[bit / 64] & (1 << (bit % 64)) == 0 {
            continue;
        }
        if let Some(j) = index.get(key, |j| is_line_at(old.bytes, at, new[j].bytes)) {
            was[j].get_or_insert(at);
        }
    }
    for (l, same) in new.iter().zip(first_same) {
        if let Some(at) = same.and_then(|j| was[j]) {
            let was = old.numbered(at).no;
            return Err(format!(
                "{}:{}: {}: this is line {was} of the log before the run ({}), found among the \
                 lines after {}:{}; the log was rewritten during the run, so its old lines and \
                 this run's are mixed",
                after_path.display(),
                l.no,
                show(l.bytes),
                before_path.display(),
                after_path.display(),
                first.no
            ));
        }
    }
    Ok(())
}

/// Why a log that kept nothing of the old one, without a reason Ninja would
/// have to start over, cannot be read.
fn replaced(
    before_path: &Path,
    old: &OldLog<'_>,
    after_path: &Path,
    h: &Header<'_>,
    lines: &[Line<'_>],
) -> String {
    let (bp, ap) = (before_path.display(), after_path.display());
    let restated = lines.iter().find_map(|l| {
        let e = line::parse(l.bytes).ok()?;
        let (_, at) = old.latest(e.output)?;
        let was = old.line_at(at);
        let o = line::parse(was).ok()?;
        let same = (o.start_ms, o.end_ms, o.hash) == (e.start_ms, e.end_ms, e.hash);
        (same && was != l.bytes).then_some((l, at))
    });
    if let Some((l, at)) = restated {
        let was = old.numbered(at);
        return format!(
            "{ap}:{}: {}: this is {bp}:{} ({}) with another modification time: the log was \
             rewritten with fresh modification times, as `ninja -t restat` does (CMake and GN run \
             it when they regenerate), so this run's lines cannot be told from the old ones",
            l.no,
            show(l.bytes),
            was.no,
            show(was.bytes)
        );
    }
    let lost = format!(
        "none of the {} entries of the log before the run is kept, and its header ({}) is one \
         that {} keeps",
        old.entries,
        show(old.first),
        format::writers_of(h.version)
    );
    match lines.first() {
        None => format!(
            "{ap}: the log holds only its header after the run: {lost}; it was deleted and \
             restarted, or rewritten, during the run"
        ),
        Some(l) => format!(
            "{ap}:{}: {}: the log was replaced during the run: {lost}; it was deleted and \
             restarted, or rewritten, and lines this run wrote before that may be lost",
            l.no,
            show(l.bytes)
        ),
    }
}

/// Reads the header of the log after the run.
fn header<'a>(after_path: &Path, after: &'a [u8]) -> Result<Header<'a>, String> {
    let ap = after_path.display();
    let Some(newline) = line::find(b'\n', after) else {
        return Err(format!(
            "{ap}:1: {}: the log has no complete first line; expected a header such as `{}7`",
            show(after),
            format::HEADER_PREFIX
        ));
    };
    let line = &after[..newline];
    match format::header_version(line) {
        Some(version) if format::KNOWN_VERSIONS.contains(&version) => {
            Ok(Header { line, version, end: newline + 1 })
        }
        Some(version) => Err(format!(
            "{ap}:1: {}: log version {version} is not one this crate reads (v5 from Ninja 1.10 \
             and 1.11, v6 from 1.12, v7 from 1.13)",
            show(line)
        )),
        None => {
            Err(format!("{ap}:1: {}: expected a header such as `{}7`", show(line), format::HEADER_PREFIX))
        }
    }
}

fn cut_short<T>(after_path: &Path, t: Line<'_>) -> Result<T, String> {
    unavailable(format!(
        "{}:{}: {}: the last line has no newline; Ninja writes whole lines, so the log was cut \
         short",
        after_path.display(),
        t.no,
        show(t.bytes)
    ))
}

fn describe(bytes: &[u8]) -> String {
    let first = bytes.split(|&c| c == b'\n').next().unwrap_or_default();
    format!("{} bytes starting with {}", bytes.len(), show(first))
}

fn unavailable<T>(reason: String) -> Result<T, String> {
    Err(reason)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::first_repeat;

    /// The first repeat, the slow way.
    fn naive(items: &[u8]) -> Option<(usize, usize)> {
        (0..items.len()).find_map(|j| (0..j).find(|&i| items[i] == items[j]).map(|i| (i, j)))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

        /// With hashes that collide on purpose (a few values, or only the
        /// high or the low half set), the table still finds exactly the
        /// first repeat.
        #[test]
        fn first_repeat_finds_the_first_repeat(items in prop::collection::vec(0u8..12, 0..40), weak in 0u32..4) {
            let hash = |x: u8| match weak {
                0 => u64::from(x % 3),
                1 => u64::from(x) << 40,
                2 => u64::from(x % 5) * 0x1_0000_0001,
                _ => crate::hash::hash_bytes(&[x]) | u64::from(x),
            };
            let hashes: Vec<u64> = items.iter().map(|&x| hash(x)).collect();
            prop_assert_eq!(first_repeat(&hashes, |a, b| items[a] == items[b]), naive(&items));
        }
    }
}
