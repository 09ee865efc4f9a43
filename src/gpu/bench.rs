//! Preprocessing benchmark (`jetson-detectd bench` and `benches/preprocess.rs`): kernel time with
//! device events, achieved bandwidth against a measured device-to-device copy, batches of frames
//! written into the rows of one tensor, the upload and zero-copy paths, and the CPU implementation
//! on the same frame.
//!
//! Owns: measurement only. Must not: be used on the pipeline's hot path.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream};
use serde::Serialize;

use super::error::{DriverContext, GpuError};
use super::preprocessor::GpuPreprocessor;
use super::preprocessor::{AntialiasKernel, DEFAULT_TILE_ROWS};
use super::probe::{GpuDevice, GpuProbe};
use super::slots::{HostMemoryKind, HostSlotMemory};
use crate::config::{ColorOrder, ResizeFilter, ResizeKind, TensorDtype, TensorLayout};
use crate::frame::{FrameMeta, FrameSlot, PixelFormat, SlotMemory};
use crate::preprocess::{CpuPreprocessor, PreprocessSpec};

/// What to benchmark.
#[derive(Debug, Clone)]
pub struct PreprocessBenchRequest {
    pub src_width: u32,
    pub src_height: u32,
    pub format: PixelFormat,
    pub spec: PreprocessSpec,
    /// Timed kernel launches per variant (the median is reported).
    pub samples: usize,
    /// Distinct random frames rotated through, so the frames do not sit in L2 between launches.
    pub input_sets: usize,
    /// Timed CPU runs.
    pub cpu_samples: usize,
    /// Resample tile sizes timed besides the production one (antialias only).
    pub other_tile_rows: Vec<u32>,
    pub cache_dir: Option<PathBuf>,
}

impl PreprocessBenchRequest {
    /// The reference case: 1920×1080 YUYV → 640×640 NCHW f16, letterbox, ImageNet mean/std.
    pub fn yuyv_1080p_to_640_nchw_f16_letterbox() -> Self {
        PreprocessBenchRequest {
            src_width: 1920,
            src_height: 1080,
            format: PixelFormat::Yuyv,
            spec: PreprocessSpec {
                name: None,
                width: 640,
                height: 640,
                layout: TensorLayout::Nchw,
                dtype: TensorDtype::F16,
                color: ColorOrder::Rgb,
                resize: ResizeKind::Letterbox,
                filter: ResizeFilter::Antialias,
                pad: 114,
                mean: [123.675, 116.28, 103.53],
                std: [58.395, 57.12, 57.375],
            },
            samples: 500,
            input_sets: 24,
            cpu_samples: 20,
            other_tile_rows: vec![4],
            cache_dir: None,
        }
    }
}

/// Timing of one kernel variant.
#[derive(Debug, Clone, Serialize)]
pub struct KernelTiming {
    /// `"resample"` (tiled, separable; antialias) or `"single-pass"` (one thread per output pixel).
    pub kernel: &'static str,
    /// Output rows per resample tile, as requested (the plan may take fewer to fit shared memory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tile_rows: Option<u32>,
    /// Median of single launches, each bracketed by events with launches queued ahead of it.
    pub median_us: f64,
    pub p10_us: f64,
    pub p90_us: f64,
    /// Mean of 200 launches back to back (includes launch gaps, if the host cannot keep up).
    pub back_to_back_mean_us: f64,
    /// `bytes_moved / median`.
    pub bandwidth_gb_s: f64,
    /// `median / floor`.
    pub over_floor: f64,
}

/// Preprocessing of one batch of frames into the rows of one input tensor.
#[derive(Debug, Clone, Serialize)]
pub struct BatchTiming {
    pub frames: usize,
    /// Median of whole batches (all rows' launches between one pair of events).
    pub median_us: f64,
    /// `median / frames`.
    pub per_frame_us: f64,
}

/// Benchmark result, serialised as JSON by the `bench` subcommand.
#[derive(Debug, Clone, Serialize)]
pub struct PreprocessBenchReport {
    pub device: GpuProbe,
    pub source: String,
    pub tensor: String,
    pub input_sets: usize,
    /// Frame bytes read once plus tensor bytes written once.
    pub bytes_moved: u64,
    /// Large device-to-device copy, bytes read plus bytes written per second.
    pub copy_bandwidth_gb_s: f64,
    /// `bytes_moved / copy_bandwidth`: no kernel can be much faster.
    pub floor_us: f64,
    /// Production variant first; the production variant and its alternative are each timed twice
    /// to show the run-to-run spread, other tile sizes once.
    pub kernels: Vec<KernelTiming>,
    /// The production kernel writing N different frames into the N rows of one batch tensor, for
    /// N = 1, 2, 4, 8.
    pub batch: Vec<BatchTiming>,
    /// Discrete path: pinned slot → device staging copy of one frame.
    pub pinned_upload_median_us: f64,
    /// Discrete path, whole: pinned slot → staging copy → kernel (`GpuPreprocessor::run`).
    pub pinned_slot_median_us: f64,
    /// Kernel reading the frame straight from mapped host memory (the integrated-GPU path; over
    /// PCIe on a discrete GPU).
    pub mapped_kernel_median_us: f64,
    /// CPU implementation on the same frame (one thread).
    pub cpu_median_us: f64,
    /// `cpu_median / production kernel median`.
    pub cpu_over_gpu: f64,
}

