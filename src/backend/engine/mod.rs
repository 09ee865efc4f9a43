//! The engine lifecycle, apart from the library that builds and runs engines.
//!
//! Shape: a [`Toolchain`] (the builder seam, [`seam`]) builds engine bytes from a model and loads
//! engine bytes as a `Backend`; TensorRT's is `crate::backend::trt::TrtToolchain`, the tests'
//! [`stand_in::StandInToolchain`] (selected only by [`stand_in::STAND_IN_ENV`]). An
//! [`EngineChain`] ([`chain`]) gets a model's engine from the first place that has one: the local
//! [`cache`], then each [`EngineSource`] (a fleet's store: look up, claim a lease, keep what was
//! built), then a build; every engine from a source or a build is staged, loaded, checked by the
//! caller's [`Vet`] and only then committed to the cache. [`plan`] says which engine a model needs
//! (options, keys); [`device_key`] which device an engine belongs to; [`onnx_external_data`] which
//! files an ONNX model reads; [`progress`] how a build is shown; [`error`] the errors of it all.
//!
//! Pure Rust and always compiled, so that all of it is tested without TensorRT. Must not: call
//! TensorRT or CUDA (`super::trt` does), or compare an engine's detections with its model's (that
//! decodes, which is above `backend`: `crate::infer::agreement`).

pub mod cache;
pub mod chain;
pub mod device_key;
pub mod error;
pub mod onnx_external_data;
pub mod plan;
pub mod progress;
pub mod seam;
pub mod stand_in;

pub use chain::{Acquired, EngineChain, EngineSource, Lookup, Vet};
pub use error::EngineError;
pub use progress::{Progress, ProgressReporter};
pub use seam::{BuildInput, BuildOutput, BuildTarget, EngineFile, EngineOrigin, Toolchain};
