//! Frames and the frame-slot ring between a source and its pipeline.
//!
//! Owns: pixel formats, frame metadata, slot memory (heap here; pinned/mapped memory comes from the
//! CUDA layer through [`SlotMemory`] and [`SlotAllocator`]), frames a source lends a slot instead of
//! copying them ([`LentFrame`]), [`FrameRing`], the bounded hand-over from a source thread
//! to a pipeline thread that drops the *oldest* ready frame when the pipeline is behind, and the
//! per-frame stage timings ([`Stage`], [`FrameTimings`]) that every later stage reports, and the
//! wire form of a capture time ([`Rfc3339Millis`], also used for telemetry's own timestamps).
//! Must not: decode images, talk to devices, or allocate per frame once the ring is warm.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::sys::lock::{lock, wait_timeout_while};

/// Pixel layout of a frame as a source delivers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PixelFormat {
    /// 3 bytes per pixel, R G B.
    Rgb8,
    /// 3 bytes per pixel, B G R.
    Bgr8,
    /// 4 bytes per pixel, R G B A (alpha ignored).
    Rgba8,
    /// Packed 4:2:2, Y0 U Y1 V per two pixels; width must be even.
    Yuyv,
    /// Planar Y (width × height) followed by interleaved UV at half resolution; width and height even.
    Nv12,
}

impl PixelFormat {
    /// Bytes one frame of this format and size occupies, or `None` for sizes the format cannot have
    /// (odd widths for the 4:2:x formats, zero sizes, overflow).
    pub fn frame_bytes(self, width: u32, height: u32) -> Option<usize> {
        if width == 0 || height == 0 {
            return None;
        }
        let (w, h) = (width as usize, height as usize);
        match self {
            PixelFormat::Rgb8 | PixelFormat::Bgr8 => w.checked_mul(h)?.checked_mul(3),
            PixelFormat::Rgba8 => w.checked_mul(h)?.checked_mul(4),
            PixelFormat::Yuyv if w % 2 == 0 => w.checked_mul(h)?.checked_mul(2),
            PixelFormat::Nv12 if w % 2 == 0 && h % 2 == 0 => w.checked_mul(h)?.checked_mul(3).map(|n| n / 2),
            PixelFormat::Yuyv | PixelFormat::Nv12 => None,
        }
    }

    /// The config/log name of the format.
    pub fn name(self) -> &'static str {
        match self {
            PixelFormat::Rgb8 => "rgb",
            PixelFormat::Bgr8 => "bgr",
            PixelFormat::Rgba8 => "rgba",
            PixelFormat::Yuyv => "yuyv",
            PixelFormat::Nv12 => "nv12",
        }
    }
}

/// How a source gets its frames into the slots, as telemetry reports it (`capture_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureMode {
    /// The frame arrives in memory of its own (a GStreamer buffer, a V4L2 mmap buffer) and is
    /// copied once into the slot.
    Copy,
    /// The element before the appsink wrote the frame into slot memory of the source's GStreamer
    /// buffer pool; the slot holds that buffer ([`LentFrame`]), no copy.
    Pool,
    /// The V4L2 driver wrote the frame into slot memory it was given (`V4L2_MEMORY_USERPTR`); the
    /// slot holds that buffer ([`LentFrame`]), no copy.
    Userptr,
    /// Compressed bytes are decoded straight into the slot (V4L2 MJPEG, image files).
    Decode,
    /// The source draws the frame in the slot (the synthetic test pattern).
    Generate,
}

impl CaptureMode {
    fn index(self) -> u8 {
        match self {
            CaptureMode::Copy => 1,
            CaptureMode::Decode => 2,
            CaptureMode::Generate => 3,
            CaptureMode::Pool => 4,
            CaptureMode::Userptr => 5,
        }
    }

    fn from_index(index: u8) -> Option<CaptureMode> {
        [CaptureMode::Copy, CaptureMode::Decode, CaptureMode::Generate, CaptureMode::Pool, CaptureMode::Userptr]
            .into_iter()
            .find(|mode| mode.index() == index)
    }
}

