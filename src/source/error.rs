//! What a frame source can fail with.
//!
//! Owns: [`SourceError`] (a source that cannot be opened, or cannot read any more). It names the
//! source; the error that carries it names the camera. Must not: say more about a source than its
//! message (transient trouble is not an error: [`super::frame_source::Capture::Retry`]).

use crate::sys::exit::{Classified, ExitClass};

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{source_name}: {message}")]
    Open { source_name: String, message: String },
    #[error("{source_name}: {message}")]
    Read { source_name: String, message: String },
}

impl Classified for SourceError {
    /// A source that cannot be opened at start (no such image directory, a GStreamer pipeline that
    /// does not parse, a node that is not a capture device) is a configuration mistake. Cameras
    /// that are only absent right now do not fail: V4L2 and GStreamer sources reconnect instead.
    fn exit_class(&self) -> ExitClass {
        ExitClass::configuration_if(matches!(self, SourceError::Open { .. }))
    }
}
