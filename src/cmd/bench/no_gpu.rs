//! Without the CUDA layer (no `cuda` feature), `--gpu` says so: the stand-ins of `gpu`'s two
//! benchmarks.
//!
//! Owns: the error `--gpu` gets without `cuda`. Must not: do anything else.

use std::path::Path;

use super::error::BenchError;
use crate::backend::Backend;
use crate::config::Config;
use crate::decode::DecodeParams;
use crate::detection::Labels;

pub(super) fn gpu_path_bench(
    _config: &Config,
    _backend: &dyn Backend,
    _params: DecodeParams,
    _labels: &Labels,
    _image: &Path,
    _warmup: usize,
    _iterations: usize,
) -> Result<serde_json::Value, BenchError> {
    Err(BenchError::Setup("--gpu: this binary was built without the `cuda` feature".into()))
}

pub(super) fn gpu_preprocess_bench(_config: &Config) -> Result<serde_json::Value, BenchError> {
    Err(BenchError::Setup("--gpu: this binary was built without the `cuda` feature".into()))
}
