//! `[engine]`: how TensorRT engines are built, cached, checked and batched (`[engine.store]`, the
//! fleet's packs, is `engine_store`'s). Must not: build or load an engine.

use std::num::NonZeroUsize;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::engine_store::EngineStoreConfig;
use super::service_dirs::ServiceDir;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp32,
    Fp16,
    Int8,
}

/// What serves a model while its engine is built or fetched (`engine.serve_while_building`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServeWhileBuilding {
    /// The CPU engine serves the model meanwhile, and the engine takes over live.
    Cpu,
    /// Nothing serves until the engine is there (the start waits for it).
    None,
}

/// What becomes of an engine whose detections disagree with its model's CPU reference
/// (`engine.on_disagreement`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnDisagreement {
    /// It never serves (nor is it cached); the CPU keeps serving.
    Refuse,
    /// It serves, and the warning stays in the status.
    Warn,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    /// The default depends on the environment (systemd's `CacheDirectory=`), so it is computed
    /// here rather than written in the default config.
    #[serde(default = "default_cache_dir")]
    pub cache_dir: PathBuf,
    pub precision: Precision,
    /// Builder workspace limit in MiB.
    pub workspace_mib: u32,
    /// DLA core (Orin: 0 or 1) with GPU fallback; absent = GPU only.
    pub dla_core: Option<u32>,
    /// TensorRT builder optimisation level 0..=5.
    pub optimization_level: u8,
    /// Longest an engine build (and the wait for another process's build) may take, in seconds.
    pub build_timeout_s: u32,
    /// What serves a model while its engine is built.
    pub serve_while_building: ServeWhileBuilding,
    /// The least recall and precision (0..=1) a new engine must reach against the CPU reference.
    pub min_agreement: f64,
    pub on_disagreement: OnDisagreement,
    /// Ring slots per camera (≥ 2).
    pub frame_slots: usize,
    /// Most frames (one per camera) one inference takes, 1..=[`MAX_BATCH`]; 1 turns batching off.
    pub max_batch: NonZeroUsize,
    /// Longest wait for more cameras' frames once one frame is ready, in ms (0: take what is ready).
    pub batch_timeout_ms: u32,
    /// `[engine.store]`: the fleet's engine packs and their signatures.
    pub store: EngineStoreConfig,
}

/// Largest `engine.frame_slots` accepted: each slot holds a whole frame (up to
/// `limits.max_alloc_mib`), per camera.
pub const MAX_FRAME_SLOTS: usize = 16;
/// Largest `engine.workspace_mib` accepted (64 GiB: more than any Jetson's memory).
pub const MAX_WORKSPACE_MIB: u32 = 65_536;
/// Largest `engine.max_batch` accepted.
pub const MAX_BATCH: usize = 64;
/// Largest `engine.batch_timeout_ms` accepted: a second of added latency is already absurd.
pub const MAX_BATCH_TIMEOUT_MS: u32 = 1000;

impl EngineConfig {
    pub fn batch_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(u64::from(self.batch_timeout_ms))
    }
}

fn default_cache_dir() -> PathBuf {
    ServiceDir::Cache.default_dir()
}
