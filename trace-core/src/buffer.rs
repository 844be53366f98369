//! Per-thread buffers and their hand-over to the writer.
//!
//! Each thread that records into a capture has a [`ThreadBuf`] of its own for
//! it, found through a thread-local list of [`Slot`]s. The thread appends raw
//! records to the buffer's batch and, when the batch is full, hands it over
//! through the capture's channel ([`Handoff`]).
//!
//! Every batch carries a sequence number per thread and an `until` stamp: every
//! record of that thread stamped before `until` is in this batch or an earlier
//! one. The writer may also take threads' partial batches itself
//! ([`steal_all`]) to learn how far they have got, and takes every remainder
//! at the finish ([`close_all`]). A record is stamped while its buffer is
//! claimed, so what the writer takes under the claim is every record stamped
//! before it took it.
//!
//! The channel holds batches up to a memory budget. A thread whose full batch
//! would pass it waits, with its buffer released, for the writer to make room
//! ([`Handoff::wait_for_room`]): the command slows to the writer's pace instead
//! of losing records. Only a writer that makes no room within [`MAX_WAIT`] (a
//! disk that does not answer), or could not start, has a batch dropped,
//! counted and replaced by a [`Msg::Gap`]; after such a timeout the capture
//! drops rather than waits, so that a stuck writer costs one wait, not one per
//! batch.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;

use crate::event::{LaneReport, Resources, Tid};
use crate::record::{Batch, CaptureClock, OwnedLane};
use crate::subscriber::SpanInfo;

/// The default memory budget for batches waiting for the writer.
pub(crate) const DEFAULT_BUDGET: usize = 64 * 1024 * 1024;

/// The longest a recording thread waits for the writer to make room under the
/// budget while the writer releases nothing (it is stuck), before its batch is
/// dropped instead.
pub(crate) const MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

thread_local! {
    /// Set on the writer thread: it never waits for itself.
    pub(crate) static ON_WRITER: Cell<bool> = const { Cell::new(false) };
}

/// What travels from the capture's threads to the writer.
pub(crate) enum Msg {
    /// A thread's records, `seq` in its order, complete up to `until`.
    Batch {
        thread: u32,
        seq: u64,
        until: u64,
        batch: Batch,
        bytes: usize,
    },
    /// A batch that was dropped (and its records counted): the records of
    /// `thread` between the stamps `from` and `until`.
    Gap {
        thread: u32,
        seq: u64,
        from: u64,
        until: u64,
    },
    Lane(OwnedLane),
    LaneReport(LaneReport),
    /// A sample of the process, from the capture's sampler thread.
    Sample(crate::event::ProcessSample),
    Finish {
        end_rel: u64,
        resources: Resources,
        /// The CPU stacks, sampled until now.
        stacks: Box<crate::stacks::StacksEnd>,
    },
    /// Answered once everything sent before it has been processed.
    Sync(Sender<()>),
}

/// The channel to the writer, the batches it recycles, and what was lost.
pub(crate) struct Handoff {
    pub tx: Sender<Msg>,
    recycle: Receiver<Batch>,
    /// Bytes of the batches in the channel.
    in_flight: AtomicUsize,
    budget: usize,
    /// Records lost because the writer fell behind past the budget.
    pub dropped: AtomicU64,
    /// Records that arrived after the capture had taken its threads' last
    /// records.
    pub late: AtomicU64,
    /// Set once the finish has begun taking the threads' last records.
    pub closed: AtomicBool,
    /// Set while the writer thread runs: only then can waiting make room.
    pub writer_running: AtomicBool,
    /// Set when a wait for room timed out: later batches past the budget are
    /// dropped without waiting.
    gave_up: AtomicBool,
    /// Nanoseconds recording threads spent waiting for room, all together.
    pub waited_ns: AtomicU64,
    /// Batches the writer has finished with: its progress, for the waits.
    released_batches: AtomicU64,
}

impl Handoff {
    pub(crate) fn new(tx: Sender<Msg>, recycle: Receiver<Batch>, budget: usize) -> Handoff {
        Handoff {
            tx,
            recycle,
            in_flight: AtomicUsize::new(0),
            budget,
            dropped: AtomicU64::new(0),
            late: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            writer_running: AtomicBool::new(false),
            gave_up: AtomicBool::new(false),
            waited_ns: AtomicU64::new(0),
            released_batches: AtomicU64::new(0),
        }
    }

