//! Table-driven cases. Each log is drawn inline: the first line verbatim, and
//! in every later line runs of spaces stand for the tabs between the fields
//! (`start end mtime output hash`). `busy(..)` pads a log with 101 lines for
//! an output `f` right after its header, so that Ninja would recompact it.

use std::borrow::Cow;

use super::{Action, Delta, Snapshot};

// The differential tests of `tests/`, run here again with the hashes that
// collide (see `hash::weakened`).
#[path = "../tests/it/differential.rs"]
mod differential;
#[path = "../tests/it/lent.rs"]
mod lent;
#[allow(dead_code)]
#[path = "../tests/it/model.rs"]
mod model;
#[path = "../tests/it/reference.rs"]
mod reference;

/// Turns a drawn log into bytes (see the module comment).
fn log(text: &str) -> Vec<u8> {
    let mut out = String::new();
    for (i, line) in text.lines().map(str::trim).filter(|l| !l.is_empty()).enumerate() {
        if i == 0 {
            out.push_str(line);
        } else {
            out.push_str(&line.split_whitespace().collect::<Vec<_>>().join("\t"));
        }
        out.push('\n');
    }
    out.into_bytes()
}

/// The padding line `busy` repeats.
const F: &str = "0 1 99 f 1";

/// A drawn log with 101 copies of `F` after its header: over Ninja's
/// recompaction threshold as long as it draws fewer than 33 outputs.
fn busy(text: &str) -> Vec<u8> {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let header = lines.next().unwrap_or_default();
    let mut drawn = vec![header.to_owned()];
    drawn.extend(std::iter::repeat_n(F.to_owned(), 101));
    drawn.extend(lines.map(str::to_owned));
    log(&drawn.join("\n"))
}

enum Expect<'a> {
    /// Actions drawn as `start-end hash out,out` (with ` @epoch` when not 0),
    /// and a fragment that one of the notes must hold ("" for any).
    Actions(&'a [&'a str], &'a str),
    /// A fragment the reason must hold.
    Unavailable(&'a str),
}
use Expect::{Actions, Unavailable};

fn draw(a: &Action) -> String {
    let epoch = if a.epoch == 0 { String::new() } else { format!(" @{}", a.epoch) };
    format!("{}-{} {} {}{epoch}", a.start_ms, a.end_ms, a.hash, a.outputs.join(","))
}

fn check(before: Option<Vec<u8>>, after: Option<Vec<u8>>, expect: Expect<'_>) {
    let snapshot = Snapshot::from_bytes("out/.ninja_log", before);
    let delta = snapshot.delta_from_bytes(after.as_deref());
    lent::agrees(&snapshot, after.as_deref(), &delta).unwrap_or_else(|e| panic!("{e}"));
    match (&delta, expect) {
        (Delta::Available { actions, notes }, Actions(want, note)) => {
            let got: Vec<String> = actions.iter().map(draw).collect();
            assert_eq!(got, want, "notes: {notes:#?}");
            assert!(
                notes.iter().any(|n| n.contains(note)) || note.is_empty(),
                "no note holds {note:?}: {notes:#?}"
            );
            for n in notes {
                assert!(n.starts_with("out/.ninja_log:"), "note without its path: {n}");
            }
        }
        (Delta::Unavailable { reason }, Unavailable(fragment)) => {
            assert!(reason.contains(fragment), "{reason:?} lacks {fragment:?}");
            assert!(reason.starts_with("out/.ninja_log"), "reason without its path: {reason}");
        }
        (delta, _) => panic!("unexpected: {delta:#?}"),
    }
}

