//! The `[record]` section (event clips) and each camera's `record` overrides.
//!
//! Owns: the schema of the recording keys and their ranges (one camera's recording as the whole
//! config decides it, and the checks against the rest, are `recording`'s). Must not: open the
//! record directory, check free space or know what a source can encode (that is `crate::record`'s
//! business at start and at `check-config`).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Longest pre-roll: the encoded ring holds this much per camera (plus a GOP).
pub const MAX_PRE_S: f32 = 60.0;
/// Longest recording after an event ends.
pub const MAX_POST_S: f32 = 300.0;
/// Longest an event may have to last before it gets a clip.
pub const MAX_MIN_EVENT_S: f32 = 60.0;
/// Clip length bounds: a clip longer than `max_clip_s` is closed and the recording goes on in a new
/// one, so that a parked car cannot make one file of a day.
pub const MIN_CLIP_S: u32 = 10;
pub const MAX_CLIP_S: u32 = 3600;
/// Pre-roll memory per camera, MiB.
pub const MAX_PREROLL_MIB: u32 = 1024;
/// Longest age kept, days (ten years).
pub const MAX_DAYS: u32 = 3650;
/// Largest raw-source encoding rate and width.
pub const MAX_ENCODE_FPS: f32 = 60.0;
pub const MAX_ENCODE_WIDTH: u32 = 3840;
pub const MAX_BITRATE_KBPS: u32 = 100_000;

/// How a raw source (V4L2, CSI, images, a test pattern) gets its frames encoded for clips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EncoderChoice {
    /// The hardware H.264 encoder where the machine has one (`nvv4l2h264enc`), else software.
    Auto,
    /// Only the hardware encoder: a camera that would need software is refused.
    Hardware,
    /// The software encoder (x264) at the reduced rate and size below.
    Software,
    /// Raw sources are not encoded: recording such a camera is refused at `check-config`.
    None,
}

/// `[record.encoder]`: what raw sources are encoded with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncoderConfig {
    pub kind: EncoderChoice,
    /// Frames per second encoded (the camera's frames are thinned to this).
    pub fps: f32,
    /// Widest frame encoded; wider frames are scaled down, aspect kept.
    pub max_width: u32,
    pub bitrate_kbps: u32,
}

/// `[record]`: defaults for every camera and the recorder's shared budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordConfig {
    pub enabled: bool,
    /// Where clips go: one folder per camera. Default: the service's state directory + `clips`.
    #[serde(default = "default_record_dir")]
    pub dir: PathBuf,
    pub pre_s: f32,
    pub post_s: f32,
    /// Labels whose events get a clip; empty: every label.
    pub labels: Vec<String>,
    pub min_event_s: f32,
    pub max_clip_s: u32,
    /// Byte budget of the whole directory, GiB; oldest clips go first.
    pub max_gib: f64,
    /// Clips older than this many days are removed; 0: no age limit.
    pub max_days: u32,
    /// Recording pauses while the file system has less free space than this, MiB.
    pub min_free_mib: u32,
    /// Most memory the encoded pre-roll of one camera may hold, MiB.
    pub preroll_max_mib: u32,
    pub encoder: EncoderConfig,
}

/// A camera's `record = { … }`: each key set here replaces `[record]`'s for this camera.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CameraRecordConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_s: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_s: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    /// Only events inside one of these zones of the camera get a clip; empty: anywhere.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_event_s: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoder: Option<EncoderChoice>,
}

/// One camera's recording settings, resolved and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    pub pre: Duration,
    pub post: Duration,
    /// Empty: every label.
    pub labels: Vec<String>,
    /// Empty: anywhere in the frame.
    pub zones: Vec<String>,
    pub min_event: Duration,
    pub max_clip: Duration,
    pub preroll_max_bytes: usize,
    pub encoder: EncoderConfig,
}

pub(super) fn default_record_dir() -> PathBuf {
    super::service_dirs::ServiceDir::State.default_dir().join("clips")
}
