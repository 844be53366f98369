//! The checker must be able to fail: small traces written byte by byte, one
//! valid and the rest each with one defect, and the verdict on each.

use std::path::PathBuf;

use trace_proto_wire::{put_bytes, put_uint};

use crate::support::{assert_checker_accepts, assert_checker_refuses, assert_protoc_decodes};

/// A protobuf message built field by field.
#[derive(Clone, Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn int(mut self, field: u32, v: u64) -> Msg {
        put_uint(&mut self.0, field, v);
        self
    }
    fn bytes(mut self, field: u32, b: &[u8]) -> Msg {
        put_bytes(&mut self.0, field, b);
        self
    }
    fn msg(self, field: u32, m: Msg) -> Msg {
        self.bytes(field, &m.0)
    }
    fn text(self, field: u32, s: &str) -> Msg {
        self.bytes(field, s.as_bytes())
    }
}

/// The defects, one at a time.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
struct Defects {
    packed_categories: bool,
    no_clear: bool,
    bad_name_iid: bool,
    track_twice: bool,
    no_end: bool,
    end_without_begin: bool,
    unknown_field: bool,
    no_needs_flag: bool,
    no_snapshot: bool,
    counter_on_thread: bool,
    counter_without_unit: bool,
}

const SEQ: u64 = 5;
const TRACK: u64 = 100;

/// A thread's sequence, its track, and one slice `[1010, 1030]` named `a` in
/// category `c`; field numbers are those of `perfetto_trace.proto`.
fn trace(d: Defects) -> Vec<u8> {
    let mut clocks = Msg::default().msg(1, Msg::default().int(1, 3).int(2, 1000));
    if !d.no_snapshot {
        clocks = clocks.msg(1, Msg::default().int(1, 64).int(2, 1000).int(3, 1).int(4, 1));
    }
    let defaults = Msg::default().int(58, 64).msg(11, Msg::default().int(11, TRACK));
    let first =
        Msg::default().int(10, SEQ).int(13, if d.no_clear { 0 } else { 1 }).msg(59, defaults).msg(6, clocks);
    let thread = Msg::default().int(1, 1).int(2, 2).text(5, "main");
    let descriptor = Msg::default().int(10, SEQ).msg(60, Msg::default().int(1, TRACK).msg(4, thread));
    let interned = Msg::default()
        .msg(1, Msg::default().int(1, 1).text(2, "c"))
        .msg(2, Msg::default().int(1, 1).text(2, "a"))
        .msg(2, Msg::default().int(1, 2).text(2, "b"));
    let mut begin = Msg::default().int(9, 1).int(10, if d.bad_name_iid { 9 } else { 1 });
    begin = if d.packed_categories { begin.bytes(3, &[1, 1]) } else { begin.int(3, 1) };
    if d.unknown_field {
        begin = begin.int(2047, 1);
    }
    let flags = if d.no_needs_flag { 0 } else { 2 };
    let begin = Msg::default().int(10, SEQ).int(8, 10).int(13, flags).msg(12, interned).msg(11, begin);
    let end = Msg::default().int(10, SEQ).int(8, 20).int(13, 2).msg(11, Msg::default().int(9, 2));
    let other = Msg::default().int(10, SEQ).int(8, 5).int(13, 2).msg(11, Msg::default().int(9, 2));

    let mut packets = vec![first, descriptor.clone()];
    if d.track_twice {
        packets.push(descriptor);
    }
    if d.end_without_begin {
        packets.push(other);
    }
    packets.push(begin);
    if !d.no_end {
        packets.push(end);
    }
    // A counter value (`TrackEvent.counter_value`, field 30) on the thread's
    // track, or on a counter track whose CounterDescriptor (field 8) gives no unit.
    let counter = |track: Option<u64>| {
        let mut e = Msg::default().int(9, 4).int(30, 3);
        if let Some(track) = track {
            e = e.int(11, track);
        }
        Msg::default().int(10, SEQ).int(8, 25).int(13, 2).msg(11, e)
    };
    if d.counter_on_thread {
        packets.push(counter(None));
    }
    if d.counter_without_unit {
        let track = Msg::default().int(1, TRACK + 1).int(5, TRACK).text(2, "n").msg(8, Msg::default());
        packets.push(Msg::default().int(10, SEQ).msg(60, track));
        packets.push(counter(Some(TRACK + 1)));
    }
    packets.into_iter().fold(Msg::default(), |t, p| t.msg(1, p)).0
}

