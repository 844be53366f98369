//! The sink writes exactly the bytes of the plain reference encoder (kept in
//! `oracle/`), for a varied stream: every event kind, every value type (NaN
//! and infinite floats, negative and extreme integers), strings needing every
//! kind of escape, non-ASCII and long strings, messages long enough to be cut
//! (on multi-byte characters and line breaks too), call sites with and
//! without a source location, fields that share a name with the sink's own
//! `args`, spans left unclosed, dropped records, and a reused string buffer
//! that holds different text at the same address.

mod oracle;

use std::io::{self, Write};

use trace_core::{Event, Field, FileStatus, Finish, LaneReport, LaneSlice, Level, Sink, Site, Start, Value};
use trace_sink_chrome::ChromeSink;

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A string of `len` characters drawn from every class the escaper tells apart.
    fn text(&mut self, len: usize) -> String {
        const PIECES: &[&str] = &[
            "a", "Z", "0", " ", "_", ":", "/", "{", "}", "~", "\u{7f}", "\"", "\\", "\n", "\r", "\t",
            "\u{0}", "\u{1}", "\u{8}", "\u{c}", "\u{1b}", "\u{1f}", "é", "ü", "€", "字", "𝄞", "\u{2028}",
            "\u{feff}",
        ];
        let mut s = String::new();
        for _ in 0..len {
            // Mostly plain text, as real names are, with escapes here and there.
            let i = if self.below(4) == 0 { self.below(PIECES.len() as u64) } else { self.below(5) };
            s.push_str(PIECES[i as usize]);
        }
        s
    }

    fn float(&mut self) -> f64 {
        const SPECIAL: &[f64] = &[
            0.0,
            -0.0,
            1.0,
            -3.0,
            0.1,
            1.5e-7,
            123456.789,
            1e21,
            1e22,
            1e300,
            -1e-300,
            f64::MIN_POSITIVE,
            5e-324,
            f64::MAX,
            f64::MIN,
            f64::EPSILON,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        match self.below(3) {
            0 => SPECIAL[self.below(SPECIAL.len() as u64) as usize],
            1 => f64::from_bits(self.next()),
            _ => (self.next() as i64 as f64) / 1024.0,
        }
    }
}

/// Owned field values, borrowed as `Field`s when an event is built.
#[derive(Clone)]
enum Owned {
    I64(i64),
    U64(u64),
    F64(f64),
    Bool(bool),
    Str(String),
}

fn owned_fields(rng: &mut Rng, names: &[String]) -> Vec<(String, Owned)> {
    let n = match rng.below(6) {
        0..=1 => 0,
        2 => 1,
        3 => 2,
        4 => 3,
        _ => 8,
    };
    (0..n)
        .map(|_| {
            let name = names[rng.below(names.len() as u64) as usize].clone();
            let value = match rng.below(9) {
                0 => Owned::I64(rng.next() as i64),
                1 => Owned::I64([i64::MIN, i64::MAX, -1, 0, -10, 9][rng.below(6) as usize]),
                2 => Owned::U64(rng.next() >> rng.below(64)),
                3 => Owned::U64([u64::MAX, 0, 1, 10, 99, 100][rng.below(6) as usize]),
                4 | 5 => Owned::F64(rng.float()),
                6 => Owned::Bool(rng.below(2) == 0),
                _ => {
                    let len = if rng.below(20) == 0 { 300 + rng.below(5000) } else { rng.below(40) };
                    Owned::Str(rng.text(len as usize))
                }
            };
            (name, value)
        })
        .collect()
}

fn borrow(fields: &[(String, Owned)]) -> Vec<Field<'_>> {
    fields
        .iter()
        .map(|(name, v)| Field {
            name,
            value: match v {
                Owned::I64(v) => Value::I64(*v),
                Owned::U64(v) => Value::U64(*v),
                Owned::F64(v) => Value::F64(*v),
                Owned::Bool(v) => Value::Bool(*v),
                Owned::Str(s) => Value::Str(s),
            },
        })
        .collect()
}

