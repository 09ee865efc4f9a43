//! Loading a model on a backend: the choice between TensorRT and the CPU, and the fallback.
//!
//! Owns: `device.backend` / `device.fallback` / `device.cpu_engine` semantics (the CPU engine is
//! chosen and its choice logged here) and opening the GPU for TensorRT (the device probe that
//! decides whether TensorRT can run), from a [`ModelSpec`] and a [`DeviceSpec`]. Must not: read
//! the config, run inference or start threads; every command that needs a backend (run, detect,
//! bench, selftest, check-config) loads it here.

use std::sync::Arc;

use super::cpu::{CpuBackend, EngineChoice};
use super::{Backend, BackendError};
use crate::config::{BackendChoice, Fallback};
use crate::model::{DeviceSpec, ModelSpec};

/// Loads `model` on the backend `device` asks for: `auto` tries TensorRT (when built in) and runs
/// on the CPU when TensorRT or the GPU is missing; `tensorrt` falls back only when `device` says
/// so. `progress` sees an engine build, which can take minutes on first start.
pub fn load_backend(
    model: &ModelSpec,
    device: &DeviceSpec,
    progress: impl FnMut(BuildProgress),
) -> Result<Arc<dyn Backend>, BackendError> {
    load_backend_noting_fallback(model, device, progress).map(|(backend, _)| backend)
}

/// [`load_backend`], and why it runs on the CPU when TensorRT was asked for first (`auto`, or
/// `tensorrt` with `fallback = "cpu"`).
pub fn load_backend_noting_fallback(
    model: &ModelSpec,
    device: &DeviceSpec,
    progress: impl FnMut(BuildProgress),
) -> Result<Loaded, BackendError> {
    check_model_files(model)?;
    let Some(may_fall_back) = tensorrt_first(device) else { return Ok((load_cpu(model, device)?, None)) };
    match load_tensorrt(model, device, progress) {
        Ok(backend) => Ok((backend, None)),
        Err(BackendError::Unavailable(_, reason)) if may_fall_back => {
            log::log!(
                fallback_level(device.backend, cfg!(feature = "tensorrt")),
                "TensorRT backend unavailable ({reason}); running on the CPU backend, several times slower. \
                 `jetson-detectd probe` says why; telemetry's engine.kind says which backend runs"
            );
            Ok((load_cpu(model, device)?, Some(reason)))
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
pub fn load_backend_for_check(model: &ModelSpec, device: &DeviceSpec) -> Result<Option<Loaded>, BackendError> {
    check_model_files(model)?;
    let Some(may_fall_back) = tensorrt_first(device) else { return Ok(Some((load_cpu(model, device)?, None))) };
    match tensorrt_device(device) {
        Ok(()) => Ok(None),
        Err(BackendError::Unavailable(_, reason)) if may_fall_back => {
            Ok(Some((load_cpu(model, device)?, Some(reason))))
        }
        Err(e) => Err(e),
    }
}

/// Whether `device` asks for TensorRT first, and then whether it may fall back to the CPU (`auto`,
/// or `tensorrt` with `fallback = "cpu"`); `None` for the CPU alone.
fn tensorrt_first(device: &DeviceSpec) -> Option<bool> {
    match device.backend {
        BackendChoice::Cpu => None,
        BackendChoice::Auto => Some(true),
        BackendChoice::Tensorrt => Some(device.fallback == Fallback::Cpu),
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

/// The model's ONNX file and prebuilt engine (`model.onnx`, `model.engine`), when it has them,
/// must be regular files of at most [`MAX_MODEL_BYTES`](crate::sys::files::MAX_MODEL_BYTES): a
/// directory, a FIFO or `/dev/zero` is refused before any loader opens it.
pub fn check_model_files(model: &ModelSpec) -> Result<(), BackendError> {
    let files = [("model.onnx", model.files.onnx()), ("model.engine", model.files.engine())];
    for (key, path) in files {
        if let Some(path) = path {
            crate::sys::files::open_regular(path, crate::sys::files::MAX_MODEL_BYTES)
                .map_err(|e| BackendError::Load { path: path.to_path_buf(), message: format!("`{key}`: {e}") })?;
        }
    }
    Ok(())
}

fn load_cpu(model: &ModelSpec, device: &DeviceSpec) -> Result<Arc<dyn Backend>, BackendError> {
    let onnx = model.files.onnx().ok_or_else(|| {
        BackendError::Unavailable(
            "cpu",
            "the CPU backend needs `model.onnx` (a TensorRT engine cannot run on it)".into(),
        )
    })?;
    let choice = EngineChoice::choose(device.cpu_engine, device.onnxruntime_library.as_deref())?;
    choice.log();
    let input_name = model.input.name.as_deref();
    let backend = CpuBackend::open(onnx, model.input.clone(), input_name, device.cpu_threads, &choice)?;
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
fn open_gpu(device: &DeviceSpec) -> Result<crate::gpu::GpuDevice, BackendError> {
    use crate::gpu::{GpuDevice, GpuError};
    GpuDevice::open(device.gpu as usize).map_err(|e| match e {
        GpuError::NoDriver | GpuError::NoDevice { .. } => BackendError::Unavailable("tensorrt", e.to_string()),
        other => BackendError::Inference(other.to_string()),
    })
}

/// Whether TensorRT would be tried on this machine: its GPU opens.
#[cfg(feature = "tensorrt")]
fn tensorrt_device(device: &DeviceSpec) -> Result<(), BackendError> {
    open_gpu(device).map(drop)
}

/// The free memory of the GPU that TensorRT would build engines on (`None` where `run` would run
/// on the CPU: `device.backend = "cpu"`, or no GPU opens), for the check that the engines fit
/// (`crate::model::footprint`).
#[cfg(feature = "tensorrt")]
pub fn tensorrt_free_memory(device: &DeviceSpec) -> Option<u64> {
    if device.backend == BackendChoice::Cpu {
        return None;
    }
    open_gpu(device).ok()?.sample().ok().map(|probe| probe.free_memory_bytes)
}

#[cfg(not(feature = "tensorrt"))]
pub fn tensorrt_free_memory(_device: &DeviceSpec) -> Option<u64> {
    None
}

#[cfg(not(feature = "tensorrt"))]
fn tensorrt_device(_device: &DeviceSpec) -> Result<(), BackendError> {
    Err(no_tensorrt())
}

#[cfg(not(feature = "tensorrt"))]
fn no_tensorrt() -> BackendError {
    BackendError::Unavailable("tensorrt", "this binary was built without the `tensorrt` feature".into())
}

#[cfg(feature = "tensorrt")]
fn load_tensorrt(
    model: &ModelSpec,
    device: &DeviceSpec,
    progress: impl FnMut(BuildProgress),
) -> Result<Arc<dyn Backend>, BackendError> {
    use super::trt::{preprocessing_input_stage, GpuFramesBackend};
    let gpu = open_gpu(device)?;
    let input_stage = preprocessing_input_stage(gpu.clone(), device.cache_dir.clone(), device.max_frame_bytes);
    let backend = super::trt::TrtBackend::open(model, device, input_stage, progress)?;
    Ok(Arc::new(GpuFramesBackend::new(backend, gpu)))
}

#[cfg(not(feature = "tensorrt"))]
fn load_tensorrt(
    _model: &ModelSpec,
    _device: &DeviceSpec,
    _progress: impl FnMut(BuildProgress),
) -> Result<Arc<dyn Backend>, BackendError> {
    Err(no_tensorrt())
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
