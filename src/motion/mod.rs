//! Motion: where a camera's frame changed, judged on the frame already in memory before it goes
//! to inference, and the gate that skips inference on frames where nothing moved.
//!
//! Owns: the luma image a frame is judged on (a small grid of mean luma, `luma`: its definition,
//! scalar reference and fast downscale; a pixel's luma, `pixel`; the SIMD row kernels, `simd`),
//! the background that follows slow light changes (`background`), masks (`mask`), regions of
//! changed cells (`regions`), the per-camera detector that ties them together (`detector`), its
//! settings (`params`) and the gate (`gate`). All of it is pure CPU work on one camera's state
//! with times that come with the frames. Must not: read the config (the config builds
//! [`MotionParams`] and the masks), touch rings, run inference or publish; the CUDA kernel that
//! makes luma images on the GPU lives in `crate::gpu` and is tested against
//! [`downscale_reference`]; what such a sampler offers a camera's gate is the seam in `sampler`
//! ([`LumaSampler`]). This file only declares and re-exports.

mod background;
mod detector;
mod error;
mod gate;
mod luma;
mod mask;
mod params;
mod pixel;
mod regions;
mod sampler;
#[cfg(test)]
mod scenarios;
mod simd;

pub use detector::{Motion, MotionDetector, MotionState, MAX_REGIONS};
pub use error::MotionError;
pub use gate::{Gate, GateInputs, Reason, Verdict};
pub use luma::{downscale_reference, CellGrid, LumaDownscaler, LumaImage, GRID_ROWS, MAX_CELL};
pub use mask::MAX_MASKS;
pub use params::{Fraction, MotionParams};
pub use pixel::luma_bytes;
pub use regions::Region;
pub use sampler::{LumaSampler, Sampled, SamplerFailed};
