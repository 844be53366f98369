//! `<P>_TRACE_FILTER` means what its directives mean to `Targets` when written
//! canonically, whatever the spacing, the case of its levels and its empty
//! items; and a bare word that is not a level is refused, never a silent
//! capture of nothing.

use std::str::FromStr;

use proptest::prelude::*;
use trace_core::{Config, ErrorKind};
use tracing::Level;
use tracing_subscriber::filter::Targets;

const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
const TARGETS: [&str; 5] = ["app", "app::db", "app::db::pool", "other", "my-tool.x"];

fn config(filter: &str) -> Result<Config, trace_core::ConfigError> {
    Config::from_lookup("T", &[], |n| match n {
        "T_TRACE_DIR" => Some("unused".into()),
        "T_TRACE_FILTER" => Some(filter.into()),
        _ => None,
    })
    .map(|c| c.expect("the directory is set"))
}

/// A level in a random case.
fn level() -> impl Strategy<Value = String> {
    (0..LEVELS.len(), any::<u8>()).prop_map(|(i, case)| match case % 3 {
        0 => LEVELS[i].to_string(),
        1 => LEVELS[i].to_ascii_uppercase(),
        _ => {
            let mut s = LEVELS[i].to_string();
            s[..1].make_ascii_uppercase();
            s
        }
    })
}

/// (as written, canonical) for one directive.
fn directive() -> impl Strategy<Value = (String, String)> {
    prop_oneof![
        level().prop_map(|l| (l.clone(), l.to_ascii_lowercase())),
        (0..TARGETS.len(), level(), " {0,2}", " {0,2}").prop_map(|(t, l, a, b)| {
            (format!("{}{a}={b}{l}", TARGETS[t]), format!("{}={}", TARGETS[t], l.to_ascii_lowercase()))
        }),
    ]
}

proptest! {
    #[test]
    fn an_accepted_filter_captures_what_its_canonical_directives_mean(
        items in prop::collection::vec((directive(), " {0,3}", " {0,3}", 0u8..4), 1..5),
    ) {
        let mut written = Vec::new();
        let mut canonical = Vec::new();
        for ((raw, canon), before, after, empties) in &items {
            written.push(format!("{before}{raw}{after}"));
            canonical.push(canon.clone());
            for _ in 0..*empties % 2 {
                written.push(" ".to_string());
            }
        }
        let text = written.join(",");
        let config = config(&text).map_err(|e| TestCaseError::fail(format!("{text:?} refused: {e}")))?;
        let expected = Targets::from_str(&canonical.join(",")).unwrap();
        prop_assert_eq!(config.filter_text(), canonical.join(","));
        for target in TARGETS {
            for level in [Level::ERROR, Level::WARN, Level::INFO, Level::DEBUG, Level::TRACE] {
                prop_assert_eq!(
                    config.filter().would_enable(target, &level),
                    expected.would_enable(target, &level),
                    "{:?}: {} at {}", text, target, level
                );
            }
        }
    }

    #[test]
    fn a_bare_word_that_is_not_a_level_is_refused(word in "[a-z][a-z_]{1,8}") {
        prop_assume!(!LEVELS.contains(&word.as_str()));
        let e = config(&format!("info,{word}")).unwrap_err();
        prop_assert_eq!(e.kind(), ErrorKind::Filter);
        prop_assert!(e.to_string().contains("did you mean `"), "{}", e);
    }
}

#[test]
fn inof_is_refused_naming_the_variable_and_suggesting_info() {
    let e = config("inof").unwrap_err();
    let msg = e.to_string();
    assert!(msg.starts_with("T_TRACE_FILTER=`inof`"), "{msg}");
    assert!(msg.contains("did you mean `info`?"), "{msg}");
}

#[test]
fn the_root_span_is_recorded_whatever_the_filter() {
    for front in crate::collect::FRONTS {
        let (s, seen) = crate::collect::session_on(front, "root", "kache=debug");
        s.run(|| tracing::info_span!("not_kache").in_scope(|| ()));
        s.finish();
        let seen = seen.lock();
        let names: Vec<&str> = seen.begins.iter().map(|b| b.1.as_str()).collect();
        assert_eq!(names, ["command"], "{front:?}");
        assert_eq!(seen.begins[0].2, r#"command="root""#, "{front:?}");
    }
}
