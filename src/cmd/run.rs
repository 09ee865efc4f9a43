//! The `run` command: wires config, backend, cameras, MQTT, systemd notify, telemetry and signals.
//!
//! Owns: start-up order (model → broker client → inference workers → cameras → READY), the
//! per-frame sink that turns results into messages (each camera's tracking included), SIGHUP
//! reload, the watchdog and telemetry ticks, and orderly shutdown (STOPPING → cameras and workers
//! joined → tracks ended → `offline` + bounded flush). Must not: do per-frame work itself beyond
//! handing bytes to the publisher, or call CUDA (that stays on the inference workers).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

use crate::backend::cpu::CpuBackend;
use crate::backend::{Backend, BackendError};
use crate::config::{BackendChoice, Config, ConfigError, Fallback};
use crate::decode::{DecodeError, DecodeParams};
use crate::detection::{Detection, Labels, LabelsError};
use crate::frame::FrameSlot;
use crate::homeassistant::{discovery_messages, zone_discovery_messages, DiscoveryContext, ZoneEntities};
use crate::mqtt::{MqttError, MqttSettings, Publisher};
use crate::notify::{Liveness, Notifier, WatchdogKeeper};
use crate::payload::{tracked_detections_message, Latency};
use crate::pipeline::{CameraPipeline, FrameSink, PipelineError, PipelineShared};
use crate::preprocess::PreprocessSpec;
use crate::publish_policy::PublishPolicy;
use crate::scheduler::{SchedulePlan, Scheduler};
use crate::snapshot::Snapshotter;
use crate::source::SourceError;
use crate::telemetry::{
    status_line, telemetry_message, CameraStats, FrameTimings, JetsonSysfs, SystemSampler, TelemetryReport,
};
use crate::track::camera::{camera_scene, tracking_params, CameraTracking, Outgoing};
use crate::track::events::Scene;

/// The longest a source thread may spend in one call, or the inference worker on one frame, before
/// the systemd watchdog keep-alives stop, when no `WatchdogSec=` is set to derive it from.
const DEFAULT_MAX_SILENCE: Duration = Duration::from_secs(30);
/// Each engine-build progress event (about one a second) extends systemd's start timeout by this
/// much, so a build of many minutes is never killed while a stuck one still is.
#[cfg(feature = "tensorrt")]
const BUILD_TIMEOUT_EXTENSION: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Labels(#[from] LabelsError),
    #[error("model.classes: {0}")]
    Classes(DecodeError),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("MQTT: {0}")]
    Mqtt(#[from] MqttError),
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    #[error("{0}")]
    CameraFailed(String),
    #[error("cannot start the async runtime or signal handlers: {0}")]
    Runtime(std::io::Error),
}

impl DaemonError {
    /// Errors that a restart cannot fix (bad config, missing model or labels): systemd's
    /// `RestartPreventExitStatus=78` keeps such a daemon from restart-looping.
    pub fn is_configuration_problem(&self) -> bool {
        matches!(
            self,
            DaemonError::Config(_)
                | DaemonError::Labels(_)
                | DaemonError::Classes(_)
                | DaemonError::Backend(
                    BackendError::Load { .. } | BackendError::InputMismatch(_) | BackendError::Unavailable(..)
                )
                // A source that cannot be opened at start (no such image directory, a GStreamer
                // pipeline that does not parse, a node that is not a capture device) is a
                // configuration mistake. Cameras that are only absent right now do not fail here:
                // V4L2 and GStreamer sources start reconnecting instead.
                | DaemonError::Pipeline(PipelineError::Source { source: SourceError::Open { .. }, .. })
        )
    }
}

