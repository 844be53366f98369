//! The bytes of a `tracing` event's instant that one call site's instants
//! on one sequence share, encoded once, so that an instant writes only its
//! time, its values and the name made from its message.
//!
//! The general path ([`put_track_event`](super::put_track_event)) interns the
//! event's strings and formats its `location` again for every instant; once
//! a site's strings are interned on a sequence, all of that is the same for
//! each of its instants there. The bytes are those the general path writes,
//! which the tests in `instants.rs` hold it to.

use std::io;

use trace_core::{Field, Value};

use super::{
    put_annotation, put_field, put_template_values, settle, template_annotation, template_head, try_put_in,
    Padded, SequenceField, ANNOTATION_ROOM, ELLIPSIS, PACKET_ROOM,
};
use crate::chunk::Chunk;
use crate::format::{keys, Put, Region, Room, TYPE_INSTANT};

/// The room an instant's packet is tried in first: the chunk keeps this
/// much beyond its packets at all times ([`crate::chunk::SPARE`]), so
/// making it costs nothing.
const LIKELY_ROOM: usize = 1024;

/// The shared bytes of the instants of one call site, with one list of
/// field names, on one sequence.
#[derive(Debug, Default)]
pub(crate) struct InstantTemplate {
    /// The packet's sequence id, `track_event`'s key and the byte held for
    /// its length, then `category_iids`.
    head: Padded<32>,
    /// Where in `head` the byte held for the track event's length is.
    event_at: usize,
    /// Per field: `debug_annotations`' key, the byte held for its length,
    /// and `name_iid`.
    annotations: Vec<Padded<16>>,
    /// The annotations the sink adds (`level`, `location`), whole, then `type`.
    middle: Vec<u8>,
    /// `name_iid`, for an instant whose message gives no name: only once
    /// the site's name is interned on the sequence.
    name: Option<Padded<16>>,
}

impl InstantTemplate {
    /// Makes the template of instants on `sequence` in the category of iid
    /// `category`, named by the iid `name` when their message gives no name
    /// (none if the site's name is not interned), with `fields` fields of
    /// their own: `annotations` gives the iid of each annotation's name, the
    /// fields' then those the sink adds, with the value of each added one
    /// (those of the fields are ignored). False (and the template unusable)
    /// if an iid is too long to be held, which is not expected.
    pub(crate) fn set<'v>(
        &mut self,
        sequence: &SequenceField,
        (category, name): (u64, Option<u64>),
        fields: usize,
        annotations: impl Iterator<Item = (u64, Value<'v>)>,
    ) -> bool {
        let head = template_head(sequence, category);
        self.event_at = sequence.len + 1;
        self.annotations.clear();
        self.middle.clear();
        let mut fits = true;
        for (i, (iid, value)) in annotations.enumerate() {
            if i >= fields {
                // An added annotation, whole, in room for it at its longest:
                // the buffers are reused, so that a site written again in its
                // slot allocates nothing.
                let start = self.middle.len();
                self.middle.resize(start + ANNOTATION_ROOM + text_len(value), 0);
                let mut r = Region::new(&mut self.middle[start..]);
                let annotation = r.open(keys::EVENT_DEBUG_ANNOTATIONS);
                put_annotation(&mut r, iid, value);
                r.close(annotation);
                let (len, added_fits) = (r.len(), r.fits());
                fits &= added_fits;
                self.middle.truncate(start + len);
                continue;
            }
            let annotation = template_annotation(iid);
            fits &= annotation.is_some();
            self.annotations.push(annotation.unwrap_or_default());
        }
        fits &= self.annotations.len() == fields;
        let kind = Padded::<16>::new(|r| put_field(r, keys::EVENT_TYPE, TYPE_INSTANT as u64));
        match kind {
            Some(kind) => self.middle.extend_from_slice(&kind.bytes[..kind.len]),
            None => fits = false,
        }
        self.name = match name {
            Some(iid) => {
                let tail = Padded::new(|r| put_field(r, keys::EVENT_NAME_IID, iid));
                fits &= tail.is_some();
                tail
            }
            None => None,
        };
        match head {
            Some(head) => {
                self.head = head;
                fits
            }
            None => false,
        }
    }

    /// The name of an instant named `full_name` in full (with an ellipsis
    /// when it was cut) or, without one, by the site's interned name: none
    /// when the template does not have that.
    #[inline]
    pub(crate) fn name<'a>(&'a self, full_name: Option<(&'a str, bool)>) -> Option<Name<'a>> {
        match (full_name, &self.name) {
            (Some(full), _) => Some(Name::Full(full)),
            (None, Some(iid)) => Some(Name::Interned(iid)),
            (None, None) => None,
        }
    }

    /// Appends the packet of an instant made from this template with the
    /// values of `fields` (as many as the template has), named `name`: byte
    /// for byte what the general path writes for it.
    #[inline]
    pub(crate) fn put(
        &self,
        buf: &mut Chunk,
        stamp: (u64, Option<u32>),
        fields: &[Field<'_>],
        name: Name<'_>,
    ) -> io::Result<()> {
        // Room for most instants, made without working out their length: a
        // packet with longer strings is written again in the room it needs.
        if self.try_put((buf, LIKELY_ROOM), stamp, fields, name) {
            return Ok(());
        }
        let full = match name {
            Name::Full((name, _)) => name.len() + ELLIPSIS.len(),
            Name::Interned(_) => 0,
        };
        let room = PACKET_ROOM
            + self.middle.len()
            + full
            + fields.iter().map(|f| ANNOTATION_ROOM + text_len(f.value)).sum::<usize>();
        settle(self.try_put((buf, room), stamp, fields, name))
    }

    /// [`InstantTemplate::put`] in `room`: true if the packet fitted.
    #[inline]
    fn try_put(
        &self,
        (buf, room): (&mut Chunk, usize),
        stamp: (u64, Option<u32>),
        fields: &[Field<'_>],
        name: Name<'_>,
    ) -> bool {
        try_put_in(buf, room, stamp, |r| {
            let event = put_template_values(r, (&self.head, self.event_at), &self.annotations, fields);
            r.extend_from_slice(&self.middle);
            match name {
                Name::Full((name, cut)) => {
                    let full = r.open(keys::EVENT_NAME);
                    r.extend_from_slice(name.as_bytes());
                    if cut {
                        r.extend_from_slice(ELLIPSIS.as_bytes());
                    }
                    r.close(full);
                }
                Name::Interned(iid) => iid.put(r),
            }
            r.close(event);
        })
    }
}

/// How an instant is named ([`InstantTemplate::name`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Name<'a> {
    /// In full (`TrackEvent.name`), and whether an ellipsis follows.
    Full((&'a str, bool)),
    /// By the site's interned name: the `name_iid` field.
    Interned(&'a Padded<16>),
}

/// The bytes of a value's text, if it has any.
#[inline]
fn text_len(value: Value<'_>) -> usize {
    match value {
        Value::Str(s) => s.len(),
        _ => 0,
    }
}
