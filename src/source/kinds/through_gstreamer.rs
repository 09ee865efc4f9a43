//! What the kinds GStreamer runs (`rtsp`, `csi`, `gstreamer`) share: opening the pipeline a kind
//! describes, and the refusal of a binary built without GStreamer. Must not: know a kind.

use crate::source::error::SourceError;
#[cfg(feature = "gstreamer")]
use crate::source::frame_source::FrameSource;
#[cfg(feature = "gstreamer")]
use crate::source::gstreamer::{GstreamerOptions, GstreamerSource, PipelineSpec};
#[cfg(feature = "gstreamer")]
use crate::source::kind::Opening;

/// Opens `spec` for camera `camera`; its encoded stream goes to the camera's tap.
#[cfg(feature = "gstreamer")]
pub fn open(camera: &str, spec: PipelineSpec, opening: Opening<'_>) -> Result<Box<dyn FrameSource>, SourceError> {
    let options = GstreamerOptions {
        slots: opening.slots.clone(),
        record: opening.tap,
        camera: Some(camera.to_owned()),
        ..GstreamerOptions::default()
    };
    Ok(Box::new(GstreamerSource::with_options(spec, options, opening.limits, opening.stop)?))
}

/// Why a source of kind `kind` cannot run in this binary.
#[cfg(not(feature = "gstreamer"))]
pub fn not_built(kind: &str) -> SourceError {
    SourceError::Open {
        source_name: format!("{kind} source"),
        message: "RTSP, CSI and GStreamer sources need a binary built with GStreamer: `bash .ci/build` in the \
                  source tree builds one where GStreamer's development files are installed and names the Debian \
                  packages where they are not (or `cargo build --release --features gstreamer`); the Debian \
                  package has it"
            .into(),
    }
}