/// What is known about the frame in a slot.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameMeta {
    pub width: u32,
    pub height: u32,
    pub format: PixelFormat,
    /// Monotonic per camera, starting at 0; gaps mean dropped frames.
    pub sequence: u64,
    /// Wall-clock capture time (driver timestamp where the source has one).
    pub captured_at: SystemTime,
}

/// Backing memory of one frame slot. The CUDA layer implements this for pinned and mapped host
/// memory; [`HeapMemory`] is the plain CPU variant. `Sync` because a frame lent to a slot
/// ([`LentFrame`]) shares its memory with the source that will take it back; only `&mut` writes.
pub trait SlotMemory: Send + Sync {
    /// Bytes the slot can hold without reallocating.
    fn capacity(&self) -> usize;
    /// Makes room for `len` bytes. Heap memory grows; fixed (pinned) memory returns an error
    /// message when `len` exceeds its capacity.
    fn reserve(&mut self, len: usize) -> Result<(), String>;
    fn as_slice(&self) -> &[u8];
    fn as_mut_slice(&mut self) -> &mut [u8];
    /// Lets the GPU stage find the device pointer of pinned/mapped memory.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// Growable heap memory for CPU-only pipelines.
#[derive(Debug, Default)]
pub struct HeapMemory(Vec<u8>);

impl HeapMemory {
    pub fn with_capacity(bytes: usize) -> Self {
        HeapMemory(vec![0; bytes])
    }
}

impl SlotMemory for HeapMemory {
    fn capacity(&self) -> usize {
        self.0.len()
    }
    fn reserve(&mut self, len: usize) -> Result<(), String> {
        if len > self.0.len() {
            self.0.resize(len, 0);
        }
        Ok(())
    }
    fn as_slice(&self) -> &[u8] {
        &self.0
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.0
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Makes slot memory of the kind the inference stage reads best: page-locked (and mapped on
/// integrated GPUs) from the GPU backend, heap memory otherwise. The ring's own slots come from it,
/// and so does the memory a source lends the slots instead of copying into them (a GStreamer
/// buffer pool, V4L2 user-pointer buffers).
#[derive(Clone)]
pub struct SlotAllocator(Arc<dyn Fn() -> Result<Box<dyn SlotMemory>, String> + Send + Sync>);

impl SlotAllocator {
    /// An allocator calling `make` for an empty slot memory each time.
    pub fn new(make: impl Fn() -> Result<Box<dyn SlotMemory>, String> + Send + Sync + 'static) -> Self {
        SlotAllocator(Arc::new(make))
    }

    /// Heap memory: what a CPU backend reads best.
    pub fn heap() -> Self {
        SlotAllocator::new(|| Ok(Box::new(HeapMemory::default())))
    }

    /// Memory holding at least `bytes` bytes.
    pub fn allocate(&self, bytes: usize) -> Result<Box<dyn SlotMemory>, String> {
        let mut memory = (self.0)()?;
        memory.reserve(bytes)?;
        Ok(memory)
    }
}

impl fmt::Debug for SlotAllocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SlotAllocator")
    }
}

/// A frame a source wrote into memory of its own and lends a slot instead of copying it there (a
/// GStreamer pool buffer, a queued-and-filled V4L2 user-pointer buffer). Dropping it gives the
/// memory back to the source, so the slot holds it exactly as long as the frame is in use: the
/// ring drops it when the slot is released after processing, or when the frame is dropped unread.
pub trait LentFrame: Send {
    /// The frame's bytes, tightly packed as [`PixelFormat::frame_bytes`] counts them (longer is
    /// allowed; the slot reads only the frame's length).
    fn bytes(&self) -> &[u8];
    /// The slot memory the bytes start at, so the GPU stage can find their device address.
    fn memory(&self) -> &dyn SlotMemory;
}

/// One slot of the ring: memory plus the metadata of the frame written into it.
pub struct FrameSlot {
    memory: Box<dyn SlotMemory>,
    /// A frame lent by the source; while set, it is the slot's frame instead of `memory`.
    lent: Option<Box<dyn LentFrame>>,
    meta: FrameMeta,
    len: usize,
    capture_time: Duration,
    /// When the source handed the frame to the ring ([`FrameRing::publish`]).
    ready_at: Option<Instant>,
    /// Full-frame copies the source made of the frame in this slot (reset by [`FrameSlot::prepare`]).
    copies: u32,
}

impl FrameSlot {
    pub fn new(memory: Box<dyn SlotMemory>) -> Self {
        FrameSlot {
            memory,
            lent: None,
            meta: FrameMeta {
                width: 0,
                height: 0,
                format: PixelFormat::Rgb8,
                sequence: 0,
                captured_at: SystemTime::UNIX_EPOCH,
            },
            len: 0,
            capture_time: Duration::ZERO,
            ready_at: None,
            copies: 0,
        }
    }

