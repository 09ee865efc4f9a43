//! The `v4l2` kind: a V4L2 capture device (USB UVC cameras) at a size, rate and format. Owns its
//! table ([`V4l2Config`]), its documentation and checks; the source itself is
//! `crate::source::v4l2`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::frame_size::{fits_the_limits, rgb_bytes};
use crate::source::error::SourceError;
use crate::source::frame_source::FrameSource;
use crate::source::kind::{Opening, SourceKind, SourceProblem};
use crate::source::limits::LimitsConfig;
use crate::source::v4l2::{check_device_node, V4l2Format, V4l2Source};

/// Its lines of the built-in default's documentation of `source`.
pub const DOCUMENTATION: &str = r#"#   { kind = "v4l2", device = "/dev/video0", width = 1280, height = 720, fps = 30, format = "mjpeg" | "yuyv" }
#                                                                       (fps = 30, 1..=1000; the device
#       must be a V4L2 node — character device, major 81 — or absent: an absent camera is waited for)
"#;

/// Largest V4L2 `fps` requested.
pub const MAX_V4L2_FPS: u32 = 1000;

/// `source = { kind = "v4l2", ... }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct V4l2Config {
    pub device: PathBuf,
    pub width: u32,
    pub height: u32,
    #[serde(default = "default_fps")]
    pub fps: u32,
    pub format: V4l2Format,
}

fn default_fps() -> u32 {
    30
}

impl SourceKind for V4l2Config {
    fn delivers_encoded(&self) -> bool {
        false
    }

    /// MJPEG is decoded to RGB (3 bytes a pixel); YUYV needs 2.
    fn frame_bytes(&self) -> Option<usize> {
        Some(rgb_bytes(self.width, self.height))
    }

    fn validate(&self, limits: &LimitsConfig) -> Result<(), SourceProblem> {
        if self.width == 0 || self.height == 0 || self.fps == 0 {
            return Err(SourceProblem::table("v4l2 width, height and fps must be non-zero"));
        }
        fits_the_limits(self.width, self.height, limits)?;
        if self.fps > MAX_V4L2_FPS {
            return Err(SourceProblem::key("fps", format!("{} is outside 1..={MAX_V4L2_FPS}", self.fps)));
        }
        Ok(())
    }

    /// A path that exists must be a V4L2 device node; an absent camera is waited for.
    fn check(&self, _camera: &str) -> Result<(), SourceError> {
        check_device_node(&self.device)
    }

    fn open(&self, _camera: &str, opening: Opening<'_>) -> Result<Box<dyn FrameSource>, SourceError> {
        let Opening { limits, stop, slots, .. } = opening;
        let (width, height, fps, format) = (self.width, self.height, self.fps, self.format);
        Ok(Box::new(V4l2Source::open(&self.device, width, height, fps, format, limits, stop, slots)?))
    }
}
