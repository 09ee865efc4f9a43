//! `jetson-detectd selftest`: proves that a device runs the configured model, in one command.
//!
//! Owns: the sequence of checks (GPU, TensorRT and its plugins, cache directory, clocks, engine
//! build or load with cold/warm build times, execution contexts and their shared scratch memory,
//! every model a worker runs with its device memory ([`models`]), the sample images through the
//! configured backend and the CPU backend with their detections compared, latency back to back and
//! after pauses), each filling in the [`SelftestReport`] (its types and its text for a terminal,
//! [`render_text`], in `report.rs`; JSON for an issue report). Every check says pass, warn, fail or skip with a
//! reason; on a machine without a GPU or TensorRT the GPU checks are skipped, never failed, unless
//! the config demands TensorRT (`backend = "tensorrt"` without a CPU fallback), because then the
//! daemon itself would not start.
//! Must not: publish over MQTT, open cameras, change clocks or power modes, or judge speed (latency
//! is reported; only the jitter between back-to-back and paused runs gets a sentence).

pub mod agreement;
pub mod clocks;
pub mod compare;
pub mod latency;
pub mod models;
mod report;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::backend::engine::chain::unchecked;
use crate::backend::load::{self, BuildProgress};
use crate::backend::{Backend, InferenceSession};
use crate::config::{BackendChoice, Config, Fallback, LimitsConfig, SourceConfig};
use crate::decode::{DecodeParams, Decoder};
use crate::detection::{Detection, Labels};
use crate::frame::FrameSlot;
use crate::infer::step;
use crate::model::{DeviceSpec, ModelSpec};
use crate::source::kinds::images::ImagesConfig;
use crate::source::{image_decode, images};

use agreement::{compare, Agreement, Tolerance};
use clocks::ClockReport;
use latency::{jitter_verdict, summarise};

pub use report::{render_text, Check, ContextReport, EngineReport, ImageResult, LatencyReport, SelftestReport, Status};

/// What to time, and where the images come from.
#[derive(Debug, Clone, PartialEq)]
pub struct SelftestOptions {
    /// Inferences timed back to back.
    pub runs: usize,
    /// Inferences timed with [`pause`](Self::pause) before each.
    pub paused_runs: usize,
    pub pause: Duration,
    /// Image file or directory; default: the first `images` camera's, else the bundled samples.
    pub images: Option<PathBuf>,
    /// Time a cold and a warm engine build even when the engine is cached.
    pub rebuild: bool,
}

impl Default for SelftestOptions {
    fn default() -> Self {
        SelftestOptions { runs: 200, paused_runs: 50, pause: Duration::from_millis(200), images: None, rebuild: false }
    }
}

/// Runs every check. Never fails: each problem is a failed check in the report. `progress` sees
/// engine-build events (a build takes minutes on a Jetson).
pub fn run(config: &Config, options: &SelftestOptions, progress: &mut dyn FnMut(BuildProgress)) -> SelftestReport {
    let mut report = SelftestReport {
        version: env!("CARGO_PKG_VERSION"),
        arch: std::env::consts::ARCH,
        config: config.origin.to_string(),
        passed: false,
        checks: Vec::new(),
        backend: None,
        gpu: crate::backend::load::gpu_section(config.device.gpu as usize),
        tensorrt: None,
        clocks: ClockReport::read(&config.telemetry.sysfs_root),
        engine: None,
        contexts: None,
        models: None,
        images: Vec::new(),
        compare: None,
        latency: None,
    };
    let gpu_available = report.gpu["available"] == Value::Bool(true);
    let gpu_detail = describe_gpu(&report.gpu);
    report.check("gpu", if gpu_available { Status::Pass } else { Status::Skip }, gpu_detail);

    let tensorrt_usable = check_tensorrt(config, gpu_available, &mut report);
    check_cache_dir(config, tensorrt_usable, &mut report);
    check_clocks(&mut report);

    let images = image_source(config, options);
    let backend_config = sized_for_images(config, &images);
    let backend = load_configured_backend(&backend_config, options, tensorrt_usable, progress, &mut report);
    let uses_gpu = backend.as_ref().is_some_and(|b| b.info().kind != "cpu");
    let mut sessions = match &backend {
        Some(backend) => open_sessions(config, backend.as_ref(), uses_gpu, &mut report),
        None => Vec::new(),
    };
    match &backend {
        Some(backend) => models::check_models(&backend_config, backend, progress, &mut report),
        None => report.check("models", Status::Skip, "the configured model did not load"),
    }
    let timed_image =
        run_images(&backend_config, &images, backend.as_deref(), sessions.first_mut(), uses_gpu, &mut report);
    if let Some(engine) = backend.as_deref().filter(|_| uses_gpu) {
        check_engine_agreement(&backend_config, engine, &images, &mut report);
    }
    // Latency with one context: the others would only hold memory meanwhile.
    sessions.truncate(1);
    let (timed_backend, timed_session) = (backend.as_deref(), sessions.first_mut());
    time_inferences(options, &config.limits, timed_backend, timed_session, timed_image.as_deref(), &mut report);
    report.passed = report.checks.iter().all(|check| check.status != Status::Fail);
    report
}

