//! The TensorRT [`Backend`]: one engine, one [`TrtSession`] (execution context, CUDA stream, IO
//! buffers for a whole batch) per inference worker, on the worker's thread; one worker per GPU
//! serves every camera (`crate::infer::scheduler`).
//!
//! Owns: checking the engine's input against the configured [`PreprocessSpec`], the batch size the
//! engine allows (its profile's largest batch when the batch dimension is dynamic, else 1), IO
//! tensor binding by name, the per-batch sequence (input stage for each row → one `enqueueV3` →
//! output copies of the rows used → one stream synchronisation) and its timings (CUDA events). Must not: preprocess frames itself — an
//! [`InputStage`] (the CUDA preprocessing kernel, wired by the pipeline) writes the input tensor on
//! the session's stream — nor decode outputs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, PinnedHostSlice};

use super::arena::{arena_report, ArenaLease};
use super::build::device_identity;
use super::error::TrtError;
use super::runtime::{DataType, Engine, ExecutionContext, TensorFormat, TensorInfo, TrtRuntime};
use super::version::TrtVersion;
use crate::backend::engine::EngineOrigin;
use crate::backend::error::BackendError;
use crate::backend::memory_report::MemoryReport;
use crate::backend::traits::{Backend, BackendInfo, BackendTimings, InferenceSession, SessionMemory};
use crate::frame::FrameSlot;
use crate::model::{DeviceSpec, ModelOutputs, ModelSpec, OutputTensor};
use crate::preprocess::{PreprocessSpec, Roi, TensorDtype};
use crate::sys::lock::lock;

/// Writes the model input for a frame into device memory, on the session's stream.
pub trait InputStage {
    /// Enqueues the conversion of the frame in `slot` into row `row` of `input`, a batch of input
    /// tensors of [`PreprocessSpec::bytes`] bytes each. Must not synchronise: the session
    /// synchronises once per batch, after inference; the slot stays untouched until then.
    fn enqueue_row(&mut self, slot: &FrameSlot, input: &mut CudaSlice<u8>, row: usize) -> Result<(), BackendError>;

    /// [`InputStage::enqueue_row`] with `roi` of the frame as the source (a classifier's crop).
    fn enqueue_roi_row(
        &mut self,
        _slot: &FrameSlot,
        roi: Roi,
        _input: &mut CudaSlice<u8>,
        _row: usize,
    ) -> Result<(), BackendError> {
        Err(BackendError::Preprocess(format!("this input stage cannot preprocess a region ({roi})")))
    }
}

/// What one inference's input rows are: whole frames, or regions of one frame.
#[derive(Clone, Copy)]
enum Rows<'a> {
    Frames(&'a [&'a FrameSlot]),
    Regions(&'a FrameSlot, &'a [Roi]),
}

impl Rows<'_> {
    fn len(&self) -> usize {
        match self {
            Rows::Frames(slots) => slots.len(),
            Rows::Regions(_, rois) => rois.len(),
        }
    }
}

/// Creates a session's [`InputStage`] on the inference worker's thread, for the session's stream. The
/// pipeline passes one that builds the CUDA preprocessing kernel (`crate::gpu`).
pub type InputStageFactory =
    Box<dyn Fn(&Arc<CudaStream>, &PreprocessSpec) -> Result<Box<dyn InputStage>, BackendError> + Send + Sync>;

/// The optimisation profiles of an engine, handed out to its execution contexts: TensorRT
/// requires each context *in concurrent use* to have its own profile when the input is dynamic.
/// Before 8.6 the pool never shares: `acquire` fails when all are taken, and [`ProfilePool::cap`]
/// says how many contexts fit. From 8.6 on, contexts that never run at the same time (every context
/// of one inference worker: one thread, one stream) may share one, so `acquire` hands out the
/// least used profile once none is free.
#[derive(Debug)]
pub struct ProfilePool {
    /// Contexts holding each profile.
    holders: Mutex<Vec<u32>>,
    shareable: bool,
}

