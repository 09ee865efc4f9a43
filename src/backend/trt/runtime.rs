//! Safe RAII wrappers over the shim: [`TrtRuntime`] (loaded TensorRT + IRuntime + logger),
//! [`Engine`] (ICudaEngine), [`ExecutionContext`] (IExecutionContext without its own device
//! memory) and [`HostBlob`] (IHostMemory).
//!
//! Owns: every `unsafe` call into the shim, ownership and drop order of TensorRT objects, the
//! `Send`/`Sync` decisions. Must not: allocate device memory, touch files, or pick build options.
//!
//! Thread safety, following TensorRT's documented rules:
//! - `IRuntime` and `ICudaEngine` may be used from several threads at once (deserialising, querying
//!   and creating execution contexts): [`TrtRuntime`] and [`Engine`] are `Send + Sync`. A build
//!   creates its own `IBuilder` inside one shim call, and the shared logger is internally locked.
//!   The shared `IRuntime` is never mutated: a DLA engine is deserialised by a runtime of its own
//!   (`setDLACore` on the shared one would retarget every other deserialisation).
//! - An `IExecutionContext` must not be used concurrently. [`ExecutionContext`] is neither `Send`
//!   nor `Sync`: it lives on its inference worker's thread, whose CUDA context and scratch arena its
//!   device pointers belong to. (TensorRT would allow moving it between threads; nothing here needs
//!   that, and forbidding it keeps the arena's "same thread, never concurrent" invariant
//!   compiler-checked.)
//! - Every engine keeps its runtime alive and every context its engine (Arcs), so TensorRT objects
//!   are destroyed in the order TensorRT requires: contexts, engines, runtime.

use std::ffi::{c_char, c_void, CStr, CString};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Arc;

use super::error::TrtError;
use super::ffi;
use super::version::TrtVersion;

const ERROR_BUFFER: usize = 4096;

/// Refuses a library older (major.minor) than the headers the shim was compiled against: the
/// soname pins only the major, and a virtual method that the older library's classes lack is a
/// crash when called, not an error. A newer library of the same major is fine.
pub fn check_library_version(headers: TrtVersion, library: TrtVersion) -> Result<(), TrtError> {
    if (library.major, library.minor) < (headers.major, headers.minor) {
        return Err(TrtError::TooOld { library, headers });
    }
    Ok(())
}

/// The TensorRT headers the shim was compiled against.
pub fn header_version() -> TrtVersion {
    let mut v = [0i32; 3];
    // SAFETY: writes exactly three i32 into `v`.
    unsafe { ffi::jd_header_version(v.as_mut_ptr()) };
    TrtVersion { major: v[0], minor: v[1], patch: v[2] }
}

/// `libnvinfer.so.<major>`, the file the shim dlopens.
pub fn library_name() -> &'static str {
    // SAFETY: the shim returns a pointer to a static NUL-terminated string literal.
    unsafe { CStr::from_ptr(ffi::jd_library_name()) }.to_str().unwrap_or("libnvinfer.so")
}

/// Calls `f` with an error buffer and turns a non-zero status into the shim's message.
fn checked(f: impl FnOnce(*mut c_char, usize) -> i32) -> Result<(), String> {
    let mut buffer = vec![0u8; ERROR_BUFFER];
    let status = f(buffer.as_mut_ptr().cast(), buffer.len());
    if status == 0 {
        return Ok(());
    }
    let end = buffer.iter().position(|b| *b == 0).unwrap_or(buffer.len());
    let message = String::from_utf8_lossy(&buffer[..end]).into_owned();
    Err(if message.is_empty() { "TensorRT call failed without a message".into() } else { message })
}

fn c_string(text: &str) -> Result<CString, TrtError> {
    CString::new(text).map_err(|_| TrtError::Config(format!("{text:?} contains a NUL byte")))
}

/// Routes TensorRT's log into the `log` crate. Errors go out as warnings: the shim repeats them in
/// the error it returns, and the caller decides whether they are fatal.
extern "C" fn forward_log(_user: *mut c_void, severity: i32, message: *const c_char) {
    if message.is_null() {
        return;
    }
    // SAFETY: TensorRT passes a NUL-terminated string valid for the duration of the call.
    let text = unsafe { CStr::from_ptr(message) }.to_string_lossy();
    match severity {
        0 | 1 => log::warn!(target: "tensorrt", "{text}"),
        2 => log::warn!(target: "tensorrt", "{text}"),
        3 => log::debug!(target: "tensorrt", "{text}"),
        _ => log::trace!(target: "tensorrt", "{text}"),
    }
}