    /// When the frame in this slot was handed to its ring; the wait from then until inference
    /// starts is telemetry's `wait` stage (frames of other cameras ahead of it on the worker).
    pub fn ready_at(&self) -> Option<Instant> {
        self.ready_at
    }

    /// How long the source took to produce the frame in this slot (telemetry's `source` stage).
    pub fn capture_time(&self) -> Duration {
        self.capture_time
    }

    pub fn set_capture_time(&mut self, took: Duration) {
        self.capture_time = took;
    }

    /// Prepares the slot for a frame of `format` at `width`×`height` and returns exactly the bytes
    /// the source must fill. Fails for impossible sizes or when fixed memory is too small.
    pub fn prepare(&mut self, width: u32, height: u32, format: PixelFormat) -> Result<&mut [u8], String> {
        self.lent = None;
        let len = format
            .frame_bytes(width, height)
            .ok_or_else(|| format!("impossible {} frame size {width}x{height}", format.name()))?;
        self.memory.reserve(len)?;
        self.set_frame(width, height, format, len);
        Ok(&mut self.memory.as_mut_slice()[..len])
    }

    /// Makes `frame`, a `width`×`height` frame of `format` in the source's memory, the slot's frame
    /// without copying it. Fails (and gives `frame` back to its source) for impossible sizes and
    /// when the lent bytes are shorter than such a frame.
    pub fn lend(
        &mut self,
        width: u32,
        height: u32,
        format: PixelFormat,
        frame: Box<dyn LentFrame>,
    ) -> Result<(), String> {
        self.lent = None;
        let len = format
            .frame_bytes(width, height)
            .ok_or_else(|| format!("impossible {} frame size {width}x{height}", format.name()))?;
        if frame.bytes().len() < len {
            return Err(format!(
                "a lent {width}x{height} {} frame has {} bytes, not {len}",
                format.name(),
                frame.bytes().len()
            ));
        }
        self.set_frame(width, height, format, len);
        self.lent = Some(frame);
        Ok(())
    }

    fn set_frame(&mut self, width: u32, height: u32, format: PixelFormat, len: usize) {
        self.copies = 0;
        self.meta.width = width;
        self.meta.height = height;
        self.meta.format = format;
        self.len = len;
    }

    /// Gives a lent frame back to its source; the slot's own memory is its frame again.
    fn return_lent(&mut self) {
        self.lent = None;
    }

    /// Whether the slot's frame is one its source lent it ([`FrameSlot::lend`]).
    pub fn is_lent(&self) -> bool {
        self.lent.is_some()
    }

    /// The source copied the whole frame once more (into the slot, or through a buffer of its own
    /// on the way); telemetry reports these per frame (`frame_copies`).
    pub fn note_copy(&mut self) {
        self.copies += 1;
    }

    /// Full-frame copies made of the frame in this slot since [`FrameSlot::prepare`].
    pub fn copies(&self) -> u32 {
        self.copies
    }

    pub fn meta(&self) -> &FrameMeta {
        &self.meta
    }

