//! Spans that run in pieces, and the flows between spans: the writer's notes
//! of where each span was entered, and of the links `follows_from` and
//! [`crate::bind`] make.
//!
//! A span is known to run in pieces only when it is entered a second time (a
//! future polled again, a span entered on another thread), so its whole life
//! ([`Event::AsyncSpan`]) is sent at its close, with the times noted at its
//! first enter and its last exit. A flow is sent as its two ends as they
//! happen ([`Event::FlowOut`], [`Event::FlowIn`]): a sink has written the
//! source's begin before the link is known, so each end names a thread and a
//! time, and the sink binds it to the slice there.

use super::{borrow_fields, feed, IdMap, SinkFile, Spans, ThreadState};
use crate::event::{Event, FlowKind, Site, Tid};
use crate::record::Meta;

/// Where a span was entered, while it lives.
struct Life {
    meta: Meta,
    first_ns: u64,
    first_tid: Tid,
    /// Its last piece, for a flow from it once it is not running.
    last_begin_ns: u64,
    last_end_ns: u64,
    last_tid: Tid,
    /// Entered more than once: it gets a track of its own.
    split: bool,
}

/// The writer's state for async spans and flows.
#[derive(Default)]
pub(super) struct SpanLives {
    lives: IdMap<Life>,
    /// Async spans sent so far.
    asyncs: u64,
    /// Flows sent so far.
    flows: u64,
    /// The flow of each helper started ([`crate::bind`]'s number to ours),
    /// until the helper says where it runs.
    spawned: IdMap<u64>,
    /// Per thread (the writer's state index), the flows that end at its next span.
    arriving: Vec<Vec<(u64, FlowKind)>>,
    /// Per span not yet entered, the flows that end at its first piece.
    followers: IdMap<Vec<u64>>,
}

impl SpanLives {
    /// Span `id` is entered on thread `tid` (state `state`) at `ts`; sends the
    /// flows that end at this piece, before its begin.
    #[inline]
    pub(super) fn enter(
        &mut self,
        sinks: &mut [SinkFile],
        state: usize,
        tid: Tid,
        id: u64,
        meta: Meta,
        ts: u64,
    ) {
        match self.lives.get_mut(&id) {
            Some(life) => life.split = true,
            None => self.first_piece(id, meta, tid, ts),
        }
        self.arrivals(sinks, state, tid, id, ts);
    }

    /// The first piece of span `id`, begun on `tid` at `begin_ns`, noted
    /// after the fact: a span in its first piece is not noted at its enter
    /// (most spans have no other), only once it may have another.
    pub(super) fn first_piece(&mut self, id: u64, meta: Meta, tid: Tid, begin_ns: u64) {
        self.lives.entry(id).or_insert(Life {
            meta,
            first_ns: begin_ns,
            first_tid: tid,
            last_begin_ns: begin_ns,
            last_end_ns: begin_ns,
            last_tid: tid,
            split: false,
        });
    }

    /// Sends the flows that end at the piece of span `id` that thread `tid`
    /// (state `state`) begins at `ts`, before its begin.
    #[inline(always)]
    pub(super) fn arrivals(&mut self, sinks: &mut [SinkFile], state: usize, tid: Tid, id: u64, ts: u64) {
        // Most begins have none: two lengths read, no call.
        if self.followers.is_empty() && self.arriving.get(state).is_none_or(Vec::is_empty) {
            return;
        }
        self.send_arrivals(sinks, state, tid, id, ts);
    }

    #[inline(never)]
    fn send_arrivals(&mut self, sinks: &mut [SinkFile], state: usize, tid: Tid, id: u64, ts: u64) {
        if let Some(arriving) = self.arriving.get_mut(state).filter(|a| !a.is_empty()) {
            for (flow, kind) in arriving.drain(..) {
                feed(sinks, &Event::FlowIn { flow, kind, thread: tid, ts, at_begin: true });
            }
        }
        if !self.followers.is_empty() {
            for flow in self.followers.remove(&id).unwrap_or_default() {
                let kind = FlowKind::FollowsFrom;
                feed(sinks, &Event::FlowIn { flow, kind, thread: tid, ts, at_begin: true });
            }
        }
    }

