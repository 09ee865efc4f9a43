//! What the kinds whose frames have a size known up front (`synthetic`, `v4l2`, `csi`) share:
//! the bytes of an RGB frame and the check of a size against `[limits]`.

use crate::source::kind::SourceProblem;
use crate::source::limits::LimitsConfig;

/// Bytes of a `width` x `height` RGB frame (3 a pixel).
pub fn rgb_bytes(width: u32, height: u32) -> usize {
    width as usize * height as usize * 3
}

/// Whether a `width` x `height` frame fits `limits`: its sides, and its RGB frame's bytes.
pub fn fits_the_limits(width: u32, height: u32, limits: &LimitsConfig) -> Result<(), SourceProblem> {
    if width > limits.max_width || height > limits.max_height {
        return Err(sides_beyond(width, height, limits));
    }
    let bytes = rgb_bytes(width, height) as u64;
    if bytes > limits.max_alloc_bytes() {
        return Err(SourceProblem::table(format!(
            "{width}x{height} RGB frames need {} MiB, more than `limits.max_alloc_mib` ({} MiB)",
            bytes.div_ceil(1 << 20),
            limits.max_alloc_mib
        )));
    }
    Ok(())
}

/// A frame's sides beyond `limits.max_width` x `limits.max_height`.
pub fn sides_beyond(width: u32, height: u32, limits: &LimitsConfig) -> SourceProblem {
    SourceProblem::table(format!(
        "{width}x{height} is larger than `limits.max_width` x `limits.max_height` ({}x{})",
        limits.max_width, limits.max_height
    ))
}
