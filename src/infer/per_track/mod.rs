//! Per-track models: models that run on crops of a camera's confirmed tracks rather than on whole
//! frames (`[models.<name>]` with `kind = "classifier"` or `"embedder"`). A per-track model is a
//! plan (which tracks, when: `crate::track::crop_plan`), crops, a session on every worker and a
//! typed answer kept per track; the classifier is its first kind, the embedder its second.
//!
//! Files: [`kind`] (what a kind is: its decoder and its answer), [`classifier`] (the first kind),
//! [`embedder`] (the second), [`registry`] (every kind, one line each), [`registration`] (what a kind registers), [`lane`] (a model the
//! workers run), [`rules`] (its crop rule from the config), [`sessions`] (a worker's sessions, running a model on crops), [`camera`] (one
//! camera's plans and what its tracks keep), [`attribute`] (what the outlets get). This file only
//! declares and re-exports.
//!
//! Adding a kind means: its file here (a [`PerTrackKind`] that reads its outputs and compares its
//! engine with the CPU over `crate::infer::agreement`, a [`TrackAnswer`] that says what a track
//! keeps and how messages carry it, its `ROLE` — its config identity,
//! `crate::config::models::PerTrackRole` — and its `REGISTERED` line: how it is built from a
//! loaded model), its decoder (`crate::decode`), and one line in [`registry::KINDS`]. Nothing
//! below: the daemon reads its config with the registered roles (`crate::cmd::outlets::schema`),
//! and the config's checks, the model file's recognition (`crate::onnx::describe`), Home
//! Assistant's sensors and re-identification ask the role, never the kind's name.
//!
//! Must not: track, publish, or know a kind's outputs outside its own file.

pub mod attribute;
pub mod camera;
pub mod classifier;
pub mod embedder;
pub mod kind;
pub mod lane;
pub mod registration;
pub mod registry;
pub mod rules;
pub mod sessions;

pub use attribute::{Attribute, Attributes, TrackAttributes};
pub use camera::{CameraPerTrack, MAX_CROPS_PER_FRAME};
pub use classifier::Classifier;
pub use embedder::Embedder;
pub use kind::{PerTrackKind, TrackAnswer};
pub use lane::PerTrackLane;
pub use registration::RegisteredKind;
pub use registry::{registered, KINDS};
pub use rules::crop_rules;
pub use sessions::PerTrackSessions;
