//! The capture's own subscriber (`Session::start`): span handles that are
//! cloned, moved, entered out of order or kept past the capture.

use std::collections::HashSet;
use std::sync::{Arc, Barrier};

use tracing::field::Empty;
use tracing::{info_span, trace_span, Span};

use crate::collect::{session, session_filtered};

#[test]
fn a_clone_closes_the_span_only_with_the_last_handle_on_whichever_thread_it_goes() {
    let (s, seen) = session("clone");
    let d = s.dispatch().clone();
    s.in_scope(|| {
        // Through the dispatcher, as `Span::clone` and `Drop for Span` call it.
        let span = info_span!("counted", n = 1u64);
        let id = span.id().unwrap();
        let a = d.clone_span(&id);
        let b = d.clone_span(&id);
        let d2 = d.clone();
        let elsewhere = std::thread::spawn(move || (d2.try_close(a), d2.try_close(b))).join().unwrap();
        assert_eq!(elsewhere, (false, false), "two of three handles gone: still open");
        assert!(d.try_close(id), "the third handle is the last");
        std::mem::forget(span); // its handle was the one just closed

        // The original goes first, on its own thread; the clone is entered,
        // recorded into and dropped, last, on another thread.
        let span = info_span!("moved", n = 2u64, later = Empty);
        let clone = span.clone();
        drop(span);
        trace_core::spawn("closer", move || {
            clone.in_scope(|| ());
            clone.in_scope(|| clone.record("later", 5u64));
            drop(clone);
        })
        .unwrap()
        .join()
        .unwrap();
    });
    s.finish();
    let seen = seen.lock();
    let closer = seen.threads.iter().find(|t| t.1 == "closer").expect("the closer has a lane").0;
    let begins: Vec<_> = seen.begins.iter().filter(|b| b.1 == "moved").collect();
    assert_eq!(begins.len(), 2, "{begins:?}");
    assert!(begins.iter().all(|b| b.0 == closer && b.2 == "n=2u"), "{begins:?}");
    let ends: Vec<_> = seen.ends.iter().filter(|e| e.1 == "moved").map(|e| (e.2.as_str(), e.3)).collect();
    assert_eq!(ends, [("", false), ("later=5u", false)]);
}