/// One context's profile; given back on drop.
#[derive(Debug)]
pub struct ProfileLease {
    pool: Arc<ProfilePool>,
    index: u32,
}

/// The first TensorRT whose contexts that never run at once may share an optimisation profile.
const SHARED_PROFILES_SINCE: TrtVersion = TrtVersion { major: 8, minor: 6, patch: 0 };

impl ProfilePool {
    /// The pool of an engine with `profiles` profiles on TensorRT `version`.
    pub fn new(profiles: u32, version: TrtVersion) -> Arc<ProfilePool> {
        Arc::new(ProfilePool {
            holders: Mutex::new(vec![0; profiles.max(1) as usize]),
            shareable: version >= SHARED_PROFILES_SINCE,
        })
    }

    /// How many contexts can hold a profile at once: `None` when they share.
    pub fn cap(&self) -> Option<usize> {
        (!self.shareable).then(|| lock(&self.holders).len())
    }

    /// A free profile (the lowest), else on 8.6+ the least used one; else an error that says how
    /// many the engine has.
    pub fn acquire(self: &Arc<Self>) -> Result<ProfileLease, TrtError> {
        let mut holders = lock(&self.holders);
        let free = holders.iter().position(|&n| n == 0);
        let shared = || holders.iter().enumerate().min_by_key(|(_, &n)| n).map(|(index, _)| index);
        let Some(index) = free.or_else(|| if self.shareable { shared() } else { None }) else {
            return Err(TrtError::Config(format!(
                "all {} optimisation profile(s) of the engine are in use: its input is dynamic, so every context \
                 that runs at the same time needs its own before TensorRT 8.6; it was built for fewer contexts than \
                 are running now (a prebuilt engine? let jetson-detectd build it from model.onnx, which adds one per \
                 inference worker)",
                holders.len()
            )));
        };
        holders[index] += 1;
        Ok(ProfileLease { pool: Arc::clone(self), index: index as u32 })
    }
}

impl ProfileLease {
    pub fn index(&self) -> u32 {
        self.index
    }
}

impl Drop for ProfileLease {
    fn drop(&mut self) {
        let mut holders = lock(&self.pool.holders);
        if let Some(held) = holders.get_mut(self.index as usize) {
            *held = held.saturating_sub(1);
        }
    }
}

/// The TensorRT backend.
pub struct TrtBackend {
    engine: Arc<Engine>,
    profiles: Arc<ProfilePool>,
    context: Arc<CudaContext>,
    ordinal: usize,
    spec: PreprocessSpec,
    input: TensorInfo,
    /// The input shape of one frame (batch 1).
    input_shape: Vec<i64>,
    /// Frames one enqueue takes: 1..=`engine.max_batch`, and 1 unless the batch dimension is dynamic.
    max_batch: usize,
    input_stage: InputStageFactory,
    info: BackendInfo,
    /// The largest persistent memory a session's context took (measured when it was created).
    persistent_bytes: AtomicU64,
}

impl TrtBackend {
    /// `model`'s deserialised `engine` on GPU `ordinal` (its primary `context`), from `origin`,
    /// once its IO tensors are checked against the model's input contract; sessions preprocess
    /// with what `input_stage` makes.
    pub fn new(
        engine: Arc<Engine>,
        origin: &EngineOrigin,
        context: Arc<CudaContext>,
        ordinal: u32,
        model: &ModelSpec,
        input_stage: InputStageFactory,
    ) -> Result<TrtBackend, TrtError> {
        let version = engine.runtime_version();
        let spec = model.input.clone();
        check_linear_formats(engine.io_tensors())?;
        let (input, input_shape) = check_input(engine.io_tensors(), spec.name.as_deref(), &spec)?;
        let max_batch = engine_max_batch(&input, engine.profile_max_shape(&input.name, 0).as_deref())
            .min(model.engine.max_batch.get());
        let info = BackendInfo {
            kind: "tensorrt",
            model: origin.path().display().to_string(),
            detail: format!(
                "TensorRT {version}, {origin}, {} bytes scratch per context, batches of up to {max_batch}",
                engine.device_memory_bytes()
            ),
        };
        log::info!("TensorRT backend: {}", info.detail);
        Ok(TrtBackend {
            profiles: ProfilePool::new(engine.profiles(), version),
            engine,
            context,
            ordinal: ordinal as usize,
            spec,
            input,
            input_shape,
            max_batch,
            input_stage,
            info,
            persistent_bytes: AtomicU64::new(0),
        })
    }
}

