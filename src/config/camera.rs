//! `[[camera]]`: a camera's name, source, frame-rate cap, zones, lines, clips and detector.
//! Must not: check the zones' geometry (`scene` parses it).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::record::CameraRecordConfig;
use crate::source::config::SourceConfig;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CameraConfig {
    /// Topic segment: letters, digits, `_` and `-`.
    pub name: String,
    pub source: SourceConfig,
    /// Frame-rate cap; 0 (the default inside a `[[camera]]` table) = as fast as the source and
    /// pipeline go.
    #[serde(default)]
    pub fps: f32,
    /// `[[camera.zone]]`: polygons whose occupancy is counted and whose entry and exit are events.
    #[serde(default, rename = "zone")]
    pub zones: Vec<ZoneConfig>,
    /// `[[camera.line]]`: segments whose crossings are events.
    #[serde(default, rename = "line")]
    pub lines: Vec<LineConfig>,
    /// This camera's event clips, over `[record]` (`record = { enabled = true, zones = [...] }`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<CameraRecordConfig>,
    /// The `[models.<name>]` detector that runs on this camera; default: `[model]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// A zone: a polygon in frame fractions (x from the left, y from the top, 0.0..=1.0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoneConfig {
    /// Topic segment: letters, digits, `_` and `-`; unique per camera.
    pub name: String,
    /// At least 3 points `[x, y]`, no self-intersection.
    pub polygon: Vec<[f64; 2]>,
    /// Only objects with these labels count in the zone; empty: every label.
    #[serde(default)]
    pub labels: Vec<String>,
}

/// A counting line: a directed segment in frame fractions; crossing it from its left to its right
/// (walking from the first point to the second) is `in`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LineConfig {
    /// Letters, digits, `_` and `-`; unique per camera.
    pub name: String,
    pub points: [[f64; 2]; 2],
}

impl CameraConfig {
    /// Time between frames under the fps cap; `None` when uncapped. Validation keeps `fps` at 0
    /// or at least once a day, so the interval always fits a `Duration`.
    pub fn frame_interval(&self) -> Option<Duration> {
        (self.fps > 0.0).then(|| Duration::from_secs_f32(1.0 / self.fps))
    }

    /// The largest frame this camera can deliver, in bytes, for sources that must be sized up
    /// front (page-locked GPU slots). Sources without a fixed size (image files, GStreamer) get
    /// room for a 4K RGB frame.
    pub fn max_frame_bytes(&self) -> usize {
        const UNKNOWN_SIZE: usize = 3840 * 2160 * 3;
        self.source.kind().frame_bytes().unwrap_or(UNKNOWN_SIZE)
    }
}
