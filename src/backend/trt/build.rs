//! Engine acquisition: user-supplied engine, else the engine cache, else a build (with the timing
//! cache) that is saved back atomically.
//!
//! Owns: turning a [`ModelSpec`] into [`BuildOptions`] / [`EngineIdentity`] (the device identity,
//! the builder fingerprint, one optimisation profile per concurrently running context), the decision
//! to rebuild (always logged with its [`MissReason`]), holding the cache directory's build lock
//! around build-and-save (waiting, with progress, for another process's build and then looking
//! again), running the build on a helper thread while progress and ticks are reported on the
//! caller's thread, [`build_engine`] for `jetson-detectd build-engine` and [`time_builds`] for
//! `selftest`. Must not: create execution contexts or allocate device memory.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::CudaContext;

use super::device_key::{board_identity, read_device_tree_model, DeviceIdentity};
use super::error::TrtError;
use super::expected_model::ExpectedModel;
use super::ffi;
use super::progress::Progress;
use super::runtime::{header_version, BuildEvent, BuildOutput, BuildRequest, Engine, TrtRuntime};
use super::version::TrtVersion;
use crate::backend::trt::engine_cache::{
    load_prebuilt_engine, precision_name, sha256_hex, BuildLock, BuildOptions, EngineCache, EngineIdentity,
    EngineLookup, InputProfiles, MissReason, ModelInput, ShapeProfile,
};
use crate::config::Precision;
use crate::model::{DeviceSpec, ModelSpec};

/// How often a running build reports elapsed time.
const TICK: Duration = Duration::from_secs(1);

/// What `build-engine` produced (or found up to date).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BuiltEngine {
    pub engine_path: PathBuf,
    /// Absent when TensorRT returned no timing cache.
    pub timing_cache_path: Option<PathBuf>,
    pub key: String,
    pub tensorrt_version: String,
    /// True when a valid cached engine already existed and nothing was built.
    pub up_to_date: bool,
    pub build_seconds: f64,
}

/// Where a loaded engine came from (for logs, probe and telemetry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineSource {
    Prebuilt(PathBuf),
    Cached(PathBuf),
    Built { path: PathBuf, reason: String },
}

impl std::fmt::Display for EngineSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineSource::Prebuilt(path) => write!(f, "prebuilt engine {}", path.display()),
            EngineSource::Cached(path) => write!(f, "cached engine {}", path.display()),
            EngineSource::Built { path, reason } => write!(f, "engine built into {} ({reason})", path.display()),
        }
    }
}

/// What identifies the GPU in the cache key: name, compute capability, SM count, memory, and the
/// board (`/proc/device-tree/model` on a Jetson, else the GPU's UUID).
pub fn device_identity(ordinal: u32) -> Result<(Arc<CudaContext>, DeviceIdentity), TrtError> {
    // SAFETY: only probes whether libcuda can be dlopened; cudarc panics on first use otherwise.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(TrtError::NoGpu("libcuda (the NVIDIA driver) is not installed".into()));
    }
    let context = CudaContext::new(ordinal as usize).map_err(|e| TrtError::NoGpu(format!("GPU {ordinal}: {e}")))?;
    let cuda = |e: cudarc::driver::DriverError| TrtError::Cuda(e.to_string());
    let name = context.name().map_err(cuda)?;
    let (major, minor) = context.compute_capability().map_err(cuda)?;
    let multiprocessors =
        context.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).map_err(cuda)?;
    let total_memory_bytes = context.total_mem().map_err(cuda)? as u64;
    // c_char is i8 or u8 depending on the target; to_ne_bytes reads either as a byte.
    let uuid = context.uuid().map_err(cuda)?.bytes.map(|b| b.to_ne_bytes()[0]);
    let device = DeviceIdentity {
        name,
        compute_capability: (major.max(0) as u32, minor.max(0) as u32),
        multiprocessors: multiprocessors.max(0) as u32,
        total_memory_bytes,
        board: board_identity(read_device_tree_model(Path::new("/")).as_deref(), &uuid),
    };
    Ok((context, device))
}

/// The shim's source, compiled into this binary: its hash identifies the builder in the cache key.
const SHIM_SOURCE: &[u8] = include_bytes!("shim.cpp");

/// What builds engines in this binary: the shim's source hash and the TensorRT headers it was
/// compiled against. A change to either can change the engine a build makes without any other key
/// field changing, so both are in the key, and no version number has to be bumped by hand.
pub fn builder_fingerprint() -> String {
    let shim = sha256_hex(SHIM_SOURCE);
    format!("shim {}, TensorRT headers {}", &shim[..12], header_version())
}

/// Execution contexts of one engine that can run at the same time: one, because one inference
/// worker per GPU serves every camera (`crate::infer::scheduler`); the one-shot commands use one too.
pub fn concurrent_contexts() -> u32 {
    1
}