fn write(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(format!("{name}.pftrace"));
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn the_hand_built_baseline_passes_so_each_refusal_below_is_its_defect() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "baseline", &trace(Defects::default()));
    assert_checker_accepts(&[], &[&path]);
    assert_protoc_decodes(&path);
}

#[test]
fn packed_category_iids_are_refused_though_protoc_decodes_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "packed", &trace(Defects { packed_categories: true, ..Defects::default() }));
    // The pitfall: protoc (and the Python classes) read packed and unpacked alike.
    assert_protoc_decodes(&path);
    assert_checker_refuses(&path, "TrackEvent.category_iids (field 3) is packed");
}

#[test]
fn each_defect_is_refused_with_a_message_that_names_it() {
    let d = Defects::default();
    let cases = [
        ("no-clear", Defects { no_clear: true, ..d }, "before any packet that clears"),
        ("bad-iid", Defects { bad_name_iid: true, ..d }, "event name iid 9 is not interned"),
        ("track-twice", Defects { track_twice: true, ..d }, "declares track 100 again"),
        ("no-end", Defects { no_end: true, ..d }, "is never ended"),
        ("end-first", Defects { end_without_begin: true, ..d }, "where none is open"),
        ("unknown", Defects { unknown_field: true, ..d }, "unknown field in Trace.packet[2].track_event"),
        ("no-flag", Defects { no_needs_flag: true, ..d }, "without SEQ_NEEDS_INCREMENTAL_STATE"),
        ("no-snapshot", Defects { no_snapshot: true, ..d }, "which no snapshot on this sequence defines"),
        ("counter-on-thread", Defects { counter_on_thread: true, ..d }, "which is not a counter track"),
        ("counter-without-unit", Defects { counter_without_unit: true, ..d }, "whose unit is not given"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, defects, expected) in cases {
        let path = write(&dir, name, &trace(defects));
        assert_checker_refuses(&path, expected);
    }
}

#[test]
fn bytes_that_are_not_a_trace_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let truncated = trace(Defects::default());
    let path = write(&dir, "truncated", &truncated[..truncated.len() - 3]);
    assert_checker_refuses(&path, "runs past the end");
    let empty = write(&dir, "empty", &[]);
    assert_checker_refuses(&empty, "holds no packet");
}

#[test]
fn a_file_concatenated_with_itself_is_refused_because_its_ids_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "once", &trace(Defects::default()));
    let out = crate::support::checker(&["--concat"], &[&path, &path]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("clears the sequence a second time"), "{stderr}");
    assert!(stderr.contains("declares track 100 again"), "{stderr}");
}

/// `packets` (a run of `Trace.packet` entries) as one packet holding them
/// zlib-compressed, as the sink writes a full chunk.
fn compressed(packets: &[u8]) -> Msg {
    use std::io::Write as _;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(packets).unwrap();
    Msg::default().bytes(50, &z.finish().unwrap())
}

#[test]
fn packets_inside_a_compressed_packet_are_checked_as_if_they_stood_in_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = trace(Defects::default());
    let path = write(&dir, "compressed", &Msg::default().msg(1, compressed(&baseline)).0);
    let inflated = dir.path().join("inflated.pftrace");
    let stdout =
        assert_checker_accepts(&["--dump-slices", "--inflate", inflated.to_str().unwrap()], &[&path]);
    assert!(stdout.contains(r#""name": "a""#), "the slice inside is read: {stdout}");
    assert_eq!(std::fs::read(&inflated).unwrap(), baseline, "--inflate writes the packets held");
    assert_protoc_decodes(&path);

    let packed = trace(Defects { packed_categories: true, ..Defects::default() });
    let path = write(&dir, "compressed-packed", &Msg::default().msg(1, compressed(&packed)).0);
    assert_checker_refuses(&path, "TrackEvent.category_iids (field 3) is packed");
}

#[test]
fn a_compressed_packet_that_is_not_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = trace(Defects::default());
    let cases = [
        ("garbage", Msg::default().bytes(50, b"not zlib at all"), "do not inflate"),
        ("with-sequence", compressed(&baseline).int(10, SEQ), "along with field(s) [10]"),
        (
            "nested",
            compressed(&Msg::default().msg(1, compressed(&baseline)).0),
            "a compressed packet inside a compressed packet",
        ),
        ("not-packets", compressed(&Msg::default().int(2, 7).0), "not a Trace.packet entry"),
    ];
    for (name, packet, expected) in cases {
        let path = write(&dir, name, &Msg::default().msg(1, packet).0);
        assert_checker_refuses(&path, expected);
    }
}