/// The device's free memory, as the driver reports it for the context bound to this thread.
fn free_device_memory() -> Option<u64> {
    cudarc::driver::result::mem_get_info().ok().map(|(free, _total)| free as u64)
}

/// Creates a context on `engine` and measures what it allocated for itself (TensorRT has no call
/// that reports a context's persistent memory): the fall in the device's free memory across the
/// creation. Scratch memory is not part of it (user-managed, leased from the arena afterwards).
/// On a Jetson the free memory is the system's, so another process allocating at the same moment
/// skews the figure; it is a report, never a decision.
fn create_measured_context(engine: &Arc<Engine>) -> Result<(ExecutionContext, u64), TrtError> {
    let before = free_device_memory();
    let context = engine.create_context()?;
    let persistent = before.zip(free_device_memory()).map_or(0, |(before, after)| before.saturating_sub(after));
    Ok((context, persistent))
}

/// For `probe`: the context memory the daemon would hold with `cameras` cameras on one inference
/// worker, from `model`'s engine file at `path` on `device`'s GPU (deserialised and one context
/// created, then dropped; nothing is built).
pub fn planned_context_memory(
    model: &ModelSpec,
    device: &DeviceSpec,
    cameras: usize,
    path: &std::path::Path,
) -> Result<MemoryReport, TrtError> {
    let (context, _identity) = device_identity(device.gpu)?;
    context.bind_to_thread().map_err(cuda("binding the CUDA context"))?;
    let runtime = TrtRuntime::open()?;
    let bytes = std::fs::read(path).map_err(|e| TrtError::Deserialize(format!("{}: {e}", path.display())))?;
    let engine = Arc::new(
        runtime
            .deserialize(&bytes, model.engine.dla_core)
            .map_err(|e| TrtError::Deserialize(format!("{}: {e}", path.display())))?,
    );
    let (_context, persistent_bytes) = create_measured_context(&engine)?;
    let per_context = SessionMemory { scratch_bytes: engine.device_memory_bytes(), persistent_bytes };
    Ok(MemoryReport::new(1, cameras, per_context))
}

/// Frames one enqueue can take: the largest batch of the profile when the input's leading
/// (batch) dimension is dynamic, else 1.
fn engine_max_batch(input: &TensorInfo, profile_max: Option<&[i64]>) -> usize {
    if input.shape.first() != Some(&-1) {
        return 1;
    }
    profile_max.and_then(|shape| shape.first()).and_then(|b| usize::try_from(*b).ok()).unwrap_or(1).max(1)
}

/// `shape` (batch 1) with a batch of `rows`.
fn batched(shape: &[i64], rows: usize) -> Vec<i64> {
    let mut shape = shape.to_vec();
    if let Some(batch) = shape.first_mut() {
        *batch = i64::try_from(rows).unwrap_or(i64::MAX);
    }
    shape
}

/// Refuses an engine with an IO tensor that is not in TensorRT's linear (row-major) format: buffers
/// are sized as elements × element size and filled in the declared layout, so a vectorised format
/// (`CHW16`, common in DLA builds) would make TensorRT read and write past them, and a channel-last
/// one would scramble the data.
pub fn check_linear_formats(io: &[TensorInfo]) -> Result<(), TrtError> {
    let Some(tensor) = io.iter().find(|t| t.format != TensorFormat::LINEAR) else { return Ok(()) };
    Err(TrtError::Config(format!(
        "the engine's {} {:?} uses TensorRT's {} memory format; jetson-detectd reads and writes linear \
         (row-major) tensors only. Rebuild the engine with linear I/O: let jetson-detectd build it from \
         `model.onnx` (remove `model.engine`), or with trtexec leave out --inputIOFormats/--outputIOFormats \
         (or give them as `fp16:chw`/`fp32:chw`), which DLA builds often set to a vectorised format",
        if tensor.is_input { "input" } else { "output" },
        tensor.name,
        tensor.format.name(),
    )))
}