/// The input shapes the engine is built for: the model's input, with a batch of
/// 1..=`engine.max_batch`, tuned (opt) for a full batch. Nothing here depends on the number of
/// cameras: the profile is in the engine's cache key, and adding a camera must not rebuild an
/// engine (minutes on a Jetson). The builder applies a range only to the dimensions the model
/// leaves open; a model with a fixed batch of 1 keeps it. On a DLA core (`engine.dla_core`) the
/// batch is pinned to 1 (min = opt = max): DLA takes static shapes only, and TensorRT would
/// otherwise quietly build the whole network for the GPU.
pub fn input_profile(model: &ModelSpec) -> ShapeProfile {
    let shape: Vec<i64> = model.input.shape().iter().map(|d| *d as i64).collect();
    let input = model.input.name.clone().unwrap_or_default();
    let mut profile = ShapeProfile::fixed(input, &shape);
    if model.engine.dla_core.is_none() {
        let max_batch = i64::try_from(model.engine.max_batch.get()).unwrap_or(1);
        profile.opt[0] = max_batch;
        profile.max[0] = max_batch;
    }
    profile
}

/// Says so when a DLA core is asked for with batches: the DLA engine takes one frame at a time.
pub fn dla_batch_warning(model: &ModelSpec) -> Option<String> {
    let max_batch = model.engine.max_batch.get();
    (model.engine.dla_core.is_some() && max_batch > 1).then(|| {
        format!(
            "engine.dla_core is set: DLA runs static shapes only, so the engine takes one frame per inference \
             (engine.max_batch = {max_batch} applies to GPU engines)"
        )
    })
}

/// The builder options `model`'s engine options ask for. The input profile ([`input_profile`]) is
/// added once per context that can run at the same time ([`concurrent_contexts`]); it only matters
/// for models with dynamic input dimensions.
pub fn build_options(model: &ModelSpec) -> BuildOptions {
    BuildOptions {
        builder: builder_fingerprint(),
        precision: model.engine.precision,
        workspace_bytes: model.engine.workspace_bytes,
        dla_core: model.engine.dla_core,
        optimization_level: model.engine.optimization_level,
        input_profiles: Some(InputProfiles { shape: input_profile(model), count: concurrent_contexts() }),
    }
}

/// Explains why a precision cannot be honoured by this TensorRT, if it cannot.
pub fn check_precision(precision: Precision, tensorrt_major: i32) -> Result<(), TrtError> {
    if tensorrt_major >= 11 && precision != Precision::Fp32 {
        return Err(TrtError::Config(format!(
            "engine.precision = \"{}\": TensorRT {tensorrt_major} builds strongly typed networks, so precision \
             comes from the ONNX model itself (export it in FP16, or with Q/DQ nodes for INT8) and cannot be \
             chosen at build time; set engine.precision = \"fp32\" and use an FP16 or INT8 model",
            precision_name(precision)
        )));
    }
    Ok(())
}

/// Compares the model's fixed input dimensions with `model.input` before a build: a mismatch was
/// found only after minutes of building, when the engine's input was checked. The batch
/// dimension is the profile's; symbolic dimensions fit anything. A model the walk cannot read is
/// left to TensorRT's parser, which says more.
pub fn check_model_input(spec: &ModelSpec, model: &[u8], path: &Path) -> Result<(), TrtError> {
    let Ok(inputs) = super::onnx_external_data::graph_inputs(model) else { return Ok(()) };
    let input = match &spec.input.name {
        Some(name) => inputs.iter().find(|input| &input.name == name),
        None if inputs.len() == 1 => inputs.first(),
        None => None,
    };
    let Some(input) = input else { return Ok(()) };
    let spec = &spec.input;
    let wanted: Vec<i64> = spec.shape().iter().map(|d| *d as i64).collect();
    let fits = input.dims.len() == wanted.len()
        && input.dims.iter().zip(&wanted).skip(1).all(|(dim, want)| dim.is_none_or(|dim| dim == *want));
    if fits {
        return Ok(());
    }
    let dims: Vec<String> = input.dims.iter().map(|d| d.map_or("?".into(), |d| d.to_string())).collect();
    Err(TrtError::Config(format!(
        "model.input: {}'s input {:?} is [{}], but model.input asks for {:?} ({}x{} {:?}); nothing was built: set \
         model.input.width, height and layout to the model's",
        path.display(),
        input.name,
        dims.join(", "),
        wanted,
        spec.width,
        spec.height,
        spec.layout
    )))
}

/// `engine.precision = "int8"` needs an explicitly quantized model: no calibration is run, so
/// without Q/DQ nodes TensorRT would build FP16/FP32 kernels and the cache would file them as INT8.
pub fn check_int8_model(precision: Precision, model: &[u8], path: &Path) -> Result<(), TrtError> {
    if precision != Precision::Int8 {
        return Ok(());
    }
    match super::onnx_external_data::has_quantize_nodes(model) {
        Ok(true) => Ok(()),
        Ok(false) => Err(TrtError::Config(format!(
            "engine.precision = \"int8\": {} has no QuantizeLinear/DequantizeLinear (Q/DQ) nodes, and jetson-detectd \
             runs no INT8 calibration, so TensorRT would build FP16/FP32 kernels; export a quantized model (Q/DQ, \
             e.g. with NVIDIA's Model Optimizer) or set engine.precision = \"fp16\"",
            path.display()
        ))),
        // The parser reports a malformed model with more detail than this walk.
        Err(_) => Ok(()),
    }
}

