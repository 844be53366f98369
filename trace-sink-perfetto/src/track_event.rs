//! The hand encoder of track events: one event's packet written straight
//! into the chunk in one pass, each length written once the body it measures
//! is, so that nothing is built, sized or copied on the way.
//!
//! The bytes are those prost writes for the same `TracePacket` (see
//! `proto.rs`): fields in field-number order, every set field written
//! (proto2), `category_iids` unpacked. The tests in `sequence.rs` hold the two
//! to that, byte for byte.
//!
//! Each encoder is written once over [`Room`], and so runs in either room:
//! a [`Region`], which holds any packet, or, for the packets of the begins
//! and ends of spans, first a [`crate::format::Window`], which keeps only a
//! packet of up to 129 bytes but checks nothing per store (the sink's part
//! of the writer thread's work a span fell from 607 instructions to about
//! 390 with it, by callgrind). The tests below hold the two rooms to the
//! same bytes.

use std::io;

use trace_core::{Field, Site, Value};

use crate::chunk::Chunk;
use crate::format::{
    keys, put_varint, Put, Region, Room, PACKET_KEY, SEQ_NEEDS_INCREMENTAL_STATE, TYPE_SLICE_BEGIN,
    TYPE_SLICE_END,
};

/// One track event to write; what it leaves out defaults to none.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct EventSpec<'a> {
    /// When, in CLOCK_MONOTONIC nanoseconds.
    pub ts: u64,
    /// `TrackEvent.Type`.
    pub kind: i32,
    /// The track, when not the sequence's default one.
    pub track: Option<u64>,
    pub name: Option<&'a str>,
    pub category: Option<&'a str>,
    /// Shown as debug annotations, `fields` then `extra`.
    pub fields: &'a [Field<'a>],
    pub extra: &'a [Field<'a>],
    /// A name written in full (`TrackEvent.name`) rather than interned, and
    /// whether an ellipsis follows it: for names made from a message.
    pub full_name: Option<(&'a str, bool)>,
    /// `TrackEvent.counter_value`, for a counter event.
    pub counter: Option<i64>,
    /// `TrackEvent.double_counter_value`, for a counter event whose values
    /// are not whole (the CPU usage in percent, to tenths).
    pub double_counter: Option<f64>,
    /// One value of another counter track sampled at this event
    /// (`extra_counter_track_uuids`, `extra_counter_values`): the thread
    /// CPU-time counter on a slice's begin and end.
    pub extra_counter: Option<(u64, i64)>,
    /// `TrackEvent.flow_ids`: the flows that leave this event's slice.
    pub flow_ids: &'a [u64],
    /// `TrackEvent.terminating_flow_ids`: the flows that end at it.
    pub terminating_flow_ids: &'a [u64],
    /// `name`, `category` and the names of `fields` and `extra` are `'static`
    /// (a `tracing` call site's, [`trace_core::Site::has_static_text`], and
    /// the sink's own literals): the interners may answer them by address.
    pub static_text: bool,
}

impl<'a> EventSpec<'a> {
    /// The begin at `ts` of a slice of `site` with `fields`, on the
    /// sequence's own track.
    pub(crate) fn slice_begin(ts: u64, site: &Site<'a>, fields: &'a [Field<'a>]) -> Self {
        EventSpec {
            ts,
            kind: TYPE_SLICE_BEGIN,
            name: Some(site.name),
            category: Some(site.target),
            fields,
            static_text: site.has_static_text(),
            ..EventSpec::default()
        }
    }

    /// True when the event has nothing but its time and type (a slice's end
    /// on the sequence's own track, most of a trace's events), which
    /// [`put_bare_event`] writes.
    #[inline]
    pub(crate) fn is_bare(&self) -> bool {
        // Every field is named, so that one added later has to be decided here.
        let EventSpec {
            ts: _,
            kind: _,
            track,
            name,
            category,
            fields,
            extra,
            full_name,
            counter,
            double_counter,
            extra_counter,
            flow_ids,
            terminating_flow_ids,
            static_text: _,
        } = self;
        track.is_none()
            && extra_counter.is_none()
            && flow_ids.is_empty()
            && terminating_flow_ids.is_empty()
            && name.is_none()
            && category.is_none()
            && fields.is_empty()
            && extra.is_empty()
            && full_name.is_none()
            && counter.is_none()
            && double_counter.is_none()
    }
}

/// A packet's `trusted_packet_sequence_id` field, its key and varint,
/// encoded once per sequence: every packet carries it, and the id (drawn
/// below 2^28) takes four bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SequenceField {
    /// The field's bytes, then padding.
    bytes: [u8; 8],
    /// How many of `bytes` are the field's.
    len: usize,
    /// The field, then the track event of a bare slice end: all of such a
    /// packet after its timestamp but its flags.
    slice_end: Padded<16>,
}

