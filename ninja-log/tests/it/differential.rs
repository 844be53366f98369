//! The reader against its reference (`reference.rs`, the reader before its
//! performance work): for every input, the same delta, notes and reasons
//! included. The inputs are the model's scenarios, the same damaged at random,
//! small logs drawn from pieces of lines, and the fuzzer's seeds. For each,
//! the lent delta (`Snapshot::delta_ref`) must agree too (`lent.rs`).
//!
//! The crate's unit tests run this file too (`src/tests.rs`), where the
//! reader's hashes collide on purpose, so that every path that tells items
//! with the same hash apart is taken.

use std::path::Path;

use ninja_log::{Delta, Snapshot};
use proptest::prelude::*;

use super::model::{scenario, Rng};
use super::{lent, reference};

fn same(before: Option<&[u8]>, after: Option<&[u8]>) -> Result<Delta, String> {
    let path = Path::new("build/.ninja_log");
    let snapshot = Snapshot::from_bytes(path, before.map(<[u8]>::to_vec));
    let got = snapshot.delta_from_bytes(after);
    let want = reference::delta(path, before, after);
    if got == want {
        lent::agrees(&snapshot, after, &got)?;
        Ok(got)
    } else {
        Err(format!(
            "the reader and its reference differ\ngot: {got:#?}\nwant: {want:#?}\nbefore: {:?}\nafter: {:?}",
            before.map(String::from_utf8_lossy),
            after.map(String::from_utf8_lossy),
        ))
    }
}

/// Damages a log the way a fuzzer would, but with the log's own pieces:
/// bytes changed, lines dropped, repeated, swapped or cut, separators moved.
fn damage(log: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut lines: Vec<Vec<u8>> = log.split_inclusive(|&c| c == b'\n').map(<[u8]>::to_vec).collect();
    for _ in 0..1 + rng.below(3) {
        if lines.is_empty() {
            break;
        }
        let i = rng.below(lines.len() as u64) as usize;
        match rng.below(9) {
            0 => {
                lines.remove(i);
            }
            1 => {
                let copy = lines[i].clone();
                lines.insert(rng.below(lines.len() as u64 + 1) as usize, copy);
            }
            2 => {
                let j = rng.below(lines.len() as u64) as usize;
                lines.swap(i, j);
            }
            3 => {
                let cut = rng.below(lines[i].len() as u64 + 1) as usize;
                lines[i].truncate(cut);
            }
            _ => {
                let line = &mut lines[i];
                if line.is_empty() {
                    continue;
                }
                let at = rng.below(line.len() as u64) as usize;
                let bytes = b"\t\n0019af-x\xff ";
                line[at] = bytes[rng.below(bytes.len() as u64) as usize];
            }
        }
    }
    lines.concat()
}