    /// Whether waiting for the writer could make room for a batch whose
    /// reservation failed: the writer runs and is not stuck, the capture is
    /// not finishing, and this is not the writer itself.
    ///
    /// Asked only after a failed [`Handoff::try_reserve`], never instead of
    /// one: a thread that read the budget as having room, and then lost that
    /// room to another thread's reservation, would otherwise drop its batch.
    #[inline]
    fn can_wait(&self) -> bool {
        self.writer_running.load(Ordering::Acquire) && self.may_wait()
    }

    /// Whether a batch whose reservation failed should have the writer thread
    /// started and then wait for it: the thread has not started yet (the
    /// first batches of several threads can fill a small budget before the
    /// first hand-over has started it), and nothing else forbids waiting.
    #[inline]
    fn awaits_writer(&self) -> bool {
        !self.writer_running.load(Ordering::Acquire) && self.may_wait()
    }

    /// Neither a stuck writer, nor the finish, nor the writer thread itself.
    #[inline]
    fn may_wait(&self) -> bool {
        !self.gave_up.load(Ordering::Relaxed)
            && !self.closed.load(Ordering::Relaxed)
            && !ON_WRITER.try_with(Cell::get).unwrap_or(true)
    }

    /// Waits until the writer has made room for `bytes` under the budget, at
    /// most [`MAX_WAIT`]; called with the thread's buffer released, so that
    /// the writer can take it meanwhile. The time is counted in `waited_ns`.
    #[cold]
    fn wait_for_room(&self, bytes: usize) {
        let start = std::time::Instant::now();
        // The writer is stuck only if it releases nothing for MAX_WAIT: while
        // it makes progress, other threads taking the room first is no reason
        // to give up.
        let (mut progress, mut since) = (self.released_batches.load(Ordering::Relaxed), start);
        let mut rounds = 0u32;
        while self.in_flight.load(Ordering::Relaxed) + bytes > self.budget
            && self.writer_running.load(Ordering::Acquire)
            && !self.closed.load(Ordering::Relaxed)
        {
            let now = self.released_batches.load(Ordering::Relaxed);
            if now != progress {
                (progress, since) = (now, std::time::Instant::now());
            } else if since.elapsed() >= MAX_WAIT {
                self.gave_up.store(true, Ordering::Relaxed);
                break;
            }
            rounds += 1;
            if rounds < 16 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
        let waited = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.waited_ns.fetch_add(waited, Ordering::Relaxed);
    }

    /// A batch for a thread whose last one was full: a recycled one, or a
    /// new one of full size.
    pub(crate) fn fresh_batch(&self) -> Batch {
        self.recycle.try_recv().unwrap_or_else(|_| Batch::with_capacity())
    }

    /// A batch for a thread that may record little: a recycled one, or a
    /// small new one ([`Batch::small`]).
    pub(crate) fn first_batch(&self) -> Batch {
        self.recycle.try_recv().unwrap_or_else(|_| Batch::small())
    }

    /// The writer took a batch of `bytes` itself: it counts against the budget.
    pub(crate) fn taken(&self, bytes: usize) {
        self.in_flight.fetch_add(bytes, Ordering::Relaxed);
    }

    /// The writer is done with `bytes` of a batch it was handed or took.
    pub(crate) fn released(&self, bytes: usize) {
        self.in_flight.fetch_sub(bytes, Ordering::Relaxed);
        self.released_batches.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a record that could not be stored: late once the capture has
    /// finished, dropped before.
    #[cold]
    pub(crate) fn lost(&self) {
        let counter = if self.closed.load(Ordering::Relaxed) { &self.late } else { &self.dropped };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `bytes` against the budget, unless they would pass it.
    #[inline]
    fn try_reserve(&self, bytes: usize) -> bool {
        if self.in_flight.fetch_add(bytes, Ordering::Relaxed) + bytes > self.budget {
            self.in_flight.fetch_sub(bytes, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Drops `local`'s batch, counting its records, and tells the writer.
    fn drop_batch(&self, index: u32, local: &mut ThreadRecords) {
        let seq = local.next_seq();
        let until = local.last_ts;
        self.dropped.fetch_add(local.batch.raws.len() as u64, Ordering::Relaxed);
        let from = local.batch.raws.first().map_or(until, |r| r.ts);
        local.batch.clear();
        let _ = self.tx.send(Msg::Gap { thread: index, seq, from, until });
    }

    /// Sends `local`'s batch, whose `bytes` are counted against the budget,
    /// leaving it the batch `next`.
    fn send_reserved(&self, index: u32, local: &mut ThreadRecords, bytes: usize, next: Batch) {
        let seq = local.next_seq();
        let until = local.last_ts;
        let n = local.batch.raws.len() as u64;
        let batch = std::mem::replace(&mut local.batch, next);
        if let Err(e) = self.tx.send(Msg::Batch { thread: index, seq, until, batch, bytes }) {
            // The writer is gone: nothing will read these records.
            self.in_flight.fetch_sub(bytes, Ordering::Relaxed);
            self.dropped.fetch_add(n, Ordering::Relaxed);
            if let Msg::Batch { mut batch, .. } = e.into_inner() {
                batch.clear();
                local.batch = batch;
            }
        }
    }
}

/// A thread's buffer for one capture.
///
/// Its thread writes to it; the writer takes its batch now and then (a
/// steal, or the finish). Whoever swaps `busy` from false to true has the
/// buffer's records until it stores false again: one atomic swap and one
/// plain store per record, and no lock a thread could be descheduled in.
///
/// Aligned so that two threads' buffers never share a cache line.
#[repr(align(128))]
pub(crate) struct ThreadBuf {
    pub index: u32,
    pub tid: Tid,
    pub name: String,
    /// The stamp read when the thread registered: it recorded nothing before.
    pub registered: u64,
    /// Set by whoever has `records`: see [`ThreadBuf::try_claim`].
    busy: AtomicBool,
    /// Set once the capture has taken this buffer's last records.
    pub closed: AtomicBool,
    records: UnsafeCell<ThreadRecords>,
}

// SAFETY: `records` is reached only through a `Claim`, and a `Claim` exists only
// for whoever swapped `busy` from false to true, until it stores false again:
// one party at a time. `ThreadRecords` itself is `Send`.
unsafe impl Sync for ThreadBuf {}

/// A thread's records for one capture, reached through a [`Claim`].
pub(crate) struct ThreadRecords {
    pub batch: Batch,
    closed: bool,
    /// The latest stamp taken on this thread (or its registration's).
    pub last_ts: u64,
    /// The sequence number of the next batch taken from this buffer.
    seq: u64,
}

impl ThreadRecords {
    fn next_seq(&mut self) -> u64 {
        let s = self.seq;
        self.seq += 1;
        s
    }
}

/// What the writer took from a buffer: the batch's sequence number, its
/// `until`, and its records.
pub(crate) struct Taken {
    pub seq: u64,
    pub until: u64,
    pub batch: Option<Batch>,
}

impl ThreadBuf {
    /// Exclusive access to the buffer, unless another party has it.
    #[inline]
    pub(crate) fn try_claim(&self) -> Option<Claim<'_>> {
        if self.busy.swap(true, Ordering::Acquire) {
            None
        } else {
            Some(Claim { buf: self })
        }
    }

    /// Exclusive access, waiting for the other party (which holds it only to
    /// append one record or to swap one batch).
    #[inline]
    pub(crate) fn claim(&self) -> Claim<'_> {
        if let Some(c) = self.try_claim() {
            return c;
        }
        self.claim_slow()
    }

    /// [`ThreadBuf::claim`] while the other party holds the buffer.
    #[cold]
    fn claim_slow(&self) -> Claim<'_> {
        let mut spins = 0u32;
        loop {
            if let Some(c) = self.try_claim() {
                return c;
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// What [`steal_all`] takes from one buffer, under its claim: `until` is a stamp
/// read while the claim is held, so every later record of the thread is
/// stamped after it.
fn take_partial(mut local: Claim<'_>, until: u64, fresh: impl FnOnce() -> Batch) -> Option<Taken> {
    if local.closed {
        return None;
    }
    let seq = local.next_seq();
    let batch =
        if local.batch.raws.is_empty() { None } else { Some(std::mem::replace(&mut local.batch, fresh())) };
    Some(Taken { seq, until, batch })
}

/// What [`close_all`] takes from one buffer, under its claim.
fn take_last(mut local: Claim<'_>) -> Taken {
    local.closed = true;
    local.buf.closed.store(true, Ordering::Relaxed);
    let seq = local.next_seq();
    Taken { seq, until: u64::MAX, batch: Some(std::mem::take(&mut local.batch)) }
}

/// The writer takes the partial batches of `bufs` (or only learns, of an
/// empty one, that nothing was stamped before now), giving each `fresh`.
///
/// Every taker (this steal, the finish) claims the buffers in the order of the
/// capture's list, so two takers never wait for each other in a circle.
pub(crate) fn steal_all(
    bufs: &[Arc<ThreadBuf>],
    clock: &CaptureClock,
    mut fresh: impl FnMut() -> Batch,
) -> Vec<Option<Taken>> {
    let claims: Vec<Claim<'_>> = bufs.iter().map(|b| b.claim()).collect();
    // One reading under every claim: the threads taken together are known
    // up to the same stamp, so none holds the merge back before the others.
    let until = clock.now();
    claims.into_iter().map(|c| take_partial(c, until, &mut fresh)).collect()
}

/// The finish takes the last records of `bufs`, which record nothing more;
/// claimed in order, as [`steal_all`] does.
pub(crate) fn close_all(bufs: &[Arc<ThreadBuf>]) -> Vec<Taken> {
    let claims: Vec<Claim<'_>> = bufs.iter().map(|b| b.claim()).collect();
    claims.into_iter().map(take_last).collect()
}

/// Exclusive access to a [`ThreadBuf`]'s records; released when dropped.
pub(crate) struct Claim<'a> {
    buf: &'a ThreadBuf,
}

impl std::ops::Deref for Claim<'_> {
    type Target = ThreadRecords;
    fn deref(&self) -> &ThreadRecords {
        // SAFETY: this claim is the only access to `records` (see `ThreadBuf`).
        unsafe { &*self.buf.records.get() }
    }
}

impl std::ops::DerefMut for Claim<'_> {
    fn deref_mut(&mut self) -> &mut ThreadRecords {
        // SAFETY: this claim is the only access to `records` (see `ThreadBuf`).
        unsafe { &mut *self.buf.records.get() }
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.buf.busy.store(false, Ordering::Release);
    }
}

/// Every thread that has recorded into one capture.
pub(crate) struct Threads {
    pub capture_id: u64,
    pub clock: CaptureClock,
    pub handoff: Handoff,
    /// The buffers in order of registration. The writer holds this lock while
    /// it takes the threads' last records, so a thread must never wait for it
    /// while it holds its own buffer.
    pub list: Mutex<Vec<Arc<ThreadBuf>>>,
    /// The sampler of CPU stacks each thread joins as it registers, when
    /// `<P>_TRACE_STACKS` is on.
    pub stacks: crate::stacks::StacksSampler,
}

static NEXT_CAPTURE: AtomicU64 = AtomicU64::new(1);

impl Threads {
    pub(crate) fn new(clock: CaptureClock, handoff: Handoff) -> Threads {
        Threads {
            capture_id: NEXT_CAPTURE.fetch_add(1, Ordering::Relaxed),
            clock,
            handoff,
            list: Mutex::new(Vec::new()),
            stacks: Default::default(),
        }
    }

    /// Registers the calling thread with this capture, unless it has finished.
    fn register(&self) -> Option<Arc<ThreadBuf>> {
        let mut list = self.list.lock();
        if self.handoff.closed.load(Ordering::Acquire) {
            return None;
        }
        let tid = crate::os::current_tid();
        let name = match std::thread::current().name() {
            Some(n) => n.to_string(),
            None => format!("thread-{tid}"),
        };
        // Under the lock: a writer that has seen the list knows this thread
        // records nothing stamped before it registered.
        let registered = self.clock.now();
        let batch = self.handoff.first_batch();
        let buf = Arc::new(ThreadBuf {
            index: list.len() as u32,
            tid,
            name,
            registered,
            busy: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            records: UnsafeCell::new(ThreadRecords { batch, closed: false, last_ts: registered, seq: 0 }),
        });
        // Every thread that records into the capture has its CPU stacks
        // sampled, when they are on.
        self.stacks.add_thread(tid);
        list.push(buf.clone());
        Some(buf)
    }

    /// Runs `f` with the calling thread's slot for this capture, registering
    /// the thread on its first use. `None` when the thread is already inside
    /// the hot path (a `Debug` impl that logs), while it shuts down, or when
    /// the capture has finished before the thread's first record.
    #[inline(always)]
    pub(crate) fn with_slot<R>(self: &Arc<Self>, f: impl FnOnce(&Slot) -> R) -> Option<R> {
        let id = self.capture_id;
        TLS.try_with(|tls| {
            if tls.busy.replace(true) {
                return None;
            }
            let _busy = Busy(&tls.busy);
            {
                let slots = tls.slots.try_borrow().ok()?;
                if let Some(slot) = slots.iter().find(|s| s.capture == id) {
                    return Some(f(slot));
                }
            }
            {
                let mut slots = tls.slots.try_borrow_mut().ok()?;
                slots.retain(|s| !s.buf.closed.load(Ordering::Relaxed));
                let buf = self.register()?;
                slots.push(Slot::new(id, buf, Arc::downgrade(self)));
            }
            let slots = tls.slots.try_borrow().ok()?;
            slots.last().map(f)
        })
        .ok()
        .flatten()
    }

    /// Runs `f` with the calling thread's slot for this capture if it has one,
    /// even from inside the hot path. `f` must not record.
    #[inline]
    pub(crate) fn peek_slot<R>(&self, f: impl FnOnce(&Slot) -> R) -> Option<R> {
        let id = self.capture_id;
        TLS.try_with(|tls| {
            let slots = tls.slots.try_borrow().ok()?;
            slots.iter().find(|s| s.capture == id).map(f)
        })
        .ok()
        .flatten()
    }

    /// Appends a record to `buf`, stamped now (or, with `stamp` false, with the
    /// thread's latest stamp: for a creation, which only needs to come before
    /// anything else about its span), then hands the batch over if it is full.
    /// Never panics; waits for the writer only past the memory budget
    /// ([`Handoff::wait_for_room`]).
    #[inline(always)]
    pub(crate) fn fill(&self, buf: &ThreadBuf, stamp: bool, fill: impl FnOnce(&mut Batch, u64)) -> Filled {
        let mut local = buf.claim();
        if local.closed {
            return Filled::Closed;
        }
        if stamp {
            local.last_ts = self.clock.now();
        }
        let ts = local.last_ts;
        fill(&mut local.batch, ts);
        if local.batch.is_full() {
            let (handoff, bytes) = (&self.handoff, local.batch.bytes());
            if handoff.try_reserve(bytes) {
                handoff.send_reserved(buf.index, &mut local, bytes, handoff.fresh_batch());
            } else if handoff.can_wait() {
                drop(local);
                return self.hand_over_after_waiting(buf);
            } else if handoff.awaits_writer() {
                return Filled::NeedsWriter;
            } else {
                handoff.drop_batch(buf.index, &mut local);
            }
            return Filled::HandedOver;
        }
        Filled::Stored
    }

    /// Waits for room under the budget with `buf` released, then hands its
    /// batch over if it is still full (the writer may have taken it meanwhile).
    #[cold]
    pub(crate) fn hand_over_after_waiting(&self, buf: &ThreadBuf) -> Filled {
        self.hand_over_waiting(buf, |local| local.batch.is_full(), Handoff::fresh_batch);
        Filled::HandedOver
    }

    /// Hands `buf`'s batch over once there is room for it under the budget,
    /// waiting for the writer to make room while that can help. `due` says,
    /// under the claim, whether the batch is still to go, and prepares it.
    /// Returns at once if another party holds the buffer.
    pub(crate) fn hand_over_waiting(
        &self,
        buf: &ThreadBuf,
        due: impl Fn(&mut ThreadRecords) -> bool,
        next: impl Fn(&Handoff) -> Batch,
    ) {
        let handoff = &self.handoff;
        loop {
            let Some(mut local) = buf.try_claim() else { return };
            if local.closed || !due(&mut local) {
                return;
            }
            let bytes = local.batch.bytes();
            // Other threads may have taken the room first: reserve it, or wait again.
            if handoff.try_reserve(bytes) {
                handoff.send_reserved(buf.index, &mut local, bytes, next(handoff));
                return;
            }
            if !handoff.can_wait() {
                handoff.drop_batch(buf.index, &mut local);
                return;
            }
            drop(local);
            handoff.wait_for_room(bytes);
        }
    }

    /// Hands the calling thread's partial batch to the writer.
    pub(crate) fn flush_local(&self) {
        let _ = self.peek_slot(|slot| {
            self.hand_over_waiting(&slot.buf, |local| !local.batch.raws.is_empty(), Handoff::fresh_batch)
        });
    }
}

/// What became of a record given to [`Threads::fill`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Filled {
    /// Stored in the thread's batch.
    Stored,
    /// Stored, and the full batch was handed to the writer.
    HandedOver,
    /// Stored; the full batch found no room under the budget, and the writer
    /// thread, which alone can make room, has not started: the caller starts
    /// it, then hands the batch over ([`Threads::hand_over_after_waiting`]),
    /// which drops the batch and counts it if the thread could not start.
    NeedsWriter,
    /// Not stored: the capture has taken the thread's last records.
    Closed,
}

/// Clears the thread's hot-path flag, even if a `Debug` impl panics.
struct Busy<'a>(&'a Cell<bool>);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

/// A thread's state for one capture.
pub(crate) struct Slot {
    capture: u64,
    pub buf: Arc<ThreadBuf>,
    threads: Weak<Threads>,
    /// The capture's subscriber: the spans entered on this thread, innermost last.
    pub stack: RefCell<Vec<(u64, SpanInfo)>>,
}

impl Slot {
    fn new(capture: u64, buf: Arc<ThreadBuf>, threads: Weak<Threads>) -> Slot {
        Slot { capture, buf, threads, stack: RefCell::new(Vec::new()) }
    }
}

impl Drop for Slot {
    /// The thread is exiting (or its capture finished): hand over what it
    /// holds, saying it will record nothing more, so the writer need not wait
    /// for it.
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let Some(threads) = self.threads.upgrade() else { return };
            // A thread that exits records nothing more, so it is left an
            // empty batch, which holds no memory, rather than a fresh one
            // (about five new pages, each a page fault, for every thread of a
            // short command that was never used).
            threads.hand_over_waiting(
                &self.buf,
                |local| {
                    local.last_ts = u64::MAX;
                    true
                },
                |_| Batch::default(),
            );
        }));
    }
}

