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

use crate::config::{ClassScores, Config, ConfigError, DecoderKind, ModelConfig, Precision};
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
/// cache) and as the decoders read its outputs: `[model]` and each `[models.<name>]` is one; every
/// command builds its specs once and hands them down, and they are the one source of each model's
/// files, labels, decoder and input.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub files: ModelFiles,
    /// Label file: one `id name` or `name` per line.
    pub labels: PathBuf,
    /// How its outputs are read: the decoder, and (for `detr`) how class outputs become scores.
    /// Fixed for the life of a loaded model: a reload changes only the thresholds and the class
    /// filter (`crate::decode::DecodeParams`).
    pub decoder: DecoderKind,
    pub class_scores: ClassScores,
    /// The input tensor and how a frame fills it (`[model.input]`).
    pub input: PreprocessSpec,
    pub engine: EngineOptions,
}

impl ModelSpec {
    /// The model `config`'s `[model]` section describes, built as its `[engine]` section says.
    /// Fails only for a config without a model file, which validation refuses anyway.
    pub fn from_config(config: &Config) -> Result<ModelSpec, ConfigError> {
        ModelSpec::of(&config.model, "model", config)
    }

    /// The model of `config`'s `[models.<name>]`, built as its `[engine]` section says (each
    /// model's engine is cached under its own file's name). `None`: no such table.
    pub fn named(config: &Config, name: &str) -> Option<Result<ModelSpec, ConfigError>> {
        let named = config.models.get(name)?;
        Some(ModelSpec::of(&named.model, &format!("models.{name}"), config))
    }

    /// `model` (the table at `key`) with `config`'s `[engine]` options.
    fn of(model: &ModelConfig, key: &str, config: &Config) -> Result<ModelSpec, ConfigError> {
        let files = match (model.onnx.clone(), model.engine.clone()) {
            (Some(onnx), None) => ModelFiles::Onnx(onnx),
            (None, Some(engine)) => ModelFiles::Engine(engine),
            (Some(onnx), Some(engine)) => ModelFiles::OnnxAndEngine { onnx, engine },
            (None, None) => {
                return Err(ConfigError::Invalid {
                    origin: config.origin.clone(),
                    key: key.into(),
                    message: "set `onnx` (a model file) or `engine` (a prebuilt TensorRT engine)".into(),
                })
            }
        };
        let engine = &config.engine;
        Ok(ModelSpec {
            files,
            labels: model.labels.clone(),
            decoder: model.decoder,
            class_scores: model.class_scores.unwrap_or(ClassScores::Sigmoid),
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

    #[test]
    fn a_named_model_is_its_own_table_built_as_the_engine_section_says() {
        let mut config = config(
            "[engine]\nmax_batch = 4\n[models.yard]\nonnx = \"/m/yolo26.onnx\"\nlabels = \"/m/coco.txt\"\n\
             decoder = \"detr\"\nclass_scores = \"softmax\"",
        );
        let yard = ModelSpec::named(&config, "yard").expect("a table").expect("spec");
        assert_eq!(
            (yard.files.onnx(), yard.labels.as_path()),
            (Some(Path::new("/m/yolo26.onnx")), Path::new("/m/coco.txt"))
        );
        assert_eq!((yard.decoder, yard.class_scores), (DecoderKind::Detr, ClassScores::Softmax));
        assert_eq!(yard.engine.max_batch.get(), 4);
        assert!(ModelSpec::named(&config, "gate").is_none());
        let table = config.models.get_mut("yard").expect("yard");
        table.model.onnx = None;
        let error = ModelSpec::named(&config, "yard").expect("a table").expect_err("no model file");
        assert!(matches!(&error, ConfigError::Invalid { key, .. } if key == "models.yard"), "{error}");
    }
}
