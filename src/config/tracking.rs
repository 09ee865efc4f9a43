//! `[tracking]`: the tracker's and its events' rules. Must not: track.

use serde::{Deserialize, Serialize};

/// `[tracking]`: the per-camera tracker and its event rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrackingConfig {
    /// Track objects and publish events and zone occupancy.
    pub enabled: bool,
    /// A track unseen for longer than this (seconds of capture time) ends.
    pub max_lost_s: f32,
    /// Frames an object must be seen on before its track is confirmed (`start` event, track id).
    pub min_hits: u32,
    /// Detections at or above this score start tracks; weaker ones (down to `model.score_threshold`)
    /// only keep existing tracks alive.
    pub high_score: f32,
    /// Minimum overlap (IoU) between a track's predicted box and a detection.
    pub match_iou: f32,
    /// Live tracks per camera at most (bounds memory, event snapshots included).
    pub max_tracks: usize,
    /// A box whose corners move less than this many pixels...
    pub stationary_px: f32,
    /// ...for this many seconds is stationary.
    pub stationary_s: f32,
}