/// TensorRT's own default builder optimisation level, what 8.5 (which cannot set one) builds with.
const TENSORRT_DEFAULT_OPTIMIZATION_LEVEL: u8 = 3;

/// Says so when the configured optimisation level cannot be honoured: TensorRT 8.5 (JetPack 5.1)
/// has no `setBuilderOptimizationLevel`, so the shim compiled against its headers never sets one.
pub fn optimization_level_warning(level: u8, headers: TrtVersion) -> Option<String> {
    let supported = TrtVersion { major: 8, minor: 6, patch: 0 };
    (level != TENSORRT_DEFAULT_OPTIMIZATION_LEVEL && headers < supported).then(|| {
        format!(
            "engine.optimization_level = {level} is ignored: TensorRT {headers} has no builder optimisation level \
             (8.6 and newer do); the engine is built at TensorRT's default level"
        )
    })
}

fn ffi_precision(precision: Precision) -> i32 {
    match precision {
        Precision::Fp32 => ffi::JD_PRECISION_FP32,
        Precision::Fp16 => ffi::JD_PRECISION_FP16,
        Precision::Int8 => ffi::JD_PRECISION_INT8,
    }
}

/// Which timing cache a build starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimingCacheUse {
    /// The one saved in the cache directory, when it is for this device and TensorRT.
    Saved,
    /// None: a cold build (`selftest` times one).
    Empty,
}

/// A cached engine found for a plan.
struct Found {
    path: PathBuf,
    bytes: Vec<u8>,
}

/// A finished and saved build.
#[derive(Debug)]
pub struct Built {
    pub engine: Vec<u8>,
    pub engine_path: PathBuf,
    pub key: String,
    /// Absent when TensorRT returned none or it could not be saved (a warning).
    pub timing_cache_path: Option<PathBuf>,
    pub seconds: f64,
}

/// Everything needed to look up or build the engine of an ONNX model.
struct BuildPlan {
    /// Read once: the key hashes exactly the bytes a build parses.
    model: ModelInput,
    options: BuildOptions,
    /// The engine's identity when the model's input is dynamic (its profiles matter).
    identity: EngineIdentity,
    /// The identity when the input turns out static: no profiles are added then, so the engine is
    /// the same whatever the profile count, and adding a camera must not rebuild it.
    static_identity: EngineIdentity,
    device: DeviceIdentity,
    /// `device.gpu`: the build thread binds this GPU's context before TensorRT sees the build.
    gpu: u32,
    /// `engine.build_timeout_s`: the longest build, and the longest wait for another's.
    build_timeout: Duration,
    tensorrt: TrtVersion,
    cache: EngineCache,
}

impl BuildPlan {
    fn new(
        spec: &ModelSpec,
        on: &DeviceSpec,
        tensorrt: TrtVersion,
        device: DeviceIdentity,
    ) -> Result<BuildPlan, TrtError> {
        let onnx_path = spec.files.onnx().ok_or_else(|| {
            TrtError::Config("building an engine needs `model.onnx` (or give a prebuilt `model.engine`)".into())
        })?;
        let options = build_options(spec);
        check_precision(options.precision, tensorrt.major)?;
        if let Some(warning) = optimization_level_warning(options.optimization_level, header_version()) {
            log::warn!("{warning}");
        }
        if let Some(warning) = dla_batch_warning(spec) {
            log::warn!("{warning}");
        }
        let model = ModelInput::read(onnx_path)?;
        check_int8_model(options.precision, &model.bytes, onnx_path)?;
        check_model_input(spec, &model.bytes, onnx_path)?;
        let version = tensorrt.to_string();
        let identity = EngineIdentity::new(&model.digest, &version, &device, &options);
        let static_options = BuildOptions { input_profiles: None, ..options.clone() };
        let static_identity = EngineIdentity::new(&model.digest, &version, &device, &static_options);
        let cache = EngineCache::open(&on.cache_dir, onnx_path)?;
        Ok(BuildPlan {
            model,
            options,
            identity,
            static_identity,
            device,
            gpu: on.gpu,
            build_timeout: spec.engine.build_timeout,
            tensorrt,
            cache,
        })
    }

    /// The path the engine has (or will have) in the cache: the static-input one when that exists.
    fn engine_path(&self) -> PathBuf {
        let static_path = self.cache.engine_path(&self.static_identity.key());
        if static_path.exists() {
            static_path
        } else {
            self.cache.engine_path(&self.identity.key())
        }
    }

    /// The cached engine: the dynamic-input key first, then the static-input one; else why not.
    fn lookup(&self) -> Result<Found, MissReason> {
        let dynamic_reason = match self.cache.lookup(&self.identity) {
            EngineLookup::Hit { path, bytes } => return Ok(Found { path, bytes }),
            EngineLookup::Miss(reason) => reason,
        };
        match self.cache.lookup(&self.static_identity) {
            EngineLookup::Hit { path, bytes } => Ok(Found { path, bytes }),
            // No static engine either: the dynamic key's reason lists what changed.
            EngineLookup::Miss(MissReason::Missing { .. }) => Err(dynamic_reason),
            EngineLookup::Miss(static_reason) => Err(static_reason),
        }
    }

