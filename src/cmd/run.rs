//! The `run` command: wires config, backend, cameras, the outlets, the HTTP server, systemd
//! notify, telemetry and signals.
//!
//! Owns: start-up order (SIGHUP handler → the checks `check-config` shares ([`super::preflight`]) →
//! the controls restored from their file and watched from here on → the web server's port, bound
//! before anything is announced → every registered outlet started ([`super::outlets`]; status
//! `building`) → model, checked on a blank frame as `check-config` checks it → recorder (the clip
//! index rebuilt) → the cameras' live feeds (where the page is served) → web server → sink and
//! outlets (discovery and every count at 0 queued, then `online`) → inference workers → cameras
//! (each with its tap: its recorder's, its live feed's) → READY), the
//! serving loop — signals, SIGHUP ([`super::reload`]), zone changes saved from the page
//! ([`super::zone_changes`]), the run-time controls ([`super::control_changes`]), the watchdog, the
//! telemetry and live-view ticks — and orderly shutdown (STOPPING → cameras and workers joined →
//! tracks ended → every outlet stopped alike, at once, each flushing within its bound). Must not:
//! do per-frame work (`crate::publish::sink` does), assemble figures (`crate::publish::reporting`
//! does), name an outlet or know topics and JSON (each outlet does; the recorder and the live video's
//! hub alone are started by name, before the web server that serves their clips and streams and
//! before the cameras whose taps feed them; the recorder also names each event's clip ahead of
//! the outlets), load backends itself (`crate::backend::load` does: it is how the daemon
//! reaches the GPU), call CUDA, or decide an error's exit status (each error knows its class:
//! [`DaemonError`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

use super::backends::{check_policy, load_models, LoadedModels, StartModel};
use super::control_changes::{restore_controls, ControlsChange};
use super::error::DaemonError;
use super::models::{
    detector_lanes, engine_models, model_runs, per_track_lanes, worker_memory_with_contexts, worker_models,
};
use super::outlets::OUTLETS;
use super::preflight::{check_engines_fit, check_model_outputs, preflight, Preflight};
use super::reload::reload;
use super::zone_changes::save_and_apply_zones;
use crate::backend::fleet::store::lease::RELEASE_WAIT;
use crate::backend::load::{BuildProgress, GpuSampler};
use crate::backend::{Backend, BuildDisplay};
use crate::config::zones_file::ZonesFileProblem;
use crate::config::Config;
use crate::controls::{ControlValues, Controls};
use crate::decode::DecodeParams;
use crate::detection::Labels;
use crate::http::state::Video;
use crate::http::{BoundListener, HttpServer, Token, ZonesChange};
use crate::infer::camera::{CameraPipeline, PipelineShared};
use crate::infer::engine_build::{CheckSubject, EngineBuilds, PendingModel};
use crate::infer::gating::{MotionConfig, MotionGates};
use crate::infer::per_track::PerTrackLane;
use crate::infer::scheduler::{ModelLane, SchedulePlan, Scheduler};
use crate::infer::step::PipelineError;
use crate::model::{DeviceSpec, ModelSpec};
use crate::publish::clips::ClipNaming;
use crate::publish::dispatch::Outlets;
use crate::publish::kind::OutletStart;
use crate::publish::live::{LiveView, StartFacts};
use crate::publish::outlet::{DaemonStatus, Outlet, Stop};
use crate::publish::reporting::{self, FigureSources, Telemetry};
use crate::publish::sink::PublishSink;
use crate::record::Recorder;
use crate::service::notify::{Liveness, Notifier, WatchdogKeeper};
use crate::service::run_id::new_run_id;
use crate::service::stop_signals::StopSignals;
use crate::source::tap::StreamTap;
use crate::track::events::Scene;
use crate::watch::hub::WatchHub;

/// The longest a source thread may spend in one call, or the inference worker on one frame, before
/// the systemd watchdog keep-alives stop, when no `WatchdogSec=` is set to derive it from.
const DEFAULT_MAX_SILENCE: Duration = Duration::from_secs(30);
/// How long a stop waits for the engine-build thread to end its build (its next step) and to
/// release the fleet's lease on the engine, when it holds one.
const BUILD_STOP_WAIT: Duration = Duration::from_secs(2).saturating_add(RELEASE_WAIT);
/// Each event of real engine-build progress (`extends_start`: a TensorRT phase or step, or on 8.x a
/// tick up to `engine.build_timeout_s`) extends systemd's start timeout by this much: long enough
/// for one slow build step, so a build of many minutes is never killed while a hung one still is.
const BUILD_TIMEOUT_EXTENSION: Duration = Duration::from_secs(300);

