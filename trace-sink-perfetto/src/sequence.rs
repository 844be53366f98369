//! One packet sequence: its first packet, its interning tables and its
//! clock, and the track descriptors and track events written on it.

use std::io::{self, Write};

use trace_core::{Field, Site, Value};

use crate::chunk::Encoder;
use crate::clock::{SequenceClock, Timestamps};
use crate::format::SEQ_INCREMENTAL_STATE_CLEARED;
use crate::instants::Instants;
use crate::intern::Interner;
use crate::proto::{TracePacket, TracePacketDefaults, TrackDescriptor, TrackEventDefaults};
use crate::sites::Sites;
use crate::track_event::{
    put_bare_event, put_plain_event, put_track_event, CpuCounter, EventSpec, Resolved, SequenceField,
    ELLIPSIS,
};

/// One packet sequence (`trusted_packet_sequence_id`) of the file.
#[derive(Debug)]
pub(crate) struct Sequence {
    id: u32,
    /// The id as its packets write it.
    field: SequenceField,
    clock: SequenceClock,
    event_names: Interner,
    categories: Interner,
    annotation_names: Interner,
    /// The begins of the call sites seen on this sequence, with their iids.
    sites: Sites,
    /// The call sites of the instants written on this sequence, with their bytes.
    instants: Instants,
    /// The thread CPU-time counter its slices carried last, its bytes
    /// encoded once.
    cpu: Option<CpuCounter>,
}

impl Sequence {
    /// Starts sequence `id` in the file: a first packet that clears its
    /// incremental state, sets its defaults (clock, and `default_track` for its
    /// track events) and snapshots its clocks at `base_ns`.
    pub(crate) fn start(
        enc: &mut Encoder,
        out: &mut dyn Write,
        id: u32,
        timestamps: Timestamps,
        default_track: Option<u64>,
        base_ns: u64,
    ) -> io::Result<Sequence> {
        let clock = SequenceClock::new(timestamps, base_ns);
        let (snapshot, timestamp_clock_id) = clock.snapshot();
        let packet = TracePacket {
            trusted_packet_sequence_id: Some(id),
            first_packet_on_sequence: Some(true),
            sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
            trace_packet_defaults: Some(TracePacketDefaults {
                timestamp_clock_id: Some(timestamp_clock_id),
                track_event_defaults: default_track
                    .map(|uuid| TrackEventDefaults { track_uuid: Some(uuid), ..Default::default() }),
            }),
            clock_snapshot: Some(snapshot),
            ..Default::default()
        };
        enc.write(out, &packet)?;
        Ok(Sequence {
            id,
            field: SequenceField::new(id),
            clock,
            event_names: Interner::default(),
            categories: Interner::default(),
            annotation_names: Interner::default(),
            sites: Sites::default(),
            instants: Instants::default(),
            cpu: None,
        })
    }

    /// Declares a track, on this sequence.
    pub(crate) fn describe(
        &mut self,
        enc: &mut Encoder,
        out: &mut dyn Write,
        track: TrackDescriptor,
    ) -> io::Result<()> {
        let packet = TracePacket {
            trusted_packet_sequence_id: Some(self.id),
            track_descriptor: Some(track),
            ..Default::default()
        };
        enc.write(out, &packet)
    }

    /// Writes a bare track event ([`EventSpec::is_bare`]) of type `kind` at `ts`.
    #[inline(always)]
    pub(crate) fn bare_event(
        &mut self,
        enc: &mut Encoder,
        out: &mut dyn Write,
        ts: u64,
        kind: i32,
    ) -> io::Result<()> {
        let stamp = self.clock.stamp(ts);
        put_bare_event(&mut enc.chunk, &self.field, stamp, kind)?;
        enc.appended(out)
    }