/// Feeds one varied stream to `sink` and returns its whole output, written
/// through a `Vec`.
fn encode(sink: &mut dyn Sink, seed: u64, ops: usize, dropped_records: u64) -> Vec<u8> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    let command = rng.text(12);
    let mut start = Start::default();
    start.command = &command;
    start.stem = "stem";
    start.pid = 4_194_303;
    start.start_unix_ms = 1;
    start.start_ns = 1_000;
    start.startup_us = Some(5);
    start.filter = "info";
    sink.start(&start, &mut out).unwrap();
    // Names: a few plain ones (repeated, as call sites are) and some needing escapes.
    let names: Vec<String> = (0..12)
        .map(|i| {
            let len = 1 + rng.below(30) as usize;
            match i {
                0..=5 => format!("name_{i}"),
                // Keys the sink also writes: a tool's field wins.
                6 => "level".into(),
                7 => "location".into(),
                _ => rng.text(len),
            }
        })
        .collect();
    let targets: Vec<String> = vec!["app::module".into(), "écrit\\\"q\"".into(), rng.text(8)];
    let files: Vec<String> = vec!["src/main.rs".into(), "C:\\src\\\"odd\".rs".into(), rng.text(6)];
    let lanes: Vec<String> = vec!["ninja".into(), "tests".into(), "la\"ne\u{3}".into()];
    let report = LaneReport {
        lane: "ninja".into(),
        slices: 3,
        unavailable: None,
        notes: vec![],
        alignment_uncertainty_ns: 0,
    };
    // A buffer whose text changes in place: same address, same length.
    let mut reused = String::from("reused_AAAA");
    let mut ts = 0u64;
    let mut open: Vec<(u64, usize, usize, u64)> = Vec::new();
    for op in 0..ops {
        ts += rng.below(2_000_000);
        let thread = [1, 4242, u64::from(u32::MAX) + 7, u64::MAX][rng.below(4) as usize];
        let fields = owned_fields(&mut rng, &names);
        let fields = borrow(&fields);
        let levels = [Level::ERROR, Level::WARN, Level::INFO, Level::DEBUG, Level::TRACE];
        let level = levels[rng.below(5) as usize];
        let file = [None, Some(files[rng.below(3) as usize].as_str())][rng.below(2) as usize];
        let line = [None, Some(0), Some(141), Some(u32::MAX)][rng.below(4) as usize];
        let site = |n: usize, t: usize| Site::new(&names[n], &targets[t], level, file, line);
        let r = match rng.below(9) {
            0 => {
                let name = if rng.below(2) == 0 { rng.text(10) } else { format!("worker-{op}") };
                sink.event(&Event::ThreadName { thread, name: &name }, &mut out)
            }
            1 | 2 => {
                let (n, t) = (rng.below(names.len() as u64) as usize, rng.below(3) as usize);
                open.push((thread, n, t, ts));
                sink.event(
                    &Event::SpanBegin { thread, ts, site: site(n, t), fields: &fields, thread_cpu_ns: None },
                    &mut out,
                )
            }
            3 | 4 => match open.pop() {
                Some((thread, n, t, begin_ts)) => {
                    let recorded = &fields[..fields.len() / 2];
                    let end = Event::SpanEnd {
                        thread,
                        ts,
                        begin_ts,
                        site: site(n, t),
                        fields: &fields,
                        recorded,
                        unclosed: rng.below(4) == 0,
                        cpu: None,
                    };
                    sink.event(&end, &mut out)
                }
                None => Ok(()),
            },
            5 => {
                let (n, t) = (rng.below(names.len() as u64) as usize, rng.below(3) as usize);
                // Messages of every length around the cut, some with line
                // breaks and multi-byte characters where it falls.
                let len = [0, 1, 59, 60, 61, 62, 200][rng.below(7) as usize];
                let text = match rng.below(3) {
                    0 => "é".repeat(len),
                    _ => rng.text(len),
                };
                let mut with_message = vec![Field { name: "message", value: Value::Str(&text) }];
                if rng.below(8) == 0 {
                    with_message[0].value = Value::U64(3);
                }
                if rng.below(4) == 0 {
                    with_message.clear();
                }
                with_message.extend_from_slice(&fields);
                sink.event(&Event::Instant { thread, ts, site: site(n, t), fields: &with_message }, &mut out)
            }
            6 => {
                let begin_ns = ts.saturating_sub(rng.below(5_000_000));
                let slice = LaneSlice {
                    lane: &lanes[rng.below(3) as usize],
                    track: [0, 1, 2, 41, u32::MAX - 1][rng.below(5) as usize],
                    begin_ns,
                    // Now and then an end before the begin: the duration saturates.
                    end_ns: if rng.below(10) == 0 { begin_ns / 2 } else { ts },
                    name: &names[rng.below(names.len() as u64) as usize],
                    fields: &fields,
                };
                sink.event(&Event::Lane(slice), &mut out)
            }
            7 => {
                // Same address, same length, new text.
                let ptr = reused.as_ptr();
                let tail = rng.below(10_000);
                reused.clear();
                reused.push_str(&format!("reused_{tail:04}"));
                assert_eq!(ptr, reused.as_ptr());
                let site = Site::new(&reused, &reused, Level::INFO, Some(&reused), None);
                sink.event(&Event::Instant { thread, ts, site, fields: &fields }, &mut out).unwrap();
                // A span from that site, with a field named by the buffer too.
                let mut named = vec![Field { name: &reused, value: Value::U64(tail) }];
                named.extend_from_slice(&fields);
                let end = Event::SpanEnd {
                    thread,
                    ts,
                    begin_ts: ts / 2,
                    site,
                    fields: &named,
                    recorded: &[],
                    unclosed: rng.below(4) == 0,
                    cpu: None,
                };
                sink.event(&end, &mut out)
            }
            _ => sink.event(&Event::LaneReport(&report), &mut out),
        };
        r.unwrap();
    }
    // Times at the ends of the range, and spans left open.
    for ts in [0, 999, u64::MAX] {
        let site = Site::new("edge", "t", Level::INFO, None, None);
        sink.event(&Event::Instant { thread: 0, ts, site, fields: &[] }, &mut out).unwrap();
    }
    while let Some((thread, n, t, begin_ts)) = open.pop() {
        let site = Site::new(&names[n], &targets[t], Level::INFO, None, None);
        let end = Event::SpanEnd {
            thread,
            ts,
            begin_ts,
            site,
            fields: &[],
            recorded: &[],
            unclosed: true,
            cpu: None,
        };
        sink.event(&end, &mut out).unwrap();
    }
    let files: Vec<FileStatus> = Vec::new();
    let mut end = Finish::default();
    end.end_ns = ts;
    end.dropped_records = dropped_records;
    end.files = &files;
    sink.finish(&end, &mut out).unwrap();
    out
}

