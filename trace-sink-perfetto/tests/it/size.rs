//! What a span costs in the file.

use trace_sink_perfetto::PerfettoSink;
use tracing::info_span;
use tracing::level_filters::LevelFilter;

use crate::support::{assert_checker_accepts, capture_with, config};

const SPANS: usize = 10_000;

/// The budget per span (its begin and its end, no fields) in a compressed
/// file, all overhead included: the target the project set, under 25 bytes.
///
/// Each of the span's two packets holds: the packet's key and length (2
/// bytes), the timestamp's key and delta (3, for deltas from 128 ns to 16 us),
/// the sequence id's key and value (5), `sequence_flags` (2), and the track
/// event's key, length and type (4); the begin adds its name and category iids
/// (4). That makes 36 bytes, 34 when the deltas are under 128 ns: what the
/// default sink writes. Compressed (`PerfettoSink::compressed`), the
/// repetition between one span's packets and the next one's costs next to
/// nothing. For comparison, the Chrome JSON sink writes about 100 bytes for
/// the same span (one `X` line).
const BUDGET_BYTES_PER_SPAN: f64 = 25.0;
/// What the packets take before compression, at most.
const PLAIN_BYTES_PER_SPAN: f64 = 37.0;
/// What the thread CPU time adds before compression, at most: on each of the
/// two packets the keys of `extra_counter_values` (1 byte) and
/// `extra_counter_track_uuids` (2), the clock's reading (5 bytes below 34 s of
/// CPU, 6 below 1.2 hours) and the counter track's uuid (10).
const CPU_PLAIN_BYTES_PER_SPAN: f64 = 2.0 * (1.0 + 2.0 + 6.0 + 10.0);

fn steps() {
    for _ in 0..SPANS {
        let _span = info_span!("step").entered();
    }
}

#[test]
fn ten_thousand_spans_without_fields_take_the_plain_encoding_by_default() {
    // Without thread CPU time, then with it (the default for info spans).
    for (cpu, plain_budget) in [
        (LevelFilter::OFF, PLAIN_BYTES_PER_SPAN),
        (LevelFilter::INFO, PLAIN_BYTES_PER_SPAN + CPU_PLAIN_BYTES_PER_SPAN),
    ] {
        let (bytes, plain) = spans_cost(cpu, PerfettoSink::new());
        assert_eq!(bytes, plain, "nothing is compressed");
        assert!(bytes > BUDGET_BYTES_PER_SPAN, "{bytes:.2} bytes/span: compressed?");
        assert!(bytes < plain_budget, "{bytes:.2} bytes/span, thread CPU time for {cpu}");
    }
}

#[test]
fn ten_thousand_spans_without_fields_cost_under_the_budget_per_span_compressed() {
    for (cpu, plain_budget) in [
        (LevelFilter::OFF, PLAIN_BYTES_PER_SPAN),
        (LevelFilter::INFO, PLAIN_BYTES_PER_SPAN + CPU_PLAIN_BYTES_PER_SPAN),
    ] {
        let (per_span, plain) = spans_cost(cpu, PerfettoSink::compressed());
        assert!(plain > BUDGET_BYTES_PER_SPAN, "the span is compressed: {plain:.2} bytes/span uncompressed");
        assert!(plain < plain_budget, "{plain:.2} bytes/span uncompressed");
        assert!(
            per_span < BUDGET_BYTES_PER_SPAN,
            "{per_span:.2} bytes/span, over the budget of {BUDGET_BYTES_PER_SPAN}"
        );
    }
}

/// Bytes per span of a capture of `SPANS` spans, in the file and with its
/// compressed chunks inflated.
fn spans_cost(cpu: LevelFilter, sink: PerfettoSink) -> (f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path()).with_cpu(cpu);
    let (path, seen, ()) = capture_with(&config, sink, "size", steps);
    let inflated = dir.path().join("inflated.pftrace");
    assert_checker_accepts(&["--inflate", inflated.to_str().unwrap()], &[&path]);
    let spans = seen.iter().filter(|s| matches!(s, crate::support::Seen::Begin { .. })).count();
    assert_eq!(spans, SPANS, "every span reached the sink");
    let bytes = std::fs::metadata(&path).unwrap().len();
    let per_span = bytes as f64 / SPANS as f64;
    let plain = std::fs::metadata(&inflated).unwrap().len() as f64 / SPANS as f64;
    println!(
        "{SPANS} spans without fields, thread CPU time for {cpu}: {bytes} bytes, {per_span:.2} bytes/span \
         ({plain:.2} uncompressed)"
    );
    (per_span, plain)
}
