//! Telemetry as the daemon runs it: the figures of the running daemon, gathered each period into
//! one report for the outlets and the systemd `STATUS=` line, and every couple of seconds into
//! the live view's figures.
//!
//! Owns: the report's `engine` section (what the backend said, a fallback, each named model's
//! backend and every model's device memory as `run` read them at start, the GPU sampled each
//! period, the scheduler's figures), moving each camera ring's counts into the camera's
//! statistics, the fps window of the live view, the system samplers, reading every outlet's
//! figures, and what one tick does. Must not: publish (the outlets do: `Outlet::telemetry`), or
//! call CUDA on the async threads (the GPU is sampled on a blocking thread).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::dispatch::{NamedFigures, Outlets};
use super::live::{Figures, LiveView};
use super::sink::PublishSink;
use crate::backend::load::GpuSampler;
use crate::backend::{BackendInfo, WorkerMemory};
use crate::config::Config;
use crate::infer::camera::CameraPipeline;
use crate::infer::engine_build::{BuildState, EngineBuilds, ModelBuildReport};
use crate::infer::scheduler::Scheduler;
use crate::service::notify::Notifier;
use crate::service::telemetry::{status_line, CameraSnapshot, JetsonSysfs, SystemSampler, TelemetryReport};

/// How often the live view's figures (fps, states, connection, load, board sensors) are refreshed.
pub const LIVE_REFRESH: Duration = Duration::from_secs(2);

/// The telemetry's `engine` section at start: what the backend said, the GPU as probed, and why
/// TensorRT was not used when the backend fell back to the CPU; `models`, each named detector's and
/// classifier's backend by name (`named`, beside `[model]`'s; absent without named models), and
/// `model_memory`, every model a worker holds a context of with its device memory and the worker's
/// one arena, as `bench` and `selftest` report it (`memory`, read once at start); and the sampler
/// that refreshes the GPU part each period.
pub fn engine_section(
    config: &Config,
    backend: &BackendInfo,
    fallback: Option<&str>,
    named: Vec<(String, BackendInfo)>,
    memory: &WorkerMemory,
) -> (serde_json::Value, GpuSampler) {
    let mut engine = serde_json::to_value(backend).unwrap_or_default();
    let gpu = GpuSampler::new(config.device.gpu as usize, backend.kind == "tensorrt");
    engine["gpu"] = gpu.section();
    if let Some(reason) = fallback {
        engine["fallback"] = serde_json::Value::String(format!("TensorRT unavailable: {reason}"));
    }
    let named: serde_json::Map<String, serde_json::Value> =
        named.into_iter().filter_map(|(name, info)| Some((name, serde_json::to_value(info).ok()?))).collect();
    if !named.is_empty() {
        engine["models"] = serde_json::Value::Object(named);
    }
    engine["model_memory"] = serde_json::to_value(memory).unwrap_or_default();
    (engine, gpu)
}

/// The telemetry report while the engine is built at start: `engine.status` is `building`, with
/// the build's progress line (what systemd's `STATUS=` shows). Only a TensorRT build reports
/// progress.
pub fn building_report(progress: &str) -> TelemetryReport<'static> {
    report_without_figures(serde_json::json!({ "status": "building", "progress": progress }))
}

/// The first report of a start, before any figure exists: `engine.status` is `starting`, and no
/// camera, load or connection figure, so that a subscriber (Home Assistant's diagnostic sensors)
/// does not go on showing the previous run's retained fps, inference time and CPU until the first
/// report of this run.
pub fn starting_report() -> TelemetryReport<'static> {
    report_without_figures(serde_json::json!({ "status": "starting" }))
}

fn report_without_figures(engine: serde_json::Value) -> TelemetryReport<'static> {
    static NO_READINGS: std::sync::LazyLock<JetsonSysfs> = std::sync::LazyLock::new(JetsonSysfs::default);
    TelemetryReport {
        stamp: None,
        cameras: &[],
        load: None,
        jetson: &NO_READINGS,
        engine: Some(engine),
        outlets: Vec::new(),
        reid: None,
        ts: SystemTime::now(),
    }
}

