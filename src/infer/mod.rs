//! ② Frames through the model: each camera's source thread and frame ring, the scheduler that
//! runs every camera's frames on one inference worker per GPU, and the per-frame step.
//!
//! Owns: threads, rings, batching and fairness. Must not: publish, format payloads, or know about
//! MQTT; results leave through the [`FrameSink`](step::FrameSink) the caller provides.

pub mod agreement;
pub mod camera;
pub mod classifier;
pub mod engine_build;
pub mod scheduler;
pub mod step;
