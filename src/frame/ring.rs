//! The bounded hand-over of frame slots from a source thread to the inference worker.
//!
//! Owns: [`FrameRing`], which drops the *oldest* ready frame when the consumer is behind (counted in
//! its [`RingStats`]), gives lent frames back to their source when a slot is released, and rings a
//! [`Doorbell`] for a consumer that watches several rings. Must not: allocate once built (every
//! slot exists from construction on) or look inside frames.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::slot::{CaptureMode, FrameSlot, HeapMemory};
use crate::sys::lock::{lock, wait_timeout_while};

/// Counters of a ring, shared with telemetry.
#[derive(Debug, Default)]
pub struct RingStats {
    /// Frames a source produced.
    pub produced: AtomicU64,
    /// Ready frames replaced by a newer one before the pipeline took them.
    pub dropped: AtomicU64,
    /// Frames the source skipped because they were larger than `[limits]` allows.
    pub over_limit: AtomicU64,
    /// Frames the source decoded from truncated data (processed, and counted here).
    pub truncated: AtomicU64,
    /// Full-frame copies the source made of the frames it produced.
    pub copies: AtomicU64,
    /// The source's [`CaptureMode`] as of its latest frame (0 before the first).
    capture_mode: AtomicU8,
}

impl RingStats {
    /// The source's capture mode as of its latest frame; `None` before the first frame.
    pub fn capture_mode(&self) -> Option<CaptureMode> {
        CaptureMode::from_index(self.capture_mode.load(Ordering::Relaxed))
    }

    pub fn set_capture_mode(&self, mode: CaptureMode) {
        self.capture_mode.store(mode.index(), Ordering::Relaxed);
    }
}

struct RingState {
    free: Vec<FrameSlot>,
    ready: VecDeque<FrameSlot>,
    closed: bool,
}

/// Bounded hand-over of frame slots from one producer (source) to one consumer (pipeline).
///
/// All slots exist from construction on; a producer that finds no free slot takes the oldest
/// ready one back (drop-oldest, counted), so the newest frame always wins and memory is bounded.
pub struct FrameRing {
    /// Slots the ring was built with.
    slot_count: usize,
    state: Mutex<RingState>,
    ready_cv: Condvar,
    /// Signalled when a slot becomes free (for producers that wait instead of dropping).
    free_cv: Condvar,
    stats: RingStats,
    /// Rung on every publish and on close, for a consumer that watches several rings.
    doorbell: Option<Arc<Doorbell>>,
}

/// Wakes a thread that waits for any of several rings: a counter bumped on every ring, so a waiter
/// that read the count before looking at the rings cannot miss a frame published meanwhile.
#[derive(Debug, Default)]
pub struct Doorbell {
    rung: Mutex<u64>,
    cv: Condvar,
}

impl Doorbell {
    pub fn new() -> Arc<Doorbell> {
        Arc::new(Doorbell::default())
    }

    pub fn ring(&self) {
        *self.lock() += 1;
        self.cv.notify_all();
    }

    /// How often it has been rung; pass it to [`Doorbell::wait`].
    pub fn rung(&self) -> u64 {
        *self.lock()
    }

    /// Waits until the bell rings after `seen` was read, or `timeout` passes.
    pub fn wait(&self, seen: u64, timeout: Duration) {
        let guard = self.lock();
        let _unused = self.cv.wait_timeout_while(guard, timeout, |rung| *rung == seen);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, u64> {
        lock(&self.rung)
    }
}

impl FrameRing {
    /// A ring over `slots` (at least 2: one being filled, one being processed).
    pub fn new(slots: Vec<FrameSlot>) -> Self {
        assert!(slots.len() >= 2, "a frame ring needs at least two slots");
        FrameRing {
            slot_count: slots.len(),
            state: Mutex::new(RingState { free: slots, ready: VecDeque::new(), closed: false }),
            ready_cv: Condvar::new(),
            free_cv: Condvar::new(),
            stats: RingStats::default(),
            doorbell: None,
        }
    }

    /// A ring that also rings `doorbell` whenever a frame is published or the ring closes.
    pub fn with_doorbell(slots: Vec<FrameSlot>, doorbell: Arc<Doorbell>) -> Self {
        FrameRing { doorbell: Some(doorbell), ..Self::new(slots) }
    }

    fn ring_doorbell(&self) {
        if let Some(doorbell) = &self.doorbell {
            doorbell.ring();
        }
    }