/// Finds the input the config names (else the engine's first input) and checks that the
/// configured tensor fits it. Returns it with the concrete shape to set (batch 1).
fn check_input(
    io: &[TensorInfo],
    name: Option<&str>,
    spec: &PreprocessSpec,
) -> Result<(TensorInfo, Vec<i64>), TrtError> {
    let inputs: Vec<&TensorInfo> = io.iter().filter(|t| t.is_input).collect();
    if inputs.len() != 1 {
        return Err(TrtError::Config(format!(
            "the engine has {} inputs ({}); jetson-detectd feeds exactly one image input",
            inputs.len(),
            inputs.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ")
        )));
    }
    let input = inputs[0];
    if let Some(name) = name {
        if input.name != name {
            return Err(TrtError::Config(format!(
                "model.input.name = {name:?}, but the engine's input is {:?}",
                input.name
            )));
        }
    }
    let wanted = match spec.dtype {
        TensorDtype::U8 => DataType::U8,
        TensorDtype::F16 => DataType::F16,
        TensorDtype::F32 => DataType::F32,
    };
    if input.dtype != wanted {
        return Err(TrtError::Config(format!(
            "model.input.dtype = {:?}, but the engine's input {:?} is {:?}",
            spec.dtype, input.name, input.dtype
        )));
    }
    let shape: Vec<i64> = spec.shape().iter().map(|d| *d as i64).collect();
    let fits = input.shape.len() == shape.len() && input.shape.iter().zip(&shape).all(|(e, c)| *e < 0 || e == c);
    if !fits {
        return Err(TrtError::Config(format!(
            "the configured input {shape:?} ({:?}) does not fit the engine's input {:?} {:?}",
            spec.layout, input.name, input.shape
        )));
    }
    Ok((input.clone(), shape))
}

impl Backend for TrtBackend {
    fn info(&self) -> BackendInfo {
        let arena = arena_report();
        let mut info = self.info.clone();
        if arena.arena_bytes > 0 {
            info.detail.push_str(&format!(
                ", shared scratch arenas {} bytes (saved {} bytes against one per context)",
                arena.arena_bytes, arena.saved_bytes
            ));
        }
        info
    }

    fn spec(&self) -> &PreprocessSpec {
        &self.spec
    }

    fn session_memory(&self) -> SessionMemory {
        SessionMemory {
            scratch_bytes: self.engine.device_memory_bytes(),
            persistent_bytes: self.persistent_bytes.load(Ordering::Relaxed),
        }
    }

    fn new_session(&self) -> Result<Box<dyn InferenceSession>, BackendError> {
        Ok(Box::new(TrtSession::new(self)?))
    }

    fn max_sessions(&self) -> Option<usize> {
        if self.input.is_dynamic() {
            self.profiles.cap()
        } else {
            None
        }
    }
}

/// One output: device buffer, pinned host copy (both sized for the largest batch), and its f32
/// view in [`ModelOutputs`].
struct OutputBinding {
    name: String,
    dtype: DataType,
    element_bytes: usize,
    device: CudaSlice<u8>,
    host: PinnedHostSlice<u8>,
}

/// An inference worker's TensorRT state. Field order is drop order: the context goes before its
/// arena lease, profile and buffers.
pub struct TrtSession {
    context: ExecutionContext,
    lease: ArenaLease,
    /// The optimisation profile this context uses (dynamic inputs only).
    _profile: Option<ProfileLease>,
    stream: Arc<CudaStream>,
    /// `max_batch` rows of the input tensor.
    input: CudaSlice<u8>,
    input_name: String,
    /// The input shape of one frame; `None` for a fixed input shape.
    dynamic_shape: Option<Vec<i64>>,
    max_batch: usize,
    /// The batch the input shape is set to now.
    rows: usize,
    outputs: Vec<OutputBinding>,
    model_outputs: ModelOutputs,
    input_stage: Box<dyn InputStage>,
    started: CudaEvent,
    preprocessed: CudaEvent,
    finished: CudaEvent,
}

