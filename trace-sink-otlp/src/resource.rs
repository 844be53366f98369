//! The resource (who wrote the trace) and the `OTEL_*` variables that shape it.

use std::ffi::OsString;
use std::fmt;

use crate::model::{AnyValue, KeyValue};

/// `OTEL_SERVICE_NAME`: the service name, above everything else.
pub const SERVICE_NAME_VAR: &str = "OTEL_SERVICE_NAME";
/// `OTEL_RESOURCE_ATTRIBUTES`: `key=value,key=value`, values percent-encoded.
pub const RESOURCE_ATTRIBUTES_VAR: &str = "OTEL_RESOURCE_ATTRIBUTES";

/// A `key=value,...` list that could not be read (`OTEL_RESOURCE_ATTRIBUTES`,
/// `OTEL_EXPORTER_OTLP_HEADERS`). Its `Display` names the variable, the value,
/// the item at fault and the expected form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValueError {
    variable: String,
    value: String,
    kind: KeyValueErrorKind,
    item: String,
}

/// What was wrong with a `key=value` list.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyValueErrorKind {
    /// An item has no `=`.
    MissingEquals,
    /// An item has an empty key.
    EmptyKey,
    /// A `%` is not followed by two hex digits, or the decoded bytes are not UTF-8.
    BadPercentEncoding,
    /// The variable is not valid UTF-8.
    NotUtf8,
}

impl KeyValueError {
    /// The variable, e.g. `OTEL_RESOURCE_ATTRIBUTES`.
    pub fn variable(&self) -> &str {
        &self.variable
    }

    /// What was wrong.
    pub fn kind(&self) -> KeyValueErrorKind {
        self.kind
    }
}

impl fmt::Display for KeyValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self.kind {
            KeyValueErrorKind::MissingEquals => "has no `=`",
            KeyValueErrorKind::EmptyKey => "has an empty key",
            KeyValueErrorKind::BadPercentEncoding => "is not valid percent-encoded UTF-8",
            KeyValueErrorKind::NotUtf8 => "is not valid UTF-8",
        };
        write!(
            f,
            "{}=`{}`: the item `{}` {why}; expected comma-separated key=value pairs with \
             percent-encoded values, e.g. `deployment.environment=ci,team=build%20tools`",
            self.variable, self.value, self.item
        )
    }
}

impl std::error::Error for KeyValueError {}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Parses a `key=value,key=value` list as the OpenTelemetry specification
/// reads `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_EXPORTER_OTLP_HEADERS`: items
/// split on `,`, each on its first `=`, whitespace around keys and values
/// trimmed, values (and keys) percent-decoded, empty items ignored. Any bad
/// item refuses the whole list, as the specification asks.
///
/// ```
/// let pairs = trace_sink_otlp::parse_key_values("X", " team=build%20tools , ci=1").unwrap();
/// assert_eq!(pairs, [("team".to_string(), "build tools".to_string()), ("ci".into(), "1".into())]);
/// assert!(trace_sink_otlp::parse_key_values("X", "novalue").is_err());
/// ```
pub fn parse_key_values(variable: &str, text: &str) -> Result<Vec<(String, String)>, KeyValueError> {
    let error = |kind, item: &str| KeyValueError {
        variable: variable.to_string(),
        value: text.to_string(),
        kind,
        item: item.to_string(),
    };
    let mut out = Vec::new();
    for item in text.split(',') {
        if item.trim().is_empty() {
            continue;
        }
        let Some((key, value)) = item.split_once('=') else {
            return Err(error(KeyValueErrorKind::MissingEquals, item.trim()));
        };
        let decode = |s: &str| percent_decode(s.trim());
        let (Some(key), Some(value)) = (decode(key), decode(value)) else {
            return Err(error(KeyValueErrorKind::BadPercentEncoding, item.trim()));
        };
        if key.is_empty() {
            return Err(error(KeyValueErrorKind::EmptyKey, item.trim()));
        }
        out.push((key, value));
    }
    Ok(out)
}

/// What the `OTEL_*` variables ask of the resource, read once before the capture.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceEnv {
    /// `OTEL_SERVICE_NAME`, when set and not empty.
    pub service_name: Option<String>,
    /// `OTEL_RESOURCE_ATTRIBUTES`, parsed.
    pub attributes: Vec<(String, String)>,
}