/// `libnvinfer_plugin.so.<major>`, the plugin library the shim loads.
pub fn plugin_library_name() -> &'static str {
    // SAFETY: the shim returns a pointer to a static NUL-terminated string literal.
    unsafe { CStr::from_ptr(ffi::jd_plugin_library_name()) }.to_str().unwrap_or("libnvinfer_plugin.so")
}

/// Loads TensorRT's plugin library and registers its plugins (the shim does it once per process).
/// A missing library is a warning, logged once: only models that use plugins need it.
fn load_plugins() -> Result<(), String> {
    static WARNED: std::sync::Once = std::sync::Once::new();
    // SAFETY: `forward_log` is a plain function with no state; the error buffer is `checked`'s.
    let loaded = checked(|err, len| unsafe { ffi::jd_load_plugins(forward_log, std::ptr::null_mut(), err, len) });
    if let Err(why) = &loaded {
        WARNED.call_once(|| log::warn!("{}", missing_plugins_warning(header_version().major, why)));
    }
    loaded
}

/// What a missing `libnvinfer_plugin` means on TensorRT `major`: on 10+ only models that use
/// plugins fail; on 8.x the ONNX parser itself needs the library (libnvonnxparser.so.8 links
/// against it and registers the plugins while parsing), so every engine build from ONNX fails.
pub fn missing_plugins_warning(major: i32, why: &str) -> String {
    let library = plugin_library_name();
    if major < 10 {
        format!(
            "TensorRT plugins are not available ({why}): on TensorRT {major} the ONNX parser needs {library}, so \
             every engine build from model.onnx fails, whatever the model; only a prebuilt model.engine without \
             plugins loads. Install {library} (JetPack's libnvinfer-plugin{major} package)"
        )
    } else {
        format!(
            "TensorRT plugins are not available ({why}): models that use them (e.g. `end2end` exports with \
             EfficientNMS) cannot be parsed or loaded; install {library} (JetPack's libnvinfer-plugin package)"
        )
    }
}

/// A build error, with what it means when TensorRT 8.x's ONNX parser failed for want of the
/// plugin library (the dynamic loader's message names it).
fn explain_build_error(major: i32, error: String) -> String {
    if major < 10 && error.contains("libnvinfer_plugin") {
        format!("{error}; {}", missing_plugins_warning(major, "the parser cannot load it"))
    } else {
        error
    }
}

/// Loaded TensorRT with its runtime and logger.
pub struct TrtRuntime {
    raw: NonNull<ffi::JdTrt>,
    version: TrtVersion,
    plugins: Result<(), String>,
}

// SAFETY: IRuntime is documented thread-safe for deserialisation; the shim's logger is locked and
// each build creates its own IBuilder (see the module doc).
unsafe impl Send for TrtRuntime {}
// SAFETY: as above; no method takes `&self` and mutates shared state without a lock.
unsafe impl Sync for TrtRuntime {}

impl TrtRuntime {
    /// dlopens libnvinfer, checks its version against the headers, and creates the runtime. Fails
    /// with [`TrtError::NotInstalled`] when the library is absent and [`TrtError::TooOld`] when it
    /// is older than the headers.
    pub fn open() -> Result<Arc<TrtRuntime>, TrtError> {
        let mut code = 0;
        // SAFETY: `code` is a valid out-pointer.
        checked(|err, len| unsafe { ffi::jd_load_library(&mut code, err, len) }).map_err(TrtError::NotInstalled)?;
        let version = TrtVersion::from_library_code(code);
        check_library_version(header_version(), version)?;
        // Before any runtime exists, so before any parse or deserialisation.
        let plugins = load_plugins();
        let mut raw = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer; `forward_log` is a plain function with no state.
        checked(|err, len| unsafe { ffi::jd_trt_open(forward_log, std::ptr::null_mut(), &mut raw, err, len) })
            .map_err(TrtError::NotInstalled)?;
        let raw = NonNull::new(raw).ok_or_else(|| TrtError::Trt("jd_trt_open returned no handle".into()))?;
        Ok(Arc::new(TrtRuntime { raw, version, plugins }))
    }

    /// The loaded library's version.
    pub fn version(&self) -> TrtVersion {
        self.version
    }

    /// Whether TensorRT's plugins are registered, or why not.
    pub fn plugins(&self) -> Result<(), &str> {
        self.plugins.as_ref().map(|_| ()).map_err(String::as_str)
    }

