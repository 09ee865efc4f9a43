//! The recorder's figures as it reports them ([`RecordReport`]: telemetry's `outlets.record`, and
//! `figures` turns it into `/metrics`). Must not: gather them (the recorder does).

use std::collections::BTreeMap;

use serde::Serialize;

use super::camera::Feed;

/// The recorder's figures (telemetry's `outlets.record`).
#[derive(Debug, Clone, Serialize)]
pub struct RecordReport {
    pub dir: String,
    /// Recording is paused (a disk too full); `paused_reason` says why.
    pub paused: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_reason: Option<String>,
    /// Clips in the record directory and their bytes, and the byte budget (`record.max_gib`).
    pub clips: u64,
    pub bytes: u64,
    pub max_bytes: u64,
    /// Clips retention removed since start.
    pub removed: u64,
    pub cameras: BTreeMap<String, CameraRecordReport>,
}

/// One camera's recording figures.
#[derive(Debug, Clone, Serialize)]
pub struct CameraRecordReport {
    pub feed: Feed,
    /// A clip is being written now.
    pub recording: bool,
    /// The camera's clips in the directory and their bytes.
    pub clips: u64,
    pub bytes: u64,
    /// Clips (and bytes) written since start.
    pub written: u64,
    pub written_bytes: u64,
    /// Memory the pre-roll holds now.
    pub preroll_bytes: u64,
    /// Times the pre-roll was emptied because one keyframe interval alone was over
    /// `record.preroll_max_mib` (a camera with long keyframe intervals): a clip asked for then
    /// starts at the next keyframe, later than `pre_s` before its event.
    pub preroll_cut: u64,
    /// Video dropped: the recorder's queue full (and what followed until the next keyframe), the
    /// pre-roll over its byte bound, the encoder behind; and frames' boxes its queue had no room for.
    pub dropped: u64,
    /// Clips that could not be started or written, and units that could not be read.
    pub failed: u64,
}
