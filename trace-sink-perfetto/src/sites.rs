//! The call sites a sequence has begun slices of, each with the iids its
//! begin names, so that a span's begin is written without interning.
//!
//! Only a `tracing` call site's strings are cached
//! ([`Site::has_static_text`]): their text never changes at their address,
//! so the addresses and lengths of its name, its target and its fields' names
//! say which begin it is, with no text compared. Any other site's strings are
//! interned each time, as their text is confirmed there.

use trace_core::{Field, Site};

use crate::format::TYPE_SLICE_BEGIN;
use crate::track_event::{PlainTemplate, SequenceField};

/// How many call sites a sequence keeps, by a hash of their name's address
/// and their number of fields: two sites that meet in a slot take turns, the
/// one written now pushing the other out.
const SLOTS: usize = 64;

/// One call site's begin, with a given list of fields: what it is (each
/// string's address and length) and the bytes its packet shares with the
/// site's other begins.
#[derive(Debug, Default)]
pub(crate) struct SiteBegin {
    /// The name's address and length: `(0, 0)` (the address of no string)
    /// while the slot holds no site.
    name: (usize, usize),
    target: (usize, usize),
    /// Each field's name: its address and its length.
    fields: Vec<(usize, usize)>,
    /// The bytes its begins share, their iids among them.
    pub(crate) template: PlainTemplate,
}

/// A string's address and length.
#[inline]
fn key(s: &str) -> (usize, usize) {
    (s.as_ptr() as usize, s.len())
}

/// The call sites of one sequence (their iids are the sequence's).
#[derive(Debug)]
pub(crate) struct Sites {
    slots: Vec<SiteBegin>,
}

impl Default for Sites {
    /// No slot until the first site is cached: a sequence that begins no
    /// slice (the process's) keeps none, and a short capture touches the
    /// slots' pages only once it has spans.
    fn default() -> Self {
        Sites { slots: Vec::new() }
    }
}

impl Sites {
    #[inline]
    pub(crate) fn slot(site: &Site<'_>, fields: &[Field<'_>]) -> usize {
        let addr = site.name.as_ptr() as usize ^ fields.len();
        (addr.wrapping_mul(0x9e37_79b9_7f4a_7c15_u64 as usize) >> (usize::BITS - SLOTS.trailing_zeros()))
            % SLOTS
    }

    /// The begin of `site` with `fields` (their names, not their values), if
    /// it was cached: never for a site whose text is not `'static`.
    #[inline(always)]
    pub(crate) fn get(&self, site: &Site<'_>, fields: &[Field<'_>]) -> Option<&SiteBegin> {
        if !site.has_static_text() {
            return None;
        }
        let begin = self.slots.get(Self::slot(site, fields))?;
        let same = begin.name == key(site.name)
            && begin.target == key(site.target)
            && begin.fields.len() == fields.len()
            && begin.fields.iter().zip(fields).all(|(&name, f)| name == key(f.name));
        same.then_some(begin)
    }

    /// Caches the begin of `site` with `fields` on the sequence of
    /// `sequence`, whose name and category
    /// have the iids given, and the names of its fields `field_iids` (as
    /// many, in the order of `fields`). Nothing is cached for a site whose
    /// text is not `'static`.
    pub(crate) fn insert(
        &mut self,
        (sequence, site): (&SequenceField, &Site<'_>),
        fields: &[Field<'_>],
        iids: (u64, u64),
        field_iids: impl Iterator<Item = u64>,
    ) {
        if !site.has_static_text() {
            return;
        }
        if self.slots.is_empty() {
            self.slots.resize_with(SLOTS, SiteBegin::default);
        }
        let Some(begin) = self.slots.get_mut(Self::slot(site, fields)) else {
            return;
        };
        let filled = begin.template.set((sequence, TYPE_SLICE_BEGIN), iids, field_iids);
        begin.name = if filled { key(site.name) } else { (0, 0) };
        begin.target = key(site.target);
        begin.fields.clear();
        begin.fields.extend(fields.iter().map(|f| key(f.name)));
    }
}
