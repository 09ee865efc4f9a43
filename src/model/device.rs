//! Where models run on this machine: the device settings every model shares.
//!
//! Owns: [`DeviceSpec`] and building it from the config's `[device]` section, the engine cache
//! directory, the engine store and the cameras' largest frame ([`DeviceSpec::from_config`]).
//! Must not: probe the device or decide the backend (`crate::backend::load` does, from this).

use std::num::NonZeroUsize;
use std::path::PathBuf;

use crate::config::engine_store::EngineStoreConfig;
use crate::config::{BackendChoice, Config, CpuEngine, Fallback};

/// The device settings `crate::backend` loads every model with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSpec {
    /// `auto` (TensorRT when it loads, else the CPU), `cpu` or `tensorrt`.
    pub backend: BackendChoice,
    /// Whether a missing TensorRT or GPU falls back to the CPU when `tensorrt` was asked for.
    pub fallback: Fallback,
    /// CUDA device ordinal.
    pub gpu: u32,
    /// The CPU backend's engine, and where its ONNX Runtime library is when set.
    pub cpu_engine: CpuEngine,
    pub onnxruntime_library: Option<PathBuf>,
    /// Threads one CPU inference (and its preprocessing) runs on: `device.cpu_threads`, else the
    /// cores this process may use.
    pub cpu_threads: usize,
    /// `device.cpu_workers`, when set; else the CPU backend decides per number of cameras.
    pub cpu_workers: Option<NonZeroUsize>,
    /// Where built engines, their timing caches and the compiled preprocessing kernel are kept,
    /// shared by every model (`engine.cache_dir`).
    pub cache_dir: PathBuf,
    /// The largest frame any configured camera can deliver, in bytes: the first size of the GPU
    /// path's staging buffer.
    pub max_frame_bytes: usize,
    /// `[engine.store]`: where engines come from beyond the cache, and who must have signed them.
    pub engine_store: EngineStoreConfig,
}

impl DeviceSpec {
    pub fn from_config(config: &Config) -> DeviceSpec {
        let device = &config.device;
        DeviceSpec {
            backend: device.backend,
            fallback: device.fallback,
            gpu: device.gpu,
            cpu_engine: device.cpu_engine,
            onnxruntime_library: device.onnxruntime_library.clone(),
            cpu_threads: device.cpu_threads(),
            cpu_workers: device.cpu_workers,
            cache_dir: config.engine.cache_dir.clone(),
            max_frame_bytes: config.cameras.iter().map(|camera| camera.max_frame_bytes()).max().unwrap_or(0),
            engine_store: config.engine.store.clone(),
        }
    }
}
