//! The GPU benchmarks of `bench --gpu` (compiled with the `cuda` feature): the per-frame work
//! outside inference on the GPU path, and the preprocessing kernel on its own.
//!
//! Owns: opening the configured GPU for these benchmarks (the backend they compare with is loaded
//! by `backend::load`, as for every command), [`bench_gpu_path`] (a 1080p YUYV frame copied or
//! lent into page-locked slot memory, preprocessed by the kernel, its outputs decoded and encoded)
//! and running the CUDA layer's kernel benchmark per resize filter. Must not: time inference (the
//! model's outputs come from one run of the configured backend, before the timed loop).

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::error::BenchError;
use super::stages::encode_message;
use super::summary::{summarise, StageSummary};
use crate::backend::Backend;
use crate::config::{Config, LimitsConfig};
use crate::decode::{DecodeParams, Decoder};
use crate::detection::Labels;
use crate::frame::{FrameSlot, FrameTimings};
use crate::infer::step;
use crate::source::image_decode;

/// How the GPU path bench's frame reaches its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuPathCapture {
    /// Copied into the slot: a V4L2 MMAP capture, a GStreamer upstream that refuses the pool.
    Copy,
    /// Written into page-locked slot memory before it reaches the source, and lent to the slot:
    /// the GStreamer slot pool, V4L2 user pointers.
    Lent,
}

/// The per-frame work outside inference on the GPU path, for a 1920×1080 YUYV camera (a common
/// V4L2 mode) and the configured model input: what the daemon spends on a frame besides the
/// model itself.
#[derive(Debug, Serialize)]
pub struct GpuPathBench {
    pub capture: GpuPathCapture,
    /// The camera frame and the model input it is preprocessed into.
    pub frame: String,
    pub input: String,
    /// Slot memory of this GPU: `mapped` (integrated: the kernel reads the slot in place) or
    /// `pinned` (discrete: the slot is copied to the device first).
    pub slot: &'static str,
    pub iterations: usize,
    /// The source putting the frame into its slot: the one copy, or lending it.
    pub source: StageSummary,
    /// Slot → the input tensor's row on the GPU, until the stream is synchronised.
    pub preprocess: StageSummary,
    /// Decoding the model's outputs for the image (run once on the configured backend), NMS and
    /// class filter, with boxes scaled to the 1080p frame.
    pub postprocess: StageSummary,
    /// Encoding the detections message.
    pub publish: StageSummary,
    /// All of the above for one frame.
    pub total: StageSummary,
}

