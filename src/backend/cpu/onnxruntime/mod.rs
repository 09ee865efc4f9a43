//! The CPU backend's ONNX Runtime engine: [`engine`] (the [`OrtEngine`], its sessions, the
//! process's one environment) and [`library`] (finding and loading the library at run time). This
//! file only declares and re-exports.

mod engine;
pub mod library;

pub use engine::OrtEngine;