    /// Builds a serialized engine. `progress` (TensorRT 10+ only) returns `false` to cancel; TensorRT
    /// calls it from its own builder threads, several at once, hence `Fn + Sync`. Returns the engine
    /// and the updated timing cache.
    pub fn build(&self, options: &BuildRequest<'_>, progress: &ProgressCallback<'_>) -> Result<BuildOutput, TrtError> {
        let profile_input;
        let mut raw_options = ffi::JdBuildOptions {
            precision: options.precision,
            dla_core: options.dla_core.map_or(-1, |c| c as i32),
            optimization_level: i32::from(options.optimization_level),
            profile_nb_dims: 0,
            profile_count: 0,
            reserved: 0,
            workspace_bytes: options.workspace_bytes,
            profile_input: std::ptr::null(),
            profile_min: [0; ffi::JD_MAX_DIMS],
            profile_opt: [0; ffi::JD_MAX_DIMS],
            profile_max: [0; ffi::JD_MAX_DIMS],
        };
        if let Some(profiles) = options.profiles {
            let profile = &profiles.shape;
            let dims = profile.min.len();
            if dims > ffi::JD_MAX_DIMS || profile.opt.len() != dims || profile.max.len() != dims {
                return Err(TrtError::Config(format!("input shape profile {profile:?} is malformed")));
            }
            profile_input = c_string(&profile.input)?;
            raw_options.profile_input = profile_input.as_ptr();
            raw_options.profile_nb_dims = dims as i32;
            raw_options.profile_min[..dims].copy_from_slice(&profile.min);
            raw_options.profile_opt[..dims].copy_from_slice(&profile.opt);
            raw_options.profile_max[..dims].copy_from_slice(&profile.max);
            raw_options.profile_count = i32::try_from(profiles.count)
                .ok()
                .filter(|count| *count >= 1)
                .ok_or_else(|| TrtError::Config(format!("{} optimisation profiles", profiles.count)))?;
        }
        let onnx_path = c_string(&options.onnx_path.to_string_lossy())?;
        let mut result = ffi::JdBuildResult::EMPTY;
        let progress_user: &ProgressCallback<'_> = progress;
        // SAFETY: every pointer is valid for the duration of the call (`raw_options` and the strings
        // it points to, the byte slices, the out-blobs); `progress_user` is a `&&ProgressCallback`
        // that `progress_trampoline` only reads (shared, `Sync`) during this call.
        let status = checked(|err, len| unsafe {
            ffi::jd_build(
                self.raw.as_ptr(),
                &raw_options,
                options.onnx.as_ptr().cast(),
                options.onnx.len(),
                onnx_path.as_ptr(),
                options.timing_cache.as_ptr().cast(),
                options.timing_cache.len(),
                Some(progress_trampoline),
                (&progress_user as *const &ProgressCallback<'_>).cast_mut().cast(),
                &mut result,
                err,
                len,
            )
        });
        // Wrap before checking the status so that blobs are freed on every path.
        let engine = HostBlob::from_raw(result.engine);
        let timing_cache = HostBlob::from_raw(result.timing_cache);
        status.map_err(|error| TrtError::Trt(explain_build_error(header_version().major, error)))?;
        let engine = engine.ok_or_else(|| TrtError::Trt("the build returned no engine".into()))?;
        let timing_cache_rejected = (result.timing_cache_rejected != 0).then(|| {
            // c_char is i8 or u8 depending on the target; to_ne_bytes reads either as a byte.
            let message: Vec<u8> =
                result.timing_cache_error.iter().map(|c| c.to_ne_bytes()[0]).take_while(|b| *b != 0).collect();
            String::from_utf8_lossy(&message).into_owned()
        });
        Ok(BuildOutput { engine, timing_cache, timing_cache_rejected, profiles: result.profiles.max(0) as u32 })
    }

    /// Deserialises an engine; `dla_core` must match the one it was built for (a DLA engine gets
    /// its own IRuntime in the shim, so the shared one stays a GPU runtime).
    pub fn deserialize(self: &Arc<Self>, bytes: &[u8], dla_core: Option<u32>) -> Result<Engine, TrtError> {
        let mut raw = std::ptr::null_mut();
        let dla = dla_core.map_or(-1, |c| c as i32);
        // SAFETY: `bytes` is valid for the call (TensorRT copies what it keeps); `raw` is an out-pointer.
        checked(|err, len| unsafe {
            ffi::jd_engine_load(self.raw.as_ptr(), bytes.as_ptr().cast(), bytes.len(), dla, &mut raw, err, len)
        })
        .map_err(TrtError::Deserialize)?;
        let raw = NonNull::new(raw).ok_or_else(|| TrtError::Trt("jd_engine_load returned no handle".into()))?;
        Engine::new(EngineHandle(raw), Arc::clone(self))
    }
}

impl Drop for TrtRuntime {
    fn drop(&mut self) {
        // SAFETY: the handle is live and owned; engines hold an Arc to `self`, so none outlives it.
        unsafe { ffi::jd_trt_close(self.raw.as_ptr()) }
    }
}

/// What a build produced.
pub struct BuildOutput {
    pub engine: HostBlob,
    /// The updated timing cache, when TensorRT returned one.
    pub timing_cache: Option<HostBlob>,
    /// Why TensorRT refused the timing cache it was given, when it did (the build then started
    /// from an empty one, and `timing_cache` is what should replace the refused file).
    pub timing_cache_rejected: Option<String>,
    /// Optimisation profiles the build added: the requested count for a dynamic input, else 0.
    pub profiles: u32,
}

/// What to build.
#[derive(Debug)]
pub struct BuildRequest<'a> {
    pub onnx: &'a [u8],
    pub onnx_path: &'a std::path::Path,
    /// Previous timing cache (empty: none).
    pub timing_cache: &'a [u8],
    /// `ffi::JD_PRECISION_*`.
    pub precision: i32,
    pub workspace_bytes: u64,
    pub dla_core: Option<u32>,
    pub optimization_level: u8,
    pub profiles: Option<&'a crate::backend::engine::cache::InputProfiles>,
}

