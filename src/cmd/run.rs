//! The `run` command: wires config, backend, cameras, the outlets (MQTT, the live view, the
//! recorder), the HTTP server, systemd notify, telemetry and signals.
//!
//! Owns: start-up order (SIGHUP handler → [`preflight`], the file checks `check-config` shares →
//! the controls restored from their file and watched from here on → the web server's port, bound
//! before anything is announced → MQTT outlet (status `building`) → model, checked on a blank frame
//! as `check-config` checks it ([`check_model`]) → recorder (the clip index rebuilt) → web server →
//! sink and outlets (discovery and every count at 0 queued, then `online`) → inference workers →
//! cameras (a recording one with its recorder's tap) → READY), signals and SIGHUP reload, zone
//! changes saved from the page (applied like a reload), the run-time controls (the threshold to the
//! workers, a camera's detection stopped, saved to the controls file, announced by the outlets),
//! the watchdog, the telemetry and live-view ticks, and orderly shutdown (STOPPING → cameras and
//! workers joined → tracks ended → every outlet stopped alike, at once, each flushing within its
//! bound: the recorder's clips finished, MQTT's `offline`). Must not: do
//! per-frame work (`crate::publish::sink` does), assemble figures (`crate::publish::telemetry`
//! does), know topics or JSON (the MQTT outlet does), load backends itself (`crate::backend::load`
//! does: it is how the daemon reaches the GPU), or call CUDA.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

use super::backends::{check_policy, load_models, LoadedModels, StartModel};
use super::models::{
    detector_lanes, engine_models, model_runs, named_detectors, named_per_track, per_track_lanes,
    worker_memory_with_contexts, worker_models, ModelsError, NamedDetector, NamedPerTrack,
};
use super::outlets::{schema, OUTLETS};
use crate::backend::load::{
    check_model_files, load_backend_for_check, tensorrt_free_memory, BuildProgress, GpuSampler,
};
use crate::backend::{Backend, BackendError, BuildDisplay};
use crate::config::reload::{applied, keys_needing_a_restart};
use crate::config::zones_file::{ZonesFile, ZonesFileProblem};
use crate::config::{camera_scenes, Config, ConfigError};
use crate::controls::{ControlValues, Controls};
use crate::decode::{DecodeError, DecodeParams};
use crate::detection::Labels;
use crate::http::{BoundListener, HttpError, HttpServer, Token, ZonesChange};
use crate::infer::camera::{CameraPipeline, PipelineShared};
use crate::infer::engine_build::{CheckSubject, EngineBuilds, PendingModel};
use crate::infer::per_track::PerTrackLane;
use crate::infer::scheduler::{ModelLane, SchedulePlan, Scheduler};
use crate::infer::step::PipelineError;
use crate::model::footprint::{check_fit, EngineEstimate, FitError};
use crate::model::{DeviceSpec, ModelFiles, ModelSpec};
use crate::publish::clips::ClipNaming;
use crate::publish::dispatch::Outlets;
use crate::publish::kind::{OutletError, OutletStart};
use crate::publish::live::{LiveView, StartFacts};
use crate::publish::outlet::{DaemonStatus, Outlet, Stop};
use crate::publish::sink::PublishSink;
use crate::publish::telemetry::{self, FigureSources, Telemetry};
use crate::record::{RecordError, Recorder};
use crate::service::notify::{Liveness, Notifier, WatchdogKeeper};
use crate::service::run_id::new_run_id;
use crate::source::SourceError;
use crate::sys::exit::{Classified, ExitClass};
use crate::track::events::Scene;