/// Runs the benchmark on the calling thread (binds the device's context to it).
pub fn bench_preprocess(
    device: &GpuDevice,
    request: &PreprocessBenchRequest,
) -> Result<PreprocessBenchReport, GpuError> {
    device.bind_to_thread()?;
    let stream = device.new_stream()?;
    let spec = &request.spec;
    let frame_bytes = request
        .format
        .frame_bytes(request.src_width, request.src_height)
        .ok_or(GpuError::FrameTooLarge { needed: usize::MAX, capacity: 0 })?;
    let meta = FrameMeta {
        width: request.src_width,
        height: request.src_height,
        format: request.format,
        sequence: 0,
        captured_at: SystemTime::now(),
    };
    let mut random = XorShift(0x9E37_79B9_7F4A_7C15);
    let host_frames: Vec<Vec<u8>> = (0..request.input_sets.max(1)).map(|_| random.bytes(frame_bytes)).collect();
    let inputs = host_frames
        .iter()
        .map(|frame| stream.clone_htod(frame).during("cuMemcpyHtoD(frames)"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut outputs = (0..4)
        .map(|_| stream.alloc_zeros::<u8>(spec.bytes()).during("cuMemAlloc(outputs)"))
        .collect::<Result<Vec<_>, _>>()?;

    let bytes_moved = (frame_bytes + spec.bytes()) as u64;
    let copy_bandwidth = copy_bandwidth_bytes_per_s(device, &stream)?;
    let floor_us = bytes_moved as f64 / copy_bandwidth * 1e6;

    let new_preprocessor = |kernel| {
        GpuPreprocessor::with_antialias_kernel(
            device,
            stream.clone(),
            spec,
            request.cache_dir.as_deref(),
            frame_bytes,
            kernel,
        )
    };
    let production = AntialiasKernel::Resample { tile_rows: DEFAULT_TILE_ROWS };
    let variants = match spec.filter {
        ResizeFilter::Bilinear => vec![AntialiasKernel::SinglePass; 2],
        ResizeFilter::Antialias => {
            let mut variants = vec![production, AntialiasKernel::SinglePass, production, AntialiasKernel::SinglePass];
            variants.extend(
                request
                    .other_tile_rows
                    .iter()
                    .filter(|rows| **rows != DEFAULT_TILE_ROWS)
                    .map(|rows| AntialiasKernel::Resample { tile_rows: *rows }),
            );
            variants
        }
    };
    let mut kernels = Vec::new();
    for variant in variants {
        let mut preprocessor = new_preprocessor(variant)?;
        let timing = time_kernel(device, &stream, &mut preprocessor, &inputs, &mut outputs, &meta, request.samples)?;
        let (kernel, tile_rows) = match variant {
            AntialiasKernel::Resample { tile_rows } => ("resample", Some(tile_rows)),
            AntialiasKernel::SinglePass => ("single-pass", None),
        };
        kernels.push(KernelTiming {
            kernel,
            tile_rows,
            bandwidth_gb_s: bytes_moved as f64 / timing.median_us / 1e3,
            over_floor: timing.median_us / floor_us,
            median_us: timing.median_us,
            p10_us: timing.p10_us,
            p90_us: timing.p90_us,
            back_to_back_mean_us: timing.back_to_back_mean_us,
        });
    }

    let mut preprocessor = new_preprocessor(production)?;
    let batch = [1, 2, 4, 8]
        .into_iter()
        .map(|frames| time_batch(device, &stream, &mut preprocessor, &inputs, &meta, frames, request.samples))
        .collect::<Result<Vec<_>, _>>()?;
    let slot_samples = request.samples.min(100);
    let pinned_upload_median_us = time_upload(device, &stream, &host_frames[0], slot_samples)?;
    let pinned = HostSlotMemory::new(device, frame_bytes, HostMemoryKind::Pinned)?;
    let pinned_slot_median_us = time_slot(
        device,
        &stream,
        &mut preprocessor,
        Box::new(pinned),
        &host_frames[0],
        &meta,
        &mut outputs[0],
        slot_samples,
    )?;
    let mapped = HostSlotMemory::new(device, frame_bytes, HostMemoryKind::Mapped)?;
    let mapped_kernel_median_us = time_slot(
        device,
        &stream,
        &mut preprocessor,
        Box::new(mapped),
        &host_frames[0],
        &meta,
        &mut outputs[0],
        slot_samples,
    )?;

    let mut cpu = CpuPreprocessor::new();
    let mut cpu_out = vec![0u8; spec.bytes()];
    let mut cpu_times = Vec::with_capacity(request.cpu_samples);
    for sample in 0..request.cpu_samples.max(1) + 2 {
        let frame = &host_frames[sample % host_frames.len()];
        let started = Instant::now();
        cpu.run(frame, &meta, spec, &mut cpu_out)?;
        if sample >= 2 {
            cpu_times.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    let cpu_median_us = percentile(&mut cpu_times, 0.5);

    Ok(PreprocessBenchReport {
        device: device.probe().clone(),
        source: format!("{}x{} {}", meta.width, meta.height, meta.format.name()),
        tensor: describe_spec(spec),
        input_sets: inputs.len(),
        bytes_moved,
        copy_bandwidth_gb_s: copy_bandwidth / 1e9,
        floor_us,
        batch,
        pinned_upload_median_us,
        pinned_slot_median_us,
        mapped_kernel_median_us,
        cpu_median_us,
        cpu_over_gpu: cpu_median_us / kernels[0].median_us,
        kernels,
    })
}

fn describe_spec(spec: &PreprocessSpec) -> String {
    let (width, height, layout, dtype) = (spec.width, spec.height, spec.layout, spec.dtype);
    format!("{width}x{height} {layout:?} {dtype:?} {:?} {:?}", spec.resize, spec.filter).to_lowercase()
}

struct KernelStats {
    median_us: f64,
    p10_us: f64,
    p90_us: f64,
    back_to_back_mean_us: f64,
}

fn timing_event(device: &GpuDevice) -> Result<CudaEvent, GpuError> {
    device.context().new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).during("cuEventCreate")
}

fn elapsed_us(start: &CudaEvent, end: &CudaEvent) -> Result<f64, GpuError> {
    Ok(f64::from(start.elapsed_ms(end).during("cuEventElapsedTime")?) * 1e3)
}

fn time_kernel(
    device: &GpuDevice,
    stream: &Arc<CudaStream>,
    preprocessor: &mut GpuPreprocessor,
    inputs: &[CudaSlice<u8>],
    outputs: &mut [CudaSlice<u8>],
    meta: &FrameMeta,
    samples: usize,
) -> Result<KernelStats, GpuError> {
    const QUEUED_AHEAD: usize = 3;
    let (start, end) = (timing_event(device)?, timing_event(device)?);
    let mut launch = 0usize;
    let mut run = |preprocessor: &mut GpuPreprocessor| {
        launch += 1;
        let output = &mut outputs[launch % outputs.len()];
        preprocessor.enqueue_device_row(&inputs[launch % inputs.len()], meta, output, 0)
    };
    for _ in 0..20 {
        run(preprocessor)?;
    }
    stream.synchronize().during("cuStreamSynchronize")?;
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples.max(1) {
        // Launches queued ahead keep the GPU busy while the host enqueues the timed one, so the
        // events bracket the kernel, not the host's launch latency.
        for _ in 0..QUEUED_AHEAD {
            run(preprocessor)?;
        }
        start.record(stream).during("cuEventRecord")?;
        run(preprocessor)?;
        end.record(stream).during("cuEventRecord")?;
        times.push(elapsed_us(&start, &end)?);
    }
    const BACK_TO_BACK: usize = 200;
    start.record(stream).during("cuEventRecord")?;
    for _ in 0..BACK_TO_BACK {
        run(preprocessor)?;
    }
    end.record(stream).during("cuEventRecord")?;
    let back_to_back_mean_us = elapsed_us(&start, &end)? / BACK_TO_BACK as f64;
    Ok(KernelStats {
        median_us: percentile(&mut times, 0.5),
        p10_us: percentile(&mut times, 0.1),
        p90_us: percentile(&mut times, 0.9),
        back_to_back_mean_us,
    })
}

/// Device-to-device copy of 256 MiB; counts bytes read plus bytes written.
fn copy_bandwidth_bytes_per_s(device: &GpuDevice, stream: &Arc<CudaStream>) -> Result<f64, GpuError> {
    const BYTES: usize = 256 << 20;
    let mut random = XorShift(0x2545_F491_4F6C_DD1D);
    let source = stream.clone_htod(&random.bytes(BYTES)).during("cuMemcpyHtoD(copy source)")?;
    let mut destination = stream.alloc_zeros::<u8>(BYTES).during("cuMemAlloc(copy destination)")?;
    let (start, end) = (timing_event(device)?, timing_event(device)?);
    let mut times = Vec::new();
    for round in 0..13 {
        start.record(stream).during("cuEventRecord")?;
        stream.memcpy_dtod(&source, &mut destination).during("cuMemcpyDtoD")?;
        end.record(stream).during("cuEventRecord")?;
        let elapsed = elapsed_us(&start, &end)?;
        if round >= 3 {
            times.push(elapsed);
        }
    }
    Ok(2.0 * BYTES as f64 / (percentile(&mut times, 0.5) * 1e-6))
}

fn time_upload(device: &GpuDevice, stream: &Arc<CudaStream>, frame: &[u8], samples: usize) -> Result<f64, GpuError> {
    let mut pinned = HostSlotMemory::new(device, frame.len(), HostMemoryKind::Pinned)?;
    pinned.as_mut_slice()[..frame.len()].copy_from_slice(frame);
    let mut staging = stream.alloc_zeros::<u8>(frame.len()).during("cuMemAlloc(staging)")?;
    let (start, end) = (timing_event(device)?, timing_event(device)?);
    let mut times = Vec::new();
    for round in 0..samples.max(1) + 3 {
        start.record(stream).during("cuEventRecord")?;
        stream.memcpy_htod(&pinned.as_slice()[..frame.len()], &mut staging).during("cuMemcpyHtoDAsync")?;
        end.record(stream).during("cuEventRecord")?;
        let elapsed = elapsed_us(&start, &end)?;
        if round >= 3 {
            times.push(elapsed);
        }
    }
    Ok(percentile(&mut times, 0.5))
}

/// `GpuPreprocessor::run` from a slot in `memory` (pinned: copy + kernel; mapped: the kernel reads
/// host memory), events around each run.
#[allow(clippy::too_many_arguments)]
fn time_slot(
    device: &GpuDevice,
    stream: &Arc<CudaStream>,
    preprocessor: &mut GpuPreprocessor,
    memory: Box<dyn SlotMemory>,
    frame: &[u8],
    meta: &FrameMeta,
    output: &mut CudaSlice<u8>,
    samples: usize,
) -> Result<f64, GpuError> {
    let mut slot = FrameSlot::new(memory);
    slot.prepare(meta.width, meta.height, meta.format)
        .map_err(|_| GpuError::FrameTooLarge { needed: frame.len(), capacity: frame.len() })?
        .copy_from_slice(frame);
    let (start, end) = (timing_event(device)?, timing_event(device)?);
    let mut times = Vec::new();
    for round in 0..samples.max(1) + 3 {
        start.record(stream).during("cuEventRecord")?;
        preprocessor.run(&slot, output)?;
        end.record(stream).during("cuEventRecord")?;
        let elapsed = elapsed_us(&start, &end)?;
        if round >= 3 {
            times.push(elapsed);
        }
    }
    Ok(percentile(&mut times, 0.5))
}

/// `frames` different frames into the rows of one batch tensor, events around the whole batch.
fn time_batch(
    device: &GpuDevice,
    stream: &Arc<CudaStream>,
    preprocessor: &mut GpuPreprocessor,
    inputs: &[CudaSlice<u8>],
    meta: &FrameMeta,
    frames: usize,
    samples: usize,
) -> Result<BatchTiming, GpuError> {
    let bytes = preprocessor.spec().bytes() * frames;
    let mut batches =
        (0..2).map(|_| stream.alloc_zeros::<u8>(bytes).during("cuMemAlloc(batch)")).collect::<Result<Vec<_>, _>>()?;
    let (start, end) = (timing_event(device)?, timing_event(device)?);
    let mut round = 0usize;
    let mut run = |preprocessor: &mut GpuPreprocessor| -> Result<(), GpuError> {
        round += 1;
        let batch = &mut batches[round % 2];
        for row in 0..frames {
            preprocessor.enqueue_device_row(&inputs[(round * frames + row) % inputs.len()], meta, batch, row)?;
        }
        Ok(())
    };
    for _ in 0..10 {
        run(preprocessor)?;
    }
    stream.synchronize().during("cuStreamSynchronize")?;
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples.max(1) {
        // A batch queued ahead keeps the GPU busy while the host enqueues the timed one.
        run(preprocessor)?;
        start.record(stream).during("cuEventRecord")?;
        run(preprocessor)?;
        end.record(stream).during("cuEventRecord")?;
        times.push(elapsed_us(&start, &end)?);
    }
    let median_us = percentile(&mut times, 0.5);
    Ok(BatchTiming { frames, median_us, per_frame_us: median_us / frames as f64 })
}

fn percentile(values: &mut [f64], quantile: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    values[((values.len() - 1) as f64 * quantile).round() as usize]
}

/// Deterministic pseudo-random bytes (xorshift64*): benchmark frames must not be constant.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(len + 8);
        while bytes.len() < len {
            bytes.extend_from_slice(&self.next().to_le_bytes());
        }
        bytes.truncate(len);
        bytes
    }
}
