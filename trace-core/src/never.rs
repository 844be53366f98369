//! The call sites the tool's own dispatcher never enables, as its interest
//! says, so that the capture's subscriber does not forward their spans and
//! events to it.
//!
//! Asking the tool's dispatcher `enabled` is not enough: a
//! `tracing-subscriber` registry whose layers all have per-layer filters
//! answers `true` even when every filter said no, because it disables such
//! call sites through their interest (and its level hint) instead. A span
//! forwarded to it then is made in the registry's slab, entered, exited and
//! closed there for no layer at all. In cabin's set-up (an `fmt` layer at
//! WARN) that was about 1,500 instructions a span on the calling thread
//! (callgrind, the `spans` benchmark with `SPANS_FMT`), more than the capture
//! itself.
//!
//! The table is filled from the capture subscriber's `register_callsite`,
//! which `tracing` calls for every call site when the subscriber is made and
//! again whenever interest is rebuilt (a reloaded filter), so that a call site
//! the tool's dispatcher comes to want leaves it. A call site the table has no
//! room for is simply asked with `enabled`, as before: a miss costs time, never
//! a line of the tool's output.

use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use tracing_core::Metadata;

/// Slots of the table: more call sites than a tool has at one level, before
/// probing gives up (the bits of the slot number).
const SLOT_BITS: u32 = 11;
/// Slots tried for one call site before the table counts as full for it.
const PROBES: usize = 8;
/// A slot no call site has used.
const EMPTY: usize = 0;
/// A slot whose call site was taken out (its interest changed).
const REMOVED: usize = 1;

/// Call sites, by the address of their metadata, whose interest from the
/// tool's dispatcher is `never`.
pub(crate) struct NeverTable {
    slots: Box<[AtomicUsize]>,
    /// Writers (interest registration, which is rare) take turns.
    writing: Mutex<()>,
}

impl NeverTable {
    pub(crate) fn new() -> NeverTable {
        NeverTable {
            slots: (0..1usize << SLOT_BITS).map(|_| AtomicUsize::new(EMPTY)).collect(),
            writing: Mutex::new(()),
        }
    }

    /// The slots call site `addr` may occupy, in the order they are tried.
    #[inline]
    fn probes(addr: usize) -> impl Iterator<Item = usize> {
        let first = (addr as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SLOT_BITS);
        let mask = (1usize << SLOT_BITS) - 1;
        (0..PROBES).map(move |k| (first as usize + k) & mask)
    }

    /// Whether the tool's dispatcher said it never enables `meta`.
    #[inline]
    pub(crate) fn contains(&self, meta: &Metadata<'_>) -> bool {
        let addr = meta as *const Metadata<'_> as usize;
        for i in Self::probes(addr) {
            match self.slots[i].load(Ordering::Acquire) {
                v if v == addr => return true,
                EMPTY => return false,
                _ => {}
            }
        }
        false
    }

    /// Notes the tool dispatcher's interest in `meta`: `never` puts it in the
    /// table (if there is room), anything else takes it out.
    pub(crate) fn set(&self, meta: &'static Metadata<'static>, never: bool) {
        let addr = meta as *const Metadata<'static> as usize;
        let _turn = self.writing.lock();
        let mut free = None;
        for i in Self::probes(addr) {
            match self.slots[i].load(Ordering::Acquire) {
                v if v == addr => {
                    if !never {
                        self.slots[i].store(REMOVED, Ordering::Release);
                    }
                    return;
                }
                REMOVED => {
                    free = free.or(Some(i));
                }
                EMPTY => {
                    free = free.or(Some(i));
                    break;
                }
                _ => {}
            }
        }
        if let (true, Some(i)) = (never, free) {
            self.slots[i].store(addr, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use tracing_core::callsite::{Callsite, Identifier};
    use tracing_core::field::FieldSet;
    use tracing_core::metadata::Kind;
    use tracing_core::{Interest, Level};

    use super::*;

    struct Site;
    impl Callsite for Site {
        fn set_interest(&self, _: Interest) {}
        fn metadata(&self) -> &Metadata<'_> {
            unreachable!("not registered")
        }
    }
    static SITE: Site = Site;

    /// `n` distinct call sites' metadata, leaked (a test's call sites live as
    /// long as the program, as real ones do).
    fn metas(n: usize) -> Vec<&'static Metadata<'static>> {
        (0..n)
            .map(|_| {
                let fields = FieldSet::new(&[], Identifier(&SITE));
                let meta = Metadata::new("m", "t", Level::INFO, None, None, None, fields, Kind::SPAN);
                &*Box::leak(Box::new(meta))
            })
            .collect()
    }

    #[test]
    fn a_call_site_is_in_the_table_while_its_interest_is_never() {
        let table = NeverTable::new();
        let [a, b] = metas(2)[..] else { unreachable!() };
        assert!(!table.contains(a));
        table.set(a, true);
        table.set(b, false);
        assert!(table.contains(a) && !table.contains(b));
        // Interest rebuilt after a reload: the tool's dispatcher now wants it.
        table.set(a, false);
        assert!(!table.contains(a));
        table.set(a, true);
        table.set(a, true);
        assert!(table.contains(a));
    }

    #[test]
    fn a_full_table_forgets_nothing_it_holds_and_answers_no_for_the_rest() {
        let table = NeverTable::new();
        let all = metas(3 << SLOT_BITS);
        for m in &all {
            table.set(m, true);
        }
        let held: Vec<bool> = all.iter().map(|m| table.contains(m)).collect();
        let n = held.iter().filter(|h| **h).count();
        assert!(n > (1 << SLOT_BITS) / 2 && n <= 1 << SLOT_BITS, "{n}");
        // Taking some out keeps the rest, and makes room again.
        for m in &all[..64] {
            table.set(m, false);
        }
        assert!(all[..64].iter().all(|m| !table.contains(m)));
        let kept: Vec<bool> = all[64..].iter().map(|m| table.contains(m)).collect();
        assert_eq!(kept, held[64..]);
        let room = all[64..].iter().zip(&held[64..]).filter(|(_, h)| !**h).map(|(m, _)| *m);
        let mut placed = 0;
        for m in room {
            table.set(m, true);
            placed += usize::from(table.contains(m));
        }
        assert!(placed > 0, "no room was made");
    }
}
