//! Loading a model on a backend: the choice between an engine (TensorRT) and the CPU, the
//! fallback, and the engine lifecycle's entry points for the commands.
//!
//! Owns: `device.backend` / `device.fallback` / `device.cpu_engine` semantics (the CPU engine is
//! chosen and its choice logged here), which [`Toolchain`] builds and runs engines here (the
//! stand-in when `engine::stand_in::STAND_IN_ENV` is set, else TensorRT on the GPU it opens), and the first step
//! of an engine's acquisition (the chain's sources: the fleet's store when one is configured): a
//! prebuilt or cached engine loads at once ([`Loading::Ready`]);
//! anything else is an [`EngineChain`] to run, on this thread or another ([`Loading::Pending`]).
//! From a [`ModelSpec`] and a [`DeviceSpec`]. Must not: read the config, run inference or start
//! threads; every command that needs a backend (run, detect, bench, selftest, check-config,
//! build-engine) loads it here.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::cpu::{CpuBackend, EngineChoice};
use super::engine::chain::{load_prebuilt, unchecked, TimingCacheUse};
use super::engine::seam::EngineOrigin;
use super::engine::stand_in::{StandInSettings, StandInToolchain};
use super::engine::{EngineChain, EngineError, EngineSource, Progress, Toolchain, Vet};
use super::error::BackendError;
use super::fleet::engine_source::{SourceError, StoreSource};
use super::traits::Backend;
use super::trt::expected_model::ExpectedModel;
use crate::config::{BackendChoice, Fallback};
use crate::model::{DeviceSpec, ModelSpec};

/// An engine-build progress event.
pub type BuildProgress = Progress;

/// A loaded backend, and why it runs on the CPU when an engine was asked for first.
pub type Loaded = (Arc<dyn Backend>, Option<String>);

/// What the first step of loading a model found.
pub enum Loading {
    /// The backend, loaded: the CPU (asked for, or the fallback, with the reason), or an engine
    /// that was prebuilt or cached.
    Ready(Loaded),
    /// The model's engine must be fetched or built first (minutes on a Jetson): the chain does,
    /// on whichever thread runs it; `reason` says why the cache had none.
    Pending { chain: Box<EngineChain>, reason: String },
}

/// Loads `model` on the backend `device` asks for, first step only ([`Loading`]): `auto` tries an
/// engine (TensorRT when built in, or the stand-in) and runs on the CPU when TensorRT or the GPU
/// is missing; `tensorrt` falls back only when `device` says so.
pub fn start_loading(model: &ModelSpec, device: &DeviceSpec) -> Result<Loading, BackendError> {
    check_model_files(model)?;
    let Some(may_fall_back) = tensorrt_first(device) else {
        return Ok(Loading::Ready((load_cpu(model, device)?, None)));
    };
    let toolchain = match toolchain(device) {
        Ok(toolchain) => toolchain,
        Err(EngineError::Unavailable(reason)) if may_fall_back => {
            log::log!(
                fallback_level(device.backend, cfg!(feature = "tensorrt")),
                "TensorRT backend unavailable ({reason}); running on the CPU backend, several times slower. \
                 `jetson-detectd probe` says why; telemetry's engine.kind says which backend runs"
            );
            return Ok(Loading::Ready((load_cpu(model, device)?, Some(reason))));
        }
        Err(error) => return Err(error.into()),
    };
    if let Some(path) = model.files.engine() {
        return Ok(Loading::Ready((load_prebuilt(toolchain.as_ref(), model, path)?.backend, None)));
    }
    let mut chain = EngineChain::new(toolchain, model, &device.cache_dir, store_sources(device)?)?;
    match chain.look_local() {
        Ok(acquired) => Ok(Loading::Ready((acquired.backend, None))),
        Err(reason) => Ok(Loading::Pending { chain: Box::new(chain), reason: reason.to_string() }),
    }
}

/// Loads `model` on the backend `device` asks for ([`start_loading`]), running an engine's chain
/// on this thread when it must be fetched or built: `progress` sees the build, `vet` checks the
/// engine before it is cached.
pub fn load_backend(
    model: &ModelSpec,
    device: &DeviceSpec,
    progress: impl FnMut(BuildProgress),
    vet: &mut Vet<'_>,
) -> Result<Arc<dyn Backend>, BackendError> {
    load_backend_noting_fallback(model, device, progress, vet).map(|(backend, _)| backend)
}

