//! Bytes written forwards into room of a fixed size, each piece as a copy
//! of a fixed length (no call to copy a variable one) after which the end
//! moves on by the piece's true length: what follows overwrites the rest.
//! Numbers come from tables of three digits, a time's digits two groups of
//! three at a time, so a span's usual numbers cost a multiplication and a
//! load or two each, not a division and a store per two digits.
//!
//! [`Room`] never panics: a piece that does not fit marks the room full,
//! and the caller drops what it wrote (and encodes the event the general
//! way, [`crate::json`]'s, whose bytes these are).

use crate::json::{self, NUMBER};

/// For each `n` below 1000, its three digits with leading zeros (`007`), in
/// the low three bytes in writing order; 1024 entries, so that a number
/// known to be below 1000 indexes it masked, with no check (those past
/// 999 are never read).
pub(crate) const TRIPLES: [u32; 1024] = {
    let mut t = [0; 1024];
    let mut n = 0;
    while n < 1000 {
        t[n] = (b'0' as u32 + (n / 100) as u32)
            | (b'0' as u32 + (n / 10 % 10) as u32) << 8
            | (b'0' as u32 + (n % 10) as u32) << 16;
        n += 1;
    }
    t
};

/// For each `n` below 1000, its digits without leading zeros in the low
/// bytes, in writing order, and in the top byte how many there are.
pub(crate) const SMALL: [u32; 1000] = {
    let mut t = [0; 1000];
    let mut n = 0;
    while n < 1000 {
        let len = if n >= 100 {
            3
        } else if n >= 10 {
            2
        } else {
            1
        };
        t[n] = (TRIPLES[n] >> (8 * (3 - len))) | (len as u32) << 24;
        n += 1;
    }
    t
};

/// The bytes of a [`Room`]: twice [`LIMIT`], so that a piece of at most
/// [`LIMIT`] bytes copied at an offset below [`LIMIT`] is in bounds.
pub(crate) const ROOM: usize = 4096;
/// One event written in a [`Room`] takes less: [`crate::spans`] checks
/// that what it writes does.
pub(crate) const LIMIT: usize = ROOM / 2;

/// Room to write one event in, forwards.
pub(crate) struct Room<'b> {
    bytes: &'b mut [u8; ROOM],
    /// Where the bytes written so far end.
    at: usize,
    /// Whether a piece of a length not known beforehand did not fit.
    full: bool,
}

impl<'b> Room<'b> {
    /// Room at the start of `bytes`.
    #[inline(always)]
    pub(crate) fn new(bytes: &'b mut [u8; ROOM]) -> Self {
        Room { bytes, at: 0, full: false }
    }

    /// How many bytes were written, or `None` if they do not fit below
    /// [`LIMIT`] (and some may have overwritten others).
    #[inline(always)]
    pub(crate) fn written(&self) -> Option<usize> {
        (self.at < LIMIT && !self.full).then_some(self.at)
    }

    /// Copies all of `piece` and keeps its first `len` bytes.
    #[inline(always)]
    pub(crate) fn put<const N: usize>(&mut self, piece: &[u8; N], len: usize) {
        const { assert!(N <= LIMIT) };
        debug_assert!(len <= N);
        // The offset is `at` as long as the event fits below `LIMIT`
        // (`written` tells); the mask only keeps the copy in bounds, with
        // no check.
        let at = self.at & (LIMIT - 1);
        self.bytes[at..at + N].copy_from_slice(piece);
        self.at += len;
    }

    /// Copies `bytes`, of any length.
    #[inline(always)]
    pub(crate) fn put_slice(&mut self, bytes: &[u8]) {
        let at = self.at & (LIMIT - 1);
        match self.bytes.get_mut(at..at + bytes.len()) {
            Some(to) => {
                to.copy_from_slice(bytes);
                self.at += bytes.len();
            }
            None => self.full = true,
        }
    }

    /// `n` below 1000, without leading zeros.
    #[inline(always)]
    fn small(&mut self, n: u32) {
        let e = SMALL[n as usize];
        self.put(&e.to_le_bytes(), (e >> 24) as usize);
    }

    /// `n` below 1000, as three digits.
    #[inline(always)]
    fn triple(&mut self, n: u32) {
        self.put(&TRIPLES[n as usize].to_le_bytes(), 3);
    }

    /// `n` in decimal, as [`json::uint`] writes it.
    #[inline(always)]
    pub(crate) fn uint(&mut self, n: u64) {
        if n < 1000 {
            self.small(n as u32);
        } else if n < 1_000_000 {
            let high = n as u32 / 1000;
            self.small(high);
            self.triple(n as u32 % 1000);
        } else {
            self.large(n);
        }
    }

    /// `n` of a million or more.
    #[inline(always)]
    fn large(&mut self, n: u64) {
        let (digits, len) = large(n);
        self.put(&digits, len);
    }

    /// `n` in decimal, as [`json::int`] writes it.
    #[inline(always)]
    pub(crate) fn int(&mut self, n: i64) {
        if n < 0 {
            self.put(b"-", 1);
        }
        self.uint(n.unsigned_abs());
    }