/// A builder progress callback from TensorRT's IProgressMonitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildEvent<'a> {
    PhaseStart { phase: &'a str, parent: Option<&'a str>, steps: i32 },
    StepComplete { phase: &'a str, step: i32 },
    PhaseFinish { phase: &'a str },
}

/// A build progress callback: TensorRT's IProgressMonitor runs on builder threads, several at once,
/// so it takes `&self` and must be `Sync`.
pub type ProgressCallback<'a> = dyn Fn(BuildEvent<'_>) -> bool + Sync + 'a;

/// Called by the shim's IProgressMonitor, from any builder thread, concurrently.
extern "C" fn progress_trampoline(
    user: *mut c_void,
    event: i32,
    phase: *const c_char,
    parent: *const c_char,
    steps: i32,
) -> i32 {
    let text = |p: *const c_char| {
        // SAFETY: TensorRT passes NUL-terminated phase names valid for the duration of the call.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("?"))
    };
    let phase = text(phase).unwrap_or("");
    let event = match event {
        ffi::JD_PHASE_START => BuildEvent::PhaseStart { phase, parent: text(parent), steps },
        ffi::JD_STEP_COMPLETE => BuildEvent::StepComplete { phase, step: steps },
        ffi::JD_PHASE_FINISH => BuildEvent::PhaseFinish { phase },
        _ => return 1,
    };
    // SAFETY: `user` is the `&&ProgressCallback` passed by `TrtRuntime::build`, alive for the whole
    // build; only shared references are formed, and the callback is `Sync`, so concurrent calls
    // from several builder threads are sound.
    let callback = unsafe { &*user.cast_const().cast::<&ProgressCallback<'_>>() };
    i32::from(callback(event))
}

/// Bytes owned by TensorRT (IHostMemory): a serialized engine or timing cache.
pub struct HostBlob {
    raw: ffi::JdBlob,
}

// SAFETY: IHostMemory is a plain immutable buffer once returned; it can be read from and freed on
// any thread.
unsafe impl Send for HostBlob {}

impl HostBlob {
    fn from_raw(raw: ffi::JdBlob) -> Option<HostBlob> {
        if raw.owner.is_null() {
            None
        } else {
            Some(HostBlob { raw })
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        if self.raw.data.is_null() {
            return &[];
        }
        // SAFETY: `data` points to `size` bytes owned by `owner`, which lives until `self` drops.
        unsafe { std::slice::from_raw_parts(self.raw.data.cast(), self.raw.size as usize) }
    }
}

impl Drop for HostBlob {
    fn drop(&mut self) {
        // SAFETY: the blob came from the shim and is freed exactly once.
        unsafe { ffi::jd_blob_free(&mut self.raw) }
    }
}

/// TensorRT data types (values of `nvinfer1::DataType`, stable across 8.6–11.x).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataType {
    F32,
    F16,
    I8,
    I32,
    Bool,
    U8,
    Fp8,
    Bf16,
    I64,
    /// Sub-byte and exotic types that never appear at a detector's inputs/outputs.
    Other(i32),
}

impl DataType {
    fn from_raw(value: i32) -> Self {
        match value {
            0 => DataType::F32,
            1 => DataType::F16,
            2 => DataType::I8,
            3 => DataType::I32,
            4 => DataType::Bool,
            5 => DataType::U8,
            6 => DataType::Fp8,
            7 => DataType::Bf16,
            8 => DataType::I64,
            other => DataType::Other(other),
        }
    }

    /// Bytes per element, `None` for types this daemon does not read.
    pub fn element_bytes(self) -> Option<usize> {
        match self {
            DataType::F32 | DataType::I32 => Some(4),
            DataType::F16 | DataType::Bf16 => Some(2),
            DataType::I8 | DataType::U8 | DataType::Bool | DataType::Fp8 => Some(1),
            DataType::I64 => Some(8),
            DataType::Other(_) => None,
        }
    }
}

/// Memory layout of an engine's IO tensor (values of `nvinfer1::TensorFormat`, stable across 8.5–11.x).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorFormat(pub i32);

impl TensorFormat {
    /// Row-major, as the declared shape says: the only layout this daemon reads and writes.
    pub const LINEAR: TensorFormat = TensorFormat(0);

    /// TensorRT's name for the format (`kCHW16` → `CHW16`).
    pub fn name(self) -> String {
        const NAMES: [&str; 13] = [
            "LINEAR",
            "CHW2",
            "HWC8",
            "CHW4",
            "CHW16",
            "CHW32",
            "DHWC8",
            "CDHW32",
            "HWC",
            "DLA_LINEAR",
            "DLA_HWC4",
            "HWC16",
            "DHWC",
        ];
        usize::try_from(self.0)
            .ok()
            .and_then(|index| NAMES.get(index))
            .map_or_else(|| format!("format {}", self.0), |name| (*name).to_owned())
    }
}

/// One input or output of an engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    pub is_input: bool,
    pub dtype: DataType,
    /// Memory layout (the first non-linear one over the engine's profiles, if any).
    pub format: TensorFormat,
    /// Declared shape; -1 marks a dynamic dimension.
    pub shape: Vec<i64>,
    c_name: CString,
}

