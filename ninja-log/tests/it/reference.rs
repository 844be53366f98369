//! The reader as it was before its performance work (straightforward, and
//! slow), kept as the reference the fast reader must match byte for byte:
//! the same actions, notes and reasons for every input. `differential.rs`
//! holds the two side by side. A deliberate change of what the reader says
//! must be made here too.

#![allow(dead_code)]

use std::path::Path;

use ninja_log::Delta;

/// The reference delta, from the same arguments as `Snapshot::delta_from_bytes`.
pub fn delta(path: &Path, before: Option<&[u8]>, after: Option<&[u8]>) -> Delta {
    read::delta(path, before, path, after)
}

mod line {
    use ninja_log::format::{FIELD_COUNT, FIELD_SEPARATOR, MAX_HASH_DIGITS, SEPARATORS_TO_LOAD};

    /// One line of a log: its 1-based number and its bytes without the newline.
    #[derive(Clone, Copy, Debug)]
    pub struct Line<'a> {
        pub no: usize,
        pub bytes: &'a [u8],
    }

    /// The lines of `buf`, numbered from `first_no`, and the unterminated tail if
    /// `buf` does not end with a newline.
    pub fn split(buf: &[u8], first_no: usize) -> (Vec<Line<'_>>, Option<Line<'_>>) {
        let mut lines = Vec::new();
        let mut no = first_no;
        let mut rest = buf;
        while !rest.is_empty() {
            match rest.iter().position(|&c| c == b'\n') {
                Some(i) => {
                    lines.push(Line { no, bytes: &rest[..i] });
                    rest = &rest[i + 1..];
                    no += 1;
                }
                None => return (lines, Some(Line { no, bytes: rest })),
            }
        }
        (lines, None)
    }

    /// The output field of a line Ninja would load, or `None` for a line it skips.
    pub fn loaded_output(line: &[u8]) -> Option<&[u8]> {
        let mut fields = line.splitn(SEPARATORS_TO_LOAD + 1, |&c| c == FIELD_SEPARATOR);
        let output = fields.nth(SEPARATORS_TO_LOAD - 1)?;
        // The hash field (possibly holding further tabs) must exist.
        fields.next()?;
        Some(output)
    }

    /// A line in exactly the form Ninja writes.
    #[derive(Clone, Copy, Debug)]
    pub struct Entry<'a> {
        pub start_ms: u64,
        pub end_ms: u64,
        pub output: &'a [u8],
        pub hash: &'a str,
    }

    /// Reads a line in the exact form Ninja writes it, or says what is wrong.
    pub fn parse(line: &[u8]) -> Result<Entry<'_>, String> {
        let fields: Vec<&[u8]> = line.split(|&c| c == FIELD_SEPARATOR).collect();
        if fields.len() != FIELD_COUNT {
            return Err(format!("expected {FIELD_COUNT} tab-separated fields, found {}", fields.len()));
        }
        let start_ms = decimal(fields[0]).ok_or("the start time is not a decimal number")?;
        let end_ms = decimal(fields[1]).ok_or("the end time is not a decimal number")?;
        let mtime = fields[2].strip_prefix(b"-").unwrap_or(fields[2]);
        if decimal(mtime).is_none() || fields[2] == b"-0" {
            return Err("the modification time is not a decimal number".into());
        }
        if end_ms < start_ms {
            return Err("the action ends before it starts".into());
        }
        let output = fields[3];
        if output.is_empty() {
            return Err("the output path is empty".into());
        }
        let hash = fields[4];
        let hex_ok = !hash.is_empty()
            && hash.len() <= MAX_HASH_DIGITS
            && hash.iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
            && (hash[0] != b'0' || hash.len() == 1);
        if !hex_ok {
            return Err("the hash is not lowercase hex without leading zeros".into());
        }
        let hash = std::str::from_utf8(hash).map_err(|_| "the hash is not ASCII")?;
        Ok(Entry { start_ms, end_ms, output, hash })
    }

    /// A non-negative decimal number without leading zeros that fits in 63 bits,
    /// as Ninja prints its integers.
    fn decimal(field: &[u8]) -> Option<u64> {
        if field.is_empty() || field.len() > 19 || !field.iter().all(u8::is_ascii_digit) {
            return None;
        }
        if field[0] == b'0' && field.len() > 1 {
            return None;
        }
        let value: u64 = std::str::from_utf8(field).ok()?.parse().ok()?;
        (value <= i64::MAX as u64).then_some(value)
    }

    /// A line quoted for a message: tabs and other controls escaped, bytes that
    /// are not UTF-8 replaced, and long lines cut.
    pub fn show(bytes: &[u8]) -> String {
        const MAX_CHARS: usize = 120;
        let text = String::from_utf8_lossy(bytes);
        let mut shown = String::new();
        for (count, c) in text.chars().enumerate() {
            if count == MAX_CHARS {
                shown.push('…');
                break;
            }
            shown.extend(c.escape_debug());
        }
        format!("`{shown}`")
    }
}