    /// Writes the begin of a slice of `site` with `fields` (and the value of
    /// another counter track sampled then) on the sequence's own track: from
    /// the iids cached for the site when it has been begun here before with
    /// fields of the same names, without interning; through [`Sequence::event`]
    /// otherwise, caching the site's iids once its strings are given.
    #[inline(always)]
    pub(crate) fn span_begin(
        &mut self,
        (enc, out): (&mut Encoder, &mut dyn Write),
        (ts, site): (u64, &Site<'_>),
        fields: &[Field<'_>],
        extra_counter: Option<(u64, i64)>,
    ) -> io::Result<()> {
        if let Some(begin) = self.sites.get(site, fields) {
            let stamp = self.clock.stamp(ts);
            let sample = match extra_counter {
                Some((track, value)) => Some((cpu_counter(&mut self.cpu, &self.field, track), value)),
                None => None,
            };
            begin.template.put(&mut enc.chunk, stamp, fields, sample)?;
            return enc.appended(out);
        }
        let spec = EventSpec { extra_counter, ..EventSpec::slice_begin(ts, site, fields) };
        self.first_span_begin(enc, out, &spec, site)
    }

    /// The uuid of the thread CPU-time counter this sequence's slices
    /// carried last, if any has.
    #[inline]
    pub(crate) fn cpu_track(&self) -> Option<u64> {
        self.cpu.as_ref().map(CpuCounter::uuid)
    }

    /// Writes the end at `ts` of a slice on the sequence's own track that
    /// carries nothing but the value of the counter `track` then
    /// ([`EventSpec::counter_end`]): from bytes encoded once for the counter.
    #[inline(always)]
    pub(crate) fn counter_end(
        &mut self,
        (enc, out): (&mut Encoder, &mut dyn Write),
        ts: u64,
        (track, value): (u64, i64),
    ) -> io::Result<()> {
        let stamp = self.clock.stamp(ts);
        cpu_counter(&mut self.cpu, &self.field, track).put_end(&mut enc.chunk, stamp, value)?;
        enc.appended(out)
    }

    /// [`Sequence::span_begin`] of `spec` for a site not cached yet.
    #[inline(never)]
    fn first_span_begin(
        &mut self,
        enc: &mut Encoder,
        out: &mut dyn Write,
        spec: &EventSpec<'_>,
        site: &Site<'_>,
    ) -> io::Result<()> {
        let (fixed, fields) = (site.has_static_text(), spec.fields);
        self.event(enc, out, spec)?;
        if fixed {
            // Every string was given by the event just written: each is found.
            let name = self.event_names.intern(site.name, fixed).0;
            let category = self.categories.intern(site.target, fixed).0;
            let names = &mut self.annotation_names;
            let iids = fields.iter().map(|f| names.intern(f.name, fixed).0);
            self.sites.insert((&self.field, site), fields, (name, category), iids);
        }
        Ok(())
    }

    /// Writes one track event, encoded by hand straight into the chunk
    /// (`track_event.rs`), with the strings it uses interned on this sequence.
    pub(crate) fn event(
        &mut self,
        enc: &mut Encoder,
        out: &mut dyn Write,
        spec: &EventSpec<'_>,
    ) -> io::Result<()> {
        if spec.is_bare() {
            return self.bare_event(enc, out, spec.ts, spec.kind);
        }
        if let Some(sample) = spec.counter_end() {
            return self.counter_end((enc, out), spec.ts, sample);
        }
        let fixed = spec.static_text;
        let name = spec.name.map(|s| (self.event_names.intern(s, fixed), s));
        let category = spec.category.map(|s| (self.categories.intern(s, fixed), s));
        let mut new_strings =
            matches!(name, Some(((_, true), _))) || matches!(category, Some(((_, true), _)));
        let mut text = spec.name.map_or(0, str::len) + spec.category.map_or(0, str::len);
        if let Some((s, _)) = spec.full_name {
            text += s.len() + ELLIPSIS.len();
        }
        enc.annotations.clear();
        for field in spec.fields.iter().chain(spec.extra) {
            let (iid, new) = self.annotation_names.intern(field.name, fixed);
            enc.annotations.push((iid, new));
            new_strings |= new;
            text += field.name.len();
            if let Value::Str(s) = field.value {
                text += s.len();
            }
        }
        let stamp = self.clock.stamp(spec.ts);
        let resolved = Resolved { name, category, annotations: &enc.annotations, new_strings, text };
        match (name, category) {
            (Some(((name, _), _)), Some(((category, _), _))) if spec.is_plain() && !new_strings => {
                let room = resolved.room(spec);
                let values = spec.fields.iter().chain(spec.extra).map(|f| f.value);
                let annotations = enc.annotations.iter().map(|&(iid, _)| iid).zip(values);
                put_plain_event(
                    &mut enc.chunk,
                    &self.field,
                    stamp,
                    spec.kind,
                    (name, category),
                    annotations,
                    spec.extra_counter,
                    room,
                )?
            }
            _ => put_track_event(&mut enc.chunk, &self.field, stamp, spec, &resolved)?,
        }
        enc.appended(out)
    }
}

/// Instants.
impl Sequence {
    /// Writes an instant of `site` with `fields` from the bytes cached for
    /// the site ([`Sequence::cache_instant`]), without interning: None, and
    /// nothing written, when they were not (or when they lack the site's
    /// name, which an instant whose message gives no name needs).
    #[inline]
    pub(crate) fn cached_instant(
        &mut self,
        (enc, out): (&mut Encoder, &mut dyn Write),
        ts: u64,
        site: &Site<'_>,
        fields: &[Field<'_>],
    ) -> Option<io::Result<()>> {
        let cached = self.instants.get(site, fields)?;
        let name = cached.template().name(cached.full_name(fields))?;
        let stamp = self.clock.stamp(ts);
        let written = cached.template().put(&mut enc.chunk, stamp, fields, name);
        Some(written.and_then(|()| enc.appended(out)))
    }

    /// Caches the bytes that the instants of `site` with the fields of
    /// `spec` share, from `spec`, the instant of theirs [`Sequence::event`]
    /// has just written (so that each of its strings is interned): nothing
    /// for a site whose text is not `'static`.
    pub(crate) fn cache_instant(&mut self, site: &Site<'_>, spec: &EventSpec<'_>) {
        let fixed = site.has_static_text();
        let Some(category) = spec.category.filter(|_| fixed) else {
            return;
        };
        let category = self.categories.intern(category, fixed).0;
        let name = spec.name.map(|s| self.event_names.intern(s, fixed).0);
        let names = &mut self.annotation_names;
        let annotations =
            spec.fields.iter().chain(spec.extra).map(|f| (names.intern(f.name, fixed).0, f.value));
        self.instants.insert((&self.field, site), spec.fields, (category, name), annotations);
    }
}

/// The counter of track `track` on the sequence of `field`: `cpu`, made
/// again if it is another track's or none.
#[inline]
fn cpu_counter<'c>(cpu: &'c mut Option<CpuCounter>, field: &SequenceField, track: u64) -> &'c CpuCounter {
    if cpu.as_ref().is_some_and(|counter| counter.uuid() != track) {
        *cpu = None;
    }
    cpu.get_or_insert_with(|| CpuCounter::new(field, track))
}

#[cfg(test)]
pub(crate) mod tests {
    use prost::Message;
    use trace_core::Field;

