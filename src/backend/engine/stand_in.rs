//! The stand-in toolchain: the engine lifecycle end to end on a machine without TensorRT, for tests.
//!
//! Owns: [`StandInToolchain`], a [`Toolchain`] whose build waits a set time (reporting phases,
//! steps and ticks as TensorRT 10 does, and stopping when cancelled) and whose "engine" is the
//! ONNX model itself (or, `altered`, the model with every float weight halved: an engine that
//! disagrees with its model), run by the CPU engine the config names ([`StandInBackend`], kind
//! `stand-in`); and [`STAND_IN_ENV`], the one switch that selects it. Engines it makes are cached,
//! keyed and checked like TensorRT's, so caches, packs and stores carry them end to end. Must not:
//! be selected by anything but that environment variable, nor quietly: [`StandInSettings::from_env`]
//! says so in a warning at every start.
//!
//! Why an environment variable and not a cargo feature: the black-box tests then run the very
//! binary users install, and a user cannot select the stand-in by a config key or a flag by
//! mistake; its kind `stand-in` shows in telemetry, the page and `/metrics`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cache::sha256_hex;
use super::device_key::DeviceIdentity;
use super::error::EngineError;
use super::progress::Progress;
use super::seam::{BuildInput, BuildOutput, BuildTarget, EngineFile, EngineOrigin, Toolchain};
use crate::backend::cpu::{CpuBackend, EngineChoice};
use crate::backend::error::BackendError;
use crate::backend::traits::{Backend, BackendInfo, InferenceSession, SessionMemory, WorkerSeat};
use crate::frame::SlotMemory;
use crate::model::{DeviceSpec, ModelSpec};
use crate::preprocess::PreprocessSpec;
use crate::protobuf::{Field, Fields};

/// The environment variable that replaces TensorRT by the stand-in, for tests only:
/// `build_s=<seconds>` (how long a build takes; 60 when left out), `until=<path>` (the build ends
/// only once that file exists, so that a test decides when, whatever the machine's load),
/// `altered` (the engine disagrees with its model), `board=<name>` and `version=<text>` (the
/// key's board and library version, as another device or release would have them),
/// comma-separated.
pub const STAND_IN_ENV: &str = "JETSON_DETECTD_STAND_IN_ENGINE";

/// What [`STAND_IN_ENV`] says.
#[derive(Debug, Clone, PartialEq)]
pub struct StandInSettings {
    pub build: Duration,
    pub until: Option<PathBuf>,
    pub altered: bool,
    pub board: String,
    pub version: String,
}

impl Default for StandInSettings {
    fn default() -> Self {
        StandInSettings {
            build: Duration::from_secs(60),
            until: None,
            altered: false,
            board: "stand-in board".into(),
            version: "stand-in 1".into(),
        }
    }
}

impl StandInSettings {
    /// The settings when [`STAND_IN_ENV`] is set (with a warning that says so), `None` when not;
    /// an error names what it cannot read.
    pub fn from_env() -> Result<Option<StandInSettings>, String> {
        let Some(text) = std::env::var_os(STAND_IN_ENV) else { return Ok(None) };
        let text = text.to_str().ok_or_else(|| format!("{STAND_IN_ENV} is not UTF-8"))?;
        let settings = StandInSettings::parse(text)?;
        log::warn!(
            "{STAND_IN_ENV} is set: engines are stand-ins built by waiting {:.1} s and run on the CPU{}; this is for \
             tests, never for a real device",
            settings.build.as_secs_f64(),
            if settings.altered { ", altered to disagree with their model" } else { "" }
        );
        Ok(Some(settings))
    }

    fn parse(text: &str) -> Result<StandInSettings, String> {
        let mut settings = StandInSettings::default();
        for item in text.split(',').map(str::trim).filter(|item| !item.is_empty()) {
            match item.split_once('=') {
                None if item == "altered" => settings.altered = true,
                Some(("build_s", seconds)) => {
                    settings.build = seconds
                        .parse::<f64>()
                        .ok()
                        .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
                        .ok_or_else(|| format!("{STAND_IN_ENV}: build_s = {seconds:?} is not a number of seconds"))?;
                }
                Some(("until", path)) => settings.until = Some(PathBuf::from(path)),
                Some(("board", board)) => settings.board = board.to_owned(),
                Some(("version", version)) => settings.version = version.to_owned(),
                _ => {
                    return Err(format!(
                    "{STAND_IN_ENV}: {item:?} is not one of build_s=<seconds>, until=<path>, altered, board=<name>, \
                     version=<text>"
                ))
                }
            }
        }
        Ok(settings)
    }
}

/// Builds by waiting, runs on the CPU (see the module doc).
pub struct StandInToolchain {
    settings: StandInSettings,
    target: BuildTarget,
    device: DeviceSpec,
}

