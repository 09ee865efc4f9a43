//! The controls' values and their checks: the switches a camera has, what the HTTP API shows and
//! the controls file keeps, and what a new value must be.
//!
//! Owns: [`Switch`], [`ControlValues`], [`CameraValues`], [`ControlError`], [`check_threshold`].
//! Must not: hold the live values (`super::current` does) or read files (`super::file`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A camera's on/off controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Switch {
    /// Frames go to inference. Off: the camera's frames skip inference and go to its picture alone
    /// (the live view, the periodic snapshot; recording goes on too), its tracks end, its counts go
    /// to 0 and it has no current inference time.
    Detect,
    /// The periodic snapshot (`[snapshot]`) of the camera is made.
    Snapshots,
    /// Event clips of the camera are recorded (the recorder of issue 31 reads it).
    Record,
    /// With `[motion]` enabled, the camera's frames without motion are kept from inference (its
    /// gate reads it on every frame). Off: every frame goes to inference; motion is still judged,
    /// for the camera's motion sensor. Without `[motion]` it changes nothing.
    Gating,
}

impl Switch {
    pub const ALL: [Switch; 4] = [Switch::Detect, Switch::Snapshots, Switch::Record, Switch::Gating];

    /// The switch's name in topics, the API and the controls file.
    pub fn name(self) -> &'static str {
        match self {
            Switch::Detect => "detect",
            Switch::Snapshots => "snapshots",
            Switch::Record => "record",
            Switch::Gating => "gating",
        }
    }

    /// Whether every camera has the switch in MQTT and Home Assistant: `record` belongs to a
    /// camera that records clips, `gating` to cameras with `[motion]` enabled.
    pub fn on_every_camera(self) -> bool {
        matches!(self, Switch::Detect | Switch::Snapshots)
    }

    pub fn from_name(name: &str) -> Option<Switch> {
        Switch::ALL.into_iter().find(|switch| switch.name() == name)
    }
}

/// The controls' values: what the HTTP API shows and the controls file keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlValues {
    pub score_threshold: f32,
    #[serde(default, rename = "camera")]
    pub cameras: BTreeMap<String, CameraValues>,
}

/// One camera's switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CameraValues {
    pub detect: bool,
    pub snapshots: bool,
    pub record: bool,
    /// On in a controls file written before the switch existed: gating as the config says.
    #[serde(default = "gating_on")]
    pub gating: bool,
}

fn gating_on() -> bool {
    true
}

impl CameraValues {
    pub fn get(mut self, switch: Switch) -> bool {
        *self.field(switch)
    }

    pub(super) fn field(&mut self, switch: Switch) -> &mut bool {
        match switch {
            Switch::Detect => &mut self.detect,
            Switch::Snapshots => &mut self.snapshots,
            Switch::Record => &mut self.record,
            Switch::Gating => &mut self.gating,
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ControlError {
    #[error("no camera named {0:?}")]
    UnknownCamera(String),
    #[error("score threshold {0} is outside 0.0..=1.0")]
    Threshold(f32),
}

/// A score threshold is within `0.0..=1.0` (a control set, the controls file, the HTTP API).
pub fn check_threshold(value: f32) -> Result<(), ControlError> {
    if (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(ControlError::Threshold(value))
    }
}