    use super::*;
    use crate::format::{
        put_varint, varint_len, CLOCK_INCREMENTAL, CLOCK_MONOTONIC, SEQ_NEEDS_INCREMENTAL_STATE,
        TYPE_SLICE_BEGIN, TYPE_SLICE_END,
    };
    use crate::proto::{DebugAnnotation, InternedData, InternedName, Trace, TrackEvent};

    fn decode(bytes: &[u8]) -> Vec<TracePacket> {
        match Trace::decode(bytes) {
            Ok(trace) => trace.packet,
            Err(e) => panic!("our own bytes do not decode: {e}"),
        }
    }

    #[test]
    fn a_string_is_interned_in_the_first_packet_that_uses_it_and_only_there() {
        let mut enc = Encoder::default();
        let mut out = Vec::new();
        let mut seq =
            Sequence::start(&mut enc, &mut out, 7, Timestamps::Incremental, Some(99), 1_000).unwrap();
        let fields = [Field { name: "n", value: Value::U64(3) }];
        for ts in [1_500, 2_000] {
            let spec = EventSpec {
                ts,
                kind: TYPE_SLICE_BEGIN,
                name: Some("compile"),
                category: Some("cabin::build"),
                fields: &fields,
                ..EventSpec::default()
            };
            seq.event(&mut enc, &mut out, &spec).unwrap();
        }
        enc.flush(&mut out).unwrap();
        let packets = decode(&out);
        assert_eq!(packets.len(), 3);
        let first = packets[1].interned_data.clone().unwrap_or_default();
        assert_eq!(first.event_names, [InternedName { iid: Some(1), name: Some("compile".into()) }]);
        assert_eq!(
            first.event_categories,
            [InternedName { iid: Some(1), name: Some("cabin::build".into()) }]
        );
        assert_eq!(first.debug_annotation_names, [InternedName { iid: Some(1), name: Some("n".into()) }]);
        assert_eq!(packets[2].interned_data, None);
        assert_eq!(packets[1].timestamp, Some(500));
        assert_eq!(packets[2].timestamp, Some(500));
        let event = packets[2].track_event.clone().unwrap_or_default();
        assert_eq!((event.name_iid, event.category_iids.as_slice()), (Some(1), &[1][..]));
        assert_eq!(event.debug_annotations[0].uint_value, Some(3));
    }

    #[test]
    fn an_event_earlier_than_the_last_is_written_on_the_monotonic_clock() {
        let mut enc = Encoder::default();
        let mut out = Vec::new();
        let mut seq =
            Sequence::start(&mut enc, &mut out, 7, Timestamps::Incremental, Some(99), 1_000).unwrap();
        for ts in [5_000, 4_000, 6_000] {
            let spec = EventSpec { ts, kind: TYPE_SLICE_BEGIN, ..EventSpec::default() };
            seq.event(&mut enc, &mut out, &spec).unwrap();
        }
        enc.flush(&mut out).unwrap();
        let stamps: Vec<_> = decode(&out)[1..].iter().map(|p| (p.timestamp, p.timestamp_clock_id)).collect();
        assert_eq!(stamps, [(Some(4_000), None), (Some(4_000), Some(CLOCK_MONOTONIC)), (Some(1_000), None)]);
    }

    #[test]
    fn the_first_packet_clears_the_sequence_and_binds_its_clock_to_monotonic() {
        let mut enc = Encoder::default();
        let mut out = Vec::new();
        Sequence::start(&mut enc, &mut out, 7, Timestamps::Incremental, Some(99), 1_000).unwrap();
        enc.flush(&mut out).unwrap();
        let first = &decode(&out)[0];
        assert_eq!(first.sequence_flags, Some(SEQ_INCREMENTAL_STATE_CLEARED));
        assert_eq!(first.trusted_packet_sequence_id, Some(7));
        let defaults = first.trace_packet_defaults.clone().unwrap_or_default();
        assert_eq!(defaults.timestamp_clock_id, Some(CLOCK_INCREMENTAL));
        assert_eq!(defaults.track_event_defaults.and_then(|d| d.track_uuid), Some(99));
        let clocks = first.clock_snapshot.clone().unwrap_or_default().clocks;
        let incremental = clocks.iter().find(|c| c.clock_id == Some(CLOCK_INCREMENTAL)).cloned();
        let monotonic = clocks.iter().find(|c| c.clock_id == Some(CLOCK_MONOTONIC)).cloned();
        assert_eq!(incremental.as_ref().and_then(|c| c.is_incremental), Some(true));
        assert_eq!(incremental.and_then(|c| c.timestamp), Some(1_000));
        assert_eq!(monotonic.and_then(|c| c.timestamp), Some(1_000));
    }

    #[test]
    fn recycled_buffers_carry_no_value_into_the_next_event() {
        let mut enc = Encoder::default();
        let mut out = Vec::new();
        let mut seq = Sequence::start(&mut enc, &mut out, 7, Timestamps::Absolute, None, 0).unwrap();
        let first = [Field { name: "a", value: Value::Str("text") }];
        let second = [Field { name: "a", value: Value::Bool(false) }];
        for fields in [&first[..], &second[..]] {
            let spec =
                EventSpec { ts: 1, kind: TYPE_SLICE_BEGIN, track: Some(5), fields, ..EventSpec::default() };
            seq.event(&mut enc, &mut out, &spec).unwrap();
        }
        enc.flush(&mut out).unwrap();
        let packets = decode(&out);
        let a = &packets[2].track_event.clone().unwrap_or_default().debug_annotations[0];
        assert_eq!((a.bool_value, a.string_value.as_deref()), (Some(false), None));
    }

