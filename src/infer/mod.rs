//! ② Frames through the model: each camera's source thread and frame ring, the scheduler that
//! runs every camera's frames on one inference worker per GPU, the per-frame step, and the
//! per-track models (classifiers) the workers run on crops of tracks.
//!
//! Owns: threads, rings, batching and fairness, motion gating (which frames go to inference:
//! [`gating`]), and the models that run on crops of tracks
//! ([`per_track`]: their sessions on every worker, each camera's plans and what its tracks keep).
//! Must not: publish, format payloads, or know about MQTT; results leave through the
//! [`FrameSink`](step::FrameSink) the caller provides.

pub mod agreement;
pub mod camera;
pub mod engine_build;
pub mod gating;
pub mod per_track;
pub mod scheduler;
pub mod step;
