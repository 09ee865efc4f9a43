//! The `synthetic` kind: a moving test pattern of a given size. Owns its table
//! ([`SyntheticConfig`]), its documentation and checks; the source itself is
//! `crate::source::synthetic`.

use serde::{Deserialize, Serialize};

use super::frame_size::{fits_the_limits, rgb_bytes};
use crate::source::error::SourceError;
use crate::source::frame_source::FrameSource;
use crate::source::kind::{Opening, SourceKind, SourceProblem};
use crate::source::limits::LimitsConfig;
use crate::source::synthetic::SyntheticSource;

/// Its lines of the built-in default's documentation of `source`.
pub const DOCUMENTATION: &str = r#"#   { kind = "synthetic", width = 640, height = 480 }                   (a moving test pattern; 640 x 480)
"#;

/// `source = { kind = "synthetic", ... }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyntheticConfig {
    #[serde(default = "default_width")]
    pub width: u32,
    #[serde(default = "default_height")]
    pub height: u32,
}

fn default_width() -> u32 {
    640
}
fn default_height() -> u32 {
    480
}

impl SourceKind for SyntheticConfig {
    fn delivers_encoded(&self) -> bool {
        false
    }

    /// RGB, 3 bytes a pixel.
    fn frame_bytes(&self) -> Option<usize> {
        Some(rgb_bytes(self.width, self.height))
    }

    fn validate(&self, limits: &LimitsConfig) -> Result<(), SourceProblem> {
        let (width, height) = (self.width, self.height);
        if width == 0 || height == 0 || width % 2 == 1 || height % 2 == 1 {
            return Err(SourceProblem::table("synthetic width/height must be even and non-zero"));
        }
        fits_the_limits(width, height, limits)
    }

    fn check(&self, _camera: &str) -> Result<(), SourceError> {
        Ok(())
    }

    fn open(&self, _camera: &str, _opening: Opening<'_>) -> Result<Box<dyn FrameSource>, SourceError> {
        Ok(Box::new(SyntheticSource::new(self.width, self.height)))
    }
}