    /// A ring of `count` heap slots of `bytes` each.
    pub fn with_heap_slots(count: usize, bytes: usize) -> Self {
        Self::new((0..count).map(|_| FrameSlot::new(Box::new(HeapMemory::with_capacity(bytes)))).collect())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RingState> {
        // A panic while holding this lock cannot leave the queues inconsistent (every critical
        // section is a single push/pop), so a poisoned lock is still safe to use.
        lock(&self.state)
    }

    /// A slot for the producer to fill: a free one, else the oldest ready frame (counted as dropped).
    /// `None` only when every slot is held by the consumer, which a ring of two or more prevents
    /// unless the consumer hoards slots.
    pub fn acquire_for_write(&self) -> Option<FrameSlot> {
        let mut state = self.lock();
        if let Some(slot) = state.free.pop() {
            return Some(slot);
        }
        let mut oldest = state.ready.pop_front()?;
        drop(state);
        self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        oldest.return_lent();
        Some(oldest)
    }

    /// Hands a filled slot to the consumer.
    pub fn publish(&self, mut slot: FrameSlot) {
        slot.ready_at = Some(Instant::now());
        self.stats.produced.fetch_add(1, Ordering::Relaxed);
        self.stats.copies.fetch_add(u64::from(slot.copies), Ordering::Relaxed);
        self.lock().ready.push_back(slot);
        self.ready_cv.notify_one();
        self.ring_doorbell();
    }

    /// A free slot, waiting up to `timeout` for one; never takes a ready frame back. For sources
    /// whose every frame must be processed (a replayed recording), at the cost of waiting.
    pub fn acquire_free(&self, timeout: Duration) -> Option<FrameSlot> {
        let mut state = wait_timeout_while(&self.free_cv, self.lock(), timeout, |s| s.free.is_empty());
        state.free.pop()
    }

    /// Returns a slot unfilled (the source had nothing to write) or after processing; a lent
    /// frame goes back to its source here, before the slot is free again.
    pub fn release(&self, mut slot: FrameSlot) {
        slot.return_lent();
        self.lock().free.push(slot);
        self.free_cv.notify_one();
    }

    /// The oldest ready frame, waiting up to `timeout`. `None` on timeout or once closed and empty.
    pub fn take_ready(&self, timeout: Duration) -> Option<FrameSlot> {
        let mut state = wait_timeout_while(&self.ready_cv, self.lock(), timeout, |s| s.ready.is_empty() && !s.closed);
        state.ready.pop_front()
    }

    /// Tells the consumer no more frames will come (end of a finite source, or shutdown).
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready_cv.notify_all();
        self.ring_doorbell();
    }

    /// The oldest ready frame, without waiting.
    pub fn try_take_ready(&self) -> Option<FrameSlot> {
        self.lock().ready.pop_front()
    }

    /// Closed and drained: the consumer can stop.
    pub fn is_finished(&self) -> bool {
        let state = self.lock();
        state.closed && state.ready.is_empty()
    }

    /// Slots the ring holds in all: a consumer that holds all but one leaves the producer one to
    /// fill.
    pub fn slot_count(&self) -> usize {
        self.slot_count
    }

    pub fn stats(&self) -> &RingStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::format::PixelFormat;
    use crate::frame::slot::{LentFrame, SlotMemory};

    #[test]
    fn the_ring_counts_the_copies_its_slots_noted_and_prepare_starts_a_frame_at_none() {
        let ring = FrameRing::with_heap_slots(2, 12);
        let mut slot = ring.acquire_for_write().expect("slot");
        slot.prepare(2, 2, PixelFormat::Rgb8).expect("prepare");
        slot.note_copy();
        ring.publish(slot);
        let mut slot = ring.acquire_for_write().expect("slot");
        slot.note_copy();
        slot.prepare(2, 2, PixelFormat::Rgb8).expect("prepare");
        assert_eq!(slot.copies(), 0, "a copy noted before prepare belongs to no frame");
        ring.publish(slot);
        assert_eq!(ring.stats().copies.load(Ordering::Relaxed), 1);
        assert_eq!(ring.stats().capture_mode(), None);
        ring.stats().set_capture_mode(CaptureMode::Decode);
        assert_eq!(ring.stats().capture_mode(), Some(CaptureMode::Decode));
    }

    /// A lent frame that counts how often it was given back.
    struct CountedLoan {
        memory: HeapMemory,
        returned: Arc<AtomicU64>,
    }

    impl LentFrame for CountedLoan {
        fn bytes(&self) -> &[u8] {
            self.memory.as_slice()
        }
        fn memory(&self) -> &dyn SlotMemory {
            &self.memory
        }
    }

