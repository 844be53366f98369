//! The lent delta (`Snapshot::delta_ref`) against the owned one
//! (`Snapshot::delta_from_bytes`), for the same input: converted, it must be
//! the owned delta; read field by field, it must hold the same actions; and
//! it must lend, not copy: every hash, and every output that is UTF-8, is a
//! slice of the log after the run.
//!
//! The differential and property tests, the crate's table-driven tests and
//! the fuzzer call [`agrees`] on every input they read, so the owned delta it
//! is held against is itself held against the reference reader or the model.

use std::borrow::Cow;

use ninja_log::{Delta, DeltaRef, Snapshot};

/// Whether `s` lies inside `bytes`.
fn within(bytes: &[u8], s: &str) -> bool {
    let range = bytes.as_ptr_range();
    let (start, end) = (s.as_ptr(), s.as_ptr().wrapping_add(s.len()));
    range.start <= start && end <= range.end
}

/// Checks the lent delta of `after` against `owned`, the owned delta of the
/// same snapshot and bytes.
pub fn agrees(snapshot: &Snapshot, after: Option<&[u8]>, owned: &Delta) -> Result<(), String> {
    let lent = snapshot.delta_ref(after);
    let fail = |what: &str| {
        Err(format!(
            "the lent delta {what}\nlent: {lent:#?}\nowned: {owned:#?}\nafter: {:?}",
            after.map(String::from_utf8_lossy)
        ))
    };
    if lent.clone().into_delta() != *owned || Delta::from(lent.clone()) != *owned {
        return fail("is not the owned delta once converted");
    }
    if lent.is_available() != owned.is_available()
        || lent.notes() != owned.notes()
        || lent.reason() != owned.reason()
    {
        return fail("says something else than the owned delta");
    }
    for success in [true, false] {
        if lent.clone().with_exit_status(success).into_delta() != owned.clone().with_exit_status(success) {
            return fail(&format!("differs from the owned delta after `with_exit_status({success})`"));
        }
    }
    let (Some(actions), Some(want)) = (lent.actions(), owned.actions()) else {
        return match (&lent, owned) {
            (DeltaRef::Unavailable { reason, .. }, Delta::Unavailable { reason: r, .. }) if reason == r => {
                Ok(())
            }
            _ => fail("is available when the owned one is not, or the other way round"),
        };
    };
    if actions.len() != want.len()
        || actions.is_empty() != want.is_empty()
        || actions.iter().len() != want.len()
    {
        return fail("has another number of actions");
    }
    if actions.get(want.len()).is_some() {
        return fail("has an action past its last");
    }
    if !actions.iter().rev().eq(actions.iter().collect::<Vec<_>>().into_iter().rev()) {
        return fail("lists its actions in another order backwards");
    }
    let bytes = after.unwrap_or_default();
    for (i, (a, w)) in actions.iter().zip(want).enumerate() {
        if actions.get(i) != Some(a) {
            return fail(&format!("gives action {i} differently by index"));
        }
        let outputs: Vec<&str> = a.outputs.iter().map(|o| &**o).collect();
        if (a.start_ms, a.end_ms, a.epoch, a.hash, a.duration_ms())
            != (w.start_ms, w.end_ms, w.epoch, w.hash.as_str(), w.duration_ms())
            || outputs != w.outputs
            || a.to_action() != *w
        {
            return fail(&format!("reads action {i} differently"));
        }
        if !within(bytes, a.hash) {
            return fail(&format!("copies the hash of action {i}"));
        }
        for o in a.outputs {
            match o {
                Cow::Borrowed(o) if within(bytes, o) => {}
                // Only a path that is not UTF-8 is converted, and a note says so.
                Cow::Owned(o)
                    if o.contains('\u{fffd}') && lent.notes().iter().any(|n| n.contains("not UTF-8")) => {}
                _ => return fail(&format!("copies output {o:?} of action {i}")),
            }
        }
    }
    Ok(())
}
