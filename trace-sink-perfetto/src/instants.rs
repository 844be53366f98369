//! The `tracing` call sites a sequence has written instants of, each with
//! the bytes its instants share there, so that an instant is written without
//! interning or formatting anything.
//!
//! As for the begins of spans (`sites.rs`), only a `tracing` call site's
//! strings are cached ([`Site::has_static_text`]): the addresses and lengths
//! of its name, target, file and fields' names, with its line and level, say
//! which site it is, with no text compared. Everything an instant takes from
//! its site (its category, the names of its annotations, its `level` and
//! `location` annotations, the name of an instant whose message gives none)
//! is then the same for each of its instants on the sequence; its time, its
//! values and the name made from its message are written per instant. The
//! general path interns each string, formats `file:line` and walks the
//! message's characters for every instant: an event with a message and two
//! fields took 2,140 instructions of the writer thread that way, and takes
//! about 750 from the cache (callgrind, the `spans` bench with
//! `SPANS_EVENTS`).

use trace_core::{instant_name, INSTANT_NAME_CHARS as NAME_CHARS};
use trace_core::{Field, Level, Site, Value};

use crate::track_event::{InstantTemplate, SequenceField};

/// How many call sites a sequence keeps, by a hash of their name's address,
/// line and number of fields: a site is kept in the slot of its hash or the
/// next one, so that two sites that meet there are both kept (a third one
/// pushes out one of them).
const SLOTS: usize = 64;

/// A string's address and length.
#[inline]
fn key(s: &str) -> (usize, usize) {
    (s.as_ptr() as usize, s.len())
}

/// One call site's instants, with a given list of fields.
#[derive(Debug, Default)]
pub(crate) struct SiteInstant {
    name: (usize, usize),
    target: (usize, usize),
    file: Option<(usize, usize)>,
    line: Option<u32>,
    level: Option<Level>,
    /// Each field's name: its address and its length.
    fields: Vec<(usize, usize)>,
    /// Whether the slot holds a site.
    filled: bool,
    /// Where the field named `message` is among the fields, if one is.
    message: Option<usize>,
    /// The bytes its instants share, their iids among them.
    template: InstantTemplate,
}

impl SiteInstant {
    /// Whether the slot holds the instants of `site` with `fields`.
    #[inline]
    fn holds(&self, site: &Site<'_>, fields: &[Field<'_>]) -> bool {
        self.filled
            && self.name == key(site.name)
            && self.target == key(site.target)
            && self.file == site.file.map(key)
            && self.line == site.line
            && self.level == Some(site.level)
            && self.fields.len() == fields.len()
            && self.fields.iter().zip(fields).all(|(&name, f)| name == key(f.name))
    }

    /// The name an instant with `fields` takes from its message, as
    /// [`instant_name`] gives it; none if it has no message in text.
    #[inline]
    pub(crate) fn full_name<'f>(&self, fields: &[Field<'f>]) -> Option<(&'f str, bool)> {
        match fields.get(self.message?)?.value {
            Value::Str(message) => message_name(message),
            _ => None,
        }
    }

    /// The bytes its instants share.
    #[inline]
    pub(crate) fn template(&self) -> &InstantTemplate {
        &self.template
    }
}

/// [`instant_name`], without its walk over the characters for a message of
/// one short line (most of them): one that has at most [`NAME_CHARS`] bytes,
/// and so at most as many characters, is its own name, uncut.
#[inline]
pub(crate) fn message_name(message: &str) -> Option<(&str, bool)> {
    if message.len() <= NAME_CHARS && !has_line_break(message.as_bytes()) {
        return (!message.is_empty()).then_some((message, false));
    }
    instant_name(message)
}

/// Whether `bytes` hold a `\n` or a `\r`: eight bytes at a time.
#[inline]
fn has_line_break(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    // True when one of the word's bytes is zero.
    let zero = |w: u64| w.wrapping_sub(ONES) & !w & (ONES << 7) != 0;
    let breaks = |w: u64| zero(w ^ (ONES * u64::from(b'\n'))) || zero(w ^ (ONES * u64::from(b'\r')));
    let mut rest = bytes;
    while let Some((word, tail)) = rest.split_first_chunk::<8>() {
        if breaks(u64::from_le_bytes(*word)) {
            return true;
        }
        rest = tail;
    }
    match bytes.last_chunk::<8>() {
        // The last bytes, in a word that overlaps the ones before.
        Some(word) if !rest.is_empty() => breaks(u64::from_le_bytes(*word)),
        _ => rest.iter().any(|&b| b == b'\n' || b == b'\r'),
    }
}