    impl Drop for CountedLoan {
        fn drop(&mut self) {
            self.returned.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn loan(bytes: &[u8], returned: &Arc<AtomicU64>) -> Box<dyn LentFrame> {
        Box::new(CountedLoan { memory: HeapMemory(bytes.to_vec()), returned: returned.clone() })
    }

    #[test]
    fn a_lent_frame_is_the_slots_frame_until_the_ring_gives_it_back() {
        let returned = Arc::new(AtomicU64::new(0));
        let ring = FrameRing::with_heap_slots(2, 0);
        let mut slot = ring.acquire_for_write().expect("slot");
        slot.lend(2, 2, PixelFormat::Rgb8, loan(&[7; 16], &returned)).expect("lend");
        assert!(slot.is_lent());
        assert_eq!(slot.data(), &[7; 12], "the frame's length, not the loan's");
        assert_eq!(slot.memory().capacity(), 16, "the GPU stage sees the lent memory");
        assert_eq!(slot.copies(), 0);
        ring.publish(slot);
        let taken = ring.take_ready(Duration::from_millis(1)).expect("frame");
        assert_eq!(returned.load(Ordering::SeqCst), 0, "held while the consumer has the frame");
        ring.release(taken);
        assert_eq!(returned.load(Ordering::SeqCst), 1, "given back when the slot is released");

        let mut slot = ring.acquire_for_write().expect("slot");
        assert!(!slot.is_lent());
        assert_eq!(slot.memory().capacity(), 0, "the slot's own memory again");
        slot.lend(2, 2, PixelFormat::Rgb8, loan(&[1; 12], &returned)).expect("lend");
        slot.prepare(2, 2, PixelFormat::Rgb8).expect("prepare").fill(3);
        assert_eq!(returned.load(Ordering::SeqCst), 2, "a copied frame replaces the loan");
        assert_eq!(slot.data(), &[3; 12]);
        ring.release(slot);
    }

    #[test]
    fn a_lent_frame_dropped_unread_or_too_short_goes_back_to_its_source() {
        let returned = Arc::new(AtomicU64::new(0));
        let ring = FrameRing::with_heap_slots(2, 0);
        for _ in 0..3 {
            let mut slot = ring.acquire_for_write().expect("slot");
            slot.lend(2, 2, PixelFormat::Nv12, loan(&[0; 6], &returned)).expect("lend");
            ring.publish(slot);
        }
        assert_eq!(ring.stats().dropped.load(Ordering::Relaxed), 1);
        assert_eq!(returned.load(Ordering::SeqCst), 1, "the dropped frame's loan came back at once");
        let mut slot = ring.acquire_for_write().expect("slot");
        assert_eq!(returned.load(Ordering::SeqCst), 2);
        let short = slot.lend(4, 4, PixelFormat::Nv12, loan(&[0; 6], &returned)).expect_err("6 bytes are not 4x4 NV12");
        assert!(short.contains("not 24"), "{short}");
        assert_eq!(returned.load(Ordering::SeqCst), 3, "a refused loan is not kept");
        assert!(!slot.is_lent());
        ring.release(slot);
    }

    #[test]
    fn ring_drops_oldest_when_consumer_is_behind() {
        let ring = FrameRing::with_heap_slots(3, 12);
        for seq in 0..5 {
            let mut slot = ring.acquire_for_write().expect("slot");
            slot.prepare(2, 2, PixelFormat::Rgb8).expect("prepare");
            slot.meta_mut().sequence = seq;
            ring.publish(slot);
        }
        assert_eq!(ring.stats().dropped.load(Ordering::Relaxed), 2);
        let first = ring.take_ready(Duration::from_millis(1)).expect("frame");
        assert_eq!(first.meta().sequence, 2, "the two oldest frames were dropped");
    }

    #[test]
    fn acquire_free_waits_for_a_released_slot_instead_of_dropping() {
        let ring = FrameRing::with_heap_slots(2, 12);
        for _ in 0..2 {
            let slot = ring.acquire_free(Duration::from_millis(1)).expect("free slot");
            ring.publish(slot);
        }
        assert!(ring.acquire_free(Duration::from_millis(10)).is_none(), "both slots hold ready frames");
        assert_eq!(ring.stats().dropped.load(Ordering::Relaxed), 0);
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| ring.acquire_free(Duration::from_secs(30)));
            let frame = ring.take_ready(Duration::from_millis(1)).expect("ready frame");
            ring.release(frame);
            assert!(waiter.join().expect("join").is_some(), "the release woke the waiting producer");
        });
    }

    #[test]
    fn closed_ring_finishes_after_draining() {
        let ring = FrameRing::with_heap_slots(2, 0);
        let slot = ring.acquire_for_write().expect("slot");
        ring.publish(slot);
        ring.close();
        assert!(!ring.is_finished());
        let slot = ring.take_ready(Duration::from_millis(1)).expect("queued frame survives close");
        ring.release(slot);
        assert!(ring.is_finished());
        assert!(ring.take_ready(Duration::from_millis(1)).is_none());
    }
}