impl TensorInfo {
    pub fn is_dynamic(&self) -> bool {
        self.shape.iter().any(|d| *d < 0)
    }
}

#[cfg(test)]
impl TensorInfo {
    pub(crate) fn for_tests(name: &str, is_input: bool, dtype: DataType, shape: &[i64]) -> Self {
        let c_name = CString::new(name).unwrap_or_default();
        TensorInfo { name: name.into(), is_input, dtype, format: TensorFormat::LINEAR, shape: shape.to_vec(), c_name }
    }
}

fn dims_vec(nb_dims: i32, dims: &[i64; ffi::JD_MAX_DIMS]) -> Vec<i64> {
    dims[..(nb_dims.max(0) as usize).min(ffi::JD_MAX_DIMS)].to_vec()
}

/// Owns an ICudaEngine: frees it when dropped, so that an [`Engine`] that fails half-way through
/// [`Engine::new`] does not leak it.
struct EngineHandle(NonNull<ffi::JdEngine>);

impl EngineHandle {
    fn as_ptr(&self) -> *mut ffi::JdEngine {
        self.0.as_ptr()
    }
}

impl Drop for EngineHandle {
    fn drop(&mut self) {
        // SAFETY: owned handle, freed once; contexts hold an Arc to their `Engine`, so none is alive,
        // and the `Engine` field order drops this before the runtime it came from.
        unsafe { ffi::jd_engine_free(self.0.as_ptr()) }
    }
}

/// A deserialised engine. Field order is drop order: the engine goes before its runtime.
pub struct Engine {
    raw: EngineHandle,
    io: Vec<TensorInfo>,
    device_memory_bytes: u64,
    profiles: u32,
    runtime: Arc<TrtRuntime>,
}

// SAFETY: ICudaEngine is documented thread-safe for queries and context creation (module doc).
unsafe impl Send for Engine {}
// SAFETY: as above.
unsafe impl Sync for Engine {}

