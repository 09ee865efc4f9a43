//! The models beside `[model]` that a command runs as the daemon does: the `[models.<name>]`
//! detectors as the scheduler's lanes, the per-track models every worker holds, what each runs on
//! (telemetry's `engine.models`) and their device memory in a worker (telemetry's
//! `engine.model_memory`, `bench`'s and `selftest`'s `models`). Not a command: `run`, `bench` and
//! `selftest` share it, so that the lanes they build are the same.
//!
//! Owns: reading the named models of a config ([`named_detectors`] for the cameras that name
//! them, [`named_detector`] for cameras a command assigns, [`named_per_track`], each built by its
//! registered kind: `crate::infer::per_track::KINDS`), whether `[model]` runs at all ([`model_runs`]), turning loaded
//! backends into lanes ([`detector_lanes`], [`per_track_lanes`]), naming each lane's backend
//! ([`engine_models`]) and adding up their memory ([`worker_models`], [`worker_memory`], or read
//! with one context of each open: [`worker_memory_with_contexts`]). Must not: load backends (each
//! command loads them its own way: `run` with build progress over MQTT and systemd) or start the
//! scheduler.

use std::sync::Arc;

use crate::backend::{Backend, BackendError, BackendInfo, ModelRole, WorkerMemory};
use crate::config::models::{ModelKind, NamedModel};
use crate::config::{Config, ConfigError};
use crate::decode::{DecodeError, DecodeParams};
use crate::detection::Labels;
use crate::infer::per_track::registration::{BuildError, Loaded};
use crate::infer::per_track::{registered, PerTrackKind, PerTrackLane};
use crate::infer::scheduler::ModelLane;
use crate::model::ModelSpec;
use crate::sys::exit::{Classified, ExitClass};

#[derive(Debug, thiserror::Error)]
pub enum ModelsError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("models.{name}.classes: {error}")]
    Classes { name: String, error: DecodeError },
    #[error(transparent)]
    PerTrack(#[from] BuildError),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("no detector named `{name}`: {known}")]
    Unknown { name: String, known: String },
    #[error("`{name}` is a {kind} (`kind = \"{kind}\"`): name a detector")]
    NotADetector { name: String, kind: String },
    #[error("models.{name}.kind: no kind of per-track model is named `{kind}`")]
    UnknownKind { name: String, kind: String },
    #[error("{name}: {error}")]
    Session { name: String, error: BackendError },
}

impl Classified for ModelsError {
    /// A named model's table, files or labels: the config's; not a context that could not be
    /// opened at start (as the model check's and the workers' own sessions, a restart may open it).
    fn exit_class(&self) -> ExitClass {
        ExitClass::configuration_if(!matches!(self, ModelsError::Session { .. }))
    }
}

/// A `[models.<name>]` detector the cameras in `cameras` use.
pub struct NamedDetector {
    pub name: String,
    /// Its model, as loaded.
    pub model: ModelSpec,
    pub params: DecodeParams,
    /// The shared label list's id of each of its class ids.
    pub class_ids: Vec<usize>,
    pub cameras: Vec<String>,
}

/// The named detectors that cameras use, their decode parameters from their own labels, and
/// `labels` grown by their names (per-track models are [`named_per_track`]). Each model is `loaded`'s
/// table of that name (on a reload, the running config's: the files, labels and decoder of a
/// loaded model change only with a restart), else `config`'s; the thresholds and class filter are
/// `config`'s.
pub fn named_detectors(
    config: &Config,
    loaded: &Config,
    labels: &mut Labels,
) -> Result<Vec<NamedDetector>, ModelsError> {
    let mut detectors = Vec::new();
    for name in config.models.keys() {
        let cameras: Vec<String> = config
            .cameras
            .iter()
            .filter(|camera| camera.model.as_deref() == Some(name.as_str()))
            .map(|camera| camera.name.clone())
            .collect();
        if cameras.is_empty() {
            continue;
        }
        if let Some(detector) = read_detector(config, loaded, name, cameras, labels)? {
            detectors.push(detector);
        }
    }
    Ok(detectors)
}

