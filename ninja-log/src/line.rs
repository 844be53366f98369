//! Splitting a log into lines, and reading one line the way Ninja wrote it.
//!
//! Every line of a log passes through here, so this is where the reader's
//! time goes: lines are found eight bytes at a time, and a line in Ninja's
//! form is read in one pass over its bytes without allocating. Only a line
//! that is not in that form takes the slow path, which says what is wrong.

use crate::format::{FIELD_COUNT, FIELD_SEPARATOR, MAX_HASH_DIGITS, SEPARATORS_TO_LOAD};

/// One line of a log: its number and its bytes without the newline. The
/// number is the line's in the log (from 1), except where lines are counted
/// from a later point (see `read::LineNumbers`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Line<'a> {
    pub(crate) no: usize,
    pub(crate) bytes: &'a [u8],
}

/// Eight copies of the byte 1, and of the byte 0x80.
const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The offset of the first `byte` in `haystack`, looking at eight bytes at a
/// time.
#[inline]
pub(crate) fn find(byte: u8, haystack: &[u8]) -> Option<usize> {
    let pattern = ONES * u64::from(byte);
    let (words, rest) = haystack.as_chunks::<8>();
    for (i, word) in words.iter().enumerate() {
        // A byte equal to `byte` is a zero byte of `x`. The lowest set bit of
        // `found` is in the first zero byte (a borrow can set bits only above
        // it), and the bytes are little-endian, so it gives the offset.
        let x = u64::from_le_bytes(*word) ^ pattern;
        let found = x.wrapping_sub(ONES) & !x & HIGHS;
        if found != 0 {
            return Some(i * 8 + (found.trailing_zeros() / 8) as usize);
        }
    }
    rest.iter().position(|&c| c == byte).map(|i| words.len() * 8 + i)
}

/// The offset of the first `a` or `b` in `haystack`, eight bytes at a time.
#[inline]
pub(crate) fn find_either(a: u8, b: u8, haystack: &[u8]) -> Option<usize> {
    let (pa, pb) = (ONES * u64::from(a), ONES * u64::from(b));
    let (words, rest) = haystack.as_chunks::<8>();
    for (i, word) in words.iter().enumerate() {
        // As in `find`, for each byte; the lowest bit set in either mask is
        // the first byte equal to either.
        let (x, y) = (u64::from_le_bytes(*word) ^ pa, u64::from_le_bytes(*word) ^ pb);
        let found = ((x.wrapping_sub(ONES) & !x) | (y.wrapping_sub(ONES) & !y)) & HIGHS;
        if found != 0 {
            return Some(i * 8 + (found.trailing_zeros() / 8) as usize);
        }
    }
    rest.iter().position(|&c| c == a || c == b).map(|i| words.len() * 8 + i)
}

/// How many times `byte` occurs in `haystack`.
pub(crate) fn count(byte: u8, haystack: &[u8]) -> usize {
    haystack.iter().filter(|&&c| c == byte).count()
}

/// The whole lines of a buffer, numbered from a first number. What follows
/// the last newline is not a line; [`Lines::rest`] gives it.
#[derive(Clone, Debug)]
pub(crate) struct Lines<'a> {
    rest: &'a [u8],
    no: usize,
    /// The length of the whole buffer.
    len: usize,
}

impl<'a> Lines<'a> {
    pub(crate) fn new(buf: &'a [u8], first_no: usize) -> Self {
        Lines { rest: buf, no: first_no, len: buf.len() }
    }

    /// The offset in the buffer of the next line.
    pub(crate) fn offset(&self) -> usize {
        self.len - self.rest.len()
    }

    /// The next line, and its entry if it is in Ninja's form: read in one
    /// pass with [`parse_line`]. For a line that is not, `None`, and
    /// [`parse`] says what is wrong with it.
    #[inline(always)]
    pub(crate) fn next_read(&mut self) -> Option<(Line<'a>, Option<Entry<'a>>)> {
        match parse_line(self.rest) {
            Some((entry, len)) => {
                let line = Line { no: self.no, bytes: &self.rest[..len] };
                self.rest = &self.rest[len + 1..];
                self.no += 1;
                Some((line, Some(entry)))
            }
            None => self.next().map(|line| (line, None)),
        }
    }

    /// What is left: after the last line, the bytes that follow the last
    /// newline (empty when the buffer ends with one), with their number.
    pub(crate) fn rest(&self) -> Line<'a> {
        Line { no: self.no, bytes: self.rest }
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = Line<'a>;

