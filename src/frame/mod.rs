//! Frames and the frame-slot ring between a source and its pipeline.
//!
//! Owns, one job per file: pixel formats and frame metadata (`format`); slot memory, its allocator,
//! frames a source lends a slot instead of copying them and the slot itself (`slot`); [`FrameRing`],
//! the bounded hand-over from a source thread to the inference worker that drops the *oldest*
//! ready frame when the worker is behind (`ring`); and the per-frame stage timings ([`Stage`],
//! [`FrameTimings`]) that every later stage reports (`timings`); a frame copied out of its slot
//! ([`FrameCopy`], `copy`: the few frames an engine is checked on). Must not: decode images, talk
//! to devices, or allocate per frame once the ring is warm.

mod copy;
mod format;
mod ring;
mod slot;
mod timings;

pub use copy::FrameCopy;
pub use format::{FrameMeta, PixelFormat};
pub use ring::{Doorbell, FrameRing, RingStats};
pub use slot::{CaptureMode, FrameSlot, HeapMemory, LentFrame, SlotAllocator, SlotMemory};
pub use timings::{FrameTimings, Stage};
