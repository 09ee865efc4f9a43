//! Loading the configured backend: the choice between TensorRT and the CPU, and the fallback.
//!
//! Owns: `device.backend` / `device.fallback` / `device.cpu_engine` semantics (the CPU engine is
//! chosen and its choice logged here) and opening the GPU for TensorRT (the
//! device probe that decides whether TensorRT can run). Must not: run inference or start threads;
//! every command that needs a backend (run, detect, bench, selftest) loads it here.

use std::sync::Arc;

use super::cpu::{CpuBackend, EngineChoice};
use super::{Backend, BackendError};
use crate::config::{BackendChoice, Config, Fallback};

/// Loads the model on the configured backend: `auto` tries TensorRT (when built in) and runs on
/// the CPU when TensorRT or the GPU is missing; `tensorrt` falls back only when the config says so.
/// `progress` sees an engine build, which can take minutes on first start.
pub fn load_backend(config: &Config, progress: impl FnMut(BuildProgress)) -> Result<Arc<dyn Backend>, BackendError> {
    load_backend_noting_fallback(config, progress).map(|(backend, _)| backend)
}

/// [`load_backend`], and why it runs on the CPU when TensorRT was asked for first (`auto`, or
/// `tensorrt` with `fallback = "cpu"`).
pub fn load_backend_noting_fallback(
    config: &Config,
    progress: impl FnMut(BuildProgress),
) -> Result<Loaded, BackendError> {
    check_model_files(config)?;
    let may_fall_back = match config.device.backend {
        BackendChoice::Cpu => return Ok((load_cpu(config)?, None)),
        BackendChoice::Auto => true,
        BackendChoice::Tensorrt => config.device.fallback == Fallback::Cpu,
    };
    match load_tensorrt(config, progress) {
        Ok(backend) => Ok((backend, None)),
        Err(BackendError::Unavailable(_, reason)) if may_fall_back => {
            log::log!(
                fallback_level(config.device.backend, cfg!(feature = "tensorrt")),
                "TensorRT backend unavailable ({reason}); running on the CPU backend, several times slower. \
                 `jetson-detectd probe` says why; telemetry's engine.kind says which backend runs"
            );
            Ok((load_cpu(config)?, Some(reason)))
        }
        Err(e) => Err(e),
    }
}

/// A loaded backend, and why it runs on the CPU when TensorRT was asked for first.
pub type Loaded = (Arc<dyn Backend>, Option<String>);

/// What `check-config` loads of what [`load_backend`] would: the same backend, with the same
/// checks (model files, ONNX Runtime's library, the model's input against `[model.input]`),
/// wherever that needs no engine build. That is the CPU backend whenever `run` would run on it
/// (configured, or the fallback on a machine without a usable GPU, with the reason); `Ok(None)`
/// where `run` would load TensorRT on this machine's GPU (an engine build takes minutes: `run`
/// and `build-engine` check the model then). Fails where `load_backend` would fail first.
pub fn load_backend_for_check(config: &Config) -> Result<Option<Loaded>, BackendError> {
    check_model_files(config)?;
    let may_fall_back = match config.device.backend {
        BackendChoice::Cpu => return Ok(Some((load_cpu(config)?, None))),
        BackendChoice::Auto => true,
        BackendChoice::Tensorrt => config.device.fallback == Fallback::Cpu,
    };
    match tensorrt_device(config) {
        Ok(()) => Ok(None),
        Err(BackendError::Unavailable(_, reason)) if may_fall_back => Ok(Some((load_cpu(config)?, Some(reason)))),
        Err(e) => Err(e),
    }
}

/// How loudly a fallback to the CPU is logged: a warning, except for `auto` in a binary built
/// without TensorRT, where the CPU is the only backend there is.
fn fallback_level(choice: BackendChoice, tensorrt_built: bool) -> log::Level {
    if choice == BackendChoice::Auto && !tensorrt_built {
        log::Level::Info
    } else {
        log::Level::Warn
    }
}

/// `model.onnx` and `model.engine`, when set, must be regular files of at most
/// [`MAX_MODEL_BYTES`](crate::sys::files::MAX_MODEL_BYTES): a directory, a FIFO or `/dev/zero`
/// is refused before any loader opens it.
pub fn check_model_files(config: &Config) -> Result<(), BackendError> {
    let files = [("model.onnx", &config.model.onnx), ("model.engine", &config.model.engine)];
    for (key, path) in files {
        if let Some(path) = path {
            crate::sys::files::open_regular(path, crate::sys::files::MAX_MODEL_BYTES)
                .map_err(|e| BackendError::Load { path: path.clone(), message: format!("`{key}`: {e}") })?;
        }
    }
    Ok(())
}