/// Loads the model on the configured backend: `auto` tries TensorRT (when built in) and runs on
/// the CPU when TensorRT or the GPU is missing; `tensorrt` falls back only when the config says so.
/// `progress` sees an engine build, which can take minutes on first start.
pub fn load_backend(config: &Config, progress: impl FnMut(BuildProgress)) -> Result<Arc<dyn Backend>, DaemonError> {
    let may_fall_back = match config.device.backend {
        BackendChoice::Cpu => return load_cpu(config),
        BackendChoice::Auto => true,
        BackendChoice::Tensorrt => config.device.fallback == Fallback::Cpu,
    };
    match load_tensorrt(config, progress) {
        Ok(backend) => Ok(backend),
        Err(BackendError::Unavailable(_, reason)) if may_fall_back => {
            let level = if config.device.backend == BackendChoice::Auto { log::Level::Info } else { log::Level::Warn };
            log::log!(level, "TensorRT backend unavailable ({reason}); running on the CPU backend");
            load_cpu(config)
        }
        Err(e) => Err(e.into()),
    }
}

fn load_cpu(config: &Config) -> Result<Arc<dyn Backend>, DaemonError> {
    let onnx = config.model.onnx.as_deref().ok_or_else(|| {
        BackendError::Unavailable(
            "cpu",
            "the CPU backend needs `model.onnx` (a TensorRT engine cannot run on it)".into(),
        )
    })?;
    let spec = PreprocessSpec::from(&config.model.input);
    let backend = CpuBackend::load(onnx, spec, config.model.input.name.as_deref(), config.device.cpu_threads())?;
    Ok(Arc::new(backend.with_workers(config.device.cpu_workers)))
}

/// An engine-build progress event (TensorRT builds only).
#[cfg(feature = "tensorrt")]
pub type BuildProgress = crate::trt::Progress;
/// An engine-build progress event; this binary has no TensorRT, so none ever happens.
#[cfg(not(feature = "tensorrt"))]
pub type BuildProgress = std::convert::Infallible;

#[cfg(feature = "tensorrt")]
fn load_tensorrt(config: &Config, progress: impl FnMut(BuildProgress)) -> Result<Arc<dyn Backend>, BackendError> {
    use crate::gpu::{preprocessing_input_stage, GpuDevice, GpuError, GpuFramesBackend};
    let device = GpuDevice::open(config.device.gpu as usize).map_err(|e| match e {
        GpuError::NoDriver | GpuError::NoDevice { .. } => BackendError::Unavailable("tensorrt", e.to_string()),
        other => BackendError::Inference(other.to_string()),
    })?;
    let input_stage =
        preprocessing_input_stage(device.clone(), config.engine.cache_dir.clone(), max_frame_bytes(config));
    let backend = crate::trt::TrtBackend::open(config, input_stage, progress)?;
    Ok(Arc::new(GpuFramesBackend::new(backend, device)))
}

#[cfg(not(feature = "tensorrt"))]
fn load_tensorrt(_config: &Config, _progress: impl FnMut(BuildProgress)) -> Result<Arc<dyn Backend>, BackendError> {
    Err(BackendError::Unavailable("tensorrt", "this binary was built without the `tensorrt` feature".into()))
}

/// The largest frame any configured camera can deliver, for the GPU staging buffer.
#[cfg(feature = "tensorrt")]
fn max_frame_bytes(config: &Config) -> usize {
    config.cameras.iter().map(|camera| camera.max_frame_bytes()).max().unwrap_or(0)
}

/// Per-camera state the sink keeps.
struct CameraEntry {
    stats: Arc<CameraStats>,
    policy: Mutex<PublishPolicy>,
    snapshotter: Option<Mutex<Snapshotter>>,
    /// With `tracking.enabled`.
    tracking: Option<Mutex<CameraTracking>>,
    detections_topic: String,
    snapshot_topic: String,
}

/// Turns processed frames into MQTT messages and statistics.
struct DaemonSink {
    publisher: Publisher,
    labels: Arc<Labels>,
    cameras: HashMap<String, CameraEntry>,
    ended: mpsc::Sender<(String, Result<(), String>)>,
    /// With Home Assistant discovery: the zone entities published, so a reload can remove the
    /// ones whose zone is gone.
    zone_discovery: Option<Mutex<ZoneDiscovery>>,
}