impl SequenceField {
    /// The field for sequence `id`.
    pub(crate) fn new(id: u32) -> Self {
        let mut field = Vec::with_capacity(8);
        put_varint(&mut field, keys::PACKET_SEQUENCE_ID);
        put_varint(&mut field, u64::from(id));
        let mut bytes = [0; 8];
        // A key and a varint of 32 bits: six bytes at most.
        bytes[..field.len()].copy_from_slice(&field);
        let len = field.len();
        let slice_end = Padded::new(|r| {
            r.put_padded(&bytes, len);
            let event = r.open(keys::PACKET_TRACK_EVENT);
            put_field(r, keys::EVENT_TYPE, TYPE_SLICE_END as u64);
            r.close(event);
        });
        // Ten bytes at most: it fits.
        SequenceField { bytes, len, slice_end: slice_end.unwrap_or_default() }
    }

    #[inline(always)]
    fn put(&self, r: &mut impl Room) {
        r.put_padded(&self.bytes, self.len);
    }
}

/// The thread CPU-time counter a sequence's slices carry
/// (`extra_counter_values`, `extra_counter_track_uuids`), its bytes encoded
/// once: the field of its track's uuid, which follows each value, and all of
/// a slice end that carries nothing but the counter up to its value.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CpuCounter {
    /// The counter track's uuid.
    uuid: u64,
    /// `extra_counter_track_uuids` and the uuid: twelve bytes at most.
    track: Padded<16>,
    /// The packet's sequence id, `track_event`'s key and the byte held for
    /// its length, and `type` (a slice's end): ten bytes at most.
    end_head: Padded<16>,
    /// Where in `end_head` the byte held for the track event's length is.
    end_event_at: usize,
}

impl CpuCounter {
    /// The counter of track `uuid` on `sequence`.
    pub(crate) fn new(sequence: &SequenceField, uuid: u64) -> Self {
        let track = Padded::new(|r| put_field(r, keys::EVENT_EXTRA_COUNTER_TRACK_UUIDS, uuid));
        let end_head = Padded::new(|r| {
            sequence.put(r);
            r.extend_from_slice(&[keys::PACKET_TRACK_EVENT as u8, 0]);
            put_field(r, keys::EVENT_TYPE, TYPE_SLICE_END as u64);
        });
        // Twelve and ten bytes at most: they fit.
        CpuCounter {
            uuid,
            track: track.unwrap_or_default(),
            end_head: end_head.unwrap_or_default(),
            end_event_at: sequence.len + 1,
        }
    }

    /// The counter track's uuid.
    #[inline]
    pub(crate) fn uuid(&self) -> u64 {
        self.uuid
    }

    /// Writes `extra_counter_values` with `value`, then
    /// `extra_counter_track_uuids`: in one store.
    #[inline(always)]
    fn put_sample(&self, r: &mut impl Room, value: i64) {
        // The key (one byte), the value (ten bytes at most) and the track's
        // field (sixteen with its padding).
        let mut bytes = [0u8; 32];
        bytes[0] = keys::EVENT_EXTRA_COUNTER_VALUES as u8;
        // An int64 goes on the wire as its two's complement, as prost writes it.
        let mut v = value as u64;
        let mut n = 1;
        while v >= 0x80 && n < 10 {
            bytes[n] = v as u8 | 0x80;
            v >>= 7;
            n += 1;
        }
        bytes[n] = v as u8;
        n += 1;
        if let Some(to) = bytes.get_mut(n..).and_then(<[u8]>::first_chunk_mut::<16>) {
            *to = self.track.bytes;
        }
        r.put_padded(&bytes, n + self.track.len);
    }

    /// Appends the packet of a slice's end that carries nothing but this
    /// counter's `value` ([`EventSpec::counter_end`]): byte for byte what
    /// [`put_track_event`] writes for it.
    #[inline]
    pub(crate) fn put_end(&self, buf: &mut Chunk, stamp: (u64, Option<u32>), value: i64) -> io::Result<()> {
        put_short(buf, BARE_ROOM, stamp, CounterEnd(self, value))
    }
}

/// The body of a slice's end that carries nothing but a counter's value
/// ([`CpuCounter::put_end`]).
#[derive(Clone, Copy)]
struct CounterEnd<'a>(&'a CpuCounter, i64);

impl Body for CounterEnd<'_> {
    #[inline(always)]
    fn put(self, r: &mut impl Room) {
        let CounterEnd(counter, value) = self;
        let event = r.len() + counter.end_event_at;
        counter.end_head.put(r);
        counter.put_sample(r, value);
        r.close(event);
    }
}