/// [`load_backend`], and why it runs on the CPU when TensorRT was asked for first (`auto`, or
/// `tensorrt` with `fallback = "cpu"`).
pub fn load_backend_noting_fallback(
    model: &ModelSpec,
    device: &DeviceSpec,
    mut progress: impl FnMut(BuildProgress),
    vet: &mut Vet<'_>,
) -> Result<Loaded, BackendError> {
    match start_loading(model, device)? {
        Loading::Ready(loaded) => Ok(loaded),
        Loading::Pending { mut chain, .. } => {
            let never = AtomicBool::new(false);
            Ok((chain.acquire(vet, &mut progress, &never)?.backend, None))
        }
    }
}

/// `model` on the CPU engine to serve while its engine is built: on [`serving_threads`] of
/// `device.cpu_threads`, so that the build keeps the others, with one inference worker (a GPU
/// engine's count, which the workers keep after the swap).
pub fn load_cpu_beside_build(model: &ModelSpec, device: &DeviceSpec) -> Result<Arc<dyn Backend>, BackendError> {
    let threads = serving_threads(device.cpu_threads);
    let serving = DeviceSpec { cpu_threads: threads, cpu_workers: std::num::NonZeroUsize::new(1), ..device.clone() };
    load_cpu(model, &serving)
}

/// The CPU threads serving takes while an engine builds: half of `cpu_threads`, at least 1.
pub fn serving_threads(cpu_threads: usize) -> usize {
    (cpu_threads / 2).max(1)
}

/// The places beyond the cache an engine may come from: the fleet's store, when `[engine.store]`
/// names one. A store that cannot be set up is left out (logged: engines are then built here); a
/// key or password file that cannot be read is the config's fault.
fn store_sources(device: &DeviceSpec) -> Result<Vec<Arc<dyn EngineSource>>, EngineError> {
    match StoreSource::open(&device.engine_store) {
        Ok(Some(store)) => Ok(vec![Arc::new(store)]),
        Ok(None) => Ok(Vec::new()),
        Err(SourceError::Store(error)) => {
            log::warn!("{error}; engines are built here without the store");
            Ok(Vec::new())
        }
        Err(error) => Err(EngineError::Config(error.to_string())),
    }
}

/// What builds and runs engines here: the stand-in when `engine::stand_in::STAND_IN_ENV` is set (tests only),
/// else TensorRT on `device`'s GPU. [`EngineError::Unavailable`] without either.
pub fn toolchain(device: &DeviceSpec) -> Result<Arc<dyn Toolchain>, EngineError> {
    match StandInSettings::from_env() {
        Ok(Some(settings)) => return Ok(Arc::new(StandInToolchain::new(settings, device))),
        Ok(None) => {}
        Err(message) => return Err(EngineError::Config(message)),
    }
    tensorrt_toolchain(device)
}

#[cfg(feature = "tensorrt")]
fn tensorrt_toolchain(device: &DeviceSpec) -> Result<Arc<dyn Toolchain>, EngineError> {
    let gpu = open_gpu(device).map_err(|error| match error {
        BackendError::Unavailable(_, reason) => EngineError::Unavailable(reason),
        other => EngineError::Build(other.to_string()),
    })?;
    Ok(Arc::new(super::trt::TrtToolchain::open(device, gpu)?))
}

#[cfg(not(feature = "tensorrt"))]
fn tensorrt_toolchain(_device: &DeviceSpec) -> Result<Arc<dyn Toolchain>, EngineError> {
    Err(EngineError::Unavailable("this binary was built without the `tensorrt` feature".into()))
}

/// What `build-engine` produced (or found up to date, or pulled).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BuiltEngine {
    pub engine_path: PathBuf,
    /// Absent when the builder returned no timing cache.
    pub timing_cache_path: Option<PathBuf>,
    pub key: String,
    pub tensorrt_version: String,
    /// True when a valid cached engine already existed and nothing was built.
    pub up_to_date: bool,
    /// The fleet's store the engine was pulled from instead of built (`[engine.store]`).
    pub pulled_from: Option<String>,
    pub build_seconds: f64,
}

