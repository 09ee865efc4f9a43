//! Why a frame could not be turned into an input tensor.
//!
//! Owns: [`PreprocessError`], what both CPU implementations (and the GPU's benchmark reference)
//! report. Must not: preprocess.

use super::roi::UnusableRoi;

/// Why a frame could not be turned into an input tensor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreprocessError {
    #[error("impossible {format} frame size {width}x{height}")]
    ImpossibleFrameSize { format: &'static str, width: u32, height: u32 },
    #[error("{format} frame of {width}x{height} needs {needed} bytes, got {actual}")]
    FrameTooShort { format: &'static str, width: u32, height: u32, needed: usize, actual: usize },
    #[error("impossible input tensor size {width}x{height}")]
    ImpossibleTensorSize { width: u32, height: u32 },
    #[error("output buffer has {actual} bytes, the input tensor needs {expected}")]
    OutputLength { expected: usize, actual: usize },
    #[error(transparent)]
    Roi(#[from] UnusableRoi),
}
