//! Splitting a log into lines, and reading one line the way Ninja wrote it.

use crate::format::{FIELD_COUNT, FIELD_SEPARATOR, MAX_HASH_DIGITS, SEPARATORS_TO_LOAD};

/// One line of a log: its 1-based number and its bytes without the newline.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Line<'a> {
    pub(crate) no: usize,
    pub(crate) bytes: &'a [u8],
}

/// The lines of `buf`, numbered from `first_no`, and the unterminated tail if
/// `buf` does not end with a newline.
pub(crate) fn split(buf: &[u8], first_no: usize) -> (Vec<Line<'_>>, Option<Line<'_>>) {
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
pub(crate) fn loaded_output(line: &[u8]) -> Option<&[u8]> {
    let mut fields = line.splitn(SEPARATORS_TO_LOAD + 1, |&c| c == FIELD_SEPARATOR);
    let output = fields.nth(SEPARATORS_TO_LOAD - 1)?;
    // The hash field (possibly holding further tabs) must exist.
    fields.next()?;
    Some(output)
}

/// A line in exactly the form Ninja writes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry<'a> {
    pub(crate) start_ms: u64,
    pub(crate) end_ms: u64,
    pub(crate) output: &'a [u8],
    pub(crate) hash: &'a str,
}

/// Reads a line in the exact form Ninja writes it, or says what is wrong.
pub(crate) fn parse(line: &[u8]) -> Result<Entry<'_>, String> {
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
pub(crate) fn show(bytes: &[u8]) -> String {
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
