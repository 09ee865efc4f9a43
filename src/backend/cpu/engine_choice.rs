//! Which engine runs the CPU backend's model, and why: `device.cpu_engine` against the ONNX Runtime
//! library this machine has.
//!
//! Owns: [`EngineKind`] and [`EngineChoice`] (`auto` takes ONNX Runtime when its library loads and
//! says why it did not otherwise; the start-up log line; what `probe` shows). Must not: load a
//! model or create a session (`super::backend` does).

use std::path::Path;

use super::onnxruntime::library::{self, Library, LibraryError};
use super::rten::RTEN_VERSION;
use crate::backend::error::BackendError;
use crate::config::CpuEngine;

/// The engines that can run the CPU backend's model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    Rten,
    OnnxRuntime,
}

/// The engine a CPU backend runs on, and why (the start-up log line, `probe`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineChoice {
    pub kind: EngineKind,
    /// The ONNX Runtime library, when that is the engine.
    pub library: Option<Library>,
    /// The config key that chose, and how the library was found or why it was not.
    pub reason: String,
    /// Whether the reason deserves a warning (`ORT_DYLIB_PATH` names no usable library).
    pub warning: bool,
}

impl EngineChoice {
    /// rten, because `reason`.
    pub fn rten(reason: impl Into<String>) -> EngineChoice {
        EngineChoice { kind: EngineKind::Rten, library: None, reason: reason.into(), warning: false }
    }

    /// The engine `wanted` (`device.cpu_engine`) names. ONNX Runtime's library (`configured`:
    /// `device.onnxruntime_library`, absolute) is loaded here, once per process: `auto` runs rten
    /// when it is not found, `onnxruntime` fails then; a configured library that does not load is
    /// an error either way.
    pub fn choose(wanted: CpuEngine, configured: Option<&Path>) -> Result<EngineChoice, BackendError> {
        let key = match wanted {
            CpuEngine::Rten => return Ok(EngineChoice::rten("device.cpu_engine = \"rten\"")),
            CpuEngine::Auto => "device.cpu_engine = \"auto\"",
            CpuEngine::Onnxruntime => "device.cpu_engine = \"onnxruntime\"",
        };
        match library::load(configured) {
            Ok(library) => Ok(EngineChoice {
                kind: EngineKind::OnnxRuntime,
                reason: format!("{key}, library found through {}", library.origin),
                library: Some(library),
                warning: false,
            }),
            Err(error @ (LibraryError::NotFound(_) | LibraryError::Environment { .. }))
                if wanted == CpuEngine::Auto =>
            {
                Ok(EngineChoice {
                    warning: matches!(error, LibraryError::Environment { .. }),
                    ..EngineChoice::rten(format!("{key}; {error}"))
                })
            }
            Err(error) => Err(BackendError::Unavailable("cpu", format!("{key}: {error}"))),
        }
    }

    /// The engine and its version: `rten 0.27`, `ONNX Runtime 1.22.0`.
    pub fn engine(&self) -> String {
        match &self.library {
            Some(library) => format!("ONNX Runtime {}", library.version),
            None => format!("rten {RTEN_VERSION}"),
        }
    }

    /// The log line that says which engine runs and why.
    pub fn log(&self) {
        let level = if self.warning { log::Level::Warn } else { log::Level::Info };
        match &self.library {
            Some(library) => {
                log::log!(level, "CPU engine: {} from {} ({})", self.engine(), library.path.display(), self.reason)
            }
            None => log::log!(level, "CPU engine: {} ({})", self.engine(), self.reason),
        }
    }
}