/// What the zone discovery messages are made from, and the topics published so far.
struct ZoneDiscovery {
    config: crate::config::HomeAssistantConfig,
    device_id: String,
    topic_prefix: String,
    cameras: Vec<String>,
    published: BTreeSet<String>,
}

impl ZoneDiscovery {
    /// Discovery messages for `config`'s zones, plus an empty retained message (which deletes the
    /// entity) for every zone entity published before that `config` no longer has.
    fn messages(&mut self, config: &Config) -> Vec<Outgoing> {
        let context = DiscoveryContext {
            device_id: &self.device_id,
            topic_prefix: &self.topic_prefix,
            cameras: &self.cameras,
            sw_version: env!("CARGO_PKG_VERSION"),
        };
        let zones: Vec<ZoneEntities<'_>> = config
            .cameras
            .iter()
            .flat_map(|camera| {
                camera.zones.iter().map(move |zone| ZoneEntities {
                    camera: &camera.name,
                    zone: &zone.name,
                    labels: &zone.labels,
                })
            })
            .collect();
        let messages = zone_discovery_messages(&self.config, &context, &zones);
        let current: BTreeSet<String> = messages.iter().map(|m| m.topic.clone()).collect();
        let removed = self.published.difference(&current).map(|topic| Outgoing {
            topic: topic.clone(),
            payload: Vec::new(),
            retain: true,
        });
        let mut out: Vec<Outgoing> = removed.collect();
        out.extend(messages.into_iter().map(|m| Outgoing { topic: m.topic, payload: m.payload, retain: true }));
        self.published = current;
        out
    }
}

impl DaemonSink {
    fn publish_all(&self, messages: Vec<Outgoing>) {
        for message in messages {
            self.publisher.publish(message.topic, message.payload, message.retain);
        }
    }