/// The longest a source thread may spend in one call, or the inference worker on one frame, before
/// the systemd watchdog keep-alives stop, when no `WatchdogSec=` is set to derive it from.
const DEFAULT_MAX_SILENCE: Duration = Duration::from_secs(30);
/// How long a stop waits for the engine-build thread to end its build.
const BUILD_STOP_WAIT: Duration = Duration::from_secs(2);
/// Each event of real engine-build progress (`extends_start`: a TensorRT phase or step, or on 8.x a
/// tick up to `engine.build_timeout_s`) extends systemd's start timeout by this much: long enough
/// for one slow build step, so a build of many minutes is never killed while a hung one still is.
const BUILD_TIMEOUT_EXTENSION: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("model.classes: {0}")]
    Classes(DecodeError),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Outlet(#[from] OutletError),
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    #[error("{0}")]
    CameraFailed(String),
    #[error("cannot start the async runtime or signal handlers: {0}")]
    Runtime(std::io::Error),
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("record: {0}")]
    Record(#[from] RecordError),
    #[error(transparent)]
    EnginesWontFit(#[from] FitError),
    #[error(transparent)]
    Models(#[from] ModelsError),
}

impl DaemonError {
    /// Errors that a restart cannot fix (bad config, missing model or labels): systemd's
    /// `RestartPreventExitStatus=78` keeps such a daemon from restart-looping.
    pub fn is_configuration_problem(&self) -> bool {
        matches!(
            self,
            DaemonError::Config(_)
                | DaemonError::Classes(_)
                | DaemonError::Backend(
                    BackendError::Load { .. } | BackendError::InputMismatch(_) | BackendError::Unavailable(..)
                )
                // A source that cannot be opened at start (no such image directory, a GStreamer
                // pipeline that does not parse, a node that is not a capture device) is a
                // configuration mistake. Cameras that are only absent right now do not fail here:
                // V4L2 and GStreamer sources start reconnecting instead.
                | DaemonError::Pipeline(PipelineError::Source { source: SourceError::Open { .. }, .. })
                // Outputs that do not fit `model.decoder` (a blank frame at start).
                | DaemonError::Pipeline(PipelineError::ModelOutputs { .. })
                // A record directory that cannot be created, a raw camera that cannot be encoded, a
                // camera another daemon records into the same folder.
                | DaemonError::Record(RecordError::Dir { .. } | RecordError::Camera { .. } | RecordError::Shared { .. })
                // Models too large for the GPU together: the config must run fewer or smaller ones.
                | DaemonError::EnginesWontFit(_)
        ) || matches!(self, DaemonError::Outlet(e) if e.exit_class() == ExitClass::Configuration)
            // A named model's table, files or labels; not a context that could not be opened at
            // start (as the model check's and the workers' own sessions, a restart may open it).
            || matches!(self, DaemonError::Models(e) if !matches!(e, ModelsError::Session { .. }))
            // A token file that cannot be read, or a port only root may take; not a port another
            // process holds or an address not up yet: a restart may find them free (exit 1).
            || matches!(self, DaemonError::Http(e) if !e.is_transient())
    }
}

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
/// camera's source could be opened ([`crate::source::check`]) and recorded
/// ([`crate::record::check`]). (The controls file is the daemon's own: [`restore_controls`] sets a
/// bad one aside at start.)
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
        crate::source::check(&camera.name, &camera.source)
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
fn check_engines_fit(
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
fn check_model_outputs(backend: &dyn Backend, params: &DecodeParams) -> Result<(), DaemonError> {
    crate::infer::step::check_model(backend, params.clone()).map_err(DaemonError::Pipeline)
}

/// Runs until SIGTERM/SIGINT, until every camera has ended, or until a camera fails.
/// `config_path` is re-read on SIGHUP (`None`: the embedded default, nothing to reload).
pub fn run(config: Config, config_path: Option<PathBuf>) -> Result<(), DaemonError> {
    // The runtime and the SIGHUP handler first, so that a SIGHUP during start-up (a model load, an
    // engine build of minutes) is held for the main loop, which applies it once running, instead
    // of killing the daemon. SIGTERM and SIGINT keep their default action until the main loop: a
    // start-up ends at once (the broker's Last Will then says `offline`), never after the build.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("jetson-detectd-io")
        .enable_all()
        .build()
        .map_err(DaemonError::Runtime)?;
    let sighup = {
        let _entered = runtime.enter();
        signal(SignalKind::hangup()).map_err(DaemonError::Runtime)?
    };
    log::info!("jetson-detectd {} starting with {}", env!("CARGO_PKG_VERSION"), config.origin);
    for line in config.recognised() {
        log::info!("recognised from the model file: {line}");
    }
    for camera in &config.zones_from_file {
        log::info!("{}", camera.describe(&config.http.zones_file));
    }
    for problem in &config.zones_file_problems {
        log::error!("{}", problem.describe(&config.http.zones_file));
    }
    let notifier = Arc::new(Notifier::from_env().unwrap_or_else(|e| {
        log::warn!("systemd notify socket unusable ({e}); continuing without sd_notify");
        Notifier::disabled()
    }));
    // Everything `check-config` checks too, before anything is published.
    let Preflight { model, labels, mut params, detectors, classifiers, scenes, http_token, warnings } =
        preflight(&config)?;
    for warning in &warnings {
        log::warn!("{warning}");
    }
    let controls = Arc::new(Controls::new(&config));
    restore_controls(&controls, &config.controls.file);
    params.score_threshold = controls.score_threshold();
    // From here on, a change (a command during the model load, the page) is applied and saved once
    // the pipeline runs, like any later one.
    let controls_changes = controls.changes();
    let controls_applied = controls.values();
    match crate::config::zones_file::remove_leftovers(&config.http.zones_file) {
        Ok(removed) if !removed.is_empty() => {
            log::info!("zones file: removed {} left by a save that was cut short: {removed:?}", removed.len());
        }
        Ok(_) => {}
        Err(e) => log::warn!("zones file: {e}"),
    }
    if config.zones_file_problems.iter().any(|problem| matches!(problem, ZonesFileProblem::Unusable { .. })) {
        match crate::config::zones_file::set_aside(&config.http.zones_file) {
            Ok(aside) => log::warn!("zones file: moved aside to {}", aside.display()),
            Err(e) => log::warn!("zones file: cannot move it aside: {e}"),
        }
    }
    // The web server's port before the broker hears of this start: a port another process holds
    // ends the start here, with nothing announced (`building`, `online`).
    let http_listener = {
        let _entered = runtime.enter();
        crate::http::bind(&config)?
    };

    // The outlets first: an engine build takes minutes on a Jetson, and subscribers must not see
    // a stale status meanwhile. The status is `building` (retained) until the engine is ready,
    // and telemetry carries the build's progress. CUDA and TensorRT run on this thread, never on
    // the runtime's.
    let run: Arc<str> = new_run_id().into();
    let outlets = {
        let start = OutletStart {
            config: &config,
            run: run.clone(),
            labels: labels.clone(),
            controls: controls.clone(),
            status: DaemonStatus::Building,
        };
        start_outlets(&runtime, &start)?
    };
    if config.telemetry.interval_s > 0 {
        // The previous run's retained figures go at once, not one period from now.
        outlets.telemetry(&telemetry::starting_report());
    }
    log::info!("run {run}: every JSON message of this start carries it, with a sequence number");
    let _ = notifier.status("loading model");
    let device = DeviceSpec::from_config(&config);
    // `[model]` is loaded only when a camera runs it: otherwise it would cost an engine (a build
    // of minutes on a Jetson) and a context in every worker's arena for nothing.
    let model_runs = model_runs(&config);
    if !model_runs {
        log::info!("model: not loaded, every camera runs a [models.<name>] detector");
    }
    if let Err(e) = check_engines_fit(model_runs.then_some(&model), &detectors, &classifiers, &device) {
        runtime.block_on(outlets.stop(Stop::FailedStart));
        return Err(e);
    }
    let load_started = Instant::now();
    // `[model]` when it runs, then each named detector a camera uses, then each classifier (each
    // engine cached under its own file name).
    let limit = model.engine.build_timeout;
    let named_labels = |spec: &ModelSpec| Labels::load(&spec.labels).map(Arc::new).unwrap_or_else(|_| labels.clone());
    let first_model = model_runs.then(|| StartModel {
        name: "model".into(),
        spec: &model,
        subject: CheckSubject::Detector { params: params.clone(), labels: labels.clone() },
    });
    let models: Vec<StartModel<'_>> = first_model
        .into_iter()
        .chain(detectors.iter().map(|detector| StartModel {
            name: format!("models.{}", detector.name),
            spec: &detector.model,
            subject: CheckSubject::Detector { params: detector.params.clone(), labels: named_labels(&detector.model) },
        }))
        .chain(classifiers.iter().map(|classifier| StartModel {
            name: format!("models.{}", classifier.name),
            spec: &classifier.model,
            subject: classifier.check.clone(),
        }))
        .collect();
    let mut display = BuildDisplay::default();
    let telemetry_period = Duration::from_secs(u64::from(config.telemetry.interval_s));
    let mut last_telemetry: Option<std::time::Instant> = None;
    let mut progress = |event: BuildProgress| {
        display.report(&event);
        if display.extends_start(&event, limit) {
            let _ = notifier.build_progress(BUILD_TIMEOUT_EXTENSION, &display.line());
        } else {
            let _ = notifier.status(&display.line());
        }
        let due = last_telemetry.is_none_or(|at| at.elapsed() >= telemetry_period);
        if config.telemetry.interval_s > 0 && due {
            last_telemetry = Some(std::time::Instant::now());
            outlets.telemetry(&telemetry::building_report(&display.line()));
        }
    };
    let LoadedModels { mut backends, fallback, pending } = match load_models(models, &config, &device, &mut progress) {
        Ok(loaded) => loaded,
        Err(e) => {
            runtime.block_on(outlets.stop(Stop::FailedStart));
            return Err(e.into());
        }
    };
    let classifier_backends = backends.split_off(backends.len() - classifiers.len());
    let classifiers = per_track_lanes(classifiers, classifier_backends);
    let mut backends = backends.into_iter();
    let model_backend = if model_runs { backends.next() } else { None };
    let detector_backends: Vec<Arc<dyn Backend>> = backends.collect();
    let checked = model_backend
        .iter()
        .map(|backend| (backend, &params))
        .chain(detector_backends.iter().zip(detectors.iter().map(|detector| &detector.params)));
    for (model_backend, model_params) in checked {
        if let Err(e) = check_model_outputs(model_backend.as_ref(), model_params) {
            runtime.block_on(outlets.stop(Stop::FailedStart));
            return Err(e);
        }
    }
    if let Some(backend) = &model_backend {
        let info = backend.info();
        log::info!("backend: {} running {} ({})", info.kind, info.model, info.detail);
    }
    let first = model_backend.map(|backend| ModelLane::new(backend, params.clone()));
    let lanes = detector_lanes(first, detectors, detector_backends);
    let Some(backend) = lanes.first().map(|lane| lane.backend.clone()) else {
        runtime.block_on(outlets.stop(Stop::FailedStart));
        return Err(DaemonError::CameraFailed("no model loaded".into()));
    };
    let model_load = load_started.elapsed();

    // Every model's device memory in a worker (telemetry `engine.model_memory`), read once, with
    // one context of each open as a worker holds them, for as many workers as `serve` plans.
    let workers = SchedulePlan::new(&config, backend.as_ref(), config.cameras.len()).workers;
    let memory = match worker_memory_with_contexts(workers, &worker_models(&lanes, &classifiers)) {
        Ok(memory) => memory,
        Err(e) => {
            runtime.block_on(outlets.stop(Stop::FailedStart));
            return Err(e.into());
        }
    };
    let named = engine_models(&lanes, &classifiers);
    let (engine, gpu) = telemetry::engine_section(&config, &backend.info(), fallback.as_deref(), named, &memory);
    let http = http_listener.map(|listener| (listener, http_token));
    let controls = StartControls { controls, changes: controls_changes, applied: controls_applied };
    let started =
        Started { engine, gpu, outlets, run, scenes, sighup, model_load, http, controls, classifiers, pending };
    runtime.block_on(serve(config, config_path, lanes, labels, params, notifier, started))
}

/// Starts every registered outlet ([`OUTLETS`]), inside `runtime`; when one cannot start, those
/// started before it are stopped as after a failed start.
fn start_outlets(runtime: &tokio::runtime::Runtime, start: &OutletStart<'_>) -> Result<Outlets, DaemonError> {
    let mut started = Vec::new();
    for kind in OUTLETS {
        let outlets = {
            let _entered = runtime.enter();
            (kind.start)(start)
        };
        match outlets {
            Ok(outlets) => started.extend(outlets),
            Err(error) => {
                runtime.block_on(Outlets::new(started).stop(Stop::FailedStart));
                return Err(error.into());
            }
        }
    }
    Ok(Outlets::new(started))
}

/// Takes over what users set before from the controls file at `path`; a file that cannot be read
/// or checked is set aside, and the config's values apply (a warning, never a failed start).
fn restore_controls(controls: &Controls, path: &Path) {
    let restored = crate::controls::file::restore(path);
    if !restored.removed.is_empty() {
        log::info!(
            "controls: removed {} left by a save that was cut short: {:?}",
            restored.removed.len(),
            restored.removed
        );
    }
    match &restored.set_aside {
        Some((error, Some(aside))) => {
            log::warn!("controls: {error}; moved to {}, starting from the config's values", aside.display())
        }
        Some((error, None)) => log::warn!("controls: {error}; starting from the config's values"),
        None => {}
    }
    for problem in &restored.problems {
        log::warn!("controls: {problem}");
    }
    if let Some(saved) = &restored.values {
        controls.restore(saved);
        log::info!("controls: as set before, from {}", path.display());
    }
}

/// What `run` prepared before serving: the telemetry's `engine` section (what the backend said,
/// and the GPU sampled each period), the outlets started before the engine build (connected, or
/// connecting, since), this start's run id, the cameras' scenes, and the time the model took to
/// load.
struct Started {
    engine: serde_json::Value,
    gpu: GpuSampler,
    outlets: Outlets,
    run: Arc<str>,
    scenes: Vec<Scene>,
    /// Installed first thing: a SIGHUP received during start-up waits here.
    sighup: tokio::signal::unix::Signal,
    model_load: Duration,
    /// The web server's bound port and token, when it is on.
    http: Option<(BoundListener, Option<Token>)>,
    controls: StartControls,
    /// The classifiers every inference worker holds a session of.
    classifiers: Arc<[PerTrackLane]>,
    /// The models the CPU serves until their engines are built (`engine.serve_while_building`).
    pending: Vec<PendingModel>,
}

/// The run-time controls, watched since before anything could change them (the MQTT outlet's
/// commands, the web server), and their values then: what serving applies and saves first.
struct StartControls {
    controls: Arc<Controls>,
    changes: tokio::sync::watch::Receiver<u64>,
    applied: ControlValues,
}

async fn serve(
    config: Config,
    config_path: Option<PathBuf>,
    lanes: Vec<ModelLane>,
    labels: Arc<Labels>,
    mut params: DecodeParams,
    notifier: Arc<Notifier>,
    started: Started,
) -> Result<(), DaemonError> {
    let Started { engine, gpu, outlets, run, scenes, mut sighup, model_load, http, controls, classifiers, pending } =
        started;
    let StartControls { controls, changes: mut controls_changes, applied: mut controls_applied } = controls;
    let mut sigterm = signal(SignalKind::terminate()).map_err(DaemonError::Runtime)?;
    let mut sigint = signal(SignalKind::interrupt()).map_err(DaemonError::Runtime)?;

    let liveness = Liveness::new();
    // Sources beat while they wait (fps cap, reconnect backoff) and an idle inference worker beats
    // too, so the allowed silence bounds one call into a source or one frame's processing only.
    let max_silence = notifier.watchdog_interval().unwrap_or(DEFAULT_MAX_SILENCE);
    let facts = StartFacts { engine: engine.clone(), model_load, started: SystemTime::now() };
    let live = Arc::new(LiveView::new(Arc::new(config.clone()), labels.clone(), liveness.clone(), max_silence, facts));
    let (changes_tx, mut changes_rx) = mpsc::channel::<ZonesChange>(4);
    // The clip index is rebuilt (clips cut short recovered) before anything serves it.
    let recorder = {
        let (config, labels, controls) = (config.clone(), labels.clone(), controls.clone());
        tokio::task::spawn_blocking(move || Recorder::start(&config, labels, controls)).await
    };
    let recorder = match recorder {
        Ok(Ok(recorder)) => recorder,
        Ok(Err(e)) => {
            outlets.stop(Stop::FailedStart).await;
            return Err(e.into());
        }
        Err(e) => {
            outlets.stop(Stop::FailedStart).await;
            return Err(DaemonError::Runtime(std::io::Error::other(e)));
        }
    };
    // The live view and the recorder after the outlets started early, in that order.
    let recording = recorder.iter().map(|recorder| recorder.clone() as Arc<dyn Outlet>);
    let outlets = outlets.with(std::iter::once(live.clone() as Arc<dyn Outlet>).chain(recording));
    let http = match http.map(|(listener, token)| {
        HttpServer::start(listener, &config, token, live.clone(), changes_tx, controls.clone(), recorder.clone())
    }) {
        None => None,
        Some(Ok(http)) => Some(http),
        Some(Err(e)) => {
            outlets.stop(Stop::FailedStart).await;
            return Err(e.into());
        }
    };
    if let Some(http) = &http {
        log::info!("http: the page is on http://{}/ (API under /api/, metrics at /metrics)", http.address);
    }
    let (ended_tx, mut ended_rx) = mpsc::channel(config.cameras.len() * 2 + 1);
    let stats = live.cameras.iter().map(|camera| camera.stats.clone()).collect();
    let clips = recorder.clone().map(|recorder| recorder as Arc<dyn ClipNaming>);
    let sink = Arc::new(PublishSink::start(
        &config,
        run,
        labels,
        scenes,
        stats,
        ended_tx,
        outlets.clone(),
        clips,
        controls.clone(),
    ));
    // Discovery, every count at 0 and the controls are queued: now the status may say `online`.
    outlets.status(DaemonStatus::Online);

    let stop = Arc::new(AtomicBool::new(false));
    let plan = SchedulePlan::new(&config, lanes[0].backend.as_ref(), config.cameras.len());
    let scheduler = match Scheduler::start_lanes(lanes, classifiers, plan, sink.clone(), stop.clone(), &liveness) {
        Ok(scheduler) => scheduler,
        Err(e) => {
            outlets.stop(Stop::FailedStart).await;
            return Err(e.into());
        }
    };
    let shared = PipelineShared {
        slots: config.engine.frame_slots,
        limits: config.limits,
        scheduler: scheduler.clone(),
        sink: sink.clone(),
        stop: stop.clone(),
        liveness: liveness.clone(),
        controls: controls.clone(),
    };
    let mut pipelines = Vec::new();
    for camera in &config.cameras {
        let record = recorder.as_ref().and_then(|recorder| recorder.take_tap(&camera.name));
        match CameraPipeline::start_recorded(camera, &shared, record) {
            Ok(pipeline) => pipelines.push(pipeline),
            Err(e) => {
                stop.store(true, Ordering::SeqCst);
                join_all(pipelines, scheduler).await;
                outlets.stop(Stop::FailedStart).await;
                return Err(e.into());
            }
        }
    }
    let _ = notifier.ready();
    // Serving has started: the engines the CPU stands in for are built from now on.
    let mut builds = match (!pending.is_empty()).then(|| EngineBuilds::start(pending, check_policy(&config))) {
        Some(Ok(builds)) => Some(builds),
        Some(Err(e)) => {
            log::error!("cannot start the engine-build thread ({e}); the CPU keeps serving");
            None
        }
        None => None,
    };
    log::info!(
        "running: {} camera(s) on {} inference worker(s), batches of up to {}, outlets {:?}",
        pipelines.len(),
        plan.workers,
        plan.max_batch,
        outlets
    );

    let mut keeper = WatchdogKeeper::new(notifier.clone(), liveness.clone(), max_silence);
    let mut watchdog_tick = tokio::time::interval(keeper.period().unwrap_or(Duration::from_secs(3600)));
    let mut telemetry = Telemetry::new(&config, engine, gpu, pipelines.len());
    let telemetry_period = Telemetry::period(&config);
    // The first report after one period, when there is something to report.
    let mut telemetry_tick = tokio::time::interval_at(tokio::time::Instant::now() + telemetry_period, telemetry_period);
    // The live view's figures, while the HTTP server runs.
    let mut view_tick = tokio::time::interval(telemetry::LIVE_REFRESH);

    let mut running = pipelines.len();
    let mut failure = None;
    loop {
        let sources = FigureSources {
            pipelines: &pipelines,
            sink: &sink,
            scheduler: &scheduler,
            outlets: &outlets,
            builds: builds.as_ref(),
        };
        tokio::select! {
            _ = sigterm.recv() => { log::info!("SIGTERM: shutting down"); break; }
            _ = sigint.recv() => { log::info!("SIGINT: shutting down"); break; }
            _ = sighup.recv() => {
                if let Some(reloaded) = reload(&live, config_path.as_deref(), &sink, &scheduler, &controls) {
                    params = reloaded;
                }
            }
            Some(change) = changes_rx.recv() => save_and_apply_zones(change, &config.http.zones_file, &sink, &live).await,
            Ok(()) = controls_changes.changed() => {
                controls_changes.mark_unchanged();
                let change = ControlsChange { controls: &controls, file: &config.controls.file, params: &params };
                change.apply(&mut controls_applied, &sink, &scheduler, &outlets).await;
            }
            _ = view_tick.tick(), if http.is_some() => telemetry.refresh(&live, &sources),
            Some((what, outcome)) = ended_rx.recv() => {
                match outcome {
                    Err(message) => {
                        log::error!("{what} stopped the daemon");
                        failure = Some(message);
                        break;
                    }
                    Ok(()) => {
                        running = running.saturating_sub(1);
                        if running == 0 {
                            log::info!("every camera has ended; shutting down");
                            break;
                        }
                    }
                }
            }
            _ = watchdog_tick.tick(), if keeper.period().is_some() => { keeper.tick(); }
            _ = telemetry_tick.tick() => telemetry.tick(&sources, &notifier).await,
        }
    }

    // A receiver that does not answer while the cameras and the recorder stop is no news: each
    // outlet's stop says what was not delivered.
    outlets.stopping();
    // A zone change that comes from now on (or waits unread) is answered 503 and saved nowhere.
    drop(changes_rx);
    let _ = notifier.stopping();
    // A build stops at its next step (TensorRT 10+, the stand-in); one that cannot is not waited for.
    if let Some(builds) = &mut builds {
        builds.stop(BUILD_STOP_WAIT);
    }
    if let Some(http) = http {
        http.stop().await;
    }
    stop.store(true, Ordering::SeqCst);
    let join_failure = join_all(pipelines, scheduler).await;
    // Every camera thread is gone: the last `end` events go out before `offline`; then every
    // outlet flushes within its bound (the recorder finishes its clips, MQTT says `offline`).
    sink.finish_tracking();
    outlets.stop(Stop::Shutdown).await;
    match (failure, join_failure) {
        (Some(message), _) => Err(DaemonError::CameraFailed(message)),
        (None, Some(e)) => Err(e.into()),
        (None, None) => Ok(()),
    }
}

/// Joins every camera's source thread, then the inference workers (the stop flag is set).
async fn join_all(pipelines: Vec<CameraPipeline>, scheduler: Arc<Scheduler>) -> Option<PipelineError> {
    tokio::task::spawn_blocking(move || {
        let cameras = pipelines.into_iter().filter_map(|p| p.join().err()).next();
        let workers = scheduler.join().err();
        cameras.or(workers)
    })
    .await
    .ok()
    .flatten()
}

/// Zones and lines from the page (parsed and checked): saved to the zones file, then applied to the
/// camera's tracking like a SIGHUP reload (live tracks continue), then answered. A change that
/// cannot be saved is not applied.
async fn save_and_apply_zones(change: ZonesChange, zones_file: &Path, sink: &PublishSink, live: &LiveView) {
    let ZonesChange { scene, tracked, applied } = change;
    let mut config = (*live.config()).clone();
    let result = match config.cameras.iter_mut().find(|camera| camera.name == scene.name) {
        None => Err(format!("no camera named {:?}", scene.name)),
        Some(camera) => {
            camera.zones.clone_from(&scene.zones);
            camera.lines.clone_from(&scene.lines);
            let (path, name) = (zones_file.to_path_buf(), scene.name.clone());
            let saved = tokio::task::spawn_blocking(move || ZonesFile::update(&path, |file| file.set(scene)).map(drop))
                .await
                .map_err(|e| format!("save task failed: {e}"))
                .and_then(|saved| saved.map_err(|e| e.to_string()));
            saved.map(|()| sink.apply_scene(&config, &name, tracked))
        }
    };
    // The requester may have gone (its connection closed); the change is saved and applied either way.
    let _ = applied.send(result);
}

/// The labels of the zones the zones file gave cameras against the label file: an error names the
/// zones file and the zone, where [`camera_scenes`] (which sees them merged into the config) would
/// name the config. A file that does not read was not applied (`config.zones_file_problems` says
/// so), nor were the zones of a camera it did not fit.
fn check_zones_file_labels(config: &Config, labels: &Labels) -> Result<(), ConfigError> {
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

/// SIGHUP: re-reads the config and applies thresholds, class filter, publish settings, tracking
/// settings and each running camera's zones and lines (live tracks continue). A config that is
/// invalid in any of these — a bad zone included — is refused as a whole. Other changes (model,
/// cameras added, removed or renamed, broker, turning tracking on or off) need a restart: the log
/// names each such key, and the running cameras keep their names until then.
///
/// A `model.score_threshold` that differs from the running config's is what the user wants now:
/// it becomes the control's value (and is saved); otherwise the control's value stays. Returns the
/// decode settings now in force.
fn reload(
    live: &LiveView,
    config_path: Option<&Path>,
    sink: &PublishSink,
    scheduler: &Scheduler,
    controls: &Controls,
) -> Option<DecodeParams> {
    let Some(path) = config_path else {
        log::info!("SIGHUP: running on the built-in config; nothing to reload");
        return None;
    };
    let running = live.config();
    let loaded =
        schema().load(path).and_then(|mut config| crate::onnx::describe::describe(&mut config).map(|()| config));
    let reloaded = loaded.map_err(|e| e.to_string()).and_then(|config| {
        // The loaded models are the running config's: a reload changes their thresholds and
        // class filters, never their decoders.
        let model = ModelSpec::from_config(&running).map_err(|e| e.to_string())?;
        // `[model]`'s class filter names `[model]`'s own labels, as at start: the shared list also
        // holds the named detectors' labels, whose ids `[model]` never produces.
        let own = Labels::load(&model.labels).map_err(|e| e.to_string())?;
        let mut params = DecodeParams::new(&model, &config.model, &own).map_err(|e| e.to_string())?;
        let detectors = named_detectors(&config, &running, &mut sink.labels().clone()).map_err(|e| e.to_string())?;
        check_zones_file_labels(&config, sink.labels()).map_err(|e| e.to_string())?;
        // Every camera's zones and lines are checked; the running cameras' are applied: what runs
        // after the reload is the running config with the reloadable keys taken from the file
        // (the cameras keep their names).
        camera_scenes(&config, sink.labels()).map_err(|e| e.to_string())?;
        let running_now = applied(&running, &config);
        let scenes = camera_scenes(&running_now, sink.labels()).map_err(|e| e.to_string())?;
        // The sections' checks of what runs now: the running cameras with the reloaded zones.
        running_now.check_sections().map_err(|e| e.to_string())?;
        if config.model.score_threshold != running.model.score_threshold {
            // Tells the outlets and saves the file through the controls' change, like a command.
            let _ = controls.set_score_threshold(config.model.score_threshold);
        }
        params.score_threshold = controls.score_threshold();
        Ok((config, running_now, params, detectors, scenes))
    });
    match reloaded {
        Ok((config, running_now, params, detectors, scenes)) => {
            scheduler.reload(params.clone());
            // The named detectors' lanes, by name; when which detectors run changed (a restart
            // applies that, the log below names the keys), they keep theirs.
            let running_names =
                running.models.keys().filter(|name| running.cameras.iter().any(|c| c.model.as_ref() == Some(*name)));
            if running_names.eq(detectors.iter().map(|detector| &detector.name)) {
                for detector in detectors {
                    scheduler.reload_model(Some(&detector.name), detector.params);
                }
            }
            sink.reload(&running_now, scenes);
            for problem in &config.zones_file_problems {
                log::error!("SIGHUP: {}", problem.describe(&config.http.zones_file));
            }
            let not_applied = keys_needing_a_restart(&running, &config);
            if !not_applied.is_empty() {
                log::warn!("SIGHUP: not applied, these need a restart: {}", not_applied.join(", "));
            }
            log::info!(
                "SIGHUP: reloaded thresholds, class filter, publish and tracking settings, zones and lines \
                 from {}",
                path.display()
            );
            Some(params)
        }
        Err(message) => {
            log::error!("SIGHUP: keeping the running settings: {message}");
            None
        }
    }
}

/// Applies what changed in the controls since `applied`: the threshold to the inference workers,
/// the end of the tracks of a camera whose detection stopped; then tells the outlets and saves the
/// controls file (off the async threads).
struct ControlsChange<'a> {
    controls: &'a Controls,
    file: &'a Path,
    /// The decode settings in force, which the threshold replaces its part of.
    params: &'a DecodeParams,
}

impl ControlsChange<'_> {
    async fn apply(self, applied: &mut ControlValues, sink: &PublishSink, scheduler: &Scheduler, outlets: &Outlets) {
        let now = self.controls.values();
        if now.score_threshold != applied.score_threshold {
            log::info!("controls: score threshold {} (was {})", now.score_threshold, applied.score_threshold);
            scheduler.reload(DecodeParams { score_threshold: now.score_threshold, ..self.params.clone() });
        }
        for (camera, values) in &now.cameras {
            let before = applied.cameras.get(camera).copied().unwrap_or(*values);
            if before != *values {
                log::info!(
                    "controls: camera {camera}: detection {}, snapshots {}, recording {}",
                    on_off(values.detect),
                    on_off(values.snapshots),
                    on_off(values.record)
                );
            }
            if before.detect && !values.detect {
                sink.stop_detection(camera);
            }
        }
        outlets.controls(&now);
        let (file, values) = (self.file.to_path_buf(), now.clone());
        match tokio::task::spawn_blocking(move || crate::controls::file::save(&file, &values)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => log::error!("controls: {error}; they apply until the daemon stops"),
            Err(error) => log::error!("controls: saving them failed: {error}"),
        }
        *applied = now;
    }
}

fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_models_context_that_cannot_be_opened_at_start_may_be_restarted_unlike_a_bad_models_table() {
        let out_of_memory = BackendError::Inference("out of device memory".into());
        let context = DaemonError::Models(ModelsError::Session { name: "models.colour".into(), error: out_of_memory });
        assert_eq!(context.to_string(), "models.colour: inference failed: out of device memory");
        assert!(!context.is_configuration_problem(), "exit 1: systemd restarts the daemon");
        let table = DaemonError::Models(ModelsError::NotADetector { name: "colour".into(), kind: "classifier" });
        assert!(table.is_configuration_problem(), "exit 78");
    }
}
