//! A model described once: what loading it needs (its files, the input contract, how TensorRT
//! builds its engine) and what reading its outputs needs (labels, decoder).
//!
//! Owns: [`ModelSpec`] and building it from the config's `[model]` and `[engine]` sections
//! ([`ModelSpec::from_config`]), the one place that reads those sections for loading. Must not:
//! open the files it names or hold the decode thresholds (they are reloadable at run time and
//! belong to `crate::decode::DecodeParams`).

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{Config, ConfigError, DecoderKind, Precision};
use crate::preprocess::PreprocessSpec;

/// The files a model comes as: at least one of an ONNX model and a prebuilt TensorRT engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelFiles {
    /// An ONNX model: the CPU backend runs it, TensorRT builds an engine from it (and caches it).
    Onnx(PathBuf),
    /// A prebuilt TensorRT engine, loaded as is (TensorRT only).
    Engine(PathBuf),
    /// Both: TensorRT loads the engine, the CPU backend (as a fallback) runs the ONNX model.
    OnnxAndEngine { onnx: PathBuf, engine: PathBuf },
}

impl ModelFiles {
    pub fn onnx(&self) -> Option<&Path> {
        match self {
            ModelFiles::Onnx(onnx) | ModelFiles::OnnxAndEngine { onnx, .. } => Some(onnx),
            ModelFiles::Engine(_) => None,
        }
    }

    pub fn engine(&self) -> Option<&Path> {
        match self {
            ModelFiles::Engine(engine) | ModelFiles::OnnxAndEngine { engine, .. } => Some(engine),
            ModelFiles::Onnx(_) => None,
        }
    }
}

/// How TensorRT builds the model's engine. Every field is part of the engine-cache key (through
/// the build options and the input profile), so a change rebuilds the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineOptions {
    pub precision: Precision,
    /// Builder workspace limit, in bytes.
    pub workspace_bytes: u64,
    /// DLA core (Orin: 0 or 1) with GPU fallback; `None`: GPU only.
    pub dla_core: Option<u32>,
    /// Builder optimisation level 0..=5.
    pub optimization_level: u8,
    /// Most frames one inference takes: the engine is built for batches of 1..=`max_batch` when
    /// the model's batch dimension is dynamic.
    pub max_batch: NonZeroUsize,
    /// Longest build, and the longest wait for another process's build of it.
    pub build_timeout: Duration,
}

/// One model, as `crate::backend` loads it (the CPU engines, the TensorRT build and its engine
/// cache) and as the decoders read its outputs. Today's config describes one (`[model]`); every
/// command builds its spec once and hands it down.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub files: ModelFiles,
    /// Label file: one `id name` or `name` per line.
    pub labels: PathBuf,
    pub decoder: DecoderKind,
    /// The input tensor and how a frame fills it (`[model.input]`).
    pub input: PreprocessSpec,
    pub engine: EngineOptions,
}

impl ModelSpec {
    /// The model `config`'s `[model]` section describes, built as its `[engine]` section says.
    /// Fails only for a config without a model file, which validation refuses anyway.
    pub fn from_config(config: &Config) -> Result<ModelSpec, ConfigError> {
        let model = &config.model;
        let files = match (model.onnx.clone(), model.engine.clone()) {
            (Some(onnx), None) => ModelFiles::Onnx(onnx),
            (None, Some(engine)) => ModelFiles::Engine(engine),
            (Some(onnx), Some(engine)) => ModelFiles::OnnxAndEngine { onnx, engine },
            (None, None) => {
                return Err(ConfigError::Invalid {
                    origin: config.origin.clone(),
                    key: "model".into(),
                    message: "set `onnx` (a model file) or `engine` (a prebuilt TensorRT engine)".into(),
                })
            }
        };
        let engine = &config.engine;
        Ok(ModelSpec {
            files,
            labels: model.labels.clone(),
            decoder: model.decoder,
            input: model.input.clone(),
            engine: EngineOptions {
                precision: engine.precision,
                workspace_bytes: u64::from(engine.workspace_mib) << 20,
                dla_core: engine.dla_core,
                optimization_level: engine.optimization_level,
                max_batch: engine.max_batch,
                build_timeout: Duration::from_secs(u64::from(engine.build_timeout_s)),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigOrigin;

    fn config(text: &str) -> Config {
        Config::from_toml(text, ConfigOrigin::Embedded, Path::new(env!("CARGO_MANIFEST_DIR"))).expect("valid config")
    }

    #[test]
    fn the_spec_of_the_default_config_is_the_bundled_model_as_the_engine_section_builds_it() {
        let config = config("[engine]\nprecision = \"fp16\"\nworkspace_mib = 512\nmax_batch = 8");
        let spec = ModelSpec::from_config(&config).expect("spec");
        let onnx = spec.files.onnx().expect("an ONNX model");
        assert!(onnx.is_absolute() && onnx.ends_with("models/ssd_mobilenet_v2_coco_prenms_fp32.onnx"), "{onnx:?}");
        assert_eq!(spec.files.engine(), None);
        assert_eq!(spec.labels, config.model.labels);
        assert_eq!((spec.decoder, &spec.input), (DecoderKind::Ssd, &config.model.input));
        assert_eq!(spec.engine.precision, Precision::Fp16);
        assert_eq!(spec.engine.workspace_bytes, 512 << 20);
        assert_eq!(spec.engine.max_batch.get(), 8);
        assert_eq!(spec.engine.build_timeout, Duration::from_secs(u64::from(config.engine.build_timeout_s)));
    }

    #[test]
    fn a_prebuilt_engine_beside_the_onnx_model_is_kept_for_tensorrt_and_no_model_file_is_a_config_error() {
        let mut config = config("");
        config.model.engine = Some("/models/ssd.engine".into());
        let files = ModelSpec::from_config(&config).expect("spec").files;
        assert_eq!(files.engine(), Some(Path::new("/models/ssd.engine")));
        assert!(files.onnx().is_some());
        config.model.onnx = None;
        assert_eq!(
            ModelSpec::from_config(&config).expect("spec").files,
            ModelFiles::Engine("/models/ssd.engine".into())
        );
        config.model.engine = None;
        let error = ModelSpec::from_config(&config).expect_err("no model file");
        assert!(matches!(&error, ConfigError::Invalid { key, .. } if key == "model"), "{error}");
    }
}
