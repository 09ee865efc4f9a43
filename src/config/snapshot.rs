//! `[snapshot]`: the pictures published per camera and per event. Must not: encode them.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotConfig {
    pub enabled: bool,
    /// Minimum seconds between snapshots per camera.
    pub interval_s: f32,
    /// JPEG quality 1..=100.
    pub jpeg_quality: u8,
    /// Publish each tracked object's best picture when its event ends (needs `tracking.enabled`).
    pub events: bool,
}
