//! The backends' error: what loading a model or running a session can fail with, for every
//! backend alike.
//!
//! Owns: [`BackendError`]. Must not: know a backend's own errors beyond their message (TensorRT's
//! `TrtError` converts itself into this one).

use crate::sys::exit::{Classified, ExitClass};

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("cannot load model {path}: {message}")]
    Load { path: std::path::PathBuf, message: String },
    #[error("model input does not match the config: {0}")]
    InputMismatch(String),
    #[error("preprocessing failed: {0}")]
    Preprocess(String),
    #[error("inference failed: {0}")]
    Inference(String),
    #[error("{0} backend is not available: {1}")]
    Unavailable(&'static str, String),
}

impl Classified for BackendError {
    /// A model file that does not load, an input that does not fit the config, a backend this
    /// build or machine lacks: the config's. A failed preprocessing or inference: a restart's.
    fn exit_class(&self) -> ExitClass {
        ExitClass::configuration_if(matches!(
            self,
            BackendError::Load { .. } | BackendError::InputMismatch(_) | BackendError::Unavailable(..)
        ))
    }
}