    /// Ends every camera's tracks: `end` events, event snapshots, counts back to 0 (shutdown).
    fn finish_tracking(&self) {
        for entry in self.cameras.values() {
            if let Some(tracking) = &entry.tracking {
                let mut out = Vec::new();
                lock(tracking).finish(&self.labels, &mut out);
                self.publish_all(out);
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl FrameSink for DaemonSink {
    fn frame(&self, camera: &str, slot: &FrameSlot, detections: &[Detection], timings: &FrameTimings) {
        let Some(entry) = self.cameras.get(camera) else { return };
        let publish_started = Instant::now();
        let mut tracking_messages = Vec::new();
        let mut tracking = entry.tracking.as_ref().map(lock);
        let track_ids = match tracking.as_mut() {
            Some(tracking) => tracking.frame(slot, detections, &self.labels, &mut tracking_messages),
            None => &[],
        };
        if lock(&entry.policy).should_publish(detections, publish_started) {
            let latency = Latency::from(timings);
            let payload =
                tracked_detections_message(camera, slot.meta(), &latency, detections, track_ids, &self.labels);
            self.publisher.publish(entry.detections_topic.clone(), payload, false);
        }
        drop(tracking);
        self.publish_all(tracking_messages);
        if let Some(snapshotter) = &entry.snapshotter {
            match lock(snapshotter).maybe_render(slot, detections, &self.labels, publish_started) {
                Ok(Some(jpeg)) => self.publisher.publish(entry.snapshot_topic.clone(), jpeg, true),
                Ok(None) => {}
                Err(e) => log::warn!("camera {camera}: snapshot failed: {e}"),
            }
        }
        let mut timings = *timings;
        timings.publish = Some(publish_started.elapsed());
        entry.stats.record_frame(&timings);
    }

    fn camera_ended(&self, camera: &str, result: &Result<(), PipelineError>) {
        // Its objects are out of sight for good: their events end now.
        if let Some(tracking) = self.cameras.get(camera).and_then(|entry| entry.tracking.as_ref()) {
            let mut out = Vec::new();
            lock(tracking).finish(&self.labels, &mut out);
            self.publish_all(out);
        }
        let outcome = result.as_ref().map(|_| ()).map_err(|e| e.to_string());
        if self.ended.try_send((format!("camera {camera}"), outcome)).is_err() {
            log::error!("camera {camera}: end report lost (daemon already shutting down)");
        }
    }

    fn worker_failed(&self, worker: &str, error: &PipelineError) {
        if self.ended.try_send((worker.to_string(), Err(error.to_string()))).is_err() {
            log::error!("{worker}: failure report lost (daemon already shutting down): {error}");
        }
    }
}

/// Runs until SIGTERM/SIGINT, until every camera has ended, or until a camera fails.
/// `config_path` is re-read on SIGHUP (`None`: the embedded default, nothing to reload).
pub fn run(config: Config, config_path: Option<PathBuf>) -> Result<(), DaemonError> {
    let notifier = Arc::new(Notifier::from_env().unwrap_or_else(|e| {
        log::warn!("systemd notify socket unusable ({e}); continuing without sd_notify");
        Notifier::disabled()
    }));
    let labels = Arc::new(Labels::load(&config.model.labels)?);
    let params = DecodeParams::from_config(&config.model, &labels).map_err(DaemonError::Classes)?;
    let _ = notifier.status("loading model");
    #[cfg(feature = "tensorrt")]
    let backend = {
        let mut display = crate::trt::ProgressReporter::default();
        load_backend(&config, |event| {
            display.report(&event);
            let _ = notifier.build_progress(BUILD_TIMEOUT_EXTENSION, &display.line());
        })?
    };
    #[cfg(not(feature = "tensorrt"))]
    let backend = load_backend(&config, |never| match never {})?;
    log::info!("backend: {:?}", backend.info());

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("jetson-detectd-io")
        .enable_all()
        .build()
        .map_err(DaemonError::Runtime)?;
    // Probed here, before any tokio thread exists: CUDA calls stay off the async runtime.
    let mut engine_info = serde_json::to_value(backend.info()).unwrap_or_default();
    engine_info["gpu"] = crate::probe::gpu_section(config.device.gpu as usize);
    runtime.block_on(serve(config, config_path, backend, labels, params, notifier, engine_info))
}

async fn serve(
    config: Config,
    config_path: Option<PathBuf>,
    backend: Arc<dyn Backend>,
    labels: Arc<Labels>,
    params: DecodeParams,
    notifier: Arc<Notifier>,
    engine_info: serde_json::Value,
) -> Result<(), DaemonError> {
    let mut sigterm = signal(SignalKind::terminate()).map_err(DaemonError::Runtime)?;
    let mut sigint = signal(SignalKind::interrupt()).map_err(DaemonError::Runtime)?;
    let mut sighup = signal(SignalKind::hangup()).map_err(DaemonError::Runtime)?;

    // Zones name labels of the label file: checked before anything is published.
    let scenes = camera_scenes(&config, &labels)?;
    let publisher = Publisher::start(MqttSettings::from_config(&config)?)?;
    let camera_names: Vec<String> = config.cameras.iter().map(|c| c.name.clone()).collect();
    let mut zone_discovery = None;
    if config.homeassistant.discovery {
        let prefix = config.topic_prefix();
        let device_id = config.device_id();
        let context = DiscoveryContext {
            device_id: &device_id,
            topic_prefix: &prefix,
            cameras: &camera_names,
            sw_version: env!("CARGO_PKG_VERSION"),
        };
        for message in discovery_messages(&config.homeassistant, &context) {
            publisher.publish(message.topic, message.payload, true);
        }
        if config.tracking.enabled {
            let mut discovery = ZoneDiscovery {
                config: config.homeassistant.clone(),
                device_id,
                topic_prefix: prefix,
                cameras: camera_names.clone(),
                published: BTreeSet::new(),
            };
            for message in discovery.messages(&config) {
                publisher.publish(message.topic, message.payload, message.retain);
            }
            zone_discovery = Some(Mutex::new(discovery));
        }
    }

    let liveness = Liveness::new();
    let (ended_tx, mut ended_rx) = mpsc::channel(config.cameras.len() * 2 + 1);
    let event_snapshots = config.snapshot.events.then_some(config.snapshot.jpeg_quality);
    let cameras: HashMap<String, CameraEntry> = config
        .cameras
        .iter()
        .zip(scenes)
        .map(|(camera, scene)| {
            let tracking = config.tracking.enabled.then(|| {
                let mut tracking = CameraTracking::new(
                    &camera.name,
                    publisher.topic(&camera.name),
                    tracking_params(&config.tracking),
                    scene,
                    event_snapshots,
                );
                let mut out = Vec::new();
                tracking.startup(&labels, &mut out);
                for message in out {
                    publisher.publish(message.topic, message.payload, message.retain);
                }
                Mutex::new(tracking)
            });
            let entry = CameraEntry {
                stats: Arc::new(CameraStats::new(&camera.name)),
                policy: Mutex::new(PublishPolicy::new(config.mqtt.publish, config.mqtt.max_rate_hz)),
                snapshotter: config.snapshot.enabled.then(|| Mutex::new(Snapshotter::new(&config.snapshot))),
                tracking,
                detections_topic: publisher.topic(&format!("{}/detections", camera.name)),
                snapshot_topic: publisher.topic(&format!("{}/snapshot", camera.name)),
            };
            (camera.name.clone(), entry)
        })
        .collect();
    let sink = Arc::new(DaemonSink { publisher: publisher.clone(), labels, cameras, ended: ended_tx, zone_discovery });

    let stop = Arc::new(AtomicBool::new(false));
    let plan = SchedulePlan::new(&config, backend.as_ref(), config.cameras.len());
    let scheduler = match Scheduler::start(backend, params, plan, sink.clone(), stop.clone(), &liveness) {
        Ok(scheduler) => scheduler,
        Err(e) => {
            publisher.shutdown().await;
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
    };
    let mut pipelines = Vec::new();
    for camera in &config.cameras {
        match CameraPipeline::start(camera, &shared) {
            Ok(pipeline) => pipelines.push(pipeline),
            Err(e) => {
                stop.store(true, Ordering::SeqCst);
                join_all(pipelines, scheduler).await;
                publisher.shutdown().await;
                return Err(e.into());
            }
        }
    }
    let _ = notifier.ready();
    log::info!(
        "running: {} camera(s) on {} inference worker(s), batches of up to {}, publishing under {}",
        pipelines.len(),
        plan.workers,
        plan.max_batch,
        publisher.topic("")
    );

    // Sources beat while they wait (fps cap, reconnect backoff) and an idle inference worker beats
    // too, so the allowed silence bounds one call into a source or one frame's processing only.
    let max_silence = notifier.watchdog_interval().unwrap_or(DEFAULT_MAX_SILENCE);
    let mut keeper = WatchdogKeeper::new(notifier.clone(), liveness.clone(), max_silence);
    let mut watchdog_tick = tokio::time::interval(keeper.period().unwrap_or(Duration::from_secs(3600)));
    let telemetry_period = Duration::from_secs(u64::from(config.telemetry.interval_s.max(1)));
    // The first report after one period, when there is something to report.
    let mut telemetry_tick = tokio::time::interval_at(tokio::time::Instant::now() + telemetry_period, telemetry_period);
    let mut sampler = SystemSampler::new();
    let dropped_seen: Vec<AtomicU64> = pipelines.iter().map(|_| AtomicU64::new(0)).collect();
    if let Some(warning) = JetsonSysfs::read(&config.telemetry.sysfs_root).clock_warning() {
        log::warn!("{warning}");
    }

    let mut running = pipelines.len();
    let mut failure = None;
    loop {
        tokio::select! {
            _ = sigterm.recv() => { log::info!("SIGTERM: shutting down"); break; }
            _ = sigint.recv() => { log::info!("SIGINT: shutting down"); break; }
            _ = sighup.recv() => reload(config_path.as_deref(), &sink, &scheduler),
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
            _ = telemetry_tick.tick() => {
                let snapshots: Vec<_> = pipelines
                    .iter()
                    .zip(&dropped_seen)
                    .filter_map(|(pipeline, seen)| {
                        let entry = sink.cameras.get(pipeline.name())?;
                        let ring = pipeline.ring().stats();
                        let dropped = ring.dropped.load(Ordering::Relaxed);
                        entry.stats.record_drop(dropped.saturating_sub(seen.swap(dropped, Ordering::Relaxed)));
                        entry.stats.set_over_limit(ring.over_limit.load(Ordering::Relaxed));
                        Some(entry.stats.snapshot().with_source(pipeline.source_report()))
                    })
                    .collect();
                let stats = publisher.stats();
                let _ = notifier.status(&status_line(&snapshots, stats.connected));
                if config.telemetry.interval_s > 0 {
                    let mut engine = engine_info.clone();
                    engine["scheduler"] = serde_json::to_value(scheduler.report()).unwrap_or_default();
                    let jetson = JetsonSysfs::read(&config.telemetry.sysfs_root);
                    let report = TelemetryReport {
                        cameras: &snapshots,
                        load: Some(sampler.sample()),
                        jetson: &jetson,
                        mqtt: serde_json::to_value(stats).ok(),
                        engine: Some(engine),
                        ts: SystemTime::now(),
                    };
                    publisher.publish(publisher.topic("telemetry"), telemetry_message(&report), false);
                }
            }
        }
    }

    let _ = notifier.stopping();
    stop.store(true, Ordering::SeqCst);
    let join_failure = join_all(pipelines, scheduler).await;
    // Every camera thread is gone: the last `end` events go out before `offline`.
    sink.finish_tracking();
    publisher.shutdown().await;
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

/// The zones and lines of every configured camera, in config order.
fn camera_scenes(config: &Config, labels: &Labels) -> Result<Vec<Scene>, ConfigError> {
    (0..config.cameras.len()).map(|index| camera_scene(config, index, labels)).collect()
}

/// SIGHUP: re-reads the config and applies thresholds, class filter, publish settings, tracking
/// settings and each camera's zones and lines (live tracks continue). A config that is invalid in
/// any of these — a bad zone included — is refused as a whole. Other changes (model, cameras,
/// broker, turning tracking on or off) need a restart, which the log says.
fn reload(config_path: Option<&Path>, sink: &DaemonSink, scheduler: &Scheduler) {
    let Some(path) = config_path else {
        log::info!("SIGHUP: running on the built-in config; nothing to reload");
        return;
    };
    let reloaded = Config::load(path).map_err(|e| e.to_string()).and_then(|config| {
        let params = DecodeParams::from_config(&config.model, &sink.labels).map_err(|e| e.to_string())?;
        let scenes = camera_scenes(&config, &sink.labels).map_err(|e| e.to_string())?;
        Ok((config, params, scenes))
    });
    match reloaded {
        Ok((config, params, scenes)) => {
            scheduler.reload(params);
            for entry in sink.cameras.values() {
                lock(&entry.policy).update(config.mqtt.publish, config.mqtt.max_rate_hz);
            }
            let tracking = tracking_params(&config.tracking);
            for (camera, scene) in config.cameras.iter().zip(scenes) {
                let Some(tracker) = sink.cameras.get(&camera.name).and_then(|entry| entry.tracking.as_ref()) else {
                    continue;
                };
                let mut out = Vec::new();
                lock(tracker).reload(tracking, scene, &sink.labels, &mut out);
                sink.publish_all(out);
            }
            if let Some(discovery) = &sink.zone_discovery {
                let messages = lock(discovery).messages(&config);
                sink.publish_all(messages);
            }
            let running_tracking = sink.cameras.values().any(|entry| entry.tracking.is_some());
            if running_tracking != config.tracking.enabled {
                log::warn!("SIGHUP: tracking.enabled = {} needs a restart", config.tracking.enabled);
            }
            log::info!(
                "SIGHUP: reloaded thresholds, class filter, publish and tracking settings, zones and lines \
                 from {} (model, camera and broker changes need a restart)",
                path.display()
            );
        }
        Err(message) => log::error!("SIGHUP: keeping the running settings: {message}"),
    }
}
