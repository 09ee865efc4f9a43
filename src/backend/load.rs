//! Loading the configured backend: the choice between TensorRT and the CPU, and the fallback.
//!
//! Owns: `device.backend` / `device.fallback` semantics and opening the GPU for TensorRT (the
//! device probe that decides whether TensorRT can run). Must not: run inference or start threads;
//! every command that needs a backend (run, detect, bench, selftest) loads it here.

use std::sync::Arc;

use super::cpu::CpuBackend;
use super::{Backend, BackendError};
use crate::config::{BackendChoice, Config, Fallback};
use crate::preprocess::PreprocessSpec;

/// Loads the model on the configured backend: `auto` tries TensorRT (when built in) and runs on
/// the CPU when TensorRT or the GPU is missing; `tensorrt` falls back only when the config says so.
/// `progress` sees an engine build, which can take minutes on first start.
pub fn load_backend(config: &Config, progress: impl FnMut(BuildProgress)) -> Result<Arc<dyn Backend>, BackendError> {
    let may_fall_back = match config.device.backend {
        BackendChoice::Cpu => return load_cpu(config),
        BackendChoice::Auto => true,
        BackendChoice::Tensorrt => config.device.fallback == Fallback::Cpu,
    };
    match load_tensorrt(config, progress) {
        Ok(backend) => Ok(backend),
        Err(BackendError::Unavailable(_, reason)) if may_fall_back => {
            let level = if config.device.backend == BackendChoice::Auto { log::Level::Info } else { log::Level::Warn };
            log::log!(level, "TensorRT backend unavailable ({reason}); running on the CPU backend");
            load_cpu(config)
        }
        Err(e) => Err(e),
    }
}

fn load_cpu(config: &Config) -> Result<Arc<dyn Backend>, BackendError> {
    let onnx = config.model.onnx.as_deref().ok_or_else(|| {
        BackendError::Unavailable(
            "cpu",
            "the CPU backend needs `model.onnx` (a TensorRT engine cannot run on it)".into(),
        )
    })?;
    let spec = PreprocessSpec::from(&config.model.input);
    let backend = CpuBackend::load(onnx, spec, config.model.input.name.as_deref(), config.device.cpu_threads())?;
    Ok(Arc::new(backend.with_workers(config.device.cpu_workers)))
}

/// An engine-build progress event (TensorRT builds only).
#[cfg(feature = "tensorrt")]
pub type BuildProgress = super::trt::Progress;
/// An engine-build progress event; this binary has no TensorRT, so none ever happens.
#[cfg(not(feature = "tensorrt"))]
pub type BuildProgress = std::convert::Infallible;

#[cfg(feature = "tensorrt")]
fn load_tensorrt(config: &Config, progress: impl FnMut(BuildProgress)) -> Result<Arc<dyn Backend>, BackendError> {
    use super::trt::{preprocessing_input_stage, GpuFramesBackend};
    use crate::gpu::{GpuDevice, GpuError};
    let device = GpuDevice::open(config.device.gpu as usize).map_err(|e| match e {
        GpuError::NoDriver | GpuError::NoDevice { .. } => BackendError::Unavailable("tensorrt", e.to_string()),
        other => BackendError::Inference(other.to_string()),
    })?;
    let input_stage =
        preprocessing_input_stage(device.clone(), config.engine.cache_dir.clone(), max_frame_bytes(config));
    let backend = super::trt::TrtBackend::open(config, input_stage, progress)?;
    Ok(Arc::new(GpuFramesBackend::new(backend, device)))
}

#[cfg(not(feature = "tensorrt"))]
fn load_tensorrt(_config: &Config, _progress: impl FnMut(BuildProgress)) -> Result<Arc<dyn Backend>, BackendError> {
    Err(BackendError::Unavailable("tensorrt", "this binary was built without the `tensorrt` feature".into()))
}

/// The largest frame any configured camera can deliver, for the GPU staging buffer.
#[cfg(feature = "tensorrt")]
fn max_frame_bytes(config: &Config) -> usize {
    config.cameras.iter().map(|camera| camera.max_frame_bytes()).max().unwrap_or(0)
}

/// What the device probe found on GPU `ordinal`, for `probe`, `selftest` and telemetry: never
/// an error, a plain summary when there is no usable GPU.
#[cfg(feature = "cuda")]
pub fn gpu_section(ordinal: usize) -> serde_json::Value {
    use serde_json::json;
    if !crate::gpu::driver_present() {
        return json!({ "available": false, "summary": "libcuda not found: no NVIDIA driver" });
    }
    match crate::gpu::probe(ordinal) {
        Ok(device) => json!({ "available": true, "device": device }),
        Err(e) => json!({ "available": false, "summary": e.to_string() }),
    }
}

/// What the device probe found: this binary has no CUDA layer.
#[cfg(not(feature = "cuda"))]
pub fn gpu_section(_ordinal: usize) -> serde_json::Value {
    use serde_json::json;
    json!({ "available": false, "summary": "this binary was built without the `cuda` feature" })
}
