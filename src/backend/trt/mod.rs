//! TensorRT layer: the C++ shim (cargo feature `tensorrt`) and its safe wrappers, engine build and
//! load through the engine cache, execution contexts on shared scratch arenas, and the TensorRT
//! [`Backend`](crate::backend::Backend).
//!
//! Owns: everything that talks to TensorRT. Must not: link TensorRT (the shim dlopens it, so the
//! binary starts and reports clearly on machines without it), run CUDA outside an inference
//! worker's thread, or preprocess frames itself (an [`InputStage`] does, on the session's stream).
//!
//! Modules: [`error`] (the layer's error type, below everything else here), [`version`]
//! ([`TrtVersion`]), [`ffi`] (raw shim surface), [`runtime`] (RAII wrappers), [`arena`] (shared
//! scratch memory per GPU thread), [`build`] (cache lookup, build, save), [`progress`] (build
//! progress display), [`backend`] (the `Backend`/`InferenceSession` implementation),
//! [`gpu_frames`] (the CUDA layer's preprocessing kernel as the input stage, page-locked frame
//! slots), [`probe`](mod@probe) (what TensorRT the machine has). Always compiled, without the feature:
//! [`engine_cache`] (cache keys, files, atomic writes), [`device_key`] (which GPU an engine belongs
//! to), [`expected_model`] (what this device accepts as a model's engine), [`arena_plan`] (scratch
//! arena sizing) and [`onnx_external_data`] (which files an ONNX model reads), so that this logic
//! is tested on every machine.

#[cfg(feature = "tensorrt")]
pub mod arena;
pub mod arena_plan;
#[cfg(feature = "tensorrt")]
pub mod backend;
#[cfg(feature = "tensorrt")]
pub mod build;
pub mod device_key;
pub mod engine_cache;
#[cfg(feature = "tensorrt")]
mod error;
pub mod expected_model;
#[cfg(feature = "tensorrt")]
mod ffi;
#[cfg(feature = "tensorrt")]
pub mod gpu_frames;
pub mod onnx_external_data;
#[cfg(feature = "tensorrt")]
mod probe;
#[cfg(feature = "tensorrt")]
pub mod progress;
#[cfg(feature = "tensorrt")]
pub mod runtime;
#[cfg(feature = "tensorrt")]
mod version;

#[cfg(feature = "tensorrt")]
pub use backend::{InputStage, InputStageFactory, TrtBackend};
#[cfg(feature = "tensorrt")]
pub use build::{build_engine, expected_models, BuiltEngine};
#[cfg(feature = "tensorrt")]
pub use error::TrtError;
#[cfg(feature = "tensorrt")]
pub use gpu_frames::{preprocessing_input_stage, GpuFramesBackend};
#[cfg(feature = "tensorrt")]
pub use probe::{probe, PluginProbe, TrtProbe};
#[cfg(feature = "tensorrt")]
pub use progress::{Progress, ProgressReporter};
#[cfg(feature = "tensorrt")]
pub use runtime::header_version;
#[cfg(feature = "tensorrt")]
pub use version::TrtVersion;
