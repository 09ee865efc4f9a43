//! The `csi` kind: a Jetson CSI camera through `nvarguscamerasrc` (feature `gstreamer`),
//! delivered as NV12. Owns its table ([`CsiConfig`]), its documentation and checks; the source
//! itself is `crate::source::gstreamer`'s.

use serde::{Deserialize, Serialize};

use super::frame_size::sides_beyond;
use super::through_gstreamer::{self, Pipelined};
use crate::source::error::SourceError;
use crate::source::frame_source::FrameSource;
#[cfg(feature = "gstreamer")]
use crate::source::gstreamer::{csi::CsiSpec, PipelineSpec};
use crate::source::kind::{Opening, SourceKind, SourceProblem};
use crate::source::limits::LimitsConfig;

/// Its lines of the built-in default's documentation of `source`.
pub const DOCUMENTATION: &str = r#"#   { kind = "csi", sensor_id = 0, width = 1920, height = 1080, fps = 30 }
#       A Jetson CSI camera through nvarguscamerasrc and nvargus-daemon (needs the `gstreamer`
#       build feature), delivered as NV12. (sensor_id = 0, width = 1920, height = 1080, fps = 30)
"#;

/// `source = { kind = "csi", ... }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CsiConfig {
    #[serde(default)]
    pub sensor_id: u32,
    #[serde(default = "default_width")]
    pub width: u32,
    #[serde(default = "default_height")]
    pub height: u32,
    #[serde(default = "default_fps")]
    pub fps: u32,
}

fn default_width() -> u32 {
    1920
}
fn default_height() -> u32 {
    1080
}
fn default_fps() -> u32 {
    30
}

impl Pipelined for CsiConfig {
    const KIND: &'static str = "csi";

    #[cfg(feature = "gstreamer")]
    fn pipeline(&self, _camera: &str) -> Result<PipelineSpec, SourceError> {
        let CsiConfig { sensor_id, width, height, fps } = *self;
        Ok(PipelineSpec::Csi(CsiSpec { sensor_id, width, height, fps }))
    }
}

impl SourceKind for CsiConfig {
    fn delivers_encoded(&self) -> bool {
        false
    }

    /// NV12: 1.5 bytes a pixel.
    fn frame_bytes(&self) -> Option<usize> {
        Some((self.width as usize * self.height as usize).div_ceil(2) * 3)
    }

    fn validate(&self, limits: &LimitsConfig) -> Result<(), SourceProblem> {
        let CsiConfig { width, height, fps, .. } = *self;
        if width == 0 || height == 0 || width % 2 == 1 || height % 2 == 1 || fps == 0 {
            return Err(SourceProblem::table("csi width and height must be even and non-zero, fps non-zero"));
        }
        if width > limits.max_width || height > limits.max_height {
            return Err(sides_beyond(width, height, limits));
        }
        Ok(())
    }

    fn check(&self, camera: &str) -> Result<(), SourceError> {
        through_gstreamer::check(self, camera)
    }

    fn open(&self, camera: &str, opening: Opening<'_>) -> Result<Box<dyn FrameSource>, SourceError> {
        through_gstreamer::open(self, camera, opening)
    }
}
