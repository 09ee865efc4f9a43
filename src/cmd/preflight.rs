//! What `run` checks before it opens a device or a socket, and `check-config` checks the same way:
//! a config it accepts does not fail these at start.
//!
//! Owns: [`Preflight`] (what the checks read: the model, the labels, the decode settings, the
//! named models, the cameras' scenes, the web server's token), [`preflight`], [`check_model`] (the
//! backend `run` would load, where that needs no engine build) and the engines' fit on the GPU.
//! Must not: open a camera, a socket or a GPU context beyond what the model check loads.

use std::sync::Arc;

use super::error::DaemonError;
use super::models::{model_runs, named_detectors, named_per_track, NamedDetector, NamedPerTrack};
use super::outlets::OUTLETS;
use crate::backend::load::{check_model_files, load_backend_for_check, tensorrt_free_memory};
use crate::backend::{Backend, BackendError};
use crate::config::zones_file::ZonesFile;
use crate::config::{camera_scenes, Config, ConfigError};
use crate::decode::DecodeParams;
use crate::detection::Labels;
use crate::http::Token;
use crate::infer::step::PipelineError;
use crate::model::footprint::{check_fit, EngineEstimate};
use crate::model::{DeviceSpec, ModelFiles, ModelSpec};
use crate::track::events::Scene;

/// What `run` reads and checks before it opens a device or a socket; `check-config` runs the very
/// same checks ([`preflight`]), so a config it accepts does not fail these at start.
pub struct Preflight {
    /// `[model]`, as loaded: the one source of its files, labels, decoder and input.
    pub model: ModelSpec,
    /// `[model]`'s labels, with the names of every named detector a camera uses added after them
    /// ([`Labels::absorb`]): the one list every outlet names classes with.
    pub labels: Arc<Labels>,
    pub params: DecodeParams,
    /// The `[models.<name>]` detectors that cameras name, in name order.
    pub detectors: Vec<NamedDetector>,
    /// The `[models.<name>]` classifiers, in name order.
    pub classifiers: Vec<NamedPerTrack>,
    /// Each camera's zones and lines, in config order.
    pub scenes: Vec<Scene>,
    /// The bearer token of `[http] token_file`, when the web server is on and has one.
    pub http_token: Option<Token>,
    /// What is worth a word but stops nothing: a secret every local user may read.
    pub warnings: Vec<String>,
}

/// Every check of `config` that needs no device, socket or model load: every secret file is
/// readable by this process and writable by no one else ([`crate::config::secrets::check_for_run`];
/// one every local user may read is a warning), the model files are
/// regular files within [`MAX_MODEL_BYTES`](crate::sys::files::MAX_MODEL_BYTES), the label file
/// reads and has `model.classes`, every zone label (the zones file's named as its own), each
/// outlet's own checks (`crate::publish::kind::OutletKind::check`: MQTT's password and TLS files
/// read and parse, with discovery on every `homeassistant.labels` entry in the label file), each
/// camera's source could be opened ([`crate::source::SourceKind::check`]) and recorded
/// ([`crate::record::check()`]). (The controls file is the daemon's own:
/// [`restore_controls`](super::control_changes::restore_controls) sets a bad one aside at start.)
pub fn preflight(config: &Config) -> Result<Preflight, DaemonError> {
    let warnings = crate::config::secrets::check_for_run(config)?;
    let model = ModelSpec::from_config(config)?;
    check_model_files(&model)?;
    let mut labels = Labels::load(&model.labels).map_err(|error| config.file_error("model.labels", error))?;
    let params = DecodeParams::new(&model, &config.model, &labels).map_err(DaemonError::Classes)?;
    let detectors = named_detectors(config, config, &mut labels)?;
    let classifiers = named_per_track(config, &labels)?;
    let labels = Arc::new(labels);
    check_zones_file_labels(config, &labels)?;
    let scenes = camera_scenes(config, &labels)?;
    for kind in OUTLETS {
        (kind.check)(config, &labels)?;
    }
    for camera in &config.cameras {
        camera
            .source
            .kind()
            .check(&camera.name)
            .map_err(|source| PipelineError::Source { camera: camera.name.clone(), source })?;
    }
    crate::record::check(config, &labels)?;
    let http_token = match (config.http.listen_addr(), config.http.token_file.as_deref()) {
        (Some(_), Some(path)) => Some(Token::read(path)?),
        _ => None,
    };
    Ok(Preflight { model, labels, params, detectors, classifiers, scenes, http_token, warnings })
}

