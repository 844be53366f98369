//! A corpus of hostile logs: huge lines, NUL bytes, paths that are not UTF-8,
//! negative and overflowing numbers. None may panic; none may be read as
//! anything but what it holds.

use ninja_log::{Delta, Snapshot};

const HEADER: &[u8] = b"# ninja log v5\n";

fn after(lines: &[&[u8]]) -> Vec<u8> {
    let mut v = HEADER.to_vec();
    for l in lines {
        v.extend_from_slice(l);
        v.push(b'\n');
    }
    v
}

/// The delta of a first build whose log is `header + lines`.
fn first_build(lines: &[&[u8]]) -> Delta {
    let (snapshot, after) = (Snapshot::from_bytes("build/.ninja_log", None), after(lines));
    let delta = snapshot.delta_from_bytes(Some(&after));
    crate::lent::agrees(&snapshot, Some(&after), &delta).unwrap_or_else(|e| panic!("{e}"));
    delta
}

fn unavailable_at_line(delta: &Delta, line: usize) -> String {
    let reason = delta.reason().unwrap_or_else(|| panic!("expected unavailable, got {delta:?}"));
    assert!(reason.starts_with(&format!("build/.ninja_log:{line}:")), "{reason}");
    reason.to_string()
}

#[test]
fn negative_times_are_unavailable_naming_the_line() {
    for line in [&b"-1\t5\t0\ta.o\tab"[..], b"0\t-5\t0\ta.o\tab"] {
        unavailable_at_line(&first_build(&[b"0\t1\t0\tok.o\tab", line]), 3);
    }
}

#[test]
fn a_negative_modification_time_is_read_as_ninja_reads_it() {
    // Ninja keeps mtimes as signed 64-bit numbers (a file dated before 1970),
    // and the delta does not use them.
    let delta = first_build(&[b"0\t5\t-9\ta.o\tab"]);
    assert_eq!(delta.actions().map(|a| a.len()), Some(1), "{delta:?}");
}

#[test]
fn numbers_past_u64_are_unavailable_naming_the_line() {
    let huge = b"0\t184467440737095516160\t0\ta.o\tab";
    let reason = unavailable_at_line(&first_build(&[huge]), 2);
    assert!(reason.contains("184467440737095516160"), "the reason quotes the line: {reason}");
    let hash = b"0\t5\t0\ta.o\t1ffffffffffffffffff";
    unavailable_at_line(&first_build(&[hash]), 2);
}

#[test]
fn a_huge_output_path_is_read_whole() {
    let path = "d/".repeat(300_000) + "x.o";
    let line = format!("0\t5\t0\t{path}\tab");
    let delta = first_build(&[line.as_bytes()]);
    let actions = delta.actions().expect("a long but well-formed line is readable");
    assert_eq!(actions.len(), 1);
    assert_eq!(actions[0].outputs, [path]);
}

#[test]
fn a_huge_garbage_line_is_unavailable_and_its_quote_is_bounded() {
    let garbage = vec![b'z'; 2_000_000];
    let reason = unavailable_at_line(&first_build(&[&garbage]), 2);
    assert!(reason.len() < 10_000, "the reason quotes a bounded part of the line ({} bytes)", reason.len());
}

#[test]
fn nul_bytes_never_panic_and_never_invent_an_action() {
    let cases: [&[u8]; 4] = [b"0\t5\t0\ta\0.o\tab", b"\0\0\0\0", b"0\t5\t0\t\0\tab", b"0\x005\t0\ta.o\tab"];
    for case in cases {
        match first_build(&[case]) {
            Delta::Available { actions, .. } => {
                assert_eq!(actions.len(), 1, "{case:?}");
                assert_eq!(actions[0].start_ms, 0);
                assert_eq!(actions[0].end_ms, 5);
            }
            Delta::Unavailable { reason, .. } => {
                assert!(reason.starts_with("build/.ninja_log:2:"), "{reason}")
            }
        }
    }
}

#[test]
fn an_output_path_that_is_not_utf8_is_read_lossily_with_a_note() {
    let delta = first_build(&[b"0\t5\t0\tobj/\xff\xfe.o\tab"]);
    let actions = delta.actions().expect("the path's bytes do not make the line unreadable");
    assert_eq!(actions[0].outputs, ["obj/\u{fffd}\u{fffd}.o"]);
    assert!(delta.notes().iter().any(|n| n.contains("UTF-8")), "{:?}", delta.notes());
}

#[test]
fn a_log_of_only_separators_or_only_a_header_never_panics() {
    for bytes in [
        &b"\t\t\t\t\n"[..],
        b"# ninja log v5",
        b"# ninja log v5\n\n\n",
        b"\n",
        b"",
        b"# ninja log v99999999999999999999\n",
    ] {
        let d = Snapshot::from_bytes("build/.ninja_log", None).delta_from_bytes(Some(bytes));
        if let Some(actions) = d.actions() {
            assert!(actions.is_empty(), "{bytes:?} holds no action: {d:?}");
        }
        let d = Snapshot::from_bytes("build/.ninja_log", Some(bytes.to_vec()))
            .delta_from_bytes(Some(&after(&[])));
        if let Some(actions) = d.actions() {
            assert!(actions.is_empty(), "{d:?}");
        }
    }
}
