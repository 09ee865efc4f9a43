//! The TensorRT toolchain: the production implementation of the builder seam
//! (`crate::backend::engine::Toolchain`).
//!
//! Owns: [`TrtToolchain`], which opens TensorRT and the GPU once (the key's device identity, the
//! builder fingerprint), runs TensorRT's pre-build checks, builds (`super::build`), deserialises
//! engine bytes into a [`TrtBackend`] with the CUDA preprocessing kernel as its input stage, and
//! hands out page-locked frame slots before any engine exists. Must not: look in caches, lock or
//! save (the engine chain does), or create execution contexts (sessions do, on their worker's
//! thread).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use cudarc::driver::CudaContext;

use super::backend::TrtBackend;
use super::build::{
    builder_fingerprint, check_int8_model, check_model_input, check_precision, device_identity, ffi_precision,
    optimization_level_warning, run_with_progress,
};
use super::gpu_frames::{gpu_luma_sampler, preprocessing_input_stage, GpuFramesBackend};
use super::runtime::{header_version, BuildRequest, TrtRuntime};
use crate::backend::engine::cache::ModelInput;
use crate::backend::engine::{
    BuildInput, BuildOutput, BuildTarget, EngineError, EngineFile, EngineOrigin, Progress, Toolchain,
};
use crate::backend::error::BackendError;
use crate::backend::traits::Backend;
use crate::frame::SlotMemory;
use crate::gpu::GpuDevice;
use crate::model::{DeviceSpec, ModelSpec};
use crate::motion::LumaSampler;

/// TensorRT and the GPU it builds for and runs on.
pub struct TrtToolchain {
    runtime: Arc<TrtRuntime>,
    context: Arc<CudaContext>,
    gpu: GpuDevice,
    ordinal: u32,
    target: BuildTarget,
    cache_dir: PathBuf,
    max_frame_bytes: usize,
}

impl TrtToolchain {
    /// Opens `device`'s GPU and TensorRT. [`EngineError::Unavailable`] without either.
    pub fn open(device: &DeviceSpec, gpu: GpuDevice) -> Result<TrtToolchain, EngineError> {
        let (context, identity) = device_identity(device.gpu)?;
        let runtime = TrtRuntime::open()?;
        let target = BuildTarget {
            kind: "tensorrt",
            version: runtime.version().to_string(),
            builder: builder_fingerprint(),
            device: identity,
            phases_reported: header_version().major >= 10,
        };
        Ok(TrtToolchain {
            runtime,
            context,
            gpu,
            ordinal: device.gpu,
            target,
            cache_dir: device.cache_dir.clone(),
            max_frame_bytes: device.max_frame_bytes,
        })
    }

    /// The loaded TensorRT (`probe`, `selftest`).
    pub fn runtime(&self) -> &Arc<TrtRuntime> {
        &self.runtime
    }
}

impl Toolchain for TrtToolchain {
    fn target(&self) -> &BuildTarget {
        &self.target
    }

    fn check(&self, model: &ModelSpec, onnx: &ModelInput) -> Result<(), EngineError> {
        check_precision(model.engine.precision, self.runtime.version().major)?;
        if let Some(warning) = optimization_level_warning(model.engine.optimization_level, header_version()) {
            log::warn!("{warning}");
        }
        check_int8_model(model.engine.precision, &onnx.bytes, &onnx.path)?;
        check_model_input(model, &onnx.bytes, &onnx.path)?;
        Ok(())
    }

    fn build(
        &self,
        input: &BuildInput<'_>,
        progress: &mut dyn FnMut(Progress),
        cancel: &AtomicBool,
    ) -> Result<BuildOutput, EngineError> {
        let options = input.options;
        let request = BuildRequest {
            onnx: &input.onnx.bytes,
            onnx_path: &input.onnx.path,
            timing_cache: input.timing_cache,
            precision: ffi_precision(options.precision),
            workspace_bytes: options.workspace_bytes,
            dla_core: options.dla_core,
            optimization_level: options.optimization_level,
            profiles: options.input_profiles.as_ref(),
        };
        let limit = input.model.engine.build_timeout;
        let output = run_with_progress(&self.runtime, &request, self.ordinal, limit, progress, cancel)?;
        Ok(BuildOutput {
            engine: output.engine.as_slice().to_vec(),
            timing_cache: output.timing_cache.map(|blob| blob.as_slice().to_vec()),
            timing_cache_rejected: output.timing_cache_rejected,
            profiles: output.profiles,
        })
    }

    fn load(
        &self,
        model: &ModelSpec,
        engine: EngineFile<'_>,
        origin: &EngineOrigin,
    ) -> Result<Arc<dyn Backend>, EngineError> {
        self.context.bind_to_thread().map_err(|e| EngineError::Load(format!("binding the CUDA context: {e}")))?;
        let deserialized = self
            .runtime
            .deserialize(engine.bytes, model.engine.dla_core)
            .map_err(|e| EngineError::Load(format!("{}: {e}", engine.path.display())))?;
        let input_stage = preprocessing_input_stage(self.gpu.clone(), self.cache_dir.clone(), self.max_frame_bytes);
        let context = Arc::clone(&self.context);
        let backend = TrtBackend::new(Arc::new(deserialized), origin, context, self.ordinal, model, input_stage)?;
        Ok(Arc::new(GpuFramesBackend::new(backend, self.gpu.clone(), self.cache_dir.clone())))
    }

    fn slot_memory(&self) -> Result<Box<dyn SlotMemory>, BackendError> {
        crate::gpu::slot_memory(&self.gpu)
            .map_err(|e| BackendError::Inference(format!("allocating page-locked frame slots: {e}")))
    }

    fn luma_sampler(&self) -> Result<Option<Box<dyn LumaSampler>>, BackendError> {
        gpu_luma_sampler(&self.gpu, &self.cache_dir)
    }
}