/// Room for the packet of a bare event: its key and length, timestamp,
/// sequence id, track event (key, length, type), flags and clock, each at
/// its longest.
const BARE_ROOM: usize = 64;
/// Room for a packet's own fields, the singular fields of its track event and
/// the entries of its name and category in its interned data, each at its
/// longest (a varint takes up to 10 bytes, a key up to 2), strings aside.
const PACKET_ROOM: usize = 256;
/// Room for one debug annotation at its longest, its string aside.
const ANNOTATION_ROOM: usize = 48;
/// Room for one interned string's entry at its longest, the string aside
/// (an event's name and category count as two, in [`PACKET_ROOM`]).
const INTERNED_ROOM: usize = 40;

impl EventSpec<'_> {
    /// The counter value of a slice's end that has nothing but its time and
    /// one extra counter value (a slice's end where the thread CPU clock is
    /// read, most of them then), which [`CpuCounter::put_end`] writes.
    #[inline]
    pub(crate) fn counter_end(&self) -> Option<(u64, i64)> {
        let sample = self.extra_counter?;
        let rest = EventSpec { extra_counter: None, ..*self };
        (self.kind == TYPE_SLICE_END && rest.is_bare()).then_some(sample)
    }

    /// True when the event is on the sequence's own track, with a name and a
    /// category, and has nothing else but annotations and an extra counter
    /// value (a slice's begin, most of a trace's events that are not bare),
    /// which [`put_plain_event`] writes once its strings are interned.
    #[inline]
    pub(crate) fn is_plain(&self) -> bool {
        self.track.is_none()
            && self.name.is_some()
            && self.category.is_some()
            && self.full_name.is_none()
            && self.counter.is_none()
            && self.flow_ids.is_empty()
            && self.terminating_flow_ids.is_empty()
    }
}

/// Appends the packet of a bare track event ([`EventSpec::is_bare`]): the
/// bytes [`put_track_event`] writes for it, without the work of the fields it
/// does not have.
#[inline(always)]
pub(crate) fn put_bare_event(
    buf: &mut Chunk,
    sequence: &SequenceField,
    stamp: (u64, Option<u32>),
    kind: i32,
) -> io::Result<()> {
    if kind == TYPE_SLICE_END {
        // Most of them: the bytes after the timestamp in one store.
        return put_short(buf, BARE_ROOM, stamp, &sequence.slice_end);
    }
    settle(try_put_packet(buf, BARE_ROOM, sequence, stamp, |r| {
        let event = r.open(keys::PACKET_TRACK_EVENT);
        put_field(r, keys::EVENT_TYPE, kind as u64);
        r.close(event);
    }))
}