    #[inline]
    fn next(&mut self) -> Option<Line<'a>> {
        let i = find(b'\n', self.rest)?;
        let line = Line { no: self.no, bytes: &self.rest[..i] };
        self.rest = &self.rest[i + 1..];
        self.no += 1;
        Some(line)
    }
}

/// The lines of `buf`, numbered from `first_no`, and the unterminated tail if
/// `buf` does not end with a newline.
pub(crate) fn split(buf: &[u8], first_no: usize) -> (Vec<Line<'_>>, Option<Line<'_>>) {
    let mut lines = Lines::new(buf, first_no);
    let all: Vec<Line<'_>> = lines.by_ref().collect();
    let rest = lines.rest();
    (all, (!rest.bytes.is_empty()).then_some(rest))
}

/// The output field of a line Ninja would load, or `None` for a line it skips.
pub(crate) fn loaded_output(line: &[u8]) -> Option<&[u8]> {
    let mut rest = line;
    for _ in 0..SEPARATORS_TO_LOAD - 1 {
        rest = &rest[find(FIELD_SEPARATOR, rest)? + 1..];
    }
    // The hash field (possibly holding further tabs) must exist.
    Some(&rest[..find(FIELD_SEPARATOR, rest)?])
}

/// A line in exactly the form Ninja writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry<'a> {
    pub(crate) start_ms: u64,
    pub(crate) end_ms: u64,
    pub(crate) output: &'a [u8],
    /// Lowercase hex digits, so ASCII.
    pub(crate) hash: &'a [u8],
    /// The hash's value: hex without leading zeros has one spelling per
    /// value, so two entries have the same `hash` exactly when they have the
    /// same `hash_value`.
    pub(crate) hash_value: u64,
}

/// Reads a line in the exact form Ninja writes it, or says what is wrong.
#[inline]
pub(crate) fn parse(line: &[u8]) -> Result<Entry<'_>, String> {
    match parse_fast(line) {
        Some(entry) => Ok(entry),
        None => parse_slow(line),
    }
}

/// Reads a line in the exact form Ninja writes it in one pass, or `None`.
/// It accepts exactly the lines [`parse_slow`] accepts, with the same result.
#[inline]
pub(crate) fn parse_fast(line: &[u8]) -> Option<Entry<'_>> {
    let (start_ms, end_ms, rest) = times(line)?;
    let tab = find(FIELD_SEPARATOR, rest)?;
    entry(start_ms, end_ms, &rest[..tab], &rest[tab + 1..])
}

/// [`parse_fast`] for the line at the start of `bytes`, up to the first
/// newline, and that line's length. Reading the line and finding its end in
/// one pass saves a search for the newline over the whole line: `None` when
/// there is no newline, or the line is not in Ninja's form.
#[inline(always)]
pub(crate) fn parse_line(bytes: &[u8]) -> Option<(Entry<'_>, usize)> {
    // The times do not read past a newline: it is not a digit.
    let (start_ms, end_ms, rest) = times(bytes)?;
    let stop = find_either(FIELD_SEPARATOR, b'\n', rest)?;
    if rest[stop] != FIELD_SEPARATOR {
        return None;
    }
    let (output, after) = (&rest[..stop], &rest[stop + 1..]);
    // The hash is at most 16 bytes: the newline is at most 17 bytes on.
    let newline = find(b'\n', &after[..after.len().min(MAX_HASH_DIGITS + 1)])?;
    let len = bytes.len() - after.len() + newline;
    Some((entry(start_ms, end_ms, output, &after[..newline])?, len))
}

/// The start and end times of a line in Ninja's form, and what follows the
/// modification time's tab.
#[inline(always)]
fn times(bytes: &[u8]) -> Option<(u64, u64, &[u8])> {
    let (start_ms, rest) = decimal_field(bytes)?;
    let (end_ms, rest) = decimal_field(rest)?;
    let (negative, rest) = match rest.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, rest),
    };
    let (mtime_is_zero, rest) = checked_decimal_field(rest)?;
    // `-0` is not how Ninja prints zero.
    if (negative && mtime_is_zero) || end_ms < start_ms {
        return None;
    }
    Some((start_ms, end_ms, rest))
}

/// The entry with these fields, if the output and the hash are in Ninja's
/// form.
#[inline(always)]
fn entry<'a>(start_ms: u64, end_ms: u64, output: &'a [u8], hash: &'a [u8]) -> Option<Entry<'a>> {
    if output.is_empty()
        || hash.is_empty()
        || hash.len() > MAX_HASH_DIGITS
        || (hash[0] == b'0' && hash.len() > 1)
    {
        return None;
    }
    // Only lowercase hex digits: this also rules out a further tab.
    let hash_value = hex_value(hash)?;
    Some(Entry { start_ms, end_ms, output, hash, hash_value })
}

