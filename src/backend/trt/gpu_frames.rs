//! The CUDA layer's side of the TensorRT backend: the preprocessing kernel as its input stage, and
//! page-locked (pinned or mapped) frame slots for the cameras that feed it.
//!
//! Owns: adapting [`GpuPreprocessor`] to [`InputStage`] (a frame the GPU cannot take
//! is one bad frame; anything else ends the session) and [`GpuFramesBackend`], which hands out
//! [`slot_memory`] and, for motion gating, the luma kernel that reads those slots
//! ([`gpu_luma_sampler`]). Must not: synchronise the stream (the session does, once per batch).

use std::path::{Path, PathBuf};

use cudarc::driver::CudaSlice;

use super::backend::{InputStage, InputStageFactory, TrtBackend};
use crate::backend::error::BackendError;
use crate::backend::traits::{Backend, BackendInfo, InferenceSession, SessionMemory};
use crate::frame::{FrameSlot, SlotMemory};
use crate::gpu::{slot_memory, GpuDevice, GpuError, GpuLumaSampler, GpuPreprocessor};
use crate::motion::LumaSampler;
use crate::preprocess::{PreprocessSpec, Roi};

struct KernelInputStage(GpuPreprocessor);

impl InputStage for KernelInputStage {
    fn enqueue_row(&mut self, slot: &FrameSlot, input: &mut CudaSlice<u8>, row: usize) -> Result<(), BackendError> {
        self.0.enqueue_row(slot, input, row).map_err(stage_error)
    }

    fn enqueue_roi_row(
        &mut self,
        slot: &FrameSlot,
        roi: Roi,
        input: &mut CudaSlice<u8>,
        row: usize,
    ) -> Result<(), BackendError> {
        self.0.enqueue_roi_row(slot, roi, input, row).map_err(stage_error)
    }
}

/// A frame or region the kernel cannot take is the frame's problem; anything else is the GPU's.
fn stage_error(error: GpuError) -> BackendError {
    match error {
        GpuError::FrameTooLarge { .. } | GpuError::Roi(_) => BackendError::Preprocess(error.to_string()),
        other => BackendError::Inference(other.to_string()),
    }
}

/// A factory that gives every TensorRT session its own preprocessor on the session's stream.
/// The compiled kernel is cached under `cache_dir`; the staging buffer starts at `max_frame_bytes` and
/// grows to the slot of a larger frame.
pub fn preprocessing_input_stage(device: GpuDevice, cache_dir: PathBuf, max_frame_bytes: usize) -> InputStageFactory {
    Box::new(move |stream, spec| {
        let preprocessor = GpuPreprocessor::new(&device, stream.clone(), spec, Some(&cache_dir), max_frame_bytes)
            .map_err(|e| BackendError::Unavailable("tensorrt", format!("GPU preprocessing: {e}")))?;
        Ok(Box::new(KernelInputStage(preprocessor)) as Box<dyn InputStage>)
    })
}

/// A camera's motion gate reads the frames in the GPU's page-locked slots with the GPU's luma
/// kernel, on a stream of its own (the kernel module is the preprocessing one, cached under
/// `cache_dir`): in place where mapped, after one upload where pinned.
pub fn gpu_luma_sampler(device: &GpuDevice, cache_dir: &Path) -> Result<Option<Box<dyn LumaSampler>>, BackendError> {
    let sampler = GpuLumaSampler::new(device, Some(cache_dir))
        .map_err(|e| BackendError::Unavailable("tensorrt", format!("the GPU's motion luma kernel: {e}")))?;
    Ok(Some(Box::new(sampler)))
}

/// The TensorRT backend with frame slots in page-locked memory of its GPU: mapped on an
/// integrated GPU (the kernel reads frames in place, zero copies), pinned on a discrete one (one
/// asynchronous upload per frame).
pub struct GpuFramesBackend {
    trt: TrtBackend,
    device: GpuDevice,
    /// Where the kernel module is cached, for the motion luma kernel.
    cache_dir: PathBuf,
}

impl GpuFramesBackend {
    pub fn new(trt: TrtBackend, device: GpuDevice, cache_dir: PathBuf) -> Self {
        GpuFramesBackend { trt, device, cache_dir }
    }
}

impl Backend for GpuFramesBackend {
    fn info(&self) -> BackendInfo {
        let mut info = self.trt.info();
        let slots = if self.device.zero_copy() { "mapped (zero-copy)" } else { "pinned" };
        info.detail.push_str(&format!(", {slots} frame slots on {}", self.device.probe().name));
        info
    }

    fn spec(&self) -> &PreprocessSpec {
        self.trt.spec()
    }

    fn session_memory(&self) -> SessionMemory {
        self.trt.session_memory()
    }

    fn new_session(&self) -> Result<Box<dyn InferenceSession>, BackendError> {
        self.trt.new_session()
    }

    fn max_sessions(&self) -> Option<usize> {
        self.trt.max_sessions()
    }

    fn slot_memory(&self) -> Result<Box<dyn SlotMemory>, BackendError> {
        slot_memory(&self.device)
            .map_err(|e| BackendError::Inference(format!("allocating page-locked frame slots: {e}")))
    }

    fn luma_sampler(&self) -> Result<Option<Box<dyn LumaSampler>>, BackendError> {
        gpu_luma_sampler(&self.device, &self.cache_dir)
    }
}
