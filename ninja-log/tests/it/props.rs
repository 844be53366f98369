//! Property tests: the reader against the model of Ninja in `model.rs`.

use ninja_log::{Action, Delta, Snapshot};
use proptest::prelude::*;

use crate::model::{scenario, Demand, Scenario, TrueAction};

fn normalised(actions: &[Action]) -> Vec<TrueAction> {
    let mut v: Vec<TrueAction> = actions
        .iter()
        .map(|a| {
            let mut outputs = a.outputs.clone();
            outputs.sort();
            TrueAction { epoch: a.epoch, start: a.start_ms, end: a.end_ms, hash: a.hash.clone(), outputs }
        })
        .collect();
    v.sort();
    v
}

fn truth(s: &Scenario) -> Vec<TrueAction> {
    let mut v = s.truth.clone();
    for a in &mut v {
        a.outputs.sort();
    }
    v.sort();
    v
}

/// Reads a scenario and checks the reader kept its promise; returns the delta.
pub fn check(s: &Scenario) -> Result<Delta, String> {
    let snapshot = Snapshot::from_bytes("build/.ninja_log", s.before.clone());
    let delta = snapshot.delta_from_bytes(s.after.as_deref());
    crate::lent::agrees(&snapshot, s.after.as_deref(), &delta)?;
    let wrong = |what: &str| {
        Err(format!(
            "{what}\nstory: {}\ndelta: {delta:#?}\ntruth: {:#?}\nbefore:\n{}\nafter:\n{}",
            s.story,
            s.truth,
            s.before.as_deref().map(String::from_utf8_lossy).unwrap_or_default(),
            s.after.as_deref().map(String::from_utf8_lossy).unwrap_or_default(),
        ))
    };
    match (&delta, s.demand) {
        (Delta::Available { actions, .. }, Demand::Exact | Demand::Sound)
            if normalised(actions) != truth(s) =>
        {
            return wrong("available with actions that are not the truth")
        }
        (Delta::Available { .. }, Demand::Unavailable) => {
            return wrong("available although the log cannot be followed")
        }
        (Delta::Available { actions, .. }, Demand::NoInvention) => {
            // Compared output by output, and without epochs: a rewrite of a
            // log this run started can reorder lines, so a restart may show
            // where there was none, or not show, and split an action in two.
            let lines = |v: Vec<TrueAction>| {
                let mut l: Vec<_> = v
                    .into_iter()
                    .flat_map(|a| a.outputs.into_iter().map(move |o| (a.start, a.end, a.hash.clone(), o)))
                    .collect();
                l.sort();
                l
            };
            let mut left = lines(truth(s));
            for line in lines(normalised(actions)) {
                match left.iter().position(|t| *t == line) {
                    Some(i) => {
                        left.remove(i);
                    }
                    None => return wrong("available with an action that did not run"),
                }
            }
        }
        (Delta::Unavailable { .. }, Demand::Exact) => {
            return wrong("unavailable although the log can be followed")
        }
        _ => {}
    }
    Ok(delta)
}

proptest! {
    // What this finds goes into `regressions.rs` as a named test, so no
    // persistence file is kept.
    #![proptest_config(ProptestConfig {
        cases: 1000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_reader_never_claims_actions_that_are_not_the_truth(seed in any::<u64>()) {
        let s = scenario(seed);
        if let Err(e) = check(&s) {
            prop_assert!(false, "seed {seed}: {e}");
        }
    }
}

/// The property above is only as good as the scenarios it sees: count them.
#[test]
fn the_scenarios_cover_every_way_a_log_changes() {
    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    for seed in 0..1500 {
        let s = scenario(seed);
        let delta = check(&s).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let notes = delta.notes().join("\n");
        let mut count = |k| *seen.entry(k).or_default() += 1;
        match s.demand {
            Demand::Exact if notes.contains("recompacted") => count("read through a recompaction"),
            Demand::Exact if notes.contains("started a new log") => count("read through a start-over"),
            Demand::Exact if s.before.is_none() => count("read as a first build"),
            Demand::Exact => count("read as an append"),
            Demand::Unavailable => count("damaged or rewritten, unavailable"),
            Demand::Sound => count("rewritten mid-run, sound"),
            Demand::NoInvention => count("lines lost mid-run"),
        }
        if notes.contains("header changed") {
            count("recompacted under another version's header");
        }
        if delta.actions().is_some_and(|a| a.iter().any(|a| a.epoch > 0)) {
            count("with a clock restart");
        }
        if delta.actions().is_some_and(|a| a.iter().any(|a| a.outputs.len() > 1)) {
            count("with a multi-output action");
        }
        if delta.actions().is_some_and(|a| a.is_empty()) && s.after.is_some() {
            count("with no action");
        }
    }
    for kind in [
        "read through a recompaction",
        "read through a start-over",
        "read as a first build",
        "read as an append",
        "damaged or rewritten, unavailable",
        "recompacted under another version's header",
        "with a clock restart",
        "with a multi-output action",
        "with no action",
    ] {
        assert!(seen.get(kind).copied().unwrap_or(0) >= 5, "too few `{kind}`: {seen:#?}");
    }
}
