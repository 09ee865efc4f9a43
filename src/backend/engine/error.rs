//! The engine lifecycle's error type, below everything else in `backend::engine`.
//!
//! Owns: [`EngineError`] and its mapping to [`BackendError`] (which errors mean "no engine
//! library or GPU here", where `device.fallback = "cpu"` applies). Must not: call TensorRT.

use std::time::Duration;

use super::cache::CacheError;
use crate::backend::error::BackendError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Nothing here can build or run engines: no TensorRT, no GPU (`kind` says which library).
    #[error("{0}")]
    Unavailable(String),
    /// The model or the options cannot be built here (a precision TensorRT cannot choose, an INT8
    /// model without Q/DQ nodes, an input that contradicts the config).
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Build(String),
    /// The engine's bytes cannot serve here (another TensorRT, another GPU, corrupt), or the
    /// engine does not fit the model's input contract.
    #[error("{0}")]
    Load(String),
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// Another process or device held the right to build the engine for longer than
    /// `engine.build_timeout_s`.
    #[error(
        "waited {} s for the engine build of {holder}; giving up (engine.build_timeout_s): if it hangs, stop it",
        waited.as_secs()
    )]
    WaitedTooLong { holder: String, waited: Duration },
    /// The engine disagrees with the model's CPU reference (`engine.min_agreement`).
    #[error("the engine was refused: {0}")]
    Refused(String),
    /// The daemon is stopping.
    #[error("the engine build was stopped")]
    Cancelled,
}

impl EngineError {
    /// True when the machine lacks the engine library or a GPU, i.e. when `fallback = "cpu"` applies.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, EngineError::Unavailable(_))
    }
}

impl From<EngineError> for BackendError {
    fn from(error: EngineError) -> Self {
        match error {
            EngineError::Unavailable(why) => BackendError::Unavailable("tensorrt", why),
            other => BackendError::Inference(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_missing_library_or_gpu_is_a_backend_that_is_unavailable() {
        let missing = EngineError::Unavailable("libnvinfer.so.10: cannot open shared object file".into());
        assert!(missing.is_unavailable());
        assert!(matches!(BackendError::from(missing), BackendError::Unavailable("tensorrt", _)));
        let refused = BackendError::from(EngineError::Refused("recall 0.40 < 0.90".into()));
        assert!(matches!(refused, BackendError::Inference(message) if message.contains("recall 0.40")));
    }
}
