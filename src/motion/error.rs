//! Why a frame could not be judged for motion.
//!
//! Owns: [`MotionError`]. Must not: decide what the caller does about it (the camera sends such a
//! frame to inference, as if it moved).

/// A frame the luma downscale cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MotionError {
    #[error("impossible {format} frame size {width}x{height}")]
    ImpossibleFrameSize { format: &'static str, width: u32, height: u32 },
    #[error("{format} frame needs {needed} bytes, got {actual}")]
    FrameTooShort { format: &'static str, needed: usize, actual: usize },
}
