//! Inference backends: the seam between "a frame in a slot" and "raw model output tensors".
//!
//! Owns: the [`Backend`] / [`InferenceSession`] traits, [`ModelOutputs`], [`BackendError`], and the
//! choice of backend from the config. A backend does preprocessing *and* inference, because on the
//! GPU path both run on the camera's stream without the tensor leaving the device.
//! Must not: decode detections, publish, or call CUDA outside the session's own thread.

pub mod cpu;

use std::time::Duration;

use crate::frame::{FrameSlot, HeapMemory, SlotMemory};
use crate::preprocess::PreprocessSpec;

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("cannot load model {path}: {message}")]
    Load { path: std::path::PathBuf, message: String },
    #[error("model input does not match the config: {0}")]
    InputMismatch(String),
    #[error("preprocessing failed: {0}")]
    Preprocess(String),
    #[error("inference failed: {0}")]
    Inference(String),
    #[error("{0} backend is not available: {1}")]
    Unavailable(&'static str, String),
}

/// One output tensor, converted to f32, row-major.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OutputTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// All outputs of one inference, in the model's output order. Reused across frames.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelOutputs {
    pub tensors: Vec<OutputTensor>,
}

impl ModelOutputs {
    pub fn by_name(&self, name: &str) -> Option<&OutputTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

/// Time spent in the stages a backend owns.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BackendTimings {
    pub preprocess: Duration,
    pub infer: Duration,
}

/// What a backend reports about itself (probe, telemetry, logs).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BackendInfo {
    /// `cpu` or `tensorrt`.
    pub kind: &'static str,
    /// Model or engine file.
    pub model: String,
    /// Free-form detail: TensorRT version, engine cache hit, arena bytes, thread count.
    pub detail: String,
}

/// A loaded model, shared by every camera. Sessions are created on the thread that will use them.
pub trait Backend: Send + Sync {
    fn info(&self) -> BackendInfo;
    fn spec(&self) -> &PreprocessSpec;
    /// Threads one inference runs on, for backends that choose it (the CPU backend).
    fn threads(&self) -> Option<usize> {
        None
    }
    /// Per-camera state (execution context, scratch buffers). Call it on the camera's own thread.
    fn new_session(&self) -> Result<Box<dyn InferenceSession>, BackendError>;
    /// Memory for one frame slot of a camera that delivers frames of up to `max_frame_bytes`.
    /// Default: growable heap memory. GPU backends hand out page-locked memory, mapped into the
    /// GPU on integrated devices so that preprocessing reads the frame where the camera wrote it.
    fn slot_memory(&self, max_frame_bytes: usize) -> Result<Box<dyn SlotMemory>, BackendError> {
        let _ = max_frame_bytes;
        Ok(Box::new(HeapMemory::default()))
    }
}

/// Per-camera inference state; lives and dies on one thread.
pub trait InferenceSession {
    /// Preprocesses the frame in `slot` and runs the model; the outputs stay valid until the next call.
    fn run(&mut self, slot: &FrameSlot) -> Result<(&ModelOutputs, BackendTimings), BackendError>;
}
