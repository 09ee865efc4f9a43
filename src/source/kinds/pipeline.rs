//! The `gstreamer` kind: a GStreamer pipeline of the user's ending in `appsink` (feature
//! `gstreamer`), for anything the other kinds do not cover. Owns its table ([`PipelineConfig`]),
//! its documentation and check; the source itself is `crate::source::gstreamer`'s.

use serde::{Deserialize, Serialize};

use super::through_gstreamer::{self, Pipelined};
use crate::source::error::SourceError;
use crate::source::frame_source::FrameSource;
#[cfg(feature = "gstreamer")]
use crate::source::gstreamer::PipelineSpec;
use crate::source::kind::{Opening, SourceKind, SourceProblem};
use crate::source::limits::LimitsConfig;

/// Its lines of the built-in default's documentation of `source`.
pub const DOCUMENTATION: &str = r#"#   { kind = "gstreamer", pipeline = "… ! appsink" }                    (any other GStreamer pipeline; needs the `gstreamer` build feature)
"#;

/// `source = { kind = "gstreamer", pipeline = "... ! appsink" }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    pub pipeline: String,
}

impl Pipelined for PipelineConfig {
    const KIND: &'static str = "gstreamer";

    #[cfg(feature = "gstreamer")]
    fn pipeline(&self, _camera: &str) -> Result<PipelineSpec, SourceError> {
        Ok(PipelineSpec::Launch(self.pipeline.clone()))
    }
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

    fn check(&self, camera: &str) -> Result<(), SourceError> {
        through_gstreamer::check(self, camera)
    }

    fn open(&self, camera: &str, opening: Opening<'_>) -> Result<Box<dyn FrameSource>, SourceError> {
        through_gstreamer::open(self, camera, opening)
    }
}