    /// A piece of span `id`, begun at `begin_ns` on `tid`, ended at `end_ns`.
    #[inline]
    pub(super) fn exit(&mut self, id: u64, tid: Tid, begin_ns: u64, end_ns: u64) {
        if let Some(life) = self.lives.get_mut(&id) {
            life.last_begin_ns = begin_ns;
            life.last_end_ns = end_ns;
            life.last_tid = tid;
        }
    }

    /// Span `id` closed at `ts`: sends its whole life if it ran in pieces.
    #[inline]
    pub(super) fn close(&mut self, sinks: &mut [SinkFile], spans: &Spans, id: u64, ts: u64) {
        if let Some(life) = self.lives.remove(&id) {
            if life.split {
                let end = ts.max(life.last_end_ns);
                self.send_async(sinks, spans, id, &life, end, false);
            }
        }
        if !self.followers.is_empty() {
            self.followers.remove(&id);
        }
    }

    fn send_async(
        &mut self,
        sinks: &mut [SinkFile],
        spans: &Spans,
        id: u64,
        life: &Life,
        end: u64,
        unclosed: bool,
    ) {
        self.asyncs += 1;
        // Rare (a span in pieces, at its close): a list of its own.
        let mut fields = Vec::new();
        borrow_fields(&mut fields, spans.get(&id));
        let event = Event::AsyncSpan {
            id: self.asyncs,
            thread: life.first_tid,
            begin_ts: life.first_ns,
            end_ts: end.max(life.first_ns),
            site: Site::of(life.meta),
            fields: &fields,
            unclosed,
        };
        feed(sinks, &event);
    }

    /// Thread `tid` (state `state`, whose innermost open span is `open`) starts
    /// the helper of `bind`'s flow `spawned` at `ts`.
    pub(super) fn spawn(&mut self, sinks: &mut [SinkFile], tid: Tid, open: bool, spawned: u64, ts: u64) {
        // Started outside any span: there is nothing to draw it from.
        if !open {
            return;
        }
        self.flows += 1;
        self.spawned.insert(spawned, self.flows);
        feed(sinks, &Event::FlowOut { flow: self.flows, kind: FlowKind::Spawn, thread: tid, ts });
    }

    /// Thread `state` runs the helper of `bind`'s flow `spawned`.
    pub(super) fn helper(&mut self, state: usize, spawned: u64) {
        let Some(flow) = self.spawned.remove(&spawned) else { return };
        if self.arriving.len() <= state {
            self.arriving.resize_with(state + 1, Vec::new);
        }
        self.arriving[state].push((flow, FlowKind::Spawn));
    }

    /// Span `id` follows from span `origin`, as recorded at `ts`: a flow from
    /// where `origin` runs (or last ran) to `id`'s piece running now, or else
    /// to its next one.
    pub(super) fn follows(
        &mut self,
        sinks: &mut [SinkFile],
        states: &[Option<ThreadState>],
        id: u64,
        origin: u64,
        ts: u64,
    ) {
        let running =
            |span: u64| states.iter().flatten().find(|l| l.stack.iter().any(|o| o.id == span)).map(|l| l.tid);
        let source = match (running(origin), self.lives.get(&origin)) {
            (Some(tid), _) => (tid, ts),
            // Just inside its last piece, so that the flow binds to it.
            (None, Some(life)) => (life.last_tid, life.last_end_ns.saturating_sub(1).max(life.last_begin_ns)),
            // Never entered, or closed: nowhere to draw it from.
            (None, None) => return,
        };
        self.flows += 1;
        let (flow, kind) = (self.flows, FlowKind::FollowsFrom);
        feed(sinks, &Event::FlowOut { flow, kind, thread: source.0, ts: source.1 });
        match running(id) {
            Some(tid) => feed(sinks, &Event::FlowIn { flow, kind, thread: tid, ts, at_begin: false }),
            None => self.followers.entry(id).or_default().push(flow),
        }
    }

    /// The finish at `end_ns`: every span that ran in pieces and is still
    /// open is sent, ending there, unclosed.
    pub(super) fn finish(&mut self, sinks: &mut [SinkFile], spans: &Spans, end_ns: u64) {
        let mut open: Vec<(u64, Life)> = self.lives.drain().filter(|(_, l)| l.split).collect();
        open.sort_by_key(|(_, l)| l.first_ns);
        for (id, life) in open {
            self.send_async(sinks, spans, id, &life, end_ns, true);
        }
    }
}