/// Makes `room` bytes after the packets of `buf` and writes one packet there:
/// its key, timestamp and sequence id, what `body` writes (its track event
/// and interned data), its flags and clock, and its length. Keeps the packet
/// if it fitted in the room, and says whether it did (see [`settle`]).
#[inline]
fn try_put_packet(
    buf: &mut Chunk,
    room: usize,
    sequence: &SequenceField,
    stamp: (u64, Option<u32>),
    body: impl FnOnce(&mut Region<'_>),
) -> bool {
    try_put_in(buf, room, stamp, |r| {
        sequence.put(r);
        body(r);
    })
}

/// [`try_put_packet`] for a `body` that writes the sequence id itself.
#[inline]
fn try_put_in(
    buf: &mut Chunk,
    room: usize,
    (timestamp, clock_id): (u64, Option<u32>),
    body: impl FnOnce(&mut Region<'_>),
) -> bool {
    let mut region = Region::new(buf.room(room));
    let packet = open_packet(&mut region, timestamp);
    body(&mut region);
    close_packet(&mut region, packet, clock_id);
    let (written, fits) = (region.len(), region.fits());
    if fits {
        buf.filled(written);
    }
    fits
}

/// What a packet holds between its timestamp and its flags, written the
/// same into either kind of [`Room`]: a trait rather than a closure, so that
/// the writing is inlined where it is used.
trait Body: Copy {
    fn put(self, r: &mut impl Room);
}

impl<const N: usize> Body for &Padded<N> {
    #[inline(always)]
    fn put(self, r: &mut impl Room) {
        Padded::put(self, r);
    }
}

/// Appends the packet of `body`, most likely short: in a [`Window`](crate::format::Window), or if it
/// is longer than a window keeps (under
/// [`crate::format::WINDOW_PACKET`] bytes), again in a [`Region`] of `room`
/// bytes, which holds it at its longest.
#[inline(always)]
fn put_short(buf: &mut Chunk, room: usize, stamp: (u64, Option<u32>), body: impl Body) -> io::Result<()> {
    if try_put_window(buf, stamp, body) {
        return Ok(());
    }
    put_long(buf, room, stamp, body)
}

/// [`put_short`] of a packet too long for a window.
#[inline(never)]
fn put_long(buf: &mut Chunk, room: usize, stamp: (u64, Option<u32>), body: impl Body) -> io::Result<()> {
    settle(try_put_in(buf, room, stamp, |r| body.put(r)))
}

/// [`try_put_in`] in a [`Window`](crate::format::Window): false, and nothing kept, if the packet is
/// too long for one.
#[inline(always)]
fn try_put_window(buf: &mut Chunk, (timestamp, clock_id): (u64, Option<u32>), body: impl Body) -> bool {
    let Some(mut window) = buf.window() else {
        return false;
    };
    let packet = open_packet(&mut window, timestamp);
    body.put(&mut window);
    close_packet(&mut window, packet, clock_id);
    match window.finish() {
        Some(written) => {
            buf.filled(written);
            true
        }
        None => false,
    }
}

/// Writes a packet's key, the byte held for its length and its timestamp;
/// returns where its length goes, for [`close_packet`].
#[inline(always)]
fn open_packet(r: &mut impl Room, timestamp: u64) -> usize {
    let packet = r.len() + 1;
    r.extend_from_slice(&[PACKET_KEY, 0]);
    put_field(r, keys::PACKET_TIMESTAMP, timestamp);
    packet
}

/// Writes a packet's last fields, after its track event and interned data,
/// and then its length.
#[inline(always)]
fn close_packet(r: &mut impl Room, packet: usize, clock_id: Option<u32>) {
    put_field(r, keys::PACKET_SEQUENCE_FLAGS, u64::from(SEQ_NEEDS_INCREMENTAL_STATE));
    if let Some(clock) = clock_id {
        put_field(r, keys::PACKET_TIMESTAMP_CLOCK_ID, u64::from(clock));
    }
    r.close(packet);
}

/// Says so if a packet did not fit in the room made for it (and so was
/// dropped): the room is worked out to hold any packet, so this is not
/// expected.
#[inline(always)]
fn settle(fits: bool) -> io::Result<()> {
    if fits {
        return Ok(());
    }
    Err(out_of_room())
}

#[cold]
#[inline(never)]
fn out_of_room() -> io::Error {
    io::Error::other("the Perfetto sink's encoder ran out of the room it made for a packet")
}

/// The bytes of one flow id: its two-byte key and eight bytes of fixed64.
const FLOW_ID_LEN: usize = 2 + 8;

mod instant;
pub(crate) use instant::InstantTemplate;

/// What follows a name that was cut.
pub(crate) const ELLIPSIS: &str = "…";

/// An interned string of an event: its iid, whether this event is the first
/// to use it (its packet then gives the string), and the string.
pub(crate) type Interned<'a> = Option<((u64, bool), &'a str)>;

/// What [`put_track_event`] needs besides the event: its interned strings,
/// the iid of each annotation's name, and the room its packet takes at most.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Resolved<'a> {
    /// The event's name and category.
    pub name: Interned<'a>,
    pub category: Interned<'a>,
    /// The iid of each annotation's name, for `spec.fields` then
    /// `spec.extra`, and whether the event is the first to use it.
    pub annotations: &'a [(u64, bool)],
    /// Whether any of the strings is new (the packet then gives it).
    pub new_strings: bool,
    /// The bytes of every string the packet may hold: names, categories,
    /// annotation names and string values.
    pub text: usize,
}

impl Resolved<'_> {
    /// Room for the packet at its longest.
    #[inline]
    pub(crate) fn room(&self, spec: &EventSpec<'_>) -> usize {
        PACKET_ROOM
            + self.annotations.len() * (ANNOTATION_ROOM + INTERNED_ROOM)
            + (spec.flow_ids.len() + spec.terminating_flow_ids.len()) * FLOW_ID_LEN
            + self.text
    }
}