impl ResourceEnv {
    /// Reads the variables through `lookup`; an unreadable
    /// `OTEL_RESOURCE_ATTRIBUTES` is an error (the strict form).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Result<ResourceEnv, KeyValueError> {
        let text = |var: &str| -> Result<Option<String>, KeyValueError> {
            match lookup(var) {
                None => Ok(None),
                Some(raw) => raw.into_string().map(Some).map_err(|raw| KeyValueError {
                    variable: var.to_string(),
                    value: raw.to_string_lossy().into_owned(),
                    kind: KeyValueErrorKind::NotUtf8,
                    item: raw.to_string_lossy().into_owned(),
                }),
            }
        };
        let service_name = text(SERVICE_NAME_VAR)?.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
        let attributes = match text(RESOURCE_ATTRIBUTES_VAR)? {
            None => Vec::new(),
            Some(t) => parse_key_values(RESOURCE_ATTRIBUTES_VAR, &t)?,
        };
        Ok(ResourceEnv { service_name, attributes })
    }

    /// The resource attributes of a capture, in the order written: the
    /// semantic conventions' `service.name`, `process.pid`,
    /// `process.command`, `host.name`, then ours, then
    /// `OTEL_RESOURCE_ATTRIBUTES` (which replaces a detected attribute of the
    /// same key). `service.name` is `OTEL_SERVICE_NAME`, else the one in
    /// `OTEL_RESOURCE_ATTRIBUTES`, else the captured command.
    pub(crate) fn attributes(&self, start: &trace_core::Start<'_>) -> Vec<KeyValue<'static>> {
        let from_attrs = self.attributes.iter().find(|(k, _)| k == "service.name").map(|(_, v)| v.clone());
        let service = self.service_name.clone().or(from_attrs).unwrap_or_else(|| start.command.to_string());
        let mut out =
            vec![KeyValue::str("service.name", service), KeyValue::int("process.pid", i64::from(start.pid))];
        if let Some(argv0) = std::env::args_os().next() {
            out.push(KeyValue::str("process.command", argv0.to_string_lossy().into_owned()));
        }
        if let Some(host) = host_name() {
            out.push(KeyValue::str("host.name", host));
        }
        out.push(KeyValue::str("cabin_trace.command", start.command.to_string()));
        out.push(KeyValue::str("cabin_trace.stem", start.stem.to_string()));
        for (k, v) in &self.attributes {
            if k == "service.name" {
                continue;
            }
            match out.iter_mut().find(|kv| kv.key == *k) {
                Some(slot) => slot.value = AnyValue::Str(v.clone().into()),
                None => out.push(KeyValue::str(k.clone(), v.clone())),
            }
        }
        out
    }
}

/// The machine's host name, as `uname -n` prints it.
#[cfg(unix)]
fn host_name() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..len]).into_owned();
    (!name.is_empty()).then_some(name)
}

/// The machine's NetBIOS name, which Windows keeps in the environment.
#[cfg(not(unix))]
fn host_name() -> Option<String> {
    std::env::var("COMPUTERNAME").ok().filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_attributes_are_split_trimmed_and_percent_decoded() {
        let got = parse_key_values("V", "a=1, b = x%2Cy ,,c=%E2%82%AC, d=").unwrap();
        let want = [("a", "1"), ("b", "x,y"), ("c", "€"), ("d", "")];
        assert_eq!(got, want.map(|(k, v)| (k.to_string(), v.to_string())));
    }

    #[test]
    fn a_bad_item_refuses_the_whole_list_naming_the_variable_and_the_item() {
        for (text, kind, item) in [
            ("a=1,oops", KeyValueErrorKind::MissingEquals, "oops"),
            ("=1", KeyValueErrorKind::EmptyKey, "=1"),
            ("a=%zz", KeyValueErrorKind::BadPercentEncoding, "a=%zz"),
            ("a=%4", KeyValueErrorKind::BadPercentEncoding, "a=%4"),
            ("a=%ff", KeyValueErrorKind::BadPercentEncoding, "a=%ff"),
        ] {
            let e = parse_key_values(RESOURCE_ATTRIBUTES_VAR, text).unwrap_err();
            assert_eq!(e.kind(), kind, "{text}");
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("OTEL_RESOURCE_ATTRIBUTES=`{text}`")), "{msg}");
            assert!(msg.contains(&format!("`{item}`")), "{msg}");
        }
    }

    fn start() -> trace_core::Start<'static> {
        let mut start = trace_core::Start::default();
        start.command = "build";
        start.stem = "build-1-2-0";
        start.pid = 42;
        start.start_unix_ms = 1;
        start.start_ns = 2;
        start.filter = "info";
        start
    }

    fn env(vars: &[(&str, &str)]) -> ResourceEnv {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        ResourceEnv::from_lookup(|n| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.into())).unwrap()
    }

    fn get(attrs: &[KeyValue<'static>], key: &str) -> Option<AnyValue<'static>> {
        attrs.iter().find(|kv| kv.key == key).map(|kv| kv.value.clone())
    }

    #[test]
    fn the_service_name_is_otel_service_name_then_the_resource_attribute_then_the_command() {
        let s = |v: &str| Some(AnyValue::Str(v.to_string().into()));
        assert_eq!(get(&env(&[]).attributes(&start()), "service.name"), s("build"));
        let attrs = env(&[(RESOURCE_ATTRIBUTES_VAR, "service.name=from-attrs")]).attributes(&start());
        assert_eq!(get(&attrs, "service.name"), s("from-attrs"));
        let both = env(&[(RESOURCE_ATTRIBUTES_VAR, "service.name=from-attrs"), (SERVICE_NAME_VAR, "cabin")]);
        let attrs = both.attributes(&start());
        assert_eq!(get(&attrs, "service.name"), s("cabin"));
        assert_eq!(attrs.iter().filter(|kv| kv.key == "service.name").count(), 1);
    }

    #[test]
    fn resource_attributes_from_the_environment_replace_detected_ones_and_add_their_own() {
        let attrs = env(&[(RESOURCE_ATTRIBUTES_VAR, "host.name=ci-7,team=build")]).attributes(&start());
        assert_eq!(get(&attrs, "host.name"), Some(AnyValue::Str("ci-7".into())));
        assert_eq!(get(&attrs, "team"), Some(AnyValue::Str("build".into())));
        assert_eq!(get(&attrs, "process.pid"), Some(AnyValue::Int(42)));
        assert_eq!(attrs.iter().filter(|kv| kv.key == "host.name").count(), 1);
    }
}