    /// Nanoseconds as microseconds with three decimals, as [`json::micros`]
    /// writes them.
    #[inline(always)]
    pub(crate) fn micros(&mut self, ns: u64) {
        let whole = ns / 1000;
        self.uint(whole);
        let frac = (ns % 1000) as usize;
        self.put(&(u32::from(b'.') | TRIPLES[frac] << 8).to_le_bytes(), 4);
    }

    /// The part of a time after its whole milliseconds (`rest`, below 10^6
    /// nanoseconds) as [`json::micros`] writes it after their digits (the
    /// last three digits of microseconds, the point and three of
    /// nanoseconds), then the 8 bytes of `then`, of which it keeps `len`.
    #[inline(always)]
    pub(crate) fn after_millis_then(&mut self, rest: u32, then: &[u8; 8], len: usize) {
        let us = rest / 1000;
        let frac = rest % 1000;
        let (us, frac) = (TRIPLES[us as usize & 1023], TRIPLES[frac as usize]);
        let digits = u64::from(us) | u64::from(b'.') << 24 | u64::from(frac) << 32;
        let mut both = [0; 16];
        both[..8].copy_from_slice(&digits.to_le_bytes());
        both[7..15].copy_from_slice(then);
        self.put(&both, 7 + len);
    }

    /// `s` as [`json::string`] writes it, if it needs no escaping; false
    /// (having written nothing) if it does.
    #[inline(always)]
    pub(crate) fn plain_string(&mut self, s: &str) -> bool {
        if json::plain_prefix(s.as_bytes()) != s.len() {
            return false;
        }
        self.put(b"\"", 1);
        self.put_slice(s.as_bytes());
        self.put(b"\"", 1);
        true
    }
}

/// The digits of `n` at the start of [`NUMBER`] bytes, and how many there are.
#[inline(never)]
fn large(n: u64) -> ([u8; NUMBER], usize) {
    let mut number = [0; 2 * NUMBER];
    let from = json::digits_before(&mut number, NUMBER, n);
    let mut digits = [0; NUMBER];
    digits.copy_from_slice(&number[from..from + NUMBER]);
    (digits, NUMBER - from)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `write` leaves in fresh room, as text.
    fn written(write: impl FnOnce(&mut Room<'_>)) -> String {
        let mut bytes = [0xff; ROOM];
        let mut room = Room::new(&mut bytes);
        write(&mut room);
        let n = room.written().expect("it fits");
        String::from_utf8(bytes[..n].to_vec()).unwrap()
    }

    /// The numbers around each power of ten, and the ends of the range.
    fn numbers() -> Vec<u64> {
        let mut numbers: Vec<u64> = (0..1000).collect();
        for e in 3..20 {
            let p = 10u64.pow(e);
            numbers.extend([p - 1, p, p + 1, p + 999, p.saturating_mul(2) - 1]);
        }
        numbers.extend([u64::MAX, u64::MAX - 1, 123_456_789, 1_000_999]);
        numbers
    }

    /// Checks that `fast` writes into room what `general` appends to a `Vec`.
    fn same(
        what: impl std::fmt::Debug,
        general: impl FnOnce(&mut Vec<u8>),
        fast: impl FnOnce(&mut Room<'_>),
    ) {
        let mut expected = Vec::new();
        general(&mut expected);
        assert_eq!(written(fast).as_bytes(), expected, "{what:?}");
    }

    #[test]
    fn integers_are_written_as_the_general_encoder_writes_them() {
        for n in numbers() {
            same(n, |b| json::uint(b, n), |r| r.uint(n));
            for i in [n as i64, (n as i64).wrapping_neg(), i64::MIN, i64::MAX, -1] {
                same(i, |b| json::int(b, i), |r| r.int(i));
            }
        }
    }

    #[test]
    fn times_are_written_as_the_general_encoder_writes_them() {
        for n in numbers() {
            same(n, |b| json::micros(b, n), |r| r.micros(n));
        }
        for rest in (0..1_000_000).step_by(997).chain([0, 1, 999, 1000, 999_999, 500_500]) {
            // After a time's whole milliseconds: its last 7 bytes.
            let ns = 5_000_000 + u64::from(rest);
            let mut expected = Vec::new();
            json::micros(&mut expected, ns);
            let text = written(|r| r.after_millis_then(rest, b",\"dur\":_", 7));
            assert_eq!(text.as_bytes(), [&expected[expected.len() - 7..], b",\"dur\":"].concat());
        }
    }

    #[test]
    fn pieces_follow_one_another_and_what_does_not_fit_marks_the_room_full() {
        assert_eq!(written(|r| (r.put(b"ab__", 2), r.put(b"cd", 2), r.uint(7)).2), "abcd7");
        let text = written(|r| assert!(r.plain_string("plain é") && !r.plain_string("a\"b")));
        assert_eq!(text, "\"plain é\"");
        let mut bytes = [0; ROOM];
        let mut room = Room::new(&mut bytes);
        room.put_slice(&[b'x'; LIMIT - 2]);
        room.put(b"yz", 1);
        assert_eq!(room.written(), Some(LIMIT - 1));
        room.put(b"yz", 1);
        assert_eq!(room.written(), None, "past the limit");
        let mut room = Room::new(&mut bytes);
        room.put(b"y", 1);
        room.put_slice(&[b'x'; LIMIT]);
        assert_eq!(room.written(), None, "a slice past the room");
    }
}