/// Appends the packet of one track event to `buf`, in one pass: each
/// message's length is written once its body is (see [`Region`]).
///
/// `stamp` is the packet's timestamp and clock (see
/// `SequenceClock::stamp`).
pub(crate) fn put_track_event(
    buf: &mut Chunk,
    sequence: &SequenceField,
    stamp: (u64, Option<u32>),
    spec: &EventSpec<'_>,
    resolved: &Resolved<'_>,
) -> io::Result<()> {
    let Resolved { name, category, annotations, .. } = *resolved;
    let (own, extra) = annotations.split_at(spec.fields.len().min(annotations.len()));
    let fields = || spec.fields.iter().zip(own).chain(spec.extra.iter().zip(extra));
    // An int32 goes on the wire sign-extended to 64 bits, as prost writes it.
    let kind = spec.kind as u64;

    // Fields in field-number order at each level.
    let fits = try_put_packet(buf, resolved.room(spec), sequence, stamp, |r| {
        let event = r.open(keys::PACKET_TRACK_EVENT);
        if let Some(((iid, _), _)) = category {
            put_field(r, keys::EVENT_CATEGORY_IIDS, iid);
        }
        put_annotations(r, spec, annotations);
        put_field(r, keys::EVENT_TYPE, kind);
        if let Some(((iid, _), _)) = name {
            put_field(r, keys::EVENT_NAME_IID, iid);
        }
        if let Some(track) = spec.track {
            put_field(r, keys::EVENT_TRACK_UUID, track);
        }
        if let Some((_, value)) = spec.extra_counter {
            // Unpacked, one key per value, as the schema declares it.
            put_field(r, keys::EVENT_EXTRA_COUNTER_VALUES, value as u64);
        }
        if let Some((name, cut)) = spec.full_name {
            let full = r.open(keys::EVENT_NAME);
            r.extend_from_slice(name.as_bytes());
            if cut {
                r.extend_from_slice(ELLIPSIS.as_bytes());
            }
            r.close(full);
        }
        if let Some(value) = spec.counter {
            // An int64 goes on the wire as its two's complement, as prost writes it.
            put_field(r, keys::EVENT_COUNTER_VALUE, value as u64);
        }
        if let Some((track, _)) = spec.extra_counter {
            put_field(r, keys::EVENT_EXTRA_COUNTER_TRACK_UUIDS, track);
        }
        if let Some(value) = spec.double_counter {
            put_varint(r, keys::EVENT_DOUBLE_COUNTER_VALUE);
            r.extend_from_slice(&value.to_le_bytes());
        }
        for (key, ids) in [
            (keys::EVENT_FLOW_IDS, spec.flow_ids),
            (keys::EVENT_TERMINATING_FLOW_IDS, spec.terminating_flow_ids),
        ] {
            for id in ids {
                put_varint(r, key);
                r.extend_from_slice(&id.to_le_bytes());
            }
        }
        r.close(event);
        if resolved.new_strings {
            let data = r.open(keys::PACKET_INTERNED_DATA);
            if let Some(((iid, true), s)) = category {
                put_interned_name(r, keys::INTERNED_CATEGORIES, iid, s);
            }
            if let Some(((iid, true), s)) = name {
                put_interned_name(r, keys::INTERNED_EVENT_NAMES, iid, s);
            }
            for (field, &(iid, new)) in fields() {
                if new {
                    put_interned_name(r, keys::INTERNED_ANNOTATION_NAMES, iid, field.name);
                }
            }
            r.close(data);
        }
    });
    settle(fits)
}

/// Appends the packet of a plain track event ([`EventSpec::is_plain`]) whose
/// strings were all given before: the bytes [`put_track_event`] writes for
/// it, without the work of the fields it does not have. `annotations` are
/// its debug annotations, each as its name's iid and its value; `room`
/// holds the packet at its longest ([`Resolved::room`]).
#[inline]
#[allow(clippy::too_many_arguments)]
pub(crate) fn put_plain_event<'v>(
    buf: &mut Chunk,
    sequence: &SequenceField,
    stamp: (u64, Option<u32>),
    kind: i32,
    (name, category): (u64, u64),
    annotations: impl Iterator<Item = (u64, Value<'v>)>,
    extra_counter: Option<(u64, i64)>,
    room: usize,
) -> io::Result<()> {
    let fits = try_put_packet(buf, room, sequence, stamp, |r| {
        let event = r.open(keys::PACKET_TRACK_EVENT);
        put_field(r, keys::EVENT_CATEGORY_IIDS, category);
        for (iid, value) in annotations {
            let annotation = r.open(keys::EVENT_DEBUG_ANNOTATIONS);
            put_annotation(r, iid, value);
            r.close(annotation);
        }
        put_field(r, keys::EVENT_TYPE, kind as u64);
        put_field(r, keys::EVENT_NAME_IID, name);
        if let Some((track, value)) = extra_counter {
            put_field(r, keys::EVENT_EXTRA_COUNTER_VALUES, value as u64);
            put_field(r, keys::EVENT_EXTRA_COUNTER_TRACK_UUIDS, track);
        }
        r.close(event);
    });
    settle(fits)
}

/// Bytes of a packet known beforehand, padded to a fixed size so that they
/// go into the room in one store ([`Region::put_padded`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Padded<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Default for Padded<N> {
    fn default() -> Self {
        Padded { bytes: [0; N], len: 0 }
    }
}

