//! The TensorRT layer's error type, at the bottom of `backend::trt` so that every other file of
//! the layer imports it from below.
//!
//! Owns: [`TrtError`] and its mapping to [`BackendError`] and to the engine lifecycle's
//! [`EngineError`] (which errors mean "no TensorRT or GPU here", where `device.fallback = "cpu"`
//! applies). Must not: call TensorRT or CUDA.

use super::version::TrtVersion;
use crate::backend::engine::cache::CacheError;
use crate::backend::engine::EngineError;
use crate::backend::error::BackendError;

#[derive(Debug, thiserror::Error)]
pub enum TrtError {
    /// libnvinfer (or the ONNX parser) cannot be loaded.
    #[error("TensorRT is not installed or cannot be loaded: {0}")]
    NotInstalled(String),
    /// The installed library is older (major.minor) than the headers this binary was built with.
    #[error(
        "TensorRT {library} is installed, but this binary was built against the TensorRT {headers} headers and \
         would call functions that {library} lacks; install TensorRT {}.{} or newer (a newer JetPack), or build \
         jetson-detectd against the installed TensorRT's headers",
        headers.major,
        headers.minor
    )]
    TooOld { library: TrtVersion, headers: TrtVersion },
    #[error("no usable CUDA device: {0}")]
    NoGpu(String),
    #[error("{0}")]
    Config(String),
    #[error("TensorRT: {0}")]
    Trt(String),
    #[error("TensorRT cannot deserialise the engine: {0}")]
    Deserialize(String),
    #[error("CUDA: {0}")]
    Cuda(String),
    #[error(transparent)]
    Cache(#[from] CacheError),
}

impl TrtError {
    /// True when the machine lacks TensorRT or a GPU, i.e. when `fallback = "cpu"` applies.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, TrtError::NotInstalled(_) | TrtError::TooOld { .. } | TrtError::NoGpu(_))
    }
}

impl From<TrtError> for BackendError {
    fn from(error: TrtError) -> Self {
        if error.is_unavailable() {
            BackendError::Unavailable("tensorrt", error.to_string())
        } else {
            BackendError::Inference(error.to_string())
        }
    }
}

impl From<TrtError> for EngineError {
    fn from(error: TrtError) -> Self {
        match error {
            TrtError::Cache(error) => EngineError::Cache(error),
            TrtError::Config(message) => EngineError::Config(message),
            TrtError::Deserialize(_) => EngineError::Load(error.to_string()),
            other if other.is_unavailable() => EngineError::Unavailable(other.to_string()),
            other => EngineError::Build(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tensorrt_maps_to_an_unavailable_backend() {
        let error = TrtError::NotInstalled("libnvinfer.so.10: cannot open shared object file".into());
        assert!(matches!(BackendError::from(error), BackendError::Unavailable("tensorrt", _)));
        assert!(!TrtError::Config("x".into()).is_unavailable());
    }
}
