//! What reading an ONNX file can fail with.
//!
//! Owns: [`OnnxError`]. Must not: read.

use crate::protobuf::WireError;

#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    #[error("cannot read {path}: {message}")]
    Read { path: std::path::PathBuf, message: String },
    #[error("not a valid ONNX (protobuf) file: {0}")]
    Malformed(#[from] WireError),
    #[error("not an ONNX model: {0}")]
    NotAModel(&'static str),
}