/// `check-config`'s model and library checks: the backend `run` would load, loaded the same way
/// ([`crate::backend::load::load_backend_for_check`]: not where that means a TensorRT engine
/// build), and a blank frame through it and the decoder ([`check_model_outputs`], which `run`
/// makes after its load). Says what was checked.
pub fn check_model(config: &Config, preflight: &Preflight) -> Result<String, DaemonError> {
    if !model_runs(config) {
        return Ok("`[model]` is not loaded: every camera runs a `[models.<name>]` detector".to_owned());
    }
    match load_backend_for_check(&preflight.model, &DeviceSpec::from_config(config))? {
        Some((backend, fallback)) => {
            check_model_outputs(backend.as_ref(), &preflight.params)?;
            let engine = backend.engine().unwrap_or_else(|| backend.info().kind.to_owned());
            Ok(match fallback {
                Some(_) => format!("model checked on the CPU backend ({engine}), which runs it here without a GPU"),
                None => format!("model checked on the CPU backend ({engine})"),
            })
        }
        None => {
            let device = DeviceSpec::from_config(config);
            let model = model_runs(config).then_some(&preflight.model);
            check_engines_fit(model, &preflight.detectors, &preflight.classifiers, &device)?;
            Ok("the model is checked by TensorRT when `run` or `build-engine` loads it".to_owned())
        }
    }
}

/// Where TensorRT would build the engines, refuses models whose engines together would not fit
/// the GPU's free memory, before any build ([`crate::model::footprint`] says what is estimated).
pub fn check_engines_fit(
    model: Option<&ModelSpec>,
    detectors: &[NamedDetector],
    classifiers: &[NamedPerTrack],
    device: &DeviceSpec,
) -> Result<(), DaemonError> {
    let Some(free) = tensorrt_free_memory(device) else { return Ok(()) };
    let models = model
        .map(|model| ("model".to_owned(), model))
        .into_iter()
        .chain(detectors.iter().map(|detector| (format!("models.{}", detector.name), &detector.model)))
        .chain(classifiers.iter().map(|classifier| (format!("models.{}", classifier.name), &classifier.model)));
    let mut engines = Vec::new();
    for (key, model) in models {
        engines.push(EngineEstimate::from_weights(key, weight_bytes(model)?));
    }
    Ok(check_fit(&engines, free)?)
}

/// The bytes of `model`'s weights: a prebuilt engine's file, else the ONNX file's initializers.
fn weight_bytes(model: &ModelSpec) -> Result<u64, BackendError> {
    match &model.files {
        ModelFiles::Engine(engine) | ModelFiles::OnnxAndEngine { engine, .. } => std::fs::metadata(engine)
            .map(|metadata| metadata.len())
            .map_err(|e| BackendError::Load { path: engine.clone(), message: e.to_string() }),
        ModelFiles::Onnx(onnx) => crate::onnx::read_file(onnx)
            .map(|interface| interface.weight_bytes)
            .map_err(|e| BackendError::Load { path: onnx.clone(), message: e.to_string() }),
    }
}

/// A blank frame through a session of `backend` and the decoder: outputs that do not fit
/// `model.decoder` are a configuration error here, not at the first camera frame.
pub fn check_model_outputs(backend: &dyn Backend, params: &DecodeParams) -> Result<(), DaemonError> {
    crate::infer::step::check_model(backend, params.clone()).map_err(DaemonError::Pipeline)
}

/// The labels of the zones the zones file gave cameras against the label file: an error names the
/// zones file and the zone, where [`camera_scenes()`] (which sees them merged into the config) would
/// name the config. A file that does not read was not applied (`config.zones_file_problems` says
/// so), nor were the zones of a camera it did not fit.
pub fn check_zones_file_labels(config: &Config, labels: &Labels) -> Result<(), ConfigError> {
    let path = &config.http.zones_file;
    let Ok(file) = ZonesFile::load(path) else { return Ok(()) };
    let applied: Vec<_> = config
        .cameras
        .iter()
        .filter(|camera| config.zones_from_file.iter().any(|from_file| from_file.camera == camera.name))
        .cloned()
        .collect();
    file.check_labels(path, &applied, |label| labels.id_of(label).is_some())
}