impl Engine {
    fn new(raw: EngineHandle, runtime: Arc<TrtRuntime>) -> Result<Engine, TrtError> {
        // SAFETY: `raw` is a live engine handle for all calls below.
        let count = unsafe { ffi::jd_engine_nb_io(raw.as_ptr()) };
        let mut io = Vec::with_capacity(count.max(0) as usize);
        for index in 0..count {
            let mut info = ffi::JdTensorInfo {
                name: std::ptr::null(),
                mode: 0,
                dtype: 0,
                nb_dims: 0,
                format: 0,
                dims: [0; ffi::JD_MAX_DIMS],
            };
            // SAFETY: `index` is in range; `info` is a valid out-pointer.
            if unsafe { ffi::jd_engine_io(raw.as_ptr(), index, &mut info) } != 0 || info.name.is_null() {
                return Err(TrtError::Trt(format!("cannot describe IO tensor {index}")));
            }
            // SAFETY: the name is NUL-terminated and lives as long as the engine; it is copied here.
            let c_name = unsafe { CStr::from_ptr(info.name) }.to_owned();
            io.push(TensorInfo {
                name: c_name.to_string_lossy().into_owned(),
                is_input: info.mode == 1,
                dtype: DataType::from_raw(info.dtype),
                format: TensorFormat(info.format),
                shape: dims_vec(info.nb_dims, &info.dims),
                c_name,
            });
        }
        // SAFETY: live engine handle.
        let device_memory_bytes = unsafe { ffi::jd_engine_device_memory(raw.as_ptr()) }.max(0) as u64;
        // SAFETY: live engine handle.
        let profiles = unsafe { ffi::jd_engine_nb_profiles(raw.as_ptr()) }.max(1) as u32;
        Ok(Engine { raw, io, device_memory_bytes, profiles, runtime })
    }

    pub fn io_tensors(&self) -> &[TensorInfo] {
        &self.io
    }

    /// Scratch device memory one execution context needs.
    pub fn device_memory_bytes(&self) -> u64 {
        self.device_memory_bytes
    }

    /// The version of the TensorRT that deserialised it.
    pub fn runtime_version(&self) -> TrtVersion {
        self.runtime.version()
    }

    /// Optimisation profiles (at least 1): how many contexts with a dynamic input can run at once.
    pub fn profiles(&self) -> u32 {
        self.profiles
    }

    /// The largest shape optimisation profile `profile` allows for input `name`; `None` for an
    /// input without a profile (fixed dimensions) or an unknown name.
    pub fn profile_max_shape(&self, name: &str, profile: u32) -> Option<Vec<i64>> {
        let tensor = self.tensor(name).ok()?;
        let mut nb_dims = 0;
        let mut dims = [0i64; ffi::JD_MAX_DIMS];
        // SAFETY: live engine handle, NUL-terminated name, out-pointers sized JD_MAX_DIMS.
        let status = unsafe {
            ffi::jd_engine_profile_max_shape(
                self.raw.as_ptr(),
                tensor.c_name.as_ptr(),
                i32::try_from(profile).ok()?,
                &mut nb_dims,
                dims.as_mut_ptr(),
            )
        };
        (status == 0).then(|| dims_vec(nb_dims, &dims))
    }

    /// A context that owns no device memory: set it with [`ExecutionContext::set_device_memory`].
    pub fn create_context(self: &Arc<Self>) -> Result<ExecutionContext, TrtError> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: live engine handle; `raw` is an out-pointer.
        checked(|err, len| unsafe { ffi::jd_context_create(self.raw.as_ptr(), &mut raw, err, len) })
            .map_err(TrtError::Trt)?;
        let raw = NonNull::new(raw).ok_or_else(|| TrtError::Trt("jd_context_create returned no handle".into()))?;
        Ok(ExecutionContext { raw, engine: Arc::clone(self), _not_send: PhantomData })
    }

    fn tensor(&self, name: &str) -> Result<&TensorInfo, TrtError> {
        self.io.iter().find(|t| t.name == name).ok_or_else(|| TrtError::Trt(format!("no IO tensor named {name:?}")))
    }
}

/// An execution context with user-managed device memory. Not `Send`/`Sync` (module doc).
pub struct ExecutionContext {
    raw: NonNull<ffi::JdContext>,
    engine: Arc<Engine>,
    _not_send: PhantomData<*mut ()>,
}

