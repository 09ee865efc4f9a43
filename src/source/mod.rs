//! Frame sources: where a camera's frames come from.
//!
//! Owns: a camera's `source` table, typed ([`config`]), the bounds on every decode ([`limits`]:
//! `[limits]`), the [`FrameSource`] trait and what a call to it produced ([`frame_source`]),
//! [`SourceError`] ([`error`]), checking and opening the configured source ([`configured`]: the
//! one place that maps a source kind to its implementation), the kinds ([`images`],
//! [`synthetic`], [`v4l2`], `gstreamer`: RTSP, CSI, a pipeline), [`reconnect`] (what a source
//! that can lose its device shares), [`status`] (a source's connection state, for telemetry),
//! [`image_decode`], the one bounded decoder every source (and `detect`) decodes untrusted image
//! bytes through, and [`tap`], what a source hands a recording camera's recorder. Each
//! implementation writes straight into the frame slot it is given. Must not: preprocess, run
//! models, pace frames (a camera's fps cap is its source thread's, in `crate::infer::camera`), or
//! block forever without checking its stop flag. This file only declares and re-exports.

pub mod config;
mod configured;
mod error;
mod frame_source;
#[cfg(feature = "gstreamer")]
pub mod gstreamer;
pub mod image_decode;
pub mod images;
pub mod limits;
pub mod reconnect;
pub mod status;
pub mod synthetic;
pub mod tap;
pub mod v4l2;

#[cfg(feature = "gstreamer")]
pub use configured::gstreamer_spec;
pub use configured::{check, delivers_encoded, open};
pub use error::SourceError;
pub use frame_source::{Capture, FrameSource};
pub use status::{SourceReport, SourceState, SourceStatus};