mod read {
    use std::collections::hash_map::Entry as MapEntry;
    use std::collections::{HashMap, HashSet};
    use std::path::Path;

    use super::line::{self, show, Line};
    use ninja_log::format;
    use ninja_log::{Action, Delta};

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
        /// The first line (or, with no newline at all, everything).
        first: &'a [u8],
        /// Lines Ninja would load, after the first line.
        entries: Vec<(Line<'a>, &'a [u8])>,
        /// For each output, its latest line.
        latest: HashMap<&'a [u8], Line<'a>>,
        /// For each loaded line's bytes, the number of its first occurrence.
        any: HashMap<&'a [u8], usize>,
    }

    impl<'a> OldLog<'a> {
        fn load(bytes: &'a [u8]) -> Self {
            let first_end = bytes.iter().position(|&c| c == b'\n').unwrap_or(bytes.len());
            let (lines, _unterminated) = line::split(bytes, 1);
            let mut log = OldLog {
                first: &bytes[..first_end],
                entries: Vec::new(),
                latest: HashMap::new(),
                any: HashMap::new(),
            };
            for l in lines.into_iter().skip(1) {
                if let Some(output) = line::loaded_output(l.bytes) {
                    log.entries.push((l, output));
                    log.latest.insert(output, l);
                    log.any.entry(l.bytes).or_insert(l.no);
                }
            }
            log
        }
    }

    pub fn delta(
        before_path: &Path,
        before: Option<&[u8]>,
        after_path: &Path,
        after: Option<&[u8]>,
    ) -> Delta {
        let (bp, ap) = (before_path.display(), after_path.display());
        let after = match (before, after) {
            (_, Some(a)) if !a.is_empty() => a,
            (None | Some([]), after) => {
                let found = if after.is_some() { "empty" } else { "missing" };
                return Delta::available(
                    Vec::new(),
                    vec![format!(
                        "{ap}: the log is {found} after the run and held nothing before it, so Ninja \
                         recorded no successful action in it (nothing to do, a dry run, or a failure \
                         before any action succeeded); if the manifest sets `builddir`, the log is in \
                         that directory instead"
                    )],
                );
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
        let old = OldLog::load(before_bytes);

        // The longest run of leading lines that are each the latest old line of
        // a distinct output: what a recompaction keeps.
        let mut kept: HashSet<&[u8]> = HashSet::new();
        for l in &lines {
            match line::loaded_output(l.bytes) {
                Some(o) if !kept.contains(o) && old.latest.get(o).is_some_and(|x| x.bytes == l.bytes) => {
                    kept.insert(o);
                }
                _ => break,
            }
        }
        let new = &lines[kept.len()..];

        if kept.is_empty() {
            let old_version = format::version_as_ninja_reads_it(old.first);
            let everyone_starts_over = old_version.is_none_or(|v| v < format::OLDEST_VERSION_KEPT);
            let newer_starts_over =
                format::VERSIONS_THAT_START_OVER.contains(&h.version) && old.first != h.line;
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
            return finish(after_path, new, vec![note]);
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
        if let Some((l, what)) =
            old.entries.iter().find_map(|(l, _)| line::parse(l.bytes).err().map(|what| (l, what)))
        {
            return unavailable(format!(
                "{bp}:{}: {}: {what}; Ninja loads such a line but rewrites it in its own form when it \
                 recompacts, so the rewritten log cannot be matched against the old one",
                l.no,
                show(l.bytes)
            ));
        }
        let (entries, outputs) = (old.entries.len(), old.latest.len());
        if !format::recompacts_at_load(entries, outputs) {
            return unavailable(format!(
                "{ap}: the log was rewritten during the run: its first {} lines are kept unchanged \
                 from the log before the run, but that log held {entries} entries for {outputs} \
                 outputs, too few for Ninja to recompact it when loading it (it needs more than {} \
                 entries and more than {} per output); a rewrite from inside the build (`ninja -t \
                 restat` or `-t recompact`, as regeneration steps run) replaces the file, and what \
                 Ninja writes after that goes to the replaced file",
                kept.len(),
                format::RECOMPACT_MIN_ENTRIES,
                format::RECOMPACT_RATIO,
            ));
        }
        if let Err(reason) = no_old_lines(before_path, &old, after_path, new) {
            return unavailable(reason);
        }
        for l in new {
            let Some(o) = line::loaded_output(l.bytes) else {
                continue;
            };
            if let (Some(was), false) = (old.latest.get(o), kept.contains(o)) {
                return unavailable(format!(
                    "{ap}:{}: {}: output {} had a line in the log before the run ({bp}:{}) that the \
                     recompacted part of the log does not keep; Ninja keeps every output it still \
                     builds, so the log was rewritten during the run (as `ninja -t restat` does) and \
                     this line may be an old one rewritten",
                    l.no,
                    show(l.bytes),
                    show(o),
                    was.no
                ));
            }
        }
        let first_new = new.first().map_or(lines.len() + 2, |l| l.no);
        let mut notes = vec![format!(
            "{ap}: Ninja recompacted the log when it loaded it: lines 2-{} keep {} of the {outputs} \
             outputs of the log before the run ({} dropped as no longer built), and this run's lines \
             start at line {first_new}",
            kept.len() + 1,
            kept.len(),
            outputs - kept.len(),
        )];
        if old.first != h.line {
            notes.push(format!(
                "{ap}:1: the header changed from {} to {}: the log was recompacted by {}",
                show(old.first),
                show(h.line),
                format::writers_of(h.version)
            ));
        }
        finish(after_path, new, notes)
    }

    /// A log that grew: the bytes past the old ones are this run's.
    fn appended(
        before_path: &Path,
        before: Option<&[u8]>,
        after_path: &Path,
        after: &[u8],
        h: &Header<'_>,
    ) -> Delta {
        let b = before.unwrap_or_default();
        let start = b.len().max(h.end);
        let first_no = 1 + after[..start].iter().filter(|&&c| c == b'\n').count();
        let (lines, unterminated) = line::split(&after[start..], first_no);
        if let Some(t) = unterminated {
            return cut_short(after_path, t);
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
                "{}:{first_no}: the log before the run ended inside a line; this run's first line was \
                 written straight after it",
                before_path.display()
            ));
        }
        finish(after_path, &lines, notes)
    }

    /// Reads the lines of this run into actions.
    fn finish(after_path: &Path, lines: &[Line<'_>], mut notes: Vec<String>) -> Delta {
        let ap = after_path.display();
        let mut actions: Vec<Action> = Vec::new();
        let mut by_key: HashMap<(u32, u64, u64, &str), usize> = HashMap::new();
        let mut seen: HashMap<&[u8], usize> = HashMap::new();
        let mut epoch = 0u32;
        let mut previous: Option<(u64, usize)> = None;
        let mut not_utf8: Option<(usize, usize)> = None;
        for l in lines {
            let e = match line::parse(l.bytes) {
                Ok(e) => e,
                Err(what) => {
                    return unavailable(format!(
                        "{ap}:{}: {}: {what}; Ninja writes `start\\tend\\tmtime\\toutput\\thash`",
                        l.no,
                        show(l.bytes)
                    ))
                }
            };
            if let Some((end, no)) = previous {
                if e.end_ms < end {
                    epoch += 1;
                    seen.clear();
                    notes.push(format!(
                        "{ap}:{}: times go back (this action ends at {} ms, the one on line {no} at \
                         {end} ms): Ninja restarted its clock, as it does after regenerating its \
                         manifest; actions from here on have epoch {epoch}, on a clock that started \
                         after the actions before them ended",
                        l.no, e.end_ms
                    ));
                }
            }
            previous = Some((e.end_ms, l.no));
            if let Some(first) = seen.insert(e.output, l.no) {
                return unavailable(format!(
                    "{ap}:{}: {}: output {} was already logged on line {first}, and Ninja's clock did \
                     not restart in between; one Ninja build writes each output once, so these lines \
                     are not the record of one run",
                    l.no,
                    show(l.bytes),
                    show(e.output)
                ));
            }
            let output = match std::str::from_utf8(e.output) {
                Ok(s) => s.to_owned(),
                Err(_) => {
                    let (first, count) = not_utf8.get_or_insert((l.no, 0));
                    *first = (*first).min(l.no);
                    *count += 1;
                    String::from_utf8_lossy(e.output).into_owned()
                }
            };
            match by_key.entry((epoch, e.start_ms, e.end_ms, e.hash)) {
                MapEntry::Occupied(i) => actions[*i.get()].outputs.push(output),
                MapEntry::Vacant(v) => {
                    v.insert(actions.len());
                    actions.push(Action::new(e.start_ms, e.end_ms, vec![output], e.hash, epoch));
                }
            }
        }
        if let Some((first, count)) = not_utf8 {
            notes.push(format!(
                "{ap}:{first}: {count} output path(s) from here on are not UTF-8; they are shown with \
                 U+FFFD in place of the bytes that are not"
            ));
        }
        Delta::available(actions, notes)
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
        for l in new {
            if let Some(&was) = old.any.get(l.bytes) {
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
            let was = old.latest.get(e.output)?;
            let o = line::parse(was.bytes).ok()?;
            let same = (o.start_ms, o.end_ms, o.hash) == (e.start_ms, e.end_ms, e.hash);
            (same && was.bytes != l.bytes).then_some((l, was))
        });
        if let Some((l, was)) = restated {
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
            old.entries.len(),
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
        let Some(newline) = after.iter().position(|&c| c == b'\n') else {
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

    fn cut_short(after_path: &Path, t: Line<'_>) -> Delta {
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

    fn unavailable(reason: String) -> Delta {
        Delta::unavailable(reason)
    }
}