    /// How this process describes itself in the cache directory's build lock.
    fn lock_holder(&self) -> String {
        let command: Vec<String> = std::env::args().take(2).collect();
        format!(
            "pid {} ({}), building {}",
            std::process::id(),
            command.join(" "),
            self.cache.engine_path(&self.identity.key()).display()
        )
    }

    /// Takes the build lock, relaying the wait as [`Progress::Waiting`].
    fn lock(&self, progress: &mut dyn FnMut(Progress)) -> Result<BuildLock, TrtError> {
        Ok(self.cache.lock_builds(&self.lock_holder(), self.build_timeout, |holder, elapsed| {
            progress(Progress::Waiting { holder: holder.to_owned(), elapsed });
        })?)
    }

    /// Builds (the caller holds the build lock), then saves engine and timing cache.
    fn build(
        &self,
        runtime: &TrtRuntime,
        timing: TimingCacheUse,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Built, TrtError> {
        let started = Instant::now();
        let version = self.tensorrt.to_string();
        let timing_cache = match timing {
            TimingCacheUse::Empty => Vec::new(),
            TimingCacheUse::Saved => match self.cache.load_timing_cache(&version, &self.device) {
                Ok(bytes) => {
                    progress(Progress::Stage(format!(
                        "using timing cache {}",
                        self.cache.timing_cache_path().display()
                    )));
                    bytes
                }
                Err(MissReason::Missing { .. }) => Vec::new(),
                Err(reason) => {
                    log::warn!("timing cache {} not used: {reason}", self.cache.timing_cache_path().display());
                    Vec::new()
                }
            },
        };
        let request = BuildRequest {
            onnx: &self.model.bytes,
            onnx_path: &self.model.path,
            timing_cache: &timing_cache,
            precision: ffi_precision(self.options.precision),
            workspace_bytes: self.options.workspace_bytes,
            dla_core: self.options.dla_core,
            optimization_level: self.options.optimization_level,
            profiles: self.options.input_profiles.as_ref(),
        };
        let BuildOutput { engine, timing_cache: timing, timing_cache_rejected, profiles } =
            run_with_progress(runtime, &request, self.gpu, self.build_timeout, progress)?;
        if let Some(why) = timing_cache_rejected {
            log::warn!(
                "TensorRT refused the timing cache {} ({why}); built with an empty one, which replaces it",
                self.cache.timing_cache_path().display()
            );
        }
        progress(Progress::Stage("saving engine and timing cache".into()));
        let identity = if profiles == 0 { &self.static_identity } else { &self.identity };
        let engine_path = self.cache.store(identity, engine.as_slice())?;
        let timing_cache_path = timing
            .and_then(|timing| self.cache.store_timing_cache_after_engine(&version, &self.device, timing.as_slice()));
        Ok(Built {
            engine: engine.as_slice().to_vec(),
            engine_path,
            key: identity.key(),
            timing_cache_path,
            seconds: started.elapsed().as_secs_f64(),
        })
    }
}

/// How [`acquire`] got the engine.
enum Acquired {
    Cached { path: PathBuf, engine: Engine },
    Built { built: Built, reason: MissReason },
}

/// What the cache-then-lock protocol ([`cached_or_locked`]) ends with.
#[derive(Debug)]
enum CacheOrLock<T, L> {
    /// The cached engine; `after_lock` when only the look under the lock found it.
    Cached { found: T, after_lock: bool },
    /// Nothing usable even under the lock: build while holding it.
    Build { lock: L, reason: MissReason },
}

/// Looks in the cache; on a miss takes the build lock and looks again, always — not only when it
/// had to wait: a build that ended between the first look and the `flock` released the lock
/// without this process ever waiting, and its engine is already saved.
fn cached_or_locked<P, T, L, E>(
    plan: &mut P,
    mut look: impl FnMut(&mut P) -> Result<T, MissReason>,
    lock: impl FnOnce(&P) -> Result<L, E>,
) -> Result<CacheOrLock<T, L>, E> {
    if let Ok(found) = look(plan) {
        return Ok(CacheOrLock::Cached { found, after_lock: false });
    }
    let lock = lock(plan)?;
    Ok(match look(plan) {
        Ok(found) => CacheOrLock::Cached { found, after_lock: true },
        Err(reason) => CacheOrLock::Build { lock, reason },
    })
}

/// The plan's engine: the cached one if TensorRT deserialises it, else a build under the cache
/// directory's build lock ([`cached_or_locked`]).
fn acquire(
    plan: &mut BuildPlan,
    runtime: &Arc<TrtRuntime>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Acquired, TrtError> {
    let dla_core = plan.options.dla_core;
    let try_cached = |plan: &mut BuildPlan| -> Result<Acquired, MissReason> {
        let Found { path, bytes } = plan.lookup()?;
        // The model is not parsed on a hit; its memory goes back before the engine is loaded.
        let model = std::mem::take(&mut plan.model.bytes);
        match runtime.deserialize(&bytes, dla_core) {
            Ok(engine) => Ok(Acquired::Cached { path, engine }),
            Err(error) => {
                plan.model.bytes = model;
                Err(MissReason::Deserialize(error.to_string()))
            }
        }
    };
    let (_lock, reason) = match cached_or_locked(plan, try_cached, |plan| plan.lock(progress))? {
        CacheOrLock::Cached { found, after_lock } => {
            if after_lock {
                progress(Progress::Stage("another process built the engine meanwhile; using it".into()));
            }
            return Ok(found);
        }
        CacheOrLock::Build { lock, reason } => (lock, reason),
    };
    log::warn!("building TensorRT engine {}: {reason} (this can take minutes)", plan.engine_path().display());
    let built = plan.build(runtime, TimingCacheUse::Saved, progress)?;
    Ok(Acquired::Built { built, reason })
}

/// Runs the build on a scoped helper thread; this thread relays monitor events and emits a
/// [`Progress::Tick`] every second until it ends.
fn run_with_progress(
    runtime: &TrtRuntime,
    request: &BuildRequest<'_>,
    gpu: u32,
    limit: Duration,
    progress: &mut dyn FnMut(Progress),
) -> Result<BuildOutput, TrtError> {
    let started = Instant::now();
    let (sender, receiver) = mpsc::channel::<Progress>();
    std::thread::scope(|scope| {
        let builder = std::thread::Builder::new()
            .name("trt-build".into())
            .spawn_scoped(scope, move || {
                let relay = |event: BuildEvent<'_>| {
                    let event = match event {
                        BuildEvent::PhaseStart { phase, parent, steps } => {
                            Progress::PhaseStart { phase: phase.into(), parent: parent.map(Into::into), steps }
                        }
                        BuildEvent::StepComplete { phase, step } => Progress::Step { phase: phase.into(), step },
                        BuildEvent::PhaseFinish { phase } => Progress::PhaseFinish { phase: phase.into() },
                    };
                    // The receiver outlives the build; a send error would only mean nobody listens.
                    let _ = sender.send(event);
                    // false cancels the build (TensorRT 10+: its progress monitor asks after every step).
                    started.elapsed() < limit
                };
                // A new thread has no current CUDA context, and TensorRT builds on the current one:
                // without this, a host with `device.gpu` other than 0 built (and timed) on GPU 0.
                let context = CudaContext::new(gpu as usize)
                    .map_err(|e| TrtError::NoGpu(format!("GPU {gpu} for the engine build: {e}")))?;
                context
                    .bind_to_thread()
                    .map_err(|e| TrtError::Cuda(format!("binding GPU {gpu} for the build: {e}")))?;
                runtime.build(request, &relay)
            })
            .map_err(|e| TrtError::Trt(format!("cannot start the build thread: {e}")))?;
        loop {
            match receiver.recv_timeout(TICK) {
                Ok(event) => progress(event),
                Err(mpsc::RecvTimeoutError::Timeout) => progress(Progress::Tick { elapsed: started.elapsed() }),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        progress(Progress::Tick { elapsed: started.elapsed() });
        let built = builder.join().map_err(|_| TrtError::Trt("the build thread panicked".into()))?;
        match built {
            Err(error) if started.elapsed() >= limit => Err(TrtError::Config(format!(
                "the engine build ran past engine.build_timeout_s ({} s) and was cancelled ({error}); raise it if \
                 this device is slower",
                limit.as_secs()
            ))),
            other => other,
        }
    })
}

/// A deserialised engine and where it came from.
pub struct LoadedEngine {
    pub engine: Arc<Engine>,
    pub source: EngineSource,
}

/// The engine of `model` on `on`'s GPU (`device` identifies it): the prebuilt `model.engine` if
/// set, else the cached one, else a fresh build (the reason is logged) that is cached for next time.
pub fn load_or_build(
    runtime: &Arc<TrtRuntime>,
    model: &ModelSpec,
    on: &DeviceSpec,
    device: DeviceIdentity,
    progress: &mut dyn FnMut(Progress),
) -> Result<LoadedEngine, TrtError> {
    let dla_core = model.engine.dla_core;
    if let Some(path) = model.files.engine() {
        let bytes = load_prebuilt_engine(path)?;
        let engine = runtime.deserialize(&bytes, dla_core).map_err(|e| {
            TrtError::Deserialize(format!("{}: {}", path.display(), MissReason::Deserialize(e.to_string())))
        })?;
        return Ok(LoadedEngine { engine: Arc::new(engine), source: EngineSource::Prebuilt(path.to_path_buf()) });
    }
    let mut plan = BuildPlan::new(model, on, runtime.version(), device)?;
    match acquire(&mut plan, runtime, progress)? {
        Acquired::Cached { path, engine } => {
            Ok(LoadedEngine { engine: Arc::new(engine), source: EngineSource::Cached(path) })
        }
        Acquired::Built { built, reason } => {
            let engine = runtime.deserialize(&built.engine, dla_core)?;
            let source = EngineSource::Built { path: built.engine_path, reason: reason.to_string() };
            Ok(LoadedEngine { engine: Arc::new(engine), source })
        }
    }
}

/// `jetson-detectd build-engine`: makes sure a valid engine and timing cache for `model` on `on`'s
/// GPU exist in the cache directory, building them if needed. `progress` sees every event (feed it
/// to a [`ProgressReporter`](super::ProgressReporter)).
pub fn build_engine(
    model: &ModelSpec,
    on: &DeviceSpec,
    mut progress: impl FnMut(Progress),
) -> Result<BuiltEngine, TrtError> {
    let runtime = TrtRuntime::open()?;
    let (_context, device) = device_identity(on.gpu)?;
    let mut plan = BuildPlan::new(model, on, runtime.version(), device)?;
    let version = runtime.version().to_string();
    match acquire(&mut plan, &runtime, &mut progress)? {
        Acquired::Cached { path, engine: _ } => {
            progress(Progress::Stage(format!("{} is up to date", path.display())));
            let key = if path == plan.cache.engine_path(&plan.static_identity.key()) {
                plan.static_identity.key()
            } else {
                plan.identity.key()
            };
            Ok(BuiltEngine {
                engine_path: path,
                timing_cache_path: Some(plan.cache.timing_cache_path()).filter(|p| p.exists()),
                key,
                tensorrt_version: version,
                up_to_date: true,
                build_seconds: 0.0,
            })
        }
        Acquired::Built { built, .. } => Ok(BuiltEngine {
            engine_path: built.engine_path,
            timing_cache_path: built.timing_cache_path,
            key: built.key,
            tensorrt_version: version,
            up_to_date: false,
            build_seconds: built.seconds,
        }),
    }
}

/// What this device (`on`'s GPU with the TensorRT it loads) accepts for each of `models` that is
/// built from ONNX (a prebuilt `model.engine` is the user's own, never packed): the identities a
/// pack's engines must have, and where they are cached (`engine export` and `engine import`).
pub fn expected_models(models: &[ModelSpec], on: &DeviceSpec) -> Result<Vec<ExpectedModel>, TrtError> {
    let runtime = TrtRuntime::open()?;
    let (_context, device) = device_identity(on.gpu)?;
    let mut expected = Vec::new();
    for model in models.iter().filter(|model| model.files.engine().is_none()) {
        let plan = BuildPlan::new(model, on, runtime.version(), device.clone())?;
        expected.push(ExpectedModel {
            cache: plan.cache,
            identities: [plan.identity, plan.static_identity],
            tensorrt_version: plan.tensorrt.to_string(),
            device: plan.device,
        });
    }
    Ok(expected)
}

/// Cold and warm build times of one engine (`selftest`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct BuildTimes {
    /// Seconds with an empty timing cache.
    pub cold_seconds: f64,
    /// Seconds with the timing cache the cold build left.
    pub warm_seconds: f64,
}

/// Builds `model`'s engine twice under the build lock, first with an empty timing cache and then
/// with the one that build saved, and saves both (the engine ends up cached). What `selftest`
/// reports: the warm time is what a rebuild after a model or JetPack change costs.
pub fn time_builds(
    runtime: &TrtRuntime,
    model: &ModelSpec,
    on: &DeviceSpec,
    device: DeviceIdentity,
    progress: &mut dyn FnMut(Progress),
) -> Result<BuildTimes, TrtError> {
    let plan = BuildPlan::new(model, on, runtime.version(), device)?;
    let _lock = plan.lock(progress)?;
    progress(Progress::Stage("cold build (empty timing cache)".into()));
    let cold = plan.build(runtime, TimingCacheUse::Empty, progress)?;
    progress(Progress::Stage("warm build (with the timing cache the cold build saved)".into()));
    let warm = plan.build(runtime, TimingCacheUse::Saved, progress)?;
    Ok(BuildTimes { cold_seconds: cold.seconds, warm_seconds: warm.seconds })
}

/// The engine file `model` would use on `on`'s GPU (for `probe`, `selftest`), without loading
/// anything but the model's hash.
pub fn expected_engine_path(
    model: &ModelSpec,
    on: &DeviceSpec,
    tensorrt: TrtVersion,
    device: &DeviceIdentity,
) -> Option<PathBuf> {
    if let Some(engine) = model.files.engine() {
        return Some(engine.to_path_buf());
    }
    let plan = BuildPlan::new(model, on, tensorrt, device.clone()).ok()?;
    Some(plan.engine_path())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, ConfigOrigin};

    fn config(extra: &str) -> Config {
        let text = format!(
            r#"
            [model]
            onnx = "models/ssd_mobilenet_v2_coco_prenms_fp32.onnx"
            labels = "models/coco_labels.txt"
            decoder = "ssd"
            input = {{ width = 300, height = 300, layout = "nhwc", dtype = "u8" }}
            [[camera]]
            name = "front"
            source = {{ kind = "synthetic" }}
            {extra}
            "#
        );
        Config::from_toml(&text, ConfigOrigin::Embedded, Path::new(env!("CARGO_MANIFEST_DIR"))).expect("valid config")
    }

    /// A 64 GiB AGX Orin developer kit.
    fn agx_orin() -> DeviceIdentity {
        DeviceIdentity {
            name: "Orin".into(),
            compute_capability: (8, 7),
            multiprocessors: 16,
            total_memory_bytes: 64 << 30,
            board: "NVIDIA Jetson AGX Orin Developer Kit".into(),
        }
    }

    /// The model `config` describes, as every command builds it.
    fn spec(config: &Config) -> ModelSpec {
        ModelSpec::from_config(config).expect("a model spec")
    }

    #[test]
    fn options_follow_the_config() {
        let options = build_options(&spec(&config("[engine]\nprecision = \"fp16\"\nworkspace_mib = 512")));
        assert_eq!(options.precision, Precision::Fp16);
        assert_eq!(options.workspace_bytes, 512 << 20);
        assert_eq!(options.dla_core, None);
        let batch_of_1_to_4 = ShapeProfile {
            input: String::new(),
            min: vec![1, 300, 300, 3],
            opt: vec![4, 300, 300, 3],
            max: vec![4, 300, 300, 3],
        };
        assert_eq!(options.input_profiles, Some(InputProfiles { shape: batch_of_1_to_4, count: 1 }));
        let unbatched =
            config("[engine]\nmax_batch = 1\n[[camera]]\nname = \"back\"\nsource = { kind = \"synthetic\" }");
        let shape = build_options(&spec(&unbatched)).input_profiles.expect("profiles").shape;
        assert_eq!((shape.opt[0], shape.max[0]), (1, 1), "max_batch = 1 builds for single frames");
    }

    #[test]
    fn the_cache_is_looked_at_again_under_the_lock_even_without_a_wait() {
        // Another process saved the engine between the first look and the lock, which it released
        // before this one asked: no wait happened, and the engine must still not be built again.
        let mut looks = 0;
        let outcome = cached_or_locked(
            &mut looks,
            |looks: &mut i32| {
                *looks += 1;
                if *looks == 1 {
                    Err(MissReason::Missing { stale: Vec::new() })
                } else {
                    Ok("engine")
                }
            },
            |_: &i32| Ok::<_, TrtError>("lock"),
        )
        .expect("no lock error");
        assert!(matches!(outcome, CacheOrLock::Cached { found: "engine", after_lock: true }), "{outcome:?}");
        let mut never = 0;
        let outcome = cached_or_locked(
            &mut never,
            |_: &mut i32| Err::<(), _>(MissReason::Missing { stale: Vec::new() }),
            |_: &i32| Ok::<_, TrtError>("lock"),
        )
        .expect("no lock error");
        assert!(matches!(outcome, CacheOrLock::Build { lock: "lock", .. }), "{outcome:?}");
    }

    #[test]
    fn a_fixed_model_input_that_contradicts_the_config_is_refused_before_building() {
        let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/ssd_mobilenet_v2_coco_prenms_fp32.onnx");
        let model = std::fs::read(&bundled).expect("bundled model");
        assert!(check_model_input(&spec(&config("")), &model, &bundled).is_ok(), "the bundled model fits its config");
        let mut wrong = config("");
        (wrong.model.input.width, wrong.model.input.height) = (640, 640);
        let message = check_model_input(&spec(&wrong), &model, &bundled).expect_err("640 against 300").to_string();
        assert!(message.contains("model.input") && message.contains("300"), "{message}");
    }

    #[test]
    fn int8_without_quantize_nodes_is_refused_before_building() {
        let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/ssd_mobilenet_v2_coco_prenms_fp32.onnx");
        let model = std::fs::read(&bundled).expect("bundled model");
        let message = check_int8_model(Precision::Int8, &model, &bundled).expect_err("fp32 model").to_string();
        assert!(message.contains("engine.precision = \"int8\"") && message.contains("Q/DQ"), "{message}");
        assert!(check_int8_model(Precision::Fp16, &model, &bundled).is_ok());
        use crate::backend::trt::onnx_external_data::encode::{bytes_field, varint_field};
        let node = bytes_field(1, &bytes_field(4, b"QuantizeLinear"));
        let quantized = [varint_field(1, 8), bytes_field(7, &node)].concat();
        assert!(check_int8_model(Precision::Int8, &quantized, Path::new("q.onnx")).is_ok());
    }

    #[test]
    fn adding_a_camera_keeps_the_engine_key() {
        let one = config("");
        let two = config("[[camera]]\nname = \"back\"\nsource = { kind = \"synthetic\" }");
        assert_eq!(two.cameras.len(), one.cameras.len() + 1);
        let device = DeviceIdentity {
            name: "Orin".into(),
            compute_capability: (8, 7),
            multiprocessors: 16,
            total_memory_bytes: 16 << 30,
            board: "NVIDIA Jetson AGX Orin".into(),
        };
        let digest = crate::backend::trt::engine_cache::ModelDigest {
            sha256: "ab".repeat(32),
            external_data: Default::default(),
        };
        let key =
            |config: &Config| EngineIdentity::new(&digest, "10.3.0", &device, &build_options(&spec(config))).key();
        assert_eq!(key(&one), key(&two));
    }

    #[test]
    fn a_dla_engine_is_pinned_to_single_frames_and_says_so() {
        let dla = config("[engine]\ndla_core = 1\nprecision = \"fp16\"\nmax_batch = 4");
        assert_eq!(build_options(&spec(&dla)).dla_core, Some(1));
        let shape = build_options(&spec(&dla)).input_profiles.expect("profiles").shape;
        assert_eq!((shape.min[0], shape.opt[0], shape.max[0]), (1, 1, 1));
        assert!(dla_batch_warning(&spec(&dla)).is_some_and(|w| w.contains("engine.dla_core")));
        assert_eq!(dla_batch_warning(&spec(&config("[engine]\nmax_batch = 4"))), None);
        assert_eq!(
            dla_batch_warning(&spec(&config("[engine]\ndla_core = 0\nprecision = \"fp16\"\nmax_batch = 1"))),
            None
        );
    }

    #[test]
    fn the_builder_fingerprint_names_the_shim_and_the_headers() {
        let fingerprint = builder_fingerprint();
        assert!(fingerprint.starts_with("shim "), "{fingerprint}");
        assert!(fingerprint.ends_with(&format!("TensorRT headers {}", header_version())), "{fingerprint}");
        assert_eq!(build_options(&spec(&config(""))).builder, fingerprint);
    }

    #[test]
    fn optimization_level_is_ignored_only_before_8_6() {
        let version = |major, minor| TrtVersion { major, minor, patch: 0 };
        let warning = optimization_level_warning(5, version(8, 5)).expect("8.5 cannot set a level");
        assert!(warning.contains("optimization_level = 5") && warning.contains("8.5.0"), "{warning}");
        assert_eq!(optimization_level_warning(TENSORRT_DEFAULT_OPTIMIZATION_LEVEL, version(8, 5)), None);
        assert_eq!(optimization_level_warning(5, version(8, 6)), None);
        assert_eq!(optimization_level_warning(0, version(10, 3)), None);
    }

    #[test]
    fn precision_on_tensorrt_11_is_explained() {
        assert!(check_precision(Precision::Fp16, 10).is_ok());
        assert!(check_precision(Precision::Fp32, 11).is_ok());
        let message = check_precision(Precision::Fp16, 11).expect_err("rejected").to_string();
        assert!(message.contains("strongly typed") && message.contains("ONNX model"), "{message}");
    }

    #[test]
    fn expected_path_changes_with_the_options() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = format!("[engine]\ncache_dir = {:?}", dir.path());
        let device = agx_orin();
        let version = TrtVersion { major: 10, minor: 3, patch: 0 };
        let path =
            |config: &Config| expected_engine_path(&spec(config), &DeviceSpec::from_config(config), version, &device);
        let fp32 = path(&config(&cache)).expect("path");
        let fp16 = path(&config(&format!("{cache}\nprecision = \"fp16\""))).expect("path");
        assert_ne!(fp32, fp16);
        assert!(fp32.starts_with(dir.path()));
        assert!(fp32.to_string_lossy().ends_with(".engine"));
    }

