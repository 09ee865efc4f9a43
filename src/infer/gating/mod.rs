//! Motion gating in the pipeline: the `[motion]` section ([`config`]), each camera's gate on
//! its source thread ([`camera_gate`]), which keeps frames without motion from inference, and what
//! reaches a running gate and what it shows ([`link`]: masks saved from the page, the motion the
//! page's debug view draws, [`view`]).
//!
//! Owns: what `crate::motion` judges, applied to a camera's frames with its settings. Must not:
//! judge motion itself (`crate::motion` does) or track (the sink holds the tracks of a gated frame).
//! This file only declares and re-exports.

pub mod camera_gate;
pub mod config;
pub mod link;
pub mod view;

pub use camera_gate::CameraGate;
pub use config::{CameraMotion, CameraMotionConfig, MotionConfig};
pub use link::{MotionGates, MotionLink};
pub use view::MotionView;