fn cuda(what: &str) -> impl Fn(cudarc::driver::DriverError) -> TrtError + '_ {
    move |e| TrtError::Cuda(format!("{what}: {e}"))
}

impl TrtSession {
    fn new(backend: &TrtBackend) -> Result<TrtSession, TrtError> {
        let ctx = &backend.context;
        ctx.bind_to_thread().map_err(cuda("binding the CUDA context"))?;
        let stream = ctx.new_stream().map_err(cuda("creating a stream"))?;
        let (mut context, persistent_bytes) = create_measured_context(&backend.engine)?;
        backend.persistent_bytes.fetch_max(persistent_bytes, Ordering::Relaxed);
        let mut lease = ArenaLease::acquire(backend.ordinal, ctx, backend.engine.device_memory_bytes())?;
        lease.rebind(&mut context)?;
        let max_batch = backend.max_batch;
        let profile = if backend.input.is_dynamic() {
            let profile = backend.profiles.acquire()?;
            // SAFETY: `stream` is this session's stream on the bound context, the one it enqueues on.
            unsafe { context.set_optimization_profile(profile.index(), stream.cu_stream())? };
            // The largest batch first, so that the output buffers are sized for it.
            context.set_input_shape(&backend.input.name, &batched(&backend.input_shape, max_batch))?;
            Some(profile)
        } else {
            None
        };
        let input_bytes = backend.spec.bytes() * max_batch;
        let input = stream.alloc_zeros::<u8>(input_bytes).map_err(cuda("allocating the input tensor"))?;
        let (input_ptr, record) = input.device_ptr(&stream);
        // SAFETY: `input` holds the input tensor's bytes for the largest batch (shape and dtype
        // checked by `check_input`) and lives as long as the context (same struct, dropped after it).
        unsafe { context.set_tensor_address(&backend.input.name, input_ptr)? };
        drop(record);

        let mut outputs = Vec::new();
        let mut model_outputs = ModelOutputs::default();
        for tensor in backend.engine.io_tensors().iter().filter(|t| !t.is_input) {
            let shape = context.tensor_shape(&tensor.name)?;
            if shape.iter().any(|d| *d < 0) {
                return Err(TrtError::Config(format!(
                    "output {:?} has a data-dependent shape {shape:?}, which this backend does not support",
                    tensor.name
                )));
            }
            let dims: Vec<usize> = shape.iter().map(|d| usize::try_from(*d).unwrap_or(0)).collect();
            let elements: usize = dims.iter().product();
            let element_bytes =
                tensor.dtype.element_bytes().filter(|_| tensor.dtype != DataType::Fp8).ok_or_else(|| {
                    TrtError::Config(format!(
                        "output {:?} has type {:?}, which cannot be read",
                        tensor.name, tensor.dtype
                    ))
                })?;
            let bytes = elements * element_bytes;
            let device = stream.alloc_zeros::<u8>(bytes.max(1)).map_err(cuda("allocating an output tensor"))?;
            // SAFETY: the contents are written by the device-to-host copy before they are read.
            // Flags 0: cached pinned memory, since the CPU reads it (write-combined would be slow).
            let host = unsafe { ctx.alloc_pinned_with_flags::<u8>(bytes.max(1), 0) }
                .map_err(cuda("allocating pinned output memory"))?;
            let (ptr, record) = device.device_ptr(&stream);
            // SAFETY: `device` holds the tensor's resolved shape × element size and lives as long
            // as the context.
            unsafe { context.set_tensor_address(&tensor.name, ptr)? };
            drop(record);
            outputs.push(OutputBinding { name: tensor.name.clone(), dtype: tensor.dtype, element_bytes, device, host });
            model_outputs.tensors.push(OutputTensor {
                name: tensor.name.clone(),
                shape: dims,
                data: vec![0.0; elements],
            });
        }
        let input_stage = (backend.input_stage)(&stream, &backend.spec).map_err(|e| TrtError::Config(e.to_string()))?;
        let timing_event = || ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(cuda("creating an event"));
        Ok(TrtSession {
            started: timing_event()?,
            preprocessed: timing_event()?,
            finished: timing_event()?,
            context,
            lease,
            _profile: profile,
            stream,
            input,
            input_name: backend.input.name.clone(),
            dynamic_shape: backend.input.is_dynamic().then(|| backend.input_shape.clone()),
            max_batch,
            rows: max_batch,
            outputs,
            model_outputs,
            input_stage,
        })
    }
}

