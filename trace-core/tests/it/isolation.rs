//! A sink that panics costs only its own file.

use std::io::{self, Write};

use trace_core::{Config, Event, Finish, Session, Sink};

/// Panics on its `at`-th event.
struct Panicky {
    at: u64,
    n: u64,
}

impl Sink for Panicky {
    fn name(&self) -> &'static str {
        "panicky"
    }
    fn suffix(&self) -> &'static str {
        "panicky.txt"
    }
    fn event(&mut self, _event: &Event<'_>, out: &mut dyn Write) -> io::Result<()> {
        self.n += 1;
        if self.n == self.at {
            panic!("event {} is one too many", self.n);
        }
        writeln!(out, "event {}", self.n)
    }
    fn finish(&mut self, _end: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "end")
    }
}

#[test]
fn a_sink_that_panics_on_its_100th_event_leaves_its_own_partial_and_the_others_complete() {
    let _heavy = crate::HEAVY.lock();
    // Few spans: finished on this thread. Many: on the writer thread.
    for spans in [60u64, 20_000] {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::from_lookup("T", &[], |n| (n == "T_TRACE_DIR").then(|| dir.path().into()))
            .unwrap()
            .unwrap();
        let collected = crate::collect::Collected::default();
        let sinks: Vec<Box<dyn Sink>> =
            vec![Box::new(Panicky { at: 100, n: 0 }), Box::new(crate::collect::Collect(collected.clone()))];
        let session = Session::start_forwarding(&config, "panic", sinks, None).unwrap();
        session.in_scope(|| {
            for i in 0..spans {
                tracing::info_span!("work", i).in_scope(|| ());
            }
        });
        let report = session.finish();
        let (panicky, other) = (&report.files[0], &report.files[1]);
        assert!(!panicky.complete, "{spans}: {report:?}");
        let why = panicky.error.as_deref().unwrap_or("");
        assert!(why.contains("panicky sink panicked") && why.contains("event 100"), "{why}");
        assert!(!panicky.path.exists());
        let partial = format!("{}.partial", panicky.path.display());
        let written = std::fs::read_to_string(&partial).unwrap();
        assert!(written.contains("event 99\n") && !written.contains("end"), "{spans}");
        assert!(other.complete && other.path.exists(), "{spans}: {report:?}");
        assert_eq!(collected.lock().ends.len() as u64, spans, "the other sink saw every span");
        assert!(report.warnings().iter().any(|w| w.contains("panicky") && w.contains(".partial")));
    }
}
