//! A capture's family: the trace id it shares with the captures of the
//! processes it starts (and of the process that started it), carried to
//! children through their environment.
//!
//! Two variables carry it, both set on a child's `Command` (never on the
//! process's own environment):
//!
//! - `TRACEPARENT=00-<32 hex trace id>-<16 hex span id>-01`, the W3C trace
//!   context as OpenTelemetry carries it in environment variables: the
//!   family's trace id and the id of the span that started the child;
//! - [`PARENT_VAR`] `=<children>\t<parent stem>\t<directory>`, read under every
//!   prefix: `<children>` is `1` when the parent asks every child that uses
//!   these crates to capture itself into `<directory>` (the parent capture was
//!   started with `<P>_TRACE_CHILDREN=1`), `0` otherwise; `<parent stem>` is the
//!   stem of the parent's files. The directory comes last, so that it may hold
//!   any character but a newline.

use std::collections::hash_map::RandomState;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The W3C trace-context variable.
pub const TRACEPARENT_VAR: &str = "TRACEPARENT";

/// The variable of ours naming the parent capture's directory and stem, and
/// whether children join; the same under every prefix.
pub const PARENT_VAR: &str = "CABIN_TRACE_PARENT";

/// A family's trace id: 16 bytes, never all zero.
pub type TraceId = [u8; 16];

/// What a capture knows of its family: the trace id, and, when it was started
/// by a capture, the parent's span and stem.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Family {
    /// The trace id every capture of the family shares.
    pub trace_id: TraceId,
    /// The span of the parent process that started this one, if any.
    pub parent_span_id: Option<[u8; 8]>,
    /// The stem of the parent capture's files, if the parent was captured.
    pub parent_stem: Option<String>,
    /// Whether this capture's children join it (passed on to them).
    pub children: bool,
}

impl Family {
    /// A new family of its own: a fresh trace id and no parent.
    pub fn fresh(children: bool) -> Family {
        Family { trace_id: fresh_trace_id(), parent_span_id: None, parent_stem: None, children }
    }

    /// The trace id in lower-case hex (32 characters).
    pub fn trace_id_hex(&self) -> String {
        hex(&self.trace_id)
    }

    /// The parent span id in lower-case hex (16 characters), if any.
    pub fn parent_span_id_hex(&self) -> Option<String> {
        self.parent_span_id.as_ref().map(|s| hex(s))
    }
}

/// What the environment says about a parent, read before a capture starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Inherited {
    /// From a well-formed `TRACEPARENT`.
    pub trace: Option<(TraceId, [u8; 8])>,
    /// From [`PARENT_VAR`]: whether children join, the parent's stem and directory.
    pub parent: Option<(bool, String, PathBuf)>,
    /// One line per variable that was malformed and ignored.
    pub warnings: Vec<String>,
}

impl Inherited {
    pub(crate) fn read(lookup: &impl Fn(&str) -> Option<std::ffi::OsString>) -> Inherited {
        let mut out = Inherited::default();
        if let Some(raw) = lookup(TRACEPARENT_VAR) {
            match raw.to_str().ok_or_else(|| "is not UTF-8".to_string()).and_then(parse_traceparent) {
                Ok(t) => out.trace = Some(t),
                Err(why) => out.warnings.push(format!(
                    "warning: {TRACEPARENT_VAR}={:?} is ignored: {why}; expected 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>",
                    raw.to_string_lossy()
                )),
            }
        }
        if let Some(raw) = lookup(PARENT_VAR) {
            match parse_parent(&raw) {
                Ok(p) => out.parent = Some(p),
                Err(why) => out.warnings.push(format!(
                    "warning: {PARENT_VAR}={:?} is ignored: {why}; expected <0|1>\\t<parent stem>\\t<directory>",
                    raw.to_string_lossy()
                )),
            }
        }
        out
    }

    /// The family of a capture started with this inheritance; `children`
    /// is the capture's own `<P>_TRACE_CHILDREN`, when set.
    pub(crate) fn family(&self, children: Option<bool>) -> Family {
        let inherited_children = self.parent.as_ref().is_some_and(|p| p.0);
        let children = children.unwrap_or(inherited_children);
        match self.trace {
            Some((trace_id, span)) => Family {
                trace_id,
                parent_span_id: Some(span),
                parent_stem: self.parent.as_ref().map(|p| p.1.clone()),
                children,
            },
            None => Family::fresh(children),
        }
    }
}

