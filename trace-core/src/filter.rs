//! The spelling of `<P>_TRACE_FILTER`: stricter than `Targets` on purpose, so
//! that a typo is refused instead of turning into a capture of nothing.
//!
//! - Directives are separated by commas; whitespace around them and empty
//!   items are ignored.
//! - A bare word must be a level: `off`, `error`, `warn`, `info`, `debug`,
//!   `trace`, in any case. Anything else (`inof`, `warning`, `cabin`) is
//!   refused with the nearest level suggested: `Targets` would read it as a
//!   target name and capture nothing else.
//! - A target is written `target=level`, the target a non-empty path of
//!   letters, digits, `_`, `-`, `.` and `::`.
//! - What `Targets` receives is exactly the validated directives, rewritten
//!   canonically (`target=level`, lowercase levels, joined by commas).

use std::str::FromStr;

use tracing_subscriber::filter::Targets;

/// The level names a directive may use, most verbose last.
pub(crate) const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// Parses `text` into the `Targets` of its validated directives and their
/// canonical text; the error says what was wrong, for the caller to wrap with
/// the variable's name and value.
pub(crate) fn parse(text: &str) -> Result<(Targets, String), String> {
    let mut directives: Vec<String> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        directives.push(directive(item)?);
    }
    if directives.is_empty() {
        return Err("is empty".to_string());
    }
    let canonical = directives.join(",");
    let targets = Targets::from_str(&canonical).map_err(|e| format!("does not parse ({e})"))?;
    Ok((targets, canonical))
}

/// One directive, canonically.
fn directive(item: &str) -> Result<String, String> {
    match item.split_once('=') {
        None => level(item).map(str::to_string).ok_or_else(|| {
            let mut why = format!(
                "has `{item}`, which is not a level (a bare word must be one of {}); did you mean `{}`?",
                LEVELS.join(", "),
                nearest_level(item)
            );
            if is_target(item) {
                why.push_str(&format!(
                    " To filter the target `{item}`, write `{item}=<level>`, e.g. `{item}=debug`"
                ));
            }
            why
        }),
        Some((target, lvl)) => {
            let (target, lvl) = (target.trim(), lvl.trim());
            if target.is_empty() || lvl.is_empty() {
                return Err(format!("has a directive `{item}` with an empty target or level"));
            }
            if !is_target(target) {
                return Err(format!(
                    "has a directive `{item}` whose target `{target}` is not a module path \
                     (letters, digits, `_`, `-`, `.` and `::`)"
                ));
            }
            let Some(lvl) = level(lvl) else {
                return Err(format!(
                    "has a directive `{item}` whose level `{lvl}` is not one of {}; did you mean `{}`?",
                    LEVELS.join(", "),
                    nearest_level(lvl)
                ));
            };
            Ok(format!("{target}={lvl}"))
        }
    }
}

/// The level `word` names, in any case.
fn level(word: &str) -> Option<&'static str> {
    LEVELS.iter().copied().find(|l| l.eq_ignore_ascii_case(word))
}

fn is_target(word: &str) -> bool {
    !word.is_empty()
        && word.split("::").all(|part| {
            !part.is_empty()
                && part.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        })
}

/// The level closest to `word` in edit distance (a swap of two neighbours
/// counts as one edit), ties to the more common level.
pub(crate) fn nearest_level(word: &str) -> &'static str {
    let word = word.to_ascii_lowercase();
    // Ties go to the first: the order of how often each is meant.
    let order = ["info", "debug", "warn", "trace", "error", "off"];
    order.iter().copied().min_by_key(|l| edit_distance(&word, l)).unwrap_or("info")
}

/// Optimal string alignment distance: insertions, deletions, substitutions and
/// swaps of adjacent characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_of_levels_are_refused_with_the_nearest_level() {
        for (typo, nearest) in
            [("inof", "info"), ("warning", "warn"), ("debgu", "debug"), ("TRACEE", "trace")]
        {
            let e = parse(typo).unwrap_err();
            assert!(e.contains(&format!("did you mean `{nearest}`?")), "{typo}: {e}");
        }
        let e = parse("loud").unwrap_err();
        assert!(e.contains("did you mean `"), "{e}");
    }

    #[test]
    fn a_bare_target_name_is_refused_with_the_spelling_of_a_target() {
        let e = parse("cabin").unwrap_err();
        assert!(e.contains("write `cabin=<level>`"), "{e}");
        let e = parse("info,kache::cache").unwrap_err();
        assert!(e.contains("`kache::cache=debug`"), "{e}");
    }

    #[test]
    fn whitespace_and_empty_items_are_ignored_and_the_rest_is_kept() {
        for (given, canonical) in [
            (" info ", "info"),
            ("info,", "info"),
            ("info,,", "info"),
            (",info", "info"),
            ("info, mycrate=debug", "info,mycrate=debug"),
            ("INFO , my_crate::sub = TRACE", "info,my_crate::sub=trace"),
            ("off", "off"),
        ] {
            assert_eq!(parse(given).unwrap().1, canonical, "{given:?}");
        }
    }

    #[test]
    fn empty_sides_bad_levels_and_odd_targets_are_refused() {
        for bad in
            ["", " , ", "=", "info,=debug", "cabin=", "cabin=loud", "a b=info", "x[y]=info", "a::=info"]
        {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn the_edit_distance_counts_a_swap_as_one() {
        assert_eq!(edit_distance("inof", "info"), 1);
        assert_eq!(edit_distance("warning", "warn"), 3);
        assert_eq!(edit_distance("", "off"), 3);
        assert_eq!(edit_distance("debug", "debug"), 0);
    }
}
