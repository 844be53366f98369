//! Records of one span written on several threads all reach it: the writer
//! puts every thread's records back in time order, whichever thread's batch
//! arrives first.

use tracing::field::Empty;
use tracing::{info_span, Instrument, Span};

use crate::collect::{session_on, Front, Seen, FRONTS};

/// Enough spans to fill a batch, so that this thread's records reach the
/// writer before those of a thread that has not filled one.
fn fill_a_batch() {
    for _ in 0..1500 {
        info_span!("filler").in_scope(|| ());
    }
}

fn fields_of<'a>(seen: &'a Seen, name: &str) -> Vec<&'a str> {
    seen.end_fields.iter().filter(|e| e.0 == name).map(|e| e.1.as_str()).collect()
}

#[test]
fn a_span_moved_to_another_thread_keeps_its_creation_fields() {
    let _heavy = crate::HEAVY.lock();
    for front in FRONTS {
        let (s, seen) = session_on(front, "moved", "trace");
        s.in_scope(|| {
            // Created here, in this thread's partial batch; entered, recorded
            // and closed on a thread whose full batch reaches the writer first.
            let span = info_span!("download", url = "https://x", bytes = Empty);
            trace_core::spawn("mover", move || {
                span.in_scope(|| {
                    Span::current().record("bytes", 7u64);
                });
                drop(span);
                fill_a_batch();
            })
            .unwrap()
            .join()
            .unwrap();
        });
        s.finish();
        let seen = seen.lock();
        let mover = seen.threads.iter().find(|t| t.1 == "mover").unwrap().0;
        let begin = seen.begins.iter().find(|b| b.1 == "download").unwrap();
        assert_eq!((begin.0, begin.2.as_str()), (mover, r#"url="https://x""#), "{front:?}");
        assert_eq!(fields_of(&seen, "download"), [r#"url="https://x" bytes=7u"#], "{front:?}");
    }
}

#[test]
fn a_record_from_another_thread_reaches_the_span_open_here() {
    let _heavy = crate::HEAVY.lock();
    for front in FRONTS {
        let (s, seen) = session_on(front, "record", "trace");
        s.in_scope(|| {
            let span = info_span!("download", bytes = Empty);
            let _entered = span.enter();
            let handle = span.clone();
            trace_core::spawn("worker", move || {
                handle.record("bytes", 7u64);
                drop(handle);
                fill_a_batch();
            })
            .unwrap()
            .join()
            .unwrap();
        });
        s.finish();
        let seen = seen.lock();
        assert_eq!(fields_of(&seen, "download"), ["bytes=7u"], "{front:?}");
        let end = seen.ends.iter().find(|e| e.1 == "download").unwrap();
        assert_eq!(end.2, "bytes=7u", "recorded while open, on the slice: {front:?}");
    }
}

#[test]
fn a_record_from_another_thread_between_an_enter_and_its_close_reaches_the_slice() {
    let _heavy = crate::HEAVY.lock();
    for front in FRONTS {
        let (s, seen) = session_on(front, "between", "trace");
        s.in_scope(|| {
            // This thread stores the span's first enter and then, with nothing
            // between them, its exit and close; a plain thread records a value
            // into it in the meantime, stamped between the two.
            let span = info_span!("download", bytes = Empty);
            let entered = span.enter();
            let handle = span.clone();
            std::thread::scope(|t| {
                t.spawn(move || {
                    handle.record("bytes", 7u64);
                    drop(handle);
                });
            });
            drop(entered);
            drop(span);
        });
        s.finish();
        let seen = seen.lock();
        assert_eq!(fields_of(&seen, "download"), ["bytes=7u"], "{front:?}");
        let end = seen.ends.iter().find(|e| e.1 == "download").unwrap();
        assert_eq!(end.2, "bytes=7u", "recorded while open, on the slice: {front:?}");
    }
}

#[test]
fn instrumented_futures_on_a_multi_thread_runtime_lose_no_field() {
    let _heavy = crate::HEAVY.lock();
    const TASKS: u64 = 48;
    for front in FRONTS {
        let (s, seen) = session_on(front, "tokio", "trace");
        s.in_scope(|| {
            let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).build().unwrap();
            runtime.block_on(async {
                let tasks: Vec<_> = (0..TASKS)
                    .map(|n| {
                        let task = async move {
                            for _ in 0..5 {
                                tokio::task::yield_now().await;
                            }
                            Span::current().record("done", true);
                        };
                        // Created here, polled on whichever worker takes it.
                        let span = info_span!("task", n, done = Empty);
                        runtime_spawn(tracing::instrument::WithSubscriber::with_current_subscriber(
                            task.instrument(span),
                        ))
                    })
                    .collect();
                for t in tasks {
                    t.await.unwrap();
                }
            });
        });
        let report = s.finish();
        assert_eq!(report.dropped_records, 0);
        let seen = seen.lock();
        let polls = fields_of(&seen, "task");
        assert!(polls.len() as u64 >= TASKS, "{front:?}: {} polls", polls.len());
        let missing: Vec<&&str> = polls.iter().filter(|f| !f.starts_with("n=")).collect();
        assert!(
            missing.is_empty(),
            "{front:?}: {} of {} polls lack their fields",
            missing.len(),
            polls.len()
        );
        let mut tasks: Vec<&str> = polls.iter().map(|f| f.split(' ').next().unwrap()).collect();
        tasks.sort_unstable();
        tasks.dedup();
        assert_eq!(tasks.len() as u64, TASKS, "{front:?}");
        // The last poll records `done` (and the future's drop enters the span
        // once more): every task's last slices carry it.
        let mut finished: Vec<&str> =
            polls.iter().filter(|f| f.ends_with("done=true")).map(|f| f.split(' ').next().unwrap()).collect();
        finished.sort_unstable();
        finished.dedup();
        assert_eq!(finished.len() as u64, TASKS, "{front:?}: every task's late field reaches its slices");
        // Each task ran in pieces: one async span apiece, with its fields,
        // from its first poll's begin to (at least) its last poll's end.
        let asyncs: Vec<_> = seen.asyncs.iter().filter(|a| a.0 == "task").collect();
        assert_eq!(asyncs.len() as u64, TASKS, "{front:?}");
        let mut numbered: Vec<&str> = asyncs.iter().map(|a| a.3.split(' ').next().unwrap()).collect();
        numbered.sort_unstable();
        numbered.dedup();
        assert_eq!(numbered.len() as u64, TASKS, "{front:?}: one async span per task");
        for (_, begin, end, fields, unclosed) in asyncs {
            assert!(!unclosed && fields.ends_with("done=true"), "{front:?}: {fields}");
            let n = fields.split(' ').next().unwrap();
            let pieces: Vec<_> =
                seen.slices.iter().filter(|s| s.1 == "task" && s.4.split(' ').next() == Some(n)).collect();
            assert_eq!(
                pieces.iter().map(|p| p.2).min(),
                Some(*begin),
                "{front:?}: {n} begins with its first poll"
            );
            assert!(pieces.iter().all(|p| p.3 <= *end), "{front:?}: {n}'s polls end inside it");
        }
    }
}

fn runtime_spawn<F>(f: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(f)
}

/// The same command under either front-end, written as text without thread
/// ids or times.
fn stream_of(front: Front) -> Vec<String> {
    let (s, seen) = session_on(front, "same", "debug");
    s.in_scope(|| {
        let outer = info_span!("outer", phase = "resolve", count = Empty).entered();
        for i in 0..3u64 {
            tracing::debug_span!("item", i).in_scope(|| tracing::info!(i, "item done"));
        }
        let moved = info_span!("helper_work", rounds = 2u64);
        trace_core::spawn("helper", move || moved.in_scope(|| tracing::warn!("from the helper")))
            .unwrap()
            .join()
            .unwrap();
        outer.record("count", 3u64);
        tracing::trace_span!("filtered_out").in_scope(|| ());
    });
    s.finish();
    let seen = seen.lock();
    let name = |tid: u64| seen.threads.iter().find(|t| t.0 == tid).map_or("?", |t| t.1.as_str()).to_string();
    let mut out: Vec<String> =
        seen.begins.iter().map(|b| format!("B {} {} {}", name(b.0), b.1, b.2)).collect();
    out.extend(seen.ends.iter().map(|e| format!("E {} {} {} {}", name(e.0), e.1, e.2, e.3)));
    out.extend(seen.end_fields.iter().map(|e| format!("F {} {}", e.0, e.1)));
    out.push(format!("instants {}", seen.instants));
    out.push(seen.order.join(","));
    out
}

#[test]
fn both_front_ends_write_the_same_stream_for_the_same_command() {
    let _heavy = crate::HEAVY.lock();
    let own = stream_of(Front::Own);
    let layer = stream_of(Front::Layer);
    assert_eq!(own, layer);
    assert!(own.iter().any(|l| l.starts_with("F outer") && l.contains("count=3u")), "{own:?}");
    assert!(own.iter().any(|l| l.starts_with("B helper helper_work rounds=2u")), "{own:?}");
    assert!(own.iter().all(|l| !l.contains("filtered_out")), "{own:?}");
    assert!(own.contains(&"instants 4".to_string()), "{own:?}");
}