impl TrtSession {
    /// Sets the input shape to a batch of `rows` (dynamic inputs) and the outputs' shapes to
    /// what TensorRT then reports. Cheap when the batch did not change.
    fn set_rows(&mut self, rows: usize) -> Result<(), TrtError> {
        if rows == self.rows {
            return Ok(());
        }
        if let Some(shape) = &self.dynamic_shape {
            self.context.set_input_shape(&self.input_name, &batched(shape, rows))?;
        }
        for (output, tensor) in self.outputs.iter().zip(&mut self.model_outputs.tensors) {
            let shape = self.context.tensor_shape(&output.name)?;
            tensor.shape = shape.iter().map(|d| usize::try_from(*d).unwrap_or(0)).collect();
            tensor.data.resize(tensor.shape.iter().product(), 0.0);
        }
        self.rows = rows;
        Ok(())
    }
}

impl InferenceSession for TrtSession {
    fn run(&mut self, slot: &FrameSlot) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        self.run_batch(&[slot])
    }

    fn max_batch(&self) -> usize {
        self.max_batch
    }

    fn run_batch(&mut self, slots: &[&FrameSlot]) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        self.run_rows(Rows::Frames(slots))
    }

    fn run_regions(&mut self, slot: &FrameSlot, rois: &[Roi]) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        self.run_rows(Rows::Regions(slot, rois))
    }
}

impl TrtSession {
    fn run_rows(&mut self, rows: Rows<'_>) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        if rows.len() == 0 || rows.len() > self.max_batch {
            return Err(BackendError::Inference(format!(
                "a batch of {} inputs given to a context that takes 1..={}",
                rows.len(),
                self.max_batch
            )));
        }
        let stream = Arc::clone(&self.stream);
        self.set_rows(rows.len())?;
        self.lease.rebind(&mut self.context)?;
        self.started.record(&stream).map_err(cuda("recording an event"))?;
        match rows {
            Rows::Frames(slots) => {
                for (row, slot) in slots.iter().enumerate() {
                    self.input_stage.enqueue_row(slot, &mut self.input, row)?;
                }
            }
            Rows::Regions(slot, rois) => {
                for (row, roi) in rois.iter().enumerate() {
                    self.input_stage.enqueue_roi_row(slot, *roi, &mut self.input, row)?;
                }
            }
        }
        self.preprocessed.record(&stream).map_err(cuda("recording an event"))?;
        // SAFETY: device memory and every tensor address were set at creation (and rebound above)
        // to buffers owned by this session and sized for the largest batch; the stream belongs to
        // the bound context; no other context uses the arena while this one runs (arena module doc).
        unsafe { self.context.enqueue(stream.cu_stream())? };
        for (output, tensor) in self.outputs.iter_mut().zip(&self.model_outputs.tensors) {
            // Only the rows of this batch: the buffers are sized for the largest one.
            let bytes = tensor.data.len() * output.element_bytes;
            let host = output.host.as_mut_slice().map_err(cuda("reaching pinned output memory"))?;
            stream.memcpy_dtoh(&output.device.slice(..bytes), &mut host[..bytes]).map_err(cuda("copying an output"))?;
        }
        self.finished.record(&stream).map_err(cuda("recording an event"))?;
        stream.synchronize().map_err(|e| BackendError::Inference(format!("inference failed on the GPU: {e}")))?;