    #[test]
    fn varint_lengths_match_the_encoder_at_every_boundary() {
        for value in [0, 1, 127, 128, 16_383, 16_384, (1 << 21) - 1, 1 << 21, u64::MAX] {
            let mut buf = Vec::new();
            put_varint(&mut buf, value);
            assert_eq!(varint_len(value), buf.len(), "{value}");
        }
    }

    #[test]
    fn bare_events_are_byte_for_byte_what_prost_writes() {
        for timestamps in [Timestamps::Incremental, Timestamps::Absolute] {
            let (mut hand_enc, mut prost_enc) = (Encoder::default(), Encoder::default());
            let (mut hand_out, mut prost_out) = (Vec::new(), Vec::new());
            let id = 0x1234_5678;
            let mut hand = Sequence::start(&mut hand_enc, &mut hand_out, id, timestamps, None, 5).unwrap();
            let mut oracle =
                Sequence::start(&mut prost_enc, &mut prost_out, id, timestamps, None, 5).unwrap();
            hand_enc.chunk.clear();
            prost_enc.chunk.clear();
            for (ts, kind) in
                [(5, TYPE_SLICE_END), (6, 1), (300, TYPE_SLICE_END), (1 << 40, 3), (7, TYPE_SLICE_END)]
            {
                let spec = EventSpec { ts, kind, ..EventSpec::default() };
                assert!(spec.is_bare());
                hand.event(&mut hand_enc, &mut hand_out, &spec).unwrap();
                event_with_prost(&mut oracle, &mut prost_enc, &mut prost_out, &spec).unwrap();
                assert_eq!(hand_enc.chunk.pending(), prost_enc.chunk.pending(), "{timestamps:?} at {ts}");
            }
        }
    }

    #[test]
    fn plain_events_are_byte_for_byte_what_prost_writes() {
        let long = "x".repeat(300);
        let fields = [
            Field { name: "unit", value: Value::Str("a.c") },
            Field { name: "bytes", value: Value::U64(1 << 40) },
            Field { name: "delta", value: Value::I64(-2) },
            Field { name: "ratio", value: Value::F64(0.25) },
            Field { name: "fresh", value: Value::Bool(true) },
            Field { name: "text", value: Value::Str(&long) },
        ];
        let extra = [Field { name: "level", value: Value::Str("INFO") }];
        let (mut hand_enc, mut prost_enc) = (Encoder::default(), Encoder::default());
        let (mut hand_out, mut prost_out) = (Vec::new(), Vec::new());
        let mut hand =
            Sequence::start(&mut hand_enc, &mut hand_out, 9, Timestamps::Incremental, None, 5).unwrap();
        let mut oracle =
            Sequence::start(&mut prost_enc, &mut prost_out, 9, Timestamps::Incremental, None, 5).unwrap();
        hand_enc.chunk.clear();
        prost_enc.chunk.clear();
        // The first round gives the strings; the later ones are plain events.
        for (round, ts) in [10, 20, 300_000, 15, 1 << 40].into_iter().enumerate() {
            for n in [0, 1, 2, 6] {
                let spec = EventSpec {
                    ts,
                    kind: TYPE_SLICE_BEGIN,
                    name: Some("compile"),
                    category: Some("cabin::build"),
                    fields: &fields[..n],
                    extra: if n == 2 { &extra } else { &[] },
                    extra_counter: (n == 1).then_some((0xfeed_f00d_u64 << 20, 1_000_000_007)),
                    ..EventSpec::default()
                };
                assert!(spec.is_plain());
                hand.event(&mut hand_enc, &mut hand_out, &spec).unwrap();
                event_with_prost(&mut oracle, &mut prost_enc, &mut prost_out, &spec).unwrap();
                assert_eq!(hand_enc.chunk.pending(), prost_enc.chunk.pending(), "round {round}, {n} fields");
                hand_enc.chunk.clear();
                prost_enc.chunk.clear();
            }
        }
    }