/// Runs until SIGTERM/SIGINT, until every camera has ended, or until a camera fails.
/// `config_path` is re-read on SIGHUP (`None`: the embedded default, nothing to reload).
pub fn run(config: Config, config_path: Option<PathBuf>) -> Result<(), DaemonError> {
    // The runtime and the SIGHUP handler first, so that a SIGHUP during start-up (a model load, an
    // engine build of minutes) is held for the main loop, which applies it once running, instead
    // of killing the daemon. SIGTERM and SIGINT keep their default action until the models load:
    // before, a start-up ends at once (the broker's Last Will then says `offline`); from then on
    // they are caught (`StopSignals`): an engine build the start waits for is cancelled, and the
    // daemon stops cleanly, never after the build.
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
        outlets.telemetry(&reporting::starting_report());
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
            subject: CheckSubject::PerTrack(classifier.kind.clone()),
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
            outlets.telemetry(&reporting::building_report(&display.line()));
        }
    };
    let signals = match StopSignals::listen(runtime.handle()) {
        Ok(signals) => signals,
        Err(e) => {
            runtime.block_on(outlets.stop(Stop::FailedStart));
            return Err(DaemonError::Runtime(e));
        }
    };
    let loaded = load_models(models, &config, &device, &mut progress, signals.flag());
    let LoadedModels { mut backends, fallback, pending } = match (loaded, signals.which()) {
        (Ok(loaded), _) => loaded,
        // The build was cancelled by the signal (or ended for another reason meanwhile): a stop.
        (Err(e), Some(name)) => {
            log::info!("{name} during the start: shutting down");
            log::debug!("the start ended with: {e}");
            let _ = notifier.stopping();
            runtime.block_on(outlets.stop(Stop::Shutdown));
            return Ok(());
        }
        (Err(e), None) => {
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
    let (engine, gpu) = reporting::engine_section(&config, &backend.info(), fallback.as_deref(), named, &memory);
    let http = http_listener.map(|listener| (listener, http_token));
    let controls = StartControls { controls, changes: controls_changes, applied: controls_applied };
    let started = Started {
        engine,
        gpu,
        outlets,
        run,
        scenes,
        sighup,
        signals,
        model_load,
        http,
        controls,
        classifiers,
        pending,
    };
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
    /// SIGTERM and SIGINT, caught since the models loaded: one received since waits here.
    signals: StopSignals,
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
    let Started {
        engine,
        gpu,
        outlets,
        run,
        scenes,
        mut sighup,
        signals,
        model_load,
        http,
        controls,
        classifiers,
        pending,
    } = started;
    let StartControls { controls, changes: mut controls_changes, applied: mut controls_applied } = controls;

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
    // The cameras' live video, where the page is served: each camera's feed of its own stream.
    let watch = http.is_some().then(|| Arc::new(WatchHub::new(&config, labels.clone())));
    // With `[motion]` enabled, each camera's gate: masks saved from the page reach it, and the
    // page's debug view watches it.
    let motion = config.sections.get::<MotionConfig>().filter(|motion| motion.enabled).map(|motion| {
        let running = motion.with_saved_masks(&config.masks_from_file);
        Arc::new(MotionGates::new(running, config.cameras.iter().map(|camera| camera.name.clone())))
    });
    // The live view, the recorder and the live video after the outlets started early, in that order.
    let recording = recorder.iter().map(|recorder| recorder.clone() as Arc<dyn Outlet>);
    let watching = watch.iter().map(|watch| watch.clone() as Arc<dyn Outlet>);
    let outlets = outlets.with(std::iter::once(live.clone() as Arc<dyn Outlet>).chain(recording).chain(watching));
    let http = match http.map(|(listener, token)| {
        let video = Video { record: recorder.clone(), watch: watch.clone(), motion: motion.clone() };
        HttpServer::start(listener, &config, token, live.clone(), changes_tx, controls.clone(), video)
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
        motion: motion.clone(),
    };
    let mut pipelines = Vec::new();
    for camera in &config.cameras {
        let record = recorder.as_ref().and_then(|recorder| recorder.take_tap(&camera.name));
        let live = watch.as_ref().and_then(|watch| watch.listener(&camera.name));
        match CameraPipeline::start_recorded(camera, &shared, StreamTap::new(record, live)) {
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
    let mut view_tick = tokio::time::interval(reporting::LIVE_REFRESH);

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
            name = signals.received() => { log::info!("{name}: shutting down"); break; }
            _ = sighup.recv() => {
                if let Some(reloaded) = reload(&live, config_path.as_deref(), &sink, &scheduler, &controls) {
                    params = reloaded;
                }
            }
            Some(change) = changes_rx.recv() => {
                save_and_apply_zones(change, &config.http.zones_file, &sink, &live, motion.as_deref()).await;
            }
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
