//! A frame's luma image made somewhere else than by the calling thread's CPU downscale: a GPU
//! kernel reading the slot the camera wrote the frame into (`crate::gpu`), offered by the backend
//! whose frame slots its GPU can read (`crate::backend::traits::Backend::luma_sampler`).
//!
//! Owns: the [`LumaSampler`] seam and what one call gives ([`Sampled`], [`SamplerFailed`]). Must
//! not: implement a sampler, or decide what a caller does without one (a camera's gate downscales
//! on the CPU: [`super::LumaDownscaler`]).

use super::luma::LumaImage;
use crate::frame::FrameSlot;

/// What one [`LumaSampler::sample`] gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampled {
    /// The frame's luma image is in `out`: the bytes [`super::downscale_reference`] gives.
    Ready,
    /// Not this frame (not ready within the sampler's bound, the frame before is still being
    /// made, or a frame it cannot take): `out` is as it was; the caller makes the image itself.
    Declined,
}

/// A sampler that can no longer make images (its device failed): the caller stops asking it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SamplerFailed(pub String);

/// Makes the luma images of one camera's frames, on the camera's source thread, without waiting
/// longer than a bound of its own for any frame (the thread paces the camera).
pub trait LumaSampler: Send {
    /// The luma image of the frame in `slot` into `out`, or [`Sampled::Declined`].
    fn sample(&mut self, slot: &FrameSlot, out: &mut LumaImage) -> Result<Sampled, SamplerFailed>;
}