/// Steps of the stand-in's one build phase: its percentage moves in 5 % steps.
const BUILD_STEPS: u32 = 20;
/// How often a stand-in build looks at its cancel flag and its `until` file.
const TICK_MIN: Duration = Duration::from_millis(10);
const TICK_MAX: Duration = Duration::from_millis(100);

impl StandInToolchain {
    pub fn new(settings: StandInSettings, device: &DeviceSpec) -> StandInToolchain {
        let target = BuildTarget {
            kind: "stand-in",
            version: settings.version.clone(),
            builder: format!("stand-in builder{}", if settings.altered { ", altered" } else { "" }),
            device: DeviceIdentity {
                name: "stand-in GPU".into(),
                compute_capability: (0, 0),
                multiprocessors: 0,
                total_memory_bytes: 0,
                board: settings.board.clone(),
            },
            phases_reported: true,
        };
        StandInToolchain { settings, target, device: device.clone() }
    }
}

impl Toolchain for StandInToolchain {
    fn target(&self) -> &BuildTarget {
        &self.target
    }

    fn build(
        &self,
        input: &BuildInput<'_>,
        progress: &mut dyn FnMut(Progress),
        cancel: &AtomicBool,
    ) -> Result<BuildOutput, EngineError> {
        const PHASE: &str = "Building stand-in engine";
        let started = Instant::now();
        let step = self.settings.build / BUILD_STEPS;
        progress(Progress::PhaseStart { phase: PHASE.into(), parent: None, steps: BUILD_STEPS as i32 });
        for done in 0..BUILD_STEPS {
            let until = started + step * (done + 1);
            let last = done + 1 == BUILD_STEPS;
            let gate = self.settings.until.as_deref().filter(|_| last);
            while Instant::now() < until || gate.is_some_and(|gate| !gate.exists()) {
                if cancel.load(Ordering::SeqCst) {
                    return Err(EngineError::Cancelled);
                }
                std::thread::sleep(until.saturating_duration_since(Instant::now()).clamp(TICK_MIN, TICK_MAX));
                progress(Progress::Tick { elapsed: started.elapsed() });
            }
            progress(Progress::Step { phase: PHASE.into(), step: done as i32 });
        }
        progress(Progress::PhaseFinish { phase: PHASE.into() });
        let engine = if self.settings.altered { altered(&input.onnx.bytes)? } else { input.onnx.bytes.clone() };
        let mut timing_cache = input.timing_cache.to_vec();
        timing_cache.extend_from_slice(format!("stand-in timing for {}\n", input.onnx.digest.sha256).as_bytes());
        Ok(BuildOutput { engine, timing_cache: Some(timing_cache), timing_cache_rejected: None, profiles: 0 })
    }

    fn load(
        &self,
        model: &ModelSpec,
        engine: EngineFile<'_>,
        origin: &EngineOrigin,
    ) -> Result<Arc<dyn Backend>, EngineError> {
        let load = |message: String| EngineError::Load(format!("stand-in engine {}: {message}", engine.path.display()));
        // The CPU engines read the model's file again for each session: the stand-in runs a copy
        // that lives as long as this process (the cache sweeps it after), not the cache's file,
        // which a commit renames.
        let copy = runnable_copy(engine.path);
        crate::sys::files::atomic_write(&copy, engine.bytes).map_err(|e| load(e.to_string()))?;
        let choice = EngineChoice::choose(self.device.cpu_engine, self.device.onnxruntime_library.as_deref())
            .map_err(|e| load(e.to_string()))?;
        let input_name = model.input.name.as_deref();
        let cpu = CpuBackend::open(&copy, model.input.clone(), input_name, self.device.cpu_threads, &choice)
            .map_err(|e| load(e.to_string()))?;
        log::info!("stand-in engine: {origin}, running on {}", choice.engine());
        Ok(Arc::new(StandInBackend { cpu, origin: origin.to_string(), sha256: sha256_hex(engine.bytes) }))
    }
}

/// The file the stand-in runs an engine from: a temp file beside it, named so that the engine
/// cache's sweep removes it once this process is gone.
fn runnable_copy(engine: &Path) -> PathBuf {
    let name = engine.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let name = name.trim_start_matches('.');
    let name = name.split(".staged").next().unwrap_or(name);
    engine.with_file_name(format!(".{name}.stand-in{}{}", crate::sys::files::TEMP_INFIX, std::process::id()))
}

