//! Spans that run in pieces get their whole life as one more event, and links
//! between spans become flows, under either front-end.

use tracing::info_span;

use crate::collect::{session_on, Seen, FRONTS};

fn thread_of(seen: &Seen, name: &str) -> u64 {
    seen.threads.iter().find(|t| t.1 == name).unwrap_or_else(|| panic!("no thread {name}")).0
}

/// The one slice named `name`: (tid, begin, end).
fn slice(seen: &Seen, name: &str) -> (u64, u64, u64) {
    let found: Vec<_> = seen.slices.iter().filter(|s| s.1 == name).collect();
    assert_eq!(found.len(), 1, "one slice {name}: {found:?}");
    (found[0].0, found[0].2, found[0].3)
}

#[test]
fn only_a_span_entered_more_than_once_runs_in_pieces() {
    for front in FRONTS {
        let (s, seen) = session_on(front, "pieces", "trace");
        s.in_scope(|| {
            info_span!("once", n = 1).in_scope(|| ());
            let twice = info_span!("twice");
            twice.in_scope(|| ());
            twice.in_scope(|| ());
            drop(twice);
            let moved = info_span!("moved", n = 2);
            moved.in_scope(|| ());
            trace_core::spawn("other", move || moved.in_scope(|| ())).unwrap().join().unwrap();
        });
        s.finish();
        let seen = seen.lock();
        let names: Vec<&str> = seen.asyncs.iter().map(|a| a.0.as_str()).collect();
        assert_eq!(names, ["twice", "moved"], "{front:?}");
        let pieces: Vec<_> = seen.slices.iter().filter(|s| s.1 == "twice").collect();
        let (_, begin, end, _, unclosed) = &seen.asyncs[0];
        assert_eq!((*begin, pieces[1].3 <= *end, *unclosed), (pieces[0].2, true, false), "{front:?}");
        assert_eq!(seen.asyncs[1].3, "n=2", "{front:?}: the span's fields");
    }
}

#[test]
fn a_span_in_pieces_still_open_at_the_finish_ends_there_unclosed() {
    for front in FRONTS {
        let (s, seen) = session_on(front, "open", "trace");
        let kept = s.in_scope(|| {
            let kept = info_span!("kept");
            kept.in_scope(|| ());
            kept.in_scope(|| ());
            kept
        });
        s.finish();
        drop(kept);
        let seen = seen.lock();
        let last = seen.slices.iter().map(|s| s.3).max().unwrap();
        assert_eq!(seen.asyncs.len(), 1, "{front:?}");
        let (_, _, end, _, unclosed) = &seen.asyncs[0];
        assert!(*unclosed && *end >= last, "{front:?}: ends at the finish, unclosed");
    }
}

#[test]
fn a_helper_started_with_spawn_gets_a_flow_from_the_open_span_to_its_first_span() {
    for front in FRONTS {
        let (s, seen) = session_on(front, "spawn", "trace");
        s.in_scope(|| {
            info_span!("starter").in_scope(|| {
                trace_core::spawn("helper", || {
                    info_span!("first").in_scope(|| ());
                    info_span!("second").in_scope(|| ());
                })
                .unwrap()
                .join()
                .unwrap();
            });
            // A thread with no span open starts nothing a flow could leave.
            std::thread::spawn(trace_core::bind(|| {
                trace_core::spawn("orphan", || info_span!("unlinked").in_scope(|| ()))
                    .unwrap()
                    .join()
                    .unwrap()
            }))
            .join()
            .unwrap();
        });
        s.finish();
        let seen = seen.lock();
        let spawns: Vec<_> = seen.flows.iter().filter(|f| f.2 == "spawn").collect();
        assert_eq!(spawns.len(), 2, "{front:?}: one flow, two ends: {spawns:?}");
        let (out, into) = (spawns[0], spawns[1]);
        assert_eq!((out.0, into.0, out.1), ("out", "in", into.1), "{front:?}");
        let starter = slice(&seen, "starter");
        assert_eq!(out.3, starter.0, "{front:?}");
        assert!(starter.1 <= out.4 && out.4 <= starter.2, "{front:?}: leaves from inside the starter");
        let first = slice(&seen, "first");
        assert_eq!((into.3, into.4, into.5), (thread_of(&seen, "helper"), first.1, true), "{front:?}");
    }
}

