//! Feeds arbitrary bytes to `Snapshot::delta_from_bytes`: it must never panic,
//! what it returns must keep the crate's promises, and it must be exactly
//! what the reader's reference (`tests/it/reference.rs`, the straightforward
//! reader the fast one replaced) returns. The lent delta of the same bytes
//! (`Snapshot::delta_ref`) must agree with it (`tests/it/lent.rs`).
//!
//! Input layout (see `../README.md`): one flag byte (bit 0: there is a log
//! before, bit 1: there is a log after, bit 2: Ninja failed), the length of
//! the log before as a little-endian u32 (clamped to what is left), the log
//! before, then the log after.

#![no_main]

use libfuzzer_sys::fuzz_target;
use ninja_log::{Delta, Snapshot};

#[path = "../../tests/it/lent.rs"]
mod lent;
#[path = "../../tests/it/reference.rs"]
mod reference;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (len, rest) = match rest.split_first_chunk::<4>() {
        Some((len, rest)) => (u32::from_le_bytes(*len) as usize, rest),
        None => (0, rest),
    };
    let (before, after) = rest.split_at(len.min(rest.len()));
    let before = (flags & 1 != 0).then(|| before.to_vec());
    let after = (flags & 2 != 0).then_some(after);

    let snapshot = Snapshot::from_bytes(".ninja_log", before);
    let delta = snapshot.delta_from_bytes(after);
    assert_eq!(delta, snapshot.delta_from_bytes(after), "not deterministic");
    let want = reference::delta(snapshot.path(), snapshot.bytes(), after);
    assert_eq!(delta, want, "not what the reference reader says");
    if let Err(e) = lent::agrees(&snapshot, after, &delta) {
        panic!("{e}");
    }
    match &delta {
        Delta::Available { actions, notes, .. } => {
            for a in actions {
                assert!(a.start_ms <= a.end_ms, "{a:?}");
                assert!(!a.outputs.is_empty(), "{a:?}");
                assert!(!a.hash.is_empty(), "{a:?}");
            }
            for n in notes {
                assert!(n.starts_with(".ninja_log"), "note without its path: {n}");
            }
            // With no log after, only an empty run can be available.
            if after.is_none() {
                assert!(actions.is_empty());
            }
        }
        Delta::Unavailable { reason, .. } => {
            assert!(reason.starts_with(".ninja_log"), "reason without its path: {reason}");
        }
    }
    let _ = delta.with_exit_status(flags & 4 == 0);
});