/// Times [`GpuPathBench`]: the model outputs come from one run of `backend` on `image`; the frame
/// is a fixed pseudo-random YUYV pattern (timings on constant data can flatter).
#[allow(clippy::too_many_arguments)]
pub fn bench_gpu_path(
    capture: GpuPathCapture,
    device: &crate::gpu::GpuDevice,
    backend: &dyn Backend,
    params: DecodeParams,
    labels: &Labels,
    image: &Path,
    limits: &LimitsConfig,
    cache_dir: Option<&Path>,
    warmup: usize,
    iterations: usize,
) -> Result<GpuPathBench, BenchError> {
    use crate::frame::{FrameRing, HeapMemory, PixelFormat};
    use crate::gpu::{slot_memory, GpuPreprocessor};

    const WIDTH: u32 = 1920;
    const HEIGHT: u32 = 1080;
    let setup = |what: &str, e: &dyn std::fmt::Display| BenchError::Setup(format!("{what}: {e}"));
    let iterations = iterations.max(1);
    let spec = backend.spec().clone();

    let mut decoded = FrameSlot::new(Box::new(HeapMemory::default()));
    image_decode::decode_file(image, limits, &mut decoded).map_err(|e| setup("decoding the image", &e))?;
    let mut session = backend.new_session().map_err(|e| setup("creating a session", &e))?;
    let outputs = session.run(&decoded).map_err(|e| setup("running the model", &e))?.0.clone();
    drop(session);

    let frame_bytes = PixelFormat::Yuyv.frame_bytes(WIDTH, HEIGHT).unwrap_or(0);
    let frame: Vec<u8> = (0..frame_bytes).map(|i| ((i as u32).wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    device.bind_to_thread().map_err(|e| setup("binding the GPU", &e))?;
    let new_slot = || slot_memory(device).map(FrameSlot::new).map_err(|e| setup("allocating a frame slot", &e));
    let ring = FrameRing::new(vec![new_slot()?, new_slot()?]);
    // The memory upstream wrote the frame into (lent mode): it goes back and forth like a pool buffer.
    let (memory_back, returned_memory) = std::sync::mpsc::channel::<Box<dyn crate::frame::SlotMemory>>();
    let mut written = slot_memory(device).map_err(|e| setup("allocating a frame slot", &e))?;
    written.reserve(frame_bytes).map_err(|e| setup("allocating a frame slot", &e))?;
    written.as_mut_slice()[..frame_bytes].copy_from_slice(&frame);
    memory_back.send(written).map_err(|e| setup("lending the frame", &e))?;
    let stream = device.new_stream().map_err(|e| setup("creating a stream", &e))?;
    let mut preprocessor = GpuPreprocessor::new(device, stream.clone(), &spec, cache_dir, frame_bytes)
        .map_err(|e| setup("preparing the preprocessing kernel", &e))?;
    let mut input = stream.alloc_zeros::<u8>(spec.bytes()).map_err(|e| setup("allocating the input tensor", &e))?;
    let mut decoder = Decoder::new(params);
    let mut detections = Vec::new();
    let mut samples: Vec<FrameTimings> = Vec::with_capacity(iterations);
    for iteration in 0..warmup + iterations {
        let frame_error = |e: &dyn std::fmt::Display| BenchError::Frame { iteration, message: e.to_string() };
        let mut slot = ring.acquire_for_write().ok_or_else(|| frame_error(&"no free slot"))?;
        let source_started = Instant::now();
        match capture {
            GpuPathCapture::Copy => {
                slot.prepare(WIDTH, HEIGHT, PixelFormat::Yuyv).map_err(|e| frame_error(&e))?.copy_from_slice(&frame)
            }
            GpuPathCapture::Lent => {
                let memory = returned_memory.recv().map_err(|e| frame_error(&e))?;
                let loan = Box::new(BenchLoan { memory, back: memory_back.clone() });
                slot.lend(WIDTH, HEIGHT, PixelFormat::Yuyv, loan).map_err(|e| frame_error(&e))?;
            }
        }
        let source = source_started.elapsed();
        let pre_started = Instant::now();
        preprocessor.enqueue_row(&slot, &mut input, 0).map_err(|e| frame_error(&e))?;
        stream.synchronize().map_err(|e| frame_error(&e))?;
        let pre = pre_started.elapsed();
        let mut timings = step::decode_frame(
            &mut decoder,
            &spec,
            &slot,
            &outputs,
            crate::backend::BackendTimings { preprocess: pre, infer: Duration::ZERO },
            &mut detections,
        )
        .map_err(|e| frame_error(&e))?;
        encode_message(&mut timings, source, &slot, &detections, labels);
        ring.release(slot);
        if iteration >= warmup {
            samples.push(timings);
        }
    }
    let stage = |pick: fn(&FrameTimings) -> Option<Duration>| summarise(samples.iter().filter_map(pick).collect());
    Ok(GpuPathBench {
        capture,
        frame: format!("{WIDTH}x{HEIGHT} YUYV"),
        input: format!("{}x{} {:?} {:?} {:?}", spec.width, spec.height, spec.layout, spec.dtype, spec.filter),
        slot: if device.zero_copy() { "mapped" } else { "pinned" },
        iterations,
        source: stage(|t| t.source),
        preprocess: stage(|t| t.pre),
        postprocess: stage(|t| t.post),
        publish: stage(|t| t.publish),
        total: stage(|t| Some(t.source? + t.pre? + t.post? + t.publish?)),
    })
}

/// The bench's lent frame: page-locked memory holding the frame, sent back when the slot is done
/// with it, as a pool buffer goes back to its pool.
struct BenchLoan {
    memory: Box<dyn crate::frame::SlotMemory>,
    back: std::sync::mpsc::Sender<Box<dyn crate::frame::SlotMemory>>,
}

impl crate::frame::LentFrame for BenchLoan {
    fn bytes(&self) -> &[u8] {
        self.memory.as_slice()
    }

    fn memory(&self) -> &dyn crate::frame::SlotMemory {
        self.memory.as_ref()
    }
}

impl Drop for BenchLoan {
    fn drop(&mut self) {
        let memory = std::mem::replace(&mut self.memory, Box::new(crate::frame::HeapMemory::default()));
        // The bench's receiver outlives every loan; a send can only fail after it returned.
        let _ = self.back.send(memory);
    }
}

pub(super) fn gpu_path_bench(
    config: &Config,
    backend: &dyn Backend,
    params: DecodeParams,
    labels: &Labels,
    image: &Path,
    warmup: usize,
    iterations: usize,
) -> Result<serde_json::Value, BenchError> {
    let device = crate::gpu::GpuDevice::open(config.device.gpu as usize)
        .map_err(|e| BenchError::Setup(format!("opening the GPU: {e}")))?;
    let cache_dir = Some(config.engine.cache_dir.as_path());
    let mut reports = serde_json::Map::new();
    for capture in [GpuPathCapture::Copy, GpuPathCapture::Lent] {
        let report = bench_gpu_path(
            capture,
            &device,
            backend,
            params.clone(),
            labels,
            image,
            &config.limits,
            cache_dir,
            warmup,
            iterations,
        )?;
        let key =
            serde_json::to_value(capture).ok().and_then(|key| key.as_str().map(str::to_owned)).unwrap_or_default();
        reports.insert(key, serde_json::to_value(report).unwrap_or_default());
    }
    Ok(serde_json::Value::Object(reports))
}

pub(super) fn gpu_preprocess_bench(config: &Config) -> Result<serde_json::Value, BenchError> {
    use crate::config::ResizeFilter;
    use crate::gpu::{self, GpuDevice, PreprocessBenchRequest};
    let mut request = PreprocessBenchRequest::yuyv_1080p_to_640_nchw_f16_letterbox();
    request.cache_dir = Some(config.engine.cache_dir.clone());
    let device =
        GpuDevice::open(config.device.gpu as usize).map_err(|e| BenchError::Setup(format!("opening the GPU: {e}")))?;
    let mut reports = serde_json::Map::new();
    for (name, filter) in [("antialias", ResizeFilter::Antialias), ("bilinear", ResizeFilter::Bilinear)] {
        request.spec.filter = filter;
        let report = gpu::bench_preprocess(&device, &request)
            .map_err(|e| BenchError::Setup(format!("GPU preprocessing benchmark: {e}")))?;
        reports.insert(name.to_owned(), serde_json::to_value(report).unwrap_or_default());
    }
    Ok(serde_json::Value::Object(reports))
}