fn same(seed: u64, ops: usize, dropped_records: u64) {
    let reference = encode(&mut oracle::OracleChromeSink::new(), seed, ops, dropped_records);
    let new = encode(&mut ChromeSink::new(), seed, ops, dropped_records);
    if reference != new {
        let at =
            reference.iter().zip(&new).position(|(a, b)| a != b).unwrap_or(reference.len().min(new.len()));
        let show = |b: &[u8]| {
            String::from_utf8_lossy(&b[at.saturating_sub(80)..(at + 80).min(b.len())]).into_owned()
        };
        panic!(
            "seed {seed}: outputs differ at byte {at} (reference {} bytes, sink {})\nreference: {}\nsink:      {}",
            reference.len(),
            new.len(),
            show(&reference),
            show(&new)
        );
    }
}

#[test]
fn output_is_byte_identical_to_the_reference_encoder() {
    for seed in 1..=40 {
        same(seed * 0x9e37_79b9, 500, seed % 3);
    }
}

#[test]
fn a_long_stream_is_byte_identical_too() {
    // More than any buffer the sink keeps: its output goes out in several pieces.
    same(0x5eed, 40_000, 0);
}

#[test]
fn an_empty_capture_is_byte_identical() {
    same(7, 0, 0);
    same(8, 0, 12);
}

/// Accepts nothing: every write fails.
struct Broken;

impl Write for Broken {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::other("broken"))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_write_error_is_reported_by_the_end() {
    let mut sink = ChromeSink::new();
    let mut start = Start::default();
    start.command = "c";
    start.stem = "s";
    start.pid = 1;
    start.filter = "info";
    let mut r = sink.start(&start, &mut Broken);
    let site = Site::new("x", "t", Level::INFO, None, None);
    for ts in 0..10 {
        r = r.and(sink.event(&Event::Instant { thread: 1, ts, site, fields: &[] }, &mut Broken));
    }
    let files: Vec<FileStatus> = Vec::new();
    let mut end = Finish::default();
    end.end_ns = 10;
    end.files = &files;
    r = r.and(sink.finish(&end, &mut Broken));
    assert!(r.is_err());
}

/// The reference encoder under another file name, to run beside the sink
/// in one capture.
struct Beside(oracle::OracleChromeSink);

impl Sink for Beside {
    fn name(&self) -> &'static str {
        "oracle"
    }

    fn suffix(&self) -> &'static str {
        "oracle.json"
    }

    fn start(&mut self, start: &Start<'_>, out: &mut dyn Write) -> io::Result<()> {
        self.0.start(start, out)
    }

    fn event(&mut self, event: &Event<'_>, out: &mut dyn Write) -> io::Result<()> {
        self.0.event(event, out)
    }

    fn finish(&mut self, end: &Finish<'_>, out: &mut dyn Write) -> io::Result<()> {
        self.0.finish(end, out)
    }
}