/// The high bit of each byte of `word` at or above `low` (each byte below 0x80).
#[inline]
fn at_least(word: u64, low: u8) -> u64 {
    word.wrapping_add(ONES * u64::from(0x80 - low)) & HIGHS
}

/// The high bit of each byte of `word` that is not an ASCII digit: exact,
/// whatever the bytes.
#[inline]
fn not_digits(word: u64) -> u64 {
    (word | at_least(word & !HIGHS, b'9' + 1) | !at_least(word & !HIGHS, b'0')) & HIGHS
}

/// The first eight bytes of `bytes` as a little-endian word, if there are
/// eight.
#[inline]
fn first_word(bytes: &[u8]) -> Option<u64> {
    bytes.first_chunk::<8>().map(|w| u64::from_le_bytes(*w))
}

/// A field that is [`decimal`], up to the tab that ends it, and what follows
/// that tab.
#[inline(always)]
fn decimal_field(bytes: &[u8]) -> Option<(u64, &[u8])> {
    // Up to seven digits and their tab in one word, as most times are.
    if let Some(word) = first_word(bytes) {
        let x = word ^ (ONES * u64::from(FIELD_SEPARATOR));
        let tabs = x.wrapping_sub(ONES) & !x & HIGHS;
        if tabs != 0 {
            // The bytes before the first tab are the field; fill the rest
            // with '0' to check them all at once.
            let len = (tabs.trailing_zeros() / 8) as usize;
            let field = (1u64 << (8 * len)) - 1;
            let digits = (word & field) | ((ONES * u64::from(b'0')) & !field);
            let leading_zero = len > 1 && bytes[0] == b'0';
            if len == 0 || leading_zero || not_digits(digits) != 0 {
                return None;
            }
            // The digit values, most significant first, moved to the top
            // so that the bytes below are leading zeros.
            let value = eight_digits((digits - ONES * u64::from(b'0')) << (8 * (8 - len)));
            return Some((value, &bytes[len + 1..]));
        }
    }
    let mut value = 0u64;
    let mut digits = 0;
    loop {
        let c = *bytes.get(digits)?;
        if c == FIELD_SEPARATOR {
            break;
        }
        let digit = c.wrapping_sub(b'0');
        // At most 19 digits, so `value` stays below 10^19 < 2^64.
        if digit > 9 || digits == 19 {
            return None;
        }
        value = value * 10 + u64::from(digit);
        digits += 1;
    }
    let leading_zero = digits > 1 && bytes[0] == b'0';
    if digits == 0 || leading_zero || value > i64::MAX as u64 {
        return None;
    }
    Some((value, &bytes[digits + 1..]))
}

/// The number written by eight digit values (0-9), one per byte, the most
/// significant in the lowest byte (Lemire's method).
#[inline(always)]
fn eight_digits(values: u64) -> u64 {
    const MASK: u64 = 0x0000_00ff_0000_00ff;
    const MUL1: u64 = 100 + (1_000_000 << 32);
    const MUL2: u64 = 1 + (10_000 << 32);
    // Each even byte becomes the two-digit number it starts.
    let pairs = values.wrapping_mul(10).wrapping_add(values >> 8);
    let value =
        (pairs & MASK).wrapping_mul(MUL1).wrapping_add(((pairs >> 16) & MASK).wrapping_mul(MUL2)) >> 32;
    value & 0xffff_ffff
}

/// Like [`decimal_field`], but says only whether the number is zero: it
/// checks the digits without computing the value.
#[inline(always)]
fn checked_decimal_field(bytes: &[u8]) -> Option<(bool, &[u8])> {
    // At most 19 digits: the tab is among the first 20 bytes.
    let len = find(FIELD_SEPARATOR, &bytes[..bytes.len().min(20)])?;
    let field = &bytes[..len];
    let (words, rest) = field.as_chunks::<8>();
    let bad = words.iter().fold(0, |bad, w| bad | not_digits(u64::from_le_bytes(*w)));
    if bad != 0 || !rest.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let fits = match len {
        1 => true,
        2..19 => field[0] != b'0',
        19 => field[0] != b'0' && at_most_i64_max(field),
        _ => false,
    };
    fits.then_some((field == b"0", &bytes[len + 1..]))
}

