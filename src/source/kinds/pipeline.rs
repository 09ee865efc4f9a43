//! The `gstreamer` kind: a GStreamer pipeline of the user's ending in `appsink` (feature
//! `gstreamer`), for anything the other kinds do not cover. Owns its table ([`PipelineConfig`]),
//! its documentation and check; the source itself is `crate::source::gstreamer`'s.

use serde::{Deserialize, Serialize};

#[cfg(not(feature = "gstreamer"))]
use super::through_gstreamer::not_built;
use crate::source::error::SourceError;
use crate::source::frame_source::FrameSource;
#[cfg(feature = "gstreamer")]
use crate::source::gstreamer::PipelineSpec;
use crate::source::kind::{Opening, SourceKind, SourceProblem};
use crate::source::limits::LimitsConfig;

/// Its lines of the built-in default's documentation of `source`.
pub const DOCUMENTATION: &str = r#"#   { kind = "gstreamer", pipeline = "… ! appsink" }                    (any other GStreamer pipeline; needs the `gstreamer` build feature)
"#;

/// Its `kind`, as errors name it.
#[cfg(not(feature = "gstreamer"))]
const KIND: &str = "gstreamer";

/// `source = { kind = "gstreamer", pipeline = "... ! appsink" }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    pub pipeline: String,
}

impl SourceKind for PipelineConfig {
    /// What the pipeline hands its appsink may be an encoded stream the recorder taps.
    fn delivers_encoded(&self) -> bool {
        true
    }

    fn validate(&self, _limits: &LimitsConfig) -> Result<(), SourceProblem> {
        if !self.pipeline.contains("appsink") {
            return Err(SourceProblem::key("pipeline", "the pipeline must end in an `appsink`"));
        }
        Ok(())
    }

    #[cfg(feature = "gstreamer")]
    fn check(&self, _camera: &str) -> Result<(), SourceError> {
        Ok(())
    }

    #[cfg(not(feature = "gstreamer"))]
    fn check(&self, _camera: &str) -> Result<(), SourceError> {
        Err(not_built(KIND))
    }

    #[cfg(feature = "gstreamer")]
    fn open(&self, camera: &str, opening: Opening<'_>) -> Result<Box<dyn FrameSource>, SourceError> {
        super::through_gstreamer::open(camera, PipelineSpec::Launch(self.pipeline.clone()), opening)
    }

    #[cfg(not(feature = "gstreamer"))]
    fn open(&self, _camera: &str, _opening: Opening<'_>) -> Result<Box<dyn FrameSource>, SourceError> {
        Err(not_built(KIND))
    }
}
