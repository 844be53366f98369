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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

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
