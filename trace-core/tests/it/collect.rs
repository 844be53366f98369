//! A sink that keeps what it is given, for assertions.

use std::io::{self, Write};
use std::sync::Arc;

use parking_lot::Mutex;
use trace_core::{Config, Event, Finish, Session, Sink, Value};

/// What the collecting sink saw.
#[derive(Debug, Default)]
pub struct Seen {
    /// (tid, name, fields as text)
    pub begins: Vec<(u64, String, String)>,
    /// (tid, name, recorded fields as text, unclosed)
    pub ends: Vec<(u64, String, String, bool)>,
    /// (name, every field of the span as text) per end
    pub end_fields: Vec<(String, String)>,
    pub instants: u64,
    pub threads: Vec<(u64, String)>,
    pub order: Vec<String>,
    pub dropped: u64,
    pub finished: bool,
    /// The name of the thread that finished the sink.
    pub finished_on: Option<String>,
    /// (name, thread CPU clock at the begin) per begin
    pub begin_cpu: Vec<(String, Option<u64>)>,
    /// (name, thread CPU time inside the span in ns) per end
    pub end_cpu: Vec<(String, Option<u64>)>,
    /// The process samples, in the order they came.
    pub samples: Vec<trace_core::ProcessSample>,
    /// (tid, name, begin, end, fields as text) per end
    pub slices: Vec<(u64, String, u64, u64, String)>,
    /// (name, begin, end, fields as text, unclosed) per span that ran in pieces
    pub asyncs: Vec<(String, u64, u64, String, bool)>,
    /// (`out` or `in`, flow, kind, tid, ts, at_begin) per end of a flow
    pub flows: Vec<(&'static str, u64, &'static str, u64, u64, bool)>,
}

pub type Collected = Arc<Mutex<Seen>>;

pub struct Collect(pub Collected);

fn text(fields: &[trace_core::Field<'_>]) -> String {
    fields
        .iter()
        .map(|f| {
            let v = match f.value {
                Value::I64(v) => v.to_string(),
                Value::U64(v) => format!("{v}u"),
                Value::F64(v) => format!("{v}f"),
                Value::Bool(v) => v.to_string(),
                Value::Str(s) => format!("{s:?}"),
            };
            format!("{}={v}", f.name)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl Sink for Collect {
    fn name(&self) -> &'static str {
        "collect"
    }
    fn suffix(&self) -> &'static str {
        "collect.txt"
    }
    fn event(&mut self, event: &Event<'_>, _out: &mut dyn Write) -> io::Result<()> {
        let mut s = self.0.lock();
        match *event {
            Event::ThreadName { thread, name } => s.threads.push((thread, name.to_string())),
            Event::SpanBegin { thread, site, fields, thread_cpu_ns, .. } => {
                s.begin_cpu.push((site.name.to_string(), thread_cpu_ns));
                if s.order.len() < 10_000 {
                    s.order.push(format!("B {}", site.name));
                }
                s.begins.push((thread, site.name.to_string(), text(fields)))
            }
            Event::SpanEnd { thread, ts, begin_ts, site, fields, recorded, unclosed, cpu, .. } => {
                s.end_cpu.push((site.name.to_string(), cpu.map(|c| c.ns())));
                if s.order.len() < 10_000 {
                    s.order.push(format!("E {}", site.name));
                }
                s.end_fields.push((site.name.to_string(), text(fields)));
                s.slices.push((thread, site.name.to_string(), begin_ts, ts, text(fields)));
                s.ends.push((thread, site.name.to_string(), text(recorded), unclosed))
            }
            Event::Instant { .. } => s.instants += 1,
            Event::ProcessSample(sample) => s.samples.push(sample),
            Event::AsyncSpan { begin_ts, end_ts, site, fields, unclosed, .. } => {
                s.asyncs.push((site.name.to_string(), begin_ts, end_ts, text(fields), unclosed))
            }
            Event::FlowOut { flow, kind, thread, ts, .. } => {
                s.flows.push(("out", flow, kind.as_str(), thread, ts, false))
            }
            Event::FlowIn { flow, kind, thread, ts, at_begin, .. } => {
                s.flows.push(("in", flow, kind.as_str(), thread, ts, at_begin))
            }
            _ => {}
        }
        Ok(())
    }
    fn finish(&mut self, end: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
        let mut s = self.0.lock();
        s.dropped = end.dropped_records;
        s.finished = true;
        s.finished_on = std::thread::current().name().map(str::to_string);
        writeln!(out, "done")
    }
}

/// The two front-ends of the record protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Front {
    /// The capture's own subscriber (`Session::start`).
    Own,
    /// A `CaptureLayer` on the registry (`Session::start_with_layer`).
    Layer,
}

/// Both front-ends, for tests that must hold under either.
pub const FRONTS: [Front; 2] = [Front::Own, Front::Layer];

/// A session into a fresh temporary directory with the collecting sink, at
/// `trace` level.
pub fn session(command: &str) -> (Session, Collected) {
    session_on(Front::Own, command, "trace")
}

/// The same with `filter` as `T_TRACE_FILTER`.
pub fn session_filtered(command: &str, filter: &str) -> (Session, Collected) {
    session_on(Front::Own, command, filter)
}

/// A session with `filter` recorded by the front-end `front`.
pub fn session_on(front: Front, command: &str, filter: &str) -> (Session, Collected) {
    session_with(front, command, &[("T_TRACE_FILTER", filter)])
}

/// A session recorded by `front`, with the variables `vars` (under the prefix `T`).
pub fn session_with(front: Front, command: &str, vars: &[(&str, &str)]) -> (Session, Collected) {
    let dir = tempfile::tempdir().unwrap().keep();
    let config = Config::from_lookup("T", &[], |n| match n {
        "T_TRACE_DIR" => Some(dir.clone().into()),
        _ => vars.iter().find(|(k, _)| *k == n).map(|(_, v)| (*v).into()),
    })
    .unwrap()
    .unwrap();
    let collected = Collected::default();
    let sinks: Vec<Box<dyn Sink>> = vec![Box::new(Collect(collected.clone()))];
    let session = match front {
        // Forwarding to nothing: a test harness may have a default of its own.
        Front::Own => Session::start_forwarding(&config, command, sinks, None),
        Front::Layer => {
            Session::start_with_layer(&config, command, sinks, tracing_subscriber::layer::Identity::new())
        }
    }
    .unwrap();
    (session, collected)
}