/// Whether 19 digits are at most `i64::MAX`: equal lengths of digits compare
/// as their numbers do, here 16 and then 3 bytes at a time.
#[inline(always)]
fn at_most_i64_max(field: &[u8]) -> bool {
    const MAX: &[u8; 19] = b"9223372036854775807";
    let key = |f: &[u8]| {
        let high = f.first_chunk::<16>().map(|h| u128::from_be_bytes(*h));
        let low =
            f.get(16..).and_then(<[u8]>::first_chunk::<3>).map(|l| u32::from_be_bytes([0, l[0], l[1], l[2]]));
        high.zip(low)
    };
    field.len() == MAX.len() && key(field) <= key(MAX)
}

/// The value of a hash of 1 to 16 lowercase hex digits, or `None` if it holds
/// any other byte.
#[inline(always)]
fn hex_value(hash: &[u8]) -> Option<u64> {
    // Right-aligned after '0's, which do not change the value.
    let mut padded = [b'0'; 16];
    let at = padded.len().checked_sub(hash.len())?;
    padded[at..].copy_from_slice(hash);
    let (high, low) = padded.split_at(8);
    let high = eight_hex(u64::from_le_bytes(high.try_into().ok()?))?;
    let low = eight_hex(u64::from_le_bytes(low.try_into().ok()?))?;
    Some(high << 32 | low)
}

/// The number written by eight lowercase hex digits, the most significant
/// in the lowest byte, or `None` if a byte is not one.
#[inline(always)]
fn eight_hex(word: u64) -> Option<u64> {
    let low = word & !HIGHS;
    let digit = at_least(low, b'0') & !at_least(low, b'9' + 1);
    let letter = at_least(low, b'a') & !at_least(low, b'f' + 1);
    if (word & HIGHS) != 0 || (digit | letter) != HIGHS {
        return None;
    }
    // Each byte's value: its low four bits, plus 9 for a letter ('a' is 0x61).
    let nibbles = (word & (ONES * 0x0f)) + (letter >> 7) * 9;
    // Pairs of nibbles into bytes, pairs of bytes into 16 bits, then 32.
    let bytes = ((nibbles & 0x000f_000f_000f_000f) << 4) | ((nibbles >> 8) & 0x000f_000f_000f_000f);
    let halves = ((bytes & 0x0000_00ff_0000_00ff) << 8) | ((bytes >> 16) & 0x0000_00ff_0000_00ff);
    Some(((halves & 0x0000_0000_0000_ffff) << 16) | ((halves >> 32) & 0xffff))
}

