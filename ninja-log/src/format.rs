//! The `.ninja_log` format: every constant this crate relies on, in one place.
//!
//! A log is a header line followed by one line per output of each successful
//! action (`→` marks a tab):
//!
//! ```text
//! # ninja log v5
//! 0→5→1795957632881504865→a.out→d7efcd82e1836447
//! 5→8→1795957632881504865→b.out→90c3c73f4067dd58
//! 5→8→1795957632881504865→c.out→90c3c73f4067dd58
//! ```
//!
//! The fields, separated by tabs, are the start and end of the action in
//! milliseconds since that Ninja process started, a modification time (its
//! meaning changed in 1.12 and this crate does not use it), the output path as
//! written in the manifest, and a hash of the command line in lowercase hex
//! without leading zeros. The lines of one action with several outputs share
//! start, end and hash.

/// What every header starts with; the version number follows, then a newline.
pub const HEADER_PREFIX: &str = "# ninja log v";

/// The log versions this crate reads: v5 (Ninja 1.10 and 1.11), v6 (1.12) and
/// v7 (1.13). Their lines have the same shape; only the hash function and
/// the meaning of the modification time differ.
pub const KNOWN_VERSIONS: [u32; 3] = [5, 6, 7];

/// The versions whose writers (Ninja 1.12 and later) delete a log of any other
/// version when they load it and start a new one.
pub const VERSIONS_THAT_START_OVER: [u32; 2] = [6, 7];

/// Below this version, or with no readable version at all, every Ninja this
/// crate knows deletes the log when it loads it and starts a new one.
pub const OLDEST_VERSION_KEPT: i64 = 4;

/// The byte between fields.
pub const FIELD_SEPARATOR: u8 = b'\t';

/// The number of fields in a line Ninja writes.
pub const FIELD_COUNT: usize = 5;

/// Ninja loads a line only if it has at least this many separators (and ends
/// with a newline); it skips any other line without complaint.
pub const SEPARATORS_TO_LOAD: usize = 4;

/// Ninja recompacts the log when it loads it only if it holds more than this
/// many entries ...
pub const RECOMPACT_MIN_ENTRIES: usize = 100;

/// ... and more than this many entries per distinct output.
pub const RECOMPACT_RATIO: usize = 3;

/// The longest hash Ninja writes: a 64-bit value in hex.
pub const MAX_HASH_DIGITS: usize = 16;

/// Whether Ninja would recompact, when loading it, a log holding `entries`
/// loadable lines for `unique_outputs` distinct outputs.
pub fn recompacts_at_load(entries: usize, unique_outputs: usize) -> bool {
    entries > RECOMPACT_MIN_ENTRIES && entries > RECOMPACT_RATIO * unique_outputs
}

/// The version a header line (without its newline) names, if it is exactly
/// `# ninja log v<digits>`.
pub fn header_version(line: &[u8]) -> Option<u32> {
    let digits = line.strip_prefix(HEADER_PREFIX.as_bytes())?;
    if digits.is_empty() || digits.len() > 9 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// The version Ninja itself reads from a first line: it matches the prefix and
/// then a signed decimal number, ignoring what follows. `None` when Ninja
/// finds no number there.
pub fn version_as_ninja_reads_it(line: &[u8]) -> Option<i64> {
    let rest = line.strip_prefix(HEADER_PREFIX.as_bytes())?;
    let (negative, rest) = match rest.first() {
        Some(b'-') => (true, &rest[1..]),
        Some(b'+') => (false, &rest[1..]),
        _ => (false, rest),
    };
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let mut value: i64 = 0;
    for &c in &rest[..digits.min(12)] {
        value = value * 10 + i64::from(c - b'0');
    }
    Some(if negative { -value } else { value })
}

/// Which Ninja releases write a log of `version`, for messages.
pub fn writers_of(version: u32) -> &'static str {
    match version {
        5 => "Ninja 1.10 and 1.11",
        6 => "Ninja 1.12",
        7 => "Ninja 1.13",
        _ => "no Ninja release this crate knows",
    }
}