/// The detector `[models.<name>]` of `config` for `cameras`, which a command assigns to it itself
/// (`bench --models`); `labels` grows by its names. An unknown name, or a per-track model's, is an error.
pub fn named_detector(
    config: &Config,
    name: &str,
    cameras: Vec<String>,
    labels: &mut Labels,
) -> Result<NamedDetector, ModelsError> {
    match config.models.get(name).map(|named| &named.kind) {
        Some(ModelKind::Detector) => {}
        Some(kind) => return Err(ModelsError::NotADetector { name: name.to_string(), kind: kind.name().to_string() }),
        None => {
            let detectors: Vec<String> = config
                .models
                .iter()
                .filter(|(_, named)| named.kind == ModelKind::Detector)
                .map(|(name, _)| format!("`{name}`"))
                .collect();
            let known = if detectors.is_empty() {
                "the config has no `[models.<name>]` detectors".to_string()
            } else {
                format!("the config's detectors are {}", detectors.join(", "))
            };
            return Err(ModelsError::Unknown { name: name.to_string(), known });
        }
    }
    read_detector(config, config, name, cameras, labels)?
        .ok_or_else(|| ModelsError::Unknown { name: name.to_string(), known: "no such table".to_string() })
}

/// `[models.<name>]` as [`named_detectors`] reads it; `None`: neither config has the table.
fn read_detector(
    config: &Config,
    loaded: &Config,
    name: &str,
    cameras: Vec<String>,
    labels: &mut Labels,
) -> Result<Option<NamedDetector>, ModelsError> {
    let Some(model) = ModelSpec::named(loaded, name).or_else(|| ModelSpec::named(config, name)) else {
        return Ok(None);
    };
    let Some(named) = config.models.get(name) else { return Ok(None) };
    let model = model?;
    let files = [("onnx", model.files.onnx()), ("engine", model.files.engine())];
    for (key, path) in files {
        if let Some(path) = path {
            crate::sys::files::open_regular(path, crate::sys::files::MAX_MODEL_BYTES).map_err(|e| {
                BackendError::Load { path: path.to_path_buf(), message: format!("`models.{name}.{key}`: {e}") }
            })?;
        }
    }
    let own =
        Labels::load(&model.labels).map_err(|error| config.file_error(&format!("models.{name}.labels"), error))?;
    let params = DecodeParams::new(&model, &named.model, &own)
        .map_err(|error| ModelsError::Classes { name: name.to_string(), error })?;
    let class_ids = labels.absorb(&own);
    Ok(Some(NamedDetector { name: name.to_string(), model, params, class_ids, cameras }))
}

/// A `[models.<name>]` per-track model (a classifier, an embedder), as loaded, with its kind (what its outputs
/// answer, and how its engine's are compared with the CPU's: `engine.min_agreement`).
pub struct NamedPerTrack {
    pub name: String,
    pub model: ModelSpec,
    pub kind: Arc<dyn PerTrackKind>,
}

/// The per-track models of `config`, after checking that each one's `on` labels are in `labels`
/// (the shared list), its files are regular files and a classifier's `groups` name its own labels.
pub fn named_per_track(config: &Config, labels: &Labels) -> Result<Vec<NamedPerTrack>, ModelsError> {
    crate::infer::per_track::crop_rules(config, labels)?;
    let mut models = Vec::new();
    for (name, named) in config.per_track_models() {
        let Some(model) = ModelSpec::named(config, name) else { continue };
        let model = model?;
        crate::backend::load::check_model_files(&model)?;
        models.extend(per_track_model(config, name, named, model)?);
    }
    Ok(models)
}

/// `[models.<name>]` (`named`, loaded as `model`) as a per-track model: its kind, built by the
/// kind registered under its `kind` (`crate::infer::per_track::KINDS`; `None`: a detector; a
/// kind none registered is an error).
fn per_track_model(
    config: &Config,
    name: &str,
    named: &NamedModel,
    model: ModelSpec,
) -> Result<Option<NamedPerTrack>, ModelsError> {
    let ModelKind::PerTrack(kind) = &named.kind else { return Ok(None) };
    let registered =
        registered(kind).ok_or_else(|| ModelsError::UnknownKind { name: name.to_string(), kind: kind.clone() })?;
    let kind = (registered.build)(&Loaded { config, name, named, model: &model })?;
    Ok(Some(NamedPerTrack { name: name.to_string(), model, kind }))
}

