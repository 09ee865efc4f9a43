//! What a camera's source is to the pipeline: the [`FrameSource`] trait every kind implements, and
//! what one call to it produced ([`Capture`]).
//!
//! Owns: the trait and [`Capture`]. Must not: implement a source.

use super::error::SourceError;
use super::status::SourceStatus;
use crate::frame::{CaptureMode, FrameSlot};

/// What a call to [`FrameSource::next_frame`] produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capture {
    /// The slot holds a new frame.
    Frame,
    /// The source has no more frames (a finite image list); the camera ends normally.
    End,
    /// Nothing this time (a corrupt file skipped, a device reconnecting); call again.
    Retry,
    /// The slot holds a frame decoded from truncated data (a JPEG cut short: the missing part is
    /// grey). It is processed like any frame and counted in telemetry (`truncated`).
    TruncatedFrame,
    /// A frame over `[limits]` was skipped (the source logged it, rate-limited); counted in
    /// telemetry. Call again.
    OverLimit,
}

/// A producer of frames for one camera. Runs on its own thread.
pub trait FrameSource: Send {
    /// A short description for logs and telemetry (`images:/path`, `v4l2:/dev/video0 1280x720 MJPEG`).
    fn describe(&self) -> String;
    /// Writes the next frame into `slot` (via [`FrameSlot::prepare`]) and sets its metadata except
    /// `sequence`, which the pipeline assigns. Transient trouble is logged by the source and reported
    /// as [`Capture::Retry`]; an error ends the camera.
    fn next_frame(&mut self, slot: &mut FrameSlot) -> Result<Capture, SourceError>;
    /// How this source's frames get into the slots as of its latest frame (telemetry's
    /// `capture_mode`); the copies themselves are counted per slot ([`FrameSlot::note_copy`]).
    fn capture_mode(&self) -> CaptureMode;
    /// Every frame must reach inference: the pipeline waits for a free slot instead of dropping
    /// the oldest waiting frame (a replayed recording; a live camera must never wait).
    fn keeps_every_frame(&self) -> bool {
        false
    }
    /// The connection state of a source that can lose its device and reconnect (V4L2, GStreamer),
    /// shared with telemetry. `None` for sources that cannot (files, test patterns): the pipeline
    /// keeps their state.
    fn connection_status(&self) -> Option<SourceStatus> {
        None
    }
}
