//! The seam between "a frame in a slot" and "raw model output tensors": what every backend
//! implements.
//!
//! Owns: the [`Backend`] trait (a loaded model, shared by every camera) and the
//! [`InferenceSession`] trait (one inference worker's state, which serves every camera: see
//! `crate::infer::scheduler`), and the small types of their signatures: [`BackendTimings`],
//! [`BackendInfo`], [`SessionMemory`], [`WorkerSeat`]. Must not: implement a backend.

use std::time::Duration;

use super::error::BackendError;
use crate::frame::{FrameSlot, HeapMemory, SlotMemory};
use crate::model::ModelOutputs;
use crate::motion::LumaSampler;
use crate::preprocess::{PreprocessSpec, Roi};

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

/// Device memory one session (execution context) holds while it lives, as far as the backend
/// knows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SessionMemory {
    /// Activation (scratch) memory of one context.
    pub scratch_bytes: u64,
    /// What a context allocates for itself beyond its scratch (TensorRT does not report it: the
    /// TensorRT backend measures the device's free memory before and after creating one).
    pub persistent_bytes: u64,
}

/// Which of the scheduler's inference workers a session is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerSeat {
    /// 0-based, below `workers`.
    pub index: usize,
    /// The workers that run at the same time.
    pub workers: usize,
}

/// A loaded model, shared by every camera. Sessions are created on the thread that will use them.
pub trait Backend: Send + Sync {
    fn info(&self) -> BackendInfo;
    fn spec(&self) -> &PreprocessSpec;
    /// Threads one inference runs on when its worker runs alone, for backends that choose it (the
    /// CPU backend: its cores, which the scheduler's workers share).
    fn threads(&self) -> Option<usize> {
        None
    }
    /// The engine that runs the model, with its version, for backends that have a choice (the
    /// CPU backend: `rten 0.27`, `ONNX Runtime 1.22.0`).
    fn engine(&self) -> Option<String> {
        None
    }
    /// Inference workers this backend wants for `cameras` cameras, each with its own session: one
    /// for a GPU (it serialises the work of one device anyway), `device.cpu_workers` or its
    /// default for the CPU backend.
    fn inference_workers(&self, _cameras: usize) -> usize {
        1
    }
    /// Device memory each session holds (zero for backends that do not know or use any).
    fn session_memory(&self) -> SessionMemory {
        SessionMemory::default()
    }
    /// One inference worker's state (execution context, scratch buffers), for a worker that runs
    /// alone (one-shot commands, the one-frame benchmark): on the CPU backend it has every core.
    /// Call it on the worker's own thread.
    fn new_session(&self) -> Result<Box<dyn InferenceSession>, BackendError>;
    /// The state of the scheduler's worker `seat`: on the CPU backend it runs on that worker's
    /// share of the cores ([`crate::config::CpuBudget`]), and the calling thread is kept to the
    /// worker's own CPUs; other backends make the session of [`Backend::new_session`]. Call it on
    /// the worker's own thread.
    fn new_worker_session(&self, _seat: WorkerSeat) -> Result<Box<dyn InferenceSession>, BackendError> {
        self.new_session()
    }
    /// Whether the scheduler's worker `seat` runs two sessions that take turns, each preparing its
    /// next frame ([`InferenceSession::prepare`], on its own thread) while the other runs
    /// inference ([`InferenceSession::infer`]) on the worker's cores: the CPU backend's workers of
    /// many threads, whose inference uses its last threads too poorly to keep them from the
    /// preprocessing.
    /// Such sessions take one frame at a time. GPU backends preprocess on the device, in their
    /// stream's order: never.
    fn overlaps_preprocessing(&self, _seat: WorkerSeat) -> bool {
        false
    }
    /// Most sessions that can exist at once, when the backend limits them (a TensorRT engine with
    /// a dynamic input before 8.6: one optimisation profile per context); `None`: no limit.
    fn max_sessions(&self) -> Option<usize> {
        None
    }
    /// Memory for one frame slot, sized by the first frame written into it and grown when a larger
    /// one comes. Default: heap memory. GPU backends hand out page-locked memory, mapped into the
    /// GPU on integrated devices so that preprocessing reads the frame where the camera wrote it.
    fn slot_memory(&self) -> Result<Box<dyn SlotMemory>, BackendError> {
        Ok(Box::new(HeapMemory::default()))
    }
    /// What makes the luma image of a frame in one of [`Backend::slot_memory`]'s slots for a
    /// camera's motion gate, on the camera's source thread, when the CPU's downscale is not the
    /// way: GPU backends, whose slots their GPU reads, give its kernel. Default: `None`, the CPU
    /// downscales. One per camera with `[motion]` gating, made when the camera starts.
    fn luma_sampler(&self) -> Result<Option<Box<dyn LumaSampler>>, BackendError> {
        Ok(None)
    }
}

/// One inference worker's state; lives and dies on one thread.
pub trait InferenceSession {
    /// Preprocesses the frame in `slot` and runs the model; the outputs stay valid until the next call.
    fn run(&mut self, slot: &FrameSlot) -> Result<(&ModelOutputs, BackendTimings), BackendError>;

    /// Frames one [`InferenceSession::run_batch`] can take: more than 1 only for a model with a
    /// dynamic batch dimension on a backend that batches.
    fn max_batch(&self) -> usize {
        1
    }

    /// Preprocesses every frame into its row of one batched input and runs the model once; each
    /// output's leading dimension is `slots.len()` ([`ModelOutputs::row_into`] splits them). The
    /// timings are the whole batch's. `slots.len()` is 1..=[`InferenceSession::max_batch`].
    fn run_batch(&mut self, slots: &[&FrameSlot]) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        match slots {
            [slot] => self.run(slot),
            _ => Err(BackendError::Inference(format!(
                "a batch of {} frames given to a session that takes {}",
                slots.len(),
                self.max_batch()
            ))),
        }
    }

    /// The first half of [`InferenceSession::run`]: preprocesses the frame in `slot` into the
    /// session's input, for [`InferenceSession::infer`]. `beside_inference`: another session of the
    /// worker is running inference on its cores, so this preprocessing runs on the calling thread
    /// alone; else on the session's threads, as `run` does. Sessions of backends whose
    /// [`Backend::overlaps_preprocessing`] is never true do not take it.
    fn prepare(&mut self, _slot: &FrameSlot, _beside_inference: bool) -> Result<(), BackendError> {
        Err(BackendError::Inference("this backend does not preprocess apart from inference".into()))
    }

    /// The second half of [`InferenceSession::run`]: runs the model on what the last
    /// [`InferenceSession::prepare`] wrote; the timings include that preprocessing.
    fn infer(&mut self) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        Err(BackendError::Inference("this backend does not preprocess apart from inference".into()))
    }

    /// [`InferenceSession::run_batch`] on regions of one frame (a classifier's crops): row `k` of
    /// the input is `rois[k]` of the frame in `slot`, preprocessed as a whole frame would be
    /// ([`Roi`]). `rois.len()` is 1..=[`InferenceSession::max_batch`].
    fn run_regions(
        &mut self,
        _slot: &FrameSlot,
        rois: &[Roi],
    ) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        Err(BackendError::Inference(format!("this backend cannot run regions of a frame ({} given)", rois.len())))
    }
}
