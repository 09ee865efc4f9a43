//! `[device]`: which backend, which GPU, the CPU backend's cores and engine, the log level.
//! Must not: probe the machine beyond counting the cores this process may use.

use std::num::NonZeroUsize;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::cpu_budget::CpuBudget;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    /// TensorRT when the binary has it and libnvinfer loads, else CPU.
    Auto,
    Cpu,
    Tensorrt,
}

/// The CPU backend's inference engine (`device.cpu_engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuEngine {
    /// ONNX Runtime when its library is found, else rten.
    Auto,
    Rten,
    Onnxruntime,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fallback {
    /// A GPU/TensorRT failure at start is fatal.
    None,
    /// Fall back to the CPU backend (logged as a warning).
    Cpu,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl LogLevel {
    pub fn filter(self) -> log::LevelFilter {
        match self {
            LogLevel::Error => log::LevelFilter::Error,
            LogLevel::Warn => log::LevelFilter::Warn,
            LogLevel::Info => log::LevelFilter::Info,
            LogLevel::Debug => log::LevelFilter::Debug,
            LogLevel::Trace => log::LevelFilter::Trace,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceConfig {
    /// Identifies this daemon in MQTT topics; default: the host name.
    pub id: Option<String>,
    pub backend: BackendChoice,
    pub fallback: Fallback,
    /// CUDA device ordinal.
    pub gpu: u32,
    pub log_level: LogLevel,
    /// CPU backend: the cores it uses in all, shared by its inference workers ([`CpuBudget`]);
    /// default: the cores this process may use. See [`DeviceConfig::cpu_threads`].
    pub cpu_threads: Option<NonZeroUsize>,
    /// CPU backend: inference workers, i.e. frames in inference at the same time, each with its
    /// share of the `cpu_threads` cores. Default: one per camera, at most one per core
    /// ([`CpuBudget::for_cameras`]).
    pub cpu_workers: Option<NonZeroUsize>,
    /// CPU backend: the engine that runs the model.
    pub cpu_engine: CpuEngine,
    /// CPU backend: the ONNX Runtime library (`libonnxruntime.so*`); default: `ORT_DYLIB_PATH`,
    /// the library directories, a pip-installed `onnxruntime`.
    pub onnxruntime_library: Option<PathBuf>,
}

/// Largest `device.cpu_threads` accepted: more threads than any Jetson or home server has cores.
pub const MAX_CPU_THREADS: usize = 256;

impl DeviceConfig {
    /// Cores of the CPU backend: `cpu_threads`, else the cores available to this process
    /// (`sched_getaffinity`, cgroup quota), else 1.
    pub fn cpu_threads(&self) -> usize {
        self.cpu_threads
            .or_else(|| std::thread::available_parallelism().ok())
            .map_or(1, NonZeroUsize::get)
            .min(MAX_CPU_THREADS)
    }

    /// Inference workers of the CPU backend for `cameras` cameras ([`CpuBudget::for_cameras`]).
    pub fn cpu_workers(&self, cameras: usize) -> usize {
        CpuBudget::for_cameras(self.cpu_threads(), self.cpu_workers, cameras).workers()
    }
}
