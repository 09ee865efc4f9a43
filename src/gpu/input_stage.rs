//! The CUDA preprocessing kernel as the TensorRT backend's input stage.
//!
//! Owns: adapting [`GpuPreprocessor`] to [`InputStage`] and mapping its errors onto the backend's
//! (a frame too large for the staging buffer is one bad frame; anything else ends the session).
//! Must not: synchronise the stream (the session does, once per frame).

use std::path::PathBuf;

use cudarc::driver::CudaSlice;

use super::{GpuDevice, GpuError, GpuPreprocessor};
use crate::backend::BackendError;
use crate::frame::FrameSlot;
use crate::trt::{InputStage, InputStageFactory};

struct KernelInputStage(GpuPreprocessor);

impl InputStage for KernelInputStage {
    fn enqueue_input(&mut self, slot: &FrameSlot, input: &mut CudaSlice<u8>) -> Result<(), BackendError> {
        self.0.run(slot, input).map_err(|error| match error {
            GpuError::FrameTooLarge { .. } => BackendError::Preprocess(error.to_string()),
            other => BackendError::Inference(other.to_string()),
        })
    }
}

/// A factory that gives every TensorRT session its own preprocessor on the session's stream.
/// The compiled kernel is cached under `cache_dir`; frames of up to `max_frame_bytes` are staged.
pub fn preprocessing_input_stage(device: GpuDevice, cache_dir: PathBuf, max_frame_bytes: usize) -> InputStageFactory {
    Box::new(move |stream, spec| {
        let preprocessor = GpuPreprocessor::new(&device, stream.clone(), spec, Some(&cache_dir), max_frame_bytes)
            .map_err(|e| BackendError::Unavailable("tensorrt", format!("GPU preprocessing: {e}")))?;
        Ok(Box::new(KernelInputStage(preprocessor)) as Box<dyn InputStage>)
    })
}