#[test]
fn handles_dropped_at_once_on_many_threads_close_the_span_exactly_once() {
    let (s, _seen) = session("race");
    let d = s.dispatch().clone();
    const HANDLES: usize = 4;
    for round in 0..100 {
        let id = s.in_scope(|| {
            let span = info_span!("raced", round);
            let id = span.id().unwrap();
            std::mem::forget(span);
            id
        });
        let mut handles: Vec<_> = (1..HANDLES).map(|_| d.clone_span(&id)).collect();
        handles.push(id);
        let start = Arc::new(Barrier::new(HANDLES));
        let closes: Vec<bool> = handles
            .into_iter()
            .map(|h| {
                let (d, start) = (d.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    d.try_close(h)
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        assert_eq!(closes.iter().filter(|c| **c).count(), 1, "round {round}: {closes:?}");
    }
    assert!(s.finish().is_complete());
}

#[test]
fn span_current_is_the_innermost_entered_span_and_records_into_it() {
    let (s, seen) = session("current");
    s.in_scope(|| {
        assert!(Span::current().is_none());
        let outer = info_span!("outer", done = Empty);
        let _o = outer.enter();
        let current = Span::current();
        assert_eq!(current.id(), outer.id());
        assert_eq!(current.metadata().map(|m| m.name()), Some("outer"));
        drop(current);
        {
            let inner = info_span!("inner", step = Empty).entered();
            assert_eq!(Span::current().metadata().map(|m| m.name()), Some("inner"));
            assert_ne!(Span::current().id(), outer.id());
            Span::current().record("step", 3u64);
            // A span entered on another thread is not current here.
            let inner_id = inner.id();
            let elsewhere = trace_core::spawn("other", move || {
                let t = info_span!("theirs").entered();
                (Span::current().id() == t.id(), Span::current().id() == inner_id)
            })
            .unwrap()
            .join()
            .unwrap();
            assert_eq!(elsewhere, (true, false));
        }
        assert_eq!(Span::current().id(), outer.id());
        Span::current().record("done", true);
    });
    s.finish();
    let seen = seen.lock();
    let recorded = |name: &str| seen.ends.iter().find(|e| e.1 == name).map(|e| e.2.clone());
    assert_eq!(recorded("inner").as_deref(), Some("step=3u"));
    assert_eq!(recorded("outer").as_deref(), Some("done=true"));
}

#[test]
fn spans_entered_out_of_creation_order_keep_their_names_and_fields() {
    let (s, seen) = session("order");
    let kept = s.in_scope(|| {
        let a = info_span!("a", k = 1u64);
        let b = info_span!("b");
        let c = info_span!("c", k = 3u64);
        {
            let _c = c.enter();
            let _a = a.enter();
            let _b = b.enter();
            assert_eq!(Span::current().id(), b.id());
        }
        // Many spans made and closed while `a` stays open, and many open at
        // once: each is still found by its id.
        for i in 0..1_000u64 {
            trace_span!("filler", i).in_scope(|| ());
        }
        let many: Vec<Span> = (0..600u64).map(|i| info_span!("many", i)).collect();
        for span in many.iter().rev() {
            span.in_scope(|| ());
        }
        let (a2, many2) = (a.clone(), many.clone());
        trace_core::spawn("late", move || {
            a2.in_scope(|| ());
            many2[7].in_scope(|| ());
        })
        .unwrap()
        .join()
        .unwrap();
        a.in_scope(|| ());
        // Closed after the capture: the writer takes each thread's records in
        // batches, so a close on this thread can reach it before the other
        // thread's enter, whose slice would then lack the span's fields.
        (a, many)
    });
    s.finish();
    drop(kept);
    let seen = seen.lock();
    let order: Vec<&str> = seen.order.iter().take(6).map(String::as_str).collect();
    assert_eq!(order, ["B c", "B a", "B b", "E b", "E a", "E c"]);
    let fields = |name: &str| -> Vec<&str> {
        seen.begins.iter().filter(|b| b.1 == name).map(|b| b.2.as_str()).collect()
    };
    assert_eq!(fields("a"), ["k=1u"; 3]);
    assert_eq!(fields("c"), ["k=3u"]);
    assert_eq!(fields("filler").len(), 1_000);
    let late = seen.threads.iter().find(|t| t.1 == "late").expect("a lane").0;
    let many = |on_late: bool| -> Vec<&str> {
        seen.begins
            .iter()
            .filter(|b| b.1 == "many" && (b.0 == late) == on_late)
            .map(|b| b.2.as_str())
            .collect()
    };
    let expected: Vec<String> = (0..600).rev().map(|i| format!("i={i}u")).collect();
    assert_eq!(many(false), expected);
    assert_eq!(many(true), ["i=7u"]);
}

#[test]
fn a_span_that_outlives_its_capture_does_no_harm_there_or_to_the_next_capture() {
    let (s, seen) = session("outlive");
    let d = s.dispatch().clone();
    let (span, clone) = s.in_scope(|| {
        let span = info_span!("long", n = 1u64, later = Empty);
        span.in_scope(|| ());
        let clone = span.clone();
        (span, clone)
    });
    assert!(s.finish().is_complete());
    // The capture has finished: all of this is recorded nowhere.
    span.in_scope(|| {
        span.record("later", 2u64);
        tracing::dispatcher::with_default(&d, || {
            assert_eq!(Span::current().id(), span.id());
            info_span!("after", x = 1u64).in_scope(|| tracing::info!("too late"));
        });
    });
    std::thread::spawn(move || {
        clone.in_scope(|| ());
        drop(clone);
    })
    .join()
    .unwrap();
    drop(span);
    {
        let seen = seen.lock();
        assert!(seen.finished);
        assert_eq!(seen.begins.iter().map(|b| b.1.as_str()).collect::<Vec<_>>(), ["long"]);
        assert_eq!(seen.instants, 0);
    }
    // The same thread then records into a new capture as usual.
    let (next, seen) = session("next");
    next.in_scope(|| info_span!("next", n = 3u64).in_scope(|| ()));
    assert!(next.finish().is_complete());
    let seen = seen.lock();
    assert_eq!(
        seen.begins.iter().map(|b| (b.1.as_str(), b.2.as_str())).collect::<Vec<_>>(),
        [("next", "n=3u")]
    );
}

#[test]
fn the_filter_holds_even_when_another_dispatcher_wants_the_callsite() {
    // Interest is cached per callsite for every live dispatcher at once: with
    // one that wants everything alive, the capture is asked each time.
    let everything = tracing::Dispatch::new(tracing_subscriber::Registry::default());
    let (s, seen) = session_filtered("filtered", "info");
    s.in_scope(|| {
        info_span!("kept").in_scope(|| {
            trace_span!("filtered_out").in_scope(|| tracing::debug!("filtered out too"));
            tracing::info!("kept too");
        })
    });
    tracing::dispatcher::with_default(&everything, || trace_span!("elsewhere").in_scope(|| ()));
    s.finish();
    let seen = seen.lock();
    assert_eq!(seen.begins.iter().map(|b| b.1.as_str()).collect::<Vec<_>>(), ["kept"]);
    assert_eq!(seen.instants, 1);
}

#[test]
fn span_ids_are_unique_across_threads_and_never_reused() {
    let (s, seen) = session("ids");
    const THREADS: u64 = 4;
    const SPANS: u64 = 2_000;
    let ids: Vec<u64> = s.in_scope(|| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                trace_core::spawn(format!("ids-{t}"), move || {
                    (0..SPANS)
                        .map(|i| {
                            let span = info_span!("numbered", t, i);
                            span.in_scope(|| ());
                            span.id().unwrap().into_u64()
                        })
                        .collect::<Vec<_>>()
                })
                .unwrap()
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert!(s.finish().is_complete());
    assert!(ids.iter().all(|id| *id != 0));
    assert_eq!(ids.iter().collect::<HashSet<_>>().len() as u64, THREADS * SPANS);
    // Every span's fields reached its own slice: ids did not mix in the writer.
    let seen = seen.lock();
    for t in 0..THREADS {
        let tid = seen.threads.iter().find(|x| x.1 == format!("ids-{t}")).unwrap().0;
        let mine: Vec<&str> = seen.begins.iter().filter(|b| b.0 == tid).map(|b| b.2.as_str()).collect();
        let want: Vec<String> = (0..SPANS).map(|i| format!("t={t}u i={i}u")).collect();
        assert_eq!(mine, want, "thread {t}");
    }
}

/// A tool's dispatcher that answers as a `tracing-subscriber` registry with
/// per-layer filters does: `never` as a call site's interest above its level,
/// yet `true` from `enabled` for anything. It counts the spans it is given.
struct ToolDispatcher {
    most: Arc<parking_lot::Mutex<tracing::level_filters::LevelFilter>>,
    spans: Arc<std::sync::atomic::AtomicU64>,
}

impl tracing::Subscriber for ToolDispatcher {
    fn register_callsite(&self, meta: &'static tracing::Metadata<'static>) -> tracing::subscriber::Interest {
        if *meta.level() <= *self.most.lock() {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::Id {
        tracing::Id::from_u64(self.spans.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &tracing::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::Id, _: &tracing::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::Id) {}
    fn exit(&self, _: &tracing::Id) {}
}

/// A forwarding session at `trace` into a fresh directory, with no sink.
fn forwarding(command: &str, inner: tracing::Dispatch) -> trace_core::Session {
    let dir = tempfile::tempdir().unwrap().keep();
    let config = trace_core::Config::from_lookup("T", &[], |n| match n {
        "T_TRACE_DIR" => Some(dir.clone().into()),
        "T_TRACE_FILTER" => Some("trace".into()),
        _ => None,
    })
    .unwrap()
    .unwrap();
    trace_core::Session::start_forwarding(&config, command, Vec::new(), Some(inner)).unwrap()
}

#[test]
fn spans_the_tools_dispatcher_never_enables_are_not_sent_to_it_until_its_interest_changes() {
    use tracing::level_filters::LevelFilter;
    let most = Arc::new(parking_lot::Mutex::new(LevelFilter::WARN));
    let spans = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let tool = ToolDispatcher { most: most.clone(), spans: spans.clone() };
    let s = forwarding("never", tracing::Dispatch::new(tool));
    let count = || spans.load(std::sync::atomic::Ordering::Relaxed);
    s.in_scope(|| {
        info_span!("below_its_level", n = 1u64).in_scope(|| ());
        assert_eq!(count(), 0, "an info span reached a dispatcher that never enables it");
        tracing::warn_span!("at_its_level").in_scope(|| ());
        assert_eq!(count(), 1, "a warn span did not reach it");
        // As a reloaded filter does: the level changes and interest is rebuilt.
        *most.lock() = LevelFilter::INFO;
        tracing::callsite::rebuild_interest_cache();
        info_span!("below_its_level", n = 2u64).in_scope(|| ());
        assert_eq!(count(), 2, "after the rebuild, the info span did not reach it");
    });
    s.finish();
}

#[test]
fn a_reloaded_per_layer_filter_gets_the_spans_it_now_enables() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use tracing::level_filters::LevelFilter;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::{reload, Layer};

    struct Counting(Arc<AtomicU64>);
    impl<S: tracing::Subscriber> Layer<S> for Counting {
        fn on_new_span(
            &self,
            _: &tracing::span::Attributes<'_>,
            _: &tracing::Id,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    let seen = Arc::new(AtomicU64::new(0));
    let (filter, handle) = reload::Layer::new(LevelFilter::WARN);
    let registry = tracing_subscriber::Registry::default().with(Counting(seen.clone()).with_filter(filter));
    let s = forwarding("reload", tracing::Dispatch::new(registry));
    s.in_scope(|| {
        info_span!("quiet").in_scope(|| ());
        tracing::warn_span!("loud").in_scope(|| ());
        assert_eq!(seen.load(Ordering::Relaxed), 1);
        handle.modify(|f| *f = LevelFilter::INFO).unwrap();
        info_span!("quiet").in_scope(|| ());
        assert_eq!(seen.load(Ordering::Relaxed), 2, "the reloaded layer missed an info span");
    });
    s.finish();
}
