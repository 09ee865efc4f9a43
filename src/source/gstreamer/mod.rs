//! GStreamer appsink source (cargo feature `gstreamer`): RTSP cameras ([`rtsp`]: a URL, the
//! decoder chosen by [`decoder`]), Jetson CSI cameras ([`csi`]: `nvarguscamerasrc`), and a
//! pipeline the user writes for anything else.
//!
//! Files: [`appsink`] (the source: the pipeline, its appsink, frames into slots, restarts),
//! [`buffer`] (a buffer's format and capture time), [`slot_pool`] (slot memory offered upstream), [`record_tap`] (the compressed stream before the
//! decoder, for the recorder), [`rtsp`], [`csi`], [`decoder`]. This file only declares and
//! re-exports.

pub mod appsink;
mod buffer;
pub mod csi;
pub mod decoder;
pub mod record_tap;
pub mod rtsp;
pub mod slot_pool;

pub use appsink::{GstreamerOptions, GstreamerSource, PipelineSpec};
pub use buffer::ACCEPTED_FORMATS;