/// `model` with every float weight (initializers stored in `raw_data`) halved, same size and
/// layout: it loads and runs like the model and finds other objects.
fn altered(model: &[u8]) -> Result<Vec<u8>, EngineError> {
    const GRAPH: u64 = 7;
    const INITIALIZER: u64 = 5;
    const DATA_TYPE: u64 = 2;
    const RAW_DATA: u64 = 9;
    const FLOAT: u64 = 1;
    let malformed =
        |e: crate::protobuf::WireError| EngineError::Build(format!("stand-in: the model is malformed: {e}"));
    let mut out = model.to_vec();
    let offset = |slice: &[u8]| slice.as_ptr() as usize - model.as_ptr() as usize;
    for field in Fields::new(model) {
        let Field::Bytes(GRAPH, graph) = field.map_err(malformed)? else { continue };
        for field in Fields::new(graph) {
            let Field::Bytes(INITIALIZER, tensor) = field.map_err(malformed)? else { continue };
            let (mut float, mut raw) = (false, None);
            for field in Fields::new(tensor) {
                match field.map_err(malformed)? {
                    Field::Varint(DATA_TYPE, FLOAT) => float = true,
                    Field::Bytes(RAW_DATA, data) => raw = Some(data),
                    _ => {}
                }
            }
            let Some(raw) = raw.filter(|_| float) else { continue };
            let at = offset(raw);
            for value in out[at..at + raw.len()].chunks_exact_mut(4) {
                let halved = f32::from_le_bytes([value[0], value[1], value[2], value[3]]) * 0.5;
                value.copy_from_slice(&halved.to_le_bytes());
            }
        }
    }
    Ok(out)
}

/// A stand-in engine: the CPU backend under another kind, so that nobody takes it for the CPU
/// serving it replaces (or for TensorRT).
pub struct StandInBackend {
    cpu: CpuBackend,
    origin: String,
    sha256: String,
}

impl Backend for StandInBackend {
    fn info(&self) -> BackendInfo {
        let cpu = self.cpu.info();
        BackendInfo {
            kind: "stand-in",
            model: cpu.model,
            detail: format!("{}, engine sha256 {}…, {}", self.origin, &self.sha256[..12], cpu.detail),
        }
    }

    fn spec(&self) -> &PreprocessSpec {
        self.cpu.spec()
    }

    fn threads(&self) -> Option<usize> {
        self.cpu.threads()
    }

    fn engine(&self) -> Option<String> {
        self.cpu.engine().map(|engine| format!("stand-in on {engine}"))
    }

    fn session_memory(&self) -> SessionMemory {
        self.cpu.session_memory()
    }

    fn new_session(&self) -> Result<Box<dyn InferenceSession>, BackendError> {
        self.cpu.new_session()
    }

    /// Like a GPU engine: one worker, which has every thread.
    fn new_worker_session(&self, _seat: WorkerSeat) -> Result<Box<dyn InferenceSession>, BackendError> {
        self.cpu.new_session()
    }

    fn slot_memory(&self) -> Result<Box<dyn SlotMemory>, BackendError> {
        self.cpu.slot_memory()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_reads_its_build_time_flags_and_names_what_it_cannot_read() {
        assert_eq!(StandInSettings::parse("").expect("empty"), StandInSettings::default());
        let settings =
            StandInSettings::parse("build_s=1.5, altered,board=orin nano,version=10.3.0,until=/tmp/go").expect("valid");
        assert_eq!(settings.build, Duration::from_millis(1500));
        assert_eq!(settings.until.as_deref(), Some(Path::new("/tmp/go")));
        assert!(settings.altered);
        assert_eq!((settings.board.as_str(), settings.version.as_str()), ("orin nano", "10.3.0"));
        for wrong in ["build_s=soon", "build_s=-1", "fast", "gpu=1"] {
            let message = StandInSettings::parse(wrong).expect_err(wrong);
            assert!(message.contains(STAND_IN_ENV), "{message}");
        }
    }

    #[test]
    fn the_altered_model_halves_float_weights_and_keeps_everything_else() {
        use crate::protobuf::encode::{bytes_field, varint_field};
        let weights: Vec<u8> = [1.0f32, -4.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let float = [varint_field(2, 1), bytes_field(9, &weights)].concat();
        let ints = [varint_field(2, 7), bytes_field(9, &[1, 2, 3, 4])].concat();
        let graph = [bytes_field(5, &float), bytes_field(5, &ints)].concat();
        let model = [varint_field(1, 8), bytes_field(7, &graph)].concat();
        let changed = altered(&model).expect("a valid model");
        assert_eq!(changed.len(), model.len());
        let halved: Vec<u8> = [0.5f32, -2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let at = model.windows(weights.len()).position(|w| w == weights.as_slice()).expect("weights");
        assert_eq!(&changed[at..at + 8], halved.as_slice());
        assert_eq!(changed[..at], model[..at]);
        assert_eq!(changed[at + 8..], model[at + 8..], "the int64 tensor is left alone");
        assert!(altered(&[0x3a, 0xff]).is_err(), "a malformed model is an error, not a panic");
    }

    #[test]
    fn the_runnable_copy_is_a_temp_file_the_cache_sweeps() {
        let copy = runnable_copy(Path::new("/c/.model.0123.engine.staged.tmp-7"));
        let name = copy.file_name().expect("a name").to_string_lossy().into_owned();
        assert!(name.starts_with(".model.0123.engine.stand-in.tmp-"), "{name}");
        assert_eq!(copy.parent(), Some(Path::new("/c")));
    }
}