/// The scheduler's lanes: `[model]`'s (`first`, when a camera runs it) and one per detector with
/// its backend (in the order of `detectors`), each logged with the cameras it serves.
pub fn detector_lanes(
    first: Option<ModelLane>,
    detectors: Vec<NamedDetector>,
    backends: impl IntoIterator<Item = Arc<dyn Backend>>,
) -> Vec<ModelLane> {
    let named = backends.into_iter().zip(detectors).map(|(backend, detector)| {
        let info = backend.info();
        log::info!(
            "backend of models.{} (cameras {}): {} running {} ({})",
            detector.name,
            detector.cameras.join(", "),
            info.kind,
            info.model,
            info.detail
        );
        ModelLane::renamed(&detector.name, backend, detector.params, detector.class_ids, detector.cameras)
    });
    first.into_iter().chain(named).collect()
}

/// Whether a camera of `config` runs `[model]`: one that names no `[models.<name>]`. When none
/// does, `[model]` is not loaded at all (no engine, no context in any worker).
pub fn model_runs(config: &Config) -> bool {
    config.cameras.iter().any(|camera| camera.model.is_none())
}

/// The per-track models' lanes, each with its backend (in the order of `models`).
pub fn per_track_lanes(
    models: Vec<NamedPerTrack>,
    backends: impl IntoIterator<Item = Arc<dyn Backend>>,
) -> Arc<[PerTrackLane]> {
    models
        .into_iter()
        .zip(backends)
        .map(|(NamedPerTrack { name, kind, .. }, backend)| {
            log::info!("backend of models.{name} ({}): {:?}", kind.kind(), backend.info());
            PerTrackLane { name, backend, kind }
        })
        .collect()
}

/// Every named detector's and per-track model's backend, by name (telemetry's `engine.models`;
/// `[model]`'s is the `engine` section itself).
pub fn engine_models(lanes: &[ModelLane], per_track: &[PerTrackLane]) -> Vec<(String, BackendInfo)> {
    lanes
        .iter()
        .filter_map(|lane| Some((lane.name()?.to_string(), lane.backend.info())))
        .chain(per_track.iter().map(|lane| (lane.name.clone(), lane.backend.info())))
        .collect()
}

/// A model every worker holds a context of: its table (`model`, `models.<name>`), role and backend.
pub struct WorkerModel {
    pub name: String,
    pub role: ModelRole,
    pub backend: Arc<dyn Backend>,
}

/// The models of `lanes` and `per_track`, in the order a worker opens their sessions.
pub fn worker_models(lanes: &[ModelLane], per_track: &[PerTrackLane]) -> Vec<WorkerModel> {
    let detectors = lanes.iter().map(|lane| WorkerModel {
        name: lane.name().map_or_else(|| "model".to_string(), |name| format!("models.{name}")),
        role: ModelRole::Detector,
        backend: Arc::clone(&lane.backend),
    });
    let per_track = per_track.iter().map(|lane| WorkerModel {
        name: format!("models.{}", lane.name),
        role: ModelRole::PerTrack(lane.kind.kind()),
        backend: Arc::clone(&lane.backend),
    });
    detectors.chain(per_track).collect()
}

/// The device memory of `workers` workers that each hold a context of every one of `models`
/// (read after the sessions were opened: TensorRT measures a context's own memory then).
pub fn worker_memory(workers: usize, models: &[WorkerModel]) -> WorkerMemory {
    WorkerMemory::new(workers, models.iter().map(|model| (model.name.clone(), model.role, model.backend.as_ref())))
}

/// [`worker_memory`], read while one context of each of `models` is open on this thread, held
/// together as a worker holds them (TensorRT measures a context's own memory when it creates one);
/// the contexts are closed before it returns.
pub fn worker_memory_with_contexts(workers: usize, models: &[WorkerModel]) -> Result<WorkerMemory, ModelsError> {
    let sessions = models
        .iter()
        .map(|model| {
            model.backend.new_session().map_err(|error| ModelsError::Session { name: model.name.clone(), error })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let memory = worker_memory(workers, models);
    drop(sessions);
    Ok(memory)
}