    pub fn meta_mut(&mut self) -> &mut FrameMeta {
        &mut self.meta
    }

    /// The frame's bytes (length given by the last [`FrameSlot::prepare`] or [`FrameSlot::lend`]).
    pub fn data(&self) -> &[u8] {
        match &self.lent {
            Some(frame) => &frame.bytes()[..self.len],
            None => &self.memory.as_slice()[..self.len],
        }
    }

    /// The memory the frame's bytes start at: the lent frame's, else the slot's own.
    pub fn memory(&self) -> &dyn SlotMemory {
        match &self.lent {
            Some(frame) => frame.memory(),
            None => self.memory.as_ref(),
        }
    }
}

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

    pub fn stats(&self) -> &RingStats {
        &self.stats
    }
}

/// Timed stages of a pipeline. `Total` is source-capture to publish-ready of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    Source,
    /// In the ring until the inference worker took it: other cameras' frames ahead of it.
    Wait,
    Pre,
    Infer,
    Post,
    Publish,
    Total,
}

impl Stage {
    pub const ALL: [Stage; 7] =
        [Stage::Source, Stage::Wait, Stage::Pre, Stage::Infer, Stage::Post, Stage::Publish, Stage::Total];

    /// The JSON key of the stage.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Source => "source",
            Stage::Wait => "wait",
            Stage::Pre => "pre",
            Stage::Infer => "infer",
            Stage::Post => "post",
            Stage::Publish => "publish",
            Stage::Total => "total",
        }
    }

    /// The stage's position in [`Stage::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Stage durations of one processed frame; a stage the pipeline did not time stays `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FrameTimings {
    pub source: Option<Duration>,
    pub wait: Option<Duration>,
    pub pre: Option<Duration>,
    pub infer: Option<Duration>,
    pub post: Option<Duration>,
    pub publish: Option<Duration>,
    pub total: Option<Duration>,
}

impl FrameTimings {
    pub fn get(&self, stage: Stage) -> Option<Duration> {
        match stage {
            Stage::Source => self.source,
            Stage::Wait => self.wait,
            Stage::Pre => self.pre,
            Stage::Infer => self.infer,
            Stage::Post => self.post,
            Stage::Publish => self.publish,
            Stage::Total => self.total,
        }
    }
}

/// Formats a wall-clock time as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC). Times before 1970 print as the
/// epoch: a capture timestamp that old is a clock fault, not a date worth encoding.
#[derive(Debug, Clone, Copy)]
pub struct Rfc3339Millis(pub SystemTime);

impl fmt::Display for Rfc3339Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let since_epoch = self.0.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = since_epoch.as_secs();
        let (year, month, day) = civil_from_days(secs / 86_400);
        let second_of_day = secs % 86_400;
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
            second_of_day / 3600,
            second_of_day / 60 % 60,
            second_of_day % 60,
            since_epoch.subsec_millis()
        )
    }
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`,
/// restricted to non-negative days).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_bytes_rejects_impossible_sizes() {
        assert_eq!(PixelFormat::Rgb8.frame_bytes(4, 2), Some(24));
        assert_eq!(PixelFormat::Nv12.frame_bytes(4, 2), Some(12));
        assert_eq!(PixelFormat::Yuyv.frame_bytes(3, 2), None);
        assert_eq!(PixelFormat::Nv12.frame_bytes(4, 3), None);
        assert_eq!(PixelFormat::Rgba8.frame_bytes(0, 3), None);
        assert_eq!(PixelFormat::Rgb8.frame_bytes(u32::MAX, u32::MAX), None, "overflow is an impossible size");
    }

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
    fn a_slot_allocator_makes_memory_of_the_size_asked_for() {
        let memory = SlotAllocator::heap().allocate(100).expect("heap");
        assert_eq!(memory.capacity(), 100);
        let failing = SlotAllocator::new(|| Err("no page-locked memory left".into()));
        assert_eq!(failing.allocate(1).err().as_deref(), Some("no page-locked memory left"));
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