        for (output, tensor) in self.outputs.iter().zip(&mut self.model_outputs.tensors) {
            let bytes = output.host.as_slice().map_err(cuda("reading an output"))?;
            convert_to_f32(output.dtype, &bytes[..tensor.data.len() * output.element_bytes], &mut tensor.data);
        }
        let millis = |from: &CudaEvent, to: &CudaEvent| {
            from.elapsed_ms(to).map(|ms| Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3)).unwrap_or_default()
        };
        let timings = BackendTimings {
            preprocess: millis(&self.started, &self.preprocessed),
            infer: millis(&self.preprocessed, &self.finished),
        };
        Ok((&self.model_outputs, timings))
    }
}

/// Converts `bytes` of `dtype` (native endian) into `out`, element by element.
fn convert_to_f32(dtype: DataType, bytes: &[u8], out: &mut [f32]) {
    fn each<const N: usize>(bytes: &[u8], out: &mut [f32], f: impl Fn([u8; N]) -> f32) {
        for (value, chunk) in out.iter_mut().zip(bytes.chunks_exact(N)) {
            let mut raw = [0u8; N];
            raw.copy_from_slice(chunk);
            *value = f(raw);
        }
    }
    match dtype {
        DataType::F32 => each(bytes, out, f32::from_ne_bytes),
        DataType::F16 => each(bytes, out, |b| half::f16::from_ne_bytes(b).to_f32()),
        DataType::Bf16 => each(bytes, out, |b| half::bf16::from_ne_bytes(b).to_f32()),
        DataType::I32 => each(bytes, out, |b| i32::from_ne_bytes(b) as f32),
        DataType::I64 => each(bytes, out, |b| i64::from_ne_bytes(b) as f32),
        DataType::I8 => each(bytes, out, |b: [u8; 1]| f32::from(b[0] as i8)),
        DataType::U8 | DataType::Bool => each(bytes, out, |b: [u8; 1]| f32::from(b[0])),
        DataType::Fp8 | DataType::Other(_) => out.fill(f32::NAN),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preprocess::{ResizeFilter, TensorLayout};

    fn tensor(name: &str, is_input: bool, dtype: DataType, shape: &[i64]) -> TensorInfo {
        TensorInfo::for_tests(name, is_input, dtype, shape)
    }

    fn spec() -> PreprocessSpec {
        PreprocessSpec::plain(300, 300, TensorLayout::Nhwc, TensorDtype::U8, ResizeFilter::Antialias)
    }

    #[test]
    fn input_must_match_the_config() {
        let outputs = [tensor("boxes", false, DataType::F32, &[1, 1917, 4])];
        let io = |input: TensorInfo| {
            let mut io = vec![input];
            io.extend(outputs.iter().cloned());
            io
        };
        let good = io(tensor("image", true, DataType::U8, &[1, 300, 300, 3]));
        assert_eq!(check_input(&good, None, &spec()).expect("fits").1, vec![1, 300, 300, 3]);
        let dynamic = io(tensor("image", true, DataType::U8, &[-1, -1, -1, 3]));
        assert!(check_input(&dynamic, Some("image"), &spec()).is_ok());
        for bad in [
            io(tensor("image", true, DataType::F32, &[1, 300, 300, 3])),
            io(tensor("image", true, DataType::U8, &[1, 3, 300, 300])),
            io(tensor("image", true, DataType::U8, &[1, 300, 300])),
        ] {
            assert!(check_input(&bad, None, &spec()).is_err(), "{bad:?}");
        }
        assert!(check_input(&good, Some("input"), &spec()).is_err());
        assert!(check_input(&outputs, None, &spec()).is_err(), "no input at all");
    }

    #[test]
    fn only_linear_io_formats_are_accepted() {
        let linear = [
            tensor("image", true, DataType::U8, &[1, 300, 300, 3]),
            tensor("boxes", false, DataType::F32, &[1, 1917, 4]),
        ];
        assert!(check_linear_formats(&linear).is_ok());
        let mut vectorised = linear.to_vec();
        vectorised[1].format = TensorFormat(4);
        let message = check_linear_formats(&vectorised).expect_err("CHW16 output").to_string();
        assert!(message.contains("output \"boxes\"") && message.contains("CHW16"), "{message}");
        assert!(message.contains("--outputIOFormats") && message.contains("model.onnx"), "{message}");
        let mut dla = linear.to_vec();
        dla[0].format = TensorFormat(9);
        assert!(check_linear_formats(&dla).expect_err("DLA_LINEAR input").to_string().contains("input \"image\""));
        assert_eq!(TensorFormat(99).name(), "format 99");
    }

    #[test]
    fn before_8_6_each_context_gets_its_own_profile_and_the_pool_says_how_many_fit() {
        let pool = ProfilePool::new(2, TrtVersion { major: 8, minor: 5, patch: 2 });
        assert_eq!(pool.cap(), Some(2));
        let first = pool.acquire().expect("profile 0");
        let second = pool.acquire().expect("profile 1");
        assert_eq!((first.index(), second.index()), (0, 1));
        let message = pool.acquire().expect_err("both in use").to_string();
        assert!(message.contains("all 2 optimisation profile(s)"), "{message}");
        drop(first);
        assert_eq!(pool.acquire().expect("profile 0 is free again").index(), 0);
        let old = TrtVersion { major: 8, minor: 5, patch: 2 };
        assert_eq!(ProfilePool::new(0, old).acquire().expect("at least one").index(), 0);
    }

    /// `selftest` with a dynamic-batch model and two cameras opened two contexts on an engine with
    /// one profile and failed its contexts check; on 8.6+ contexts of one worker share it.
    #[test]
    fn from_8_6_contexts_that_never_run_at_once_share_the_least_used_profile() {
        let pool = ProfilePool::new(2, TrtVersion { major: 10, minor: 3, patch: 0 });
        assert_eq!(pool.cap(), None);
        let leases: Vec<_> = (0..5).map(|_| pool.acquire().expect("shared")).collect();
        let indices: Vec<u32> = leases.iter().map(ProfileLease::index).collect();
        assert_eq!(indices, [0, 1, 0, 1, 0], "free ones first, then the least used");
        drop(leases);
        assert_eq!(pool.acquire().expect("free again").index(), 0);
    }

    #[test]
    fn the_batch_comes_from_the_profile_only_for_a_dynamic_batch_dimension() {
        let dynamic = tensor("images", true, DataType::F32, &[-1, 3, 640, 640]);
        assert_eq!(engine_max_batch(&dynamic, Some(&[8, 3, 640, 640])), 8);
        assert_eq!(engine_max_batch(&dynamic, None), 1, "no profile shape: single frames");
        let fixed = tensor("images", true, DataType::F32, &[1, 3, -1, -1]);
        assert_eq!(engine_max_batch(&fixed, Some(&[1, 3, 640, 640])), 1, "a fixed batch of 1 stays 1");
        assert_eq!(batched(&[1, 3, 640, 640], 4), vec![4, 3, 640, 640]);
    }

    #[test]
    fn outputs_convert_to_f32() {
        let mut out = [0.0f32; 2];
        let halves: Vec<u8> = [1.5f32, -2.0].iter().flat_map(|v| half::f16::from_f32(*v).to_ne_bytes()).collect();
        convert_to_f32(DataType::F16, &halves, &mut out);
        assert_eq!(out, [1.5, -2.0]);
        let ints: Vec<u8> = [7i32, -3].iter().flat_map(|v| v.to_ne_bytes()).collect();
        convert_to_f32(DataType::I32, &ints, &mut out);
        assert_eq!(out, [7.0, -3.0]);
        convert_to_f32(DataType::I8, &[0xff, 2], &mut out);
        assert_eq!(out, [-1.0, 2.0]);
    }
}