fn describe_gpu(gpu: &Value) -> String {
    match gpu.get("device") {
        Some(device) => format!(
            "{} (compute {}), {}, {} SMs, {:.1} GiB, driver CUDA {}",
            device["name"].as_str().unwrap_or("?"),
            device["compute_capability"].as_str().unwrap_or("?"),
            if device["integrated"] == Value::Bool(true) { "integrated" } else { "discrete" },
            device["multiprocessors"],
            device["total_memory_bytes"].as_f64().unwrap_or(0.0) / f64::from(1u32 << 30),
            device["driver_version"].as_str().unwrap_or("?"),
        ),
        None => gpu["summary"].as_str().unwrap_or("no GPU").to_owned(),
    }
}

/// Whether the config leaves the daemon no way around TensorRT.
fn tensorrt_required(config: &Config) -> bool {
    config.device.backend == BackendChoice::Tensorrt && config.device.fallback == Fallback::None
}

/// The `tensorrt` and `plugins` checks; returns whether the TensorRT backend can be used.
#[cfg(feature = "tensorrt")]
fn check_tensorrt(config: &Config, gpu_available: bool, report: &mut SelftestReport) -> bool {
    if config.device.backend == BackendChoice::Cpu {
        report.check("tensorrt", Status::Skip, "device.backend = \"cpu\"");
        report.check("plugins", Status::Skip, "device.backend = \"cpu\"");
        return false;
    }
    let unavailable = if tensorrt_required(config) { Status::Fail } else { Status::Skip };
    let probe = crate::backend::trt::probe();
    report.tensorrt = serde_json::to_value(&probe).ok();
    if probe.available {
        let version = probe.library_version.as_deref().unwrap_or("?");
        report.check(
            "tensorrt",
            Status::Pass,
            format!("TensorRT {version} from {} (this binary: headers {})", probe.library, probe.compiled_against),
        );
    } else if probe.library_version.is_some() {
        // Installed but older than the headers: a real problem even where the CPU could stand in.
        let status = if unavailable == Status::Fail { Status::Fail } else { Status::Warn };
        report.check("tensorrt", status, probe.summary.clone());
    } else {
        report.check("tensorrt", unavailable, probe.summary.clone());
    }
    match &probe.plugins {
        Some(plugins) if plugins.loaded => report.check("plugins", Status::Pass, format!("{} loaded", plugins.library)),
        Some(plugins) => {
            // end2end exports carry EfficientNMS: without the plugin library they cannot run; on
            // 8.x no ONNX model can be built without it (the parser needs the library).
            let major = crate::backend::trt::header_version().major;
            let builds_from_onnx = config.model.engine.is_none();
            let breaks_all = major < 10 && builds_from_onnx;
            let status = if config.model.decoder == crate::config::DecoderKind::End2end || breaks_all {
                Status::Fail
            } else {
                Status::Warn
            };
            let why = plugins.detail.as_deref().unwrap_or("not loaded");
            report.check("plugins", status, crate::backend::trt::runtime::missing_plugins_warning(major, why));
        }
        None => report.check("plugins", Status::Skip, "TensorRT is not available"),
    }
    probe.available && gpu_available
}

#[cfg(not(feature = "tensorrt"))]
fn check_tensorrt(config: &Config, _gpu_available: bool, report: &mut SelftestReport) -> bool {
    let status = if tensorrt_required(config) { Status::Fail } else { Status::Skip };
    let why = "this binary was built without the `tensorrt` feature";
    report.check("tensorrt", status, why);
    report.check("plugins", Status::Skip, why);
    false
}