    /// Engine-cache keys of today's model must never change by accident: a new key is a rebuild
    /// of minutes on every Jetson after an upgrade. The keys below were computed by the code
    /// before the model was described by a `ModelSpec`; the cache file names follow from them.
    #[test]
    fn todays_engine_keys_stay_the_same() {
        let device = agx_orin();
        let digest = crate::backend::trt::engine_cache::ModelDigest {
            sha256: "5e".repeat(32),
            external_data: [("weights.bin".to_owned(), "d4".repeat(32))].into(),
        };
        let keys = |config: &Config| {
            let options = BuildOptions {
                builder: "shim 0123456789ab, TensorRT headers 10.3.0".into(),
                ..build_options(&spec(config))
            };
            let static_options = BuildOptions { input_profiles: None, ..options.clone() };
            let key = |options: &BuildOptions| EngineIdentity::new(&digest, "10.3.0", &device, options).key();
            [key(&options), key(&static_options)]
        };
        let mut dla_int8 = config("[engine]\ndla_core = 1\nprecision = \"int8\"");
        dla_int8.model.input.name = Some("image_tensor".into());
        let configs = [
            config(""),
            config("[engine]\nprecision = \"fp16\"\nworkspace_mib = 512\nmax_batch = 8\noptimization_level = 5"),
            dla_int8,
        ];
        let computed: Vec<[String; 2]> = configs.iter().map(keys).collect();
        let today = [
            ["8e383044ec797a8d", "6b099d8db32e3001"],
            ["b77239324d0781f3", "b54bd85a4e16eba5"],
            ["c4983817b9707e7b", "bf66f15962f97267"],
        ];
        assert_eq!(computed, today);
    }
}
