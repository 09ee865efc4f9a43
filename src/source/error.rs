//! What a frame source can fail with.
//!
//! Owns: [`SourceError`] (a source that cannot be opened, or cannot read any more). It names the
//! source; the error that carries it names the camera. Must not: say more about a source than its
//! message (transient trouble is not an error: [`super::frame_source::Capture::Retry`]).

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{source_name}: {message}")]
    Open { source_name: String, message: String },
    #[error("{source_name}: {message}")]
    Read { source_name: String, message: String },
}
