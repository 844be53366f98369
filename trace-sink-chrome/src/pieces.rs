//! Spans that ran in pieces, as async events, and flows, as flow events.

use trace_core::{Field, FlowKind, Site, Tid};

use crate::json::{uint, Args};
use crate::{ChromeSink, OWN_CATEGORY};

impl ChromeSink {
    /// An id for the capture's `n`-th async span or flow: the process id
    /// above, so that the ids of two processes' files differ when a trace
    /// joins them, and below 2^53, which a JSON reader keeps exactly.
    fn scoped_id(&self, n: u64) -> u64 {
        (u64::from(self.pid) << 24) | (n & ((1 << 24) - 1))
    }

    /// A span that ran in pieces: an async `b`/`e` pair with an id of its
    /// own, named after the span, its fields as the begin's `args`. The id is
    /// the process's (`"id2":{"local":…}`), so that viewers draw the track
    /// under the process: a plain `"id"` is global to Perfetto's importer,
    /// whose UI then lists the track apart from every process.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn async_span(
        &mut self,
        id: u64,
        thread: Tid,
        (begin_ts, end_ts): (u64, u64),
        site: Site<'_>,
        fields: &[Field<'_>],
        unclosed: bool,
    ) {
        let (pid, id) = (self.pid(), self.scoped_id(id));
        for (ph, ts) in [(&br#""b""#[..], begin_ts), (br#""e""#, end_ts.max(begin_ts))] {
            let b = self.out.timed((site.name, b""), Some(site.target), ph, (pid, thread), ts);
            b.extend_from_slice(br#","id2":{"local":"0x"#);
            b.extend_from_slice(format!("{id:x}").as_bytes());
            b.extend_from_slice(br#""}"#);
            let mut args = Args::new(b);
            if ph == br#""b""# {
                args.fields(fields, &mut self.keys, site.has_static_text());
            } else if unclosed {
                args.key("unclosed").extend_from_slice(b"true");
            }
            args.close();
            self.out.close();
        }
    }

    /// One end of a flow: `s` binds to the slice open on `thread` at `ts`;
    /// `f` to the next slice to begin there (`next`), or with `"bp":"e"` to
    /// the slice open there.
    pub(crate) fn flow(&mut self, ph: &[u8], flow: u64, kind: FlowKind, thread: Tid, ts: u64) {
        let (pid, id) = (self.pid(), self.scoped_id(flow));
        let b = self.out.timed((kind.as_str(), b""), Some(OWN_CATEGORY), ph, (pid, thread), ts);
        b.extend_from_slice(br#","id":"#);
        uint(b, id);
        self.out.close();
    }
}

/// The phase of a flow's source.
pub(crate) const FLOW_OUT: &[u8] = br#""s""#;
/// The phase of a flow's end at the next slice to begin.
pub(crate) const FLOW_IN_NEXT: &[u8] = br#""f""#;
/// The phase of a flow's end in the slice open at its time.
pub(crate) const FLOW_IN_ENCLOSING: &[u8] = br#""f","bp":"e""#;
