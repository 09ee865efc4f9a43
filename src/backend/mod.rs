//! Inference backends: the seam between "a frame in a slot" and "raw model output tensors".
//!
//! Owns: the [`Backend`] / [`InferenceSession`] traits ([`traits`]: a session belongs to one
//! inference worker, which serves every camera: see `crate::infer::scheduler`), [`BackendError`]
//! ([`error`]), loading a model (`crate::model::ModelSpec`) on the backend a
//! `crate::model::DeviceSpec` chooses ([`load`]), showing an engine build ([`BuildDisplay`]),
//! adding up the device memory of the contexts the workers hold ([`memory`]) and engines shared
//! between devices ([`fleet`]); the backends themselves are [`cpu`] and [`trt`]. Nothing here
//! reads the `Config`: those two specs, and the few value types of the config they carry
//! (`device.backend`, `device.fallback`, `device.cpu_engine`, the precision, the cores' budget
//! `crate::config::CpuBudget`), are all it sees of it. The outputs a session fills are
//! [`ModelOutputs`](crate::model::ModelOutputs). A backend does preprocessing *and* inference,
//! because on the GPU path both run on the worker's stream without the tensor leaving the device.
//! Must not: decode detections, publish, or call CUDA outside the session's own thread. This file
//! only declares and re-exports: the files beside it import each other, never it.

pub mod build_display;
pub mod cpu;
pub mod engine;
pub mod error;
pub mod fleet;
pub mod handover;
pub mod load;
pub mod memory;
pub mod memory_report;
pub mod traits;
pub mod trt;

pub use build_display::BuildDisplay;
pub use error::BackendError;
pub use memory::{ModelMemory, ModelRole, WorkerMemory};
pub use memory_report::MemoryReport;
pub use traits::{Backend, BackendInfo, BackendTimings, InferenceSession, SessionMemory, WorkerSeat};