/// `jetson-detectd build-engine`: makes sure a valid engine and timing cache for `model` on
/// `device`'s GPU exist in the cache directory, the way `run` gets them but without the check
/// against the CPU (`selftest` checks): the cached engine when one loads, else the fleet's store's
/// (`[engine.store]`), else a build under the build lock and the store's lease, pushed to the
/// store with `push = true`. `progress` sees every event.
pub fn build_engine(
    model: &ModelSpec,
    device: &DeviceSpec,
    mut progress: impl FnMut(Progress),
) -> Result<BuiltEngine, EngineError> {
    let toolchain = toolchain(device)?;
    let version = toolchain.target().version.clone();
    let mut chain = EngineChain::new(toolchain, model, &device.cache_dir, store_sources(device)?)?;
    let never = AtomicBool::new(false);
    let acquired = chain.acquire(&mut unchecked, &mut progress, &never)?;
    let engine_path = acquired.origin.path().to_path_buf();
    let (up_to_date, pulled_from, build_seconds) = match &acquired.origin {
        EngineOrigin::Built { seconds, .. } => (false, None, *seconds),
        EngineOrigin::Fetched { from, .. } => (false, Some(from.clone()), 0.0),
        EngineOrigin::Cached(_) | EngineOrigin::Prebuilt(_) => {
            progress(Progress::Stage(format!("{} is up to date", engine_path.display())));
            (true, None, 0.0)
        }
    };
    Ok(BuiltEngine {
        key: chain.cached_key(&engine_path),
        engine_path,
        timing_cache_path: chain.timing_cache_path(),
        tensorrt_version: version,
        up_to_date,
        pulled_from,
        build_seconds,
    })
}

/// Cold and warm build times of one engine (`selftest`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct BuildTimes {
    /// Seconds with an empty timing cache.
    pub cold_seconds: f64,
    /// Seconds with the timing cache the cold build left.
    pub warm_seconds: f64,
}

/// Builds `model`'s engine twice under the build lock, first with an empty timing cache and then
/// with the one that build saved, and saves both (the engine ends up cached). What `selftest`
/// reports: the warm time is what a rebuild after a model or JetPack change costs.
pub fn time_builds(
    model: &ModelSpec,
    device: &DeviceSpec,
    progress: &mut dyn FnMut(Progress),
) -> Result<BuildTimes, EngineError> {
    let mut chain = EngineChain::new(toolchain(device)?, model, &device.cache_dir, Vec::new())?;
    let never = AtomicBool::new(false);
    progress(Progress::Stage("cold build (empty timing cache)".into()));
    let cold = chain.build_and_save(TimingCacheUse::Empty, progress, &never)?;
    progress(Progress::Stage("warm build (with the timing cache the cold build saved)".into()));
    let warm = chain.build_and_save(TimingCacheUse::Saved, progress, &never)?;
    Ok(BuildTimes { cold_seconds: cold.seconds, warm_seconds: warm.seconds })
}

/// The engine file `model` would use on `device` (for `probe`, `selftest`), without building:
/// `model.engine`, else its cache file; `None` where no toolchain opens.
pub fn expected_engine_path(model: &ModelSpec, device: &DeviceSpec) -> Option<PathBuf> {
    if let Some(engine) = model.files.engine() {
        return Some(engine.to_path_buf());
    }
    let chain = EngineChain::new(toolchain(device).ok()?, model, &device.cache_dir, Vec::new()).ok()?;
    Some(chain.engine_path())
}

/// What this device accepts for each of `models` that is built from ONNX (a prebuilt
/// `model.engine` is the user's own, never packed): the identities a pack's engines must have, and
/// where they are cached (`engine export` and `engine import`), through the toolchain that builds
/// here.
pub fn expected_models(models: &[ModelSpec], device: &DeviceSpec) -> Result<Vec<ExpectedModel>, EngineError> {
    let toolchain = toolchain(device)?;
    let target = toolchain.target().clone();
    let mut expected = Vec::new();
    for model in models.iter().filter(|model| model.files.engine().is_none()) {
        let chain = EngineChain::new(toolchain.clone(), model, &device.cache_dir, Vec::new())?;
        let plan = chain.plan();
        expected.push(ExpectedModel {
            cache: chain.cache().clone(),
            identities: [plan.identity.clone(), plan.static_identity.clone()],
            tensorrt_version: target.version.clone(),
            device: target.device.clone(),
        });
    }
    Ok(expected)
}

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

/// `model` on the CPU engine `device` names (the CPU backend, the fallback, and an engine's
/// reference in its check).
pub fn load_cpu(model: &ModelSpec, device: &DeviceSpec) -> Result<Arc<dyn Backend>, BackendError> {
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

/// The free memory of the GPU TensorRT builds on when that GPU shares the system's memory (a
/// Jetson): what the CPU serving and the build take from the same RAM. `None` on a discrete GPU
/// or without one.
#[cfg(feature = "tensorrt")]
pub fn unified_free_memory(device: &DeviceSpec) -> Option<u64> {
    if device.backend == BackendChoice::Cpu {
        return None;
    }
    let gpu = open_gpu(device).ok()?;
    let probe = gpu.sample().ok()?;
    probe.integrated.then_some(probe.free_memory_bytes)
}

#[cfg(not(feature = "tensorrt"))]
pub fn unified_free_memory(_device: &DeviceSpec) -> Option<u64> {
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
