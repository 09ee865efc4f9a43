//! Run-time controls: per camera detection, snapshots, recording and motion gating on or off, and
//! the score threshold — what users switch while the daemon runs, from Home Assistant (MQTT command
//! topics, `crate::publish::mqtt::outlet`) or the HTTP API (`crate::http::api`).
//!
//! Owns: the current values, which the pipeline reads without a lock (the camera's source thread
//! reads `detect` and, for its motion gate, `gating` on every frame, the sink `snapshots`, the
//! recorder of issue 31 `record`), the checks of a new value (a known camera, a threshold within
//! `0.0..=1.0`), and the change signal that whoever applies or announces a change waits on
//! ([`Controls::changes`]). Start values come from the config (detection, recording and gating on,
//! snapshots as `snapshot.enabled`, `model.score_threshold`), then from what users set before
//! ([`ControlValues`], kept in the controls file: [`file`](mod@file)). Must not: apply a change
//! (`crate::cmd::run` does: the threshold to the inference workers, the end of a camera's tracks
//! when its detection stops, saving the file), or know MQTT or HTTP.
//!
//! Files: [`current`] (the live values), [`values`] (their types and checks), [`file`](mod@file).
//! This file only declares and re-exports.

pub mod current;
pub mod file;
pub mod values;

pub use current::{CameraControls, Controls};
pub use values::{check_threshold, CameraValues, ControlError, ControlValues, Switch};
