//! Typed daemon configuration: parsing, defaults and validation.
//!
//! Owns: the core of the TOML schema — the tables of the stages below the outlets, each typed in a
//! file of its own (`device`, `model`, `engine`, `camera`, `telemetry`, `snapshot`, `tracking`,
//! `http`, `controls`, `record`, `reid`, `models`; a camera's `source` and `[limits]` are typed by
//! `crate::source`, the floor below, and re-exported here) — and the composition
//! with the sections components own ([`section`]: an outlet's table is typed, documented, defaulted
//! and checked in the outlet's folder, and registered). [`Config`] (`whole`) is the whole, read as
//! one: the built-in default is the core's commented text (`defaults.toml`) followed by each
//! section's; it documents every key (`config/jetson-detectd.toml` is the whole text) and is the
//! single source of every default: a user's file is merged over it before typing. Also resolution
//! of relative paths, printing the effective config, and [`ConfigError`], which always names the
//! file, the key and what is allowed. Must not: open models, cameras or sockets — `check-config`
//! relies on validation having no side effects beyond reading the config.
//!
//! This file only declares and re-exports.

pub mod camera;
pub mod camera_scenes;
mod collect;
pub mod controls;
pub mod cpu_budget;
pub mod device;
pub mod engine;
pub mod engine_store;
pub mod error;
pub mod http;
pub mod load;
pub mod located;
mod merge;
pub mod mistake;
pub mod model;
pub mod models;
pub mod named_models;
mod origin;
pub mod record;
pub mod recording;
pub mod reid;
pub mod reid_checks;
pub mod reload;
pub mod scene;
pub mod secrets;
pub mod section;
pub mod service_dirs;
pub mod snapshot;
pub mod telemetry;
pub mod topic;
pub mod tracking;
pub mod validate;
pub mod whole;
mod words;
pub mod zones_file;

/// The vocabulary of `[model.input]` is the preprocessing contract's; it is named here too because
/// it is the config schema's as much.
pub use crate::preprocess::{ColorOrder, ResizeFilter, ResizeKind, TensorDtype, TensorLayout};
pub use crate::source::config::SourceConfig;
pub use crate::source::limits::{LimitsConfig, MAX_ALLOC_MIB, MAX_IMAGE_SIDE};
pub use camera::{CameraConfig, LineConfig, ZoneConfig};
pub use camera_scenes::{camera_scene, camera_scenes};
pub use controls::ControlsConfig;
pub use cpu_budget::CpuBudget;
pub use device::{BackendChoice, CpuEngine, DeviceConfig, Fallback, LogLevel, MAX_CPU_THREADS};
pub use engine::{
    EngineConfig, OnDisagreement, Precision, ServeWhileBuilding, MAX_BATCH, MAX_BATCH_TIMEOUT_MS, MAX_FRAME_SLOTS,
    MAX_WORKSPACE_MIB,
};
pub use error::ConfigError;
pub use http::HttpConfig;
pub use merge::{data_dir, Resolve};
pub use mistake::{Mistake, Mistakes};
pub use model::{ClassScores, DecoderKind, ModelConfig, DESCRIPTION_KEYS, MAX_DETECTIONS};
pub use origin::ConfigOrigin;
pub use scene::{parse_masks, parse_scene, MaskPoints, ParsedScene, SceneError};
pub use snapshot::SnapshotConfig;
pub use telemetry::TelemetryConfig;
pub use topic::{is_topic_segment, machine_suffix, topic_segment};
pub use tracking::TrackingConfig;
pub use whole::{Config, Section, Sections, CORE_DEFAULTS};