/// Telemetry's `engine.build` section: every model whose engine is built while the CPU serves
/// (`models`), and, to read at a glance, the state, progress and serving engine of the one that
/// matters now (the first still building, waiting or checking; else the first refused or failed;
/// else the first).
pub fn build_section(builds: &[ModelBuildReport]) -> serde_json::Value {
    let active = |states: &[BuildState]| builds.iter().find(|build| states.contains(&build.status));
    let first = active(&[BuildState::Building, BuildState::Waiting, BuildState::Checking])
        .or_else(|| active(&[BuildState::Refused, BuildState::Failed]))
        .or(builds.first());
    let mut section = first.and_then(|build| serde_json::to_value(build).ok()).unwrap_or_default();
    if let Some(fields) = section.as_object_mut() {
        fields.retain(|key, _| {
            ["status", "serving", "phase", "percent", "progress", "elapsed_s"].contains(&key.as_str())
        });
    }
    section["models"] = serde_json::to_value(builds).unwrap_or_default();
    section
}

/// `engine` as it is now while engines are built: the serving backend's kind, model and detail
/// (`backend`: the CPU until the engine took over) and the `build` section.
pub fn with_builds(engine: &mut serde_json::Value, backend: Option<&BackendInfo>, builds: &[ModelBuildReport]) {
    if builds.is_empty() {
        return;
    }
    if let Some(backend) = backend {
        engine["kind"] = backend.kind.into();
        engine["model"] = backend.model.clone().into();
        engine["detail"] = backend.detail.clone().into();
    }
    engine["build"] = build_section(builds);
}

/// The front of systemd's `STATUS=` line while an engine is built or waited for (serving goes on):
/// `engine building 45% (the CPU serves)`.
fn building_line(builds: &[ModelBuildReport]) -> Option<String> {
    let build = builds
        .iter()
        .find(|build| matches!(build.status, BuildState::Building | BuildState::Waiting | BuildState::Checking))?;
    let percent = build.percent.map(|percent| format!(" {percent:.0}%")).unwrap_or_default();
    Some(format!("{}: engine {}{percent} (serving: {})", build.model, build.status.name(), build.serving))
}

/// What the running daemon's figures are read from.
pub struct FigureSources<'a> {
    pub pipelines: &'a [CameraPipeline],
    pub sink: &'a PublishSink,
    pub scheduler: &'a Scheduler,
    pub outlets: &'a Outlets,
    /// The engines built while the CPU serves, when there are any.
    pub builds: Option<&'a EngineBuilds>,
}

/// The telemetry of one run; see the module doc.
pub struct Telemetry {
    engine: serde_json::Value,
    gpu: Arc<GpuSampler>,
    sysfs_root: PathBuf,
    /// `telemetry.interval_s > 0`: reports go out (the `STATUS=` line is refreshed either way).
    reports: bool,
    sampler: SystemSampler,
    /// Each camera ring's drop count as last moved into the camera's statistics.
    dropped_seen: Vec<u64>,
    view_sampler: SystemSampler,
    /// When the live view's fps window started, and each camera's frames then.
    view_frames: (Instant, Vec<u64>),
}

impl Telemetry {
    /// Telemetry of `cameras` cameras with the `engine` section of [`engine_section`]; warns (in the
    /// log) when the board's GPU clock is not pinned.
    pub fn new(config: &Config, engine: serde_json::Value, gpu: GpuSampler, cameras: usize) -> Telemetry {
        let sysfs_root = config.telemetry.sysfs_root.clone();
        if let Some(warning) = JetsonSysfs::read(&sysfs_root).clock_warning() {
            log::warn!("{warning}");
        }
        Telemetry {
            engine,
            gpu: Arc::new(gpu),
            sysfs_root,
            reports: config.telemetry.interval_s > 0,
            sampler: SystemSampler::new(),
            dropped_seen: vec![0; cameras],
            view_sampler: SystemSampler::new(),
            view_frames: (Instant::now(), vec![0; cameras]),
        }
    }

    /// The period of [`Telemetry::tick`] (at least a second, for the `STATUS=` line).
    pub fn period(config: &Config) -> Duration {
        Duration::from_secs(u64::from(config.telemetry.interval_s.max(1)))
    }