/// A small log from pieces that sit on every edge of the reader's checks.
fn drawn(rng: &mut Rng) -> Vec<u8> {
    const HEADERS: &[&str] =
        &["# ninja log v5", "# ninja log v6", "# ninja log v7", "# ninja log v4", "junk"];
    const NUMBERS: &[&str] = &["0", "1", "2", "3", "5", "01", "-1", "-0", "9223372036854775808", ""];
    const OUTPUTS: &[&str] = &["a", "b", "c", "a b", "\u{e9}", "", "f", "\u{fffd}"];
    const HASHES: &[&str] = &["1", "aa", "bb", "0a", "A", "ffffffffffffffff", ""];
    let pick = |rng: &mut Rng, v: &[&'static str]| v[rng.below(v.len() as u64) as usize];
    let mut log = format!("{}\n", pick(rng, HEADERS));
    for _ in 0..rng.below(8) {
        let fields = if rng.chance(10) { 3 + rng.below(4) } else { 5 };
        let mut parts = Vec::new();
        for f in 0..fields {
            parts.push(match f {
                0..=2 => pick(rng, NUMBERS),
                3 => pick(rng, OUTPUTS),
                _ => pick(rng, HASHES),
            });
        }
        log.push_str(&parts.join("\t"));
        log.push('\n');
    }
    // U+FFFD stands for a byte that is not UTF-8.
    log.replace('\u{fffd}', "\u{1}").into_bytes().iter().map(|&c| if c == 1 { 0xff } else { c }).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_reader_matches_its_reference_on_the_models_scenarios(seed in any::<u64>()) {
        let s = scenario(seed);
        prop_assert!(same(s.before.as_deref(), s.after.as_deref()).is_ok(), "seed {seed}: {}", same(s.before.as_deref(), s.after.as_deref()).unwrap_err());
    }

    #[test]
    fn the_reader_matches_its_reference_on_damaged_logs(seed in any::<u64>()) {
        let s = scenario(seed);
        let mut rng = Rng::new(seed ^ 0xdead_beef);
        let before = s.before.as_deref().map(|b| if rng.chance(3) { damage(b, &mut rng) } else { b.to_vec() });
        let after = s.after.as_deref().map(|a| damage(a, &mut rng));
        if let Err(e) = same(before.as_deref(), after.as_deref()) {
            prop_assert!(false, "seed {seed}: {e}");
        }
        // The damaged log appended to the old one: the append path.
        if let (Some(b), Some(a)) = (&before, &s.after) {
            let mut grown = b.clone();
            grown.extend_from_slice(&damage(a, &mut rng));
            if let Err(e) = same(Some(b), Some(&grown)) {
                prop_assert!(false, "seed {seed}, grown: {e}");
            }
        }
    }

    #[test]
    fn the_reader_matches_its_reference_on_drawn_logs(seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let before = drawn(&mut rng);
        let mut after = match rng.below(4) {
            0 => before.clone(),
            1 => {
                // A recompaction: the old lines in another order, perhaps kept.
                let mut lines: Vec<&[u8]> = before.split_inclusive(|&c| c == b'\n').skip(1).collect();
                rng.shuffle(&mut lines);
                let mut v = before.split_inclusive(|&c| c == b'\n').next().unwrap_or_default().to_vec();
                v.extend(lines.concat());
                v
            }
            _ => Vec::new(),
        };
        let tail = drawn(&mut rng);
        let skip = if after.is_empty() { 0 } else { tail.iter().position(|&c| c == b'\n').map_or(0, |i| i + 1) };
        after.extend_from_slice(&tail[skip..]);
        if rng.chance(5) {
            after.truncate(rng.below(after.len() as u64 + 1) as usize);
        }
        let before = (!rng.chance(6)).then_some(before);
        if let Err(e) = same(before.as_deref(), Some(&after)) {
            prop_assert!(false, "seed {seed}: {e}");
        }
    }
}

/// A large recompaction, a large append and a large first build, with one
/// line damaged at a time at many places: the long paths of the reader.
#[test]
fn the_reader_matches_its_reference_on_large_logs() {
    let line = |i: u64, round: u64, end: u64| {
        format!(
            "{}\t{end}\t{}\tobj/f{i}.o\t{:x}\n",
            end - 1 - (i % 3),
            1000 + round * 100 + i,
            1 + i * 7 + round
        )
    };
    let mut before = String::from("# ninja log v5\n");
    for round in 0..4 {
        for i in 0..300 {
            before.push_str(&line(i, round, 10 + i / 2));
        }
    }
    let mut recompacted = String::from("# ninja log v5\n");
    for i in (0..300).rev() {
        recompacted.push_str(&line(i, 3, 10 + i / 2));
    }
    for i in 0..300 {
        // Every third action has two outputs, and some end at the same time.
        recompacted.push_str(
            &line(i - i % 3, 9, 20 + i / 4).replace(&format!("f{}.o", i - i % 3), &format!("f{i}.o")),
        );
    }
    let appended = format!("{before}{}", &recompacted[recompacted.len() / 2..]);
    // Many actions ending at once, their outputs' lines interleaved: the
    // reader keeps a map of those actions once they are many.
    let mut at_once = String::from("# ninja log v5\n");
    for k in 0..90 {
        at_once.push_str(&format!("{}\t500\t7\tobj/b{k}.o\t{:x}\n", k % 40, 1 + k % 40));
    }
    same(None, Some(at_once.as_bytes())).unwrap_or_else(|e| panic!("{e}"));
    let delta = Snapshot::from_bytes("x", None).delta_from_bytes(Some(at_once.as_bytes()));
    assert_eq!(delta.actions().map(<[_]>::len), Some(40), "{delta:?}");
    let mut rng = Rng::new(7);
    for (before, after) in
        [(None, recompacted.clone()), (Some(before.clone()), recompacted), (Some(before.clone()), appended)]
    {
        same(before.as_ref().map(String::as_bytes), Some(after.as_bytes())).unwrap_or_else(|e| panic!("{e}"));
        for _ in 0..40 {
            let damaged = damage(after.as_bytes(), &mut rng);
            same(before.as_ref().map(String::as_bytes), Some(&damaged)).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// The fuzzer's seeds, in its input layout (`fuzz/README.md`).
#[test]
fn the_reader_matches_its_reference_on_the_fuzz_seeds() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/delta");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).expect("the fuzz seeds") {
        let data = std::fs::read(entry.expect("a seed").path()).expect("a seed");
        let Some((&flags, rest)) = data.split_first() else { continue };
        let (len, rest) = match rest.split_first_chunk::<4>() {
            Some((len, rest)) => (u32::from_le_bytes(*len) as usize, rest),
            None => (0, rest),
        };
        let (before, after) = rest.split_at(len.min(rest.len()));
        let before = (flags & 1 != 0).then_some(before);
        let after = (flags & 2 != 0).then_some(after);
        same(before, after).unwrap_or_else(|e| panic!("{e}"));
        let mut rng = Rng::new(count);
        for _ in 0..50 {
            let damaged = after.map(|a| damage(a, &mut rng));
            same(before, damaged.as_deref()).unwrap_or_else(|e| panic!("{e}"));
        }
        count += 1;
    }
    assert!(count >= 10, "only {count} seeds in {}", dir.display());
}

/// The tests above are only as good as the paths they take: count the
/// outcomes of the same inputs, and require each kind a few times.
#[test]
fn the_differential_inputs_take_every_path() {
    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    let kinds = [
        ("recompacted", "Ninja recompacted the log"),
        ("started over", "Ninja started a new log"),
        ("first build", "there was no log before the run"),
        ("clock restart", "times go back"),
        ("old line among new ones", "of the log before the run ("),
        ("dropped output logged again", "that the recompacted part of the log does not keep"),
        ("output logged twice", "was already logged on line"),
        ("not in Ninja's form", "Ninja writes `start"),
        ("rewritten with new times", "with another modification time"),
        ("replaced", "the log was replaced during the run"),
        ("too small to recompact", "too few for Ninja to recompact"),
        ("line Ninja rewrites", "rewrites it in its own form"),
        ("cut short", "cut short"),
        ("path not UTF-8", "are not UTF-8"),
        ("header changed", "the header changed"),
        ("old log ended inside a line", "ended inside a line"),
    ];
    let mut count = |delta: &Delta| {
        let text = match delta {
            Delta::Available { notes, .. } => notes.join("\n"),
            Delta::Unavailable { reason, .. } => reason.clone(),
        };
        for (kind, fragment) in kinds {
            if text.contains(fragment) {
                *seen.entry(kind).or_default() += 1;
            }
        }
    };
    for seed in 0..600 {
        let s = scenario(seed);
        let delta = same(s.before.as_deref(), s.after.as_deref()).unwrap_or_else(|e| panic!("{e}"));
        count(&delta);
        // A recompaction of a log holding a line Ninja loads but would
        // rewrite (a hash with a leading zero), for an output it drops.
        if let (Some(before), true) = (&s.before, delta.notes().iter().any(|n| n.contains("recompacted"))) {
            let at = before.iter().position(|&c| c == b'\n').map_or(0, |i| i + 1);
            let odd = [&before[..at], b"0\t1\t99\tzz.o\t0ab\n", &before[at..]].concat();
            count(&same(Some(&odd), s.after.as_deref()).unwrap_or_else(|e| panic!("{e}")));
        }
        // A path that is not UTF-8, at the end of the run.
        if let Some(after) = &s.after {
            let odd = [&after[..], b"0\t1\t1\tobj/x\xff.o\t1\n"].concat();
            count(&same(s.before.as_deref(), Some(&odd)).unwrap_or_else(|e| panic!("{e}")));
        }
        let mut rng = Rng::new(seed);
        let after = s.after.as_deref().map(|a| damage(a, &mut rng));
        count(&same(s.before.as_deref(), after.as_deref()).unwrap_or_else(|e| panic!("{e}")));
        let before = drawn(&mut rng);
        let mut grown = before.clone();
        let tail = drawn(&mut rng);
        let tail = &tail[tail.iter().position(|&c| c == b'\n').map_or(0, |i| i + 1)..];
        grown.extend_from_slice(tail);
        count(&same(Some(&before), Some(&grown)).unwrap_or_else(|e| panic!("{e}")));
        // The same after a log that ended inside a line.
        let cut = &before[..before.len() - 1];
        count(&same(Some(cut), Some(&[cut, tail].concat())).unwrap_or_else(|e| panic!("{e}")));
    }
    for (kind, _) in kinds {
        assert!(seen.get(kind).copied().unwrap_or(0) >= 3, "too few `{kind}`: {seen:#?}");
    }
}
