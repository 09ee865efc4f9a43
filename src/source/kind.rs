//! What a kind of camera source is to the daemon: [`SourceKind`], which each kind's table
//! implements (`super::kinds`), and what opening one is given ([`Opening`]). A kind answers for
//! itself: its checks, its secret files and relative paths, the largest frame it delivers, whether
//! it delivers an encoded stream the recorder may tap, and how it is checked and opened.
//! `super::config` registers the kinds, one line each. Must not: know any kind.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::error::SourceError;
use super::frame_source::FrameSource;
use super::limits::LimitsConfig;
use super::tap::StreamTap;
use crate::frame::SlotAllocator;

/// What is wrong in a camera's `source` table: the key inside it (`None`: the table as a whole)
/// and what is allowed. `crate::config` names the camera and the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceProblem {
    pub key: Option<&'static str>,
    pub message: String,
}

impl SourceProblem {
    /// A problem with the table as a whole (sizes that only fail together).
    pub fn table(message: impl Into<String>) -> SourceProblem {
        SourceProblem { key: None, message: message.into() }
    }

    /// A problem with the key `key` of the table.
    pub fn key(key: &'static str, message: impl Into<String>) -> SourceProblem {
        SourceProblem { key: Some(key), message: message.into() }
    }
}

/// What a camera's source is opened with.
pub struct Opening<'a> {
    /// Bounds on every frame it decodes.
    pub limits: LimitsConfig,
    /// The daemon's shutdown flag: a source that blocks (a camera, GStreamer) checks it, so that
    /// shutdown never waits on a silent device.
    pub stop: Arc<AtomicBool>,
    /// Where a source that lends the ring frames in memory of its own (a GStreamer buffer pool,
    /// V4L2 user-pointer buffers) allocates it.
    pub slots: &'a SlotAllocator,
    /// The camera's tap (its recorder, its live feed), for a kind that delivers an encoded stream.
    pub tap: Option<StreamTap>,
}

/// A kind of camera source, as its table (`source = { kind = "...", ... }`) describes it.
pub trait SourceKind {
    /// Whether it delivers an encoded stream (RTSP, a GStreamer pipeline) that the recorder taps
    /// as it is, or only raw frames (V4L2, CSI, images, the test pattern), which it must encode.
    fn delivers_encoded(&self) -> bool;

    /// The largest frame it delivers, in bytes, for a kind whose frames have a size known up
    /// front (page-locked GPU slots are sized with it); `None`: unknown until frames come.
    fn frame_bytes(&self) -> Option<usize> {
        None
    }

    /// Checks its values against each other and the decode bounds, as `check-config` does: no
    /// file, device or socket is touched.
    fn validate(&self, _limits: &LimitsConfig) -> Result<(), SourceProblem> {
        Ok(())
    }

    /// Its relative paths, to be resolved against the directory of the file that set them.
    fn paths_mut(&mut self) -> Vec<&mut PathBuf> {
        Vec::new()
    }

    /// The secret files it names, each with its key inside the table (`password_file`).
    fn secret_files(&self) -> Vec<(&'static str, &Path)> {
        Vec::new()
    }

    /// Leaves out the secret at `key` (one of [`SourceKind::secret_files`]'s): the source then
    /// runs without it (`check-config` checks the rest as this user).
    fn forget_secret(&mut self, _key: &str) {}

    /// What opening it for camera `camera` would refuse, checked without opening a device, a
    /// socket or an image (`check-config` and the start of `run`). A camera that is only absent
    /// now is not refused: it is waited for.
    fn check(&self, camera: &str) -> Result<(), SourceError>;

    /// Opens it for camera `camera`.
    fn open(&self, camera: &str, opening: Opening<'_>) -> Result<Box<dyn FrameSource>, SourceError>;
}
