//! ⑧ Event clips: per camera a pre-roll of its compressed stream, and the clips its events start.
//!
//! Owns: the [`Recorder`] (`recorder`) — for every recording camera a planner ([`plan`]: which
//! events get a clip, named as the first event asks for it), a
//! [`RecordTap`](crate::source::tap::RecordTap) for the camera's source side and a recorder thread
//! ([`camera`]: pre-roll, clip file with its metadata track of each processed frame's [`boxes`],
//! encoder for raw frames) — the one [`index::ClipIndex`] of the record directory, retention within
//! `[record]`'s byte and age budget ([`retention`]: the clips being written count), a clip deleted
//! by a user ([`deletion`]), pausing while the disk is too full, honouring each camera's run-time
//! `record` switch (`crate::controls`: off, its events start no clip), and [`check()`], what
//! `check-config` refuses. Must not: slow detection (a camera records on its own thread, fed
//! through bounded queues that drop and count; the planner does no I/O), decode or re-encode an
//! encoded camera's stream, or serialise events (the MQTT outlet does).
//!
//! This file only declares and re-exports.

pub mod boxes;
pub mod camera;
pub mod check;
pub mod clip;
pub mod clip_ref;
pub mod deletion;
pub mod dir;
#[cfg(feature = "gstreamer")]
pub mod encode;
pub mod error;
pub mod figures;
pub mod index;
pub mod metadata;
pub mod mp4;
pub mod nal;
pub mod plan;
pub mod preroll;
pub mod recorder;
pub mod report;
pub mod retention;
#[cfg(test)]
pub mod test_stream;
pub mod timeline;

pub use check::check;
pub use clip_ref::{clip_ref, clip_url};
pub use error::RecordError;
pub use recorder::Recorder;
pub use report::{CameraRecordReport, RecordReport};