macro_rules! cases {
    ($($name:ident: $before:expr, $after:expr => $expect:expr;)*) => {
        $(#[test] fn $name() { check($before, $after, $expect) })*
    };
}

cases! {
    a_first_build_reads_every_line_after_the_header:
        None,
        Some(log("# ninja log v5
            0  5  100  a.o  aa
            5  9  101  b.o  bb")) => Actions(&["0-5 aa a.o", "5-9 bb b.o"], "no log before the run");

    an_empty_old_log_is_read_like_a_first_build:
        Some(Vec::new()),
        Some(log("# ninja log v7
            0  5  100  a.o  aa")) => Actions(&["0-5 aa a.o"], "");

    a_plain_append_reads_only_the_new_lines:
        Some(log("# ninja log v5
            0  5  100  a.o  aa")),
        Some(log("# ninja log v5
            0  5  100  a.o  aa
            0  4  200  a.o  aa
            4  6  201  b.o  bb")) => Actions(&["0-4 aa a.o", "4-6 bb b.o"], "");

    the_outputs_of_one_command_are_one_action:
        None,
        Some(log("# ninja log v6
            0  7  100  b.h  beef
            0  7  100  b.c  beef
            1  7  100  c.o  cafe")) => Actions(&["0-7 beef b.h,b.c", "1-7 cafe c.o"], "");

    a_no_op_build_is_available_with_no_actions:
        Some(log("# ninja log v5
            0  5  100  a.o  aa")),
        Some(log("# ninja log v5
            0  5  100  a.o  aa")) => Actions(&[], "");

    no_log_before_or_after_is_available_with_no_actions:
        None, None => Actions(&[], "recorded no successful action");

    a_log_deleted_during_the_run_is_unavailable:
        Some(log("# ninja log v7
            0  5  100  a.o  aa")),
        None => Unavailable("missing after the run");

    a_log_emptied_during_the_run_is_unavailable:
        Some(log("# ninja log v7
            0  5  100  a.o  aa")),
        Some(Vec::new()) => Unavailable("empty after the run");

    a_recompacted_log_with_a_dead_output_is_read:
        Some(busy("# ninja log v5
            0  5  100  a.o  aa
            0  6  101  dead.o  dd
            0  4  102  a.o  aa")),
        Some(log("# ninja log v5
            0  4  102  a.o  aa
            0  1  99   f    1
            0  3  200  a.o  aa")) => Actions(&["0-3 aa a.o"], "1 dropped as no longer built");

    a_recompacted_log_with_the_lines_of_one_action_split_apart_is_read:
        Some(busy("# ninja log v5
            0  7  100  m1  beef
            0  7  100  m2  beef
            7  9  101  x   cafe")),
        Some(log("# ninja log v5
            0  7  100  m2  beef
            7  9  101  x   cafe
            0  1  99   f   1
            0  7  100  m1  beef
            0  6  200  m1  beef
            0  6  200  m2  beef")) => Actions(&["0-6 beef m1,m2"], "recompacted");

    a_recompaction_by_a_no_op_build_is_available_with_no_actions:
        Some(busy("# ninja log v7
            0  5  100  a.o  aa")),
        Some(log("# ninja log v7
            0  1  99   f    1
            0  5  100  a.o  aa")) => Actions(&[], "recompacted");

    a_recompaction_of_a_v7_log_by_ninja_1_10_notes_the_new_header:
        Some(busy("# ninja log v7
            0  5  100  a.o  aa")),
        Some(log("# ninja log v5
            0  5  100  a.o  aa
            0  1  99   f    1
            0  2  300  a.o  d7")) => Actions(&["0-2 d7 a.o"], "header changed");

    an_append_under_a_foreign_header_is_read:
        Some(log("# ninja log v7
            0  5  100  a.o  aa")),
        Some(log("# ninja log v7
            0  5  100  a.o  aa
            0  2  300  a.o  d7")) => Actions(&["0-2 d7 a.o"], "");

    a_new_log_from_ninja_1_13_after_a_v5_log_is_all_this_runs:
        Some(log("# ninja log v5
            0  5  100  a.o  aa")),
        Some(log("# ninja log v7
            0  3  300  a.o  b7
            3  4  301  b.o  b8")) => Actions(&["0-3 b7 a.o", "3-4 b8 b.o"], "deletes when it loads it");

    a_new_log_after_one_without_a_header_is_all_this_runs:
        Some(log("garbage
            0  5  100  a.o  aa")),
        Some(log("# ninja log v5
            0  3  300  a.o  aa")) => Actions(&["0-3 aa a.o"], "every Ninja deletes");

    a_restarted_log_with_the_same_header_is_unavailable:
        Some(log("# ninja log v5
            0  5  100  a.o  aa
            5  6  101  b.o  bb")),
        Some(log("# ninja log v5
            0  3  300  c.o  cc")) => Unavailable("out/.ninja_log:2: `0\\t3\\t300\\tc.o\\tcc`: the log was replaced");

    a_log_rewritten_with_new_modification_times_is_unavailable:
        Some(log("# ninja log v7
            0  5  100  a.o  aa
            5  6  101  b.o  bb")),
        Some(log("# ninja log v7
            0  5  150  a.o  aa
            5  6  151  b.o  bb
            0  2  300  c.o  cc")) => Unavailable("ninja -t restat");

    a_rewrite_of_a_log_too_small_to_recompact_is_unavailable:
        Some(log("# ninja log v5
            0  5  100  a.o  aa
            5  6  101  b.o  bb
            0  1  102  a.o  aa")),
        Some(log("# ninja log v5
            5  6  101  b.o  bb
            0  1  102  a.o  aa
            0  2  300  c.o  cc")) => Unavailable("too few for Ninja to recompact");

    a_recompacted_part_holding_a_line_of_this_run_is_unavailable:
        Some(busy("# ninja log v5
            0  5  100  a.o  aa
            5  6  101  b.o  bb")),
        Some(log("# ninja log v5
            0  1  99   f    1
            0  4  300  a.o  aa
            5  6  101  b.o  bb
            0  2  301  c.o  cc")) => Unavailable("out/.ninja_log:4: `5\\t6\\t101\\tb.o\\tbb`: this is line 104");

    an_old_output_missing_from_the_recompacted_part_and_logged_again_is_unavailable:
        Some(busy("# ninja log v5
            0  5  100  a.o  aa
            5  6  101  b.o  bb")),
        Some(log("# ninja log v5
            0  1  99   f    1
            0  5  100  a.o  aa
            5  6  150  b.o  bb")) => Unavailable("recompacted part of the log does not keep");

    times_going_back_start_a_new_epoch:
        None,
        Some(log("# ninja log v5
            0    30   100  gen.h        aa
            0    206  101  build.ninja  7b
            0    26   102  gen.h        ab
            26   53   103  b.o          bb")) => Actions(&["0-30 aa gen.h", "0-206 7b build.ninja", "0-26 ab gen.h @1", "26-53 bb b.o @1"], "times go back");

    the_same_command_in_two_epochs_is_two_actions:
        None,
        Some(log("# ninja log v5
            0  5  100  a.o  aa
            0  9  101  build.ninja  7b
            0  5  102  a.o  aa")) => Actions(&["0-5 aa a.o", "0-9 7b build.ninja", "0-5 aa a.o @1"], "epoch 1");

    an_output_logged_twice_in_one_epoch_is_unavailable:
        None,
        Some(log("# ninja log v5
            0  5  100  a.o  aa
            5  9  101  a.o  aa")) => Unavailable("out/.ninja_log:3: `5\\t9\\t101\\ta.o\\taa`: output `a.o` was already logged on line 2");

    a_log_cut_inside_a_line_is_unavailable:
        Some(log("# ninja log v5
            0  5  100  a.o  aa")),
        Some(b"# ninja log v5\n0\t5\t100\ta.o\taa\n0\t4\t2".to_vec()) => Unavailable("out/.ninja_log:3: `0\\t4\\t2`: the last line has no newline");

    a_log_cut_to_part_of_the_old_one_is_unavailable:
        Some(log("# ninja log v5
            0  5  100  a.o  aa
            5  6  101  b.o  bb")),
        Some(log("# ninja log v5
            0  5  100  a.o  aa")) => Unavailable("cut short");

    an_unknown_version_is_unavailable:
        None,
        Some(log("# ninja log v8
            0  5  100  a.o  aa")) => Unavailable("out/.ninja_log:1: `# ninja log v8`: log version 8 is not one this crate reads");

    a_log_without_a_header_is_unavailable:
        None,
        Some(b"0\t5\t100\ta.o\taa\n".to_vec()) => Unavailable("out/.ninja_log:1: `0\\t5\\t100\\ta.o\\taa`: expected a header");

    a_garbage_line_is_unavailable_naming_its_line:
        Some(log("# ninja log v5
            0  5  100  a.o  aa")),
        Some(log("# ninja log v5
            0  5  100  a.o  aa
            0  4  200  a.o  aa
            hello world")) => Unavailable("out/.ninja_log:4: `hello\\tworld`: expected 5 tab-separated fields, found 2");

    a_line_with_leading_zeros_is_unavailable:
        None,
        Some(log("# ninja log v5
            00  5  100  a.o  aa")) => Unavailable("the start time is not a decimal number");

    a_hash_with_leading_zeros_is_unavailable:
        None,
        Some(log("# ninja log v5
            0  5  100  a.o  0aa")) => Unavailable("the hash is not lowercase hex");

    an_action_ending_before_it_starts_is_unavailable:
        None,
        Some(log("# ninja log v5
            9  5  100  a.o  aa")) => Unavailable("ends before it starts");

    an_output_that_is_not_utf8_is_read_lossily_with_a_note:
        None,
        Some(b"# ninja log v5\n0\t5\t100\tcaf\xe9.o\taa\n".to_vec()) => Actions(&["0-5 aa caf\u{fffd}.o"], "not UTF-8");

    an_output_with_spaces_is_read:
        None,
        Some(b"# ninja log v5\n0\t5\t100\tmy file.o\taa\n".to_vec()) => Actions(&["0-5 aa my file.o"], "");

    an_old_log_ending_inside_a_line_is_read_with_a_note:
        Some(b"# ninja log v5\n0\t5\t100\ta.o\taa\n3\t4".to_vec()),
        Some(b"# ninja log v5\n0\t5\t100\ta.o\taa\n3\t40\t5\t200\tb.o\tbb\n".to_vec()) => Actions(&["0-5 bb b.o"], "ended inside a line");

    a_recompaction_of_a_log_with_a_line_ninja_would_rewrite_is_unavailable:
        Some(busy("# ninja log v5
            0  5  0100  a.o  aa")),
        Some(log("# ninja log v5
            0  1  99   f    1
            0  3  200  b.o  bb")) => Unavailable(":103: `0\\t5\\t0100\\ta.o\\taa`: the modification time is not a decimal number");
}

#[test]
fn a_failed_build_notes_that_the_failed_action_is_absent() {
    let snapshot = Snapshot::from_bytes("out/.ninja_log", None);
    let after = log("# ninja log v5
        0  5  100  a.o  aa");
    let delta = snapshot.delta_from_bytes(Some(&after)).with_exit_status(false);
    assert_eq!(delta.actions().map(<[Action]>::len), Some(1));
    assert!(delta.notes().iter().any(|n| n.contains("the action that failed")), "{delta:#?}");
    let ok = snapshot.delta_from_bytes(Some(&after));
    assert_eq!(ok.clone().with_exit_status(true), ok);
}

#[test]
fn an_unavailable_delta_is_unchanged_by_the_exit_status() {
    let snapshot = Snapshot::from_bytes("out/.ninja_log", None);
    let delta = snapshot.delta_from_bytes(Some(b"junk\n"));
    assert!(!delta.is_available());
    assert_eq!(delta.clone().with_exit_status(false), delta);
}

#[test]
fn a_snapshot_of_a_missing_file_is_a_snapshot_of_no_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(".ninja_log");
    let snapshot = Snapshot::take(&path).expect("a missing log is not an error");
    assert_eq!(snapshot.bytes(), None);
    std::fs::write(&path, log("# ninja log v5\n0 5 100 a.o aa")).expect("write");
    let delta = snapshot.delta(&path);
    assert_eq!(delta.actions().map(<[Action]>::len), Some(1), "{delta:#?}");
}

#[test]
fn an_unreadable_log_after_the_run_is_unavailable_naming_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A directory cannot be read as a file.
    let snapshot = Snapshot::from_bytes(dir.path().join(".ninja_log"), None);
    let delta = snapshot.delta(dir.path());
    let reason = delta.reason().expect("unavailable");
    assert!(reason.contains(&dir.path().display().to_string()), "{reason}");
}

/// The lent actions of a drawn log, drawn as `draw` draws owned ones, and
/// whether each output is a slice of the log (rather than a copy).
fn lent(before: Option<Vec<u8>>, after: &[u8]) -> (Vec<String>, Vec<bool>) {
    let snapshot = Snapshot::from_bytes("out/.ninja_log", before);
    let delta = snapshot.delta_ref(Some(after));
    let actions = delta.actions().unwrap_or_else(|| panic!("{delta:#?}"));
    let drawn = actions.iter().map(|a| draw(&a.to_action())).collect();
    let borrowed = actions.iter().flat_map(|a| a.outputs).map(|o| matches!(o, Cow::Borrowed(_))).collect();
    (drawn, borrowed)
}

#[test]
fn lent_outputs_of_one_action_on_lines_apart_are_listed_together_in_line_order() {
    // `a.o` and `c.o` are one action: same start, end and hash.
    let after = log("# ninja log v5
        0  5  100  a.o  aa
        1  5  100  b.o  bb
        0  5  100  c.o  aa
        1  5  100  d.o  bb
        2  5  100  e.o  ee
        0  5  100  f.o  aa
        6  9  100  g.o  99
        6  9  100  h.o  99");
    let (drawn, borrowed) = lent(None, &after);
    assert_eq!(drawn, ["0-5 aa a.o,c.o,f.o", "1-5 bb b.o,d.o", "2-5 ee e.o", "6-9 99 g.o,h.o"]);
    assert!(borrowed.iter().all(|&b| b), "{borrowed:?}");
}

#[test]
fn a_lent_output_that_is_not_utf8_is_a_lossy_copy_and_the_rest_are_slices() {
    let after =
        [&log("# ninja log v5\n0  5  100  a.o  aa")[..], b"0\t5\t100\tb\xff.o\taa\n1\t6\t100\tc.o\tcc\n"]
            .concat();
    let (drawn, borrowed) = lent(None, &after);
    assert_eq!(drawn, ["0-5 aa a.o,b\u{fffd}.o", "1-6 cc c.o"]);
    assert_eq!(borrowed, [true, false, true]);
    let delta = Snapshot::from_bytes("out/.ninja_log", None).delta_ref(Some(&after));
    assert!(delta.notes().iter().any(|n| n.contains("not UTF-8")), "{delta:#?}");
}

#[test]
fn a_lent_delta_borrows_the_log_after_the_run_and_not_the_snapshot() {
    let after = log("# ninja log v5
        0  5  100  a.o  aa");
    let delta = {
        let snapshot = Snapshot::from_bytes("out/.ninja_log", Some(log("# ninja log v5")));
        snapshot.delta_ref(Some(&after)).with_exit_status(false)
    };
    let a = delta.actions().and_then(|a| a.get(0)).expect("one action");
    assert_eq!((a.start_ms, a.end_ms, a.hash, a.outputs), (0, 5, "aa", &[Cow::Borrowed("a.o")][..]));
    assert!(delta.notes().iter().any(|n| n.contains("the action that failed")), "{delta:#?}");
}