/// The hot path's per-thread state.
struct Tls {
    /// Set while this thread is inside the hot path: a `Debug` impl that logs
    /// while its value is being formatted must not re-enter.
    busy: Cell<bool>,
    /// This thread's state, one per capture it has recorded into.
    slots: RefCell<Vec<Slot>>,
}

thread_local! {
    static TLS: Tls = const { Tls { busy: Cell::new(false), slots: RefCell::new(Vec::new()) } };
}

/// The hand-over under random interleavings of everything that takes part in
/// it: recording threads that flush and exit at random, a taker that steals
/// their partial batches at random (as the writer does when they hold the
/// merge back), and the finish, at a random moment, while some still record.
#[cfg(test)]
mod hand_over_stress {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use super::{close_all, steal_all, Filled, Handoff, Msg, Threads};
    use crate::record::{Batch, CaptureClock, Kind};

    /// A small random number generator (xorshift64*): the seed of a failing
    /// round is printed, and reproduces it as far as the scheduler lets it.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
        }
    }

    /// What the taker saw of one buffer: batches by sequence number, each
    /// with its records' ids.
    type Seen = BTreeMap<u32, BTreeMap<u64, Vec<u64>>>;

    fn keep(seen: &Mutex<Seen>, thread: u32, seq: u64, batch: Option<&Batch>, seed: u64) {
        let ids = batch.map(|b| b.raws.iter().map(|r| r.id).collect()).unwrap_or_default();
        let previous = seen.lock().unwrap().entry(thread).or_default().insert(seq, ids);
        assert!(previous.is_none(), "seed {seed}: buffer {thread} handed over batch {seq} twice");
    }

    /// One capture: returns how many records were checked.
    fn one_capture(seed: u64) -> u64 {
        let mut rng = Rng(seed | 1);
        let (tx, rx) = crossbeam_channel::unbounded();
        let (recycle_tx, recycle_rx) = crossbeam_channel::unbounded();
        let threads = Arc::new(Threads::new(CaptureClock::start(), Handoff::new(tx, recycle_rx, usize::MAX)));
        let seen = Arc::new(Mutex::new(Seen::new()));
        let done = Arc::new(AtomicBool::new(false));

        // The taker: takes what is sent, recycles it, and steals at random.
        let taker = {
            let (threads, seen, done) = (threads.clone(), seen.clone(), done.clone());
            let mut rng = Rng(rng.below(u64::MAX) | 1);
            std::thread::spawn(move || {
                while !done.load(Ordering::Acquire) {
                    while let Ok(msg) = rx.try_recv() {
                        let Msg::Batch { thread, seq, mut batch, .. } = msg else { continue };
                        keep(&seen, thread, seq, Some(&batch), seed);
                        batch.clear();
                        let _ = recycle_tx.send(batch);
                    }
                    if rng.below(4) == 0 {
                        let list = threads.list.lock().clone();
                        let taken = steal_all(&list, &threads.clock, || threads.handoff.first_batch());
                        for (buf, taken) in list.iter().zip(taken).filter_map(|(b, t)| Some((b, t?))) {
                            keep(&seen, buf.index, taken.seq, taken.batch.as_ref(), seed);
                        }
                    }
                    if rng.below(8) == 0 {
                        std::thread::yield_now();
                    }
                }
                rx
            })
        };

        // The recording threads: each numbers its records 0, 1, 2, ... (its
        // own number in the high bits) and says how many were stored.
        let workers: Vec<_> = (0..2 + rng.below(7))
            .map(|w| {
                let threads = threads.clone();
                let (records, flush_every) = (rng.below(30_000), 1 + rng.below(3_000));
                let mut rng = Rng(rng.below(u64::MAX) | 1);
                std::thread::spawn(move || {
                    let mut stored = 0;
                    for i in 0..records {
                        let id = (w << 32) | i;
                        let filled = threads.with_slot(|slot| {
                            threads.fill(&slot.buf, true, |b, ts| b.push(Kind::Event, id, ts, None))
                        });
                        match filled {
                            Some(Filled::Stored | Filled::HandedOver) => stored += 1,
                            Some(Filled::Closed) | None => break,
                            Some(Filled::NeedsWriter) => unreachable!("the budget is unbounded"),
                        }
                        if rng.below(flush_every) == 0 {
                            threads.flush_local();
                        }
                    }
                    // Exiting hands over what is left (`Slot`'s drop).
                    (w, stored)
                })
            })
            .collect();

        // The finish, at a random moment, as the writer's: closed, then every
        // buffer's remainder taken under the list's lock.
        std::thread::sleep(Duration::from_micros(rng.below(20_000)));
        let remainders: Vec<_> = {
            let list = threads.list.lock();
            threads.handoff.closed.store(true, Ordering::Release);
            close_all(&list).into_iter().zip(list.iter().map(|b| b.index)).collect()
        };
        let stored: BTreeMap<u64, u64> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        done.store(true, Ordering::Release);
        let rx = taker.join().unwrap();
        for (taken, index) in remainders {
            keep(&seen, index, taken.seq, taken.batch.as_ref(), seed);
        }
        while let Ok(msg) = rx.try_recv() {
            if let Msg::Batch { thread, seq, batch, .. } = msg {
                keep(&seen, thread, seq, Some(&batch), seed);
            }
        }

        // Each buffer: every batch number once, none missing, and its
        // records, in that order, one worker's 0, 1, 2, ... up to what it stored.
        let seen = seen.lock().unwrap();
        let mut got: BTreeMap<u64, u64> = BTreeMap::new();
        for (thread, batches) in seen.iter() {
            let seqs: Vec<u64> = batches.keys().copied().collect();
            assert_eq!(
                seqs,
                (0..seqs.len() as u64).collect::<Vec<_>>(),
                "seed {seed}: buffer {thread}'s batches"
            );
            for id in batches.values().flatten() {
                let (w, i) = (id >> 32, id & 0xffff_ffff);
                let next = got.entry(w).or_default();
                assert_eq!(i, *next, "seed {seed}: worker {w}'s record {next} lost, repeated or reordered");
                *next += 1;
            }
        }
        for (w, n) in &stored {
            assert_eq!(got.get(w).copied().unwrap_or(0), *n, "seed {seed}: worker {w} stored {n} records");
        }
        stored.values().sum()
    }

    #[test]
    fn records_under_random_steals_flushes_exits_and_finishes_are_never_lost_repeated_or_reordered() {
        let start = Instant::now();
        let mut seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        let (mut captures, mut records) = (0, 0);
        // A few seconds at most, so that CI stays fast; at least a few captures.
        while captures < 4 || start.elapsed() < Duration::from_secs(2) {
            records += one_capture(seed);
            captures += 1;
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        }
        assert!(records > 0, "{captures} captures stored nothing");
        println!("{captures} captures, {records} records checked");
    }
}