impl ExecutionContext {
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Points the context at its scratch memory.
    ///
    /// # Safety
    /// `memory` must be device memory of the context's device with at least `bytes` bytes, and
    /// must stay allocated and unused by concurrently running work until the context is pointed
    /// elsewhere or dropped.
    pub unsafe fn set_device_memory(&mut self, memory: u64, bytes: u64) -> Result<(), TrtError> {
        if bytes < self.engine.device_memory_bytes {
            return Err(TrtError::Trt(format!(
                "scratch memory of {bytes} bytes is below the {} the engine needs",
                self.engine.device_memory_bytes
            )));
        }
        // SAFETY: guaranteed by the caller; the context handle is live.
        unsafe { ffi::jd_context_set_device_memory(self.raw.as_ptr(), memory as *mut c_void, bytes as i64) };
        Ok(())
    }

    /// Selects optimisation profile `index` for this context, ordered on `stream`. Call before
    /// [`set_input_shape`](Self::set_input_shape); contexts that run at the same time need
    /// different profiles when the input is dynamic.
    ///
    /// # Safety
    /// `stream` must belong to the context's device and be the stream the context enqueues on (or
    /// be synchronised with it before the next enqueue).
    pub unsafe fn set_optimization_profile(
        &mut self,
        index: u32,
        stream: cudarc::driver::sys::CUstream,
    ) -> Result<(), TrtError> {
        if index >= self.engine.profiles {
            return Err(TrtError::Trt(format!(
                "optimisation profile {index} does not exist (the engine has {})",
                self.engine.profiles
            )));
        }
        // SAFETY: guaranteed by the caller; live handle; `index` is in range (checked above).
        checked(|err, len| unsafe {
            ffi::jd_context_set_profile(self.raw.as_ptr(), index as i32, stream.cast(), err, len)
        })
        .map_err(TrtError::Trt)
    }

    /// Fixes the shape of a dynamic input.
    pub fn set_input_shape(&mut self, name: &str, shape: &[i64]) -> Result<(), TrtError> {
        let tensor = self.engine.tensor(name)?;
        if shape.len() > ffi::JD_MAX_DIMS {
            return Err(TrtError::Config(format!("{name}: {} dimensions is too many", shape.len())));
        }
        // SAFETY: live handle, NUL-terminated name, `shape` holds `shape.len()` values.
        checked(|err, len| unsafe {
            ffi::jd_context_set_input_shape(
                self.raw.as_ptr(),
                tensor.c_name.as_ptr(),
                shape.len() as i32,
                shape.as_ptr(),
                err,
                len,
            )
        })
        .map_err(TrtError::Trt)
    }

    /// Shape of a tensor with every input shape applied.
    pub fn tensor_shape(&self, name: &str) -> Result<Vec<i64>, TrtError> {
        let tensor = self.engine.tensor(name)?;
        let mut nb_dims = 0;
        let mut dims = [0i64; ffi::JD_MAX_DIMS];
        // SAFETY: live handle, NUL-terminated name, out-pointers sized JD_MAX_DIMS.
        let status = unsafe {
            ffi::jd_context_tensor_shape(self.raw.as_ptr(), tensor.c_name.as_ptr(), &mut nb_dims, dims.as_mut_ptr())
        };
        if status != 0 {
            return Err(TrtError::Trt(format!("the shape of {name:?} is not known yet")));
        }
        Ok(dims_vec(nb_dims, &dims))
    }

    /// Binds a tensor to device memory.
    ///
    /// # Safety
    /// `address` must be device memory large enough for the tensor's shape and dtype, alive for as
    /// long as the context may enqueue with it.
    pub unsafe fn set_tensor_address(&mut self, name: &str, address: u64) -> Result<(), TrtError> {
        let tensor = self.engine.tensor(name)?;
        // SAFETY: guaranteed by the caller; live handle, NUL-terminated name.
        checked(|err, len| unsafe {
            ffi::jd_context_set_tensor_address(
                self.raw.as_ptr(),
                tensor.c_name.as_ptr(),
                address as *mut c_void,
                err,
                len,
            )
        })
        .map_err(TrtError::Trt)
    }

    /// Enqueues one inference on `stream`.
    ///
    /// # Safety
    /// Device memory and every tensor address must be set and valid, `stream` must belong to the
    /// context's device and be current on this thread's CUDA context, and the memory must not be
    /// used by other work running concurrently with this enqueue.
    pub unsafe fn enqueue(&mut self, stream: cudarc::driver::sys::CUstream) -> Result<(), TrtError> {
        // SAFETY: guaranteed by the caller; live handle.
        checked(|err, len| unsafe { ffi::jd_context_enqueue(self.raw.as_ptr(), stream.cast(), err, len) })
            .map_err(TrtError::Trt)
    }
}

