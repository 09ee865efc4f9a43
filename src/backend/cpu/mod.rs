//! CPU backend: an ONNX model run on the CPU by one of two engines (rten, compiled in; ONNX
//! Runtime, loaded at run time), behind the preprocessing fast path.
//!
//! Files: [`backend`] (the [`CpuBackend`] and its sessions: the cores' budget, preprocessing),
//! [`engine_choice`] (which engine, and why), [`engine`] (what an engine offers), [`rten`] with
//! [`rten_framing`], [`onnxruntime`], [`standby`] (preprocessing threads kept awake over an
//! inference's end). This file only declares and re-exports.

mod backend;
mod engine;
mod engine_choice;
pub mod onnxruntime;
mod rten;
mod rten_framing;
mod standby;

pub use backend::CpuBackend;
pub use engine_choice::{EngineChoice, EngineKind};
