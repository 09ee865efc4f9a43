//! Where a frame lives: slot memory, its allocator, frames lent instead of copied, and the slot.
//!
//! Owns: [`SlotMemory`] (heap here; pinned/mapped memory comes from the CUDA layer through it and
//! [`SlotAllocator`]), [`LentFrame`] (a source's own memory lent to a slot), [`FrameSlot`] (memory
//! plus the metadata of the frame written into it) and [`CaptureMode`] (how a source gets its
//! frames into the slots). Must not: hand slots between threads (`ring` does) or allocate per frame
//! once a slot has grown to its camera's frames.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::format::{FrameMeta, PixelFormat};

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
    pub(super) fn index(self) -> u8 {
        match self {
            CaptureMode::Copy => 1,
            CaptureMode::Decode => 2,
            CaptureMode::Generate => 3,
            CaptureMode::Pool => 4,
            CaptureMode::Userptr => 5,
        }
    }

    pub(super) fn from_index(index: u8) -> Option<CaptureMode> {
        [CaptureMode::Copy, CaptureMode::Decode, CaptureMode::Generate, CaptureMode::Pool, CaptureMode::Userptr]
            .into_iter()
            .find(|mode| mode.index() == index)
    }
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
pub struct HeapMemory(pub(super) Vec<u8>);

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
    /// When the source handed the frame to the ring ([`FrameRing::publish`](super::ring::FrameRing::publish)).
    pub(super) ready_at: Option<Instant>,
    /// Full-frame copies the source made of the frame in this slot (reset by [`FrameSlot::prepare`]).
    pub(super) copies: u32,
    /// The continuity the frame belongs to ([`FrameSlot::continuity`]).
    continuity: u64,
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
            continuity: 0,
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
    pub(super) fn return_lent(&mut self) {
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

    /// Which continuous view the frame belongs to: frames with one value continue one another,
    /// and a frame with another value shows something unrelated (the next of a folder of
    /// pictures: a new scene, in the user's words), so tracking ends every track when it changes.
    /// Cameras never change it (0); [`FrameSlot::prepare`] and [`FrameSlot::lend`] keep it, so a
    /// source that sets it sets it for every frame.
    pub fn continuity(&self) -> u64 {
        self.continuity
    }

    pub fn set_continuity(&mut self, continuity: u64) {
        self.continuity = continuity;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_allocator_makes_memory_of_the_size_asked_for() {
        let memory = SlotAllocator::heap().allocate(100).expect("heap");
        assert_eq!(memory.capacity(), 100);
        let failing = SlotAllocator::new(|| Err("no page-locked memory left".into()));
        assert_eq!(failing.allocate(1).err().as_deref(), Some("no page-locked memory left"));
    }
}
