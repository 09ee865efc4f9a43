//! What the kinds GStreamer runs (`rtsp`, `csi`, `gstreamer`) share: each describes its pipeline
//! ([`Pipelined`]), and is checked and opened through it here — or refused by a binary built
//! without GStreamer. Must not: know a kind.

use crate::source::error::SourceError;
use crate::source::frame_source::FrameSource;
#[cfg(feature = "gstreamer")]
use crate::source::gstreamer::{GstreamerOptions, GstreamerSource, PipelineSpec};
use crate::source::kind::Opening;

/// A kind of source that is a GStreamer pipeline.
pub trait Pipelined {
    /// Its `kind`, as errors name it.
    const KIND: &'static str;

    /// The pipeline that delivers camera `camera`'s frames (an RTSP password is read here).
    #[cfg(feature = "gstreamer")]
    fn pipeline(&self, camera: &str) -> Result<PipelineSpec, SourceError>;
}

/// What opening `kind` for camera `camera` would refuse: its pipeline that cannot be described.
#[cfg(feature = "gstreamer")]
pub fn check<K: Pipelined>(kind: &K, camera: &str) -> Result<(), SourceError> {
    kind.pipeline(camera).map(drop)
}

/// Opens `kind`'s pipeline for camera `camera`; its encoded stream goes to the camera's tap.
#[cfg(feature = "gstreamer")]
pub fn open<K: Pipelined>(kind: &K, camera: &str, opening: Opening<'_>) -> Result<Box<dyn FrameSource>, SourceError> {
    let options = GstreamerOptions {
        slots: opening.slots.clone(),
        record: opening.tap,
        camera: Some(camera.to_owned()),
        ..GstreamerOptions::default()
    };
    Ok(Box::new(GstreamerSource::with_options(kind.pipeline(camera)?, options, opening.limits, opening.stop)?))
}

/// Without GStreamer: the kind cannot run in this binary.
#[cfg(not(feature = "gstreamer"))]
pub fn check<K: Pipelined>(_kind: &K, _camera: &str) -> Result<(), SourceError> {
    Err(not_built(K::KIND))
}

/// Without GStreamer: the kind cannot run in this binary.
#[cfg(not(feature = "gstreamer"))]
pub fn open<K: Pipelined>(
    _kind: &K,
    _camera: &str,
    _opening: Opening<'_>,
) -> Result<Box<dyn FrameSource>, SourceError> {
    Err(not_built(K::KIND))
}

/// Why a source of kind `kind` cannot run in this binary.
#[cfg(not(feature = "gstreamer"))]
fn not_built(kind: &str) -> SourceError {
    SourceError::Open {
        source_name: format!("{kind} source"),
        message: "RTSP, CSI and GStreamer sources need a binary built with GStreamer: `bash .ci/build` in the \
                  source tree builds one where GStreamer's development files are installed and names the Debian \
                  packages where they are not (or `cargo build --release --features gstreamer`); the Debian \
                  package has it"
            .into(),
    }
}
