//! A write failure mid-capture: kept by the checked writer, never a panic.

use std::io::{self, Write};

use trace_core::{CheckedWriter, Event, Field, Finish, LaneSlice, Level, Sink, Site, Start, Value};
use trace_sink_perfetto::PerfettoSink;

/// Takes `limit` bytes, then fails every write as a full disk does.
struct Full {
    limit: usize,
    got: usize,
}

impl Write for Full {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.got >= self.limit {
            return Err(io::Error::other("no space left on device"));
        }
        let n = buf.len().min(self.limit - self.got);
        self.got += n;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn start() -> Start<'static> {
    let mut start = Start::default();
    start.command = "build";
    start.stem = "build-1-2-3";
    start.pid = std::process::id();
    start.start_unix_ms = 1;
    start.start_ns = 1_000;
    start.filter = "info";
    start
}

#[test]
fn a_write_failure_mid_capture_is_kept_and_the_sink_goes_on_without_panicking() {
    for limit in [0, 1, 10, 100, 300] {
        let mut sink = PerfettoSink::new();
        let mut out = CheckedWriter::new(Full { limit, got: 0 });
        let site = Site::new("compile", "cabin::build", Level::INFO, None, None);
        let fields = [Field { name: "unit", value: Value::Str("main.c") }];
        sink.start(&start(), &mut out).unwrap();
        for i in 0..50u64 {
            let events = [
                Event::ThreadName { thread: 7, name: "main" },
                Event::SpanBegin { thread: 7, ts: 2_000 + i, site, fields: &fields, thread_cpu_ns: None },
                Event::Instant { thread: 8, ts: 2_000 + i, site, fields: &fields },
                Event::Lane(LaneSlice {
                    lane: "ninja",
                    track: 1,
                    begin_ns: 5,
                    end_ns: 9,
                    name: "a.o",
                    fields: &[],
                }),
                Event::SpanEnd {
                    thread: 7,
                    ts: 3_000 + i,
                    begin_ts: 2_000 + i,
                    site,
                    fields: &fields,
                    recorded: &[],
                    unclosed: false,
                    cpu: None,
                },
            ];
            for e in &events {
                assert!(sink.event(e, &mut out).is_ok(), "the checked writer swallows the error");
            }
        }
        let mut end = Finish::default();
        end.end_ns = 9_000;
        end.dropped_records = 3;
        assert!(sink.finish(&end, &mut out).is_ok());
        assert_eq!(out.get_ref().got, limit, "the file got what fitted");
        assert!(out.written() <= limit as u64, "nothing is counted past the failure");
        let error = out.error().map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("no space left on device"),
            "the first error is kept (limit {limit})"
        );
    }
}

#[test]
fn the_sink_names_itself_and_its_file() {
    let sink = PerfettoSink::default();
    assert_eq!((sink.name(), sink.suffix()), ("perfetto", "pftrace"));
    assert_eq!((trace_sink_perfetto::NAME, trace_sink_perfetto::SUFFIX), ("perfetto", "pftrace"));
}