/// [`parse`] field by field, saying what is wrong with a line that is not in
/// Ninja's form.
pub(crate) fn parse_slow(line: &[u8]) -> Result<Entry<'_>, String> {
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
    let hex = std::str::from_utf8(hash).map_err(|_| "the hash is not ASCII")?;
    let hash_value = u64::from_str_radix(hex, 16).map_err(|_| "the hash is not lowercase hex")?;
    Ok(Entry { start_ms, end_ms, output, hash, hash_value })
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{
        checked_decimal_field, decimal, decimal_field, find, find_either, hex_value, loaded_output,
        parse_fast, parse_line, parse_slow, split,
    };

    /// Pieces a field is drawn from: every edge of every check.
    const PIECES: &[&[u8]] = &[
        b"0",
        b"00",
        b"01",
        b"1",
        b"-",
        b"-0",
        b"-1",
        b"--1",
        b"9",
        b"10",
        b"a",
        b"f",
        b"0f",
        b"g",
        b"A",
        b"ff",
        b"9223372036854775807",
        b"9223372036854775808",
        b"-9223372036854775807",
        b"-9223372036854775808",
        b"18446744073709551615",
        b"18446744073709551616",
        b"1000000000000000000",
        b"9999999999999999999",
        b"10000000000000000000",
        b"ffffffffffffffff",
        b"1ffffffffffffffff",
        b"0000000000000000",
        b"fedcba9876543210",
        b"\t",
        b"",
        b" ",
        b"\xff",
        b"\0",
        b"x.o",
        b"obj/a b.o",
        b"\r",
    ];

    fn line() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(
            prop::collection::vec(prop::sample::select(PIECES), 0..3).prop_map(|p| p.concat()),
            0..7,
        )
        .prop_map(|fields| fields.join(&b'\t'))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 20_000, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn the_fast_parse_agrees_with_the_slow_one(line in line()) {
            prop_assert_eq!(parse_fast(&line), parse_slow(&line).ok(), "{:?}", String::from_utf8_lossy(&line));
        }

        #[test]
        fn hex_values_are_read_like_from_str_radix(
            hash in prop::collection::vec(prop::sample::select(&b"0123456789abcdefgAF/:`@\xe1\xb0\t"[..]), 1..17),
            value in any::<u64>(),
        ) {
            let want = hash
                .iter()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
                .then(|| u64::from_str_radix(std::str::from_utf8(&hash).unwrap_or("x"), 16).ok())
                .flatten();
            prop_assert_eq!(hex_value(&hash), want);
            prop_assert_eq!(hex_value(format!("{value:x}").as_bytes()), Some(value));
        }

        #[test]
        fn decimal_fields_are_read_like_the_slow_decimal(
            field in prop::collection::vec(prop::sample::select(&b"0123456789-a/:\xb0 "[..]), 0..22),
            value in any::<u64>(),
            after in prop::collection::vec(prop::sample::select(&b"0123456789\tx"[..]), 0..10),
        ) {
            for field in [field, value.to_string().into_bytes(), (value % 100_000_000).to_string().into_bytes()] {
                let mut bytes = field.clone();
                bytes.push(b'\t');
                bytes.extend_from_slice(&after);
                let want = decimal(&field);
                prop_assert_eq!(decimal_field(&bytes).map(|(v, rest)| (v, rest.len())), want.map(|v| (v, after.len())));
                prop_assert_eq!(
                    checked_decimal_field(&bytes).map(|(zero, rest)| (zero, rest.len())),
                    want.map(|v| (v == 0, after.len()))
                );
            }
        }

        #[test]
        fn parse_line_reads_up_to_the_first_newline(line in line(), rest in line(), newline in any::<bool>()) {
            let mut bytes = line.clone();
            if newline {
                bytes.push(b'\n');
            }
            bytes.extend_from_slice(&rest);
            let want = bytes
                .iter()
                .position(|&c| c == b'\n')
                .and_then(|n| parse_fast(&bytes[..n]).map(|e| (e, n)));
            prop_assert_eq!(parse_line(&bytes), want);
        }

        #[test]
        fn find_either_finds_the_first_of_two_bytes(
            haystack in prop::collection::vec(prop::sample::select(&b"ab\n\t\x80\xff\x00\x01"[..]), 0..40),
        ) {
            prop_assert_eq!(find_either(b'\t', b'\n', &haystack), haystack.iter().position(|&c| c == b'\t' || c == b'\n'));
        }

        /// A field that ends before byte 19, with digits and a tab at 19
        /// after it: the tab at 19 must not be taken for the field's end.
        #[test]
        fn a_short_field_is_not_read_as_nineteen_digits(len in 1usize..19, digit in 0u8..10) {
            let mut bytes = vec![b'1'; len];
            bytes.push(b'\t');
            bytes.resize(19, b'0' + digit);
            bytes.extend_from_slice(b"\t5\t");
            let want = decimal(&bytes[..len]).map(|v| (v == 0, bytes.len() - len - 1));
            prop_assert_eq!(checked_decimal_field(&bytes).map(|(zero, rest)| (zero, rest.len())), want);
        }

        #[test]
        fn loaded_output_takes_the_fourth_field_of_a_line_with_four_tabs(line in line()) {
            let mut fields = line.splitn(5, |&c| c == b'\t');
            let want = fields.nth(3).filter(|_| fields.next().is_some());
            prop_assert_eq!(loaded_output(&line), want);
        }

        #[test]
        fn find_finds_the_first_byte(
            haystack in prop::collection::vec(prop::sample::select(&b"ab\n\t\x80\xff\x00\x01"[..]), 0..40),
            byte in prop::sample::select(&b"\n\t\x00\x80\xff"[..]),
        ) {
            prop_assert_eq!(find(byte, &haystack), haystack.iter().position(|&c| c == byte));
        }

        #[test]
        fn split_keeps_every_byte(buf in prop::collection::vec(prop::sample::select(&b"ab\n"[..]), 0..40)) {
            let (lines, rest) = split(&buf, 7);
            let want: Vec<&[u8]> = buf.split(|&c| c == b'\n').collect();
            // `split` always yields one piece, the last: what follows the last newline.
            let Some((last, whole)) = want.split_last() else { return Ok(()) };
            prop_assert_eq!(lines.iter().map(|l| l.bytes).collect::<Vec<_>>(), whole.to_vec());
            prop_assert_eq!(lines.iter().map(|l| l.no).collect::<Vec<_>>(), (7..7 + whole.len()).collect::<Vec<_>>());
            prop_assert_eq!(rest.map(|r| (r.no, r.bytes)), (!last.is_empty()).then_some((7 + whole.len(), *last)));
        }
    }
}
