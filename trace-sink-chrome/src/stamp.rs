//! The start of an event that ends with its time, rendered once per call
//! site and thread and kept with the whole milliseconds of the last time
//! written, so that an event written in place ([`crate::spans`],
//! [`crate::instants`]) encodes only the rest of its time.

use crate::json::{self, micros, Events};
use crate::room::Room;

/// A start at most this long is written in place, as a copy of this
/// length (one at most [`SHORT_START`] long as a copy of that length).
pub(crate) const START: usize = 128;
const SHORT_START: usize = 96;

/// A time of at least this many nanoseconds has its whole milliseconds cached.
pub(crate) const SECOND: u64 = 1_000_000_000;

/// The part of a time after its whole milliseconds (`rest`, below 10^6
/// nanoseconds) as [`micros`] writes it after their digits: the last
/// three digits of microseconds, the point and three of nanoseconds.
#[inline]
fn after_millis(rest: u32) -> [u8; 7] {
    let (us, frac) = (rest / 1000, rest % 1000);
    let mut digits = [b'.'; 7];
    digits[0] = b'0' + (us / 100) as u8;
    digits[1..3].copy_from_slice(&json::PAIRS[(us % 100) as usize]);
    digits[4] = b'0' + (frac / 100) as u8;
    digits[5..7].copy_from_slice(&json::PAIRS[(frac % 100) as usize]);
    digits
}

/// An event's start up to its time (`…"ts":`), and the whole milliseconds
/// of the last time it was used for.
#[derive(Debug)]
pub(crate) struct TimedStart {
    /// The start (`len` bytes), then, for a time of a second or more, the
    /// digits of its whole milliseconds (the whole seconds, then three
    /// digits), `millis` (0 for none), which begin at nanosecond `millis_ns`.
    bytes: Vec<u8>,
    len: usize,
    millis: u64,
    millis_ns: u64,
    /// `bytes` at the beginning of [`START`] bytes, if it fits (`fits`).
    room: [u8; START],
    fits: bool,
    /// Whether the rest of the event, as its owner says, may be written
    /// in place ([`TimedStart::allow`]), and whether it and the start may (`ready`).
    allowed: bool,
    pub(crate) ready: bool,
}

impl TimedStart {
    /// No start yet.
    pub(crate) const EMPTY: TimedStart = TimedStart {
        bytes: Vec::new(),
        len: 0,
        millis: 0,
        millis_ns: 0,
        room: [0; START],
        fits: false,
        allowed: false,
        ready: false,
    };

    /// Forgets the start, and gives the buffer to render the new one in
    /// (up to `"ts":`), to be ended by [`TimedStart::done`].
    pub(crate) fn begin(&mut self) -> &mut Vec<u8> {
        self.bytes.clear();
        &mut self.bytes
    }

    /// Ends the start rendered in the buffer [`TimedStart::begin`] gave.
    pub(crate) fn done(&mut self) {
        self.len = self.bytes.len();
        self.millis = 0;
        self.millis_ns = 0;
        self.copy();
    }

    /// Copies the start to where [`TimedStart::put`] takes it, if it fits.
    fn copy(&mut self) {
        self.fits = self.bytes.len() <= START;
        if self.fits {
            self.room[..self.bytes.len()].copy_from_slice(&self.bytes);
        }
        self.ready = self.fits && self.allowed;
    }

    /// Says whether the rest of the event may be written in place (one
    /// check of [`TimedStart::ready`] then tells both).
    pub(crate) fn allow(&mut self, allowed: bool) {
        self.allowed = allowed;
        self.ready = self.fits && allowed;
    }

    /// Makes the start end with the digits of the whole milliseconds of a
    /// time of a second or more, `millis`.
    #[inline]
    pub(crate) fn set_millis(&mut self, millis: u64) {
        if millis != self.millis {
            self.millis = millis;
            self.millis_ns = millis * 1_000_000;
            self.bytes.truncate(self.len);
            json::uint(&mut self.bytes, millis / 1000);
            let ms = (millis % 1000) as usize;
            self.bytes.push(b'0' + (ms / 100) as u8);
            self.bytes.extend_from_slice(&json::PAIRS[ms % 100]);
            self.copy();
        }
    }

    /// For a time `ts` of a second or more, the nanoseconds after its
    /// whole milliseconds, the start made to end with those; `None` for a
    /// shorter time, written whole.
    #[inline]
    pub(crate) fn rest(&mut self, ts: u64) -> Option<u32> {
        match ts >= SECOND {
            true => {
                // Within the millisecond the start ends with (none ends
                // with 0, which is more than a millisecond before a second).
                let mut rest = ts.wrapping_sub(self.millis_ns);
                if rest >= 1_000_000 {
                    self.set_millis(ts / 1_000_000);
                    rest = ts - self.millis_ns;
                }
                Some(rest as u32)
            }
            false => None,
        }
    }

    /// Writes the start and the time `ts` into `w` (`rest` as
    /// [`TimedStart::rest`] gave it), then the 8 bytes of `then`, of which
    /// it keeps `len`. Only when the start is [`TimedStart::ready`].
    #[inline(always)]
    pub(crate) fn put(&self, w: &mut Room<'_>, ts: u64, rest: Option<u32>, then: &[u8; 8], len: usize) {
        match rest {
            Some(rest) => {
                self.put_start(w, self.bytes.len());
                w.after_millis_then(rest, then, len);
            }
            None => {
                self.put_start(w, self.len);
                w.micros(ts);
                w.put(then, len);
            }
        }
    }

    /// Writes the first `len` bytes of the start into `w` (at most
    /// [`START`]), as a copy of one of two lengths.
    #[inline(always)]
    fn put_start(&self, w: &mut Room<'_>, len: usize) {
        match self.room.first_chunk::<SHORT_START>() {
            Some(short) if len <= SHORT_START => w.put(short, len),
            _ => w.put(&self.room, len),
        }
    }

    /// Opens an event in `out` the general way with the start, which
    /// begins with the separator from the event before, and the time `ts`
    /// (`rest` as [`TimedStart::rest`] gave it).
    pub(crate) fn open<'o>(&self, out: &'o mut Events, ts: u64, rest: Option<u32>) -> &'o mut Vec<u8> {
        let start_len = if rest.is_some() { self.bytes.len() } else { self.len };
        let b = out.open_with(&self.bytes[..start_len]);
        match rest {
            Some(rest) => b.extend_from_slice(&after_millis(rest)),
            None => micros(b, ts),
        }
        b
    }
}