/// The cache directory must take files (engines, timing cache, the compiled kernel). Only the GPU
/// path writes there: without TensorRT the check neither creates nor touches it.
fn check_cache_dir(config: &Config, tensorrt_usable: bool, report: &mut SelftestReport) {
    let dir = &config.engine.cache_dir;
    if !tensorrt_usable {
        let detail =
            format!("{}: not needed, no TensorRT engine runs here (the CPU backend caches nothing)", dir.display());
        report.check("cache_dir", Status::Skip, detail);
        return;
    }
    let probe = dir.join(format!(".selftest-{}", std::process::id()));
    let outcome = std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create it: {e}"))
        .and_then(|()| crate::sys::files::atomic_write(&probe, b"selftest").map_err(|e| e.to_string()))
        .and_then(|()| std::fs::remove_file(&probe).map_err(|e| format!("cannot remove {}: {e}", probe.display())));
    match outcome {
        Ok(()) => report.check("cache_dir", Status::Pass, format!("{} is writable", dir.display())),
        Err(why) => report.check("cache_dir", Status::Fail, format!("{}: {why}", dir.display())),
    }
}

fn check_clocks(report: &mut SelftestReport) {
    let clocks = &report.clocks;
    let (status, detail) = if clocks.is_empty() {
        (Status::Skip, "no Jetson GPU clock or nvpmodel files here".to_owned())
    } else if let Some(warning) = &clocks.warning {
        (Status::Warn, format!("{}; {warning}", clocks.summary()))
    } else {
        (Status::Pass, clocks.summary())
    };
    report.check("clocks", status, detail);
}

/// Builds or loads the engine (TensorRT) and loads the configured backend the way `run` does.
fn load_configured_backend(
    config: &Config,
    options: &SelftestOptions,
    tensorrt_usable: bool,
    progress: &mut dyn FnMut(BuildProgress),
    report: &mut SelftestReport,
) -> Option<Arc<dyn Backend>> {
    let mut engine = EngineReport::default();
    let device = DeviceSpec::from_config(config);
    let model = ModelSpec::from_config(config);
    if let Some(model) = model.as_ref().ok().filter(|_| tensorrt_usable) {
        prepare_engine(model, &device, options, &mut engine, progress, report);
    }
    // With `auto`, ask for TensorRT without a fallback first: `run` would fall back to the CPU
    // quietly, but here the reason TensorRT did not load is the finding.
    let mut fell_back = None;
    let started = Instant::now();
    let backend = model.map_err(|e| e.to_string()).and_then(|model| {
        let loaded = if tensorrt_usable && device.backend == BackendChoice::Auto {
            let strict = DeviceSpec { backend: BackendChoice::Tensorrt, fallback: Fallback::None, ..device.clone() };
            load::load_backend(&model, &strict, &mut *progress, &mut unchecked).or_else(|error| {
                fell_back = Some(error.to_string());
                let cpu = DeviceSpec { backend: BackendChoice::Cpu, ..device.clone() };
                load::load_backend(&model, &cpu, &mut *progress, &mut unchecked)
            })
        } else {
            load::load_backend(&model, &device, &mut *progress, &mut unchecked)
        };
        loaded.map_err(|e| e.to_string())
    });
    let seconds = started.elapsed().as_secs_f64();
    match backend {
        Ok(backend) => {
            let info = backend.info();
            report.check("backend", Status::Pass, format!("{}: {}", info.kind, info.detail));
            if let Some(why) = fell_back {
                // TensorRT and a GPU are here, yet `run` would use the CPU.
                report.check(
                    "engine",
                    Status::Warn,
                    format!("TensorRT is installed but its backend did not load: {why}"),
                );
            } else if info.kind == "cpu" {
                report.check("engine", Status::Skip, "the CPU backend runs the model: no TensorRT engine");
            } else {
                engine.load_seconds = Some(round3(seconds));
                report.check("engine", Status::Pass, describe_engine(&engine));
                report.engine = Some(engine);
            }
            report.backend = Some(info);
            Some(backend)
        }
        Err(error) => {
            report.check("backend", Status::Fail, error.clone());
            report.check("engine", if tensorrt_usable { Status::Fail } else { Status::Skip }, error);
            None
        }
    }
}

