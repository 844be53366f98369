//! A span that ran in pieces gets a track of its own under the process, and a
//! spawned helper a flow from the span that started it: written through the
//! real engine and checked with the official schema.

use serde_json::{json, Value as Json};
use tracing::info_span;

use crate::support::{assert_protoc_decodes, capture, dump, Seen};

fn range(s: &Json) -> (u64, u64) {
    (s["begin_ns"].as_u64().unwrap(), s["end_ns"].as_u64().unwrap())
}

#[test]
fn a_span_moved_between_threads_gets_its_own_track_and_a_helper_gets_a_flow() {
    let dir = tempfile::tempdir().unwrap();
    let (path, seen, ()) = capture(dir.path(), "pieces", || {
        let moved = info_span!("moved", n = 1u64);
        moved.in_scope(|| {
            let helper = trace_core::spawn("helper", || info_span!("helper_work").in_scope(|| ()));
            helper.unwrap().join().unwrap();
        });
        trace_core::spawn("other", move || moved.in_scope(|| ())).unwrap().join().unwrap();
    });
    assert_protoc_decodes(&path);
    let dumped = dump(&[], &[&path]);

    // The track: under the process (the dump gives its pid), one slice from
    // the first piece's begin to the last piece's end or later, with the
    // span's fields; the pieces on the two threads' tracks.
    let tracks: Vec<&Json> = dumped.iter().filter(|s| s["async"].is_u64()).collect();
    assert_eq!(tracks.len(), 1, "{tracks:#?}");
    let track = tracks[0];
    assert_eq!(
        (&track["name"], &track["track"], &track["args"]),
        (&json!("moved"), &json!("moved"), &json!({"n": 1}))
    );
    assert_eq!(track["pid"], u64::from(std::process::id()));
    let pieces: Vec<&Json> = dumped.iter().filter(|s| s["name"] == "moved" && s["tid"].is_u64()).collect();
    assert_eq!(pieces.len(), 2, "{pieces:#?}");
    assert_ne!(pieces[0]["tid"], pieces[1]["tid"], "one piece on each thread");
    let life = range(track);
    let begins: Vec<u64> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Begin { ts, name, .. } if name == "moved" => Some(*ts),
            _ => None,
        })
        .collect();
    assert_eq!(life.0, *begins.iter().min().unwrap(), "from the first piece's begin, as the engine sent it");
    for p in &pieces {
        let (b, e) = range(p);
        assert!(life.0 <= b && e <= life.1, "piece {p} outside {track}");
    }

    // The flow: an instant inside the first piece, on its thread, whose id
    // the helper's first slice ends.
    let spawn: Vec<&Json> =
        dumped.iter().filter(|s| s["kind"] == "instant" && s["name"] == "spawn").collect();
    assert_eq!(spawn.len(), 1, "{spawn:#?}");
    let first =
        pieces.iter().find(|p| p["tid"] == spawn[0]["tid"]).expect("the instant is on the piece's thread");
    let (at, (b, e)) = (spawn[0]["begin_ns"].as_u64().unwrap(), range(first));
    assert!(b <= at && at <= e, "the flow leaves from inside the span that started the helper");
    let helper = dumped.iter().find(|s| s["name"] == "helper_work").unwrap();
    assert_eq!(helper["thread"], "helper");
    assert_eq!(helper["args"]["terminating_flow_ids"], spawn[0]["args"]["flow_ids"], "{helper}");
}
