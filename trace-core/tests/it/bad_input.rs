//! Bad configuration: anything at all in the variables is either accepted or
//! refused with an error naming the variable, before the command runs.

use std::ffi::OsString;

use proptest::prelude::*;
use trace_core::{Config, ErrorKind};

fn configure(filter: Option<&str>, format: Option<&str>) -> Result<Option<Config>, trace_core::ConfigError> {
    Config::from_lookup("P", &["chrome", "perfetto"], |name| match name {
        "P_TRACE_DIR" => Some(OsString::from("some/dir")),
        "P_TRACE_FILTER" => filter.map(OsString::from),
        "P_TRACE_FORMAT" => format.map(OsString::from),
        _ => None,
    })
}

/// A configuration with only `var` set besides the directory.
fn configure_one(var: &str, value: &str) -> Result<Option<Config>, trace_core::ConfigError> {
    Config::from_lookup("P", &["chrome"], |name| match name {
        "P_TRACE_DIR" => Some(OsString::from("some/dir")),
        n if n == var => Some(OsString::from(value)),
        _ => None,
    })
}

/// The naive reading of `<P>_TRACE_SAMPLE`, in milliseconds: `off`, or
/// digits then `ms` or `s`, from 1 ms to 1 s.
fn naive_sample_ms(text: &str) -> Option<Option<u128>> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("off") {
        return Some(None);
    }
    let (digits, scale) = match t.strip_suffix("ms") {
        Some(d) => (d, 1),
        None => (t.strip_suffix('s')?, 1000),
    };
    let digits = digits.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // More digits than any accepted value has, once the leading zeros are gone.
    let significant = digits.trim_start_matches('0');
    if significant.len() > 7 {
        return None;
    }
    let ms = significant.parse::<u128>().unwrap_or(0) * scale;
    (1..=1000).contains(&ms).then_some(Some(ms))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn any_cpu_level_string_is_a_level_or_refused_with_the_variable_named(value in "\\PC{0,12}") {
        let level = ["off", "error", "warn", "info", "debug", "trace"]
            .iter()
            .any(|l| l.eq_ignore_ascii_case(value.trim()));
        match configure_one("P_TRACE_CPU", &value) {
            Ok(c) => prop_assert!(level && c.is_some(), "accepted `{}`", value),
            Err(e) => {
                prop_assert!(!level, "refused the level `{}`", value);
                prop_assert_eq!(e.kind(), ErrorKind::Cpu);
                let prefix = format!("P_TRACE_CPU=`{value}`: ");
                prop_assert!(e.to_string().starts_with(&prefix), "{}", e);
            }
        }
    }

    #[test]
    fn sample_intervals_are_read_as_the_naive_reading_reads_them(
        value in prop_oneof![
            "\\PC{0,10}",
            "[ ]?0{0,3}[0-9]{0,5}[ ]?(ms|s|m|us|MS|)[ ]?",
            "(off|OFF|Off|of|offf)",
        ]
    ) {
        let naive = naive_sample_ms(&value);
        match configure_one("P_TRACE_SAMPLE", &value) {
            Ok(c) => {
                let got = c.unwrap().sample().map(|d| d.as_millis());
                prop_assert_eq!(Some(got), naive, "`{}`", value);
            }
            Err(e) => {
                prop_assert_eq!(naive, None, "refused `{}`: {}", value, e);
                prop_assert_eq!(e.kind(), ErrorKind::Sample);
                let prefix = format!("P_TRACE_SAMPLE=`{value}`: ");
                prop_assert!(e.to_string().starts_with(&prefix), "{}", e);
                prop_assert!(e.to_string().contains("expected an interval from `1ms` to `1s`"), "{}", e);
            }
        }
    }

    #[test]
    fn any_filter_string_is_accepted_or_refused_with_the_variable_named(filter in "\\PC*") {
        match configure(Some(&filter), None) {
            Ok(c) => prop_assert!(c.is_some()),
            Err(e) => {
                prop_assert_eq!(e.kind(), ErrorKind::Filter);
                let prefix = format!("P_TRACE_FILTER=`{filter}`: ");
                prop_assert!(e.to_string().starts_with(&prefix), "{}", e);
            }
        }
    }

    #[test]
    fn filter_like_strings_are_accepted_or_refused_with_the_variable_named(
        filter in "[a-z_:=,\\[\\]{}\" 0-9]{0,40}"
    ) {
        if let Err(e) = configure(Some(&filter), None) {
            prop_assert_eq!(e.kind(), ErrorKind::Filter);
            prop_assert!(e.to_string().contains("expected target=level directives"));
        }
    }

    #[test]
    fn any_format_string_is_accepted_or_refused_with_the_variable_named(format in "\\PC{0,30}") {
        match configure(None, Some(&format)) {
            Ok(c) => {
                let c = c.unwrap();
                prop_assert!(!c.formats().is_empty());
                prop_assert!(c.formats().iter().all(|f| f == "chrome" || f == "perfetto"));
            }
            Err(e) => {
                prop_assert_eq!(e.kind(), ErrorKind::Format);
                prop_assert!(e.to_string().starts_with("P_TRACE_FORMAT="));
            }
        }
    }
}

#[test]
fn a_value_that_is_not_utf8_is_refused_with_the_variable_named() {
    // Bytes that are not UTF-8 on Unix; an unpaired surrogate on Windows.
    #[cfg(unix)]
    let bad: OsString = std::os::unix::ffi::OsStringExt::from_vec(vec![b'i', 0xff, b'o']);
    #[cfg(windows)]
    let bad: OsString =
        std::os::windows::ffi::OsStringExt::from_wide(&[u16::from(b'i'), 0xd800, u16::from(b'o')]);
    let e = Config::from_lookup("P", &["chrome"], |name| match name {
        "P_TRACE_DIR" => Some("d".into()),
        "P_TRACE_FILTER" => Some(bad.clone()),
        _ => None,
    })
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Filter);
    assert!(e.to_string().contains("not valid UTF-8"), "{e}");
}
