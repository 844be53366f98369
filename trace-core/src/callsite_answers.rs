//! What the capture's subscriber knows of each call site: whether its own
//! filter wants it, and whether the tool's own dispatcher never enables it.
//!
//! Both are answered when `tracing` registers a call site with the
//! subscriber (when it is made, and whenever interest is rebuilt, as a
//! reloaded filter does), and kept here for the calls that follow:
//!
//! - `tracing` asks the capture's filter (`Targets`, which never changes
//!   during a capture) again for every span and event of a call site whose
//!   interest differs between dispatchers, and the subscriber asks it for
//!   each span it may forward.
//! - A `tracing-subscriber` registry whose layers all have per-layer filters
//!   answers `enabled` with `true` even when every filter said no (it
//!   disables such call sites through their interest instead). A span
//!   forwarded to it is then made, entered and closed in its slab for no
//!   layer: in cabin's set-up (an `fmt` layer at WARN), more work on the
//!   calling thread than the capture itself. A call site whose interest from
//!   the tool's dispatcher is `never` is not forwarded to it.
//!
//! A call site the table has no room for, or whose metadata the subscriber is
//! given at another address (`tracing-log`'s records), is answered by the
//! filter and by `enabled`: a miss costs time, never a line of the tool's
//! output nor a span of the capture.

use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use tracing_core::Metadata;

/// Slots of the table (the bits of the slot number): 512, one 4 KiB page,
/// more call sites than one invocation of a tool reaches; a call site that
/// finds no room in its probes is simply not kept.
const SLOT_BITS: u32 = 9;
/// Slots tried for one call site before the table counts as full for it.
const PROBES: usize = 8;
/// A slot no call site has used.
const EMPTY: usize = 0;
/// The low bits of a slot that hold what is known, beside the address.
const WANTED: usize = 1;
const INNER_NEVER: usize = 2;
const BITS: usize = WANTED | INNER_NEVER;

/// What is known of one call site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Answers {
    /// The capture's filter wants it.
    pub wanted: bool,
    /// The tool's dispatcher said its interest is `never`.
    pub inner_never: bool,
}

/// Call sites, by the address of their metadata (whose low two bits are
/// always zero: it holds pointers), with what is known of each.
pub(crate) struct CallsiteAnswers {
    slots: Box<[AtomicUsize]>,
    /// Writers (interest registration, which is rare) take turns.
    writing: Mutex<()>,
}

impl CallsiteAnswers {
    pub(crate) fn new() -> CallsiteAnswers {
        CallsiteAnswers {
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

    /// What is known of `meta`, if it is in the table.
    #[inline]
    pub(crate) fn get(&self, meta: &Metadata<'_>) -> Option<Answers> {
        let addr = meta as *const Metadata<'_> as usize;
        for i in Self::probes(addr) {
            match self.slots[i].load(Ordering::Acquire) {
                EMPTY => return None,
                v if v & !BITS == addr => {
                    return Some(Answers { wanted: v & WANTED != 0, inner_never: v & INNER_NEVER != 0 })
                }
                _ => {}
            }
        }
        None
    }

    /// Keeps what is known of `meta`, replacing what was (if there is room).
    pub(crate) fn set(&self, meta: &'static Metadata<'static>, known: Answers) {
        let addr = meta as *const Metadata<'static> as usize;
        if addr & BITS != 0 {
            return;
        }
        let value =
            addr | (usize::from(known.wanted) * WANTED) | (usize::from(known.inner_never) * INNER_NEVER);
        let _turn = self.writing.lock();
        for i in Self::probes(addr) {
            match self.slots[i].load(Ordering::Acquire) {
                v if v == EMPTY || v & !BITS == addr => {
                    self.slots[i].store(value, Ordering::Release);
                    return;
                }
                _ => {}
            }
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

    const WANTED_ONLY: Answers = Answers { wanted: true, inner_never: false };
    const NEVER_ONLY: Answers = Answers { wanted: false, inner_never: true };

    #[test]
    fn a_call_site_keeps_what_was_last_known_of_it() {
        let table = CallsiteAnswers::new();
        let [a, b] = metas(2)[..] else { unreachable!() };
        assert_eq!(table.get(a), None);
        table.set(a, NEVER_ONLY);
        table.set(b, WANTED_ONLY);
        assert_eq!((table.get(a), table.get(b)), (Some(NEVER_ONLY), Some(WANTED_ONLY)));
        // Interest rebuilt after a reload: the tool's dispatcher now wants it.
        table.set(a, Answers { wanted: false, inner_never: false });
        assert_eq!(table.get(a), Some(Answers { wanted: false, inner_never: false }));
        table.set(a, Answers { wanted: true, inner_never: true });
        assert_eq!(table.get(a), Some(Answers { wanted: true, inner_never: true }));
        assert_eq!(table.get(b), Some(WANTED_ONLY));
    }

    #[test]
    fn a_full_table_keeps_what_it_holds_and_knows_nothing_of_the_rest() {
        let table = CallsiteAnswers::new();
        let all = metas(3 << SLOT_BITS);
        for (k, m) in all.iter().enumerate() {
            table.set(m, if k % 2 == 0 { WANTED_ONLY } else { NEVER_ONLY });
        }
        let held = all.iter().filter(|m| table.get(m).is_some()).count();
        assert!(held > (1 << SLOT_BITS) / 2 && held <= 1 << SLOT_BITS, "{held}");
        for (k, m) in all.iter().enumerate() {
            if let Some(known) = table.get(m) {
                assert_eq!(known, if k % 2 == 0 { WANTED_ONLY } else { NEVER_ONLY }, "call site {k}");
            }
        }
    }
}