impl Drop for ExecutionContext {
    fn drop(&mut self) {
        // SAFETY: owned handle, freed once; the engine outlives it through `self.engine`.
        unsafe { ffi::jd_context_free(self.raw.as_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_plugin_library_on_8_x_is_said_to_break_every_build() {
        let why = "libnvinfer_plugin.so.8: cannot open shared object file";
        let old = missing_plugins_warning(8, why);
        assert!(old.contains("every engine build from model.onnx fails"), "{old}");
        let new = missing_plugins_warning(10, why);
        assert!(new.contains("models that use them") && !new.contains("every engine build"), "{new}");
        let parse = explain_build_error(8, format!("libnvonnxparser.so.8: {why}"));
        assert!(parse.starts_with("libnvonnxparser.so.8") && parse.contains("every engine build"), "{parse}");
        assert_eq!(explain_build_error(8, "out of memory".into()), "out of memory");
        assert_eq!(explain_build_error(10, why.into()), why);
    }

    #[test]
    fn data_type_values_match_nvinfer() {
        assert_eq!(DataType::from_raw(0), DataType::F32);
        assert_eq!(DataType::from_raw(1), DataType::F16);
        assert_eq!(DataType::from_raw(5), DataType::U8);
        assert_eq!(DataType::from_raw(8), DataType::I64);
        assert_eq!(DataType::from_raw(10).element_bytes(), None);
    }

    #[test]
    fn a_library_older_than_the_headers_is_refused() {
        let version = |major, minor, patch| TrtVersion { major, minor, patch };
        // Same version, newer patch, newer minor: fine.
        assert!(check_library_version(version(10, 3, 0), version(10, 3, 0)).is_ok());
        assert!(check_library_version(version(8, 6, 1), version(8, 6, 2)).is_ok());
        assert!(check_library_version(version(10, 3, 0), version(10, 16, 0)).is_ok());
        // An older patch of the same minor has the same classes.
        assert!(check_library_version(version(8, 5, 3), version(8, 5, 2)).is_ok());
        // JetPack 5.1's 8.5 under a binary built on 8.6 headers: refused, naming both.
        let error = check_library_version(version(8, 6, 1), version(8, 5, 2)).expect_err("older minor");
        let message = error.to_string();
        assert!(message.contains("8.5.2") && message.contains("8.6.1"), "{message}");
        assert!(error.is_unavailable(), "CPU fallback applies: this TensorRT cannot be used");
        assert!(check_library_version(version(10, 16, 0), version(10, 3, 0)).is_err());
    }

    #[test]
    fn header_version_is_a_supported_release() {
        let version = header_version();
        assert!(version.major == 8 || version.major >= 10, "{version}");
        assert_eq!(library_name(), format!("libnvinfer.so.{}", version.major));
        assert_eq!(plugin_library_name(), format!("libnvinfer_plugin.so.{}", version.major));
    }

    #[test]
    fn progress_callbacks_may_come_from_several_threads_at_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let steps = AtomicUsize::new(0);
        let callback = |event: BuildEvent<'_>| {
            if let BuildEvent::StepComplete { phase, .. } = event {
                assert_eq!(phase, "Tactic selection");
                steps.fetch_add(1, Ordering::Relaxed);
            }
            true
        };
        let progress: &ProgressCallback<'_> = &callback;
        // The trampoline as the shim calls it: the same user pointer from several builder threads.
        let user = (&progress as *const &ProgressCallback<'_>).cast_mut().cast::<c_void>() as usize;
        let phase = c"Tactic selection";
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for step in 0..250 {
                        let result = progress_trampoline(
                            user as *mut c_void,
                            ffi::JD_STEP_COMPLETE,
                            phase.as_ptr(),
                            std::ptr::null(),
                            step,
                        );
                        assert_eq!(result, 1, "the callback did not cancel");
                    }
                });
            }
        });
        assert_eq!(steps.load(Ordering::Relaxed), 1000);
    }

    #[test]
    fn shim_error_strings_are_returned() {
        let result = checked(|err, len| {
            let message = b"deserializeCudaEngine failed: magic tag mismatch\0";
            // SAFETY: test buffer of `len` bytes; the message is shorter.
            unsafe { std::ptr::copy_nonoverlapping(message.as_ptr(), err.cast::<u8>(), message.len().min(len)) };
            1
        });
        assert_eq!(result, Err("deserializeCudaEngine failed: magic tag mismatch".to_string()));
    }
}