    /// The oracle: the same track event built as a prost `TracePacket` and
    /// encoded by prost, as the sink wrote them before it encoded them by
    /// hand, on the same interning tables and clock.
    fn event_with_prost(
        seq: &mut Sequence,
        enc: &mut Encoder,
        out: &mut dyn Write,
        spec: &EventSpec<'_>,
    ) -> io::Result<()> {
        let fixed = spec.static_text;
        let intern = |interner: &mut Interner, s: &str, new: &mut Vec<InternedName>| -> u64 {
            let (iid, first) = interner.intern(s, fixed);
            if first {
                new.push(InternedName { iid: Some(iid), name: Some(s.to_string()) });
            }
            iid
        };
        let mut interned = InternedData::default();
        let name_iid = spec.name.map(|s| intern(&mut seq.event_names, s, &mut interned.event_names));
        let category_iids: Vec<u64> = spec
            .category
            .map(|s| intern(&mut seq.categories, s, &mut interned.event_categories))
            .into_iter()
            .collect();
        let mut debug_annotations = Vec::new();
        for field in spec.fields.iter().chain(spec.extra) {
            let name_iid =
                intern(&mut seq.annotation_names, field.name, &mut interned.debug_annotation_names);
            let mut a = DebugAnnotation { name_iid: Some(name_iid), ..Default::default() };
            match field.value {
                Value::I64(v) => a.int_value = Some(v),
                Value::U64(v) => a.uint_value = Some(v),
                Value::F64(v) => a.double_value = Some(v),
                Value::Bool(v) => a.bool_value = Some(v),
                Value::Str(s) => a.string_value = Some(s.to_string()),
            }
            debug_annotations.push(a);
        }
        let (timestamp, timestamp_clock_id) = seq.clock.stamp(spec.ts);
        let packet = TracePacket {
            timestamp: Some(timestamp),
            timestamp_clock_id,
            trusted_packet_sequence_id: Some(seq.id),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            interned_data: (!interned.is_empty()).then_some(interned),
            track_event: Some(TrackEvent {
                r#type: Some(spec.kind),
                track_uuid: spec.track,
                name_iid,
                category_iids,
                debug_annotations,
                name: spec.full_name.map(|(s, cut)| if cut { format!("{s}…") } else { s.to_string() }),
                counter_value: spec.counter,
                double_counter_value: spec.double_counter,
                extra_counter_track_uuids: spec.extra_counter.map(|(t, _)| t).into_iter().collect(),
                extra_counter_values: spec.extra_counter.map(|(_, v)| v).into_iter().collect(),
                flow_ids: spec.flow_ids.to_vec(),
                terminating_flow_ids: spec.terminating_flow_ids.to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        };
        enc.write(out, &packet)
    }

    /// A `tracing` call site's site, `'static` text and all
    /// ([`Site::has_static_text`]), as a capture gets it.
    fn static_site() -> Site<'static> {
        let metas = crate::test_sites::metadata_of(|| {
            let _ = tracing::info_span!("compile", a = 1, b = 2, c = 3);
        });
        match metas.first() {
            Some(meta) => Site::of(meta),
            None => panic!("a span under a subscriber that wants everything has its metadata"),
        }
    }

    /// Begins a slice of `site` with `fields` at `ts` on both sequences, the
    /// hand one through [`Sequence::span_begin`] and the oracle through
    /// prost, and asserts that they wrote the same bytes.
    #[allow(clippy::too_many_arguments)]
    fn begin_on_both(
        (hand, hand_enc, hand_out): (&mut Sequence, &mut Encoder, &mut Vec<u8>),
        (oracle, prost_enc, prost_out): (&mut Sequence, &mut Encoder, &mut Vec<u8>),
        ts: u64,
        site: Site<'_>,
        fields: &[Field<'_>],
        extra_counter: Option<(u64, i64)>,
        what: &str,
    ) {
        hand.span_begin((hand_enc, hand_out), (ts, &site), fields, extra_counter).unwrap();
        let spec = EventSpec { extra_counter, ..EventSpec::slice_begin(ts, &site, fields) };
        event_with_prost(oracle, prost_enc, prost_out, &spec).unwrap();
        assert_eq!(hand_enc.chunk.pending(), prost_enc.chunk.pending(), "{what}");
        hand_enc.chunk.clear();
        prost_enc.chunk.clear();
    }

    /// Two sequences of the same id, their first packets dropped.
    fn two_sequences(id: u32) -> [(Sequence, Encoder, Vec<u8>); 2] {
        [(), ()].map(|()| {
            let (mut enc, mut out) = (Encoder::default(), Vec::new());
            let seq = Sequence::start(&mut enc, &mut out, id, Timestamps::Incremental, None, 5).unwrap();
            enc.chunk.clear();
            (seq, enc, out)
        })
    }

    #[test]
    fn begins_from_a_call_sites_cached_bytes_are_byte_for_byte_what_prost_writes() {
        let site = static_site();
        assert!(site.has_static_text());
        let long = "y".repeat(200);
        let longer = "z".repeat(5_000);
        let values = [
            Value::U64(7),
            Value::U64(50_000),
            Value::U64(u64::MAX),
            Value::I64(-2),
            Value::F64(0.5),
            Value::Bool(true),
            Value::Str("a.c"),
            Value::Str(&long),
            Value::Str(&longer),
        ];
        let [(mut hand, mut hand_enc, mut hand_out), (mut oracle, mut prost_enc, mut prost_out)] =
            two_sequences(9);
        let mut ts = 10;
        for (round, value) in values.into_iter().enumerate() {
            // The same site with other field lists: each list is its own begin.
            let lists: [&[Field<'_>]; 5] = [
                &[Field { name: "a", value }, Field { name: "b", value: Value::U64(7) }],
                &[Field { name: "a", value }],
                &[Field { name: "b", value }, Field { name: "a", value }],
                &[Field { name: "a", value }, Field { name: "c", value }],
                &[],
            ];
            for (n, fields) in lists.into_iter().enumerate() {
                // Small steps, a long one, and one back in time (written on
                // CLOCK_MONOTONIC).
                ts = match (round + n) % 4 {
                    0 => ts + 3,
                    1 => ts + 300_000,
                    2 => ts + (1 << 40),
                    _ => ts - 1,
                };
                let extra_counter = (n == 1).then_some((0xfeed_f00d_u64 << 20, 1_000_000_007));
                begin_on_both(
                    (&mut hand, &mut hand_enc, &mut hand_out),
                    (&mut oracle, &mut prost_enc, &mut prost_out),
                    ts,
                    site,
                    fields,
                    extra_counter,
                    &format!("round {round}, list {n}"),
                );
            }
        }
        assert!(hand_out == prost_out, "the flushed chunks differ");
    }

    /// Thread CPU clock readings as the counter carries them: small, at each
    /// varint length boundary, large, and past `i64::MAX` as a reading cast
    /// to an int64 would be (negative: ten bytes on the wire).
    const CPU_VALUES: [i64; 12] = [
        0,
        1,
        127,
        128,
        16_384,
        1_000_000_007,
        1 << 40,
        i64::MAX,
        u64::MAX as i64,
        (u64::MAX - 1_000) as i64,
        i64::MIN,
        -1,
    ];

    /// Counter track uuids: small, and as the sink draws them (up to 64 bits).
    const CPU_TRACKS: [u64; 3] = [5, 0xfeed_f00d_u64 << 20, u64::MAX];

    /// Sites of `'static` text whose names' addresses fall in the same slot
    /// of a sequence's cache (with one field): each pushes the other out.
    fn colliding_sites() -> (Site<'static>, Site<'static>) {
        static TEXT: &str = "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn";
        let fields = [Field { name: "a", value: Value::U64(0) }];
        let named = |name: &'static str| {
            let mut site = static_site();
            site.name = name;
            site
        };
        // 66 names (one-byte strings at 66 addresses) in 64 slots: two of
        // them share one. The slot is taken from a name's address, so they
        // are told apart by it, the same text though they hold.
        let names: Vec<&'static str> = (0..66).filter_map(|i| TEXT.get(i..=i)).collect();
        let slot = |name| Sites::slot(&named(name), &fields);
        for (i, &a) in names.iter().enumerate() {
            for &b in &names[i + 1..] {
                if slot(a) == slot(b) {
                    return (named(a), named(b));
                }
            }
        }
        panic!("66 names in 64 slots: two share one")
    }

    #[test]
    fn begins_with_a_cpu_counter_from_a_call_sites_cached_bytes_are_byte_for_byte_what_prost_writes() {
        let site = static_site();
        let (first, second) = colliding_sites();
        let long = "w".repeat(300);
        // Sequences of short and long ids; the later one started after the
        // first has cached its sites, at a later base.
        for id in [3, 0x0fff_ffff] {
            let [(mut hand, mut hand_enc, mut hand_out), (mut oracle, mut prost_enc, mut prost_out)] =
                two_sequences(id);
            let mut begin = |ts, site, fields: &[Field<'_>], sample, what: &str| {
                let hand = (&mut hand, &mut hand_enc, &mut hand_out);
                begin_on_both(
                    hand,
                    (&mut oracle, &mut prost_enc, &mut prost_out),
                    ts,
                    site,
                    fields,
                    sample,
                    what,
                );
            };
            let mut ts = 10;
            for (round, value) in CPU_VALUES.into_iter().enumerate() {
                let track = CPU_TRACKS[round % CPU_TRACKS.len()];
                let lists: [&[Field<'_>]; 3] = [
                    &[Field { name: "a", value: Value::U64(round as u64) }],
                    &[
                        Field { name: "a", value: Value::Str(&long) },
                        Field { name: "b", value: Value::I64(-1) },
                    ],
                    &[],
                ];
                let sample = Some((track, value));
                for (n, fields) in lists.into_iter().enumerate() {
                    ts = if (round + n) % 5 == 4 { ts - 1 } else { ts + 3 + (round as u64) * 100_000 };
                    begin(ts, site, fields, sample, &format!("sequence {id}, value {value}, list {n}"));
                }
                // Two sites of one slot, in turns: each begin from scratch.
                for colliding in [first, second, first] {
                    ts += 7;
                    let fields = [Field { name: "a", value: Value::U64(1) }];
                    begin(ts, colliding, &fields, sample, &format!("{id}, {value}, {:p}", colliding.name));
                }
            }
            assert!(hand_out == prost_out, "the flushed chunks differ");
        }
    }

    #[test]
    fn ends_with_only_a_cpu_counter_are_byte_for_byte_what_prost_writes() {
        for timestamps in [Timestamps::Incremental, Timestamps::Absolute] {
            for id in [1, 0x1234_5678] {
                let (mut hand_enc, mut prost_enc) = (Encoder::default(), Encoder::default());
                let (mut hand_out, mut prost_out) = (Vec::new(), Vec::new());
                let mut hand =
                    Sequence::start(&mut hand_enc, &mut hand_out, id, timestamps, None, 5).unwrap();
                let mut oracle =
                    Sequence::start(&mut prost_enc, &mut prost_out, id, timestamps, None, 5).unwrap();
                hand_enc.chunk.clear();
                prost_enc.chunk.clear();
                let mut ts = 5;
                for (i, value) in CPU_VALUES.into_iter().enumerate() {
                    // The same track for a run, then another one.
                    let track = CPU_TRACKS[i / 5];
                    ts = match i % 4 {
                        0 => ts + 1,
                        1 => ts + (1 << 40),
                        2 => ts - 1,
                        _ => ts + 300,
                    };
                    let spec = EventSpec {
                        ts,
                        kind: TYPE_SLICE_END,
                        extra_counter: Some((track, value)),
                        ..EventSpec::default()
                    };
                    assert_eq!(spec.counter_end(), Some((track, value)));
                    hand.event(&mut hand_enc, &mut hand_out, &spec).unwrap();
                    event_with_prost(&mut oracle, &mut prost_enc, &mut prost_out, &spec).unwrap();
                    assert_eq!(
                        hand_enc.chunk.pending(),
                        prost_enc.chunk.pending(),
                        "{timestamps:?}, sequence {id}, value {value}"
                    );
                    assert_eq!(hand.cpu_track(), Some(track));
                    // And the same end written straight, as a capture does.
                    hand_enc.chunk.clear();
                    prost_enc.chunk.clear();
                    ts += 2;
                    hand.counter_end((&mut hand_enc, &mut hand_out), ts, (track, value)).unwrap();
                    let spec = EventSpec { ts, ..spec };
                    event_with_prost(&mut oracle, &mut prost_enc, &mut prost_out, &spec).unwrap();
                    assert_eq!(hand_enc.chunk.pending(), prost_enc.chunk.pending(), "straight, {value}");
                    hand_enc.chunk.clear();
                    prost_enc.chunk.clear();
                }
                hand_enc.flush(&mut hand_out).unwrap();
                prost_enc.flush(&mut prost_out).unwrap();
                assert!(hand_out == prost_out, "the flushed chunks differ");
            }
        }
    }

    #[test]
    fn an_end_with_more_than_its_cpu_counter_is_not_written_as_a_counter_end() {
        let fields = [Field { name: "a", value: Value::U64(1) }];
        let end =
            EventSpec { ts: 1, kind: TYPE_SLICE_END, extra_counter: Some((5, 9)), ..EventSpec::default() };
        assert_eq!(end.counter_end(), Some((5, 9)));
        for other in [
            EventSpec { fields: &fields, ..end },
            EventSpec { extra: &fields, ..end },
            EventSpec { kind: TYPE_SLICE_BEGIN, ..end },
            EventSpec { track: Some(3), ..end },
            EventSpec { terminating_flow_ids: &[4], ..end },
            EventSpec { extra_counter: None, ..end },
        ] {
            assert_eq!(other.counter_end(), None, "{other:?}");
        }
    }

    #[test]
    fn a_call_site_is_cached_per_sequence_so_a_new_sequence_gives_its_strings_again() {
        let site = static_site();
        let fields = [Field { name: "a", value: Value::U64(1) }];
        let (mut enc, mut out) = (Encoder::default(), Vec::new());
        for id in [7, 8] {
            let mut seq = Sequence::start(&mut enc, &mut out, id, Timestamps::Incremental, None, 0).unwrap();
            for ts in [1, 2] {
                seq.span_begin((&mut enc, &mut out), (ts, &site), &fields, None).unwrap();
            }
        }
        enc.flush(&mut out).unwrap();
        let packets = decode(&out);
        let names: Vec<_> = packets
            .iter()
            .filter(|p| p.track_event.is_some())
            .map(|p| {
                let data = p.interned_data.clone().unwrap_or_default();
                (p.trusted_packet_sequence_id, data.event_names.len(), data.debug_annotation_names.len())
            })
            .collect();
        assert_eq!(names, [(Some(7), 1, 1), (Some(7), 0, 0), (Some(8), 1, 1), (Some(8), 0, 0)]);
    }

    #[test]
    fn a_site_of_borrowed_text_is_answered_by_its_text_not_its_address() {
        // Borrowed text (a site read back from a file, say) may change at
        // its address: no begin of it is taken from the cache.
        let [(mut hand, mut hand_enc, mut hand_out), (mut oracle, mut prost_enc, mut prost_out)] =
            two_sequences(3);
        let (mut name, mut field) = (String::from("compile"), String::from("unit"));
        for (ts, (new_name, new_field)) in
            [(1, ("compile", "unit")), (2, ("linking", "unit")), (3, ("linking", "file"))]
                .into_iter()
                .enumerate()
                .map(|(i, texts)| (i as u64 + 1, texts.1))
        {
            name.replace_range(.., new_name);
            field.replace_range(.., new_field);
            let site = Site::new(&name, "cabin::build", trace_core::Level::INFO, None, None);
            assert!(!site.has_static_text());
            let fields = [Field { name: &field, value: Value::U64(ts) }];
            begin_on_both(
                (&mut hand, &mut hand_enc, &mut hand_out),
                (&mut oracle, &mut prost_enc, &mut prost_out),
                ts,
                site,
                &fields,
                None,
                &format!("{new_name} {new_field}"),
            );
        }
        // And the same buffers again, as the first time: found by text.
        name.replace_range(.., "compile");
        field.replace_range(.., "unit");
        let site = Site::new(&name, "cabin::build", trace_core::Level::INFO, None, None);
        let fields = [Field { name: &field, value: Value::U64(1) }];
        hand.span_begin((&mut hand_enc, &mut hand_out), (9, &site), &fields, None).unwrap();
        hand_enc.flush(&mut hand_out).unwrap();
        let packets = decode(&hand_out);
        let event = packets[0].track_event.clone().unwrap_or_default();
        assert_eq!((event.name_iid, packets[0].interned_data.clone()), (Some(1), None));
    }

    pub(crate) mod against_prost {
        use proptest::prelude::*;

        use super::*;

        /// A field value, owned.
        #[derive(Clone, Debug)]
        pub(crate) enum Owned {
            I64(i64),
            U64(u64),
            F64(f64),
            Bool(bool),
            Str(String),
        }

        impl Owned {
            pub(crate) fn value(&self) -> Value<'_> {
                match self {
                    Owned::I64(v) => Value::I64(*v),
                    Owned::U64(v) => Value::U64(*v),
                    Owned::F64(v) => Value::F64(*v),
                    Owned::Bool(v) => Value::Bool(*v),
                    Owned::Str(s) => Value::Str(s),
                }
            }
        }

        /// How an event's time relates to the one before it.
        #[derive(Clone, Copy, Debug)]
        enum Step {
            /// A little later (or at the same time), as a thread's events come.
            Later(u64),
            /// Any time at all: a large jump either way.
            Anywhere(u64),
            /// Earlier: the incremental clock cannot go back.
            Earlier(u64),
        }

        #[derive(Clone, Debug)]
        struct Ev {
            step: Step,
            kind: i32,
            track: Option<u64>,
            name: Option<String>,
            category: Option<String>,
            fields: Vec<(String, Owned)>,
            extra: Vec<(String, Owned)>,
            full_name: Option<(String, bool)>,
            counter: Option<i64>,
            extra_counter: Option<(u64, i64)>,
            flows: (Vec<u64>, Vec<u64>),
        }

        /// Names and texts: a few that recur (interned once, then reused),
        /// fresh short ones, long ones whose lengths take two varint bytes
        /// (and so do the lengths of every message around them), and now and
        /// then one of three.
        fn text() -> impl Strategy<Value = String> {
            prop_oneof![
                6 => prop::sample::select(vec!["a", "b", "message", "compile", "cabin::build", ""])
                    .prop_map(String::from),
                3 => "[a-z_:]{1,12}",
                2 => ".{60,200}",
                1 => (16_380usize..16_400).prop_map(|n| "x".repeat(n)),
            ]
        }

        fn value() -> impl Strategy<Value = Owned> {
            prop_oneof![
                any::<i64>().prop_map(Owned::I64),
                prop_oneof![0..300i64, -300..0i64].prop_map(Owned::I64),
                any::<u64>().prop_map(Owned::U64),
                (0..20_000u64).prop_map(Owned::U64),
                any::<f64>().prop_map(Owned::F64),
                any::<bool>().prop_map(Owned::Bool),
                text().prop_map(Owned::Str),
            ]
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                4 => (0..5_000u64).prop_map(Step::Later),
                1 => any::<u64>().prop_map(Step::Later),
                1 => any::<u64>().prop_map(Step::Anywhere),
                1 => any::<u64>().prop_map(Step::Earlier),
            ]
        }

        fn event() -> impl Strategy<Value = Ev> {
            let ev = (
                step(),
                prop_oneof![4 => 1..=3i32, 1 => any::<i32>()],
                prop::option::of(any::<u64>()),
                prop::option::of(text()),
                prop::option::of(text()),
                prop::collection::vec((text(), value()), 0..6),
                prop::collection::vec((text(), value()), 0..2),
                prop::option::of((text(), any::<bool>())),
                prop::option::of(prop_oneof![any::<i64>(), 0..300i64]),
                (prop::collection::vec(any::<u64>(), 0..3), prop::collection::vec(any::<u64>(), 0..3)),
            )
                .prop_map(
                    |(step, kind, track, name, category, fields, extra, full_name, counter, flows)| Ev {
                        step,
                        kind,
                        track,
                        name,
                        category,
                        fields,
                        extra,
                        full_name,
                        counter,
                        extra_counter: None,
                        flows,
                    },
                );
            let extra_counter =
                prop::option::of((any::<u64>(), prop_oneof![any::<i64>(), 0..1_000_000_000i64]));
            (ev, extra_counter).prop_map(|(ev, extra_counter)| Ev { extra_counter, ..ev })
        }

        fn fields(owned: &[(String, Owned)]) -> Vec<Field<'_>> {
            owned.iter().map(|(name, v)| Field { name, value: v.value() }).collect()
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            #[test]
            fn hand_encoded_track_events_are_byte_for_byte_what_prost_writes(
                id in any::<u32>(),
                incremental in any::<bool>(),
                base in prop_oneof![0..1_000_000u64, any::<u64>()],
                events in prop::collection::vec(event(), 1..30),
            ) {
                let timestamps = if incremental { Timestamps::Incremental } else { Timestamps::Absolute };
                let (mut hand_enc, mut prost_enc) = (Encoder::default(), Encoder::default());
                let (mut hand_out, mut prost_out) = (Vec::new(), Vec::new());
                let mut hand = Sequence::start(&mut hand_enc, &mut hand_out, id, timestamps, None, base).unwrap();
                let mut oracle = Sequence::start(&mut prost_enc, &mut prost_out, id, timestamps, None, base).unwrap();
                // The first packets differ in their BOOTTIME reading: compare the events only.
                hand_enc.chunk.clear();
                prost_enc.chunk.clear();
                let mut ts = base;
                for (i, ev) in events.iter().enumerate() {
                    ts = match ev.step {
                        Step::Later(d) => ts.saturating_add(d),
                        Step::Anywhere(t) => t,
                        Step::Earlier(d) => ts.saturating_sub(d),
                    };
                    let (f, x) = (fields(&ev.fields), fields(&ev.extra));
                    let spec = EventSpec {
                        ts,
                        kind: ev.kind,
                        track: ev.track,
                        name: ev.name.as_deref(),
                        category: ev.category.as_deref(),
                        fields: &f,
                        extra: &x,
                        full_name: ev.full_name.as_ref().map(|(s, cut)| (s.as_str(), *cut)),
                        counter: ev.counter,
                        double_counter: None,
                        extra_counter: ev.extra_counter,
                        flow_ids: &ev.flows.0,
                        terminating_flow_ids: &ev.flows.1,
                        // Owned strings: answered by their text.
                        static_text: false,
                    };
                    hand.event(&mut hand_enc, &mut hand_out, &spec).unwrap();
                    event_with_prost(&mut oracle, &mut prost_enc, &mut prost_out, &spec).unwrap();
                    prop_assert!(
                        hand_enc.chunk.pending() == prost_enc.chunk.pending(),
                        "event {i}: hand {:02x?}\nprost {:02x?}",
                        hand_enc.chunk.pending(),
                        prost_enc.chunk.pending()
                    );
                    prop_assert!(hand_out == prost_out, "event {i}: the flushed chunks differ");
                    hand_enc.chunk.clear();
                    prost_enc.chunk.clear();
                }
            }
        }
    }
}
