//! TensorRT layer: the C++ shim (cargo feature `tensorrt`) and its safe wrappers, the TensorRT
//! toolchain behind the engine lifecycle's builder seam (build, deserialise), execution contexts
//! on shared scratch arenas, and the TensorRT [`Backend`](crate::backend::Backend).
//!
//! Owns: everything that talks to TensorRT. Must not: link TensorRT (the shim dlopens it, so the
//! binary starts and reports clearly on machines without it), run CUDA outside an inference
//! worker's thread, or preprocess frames itself (an [`InputStage`] does, on the session's stream).
//!
//! Modules: [`error`] (the layer's error type, below everything else here), [`version`]
//! ([`TrtVersion`]), [`ffi`] (raw shim surface), [`runtime`] (RAII wrappers), [`arena`] (shared
//! scratch memory per GPU thread), [`build`] (TensorRT's checks and one build with its progress),
//! [`toolchain`] (the builder seam's TensorRT implementation), [`backend`] (the
//! `Backend`/`InferenceSession` implementation),
//! [`gpu_frames`] (the CUDA layer's preprocessing kernel as the input stage, page-locked frame
//! slots), [`probe`](mod@probe) (what TensorRT the machine has). Always compiled, without the feature:
//! [`arena_plan`] (scratch arena sizing) and [`expected_model`] (what this device accepts as a
//! model's engine), so that they are tested on every machine. The engine cache, the device key and
//! the build's progress are the engine lifecycle's (`crate::backend::engine`).

#[cfg(feature = "tensorrt")]
pub mod arena;
pub mod arena_plan;
#[cfg(feature = "tensorrt")]
pub mod backend;
#[cfg(feature = "tensorrt")]
pub mod build;
#[cfg(feature = "tensorrt")]
mod error;
pub mod expected_model;
#[cfg(feature = "tensorrt")]
mod ffi;
#[cfg(feature = "tensorrt")]
pub mod gpu_frames;
#[cfg(feature = "tensorrt")]
mod probe;
#[cfg(feature = "tensorrt")]
pub mod runtime;
#[cfg(feature = "tensorrt")]
pub mod toolchain;
#[cfg(feature = "tensorrt")]
mod version;

#[cfg(feature = "tensorrt")]
pub use backend::{InputStage, InputStageFactory, TrtBackend};
#[cfg(feature = "tensorrt")]
pub use error::TrtError;
#[cfg(feature = "tensorrt")]
pub use gpu_frames::{preprocessing_input_stage, GpuFramesBackend};
#[cfg(feature = "tensorrt")]
pub use probe::{probe, PluginProbe, TrtProbe};
#[cfg(feature = "tensorrt")]
pub use runtime::header_version;
#[cfg(feature = "tensorrt")]
pub use toolchain::TrtToolchain;
#[cfg(feature = "tensorrt")]
pub use version::TrtVersion;