/// Parses `00-<32 hex>-<16 hex>-<2 hex>`: the trace id and parent span id.
pub fn parse_traceparent(text: &str) -> Result<(TraceId, [u8; 8]), String> {
    let parts: Vec<&str> = text.trim().split('-').collect();
    let [version, trace, span, flags] = parts[..] else {
        return Err(format!("has {} dash-separated parts, not 4", parts.len()));
    };
    if unhex::<1>(version).is_none() || version == "ff" {
        return Err(format!("the version {version:?} is not two hex digits other than ff"));
    }
    let trace = unhex::<16>(trace)
        .ok_or_else(|| format!("the trace id {trace:?} is not 32 lower-case hex digits"))?;
    let span =
        unhex::<8>(span).ok_or_else(|| format!("the span id {span:?} is not 16 lower-case hex digits"))?;
    if unhex::<1>(flags).is_none() {
        return Err(format!("the flags {flags:?} are not two hex digits"));
    }
    if trace == [0; 16] || span == [0; 8] {
        return Err("an all-zero id is invalid".into());
    }
    Ok((trace, span))
}

fn parse_parent(raw: &OsStr) -> Result<(bool, String, PathBuf), String> {
    let text = raw.to_str().ok_or("is not UTF-8")?;
    let mut parts = text.splitn(3, '\t');
    let children = match parts.next() {
        Some("1") => true,
        Some("0") => false,
        other => return Err(format!("the children flag {:?} is not 1 or 0", other.unwrap_or(""))),
    };
    let stem = parts.next().filter(|s| !s.is_empty()).ok_or("the parent stem is missing")?;
    let dir = parts.next().filter(|s| !s.is_empty()).ok_or("the directory is missing")?;
    Ok((children, stem.to_string(), PathBuf::from(dir)))
}

/// The environment a capture gives a child started under `span` (any
/// stable 64-bit id of the starting span; 0 is replaced).
pub fn child_env(family: &Family, span: u64, stem: &str, dir: &Path) -> [(&'static str, String); 2] {
    let span = if span == 0 { 1 } else { span };
    [
        (TRACEPARENT_VAR, format!("00-{}-{:016x}-01", family.trace_id_hex(), span)),
        (PARENT_VAR, format!("{}\t{stem}\t{}", if family.children { 1 } else { 0 }, dir.display())),
    ]
}

/// A stable 64-bit id of span `span` of capture `stem` in `family`.
pub(crate) fn span_id(family: &Family, stem: &str, span: u64) -> u64 {
    // FNV-1a: stable across runs and processes, unlike std's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in family.trace_id.iter().chain(stem.as_bytes()).chain(&span.to_le_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

fn fresh_trace_id() -> TraceId {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    loop {
        let mut halves = [0u64; 2];
        for half in &mut halves {
            // std's hasher is keyed at random per `RandomState`.
            let mut h = RandomState::new().build_hasher();
            h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
            h.write_u32(std::process::id());
            h.write_u128(crate::os::unix_ms() as u128);
            *half = h.finish();
        }
        let id = (u128::from(halves[0]) << 64 | u128::from(halves[1])).to_be_bytes();
        if id != [0; 16] {
            return id;
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(2 * bytes.len());
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// `2 * N` lower-case hex digits, as the W3C trace context writes them.
fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N || !text.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_well_formed_traceparent_parses_and_a_malformed_one_says_why() {
        let (t, s) = parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").unwrap();
        assert_eq!(hex(&t), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(hex(&s), "b7ad6b7169203331");
        for bad in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01",
        ] {
            assert!(parse_traceparent(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn a_child_environment_round_trips_through_the_reader() {
        let family = Family { children: true, ..Family::fresh(true) };
        let env = child_env(&family, 42, "build-1-2-3", Path::new("/tmp/a dir"));
        let inherited =
            Inherited::read(&|name| env.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone().into()));
        assert!(inherited.warnings.is_empty());
        let child = inherited.family(None);
        assert_eq!(child.trace_id, family.trace_id);
        assert_eq!(child.parent_span_id, Some(42u64.to_be_bytes()));
        assert_eq!(child.parent_stem.as_deref(), Some("build-1-2-3"));
        assert!(child.children);
        assert_eq!(inherited.parent.unwrap().2, PathBuf::from("/tmp/a dir"));
    }

    #[test]
    fn fresh_trace_ids_differ() {
        assert_ne!(Family::fresh(false).trace_id, Family::fresh(false).trace_id);
    }
}