fn round3(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

fn describe_engine(engine: &EngineReport) -> String {
    let mut parts = Vec::new();
    if let Some(path) = &engine.path {
        parts.push(format!("{path} ({})", if engine.cached_before { "was cached" } else { "built now" }));
    }
    if let Some(seconds) = engine.load_seconds {
        parts.push(format!("loaded in {seconds:.2} s"));
    }
    match (engine.cold_build_seconds, engine.warm_build_seconds, engine.warm_to_cold_ratio) {
        (Some(cold), Some(warm), Some(ratio)) => {
            parts.push(format!("cold build {cold:.1} s, warm build (timing cache) {warm:.1} s, ratio {ratio:.2}"))
        }
        _ => parts.push("build times not measured (cached; `--rebuild` measures them)".into()),
    }
    parts.join("; ")
}

/// Times a cold and a warm build when the engine is not cached yet (or `--rebuild`).
fn prepare_engine(
    model: &ModelSpec,
    on: &DeviceSpec,
    options: &SelftestOptions,
    engine: &mut EngineReport,
    progress: &mut dyn FnMut(BuildProgress),
    report: &mut SelftestReport,
) {
    let path = || load::expected_engine_path(model, on).map(|p| p.display().to_string());
    engine.path = path();
    engine.cached_before = engine.path.as_ref().is_some_and(|p| Path::new(p).is_file());
    if model.files.engine().is_some() || (engine.cached_before && !options.rebuild) {
        return;
    }
    match load::time_builds(model, on, progress) {
        Ok(times) => {
            // A model with a static input is cached under the key without profiles.
            engine.path = path();
            engine.cold_build_seconds = Some(round3(times.cold_seconds));
            engine.warm_build_seconds = Some(round3(times.warm_seconds));
            engine.warm_to_cold_ratio =
                (times.cold_seconds > 0.0).then(|| round3(times.warm_seconds / times.cold_seconds));
        }
        Err(error) => report.check("engine_build", Status::Fail, error.to_string()),
    }
}

/// One session per camera, reporting their shared scratch memory on the GPU. The daemon creates
/// one per GPU (its one inference worker serves every camera); one per camera here proves on the
/// device that contexts of one thread lease one arena. The first one serves the images and the
/// timing.
fn open_sessions(
    config: &Config,
    backend: &dyn Backend,
    uses_gpu: bool,
    report: &mut SelftestReport,
) -> Vec<Box<dyn InferenceSession>> {
    let (wanted, capped) = sessions_wanted(config.cameras.len(), uses_gpu, backend.max_sessions());
    let mut sessions = Vec::with_capacity(wanted);
    for _ in 0..wanted {
        match backend.new_session() {
            Ok(session) => sessions.push(session),
            Err(error) => {
                report.check("contexts", Status::Fail, format!("context {} of {wanted}: {error}", sessions.len() + 1));
                return sessions;
            }
        }
    }
    if !uses_gpu {
        report.check("contexts", Status::Skip, "the CPU backend has no GPU execution contexts");
        return sessions;
    }
    let contexts = context_report(sessions.len(), backend.session_memory().persistent_bytes);
    report.check(
        "contexts",
        Status::Pass,
        format!(
            "{} context(s) with user-managed memory{}, {} bytes of scratch and {} bytes of persistent memory each, one \
             shared arena of {} bytes (saves {} bytes against one allocation per context)",
            contexts.contexts,
            if capped { " (one per camera, capped at the engine's optimisation profiles)" } else { "" },
            contexts.scratch_bytes_per_context,
            contexts.persistent_bytes_per_context,
            contexts.arena_bytes,
            contexts.saved_bytes
        ),
    );
    report.contexts = Some(contexts);
    sessions
}

/// Contexts to open: one per camera on the GPU, at most what the backend allows at once (a
/// dynamic-input engine before TensorRT 8.6: one per optimisation profile), and whether that cap
/// applied.
fn sessions_wanted(cameras: usize, uses_gpu: bool, max_sessions: Option<usize>) -> (usize, bool) {
    let per_camera = if uses_gpu { cameras.max(1) } else { 1 };
    match max_sessions {
        Some(cap) if cap.max(1) < per_camera => (cap.max(1), true),
        _ => (per_camera, false),
    }
}

#[cfg(feature = "tensorrt")]
fn context_report(contexts: usize, persistent_bytes_per_context: u64) -> ContextReport {
    let plan = crate::backend::trt::arena::arena_report();
    ContextReport {
        contexts,
        scratch_bytes_per_context: plan.separate_bytes / contexts.max(1) as u64,
        persistent_bytes_per_context,
        arena_bytes: plan.arena_bytes,
        saved_bytes: plan.saved_bytes,
    }
}

#[cfg(not(feature = "tensorrt"))]
fn context_report(contexts: usize, persistent_bytes_per_context: u64) -> ContextReport {
    ContextReport { contexts, persistent_bytes_per_context, ..ContextReport::default() }
}

/// The images to run: `--images`, else the first `images` camera's path, else the bundled samples.
pub fn image_source(config: &Config, options: &SelftestOptions) -> PathBuf {
    options
        .images
        .clone()
        .or_else(|| {
            config.cameras.iter().find_map(|camera| match &camera.source {
                SourceConfig::Images(images) => Some(images.path.clone()),
                _ => None,
            })
        })
        .unwrap_or_else(|| crate::config::data_dir().join("models/samples"))
}

/// `config` with its first camera reading `images`: the GPU backend sizes its frame staging
/// buffer for the configured cameras, which may deliver smaller frames than the sample images. The
/// number of cameras, and so the engine, stays the same.
fn sized_for_images(config: &Config, images: &Path) -> Config {
    let mut sized = config.clone();
    if let Some(camera) = sized.cameras.first_mut() {
        camera.source = SourceConfig::Images(ImagesConfig::once(images.to_path_buf()));
    }
    sized
}

/// Decoding state shared by both backends' runs.
struct Detector {
    decoder: Decoder,
    labels: Labels,
    threshold: f32,
}

impl Detector {
    fn detect(
        &mut self,
        backend: &dyn Backend,
        session: &mut dyn InferenceSession,
        slot: &FrameSlot,
    ) -> Result<Vec<Detection>, String> {
        let mut detections = Vec::new();
        step::process(session, &mut self.decoder, backend.spec(), slot, &mut detections).map_err(|e| e.to_string())?;
        Ok(detections)
    }

    fn found(&self, detections: &[Detection]) -> String {
        let found: Vec<String> =
            detections.iter().map(|d| format!("{} {:.2}", self.labels.name(d.class_id), d.score)).collect();
        if found.is_empty() {
            "nothing".into()
        } else {
            found.join(", ")
        }
    }
}

/// The CPU backend, to compare the configured GPU backend with.
fn load_cpu_reference(config: &Config) -> Result<Arc<dyn Backend>, String> {
    let model = ModelSpec::from_config(config).map_err(|e| e.to_string())?;
    let cpu = DeviceSpec { backend: BackendChoice::Cpu, ..DeviceSpec::from_config(config) };
    load::load_backend(&model, &cpu, |_| {}, &mut unchecked).map_err(|e| e.to_string())
}

/// The engine against the CPU backend on the images, per label, judged by `engine.min_agreement`
/// as `run` judges a new engine.
fn check_engine_agreement(config: &Config, engine: &dyn Backend, images: &Path, report: &mut SelftestReport) {
    let compared = load_cpu_reference(config)
        .and_then(|reference| compare::compare_on(config, reference.as_ref(), engine, images));
    match compared {
        Ok(compared) => {
            let status = if compared.passed { Status::Pass } else { Status::Fail };
            report.check("engine_agreement", status, format!("{}: {}", compared.agreement.summary(), compared.verdict));
            report.compare = Some(compared);
        }
        Err(error) => report.check("engine_agreement", Status::Fail, error),
    }
}

/// Runs every image through the configured backend (and the CPU backend, to compare). Returns
/// the first image that ran, for the timing.
fn run_images(
    config: &Config,
    source: &Path,
    backend: Option<&dyn Backend>,
    session: Option<&mut Box<dyn InferenceSession>>,
    uses_gpu: bool,
    report: &mut SelftestReport,
) -> Option<PathBuf> {
    let (Some(backend), Some(session)) = (backend, session) else {
        report.check("inference", Status::Fail, "no backend to run the images on");
        report.check("agreement", Status::Skip, "no backend to compare");
        return None;
    };
    let detector = ModelSpec::from_config(config).map_err(|e| e.to_string()).and_then(|model| {
        let labels = Labels::load(&model.labels).map_err(|e| e.to_string())?;
        let params = DecodeParams::new(&model, &config.model, &labels).map_err(|e| format!("model.classes: {e}"))?;
        Ok(Detector { threshold: params.score_threshold, decoder: Decoder::new(params), labels })
    });
    let files = images::list_images(source).map_err(|e| e.to_string());
    let (mut detector, files) = match (detector, files) {
        (Ok(detector), Ok(files)) => (detector, files),
        (Err(why), _) | (_, Err(why)) => {
            report.check("inference", Status::Fail, why);
            report.check("agreement", Status::Skip, "no images ran");
            return None;
        }
    };
    let reference = if uses_gpu { Some(load_cpu_reference(config)) } else { None };
    let mut cpu = match &reference {
        Some(Ok(cpu)) => match cpu.new_session() {
            Ok(session) => Some((cpu.as_ref(), session)),
            Err(error) => {
                report.check("agreement", Status::Fail, format!("CPU backend: {error}"));
                None
            }
        },
        Some(Err(error)) => {
            report.check("agreement", Status::Fail, format!("CPU backend: {error}"));
            None
        }
        None => None,
    };
    let mut slot = match backend.slot_memory() {
        Ok(memory) => FrameSlot::new(memory),
        Err(error) => {
            report.check("inference", Status::Fail, format!("frame memory: {error}"));
            return None;
        }
    };
    let tolerance = Tolerance::default();
    let mut first_ran = None;
    for file in &files {
        let name = file.file_name().map_or_else(|| file.display().to_string(), |n| n.to_string_lossy().into_owned());
        let mut result = ImageResult {
            file: name,
            detections: 0,
            cpu_detections: None,
            agreement: None,
            agree: None,
            found: String::new(),
            problem: None,
        };
        let detected = image_decode::decode_file(file, &config.limits, &mut slot)
            .map_err(|e| format!("cannot read the image: {e}"))
            .and_then(|_| detector.detect(backend, session.as_mut(), &slot));
        match detected {
            Ok(detections) => {
                first_ran.get_or_insert_with(|| file.clone());
                result.detections = detections.len();
                result.found = detector.found(&detections);
                if let Some((cpu_backend, cpu_session)) = cpu.as_mut() {
                    match detector.detect(*cpu_backend, cpu_session.as_mut(), &slot) {
                        Ok(reference) => {
                            let agreement = compare(&reference, &detections, detector.threshold, tolerance);
                            result.cpu_detections = Some(reference.len());
                            result.agree = Some(agreement.agrees());
                            if !agreement.agrees() {
                                result.problem = Some(disagreement(&detector, &reference, &detections, &agreement));
                            }
                            result.agreement = Some(agreement);
                        }
                        Err(error) => result.problem = Some(format!("CPU backend: {error}")),
                    }
                }
            }
            Err(error) => result.problem = Some(error),
        }
        report.images.push(result);
    }
    summarise_images(backend, uses_gpu, cpu.is_some(), report);
    first_ran
}

fn disagreement(detector: &Detector, reference: &[Detection], found: &[Detection], agreement: &Agreement) -> String {
    let pick = |list: &[Detection], indices: &[usize]| -> Vec<Detection> {
        indices.iter().filter_map(|i| list.get(*i).cloned()).collect()
    };
    let mut parts = Vec::new();
    if !agreement.missing.is_empty() {
        parts.push(format!("only the CPU found {}", detector.found(&pick(reference, &agreement.missing))));
    }
    if !agreement.extra.is_empty() {
        parts.push(format!("only the GPU found {}", detector.found(&pick(found, &agreement.extra))));
    }
    parts.join("; ")
}

fn summarise_images(backend: &dyn Backend, uses_gpu: bool, compared: bool, report: &mut SelftestReport) {
    let kind = backend.info().kind;
    let failed: Vec<String> = report
        .images
        .iter()
        .filter(|image| image.agree.is_none() && image.problem.is_some())
        .map(|image| format!("{}: {}", image.file, image.problem.as_deref().unwrap_or("")))
        .collect();
    let total: usize = report.images.iter().map(|image| image.detections).sum();
    if failed.is_empty() {
        report.check(
            "inference",
            Status::Pass,
            format!("{} image(s) on the {kind} backend, {total} detection(s)", report.images.len()),
        );
    } else {
        report.check("inference", Status::Fail, failed.join("; "));
    }
    if !uses_gpu {
        report.check("agreement", Status::Skip, "the configured backend is the CPU backend: nothing to compare with");
        return;
    }
    if !compared {
        return;
    }
    let compared: Vec<&ImageResult> = report.images.iter().filter(|image| image.agree.is_some()).collect();
    let disagreeing: Vec<String> = compared
        .iter()
        .filter(|image| image.agree == Some(false))
        .map(|image| format!("{}: {}", image.file, image.problem.as_deref().unwrap_or("")))
        .collect();
    let tolerance = Tolerance::default();
    if disagreeing.is_empty() && !compared.is_empty() {
        report.check(
            "agreement",
            Status::Pass,
            format!(
                "{kind} and CPU detections agree on {} image(s) (same labels, IoU >= {}, |score difference| <= {})",
                compared.len(),
                tolerance.min_iou,
                tolerance.max_score_delta
            ),
        );
    } else if compared.is_empty() {
        report.check("agreement", Status::Fail, "no image could be compared");
    } else {
        report.check("agreement", Status::Fail, disagreeing.join("; "));
    }
}

/// Times `runs` inferences back to back and `paused_runs` after a pause each, on `image` (decoded
/// within `limits`).
fn time_inferences(
    options: &SelftestOptions,
    limits: &LimitsConfig,
    backend: Option<&dyn Backend>,
    session: Option<&mut Box<dyn InferenceSession>>,
    image: Option<&Path>,
    report: &mut SelftestReport,
) {
    let (Some(backend), Some(session), Some(image)) = (backend, session, image) else {
        report.check("latency", Status::Skip, "no image ran on the configured backend");
        return;
    };
    if options.runs == 0 && options.paused_runs == 0 {
        report.check("latency", Status::Skip, "--runs 0 --paused-runs 0");
        return;
    }
    let timed = (|| -> Result<(Vec<Duration>, Vec<Duration>), String> {
        let mut slot = FrameSlot::new(backend.slot_memory().map_err(|e| e.to_string())?);
        image_decode::decode_file(image, limits, &mut slot).map_err(|e| e.to_string())?;
        let mut time_one = || -> Result<Duration, String> {
            let started = Instant::now();
            session.run(&slot).map_err(|e| e.to_string())?;
            Ok(started.elapsed())
        };
        let back_to_back = (0..options.runs).map(|_| time_one()).collect::<Result<Vec<_>, _>>()?;
        let paused = (0..options.paused_runs)
            .map(|_| {
                std::thread::sleep(options.pause);
                time_one()
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((back_to_back, paused))
    })();
    let (back_to_back, paused) = match timed {
        Ok(samples) => samples,
        Err(error) => {
            report.check("latency", Status::Fail, error);
            return;
        }
    };
    let back_to_back = summarise(&back_to_back);
    let paused = summarise(&paused);
    let verdict = back_to_back.as_ref().zip(paused.as_ref()).and_then(|(b, p)| jitter_verdict(b, p, options.pause));
    let pause_ms = options.pause.as_millis() as u64;
    let mut detail = Vec::new();
    if let Some(b) = &back_to_back {
        detail.push(format!("back to back: {} runs, p50 {:.2} ms, p99 {:.2} ms", b.runs, b.p50_ms, b.p99_ms));
    }
    if let Some(p) = &paused {
        detail.push(format!("{pause_ms} ms apart: {} runs, p50 {:.2} ms, p99 {:.2} ms", p.runs, p.p50_ms, p.p99_ms));
    }
    let status = if verdict.is_some() { Status::Warn } else { Status::Pass };
    report.check("latency", status, detail.join("; "));
    report.latency = Some(LatencyReport {
        backend: backend.info().kind,
        image: image.file_name().map_or_else(|| image.display().to_string(), |n| n.to_string_lossy().into_owned()),
        back_to_back,
        paused,
        pause_ms,
        verdict,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensorrt_is_required_only_without_a_fallback() {
        let mut config = Config::embedded_default().expect("default");
        assert!(!tensorrt_required(&config), "auto falls back to the CPU");
        config.device.backend = BackendChoice::Tensorrt;
        assert!(tensorrt_required(&config));
        config.device.fallback = Fallback::Cpu;
        assert!(!tensorrt_required(&config));
    }

    #[test]
    fn contexts_are_one_per_camera_capped_at_what_the_engine_allows() {
        assert_eq!(sessions_wanted(3, true, None), (3, false));
        assert_eq!(sessions_wanted(3, true, Some(1)), (1, true), "one profile before 8.6: one context");
        assert_eq!(sessions_wanted(2, true, Some(4)), (2, false));
        assert_eq!(sessions_wanted(3, false, Some(1)), (1, false), "the CPU backend opens one");
        assert_eq!(sessions_wanted(0, true, None), (1, false));
    }
}