    /// One period: the `STATUS=` line and, unless reports are off, the report to every outlet.
    pub async fn tick(&mut self, sources: &FigureSources<'_>, notifier: &Notifier) {
        self.sync_ring_counts(sources);
        let snapshots: Vec<CameraSnapshot> = sources
            .pipelines
            .iter()
            .filter_map(|pipeline| {
                let stats = sources.sink.camera_stats(pipeline.name())?;
                Some(stats.snapshot().with_source(pipeline.source_report()))
            })
            .collect();
        let outlets = sources.outlets.figures();
        let mut line = status_line(&snapshots, &connections(&outlets));
        if let Some(build) = sources.builds.and_then(|builds| building_line(&builds.report())) {
            line = format!("{build}; {line}");
        }
        let _ = match self.engine.get("fallback") {
            Some(_) => notifier.status(&format!("CPU backend (TensorRT unavailable); {line}")),
            None => notifier.status(&line),
        };
        if !self.reports {
            return;
        }
        let mut engine = self.engine.clone();
        engine["scheduler"] = serde_json::to_value(sources.scheduler.report()).unwrap_or_default();
        let builds = sources.builds.map(EngineBuilds::report).unwrap_or_default();
        with_builds(&mut engine, Some(&sources.scheduler.backend().info()), &builds);
        // Sampled each period, off the async threads (CUDA calls stay off them).
        let gpu = self.gpu.clone();
        if let Ok(section) = tokio::task::spawn_blocking(move || gpu.section()).await {
            engine["gpu"] = section;
        }
        let jetson = JetsonSysfs::read(&self.sysfs_root);
        let report = TelemetryReport {
            stamp: None,
            cameras: &snapshots,
            load: Some(self.sampler.sample()),
            jetson: &jetson,
            engine: Some(engine),
            outlets: outlets.into_iter().map(|named| (named.outlet, named.figures.report)).collect(),
            reid: sources.sink.reid_figures().and_then(|figures| serde_json::to_value(figures).ok()),
            ts: SystemTime::now(),
        };
        sources.outlets.telemetry(&report);
    }

    /// The live view's figures, fps over the time since the last refresh.
    pub fn refresh(&mut self, live: &LiveView, sources: &FigureSources<'_>) {
        self.sync_ring_counts(sources);
        let now = Instant::now();
        let frames: Vec<u64> = live.cameras.iter().map(|camera| camera.stats.peek().frames).collect();
        let elapsed = now.saturating_duration_since(self.view_frames.0).as_secs_f64().max(1e-3);
        let fps = frames
            .iter()
            .zip(&self.view_frames.1)
            .map(|(now, then)| (now.saturating_sub(*then) as f64 / elapsed * 100.0).round() / 100.0)
            .collect();
        self.view_frames = (now, frames);
        live.set_figures(Figures {
            sources: sources.pipelines.iter().map(|pipeline| Some(pipeline.source_report())).collect(),
            fps,
            outlets: sources.outlets.figures(),
            scheduler: Some(sources.scheduler.report()),
            builds: sources.builds.map(EngineBuilds::report).unwrap_or_default(),
            backend: sources.builds.map(|_| sources.scheduler.backend().info()),
            system: Some(self.view_sampler.sample()),
            jetson: JetsonSysfs::read(&self.sysfs_root),
            updated: Some(SystemTime::now()),
        });
    }

    /// Moves each camera ring's drop, over-limit and capture counts into the camera's statistics.
    fn sync_ring_counts(&mut self, sources: &FigureSources<'_>) {
        for (pipeline, seen) in sources.pipelines.iter().zip(&mut self.dropped_seen) {
            let Some(stats) = sources.sink.camera_stats(pipeline.name()) else { continue };
            let ring = pipeline.ring().stats();
            let dropped = ring.dropped.load(std::sync::atomic::Ordering::Relaxed);
            stats.record_drop(dropped.saturating_sub(std::mem::replace(seen, dropped)));
            stats.set_over_limit(ring.over_limit.load(std::sync::atomic::Ordering::Relaxed));
            let produced = ring.produced.load(std::sync::atomic::Ordering::Relaxed);
            stats.set_capture(ring.capture_mode(), produced, ring.copies.load(std::sync::atomic::Ordering::Relaxed));
            stats.set_truncated(ring.truncated.load(std::sync::atomic::Ordering::Relaxed));
        }
    }
}