/// Spans of `tracing` call sites (whose text is `'static`) of varied shapes:
/// integer fields, other values, none, a field recorded later or never, a
/// long key, many fields, CPU times, a span in pieces, and one left open.
fn traced_work(round: u64) {
    use tracing::field::Empty;
    for i in 0..400u64 {
        tracing::info_span!("plain", a = i, b = 7).in_scope(|| ());
        tracing::warn_span!("with_cpu", n = i as i64 - 200).in_scope(|| ());
        tracing::info_span!("bare").in_scope(|| ());
        tracing::info_span!("values", path = "src/a \"b\".rs", ratio = 0.5, ok = i % 2 == 0).in_scope(|| ());
        let late = tracing::info_span!("late", a = i, b = Empty, c = Empty);
        match i % 3 {
            0 => late.record("b", "text"),
            1 => late.record("c", i),
            _ => &late,
        };
        late.in_scope(|| ());
        drop(late);
        tracing::info_span!(
            "long_key",
            a_field_name_long_enough_to_be_longer_than_most_keys_any_tool_writes = i,
            b = 1
        )
        .in_scope(|| ());
        tracing::info_span!(
            "many",
            f1 = 1,
            f2 = 2,
            f3 = 3,
            f4 = 4,
            f5 = 5,
            f6 = 6,
            f7 = 7,
            f8 = 8,
            f9 = 9,
            f10 = 10,
            f11 = 11,
            f12 = 12,
            f13 = u64::MAX
        )
        .in_scope(|| ());
        if i % 40 == 7 {
            // Instants: two sites of one name in one file, a field that
            // takes the place of the site's level or location, a message of
            // two lines.
            tracing::warn!(target: "other", i, "first\nsecond");
            tracing::info!(name: "same", i, "one");
            tracing::error!(name: "same", i, "two");
            tracing::warn!(level = "the tool's", "own level");
            tracing::info!(location = "the tool's", n = 3, "own location");
        }
        if i % 50 == 0 {
            tracing::info!(round, i, "progress");
            let pieces = tracing::info_span!("pieces", i);
            pieces.in_scope(|| ());
            pieces.in_scope(|| ());
        }
    }
}

#[test]
fn a_capture_of_real_call_sites_on_several_threads_is_byte_identical_to_the_reference_encoder() {
    let dir = tempfile::tempdir().unwrap();
    let config = trace_core::Config::from_lookup("SAMEBYTES", &["chrome"], |n| match n {
        "SAMEBYTES_TRACE_DIR" => Some(dir.path().into()),
        "SAMEBYTES_TRACE_CPU" => Some("warn".into()),
        "SAMEBYTES_TRACE_SAMPLE" => Some("off".into()),
        _ => None,
    })
    .unwrap()
    .unwrap();
    let sinks: Vec<Box<dyn Sink>> =
        vec![Box::new(ChromeSink::new()), Box::new(Beside(oracle::OracleChromeSink::new()))];
    let session = trace_core::Session::start(&config, "same", sinks).unwrap();
    session.in_scope(|| {
        let dispatch = session.dispatch().clone();
        std::thread::scope(|scope| {
            for round in 1..=2 {
                let dispatch = dispatch.clone();
                scope.spawn(move || tracing::dispatcher::with_default(&dispatch, || traced_work(round)));
            }
            traced_work(0);
        });
        std::mem::forget(tracing::info_span!("left_open", a = 1).entered());
    });
    let report = session.finish();
    assert_eq!(report.unclosed_spans, 1, "{report:?}");
    let [text, reference] = [0, 1].map(|i| std::fs::read_to_string(&report.files[i].path).unwrap());
    // The reference encoder is older than the capture's family metadata and
    // than async spans and flows (whose events this does not change).
    let newer = |line: &&str| {
        line.starts_with(r#"{"name":"cabin_trace_"#)
            || [r#""ph":"b""#, r#""ph":"e""#, r#""ph":"s""#, r#""ph":"f""#].iter().any(|ph| line.contains(ph))
    };
    let sink: String = text.split_inclusive('\n').filter(|l| !newer(l)).collect();
    assert!(text.split_inclusive('\n').filter(newer).count() > 4, "no async span or family metadata");
    let (sink, reference) = (sink.as_bytes(), reference.as_bytes());
    for shape in ["\"plain\"", "\"tts\"", "\"unclosed\":true", "\"f13\":18446744073709551615", "\"c\":"] {
        assert!(text.contains(shape), "the capture has no {shape}");
    }
    if sink != reference {
        let at =
            sink.iter().zip(reference).position(|(a, b)| a != b).unwrap_or(sink.len().min(reference.len()));
        let show = |b: &[u8]| {
            String::from_utf8_lossy(&b[at.saturating_sub(120)..(at + 80).min(b.len())]).into_owned()
        };
        panic!("outputs differ at byte {at}\nreference: {}\nsink:      {}", show(reference), show(sink));
    }
}
