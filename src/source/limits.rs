//! `[limits]`: the bounds on every decode of untrusted image bytes. Must not: decode.

use serde::{Deserialize, Serialize};

/// Bounds on every decode of untrusted image bytes (image files, MJPEG frames, GStreamer samples),
/// checked before anything frame-sized is allocated. A frame over them is skipped and counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Widest image or frame accepted, in pixels.
    pub max_width: u32,
    /// Tallest image or frame accepted, in pixels.
    pub max_height: u32,
    /// Most memory one decode may allocate for the decoded frame (and a colour conversion copy).
    pub max_alloc_mib: u32,
}

impl LimitsConfig {
    pub fn max_alloc_bytes(&self) -> u64 {
        u64::from(self.max_alloc_mib) << 20
    }
}

/// Largest `limits.max_width` and `limits.max_height` accepted, in pixels.
pub const MAX_IMAGE_SIDE: u32 = 65_535;
/// Largest `limits.max_alloc_mib` accepted (16 GiB).
pub const MAX_ALLOC_MIB: u32 = 16_384;