impl<const N: usize> Padded<N> {
    /// The bytes `write` puts, if they fit in `N`.
    fn new(write: impl FnOnce(&mut Region<'_>)) -> Option<Self> {
        let mut bytes = [0; N];
        let mut r = Region::new(&mut bytes);
        write(&mut r);
        let (len, fits) = (r.len(), r.fits());
        fits.then_some(Padded { bytes, len })
    }

    #[inline(always)]
    fn put(&self, r: &mut impl Room) {
        r.put_padded(&self.bytes, self.len);
    }
}

/// The bytes of a plain event's packet ([`put_plain_event`]) that one call
/// site's begins on one sequence share, encoded once: the start of the track
/// event and its category, each annotation's start and name, the type and
/// name. An event then writes its time and its values between them.
#[derive(Debug, Default)]
pub(crate) struct PlainTemplate {
    /// The packet's sequence id, `track_event`'s key and the byte held for
    /// its length, then `category_iids`.
    head: Padded<32>,
    /// Where in `head` the byte held for the track event's length is.
    event_at: usize,
    /// Per annotation: `debug_annotations`' key, the byte held for its
    /// length, and `name_iid`.
    annotations: Vec<Padded<16>>,
    /// `type` and `name_iid`.
    tail: Padded<24>,
}

/// The start of a template's packet: its sequence, then `track_event`'s key
/// and the byte held for its length, then `category_iids`.
pub(crate) fn template_head(sequence: &SequenceField, category: u64) -> Option<Padded<32>> {
    Padded::new(|r| {
        sequence.put(r);
        r.extend_from_slice(&[keys::PACKET_TRACK_EVENT as u8, 0]);
        put_field(r, keys::EVENT_CATEGORY_IIDS, category);
    })
}

/// The start of a template's annotation named by `iid`: its key, the byte
/// held for its length, and `name_iid`.
pub(crate) fn template_annotation(iid: u64) -> Option<Padded<16>> {
    Padded::new(|r| {
        r.extend_from_slice(&[keys::EVENT_DEBUG_ANNOTATIONS as u8, 0]);
        put_field(r, keys::ANNOTATION_NAME_IID, iid);
    })
}

/// Writes a template's `head` and each field's annotation (from
/// `annotations`, then its value); returns where the byte held for the
/// track event's length is (`event_at` into `head`), for its close.
#[inline(always)]
pub(crate) fn put_template_values(
    r: &mut impl Room,
    (head, event_at): (&Padded<32>, usize),
    annotations: &[Padded<16>],
    fields: &[Field<'_>],
) -> usize {
    let event = r.len() + event_at;
    head.put(r);
    for (annotation, field) in annotations.iter().zip(fields) {
        let at = r.len() + 1;
        annotation.put(r);
        put_value(r, field.value);
        r.close(at);
    }
    event
}

impl PlainTemplate {
    /// Makes the template of events of type `kind` on `sequence` named by the iids given,
    /// with annotations named by `annotations` (in order); false (and the
    /// template unusable) if an iid is too long to be held, which is not expected.
    pub(crate) fn set(
        &mut self,
        (sequence, kind): (&SequenceField, i32),
        (name, category): (u64, u64),
        annotations: impl Iterator<Item = u64>,
    ) -> bool {
        let head = template_head(sequence, category);
        self.event_at = sequence.len + 1;
        let tail = Padded::new(|r| {
            put_field(r, keys::EVENT_TYPE, kind as u64);
            put_field(r, keys::EVENT_NAME_IID, name);
        });
        self.annotations.clear();
        let mut fits = true;
        for iid in annotations {
            let annotation = template_annotation(iid);
            fits &= annotation.is_some();
            self.annotations.push(annotation.unwrap_or_default());
        }
        match (head, tail) {
            (Some(head), Some(tail)) => {
                (self.head, self.tail) = (head, tail);
                fits
            }
            _ => false,
        }
    }

    /// Appends the packet of a plain event made from this template with the
    /// values of `fields` (as many as the template has annotations): byte
    /// for byte what [`put_plain_event`] writes for it.
    #[inline]
    pub(crate) fn put(
        &self,
        buf: &mut Chunk,
        stamp: (u64, Option<u32>),
        fields: &[Field<'_>],
        extra_counter: Option<(&CpuCounter, i64)>,
    ) -> io::Result<()> {
        // Most events are short: written in a window, without working out
        // their length; a longer one is written again in the room it needs.
        if try_put_window(buf, stamp, Begin(self, fields, extra_counter)) {
            return Ok(());
        }
        self.put_long(buf, stamp, fields, extra_counter)
    }

    /// [`PlainTemplate::put`] of a packet too long for a window.
    #[inline(never)]
    fn put_long(
        &self,
        buf: &mut Chunk,
        stamp: (u64, Option<u32>),
        fields: &[Field<'_>],
        extra_counter: Option<(&CpuCounter, i64)>,
    ) -> io::Result<()> {
        put_long(buf, plain_room(fields), stamp, Begin(self, fields, extra_counter))
    }
}

/// The body of a begin made from a template ([`PlainTemplate::put`]).
#[derive(Clone, Copy)]
struct Begin<'a>(&'a PlainTemplate, &'a [Field<'a>], Option<(&'a CpuCounter, i64)>);

impl Body for Begin<'_> {
    #[inline(always)]
    fn put(self, r: &mut impl Room) {
        let Begin(template, fields, extra_counter) = self;
        let event =
            put_template_values(r, (&template.head, template.event_at), &template.annotations, fields);
        template.tail.put(r);
        if let Some((counter, value)) = extra_counter {
            counter.put_sample(r, value);
        }
        r.close(event);
    }
}

/// Room for the packet of a plain event with `fields` at its longest, its
/// name, category and annotation names given before.
#[inline]
fn plain_room(fields: &[Field<'_>]) -> usize {
    let mut room = PACKET_ROOM;
    for field in fields {
        room += ANNOTATION_ROOM;
        if let Value::Str(s) = field.value {
            room += s.len();
        }
    }
    room
}

/// Appends the debug annotations of `spec`, `fields` then `extra`, each
/// named by its iid in `annotations`.
#[inline]
fn put_annotations(r: &mut Region<'_>, spec: &EventSpec<'_>, annotations: &[(u64, bool)]) {
    let (own, extra) = annotations.split_at(spec.fields.len().min(annotations.len()));
    for (field, &(iid, _)) in spec.fields.iter().zip(own).chain(spec.extra.iter().zip(extra)) {
        let annotation = r.open(keys::EVENT_DEBUG_ANNOTATIONS);
        put_annotation(r, iid, field.value);
        r.close(annotation);
    }
}

/// Appends a `DebugAnnotation` body: its name's iid and its value.
#[inline]
fn put_annotation(r: &mut Region<'_>, name_iid: u64, value: Value<'_>) {
    put_field(r, keys::ANNOTATION_NAME_IID, name_iid);
    put_value(r, value);
}

/// Appends a `DebugAnnotation`'s value. Always inlined: with the instants'
/// template as one more caller, it was left out of line in a span's begin,
/// which then took 22 more instructions (callgrind).
#[inline(always)]
fn put_value(r: &mut impl Put, value: Value<'_>) {
    match value {
        Value::I64(v) => put_field(r, keys::ANNOTATION_INT, v as u64),
        Value::U64(v) => put_field(r, keys::ANNOTATION_UINT, v),
        Value::F64(v) => {
            put_varint(r, keys::ANNOTATION_DOUBLE);
            r.extend_from_slice(&v.to_le_bytes());
        }
        Value::Bool(v) => put_field(r, keys::ANNOTATION_BOOL, u64::from(v)),
        Value::Str(s) => put_bytes(r, keys::ANNOTATION_STRING, s.as_bytes()),
    }
}

/// Appends an interned string as the field `key`, body and all.
#[inline]
fn put_interned_name(r: &mut Region<'_>, key: u64, iid: u64, name: &str) {
    let entry = r.open(key);
    put_field(r, keys::NAME_IID, iid);
    put_bytes(r, keys::NAME_NAME, name.as_bytes());
    r.close(entry);
}

/// Appends a key and a varint: the whole of a varint field, or the key and
/// length of a length-delimited one.
#[inline(always)]
fn put_field(buf: &mut impl Put, key: u64, value: u64) {
    // Most fields are a one-byte key and a value of one or two bytes
    // (iids, small numbers, the time since the sequence's last event): the
    // field in one store.
    if key < 0x80 && value < 0x80 {
        buf.extend_from_slice(&[key as u8, value as u8]);
        return;
    }
    if key < 0x80 && value < 0x4000 {
        buf.extend_from_slice(&[key as u8, value as u8 | 0x80, (value >> 7) as u8]);
        return;
    }
    // A time since the sequence's last event of up to 2 ms.
    if key < 0x80 && value < 0x20_0000 {
        buf.extend_from_slice(&[
            key as u8,
            value as u8 | 0x80,
            (value >> 7) as u8 | 0x80,
            (value >> 14) as u8,
        ]);
        return;
    }
    put_varint(buf, key);
    put_varint(buf, value);
}

/// Appends a length-delimited field of `bytes`.
#[inline]
fn put_bytes(buf: &mut impl Put, key: u64, bytes: &[u8]) {
    put_field(buf, key, bytes.len() as u64);
    buf.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    //! The window ([`try_put_window`]) against the region ([`try_put_in`]):
    //! the two rooms must write the same bytes for every body, the window
    //! keep exactly the packets of up to [`WINDOW_PACKET`] bytes, and a
    //! packet it refuses leave nothing behind.

    use proptest::prelude::*;

    use super::*;
    use crate::chunk::CHUNK_BYTES;
    use crate::format::WINDOW_PACKET;
    use crate::sequence::tests::against_prost::Owned;

    /// Numbers at and around each varint length, and any.
    fn number() -> impl Strategy<Value = u64> {
        prop_oneof![
            3 => (0..9u32, -2..=2i64).prop_map(|(bytes, step)| (1u64 << (7 * bytes)).wrapping_add_signed(step)),
            1 => prop::sample::select(vec![0, 1, u64::MAX, u64::MAX - 1, i64::MAX as u64]),
            1 => any::<u64>(),
        ]
    }

    fn value() -> impl Strategy<Value = Owned> {
        prop_oneof![
            number().prop_map(|v| Owned::I64(v as i64)),
            number().prop_map(Owned::U64),
            any::<f64>().prop_map(Owned::F64),
            any::<bool>().prop_map(Owned::Bool),
            // Around the lengths where a packet stops fitting in a window.
            (0..=140usize).prop_map(|n| Owned::Str("s".repeat(n))),
            (0..=140usize).prop_map(|n| Owned::Str("é".repeat(n / 2))),
        ]
    }

    fn stamp() -> impl Strategy<Value = (u64, Option<u32>)> {
        (number(), prop::option::of(prop_oneof![Just(3u32), any::<u32>()]))
    }

    /// Writes `body` through a window into one chunk and through a region
    /// into another, both holding `before` bytes of earlier packets (which
    /// puts the window at any offset of the chunk's buffer, across its
    /// growth), and checks that they agree.
    fn both(before: usize, stamp: (u64, Option<u32>), body: impl Body) -> Result<(), TestCaseError> {
        let earlier = vec![0x5a; before];
        let mut fast = Chunk::holding(&earlier, false);
        let mut general = Chunk::holding(&earlier, false);
        let kept = try_put_window(&mut fast, stamp, body);
        prop_assert!(try_put_in(&mut general, 64 * 1024, stamp, |r| body.put(r)), "the region holds it");
        let packet = &general.pending()[before..];
        prop_assert_eq!(kept, packet.len() <= WINDOW_PACKET, "{} bytes", packet.len());
        if kept {
            prop_assert_eq!(fast.pending(), general.pending());
        } else {
            prop_assert_eq!(fast.pending(), &earlier[..], "a refused packet leaves nothing");
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn a_begin_from_a_template_is_the_same_in_a_window_as_in_a_region(
            sequence in any::<u32>(),
            iids in (number(), number()),
            fields in prop::collection::vec((number(), value()), 0..7),
            counter in prop::option::of((number(), number())),
            stamp in stamp(),
            before in prop_oneof![0..64usize, 8 * 1024 - 600..8 * 1024 + 8usize, 60 * 1024..CHUNK_BYTES],
        ) {
            let sequence = SequenceField::new(sequence);
            let mut template = PlainTemplate::default();
            let set = template.set((&sequence, TYPE_SLICE_BEGIN), iids, fields.iter().map(|(iid, _)| *iid));
            prop_assert!(set);
            let fields: Vec<Field<'_>> = fields.iter().map(|(_, v)| Field { name: "f", value: v.value() }).collect();
            let counter = counter.map(|(track, value)| (CpuCounter::new(&sequence, track), value as i64));
            let sample = counter.as_ref().map(|(c, value)| (c, *value));
            both(before, stamp, Begin(&template, &fields, sample))?;
            // And as a capture writes it: the window, or the region after it.
            let (mut put, mut general) = (Chunk::default(), Chunk::default());
            template.put(&mut put, stamp, &fields, sample).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let room = plain_room(&fields);
            prop_assert!(try_put_in(&mut general, room, stamp, |r| Begin(&template, &fields, sample).put(r)));
            prop_assert_eq!(put.pending(), general.pending());
        }

        #[test]
        fn a_bare_end_and_a_counter_end_are_the_same_in_a_window_as_in_a_region(
            sequence in any::<u32>(),
            track in number(),
            value in number(),
            stamp in stamp(),
            before in prop_oneof![0..64usize, 8 * 1024 - 600..8 * 1024 + 8usize, 60 * 1024..CHUNK_BYTES],
        ) {
            let sequence = SequenceField::new(sequence);
            both(before, stamp, &sequence.slice_end)?;
            let counter = CpuCounter::new(&sequence, track);
            both(before, stamp, CounterEnd(&counter, value as i64))?;
        }
    }
}