/// The call sites of one sequence's instants (their iids are the sequence's).
#[derive(Debug, Default)]
pub(crate) struct Instants {
    /// None until the first site is cached: a sequence with no instants
    /// keeps none. Each slot's site is made when the slot is first used: a
    /// table of the sites themselves cost the first instant of a sequence
    /// four fresh pages, each a page fault (3 µs here).
    slots: Vec<Option<Box<SiteInstant>>>,
}

impl Instants {
    #[inline]
    fn slot(site: &Site<'_>, fields: &[Field<'_>]) -> usize {
        let addr = site.name.as_ptr() as usize ^ fields.len() ^ site.line.unwrap_or(0) as usize;
        (addr.wrapping_mul(0x9e37_79b9_7f4a_7c15_u64 as usize) >> (usize::BITS - SLOTS.trailing_zeros()))
            % SLOTS
    }

    /// The instants of `site` with `fields` (their names, not their values),
    /// if they were cached: never for a site whose text is not `'static`.
    #[inline]
    pub(crate) fn get(&self, site: &Site<'_>, fields: &[Field<'_>]) -> Option<&SiteInstant> {
        if !site.has_static_text() {
            return None;
        }
        let slot = Self::slot(site, fields);
        let held = |at: usize| self.slots.get(at)?.as_deref().filter(|s| s.holds(site, fields));
        held(slot).or_else(|| held((slot + 1) % SLOTS))
    }

    /// Caches the instants of `site` with `fields` on the sequence of
    /// `sequence`: in the category of iid `category`, named by the iid
    /// `name` without a message (none when the site's name is not interned),
    /// with annotations named as `annotations` gives them (see
    /// [`InstantTemplate::set`]). Nothing is cached for a site whose text is
    /// not `'static`.
    pub(crate) fn insert<'v>(
        &mut self,
        (sequence, site): (&SequenceField, &Site<'_>),
        fields: &[Field<'_>],
        iids: (u64, Option<u64>),
        annotations: impl Iterator<Item = (u64, Value<'v>)>,
    ) {
        if !site.has_static_text() {
            return;
        }
        if self.slots.is_empty() {
            self.slots.resize_with(SLOTS, || None);
        }
        let slot = Self::slot(site, fields);
        let next = (slot + 1) % SLOTS;
        let free =
            |s: &Option<Box<SiteInstant>>| s.as_ref().is_none_or(|s| !s.filled || s.holds(site, fields));
        let at = match (self.slots.get(slot), self.slots.get(next)) {
            (Some(first), _) if free(first) => slot,
            (_, Some(second)) if free(second) => next,
            (Some(_), Some(_)) => {
                // Both taken by others: the first moves on to the second
                // place, pushing out the one there, and this one takes its.
                self.slots.swap(slot, next);
                slot
            }
            _ => return,
        };
        let Some(cached) = self.slots.get_mut(at) else {
            return;
        };
        let cached = cached.get_or_insert_with(Box::default);
        cached.name = key(site.name);
        cached.target = key(site.target);
        cached.file = site.file.map(key);
        cached.line = site.line;
        cached.level = Some(site.level);
        cached.fields.clear();
        cached.fields.extend(fields.iter().map(|f| key(f.name)));
        cached.message = fields.iter().position(|f| f.name == "message");
        cached.filled = cached.template.set(sequence, iids, fields.len(), annotations);
    }
}

#[cfg(test)]
mod tests {
    use trace_core::{Event, Finish, Sink};

    use super::*;
    use crate::ids::FIXED_HASH;
    use crate::PerfettoSink;

    #[test]
    fn a_message_is_named_as_instant_name_names_it() {
        // Every length up to past the cut, with a line break at each place
        // (or none), in one-byte and two-byte characters.
        for unit in ["x", "é"] {
            for len in 0..=(NAME_CHARS + 10) {
                let text = unit.repeat(len);
                assert_eq!(message_name(&text), instant_name(&text), "{len} {unit}");
                for at in 0..=text.len() {
                    if !text.is_char_boundary(at) {
                        continue;
                    }
                    for brk in ["\n", "\r", "\r\n", "\t"] {
                        let message = format!("{}{brk}{}", &text[..at], &text[at..]);
                        assert_eq!(message_name(&message), instant_name(&message), "{message:?}");
                    }
                }
            }
        }
    }

    /// Call sites of every shape the sink tells apart: a message with
    /// fields and without, no message, fields named as the annotations the
    /// sink adds, another target and level, many fields.
    fn sites() -> Vec<&'static tracing::Metadata<'static>> {
        crate::test_sites::metadata_of(|| {
            tracing::info!(a = 1, b = 2, "bench event");
            tracing::info!("a message alone");
            tracing::warn!(x = 1);
            tracing::error!(level = "mine", location = "here", "shadowed");
            tracing::debug!(location = "here", a = 1, "location shadowed");
            tracing::trace!(message = 5, a = 1);
            tracing::info!(target: "other::target", a = 1, "another target");
            tracing::info!(a = 1, b = 2, c = 3, d = 4, e = 5, f = 6, "many fields");
            tracing::info!(a = 1, b = 2, "bench event");
        })
    }

    /// Sites that meet in one slot: made by one macro, they share their
    /// name, file and line (so their slot), and differ in their field's name.
    fn meeting_sites() -> Vec<&'static tracing::Metadata<'static>> {
        macro_rules! sites {
            ($($field:ident)*) => {
                crate::test_sites::metadata_of(|| { $( tracing::info!($field = 1, "meeting"); )* })
            };
        }
        let sites = sites!(a b c d e f g h i j k l);
        assert_eq!(sites.len(), 12);
        sites
    }

    /// A site's strings copied, so that a site made from them is answered
    /// by its text (the general path) and never from the cache.
    struct Borrowed {
        name: String,
        target: String,
        file: Option<String>,
        fields: Vec<String>,
    }

    impl Borrowed {
        fn of(meta: &tracing::Metadata<'static>) -> Self {
            Borrowed {
                name: meta.name().to_string(),
                target: meta.target().to_string(),
                file: meta.file().map(str::to_string),
                fields: meta.fields().iter().map(|f| f.name().to_string()).collect(),
            }
        }

        fn site(&self, meta: &tracing::Metadata<'static>) -> Site<'_> {
            Site::new(&self.name, &self.target, *meta.level(), self.file.as_deref(), meta.line())
        }
    }

    /// A small deterministic generator, so that a failure replays.
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((self.0 >> 33) % n as u64) as usize
        }
    }

    #[test]
    fn an_instant_from_a_call_sites_cached_bytes_allocates_nothing() {
        // Sites that push each other out of their slots too: written again
        // and again through the general path, and cached again each time.
        let mut metas = sites();
        metas.extend(meeting_sites());
        let mut sink = PerfettoSink::new();
        let mut out = std::io::sink();
        sink.start(&crate::tests::test_start(), &mut out).unwrap();
        let message = "compiled src/main.c, a message longer than sixty bytes, cut to a name";
        let mut allocated = 0;
        // Past the first full chunks (the first half), then counted.
        for round in 0..2_000u64 {
            for meta in &metas {
                let value = |name| if name == "message" { Value::Str(message) } else { Value::U64(round) };
                let fields: Vec<_> =
                    meta.fields().iter().map(|f| Field { name: f.name(), value: value(f.name()) }).collect();
                let event =
                    Event::Instant { thread: 7, ts: 20_000 + round, site: Site::of(meta), fields: &fields };
                let before = crate::tests::allocations();
                sink.event(&event, &mut out).unwrap();
                if round >= 1_000 {
                    allocated += crate::tests::allocations() - before;
                }
            }
        }
        assert_eq!(allocated, 0, "allocations while writing 21,000 warm instants");
    }

    #[test]
    fn instants_from_a_call_sites_cached_bytes_are_byte_for_byte_those_of_the_general_path() {
        let mut metas = sites();
        assert_eq!(metas.len(), 9);
        metas.extend(meeting_sites());
        let borrowed: Vec<_> = metas.iter().map(|m| Borrowed::of(m)).collect();
        let long = "v".repeat(300);
        let longest = "w".repeat(20_000);
        let values = [
            Value::I64(-1),
            Value::I64(i64::MIN),
            Value::I64(100),
            Value::U64(0),
            Value::U64(200),
            Value::U64(u64::MAX),
            Value::F64(1.5),
            Value::F64(f64::NAN),
            Value::Bool(true),
            Value::Bool(false),
            Value::Str(""),
            Value::Str("short"),
            Value::Str(&long),
            Value::Str(&longest),
        ];
        let sixty = "x".repeat(60);
        let sixty_one = "x".repeat(61);
        let accents = "é".repeat(30);
        let more_accents = "é".repeat(61);
        let long_message = "y".repeat(5_000);
        let messages = [
            "bench event",
            "",
            "two\nlines",
            "line\r\nwindows",
            "\nafter a break",
            "tab\there",
            &sixty,
            &sixty_one,
            &accents,
            &more_accents,
            &long_message,
            "exactly8",
            "seven77",
            "sixteen bytes..\n",
            "ends with\n",
        ];
        // The general path's site: borrowed text, interned by its text.
        let other_site =
            Site::new("compile", "cabin::build", trace_core::Level::INFO, Some("src/build.rs"), Some(12));
        let other_fields = [Field { name: "a", value: Value::U64(1) }];

        let [mut fast, mut general] = [(); 2].map(|()| {
            let mut sink = PerfettoSink::new();
            let mut out = Vec::new();
            FIXED_HASH.with(|h| h.set(Some(0x1234_5678_9abc)));
            sink.start(&crate::tests::test_start(), &mut out).unwrap();
            FIXED_HASH.with(|h| h.set(None));
            (sink, out)
        });
        let mut rng = Lcg(7);
        let (mut ts, mut thread) = (20_000u64, 1u64);
        // The threads in the order their sequences start.
        let mut order = Vec::new();
        for i in 0..8_000 {
            // Runs on one thread, and switches between three.
            if rng.below(4) == 0 {
                thread = 1 + rng.below(3) as u64;
            }
            if !order.contains(&thread) {
                order.push(thread);
            }
            ts = match rng.below(20) {
                0 => ts - 5_000,
                1 => ts + (1 << 30),
                _ => ts + rng.below(3_000) as u64,
            };
            match rng.below(12) {
                0 => {
                    let name = format!("worker {thread}");
                    let event = Event::ThreadName { thread, name: &name };
                    fast.0.event(&event, &mut fast.1).unwrap();
                    general.0.event(&event, &mut general.1).unwrap();
                    continue;
                }
                1 => {
                    let event = Event::Instant { thread, ts, site: other_site, fields: &other_fields };
                    fast.0.event(&event, &mut fast.1).unwrap();
                    general.0.event(&event, &mut general.1).unwrap();
                    continue;
                }
                _ => {}
            }
            let s = rng.below(metas.len());
            let (meta, copy) = (metas[s], &borrowed[s]);
            let values: Vec<Value<'_>> = meta
                .fields()
                .iter()
                .map(|f| match f.name() {
                    "message" if rng.below(10) > 0 => Value::Str(messages[rng.below(messages.len())]),
                    _ => values[rng.below(values.len())],
                })
                .collect();
            let fields: Vec<Field<'_>> = meta
                .fields()
                .iter()
                .zip(&values)
                .map(|(f, &value)| Field { name: f.name(), value })
                .collect();
            let copied: Vec<Field<'_>> =
                copy.fields.iter().zip(&values).map(|(name, &value)| Field { name, value }).collect();
            let site = Site::of(meta);
            assert!(site.has_static_text());
            fast.0.event(&Event::Instant { thread, ts, site, fields: &fields }, &mut fast.1).unwrap();
            let oracle = Event::Instant { thread, ts, site: copy.site(meta), fields: &copied };
            general.0.event(&oracle, &mut general.1).unwrap();
            // Flushed now and then, so that a difference shows near its event.
            if i % 500 == 499 {
                let [a, b] = [&mut fast, &mut general].map(|(sink, out)| {
                    sink.state.as_mut().unwrap().enc.flush(out).unwrap();
                    out.len()
                });
                assert_eq!(a, b, "event {i}");
                assert!(fast.1 == general.1, "event {i}: the files differ");
            }
        }
        // The first site, written once more on each thread through both
        // sinks, is then answered from each sequence's cache: the cache took
        // part above, and its bytes are still the general path's.
        let (meta, copy) = (metas[0], &borrowed[0]);
        let fields: Vec<_> =
            meta.fields().iter().map(|f| Field { name: f.name(), value: Value::Str("again") }).collect();
        let copied: Vec<_> =
            copy.fields.iter().map(|name| Field { name, value: Value::Str("again") }).collect();
        for &thread in &order {
            let instant = Event::Instant { thread, ts, site: Site::of(meta), fields: &fields };
            fast.0.event(&instant, &mut fast.1).unwrap();
            let oracle = Event::Instant { thread, ts, site: copy.site(meta), fields: &copied };
            general.0.event(&oracle, &mut general.1).unwrap();
        }
        let state = fast.0.state.as_mut().unwrap();
        assert_eq!(state.threads.len(), order.len());
        for (sequence, &thread) in state.threads.iter_mut().zip(&order) {
            let written =
                sequence.cached_instant((&mut state.enc, &mut fast.1), ts, &Site::of(meta), &fields);
            assert!(matches!(written, Some(Ok(()))), "thread {thread}");
            let oracle = Event::Instant { thread, ts, site: copy.site(meta), fields: &copied };
            general.0.event(&oracle, &mut general.1).unwrap();
        }
        let mut end = Finish::default();
        end.end_ns = ts + 1;
        fast.0.finish(&end, &mut fast.1).unwrap();
        general.0.finish(&end, &mut general.1).unwrap();
        assert!(fast.1 == general.1);
    }
}
