//! Frame sources: where a camera's frames come from.
//!
//! Owns: what a kind of source is ([`kind`]: [`SourceKind`], which answers for itself — checks,
//! secrets, what it delivers, how it opens), the kinds' tables ([`kinds`]: each kind's keys,
//! defaults, documentation and checks, in a file of its own), their registration ([`config`]:
//! [`SourceConfig`], a camera's `source` table, one line per kind), the bounds on every decode
//! ([`limits`]: `[limits]`), the [`FrameSource`] trait and what a call to it produced
//! ([`frame_source`]), [`SourceError`] ([`error`]), the implementations ([`images`],
//! [`synthetic`], [`v4l2`], `gstreamer`: RTSP, CSI, a pipeline), [`reconnect`] (what a source
//! that can lose its device shares), [`status`] (a source's connection state, for telemetry),
//! [`image_decode`], the one bounded decoder every source (and `detect`) decodes untrusted image
//! bytes through, and [`tap`], what a source hands a recording camera's recorder. Each
//! implementation writes straight into the frame slot it is given. Must not: preprocess, run
//! models, pace frames (a camera's fps cap is its source thread's, in `crate::infer::camera`), or
//! block forever without checking its stop flag. This file only declares and re-exports.

pub mod config;
mod error;
mod frame_source;
#[cfg(feature = "gstreamer")]
pub mod gstreamer;
pub mod image_decode;
pub mod images;
pub mod kind;
pub mod kinds;
pub mod limits;
pub mod reconnect;
pub mod rtsp_transport;
pub mod status;
pub mod synthetic;
pub mod tap;
pub mod v4l2;

pub use config::SourceConfig;
pub use error::SourceError;
pub use frame_source::{Capture, FrameSource};
pub use kind::{Opening, SourceKind, SourceProblem};
pub use status::{SourceReport, SourceState, SourceStatus};