fn load_cpu(config: &Config) -> Result<Arc<dyn Backend>, BackendError> {
    let onnx = config.model.onnx.as_deref().ok_or_else(|| {
        BackendError::Unavailable(
            "cpu",
            "the CPU backend needs `model.onnx` (a TensorRT engine cannot run on it)".into(),
        )
    })?;
    let spec = config.model.input.clone();
    let device = &config.device;
    let choice = EngineChoice::choose(device.cpu_engine, device.onnxruntime_library.as_deref())?;
    choice.log();
    let backend = CpuBackend::open(onnx, spec, config.model.input.name.as_deref(), device.cpu_threads(), &choice)?;
    Ok(Arc::new(backend.with_workers(device.cpu_workers)))
}

/// An engine-build progress event (TensorRT builds only).
#[cfg(feature = "tensorrt")]
pub type BuildProgress = super::trt::Progress;
/// An engine-build progress event; this binary has no TensorRT, so none ever happens.
#[cfg(not(feature = "tensorrt"))]
pub type BuildProgress = std::convert::Infallible;

/// The GPU TensorRT would run on; [`BackendError::Unavailable`] without a driver or a device.
#[cfg(feature = "tensorrt")]
fn open_gpu(config: &Config) -> Result<crate::gpu::GpuDevice, BackendError> {
    use crate::gpu::{GpuDevice, GpuError};
    GpuDevice::open(config.device.gpu as usize).map_err(|e| match e {
        GpuError::NoDriver | GpuError::NoDevice { .. } => BackendError::Unavailable("tensorrt", e.to_string()),
        other => BackendError::Inference(other.to_string()),
    })
}

/// Whether TensorRT would be tried on this machine: its GPU opens.
#[cfg(feature = "tensorrt")]
fn tensorrt_device(config: &Config) -> Result<(), BackendError> {
    open_gpu(config).map(drop)
}

#[cfg(not(feature = "tensorrt"))]
fn tensorrt_device(_config: &Config) -> Result<(), BackendError> {
    Err(no_tensorrt())
}

#[cfg(not(feature = "tensorrt"))]
fn no_tensorrt() -> BackendError {
    BackendError::Unavailable("tensorrt", "this binary was built without the `tensorrt` feature".into())
}

#[cfg(feature = "tensorrt")]
fn load_tensorrt(config: &Config, progress: impl FnMut(BuildProgress)) -> Result<Arc<dyn Backend>, BackendError> {
    use super::trt::{preprocessing_input_stage, GpuFramesBackend};
    let device = open_gpu(config)?;
    let input_stage =
        preprocessing_input_stage(device.clone(), config.engine.cache_dir.clone(), max_frame_bytes(config));
    let backend = super::trt::TrtBackend::open(config, input_stage, progress)?;
    Ok(Arc::new(GpuFramesBackend::new(backend, device)))
}

#[cfg(not(feature = "tensorrt"))]
fn load_tensorrt(_config: &Config, _progress: impl FnMut(BuildProgress)) -> Result<Arc<dyn Backend>, BackendError> {
    Err(no_tensorrt())
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

/// Telemetry's `engine.gpu` section, taken again every period: the device's free memory moves as
/// contexts and other processes come and go. It keeps the device open only when the backend runs on
/// it (the backend holds the primary context anyway), so sampling never creates and destroys a
/// context; otherwise it repeats the probe from start, marked `"sampled": false`. CUDA calls: run
/// [`GpuSampler::section`] off the async runtime (`spawn_blocking`).
pub struct GpuSampler {
    #[cfg(feature = "cuda")]
    device: Option<crate::gpu::GpuDevice>,
    at_start: serde_json::Value,
}

impl GpuSampler {
    pub fn new(ordinal: usize, backend_on_gpu: bool) -> GpuSampler {
        let mut at_start = gpu_section(ordinal);
        #[cfg(feature = "cuda")]
        let device = if backend_on_gpu && crate::gpu::driver_present() {
            crate::gpu::GpuDevice::open(ordinal).ok()
        } else {
            None
        };
        #[cfg(not(feature = "cuda"))]
        let _ = backend_on_gpu;
        at_start["sampled"] = serde_json::Value::Bool(false);
        GpuSampler {
            #[cfg(feature = "cuda")]
            device,
            at_start,
        }
    }

    /// The section now (or the start's, when the device is not held).
    pub fn section(&self) -> serde_json::Value {
        #[cfg(feature = "cuda")]
        if let Some(device) = &self.device {
            return match device.sample() {
                Ok(probe) => serde_json::json!({ "available": true, "device": probe, "sampled": true }),
                Err(e) => serde_json::json!({ "available": false, "summary": e.to_string(), "sampled": true }),
            };
        }
        self.at_start.clone()
    }
}

/// What the device probe found: this binary has no CUDA layer.
#[cfg(not(feature = "cuda"))]
pub fn gpu_section(_ordinal: usize) -> serde_json::Value {
    use serde_json::json;
    json!({ "available": false, "summary": "this binary was built without the `cuda` feature" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_fallback_is_a_warning_where_tensorrt_was_built_in() {
        assert_eq!(fallback_level(BackendChoice::Auto, true), log::Level::Warn);
        assert_eq!(fallback_level(BackendChoice::Tensorrt, true), log::Level::Warn);
        assert_eq!(fallback_level(BackendChoice::Auto, false), log::Level::Info);
    }
}