/// The outlets that have a connection, by name, and whether it is up (the `STATUS=` line).
fn connections(outlets: &[NamedFigures]) -> Vec<(&str, bool)> {
    outlets.iter().filter_map(|named| Some((named.outlet.as_str(), named.figures.connected?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::memory::{example_model as model, example_shared_worker};
    use crate::backend::memory::{Arena, NO_DEVICE_ARENA};
    use crate::backend::ModelRole;

    fn info(kind: &'static str, model: &str) -> BackendInfo {
        BackendInfo { kind, model: model.into(), detail: "detail".into() }
    }

    fn config() -> Config {
        Config::embedded_default().expect("the embedded default is valid")
    }

    #[test]
    fn the_engine_section_adds_each_models_memory_and_keeps_the_backends_fields() {
        let memory = WorkerMemory {
            workers: 2,
            contexts_per_worker: 2,
            arena: Arena::None(NO_DEVICE_ARENA),
            models: vec![
                model("model", ModelRole::Detector, None, None),
                model("models.colour", ModelRole::PerTrack("classifier"), None, None),
            ],
        };
        let named = vec![("colour".to_string(), info("cpu", "colour.onnx"))];
        let (engine, _) = engine_section(&config(), &info("cpu", "ssd.onnx"), Some("no GPU"), named, &memory);
        let keys: Vec<&str> = engine.as_object().expect("an object").keys().map(String::as_str).collect();
        assert_eq!(keys, ["detail", "fallback", "gpu", "kind", "model", "model_memory", "models"]);
        assert_eq!(
            (&engine["kind"], &engine["model"], &engine["detail"]),
            (&"cpu".into(), &"ssd.onnx".into(), &"detail".into())
        );
        assert_eq!(engine["fallback"], "TensorRT unavailable: no GPU");
        assert_eq!(
            engine["models"],
            serde_json::json!({"colour": {"kind": "cpu", "model": "colour.onnx", "detail": "detail"}})
        );
        let cpu_model = |name: &str, role: &str| {
            serde_json::json!({
                "name": name, "role": role, "backend": "cpu", "engine": "rten 0.27",
                "scratch_bytes_per_context": null, "persistent_bytes_per_context": null, "saved_bytes": null
            })
        };
        assert_eq!(
            engine["model_memory"],
            serde_json::json!({
                "workers": 2,
                "contexts_per_worker": 2,
                "arena": NO_DEVICE_ARENA,
                "models": [cpu_model("model", "detector"), cpu_model("models.colour", "classifier")]
            })
        );
    }

    #[test]
    fn on_the_gpu_the_engine_section_shows_the_one_arena_and_what_each_model_saves() {
        let memory = example_shared_worker("models.yard", ModelRole::Detector);
        let named = vec![("yard".to_string(), info("tensorrt", "yard.engine"))];
        let (engine, _) = engine_section(&config(), &info("tensorrt", "model.engine"), None, named, &memory);
        let section = &engine["model_memory"];
        assert_eq!(section["arena"], serde_json::json!({"arena_bytes": 100, "separate_bytes": 140, "saved_bytes": 40}));
        assert_eq!(
            section["models"][1],
            serde_json::json!({
                "name": "models.yard", "role": "detector", "backend": "tensorrt", "engine": "models.yard.engine",
                "scratch_bytes_per_context": 40, "persistent_bytes_per_context": 4096, "saved_bytes": 40
            })
        );
        assert_eq!(section["models"][0]["saved_bytes"], 0, "the model that sizes the arena saves nothing");
    }

    #[test]
    fn without_named_models_the_engine_section_has_no_models_map_but_still_the_memory() {
        let memory = WorkerMemory {
            workers: 1,
            contexts_per_worker: 1,
            arena: Arena::None(NO_DEVICE_ARENA),
            models: vec![model("model", ModelRole::Detector, None, None)],
        };
        let (engine, _) = engine_section(&config(), &info("cpu", "ssd.onnx"), None, Vec::new(), &memory);
        assert!(engine.get("models").is_none(), "{engine}");
        assert!(engine.get("fallback").is_none(), "{engine}");
        assert_eq!(engine["model_memory"]["models"][0]["name"], "model");
    }
}