#[test]
fn follows_from_gives_a_flow_from_the_origin_to_the_follower() {
    for front in FRONTS {
        let (s, seen) = session_on(front, "follows", "trace");
        s.in_scope(|| {
            let origin = info_span!("origin");
            let later = info_span!("later");
            let running = info_span!("running");
            origin.in_scope(|| later.follows_from(&origin));
            running.in_scope(|| running.follows_from(&origin));
            later.in_scope(|| ());
            // An origin that has closed leaves nothing to draw from.
            let gone = info_span!("gone");
            let id = gone.id();
            drop(gone);
            info_span!("orphan").follows_from(id);
        });
        s.finish();
        let seen = seen.lock();
        let mut flows: Vec<_> = seen.flows.iter().filter(|f| f.2 == "follows_from").collect();
        assert_eq!(flows.len(), 4, "{front:?}: two flows: {flows:?}");
        // By flow, its source first.
        flows.sort_by_key(|f| (f.1, f.0 == "in"));
        let origin = slice(&seen, "origin");
        // While the origin runs: from inside it, to the later span's begin.
        assert_eq!((flows[0].0, flows[1].0, flows[0].1), ("out", "in", flows[1].1), "{front:?}");
        assert!(origin.1 <= flows[0].4 && flows[0].4 <= origin.2, "{front:?}");
        let later = slice(&seen, "later");
        assert_eq!((flows[1].4, flows[1].5), (later.1, true), "{front:?}");
        // After it ran: from inside its last piece, into the span running now.
        assert!(origin.1 <= flows[2].4 && flows[2].4 < origin.2, "{front:?}: {flows:?} {origin:?}");
        let running = slice(&seen, "running");
        assert!(!flows[3].5 && running.1 <= flows[3].4 && flows[3].4 <= running.2, "{front:?}");
    }
}

#[test]
fn a_span_entered_elsewhere_while_its_first_piece_runs_keeps_its_fields_in_every_piece() {
    for front in FRONTS {
        let (s, seen) = session_on(front, "overlap", "trace");
        s.in_scope(|| {
            let shared = info_span!("shared", n = 3, later = tracing::field::Empty);
            let first = shared.enter();
            shared.record("later", 5);
            let other = shared.clone();
            trace_core::spawn("other", move || other.in_scope(|| ())).unwrap().join().unwrap();
            drop(first);
            // Exited, not closed: recorded into, then entered again.
            shared.record("later", 6);
            shared.in_scope(|| ());
        });
        s.finish();
        let seen = seen.lock();
        let pieces: Vec<&str> =
            seen.slices.iter().filter(|s| s.1 == "shared").map(|s| s.4.as_str()).collect();
        assert_eq!(pieces, ["n=3 later=5", "n=3 later=5", "n=3 later=6"], "{front:?}");
        let asyncs: Vec<(&str, &str)> = seen.asyncs.iter().map(|a| (a.0.as_str(), a.3.as_str())).collect();
        assert_eq!(asyncs, [("shared", "n=3 later=6")], "{front:?}");
        let other = thread_of(&seen, "other");
        assert_eq!(seen.slices.iter().filter(|s| s.1 == "shared" && s.0 == other).count(), 1, "{front:?}");
    }
}

#[test]
fn a_span_closed_as_it_exits_never_runs_in_pieces_and_keeps_a_value_recorded_while_open() {
    for front in FRONTS {
        let (s, seen) = session_on(front, "once", "trace");
        s.in_scope(|| {
            for i in 0..3u64 {
                let span = info_span!("each", i, late = tracing::field::Empty);
                span.in_scope(|| span.record("late", i * 10));
            }
        });
        s.finish();
        let seen = seen.lock();
        let fields: Vec<&str> = seen.slices.iter().filter(|s| s.1 == "each").map(|s| s.4.as_str()).collect();
        assert_eq!(fields, ["i=0u late=0u", "i=1u late=10u", "i=2u late=20u"], "{front:?}");
        let recorded: Vec<&str> = seen.ends.iter().filter(|e| e.1 == "each").map(|e| e.2.as_str()).collect();
        assert_eq!(recorded, ["late=0u", "late=10u", "late=20u"], "{front:?}");
        assert!(seen.asyncs.is_empty(), "{front:?}: {:?}", seen.asyncs);
    }
}
