//! The preprocessing kernels' host side: NVRTC compilation with an on-disk PTX cache, and launches
//! that write one frame, or a region of interest of it ([`Roi`]: a classifier's crop, read in place
//! through its offset and the frame's row pitch), into one row of a (batched) input tensor on a
//! stream.
//!
//! Owns: `preprocess.cu` (included at build time), the PTX cache files
//! `<cache_dir>/preprocess-<key>.ptx` (key = hash of kernel source, compile options, device name
//! and compute capability), the device staging buffer of discrete GPUs (sized like the largest
//! slot it has staged: a driver that negotiates a larger mode than configured grows it once), and the device copies of
//! the sampling tables ([`KernelTaps`]) and tile plans of the last [`TAP_CACHE_SIZES`] source sizes.
//! Must not: synchronise the stream (the caller does, once per batch, after inference), or
//! allocate per frame (only when a frame size not in the cache arrives).

use std::path::Path;
use std::sync::Arc;

use cudarc::driver::sys::{CUdevice_attribute, CUdeviceptr, CUfunction_attribute};
use cudarc::driver::{
    CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{CompileOptions, Ptx};
use sha2::{Digest, Sha256};

use super::error::{DriverContext, GpuError};
use super::probe::GpuDevice;
use super::slots::mapped_device_ptr;
use super::taps::{KernelTaps, TilePlan, BLOCK_ROWS, TILE_WIDTH};
use crate::config::{ColorOrder, ResizeFilter, TensorDtype, TensorLayout};
use crate::frame::{FrameMeta, FrameSlot, PixelFormat};
use crate::preprocess::{AxisTaps, PreprocessSpec, Roi};

/// The kernels' source: the preprocessing kernels, then the motion luma kernels
/// (`super::motion_luma`), one module.
pub(super) const KERNEL_SOURCE: &str = concat!(include_str!("preprocess.cu"), "\n", include_str!("motion.cu"));

/// Frame sizes whose sampling tables stay on the device: one per camera of a batch, for the few
/// cameras one inference worker serves; the least recently used size is dropped beyond that.
pub const TAP_CACHE_SIZES: usize = 8;

/// Output rows per resample tile: 8 keeps the 1080p → 640 case inside 48 KiB of shared memory
/// (see `src/gpu/NOTES.md` for the measurements behind it).
pub(crate) const DEFAULT_TILE_ROWS: u32 = 8;

/// Which kernel turns frames into tensors with `filter = "antialias"` (bilinear always uses the
/// single-pass kernel, which computes its two taps per axis in place).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AntialiasKernel {
    /// The tiled separable kernel, `tile_rows` output rows per tile (fewer when a tile's source
    /// window would not fit in shared memory); the single-pass kernel where even one row does not.
    Resample { tile_rows: u32 },
    /// The single-pass kernel: every output pixel reads and converts all its taps.
    SinglePass,
}

/// Mirrors `struct Params` in `preprocess.cu` field for field.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct KernelParams {
    src: CUdeviceptr,
    dst: CUdeviceptr,
    x_taps: CUdeviceptr,
    y_taps: CUdeviceptr,
    chroma: CUdeviceptr,
    src_w: i32,
    src_h: i32,
    src_pitch: i32,
    out_w: i32,
    out_h: i32,
    content_w: i32,
    content_h: i32,
    pad_x: i32,
    pad_y: i32,
    x_stride: i32,
    y_stride: i32,
    mean: [f32; 3],
    std: [f32; 3],
    pad_value: [f32; 3],
    swap_out: i32,
    antialias: i32,
    tile_rows: i32,
    stage_rows: i32,
    stage_pitch: i32,
}

// SAFETY: #[repr(C)] plain-old-data whose layout matches `struct Params` of the kernel (five 64-bit
// pointers, then 32-bit fields only, no padding differences); it is passed by value.
unsafe impl DeviceRepr for KernelParams {}

/// Turns frames into rows of the model's input tensor on the GPU, on one stream.
///
/// Per frame: [`GpuPreprocessor::enqueue_row`] enqueues (discrete GPU) an async copy of the slot
/// into a device staging buffer and the kernel that writes row `k` of the batch; on an integrated
/// GPU with a mapped slot the kernel reads the slot in place. The frames of one batch may differ in
/// size and pixel format (cameras differ). Nothing is synchronised: the caller enqueues every row of
/// a batch, then inference on the same stream, synchronises once, and only then releases the slots
/// back to their rings.
pub struct GpuPreprocessor {
    device: GpuDevice,
    stream: Arc<CudaStream>,
    spec: PreprocessSpec,
    /// Keeps the loaded module alive for the kernels.
    _module: Arc<CudaModule>,
    /// Single-pass kernels, one per [`PixelFormat`] in `format_index` order.
    single_pass: Vec<CudaFunction>,
    /// Tiled antialias kernels, in the same order.
    resample: Vec<CudaFunction>,
    antialias_kernel: AntialiasKernel,
    /// Dynamic shared memory a resample block may use on this device.
    shared_limit: usize,
    staging: Option<CudaSlice<u8>>,
    max_frame_bytes: usize,
    /// Step 2's tap tables (antialias only) per frame size, most recently used first.
    taps: Vec<DeviceTaps>,
}

/// [`KernelTaps`] of both axes in device memory, for frames of `src_width` × `src_height`, and the
/// resample kernel's tile plan for them (`None`: the single-pass kernel runs).
struct DeviceTaps {
    src_width: u32,
    src_height: u32,
    x: DeviceAxisTaps,
    y: DeviceAxisTaps,
    plan: Option<TilePlan>,
}

struct DeviceAxisTaps {
    /// [`KernelTaps::records`].
    records: CudaSlice<u32>,
    stride: i32,
}

impl DeviceAxisTaps {
    fn upload(stream: &Arc<CudaStream>, taps: &KernelTaps) -> Result<Self, GpuError> {
        Ok(DeviceAxisTaps {
            records: stream.clone_htod(&taps.records).during("cuMemcpyHtoD(taps)")?,
            stride: i32::try_from(taps.stride).map_err(|_| too_large(taps.stride))?,
        })
    }
}

fn too_large(value: usize) -> GpuError {
    GpuError::FrameTooLarge { needed: value, capacity: i32::MAX as usize }
}

fn to_i32(value: u32) -> Result<i32, GpuError> {
    i32::try_from(value).map_err(|_| too_large(value as usize))
}

impl GpuPreprocessor {
    /// Compiles (or loads from `cache_dir`) the kernels for `spec` and prepares for frames of up to
    /// `max_frame_bytes` (the largest frame of any camera it serves). Call on the GPU thread, once
    /// at start.
    pub fn new(
        device: &GpuDevice,
        stream: Arc<CudaStream>,
        spec: &PreprocessSpec,
        cache_dir: Option<&Path>,
        max_frame_bytes: usize,
    ) -> Result<Self, GpuError> {
        let kernel = AntialiasKernel::Resample { tile_rows: DEFAULT_TILE_ROWS };
        Self::with_antialias_kernel(device, stream, spec, cache_dir, max_frame_bytes, kernel)
    }

    pub(crate) fn with_antialias_kernel(
        device: &GpuDevice,
        stream: Arc<CudaStream>,
        spec: &PreprocessSpec,
        cache_dir: Option<&Path>,
        max_frame_bytes: usize,
        antialias_kernel: AntialiasKernel,
    ) -> Result<Self, GpuError> {
        if spec.width == 0 || spec.height == 0 || i32::try_from(spec.elements()).is_err() {
            return Err(GpuError::TensorSize { width: spec.width, height: spec.height });
        }
        device.bind_to_thread()?;
        let module = device.preprocess_module(|| load_module(device, cache_dir))?;
        let load = |prefix: &str| {
            ALL_FORMATS
                .iter()
                .map(|format| {
                    let name = kernel_name(prefix, *format, spec.layout, spec.dtype);
                    module.load_function(&name).during("cuModuleGetFunction")
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let (single_pass, resample) = (load("preprocess")?, load("resample")?);
        let shared_limit = device
            .context()
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .during("cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)")?;
        // Blocks get more than 48 KiB of dynamic shared memory only after opting in per kernel.
        for kernel in &resample {
            kernel
                .set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_limit)
                .during("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")?;
        }
        Ok(GpuPreprocessor {
            device: device.clone(),
            stream,
            spec: spec.clone(),
            _module: module,
            single_pass,
            resample,
            antialias_kernel,
            shared_limit: usize::try_from(shared_limit).unwrap_or(0),
            staging: None,
            max_frame_bytes,
            taps: Vec::with_capacity(TAP_CACHE_SIZES),
        })
    }

    pub fn spec(&self) -> &PreprocessSpec {
        &self.spec
    }

    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Enqueues preprocessing of the frame in `slot` into `dst`, a tensor of batch 1 (exactly
    /// `spec.bytes()` bytes). The slot must stay untouched until the stream has been synchronised.
    pub fn run(&mut self, slot: &FrameSlot, dst: &mut CudaSlice<u8>) -> Result<(), GpuError> {
        self.check_output(dst.len())?;
        self.enqueue_row(slot, dst, 0)
    }

    /// Enqueues preprocessing of the frame in `slot` into row `row` of `batch`, an input tensor of
    /// `batch.len() / spec.bytes()` rows (`[B, C, H, W]` or `[B, H, W, C]`). Rows of one batch may
    /// come from frames of different sizes and pixel formats; the kernel writes only its row. The
    /// slot must stay untouched until the stream has been synchronised.
    pub fn enqueue_row(&mut self, slot: &FrameSlot, batch: &mut CudaSlice<u8>, row: usize) -> Result<(), GpuError> {
        let stream = self.stream.clone();
        let batch_bytes = batch.len();
        let (batch_ptr, _batch_written) = batch.device_ptr_mut(&stream);
        // SAFETY: `batch_ptr` addresses `batch_bytes` bytes of device memory that stay alive
        // (borrowed) and are ordered on this stream by the guard.
        unsafe { self.enqueue_row_into(slot, batch_ptr, batch_bytes, row) }
    }

    /// [`GpuPreprocessor::enqueue_row`] with `roi` of the slot's frame as the source.
    pub fn enqueue_roi_row(
        &mut self,
        slot: &FrameSlot,
        roi: Roi,
        batch: &mut CudaSlice<u8>,
        row: usize,
    ) -> Result<(), GpuError> {
        let stream = self.stream.clone();
        let batch_bytes = batch.len();
        let (batch_ptr, _batch_written) = batch.device_ptr_mut(&stream);
        // SAFETY: as in `enqueue_row`.
        unsafe { self.enqueue_roi_row_into(slot, roi, batch_ptr, batch_bytes, row) }
    }

    /// [`GpuPreprocessor::enqueue_row`] into raw device memory (e.g. a TensorRT input binding).
    ///
    /// # Safety
    /// `batch` must address at least `batch_bytes` bytes of device memory of this context that stay
    /// allocated until the stream has executed the kernel.
    pub unsafe fn enqueue_row_into(
        &mut self,
        slot: &FrameSlot,
        batch: CUdeviceptr,
        batch_bytes: usize,
        row: usize,
    ) -> Result<(), GpuError> {
        // SAFETY: the caller's contract is this function's.
        unsafe { self.enqueue_roi_row_into(slot, Roi::full(slot.meta()), batch, batch_bytes, row) }
    }

    /// [`GpuPreprocessor::enqueue_row_into`] with `roi` of the slot's frame as the source (a
    /// detection's crop for a classifier): the kernel reads the region in place.
    ///
    /// # Safety
    /// As [`GpuPreprocessor::enqueue_row_into`].
    pub unsafe fn enqueue_roi_row_into(
        &mut self,
        slot: &FrameSlot,
        roi: Roi,
        batch: CUdeviceptr,
        batch_bytes: usize,
        row: usize,
    ) -> Result<(), GpuError> {
        roi.check(slot.meta()).map_err(GpuError::Roi)?;
        let dst = self.row_address(batch, batch_bytes, row)?;
        let frame = slot.data();
        match mapped_device_ptr(slot) {
            // SAFETY: `src` is the mapped slot's device address, valid for the frame's bytes while
            // the slot is held (until the stream is synchronised); `dst` is a row inside `batch`,
            // which the caller keeps allocated until then.
            Some(src) => unsafe { self.launch(src, slot.meta(), roi, dst) },
            None => {
                self.device.bind_to_thread()?;
                let stream = self.stream.clone();
                let current = self.staging.as_ref().map_or(0, CudaSlice::len);
                let grown = staging_size(current, frame.len(), slot.memory().capacity(), self.max_frame_bytes);
                let mut staging = match (self.staging.take(), grown) {
                    (Some(staging), None) => staging,
                    (old, size) => {
                        let size = size.unwrap_or(current).max(1);
                        if old.is_some() {
                            log::info!(
                                "GPU staging buffer grows from {current} to {size} bytes for a {}x{} {} frame",
                                slot.meta().width,
                                slot.meta().height,
                                slot.meta().format.name()
                            );
                        }
                        // The old buffer is freed in stream order, after the kernels that read it.
                        drop(old);
                        stream.alloc_zeros::<u8>(size).during("cuMemAlloc(staging)")?
                    }
                };
                if staging.len() < frame.len() {
                    let capacity = staging.len();
                    self.staging = Some(staging);
                    return Err(GpuError::FrameTooLarge { needed: frame.len(), capacity });
                }
                let (src, staging_written) = staging.device_ptr_mut(&stream);
                // SAFETY: `src` has at least `frame.len()` bytes (checked above); `frame` stays valid until the
                // stream is synchronised (the slot is not released before, see `enqueue_row`).
                // Pinned slots make this copy truly asynchronous; pageable memory is staged by the
                // driver. The next row's copy into the same buffer is ordered after this row's
                // kernel on the stream.
                let result = unsafe { cudarc::driver::result::memcpy_htod_async(src, frame, stream.cu_stream()) }
                    .during("cuMemcpyHtoDAsync")
                    // SAFETY: `src` now holds the frame on this stream; `dst` is a row inside
                    // `batch`, which the caller keeps allocated until the stream has run the kernel.
                    .and_then(|()| unsafe { self.launch(src, slot.meta(), roi, dst) });
                drop(staging_written);
                self.staging = Some(staging);
                result
            }
        }
    }

    /// Enqueues preprocessing of a frame already in device memory (`src` holds at least the
    /// frame's bytes) into row `row` of `batch`. Used by the benchmark and by sources that decode
    /// on the GPU.
    pub fn enqueue_device_row(
        &mut self,
        src: &CudaSlice<u8>,
        meta: &FrameMeta,
        batch: &mut CudaSlice<u8>,
        row: usize,
    ) -> Result<(), GpuError> {
        self.enqueue_device_roi_row(src, meta, Roi::full(meta), batch, row)
    }

    /// [`GpuPreprocessor::enqueue_device_row`] with `roi` of the frame as the source.
    pub fn enqueue_device_roi_row(
        &mut self,
        src: &CudaSlice<u8>,
        meta: &FrameMeta,
        roi: Roi,
        batch: &mut CudaSlice<u8>,
        row: usize,
    ) -> Result<(), GpuError> {
        roi.check(meta).map_err(GpuError::Roi)?;
        let needed = meta
            .format
            .frame_bytes(meta.width, meta.height)
            .ok_or(GpuError::FrameTooLarge { needed: usize::MAX, capacity: src.len() })?;
        if needed > src.len() {
            return Err(GpuError::FrameTooLarge { needed, capacity: src.len() });
        }
        let stream = self.stream.clone();
        let batch_bytes = batch.len();
        let (src_ptr, _src_read) = src.device_ptr(&stream);
        let (batch_ptr, _batch_written) = batch.device_ptr_mut(&stream);
        let dst = self.row_address(batch_ptr, batch_bytes, row)?;
        // SAFETY: both pointers address live device allocations of the checked sizes, ordered
        // on this stream by their guards.
        unsafe { self.launch(src_ptr, meta, roi, dst) }
    }

    fn check_output(&self, actual: usize) -> Result<(), GpuError> {
        let expected = self.spec.bytes();
        if actual != expected {
            return Err(GpuError::OutputSize { expected, actual });
        }
        Ok(())
    }

    /// Device address of row `row` of a batch of `batch_bytes` bytes at `batch`.
    fn row_address(&self, batch: CUdeviceptr, batch_bytes: usize, row: usize) -> Result<CUdeviceptr, GpuError> {
        let row_bytes = self.spec.bytes();
        if batch_bytes == 0 || !batch_bytes.is_multiple_of(row_bytes) {
            return Err(GpuError::OutputSize { expected: row_bytes, actual: batch_bytes });
        }
        let rows = batch_bytes / row_bytes;
        if row >= rows {
            return Err(GpuError::RowOutsideBatch { row, rows });
        }
        Ok(batch + (row * row_bytes) as CUdeviceptr)
    }

    /// Moves the tap tables and tile plan for sources of `width` × `height` to the front of the cache:
    /// cached, or built with the CPU code's [`AxisTaps`] and uploaded (dropping the least recently
    /// used size beyond [`TAP_CACHE_SIZES`]; its device memory is freed in stream order, after the
    /// kernels that read it).
    fn cache_taps(&mut self, width: u32, height: u32) -> Result<(), GpuError> {
        let size = (width, height);
        match self.taps.iter().position(|taps| (taps.src_width, taps.src_height) == size) {
            Some(0) => {}
            Some(index) => {
                let taps = self.taps.remove(index);
                self.taps.insert(0, taps);
            }
            None => {
                let geometry = self.spec.geometry(width, height);
                let filter = self.spec.filter;
                let kernel_taps = |src: u32, content: u32| {
                    KernelTaps::trimmed(&AxisTaps::new(filter, src, content)).ok_or(too_large(src as usize))
                };
                let x = kernel_taps(width, geometry.content_width)?;
                let y = kernel_taps(height, geometry.content_height)?;
                let plan = match self.antialias_kernel {
                    AntialiasKernel::Resample { tile_rows } => TilePlan::new(
                        &x,
                        &y,
                        &geometry,
                        self.spec.width,
                        self.spec.height,
                        tile_rows,
                        self.shared_limit,
                    ),
                    AntialiasKernel::SinglePass => None,
                };
                let taps = DeviceTaps {
                    src_width: width,
                    src_height: height,
                    x: DeviceAxisTaps::upload(&self.stream, &x)?,
                    y: DeviceAxisTaps::upload(&self.stream, &y)?,
                    plan,
                };
                self.taps.truncate(TAP_CACHE_SIZES - 1);
                self.taps.insert(0, taps);
            }
        }
        Ok(())
    }

    /// # Safety
    /// `src` addresses the whole frame described by `meta` and `dst` `spec.bytes()` bytes, both
    /// device-accessible in this context until the stream has run the kernel; `roi` has been
    /// checked against `meta`.
    unsafe fn launch(
        &mut self,
        src: CUdeviceptr,
        meta: &FrameMeta,
        roi: Roi,
        dst: CUdeviceptr,
    ) -> Result<(), GpuError> {
        let geometry = self.spec.geometry(roi.width, roi.height);
        // The region's first pixel and (NV12) its first chroma row, inside the checked frame.
        let (frame_width, frame_height) = (u64::from(meta.width), u64::from(meta.height));
        let (roi_x, roi_y) = (u64::from(roi.x), u64::from(roi.y));
        let bytes_per_pixel = match meta.format {
            PixelFormat::Rgb8 | PixelFormat::Bgr8 => 3,
            PixelFormat::Rgba8 => 4,
            PixelFormat::Yuyv => 2,
            PixelFormat::Nv12 => 1,
        };
        let roi_src = src + (roi_y * frame_width + roi_x) * bytes_per_pixel;
        let chroma = match meta.format {
            PixelFormat::Nv12 => src + frame_width * frame_height + (roi_y / 2) * frame_width + roi_x,
            _ => 0,
        };
        let stream = self.stream.clone();
        // Bilinear computes its two taps per axis in the kernel (no dependent table loads; the
        // same f32 operations as `AxisTaps`); antialias reads the tables.
        let taps = match self.spec.filter {
            ResizeFilter::Bilinear => None,
            ResizeFilter::Antialias => {
                self.cache_taps(roi.width, roi.height)?;
                self.taps.first()
            }
        };
        let plan = taps.and_then(|taps| taps.plan);
        let spec = &self.spec;
        let (x_taps, _x_taps_read) = taps.map(|taps| taps.x.records.device_ptr(&stream)).unzip();
        let (y_taps, _y_taps_read) = taps.map(|taps| taps.y.records.device_ptr(&stream)).unzip();
        let params = KernelParams {
            src: roi_src,
            dst,
            x_taps: x_taps.unwrap_or(0),
            y_taps: y_taps.unwrap_or(0),
            chroma,
            src_w: to_i32(roi.width)?,
            src_h: to_i32(roi.height)?,
            src_pitch: to_i32(meta.width)?,
            out_w: to_i32(spec.width)?,
            out_h: to_i32(spec.height)?,
            content_w: to_i32(geometry.content_width)?,
            content_h: to_i32(geometry.content_height)?,
            pad_x: to_i32(geometry.pad_x)?,
            pad_y: to_i32(geometry.pad_y)?,
            x_stride: taps.map_or(0, |taps| taps.x.stride),
            y_stride: taps.map_or(0, |taps| taps.y.stride),
            antialias: i32::from(spec.filter == ResizeFilter::Antialias),
            mean: spec.mean,
            std: spec.std,
            pad_value: pad_value(spec),
            swap_out: i32::from(spec.color == ColorOrder::Bgr),
            tile_rows: plan.map_or(Ok(0), |plan| to_i32(plan.tile_rows))?,
            stage_rows: plan.map_or(Ok(0), |plan| to_i32(plan.stage_rows))?,
            stage_pitch: plan.map_or(Ok(0), |plan| to_i32(plan.stage_pitch))?,
        };
        let (kernel, config) = match plan {
            Some(plan) => (
                &self.resample[format_index(meta.format)],
                LaunchConfig {
                    grid_dim: (spec.width.div_ceil(TILE_WIDTH), spec.height.div_ceil(plan.tile_rows), 1),
                    block_dim: (TILE_WIDTH, BLOCK_ROWS, 1),
                    shared_mem_bytes: u32::try_from(plan.shared_bytes()).map_err(|_| too_large(plan.shared_bytes()))?,
                },
            ),
            None => (
                &self.single_pass[format_index(meta.format)],
                LaunchConfig {
                    grid_dim: (spec.width.div_ceil(TILE_WIDTH), spec.height.div_ceil(BLOCK_ROWS), 1),
                    block_dim: (TILE_WIDTH, BLOCK_ROWS, 1),
                    shared_mem_bytes: 0,
                },
            ),
        };
        let mut launch = stream.launch_builder(kernel);
        launch.arg(&params);
        // SAFETY: the kernels read only the frame bytes `src` was checked to hold (every tap
        // index lies inside the source the tables were built for, which is this ROI's size; the
        // ROI lies inside the frame, starts on its chroma grid, and its rows are `src_pitch` apart
        // as the frame's are; the resample kernel stages only source pixels inside the ROI) and write exactly
        // `spec.bytes()` bytes at `dst` (caller contract); the tap tables live in `self.taps` and
        // are ordered on this stream by their guards (and freed in stream order when evicted); the
        // shared memory matches the plan the kernel indexes with; `params` matches the kernel's
        // parameter struct.
        unsafe { launch.launch(config) }.during("cuLaunchKernel(preprocess)")?;
        Ok(())
    }
}

/// The pad pixel after steps 3 and 4 of the definition (the same f32 operations as the CPU code),
/// so the kernels store it without recomputing it per pixel.
fn pad_value(spec: &PreprocessSpec) -> [f32; 3] {
    let pad = f32::from(spec.pad);
    match spec.dtype {
        TensorDtype::U8 => [pad; 3],
        TensorDtype::F16 | TensorDtype::F32 => [0, 1, 2].map(|c| (pad - spec.mean[c]) / spec.std[c]),
    }
}

pub(super) const ALL_FORMATS: [PixelFormat; 5] =
    [PixelFormat::Rgb8, PixelFormat::Bgr8, PixelFormat::Rgba8, PixelFormat::Yuyv, PixelFormat::Nv12];

pub(super) fn format_index(format: PixelFormat) -> usize {
    match format {
        PixelFormat::Rgb8 => 0,
        PixelFormat::Bgr8 => 1,
        PixelFormat::Rgba8 => 2,
        PixelFormat::Yuyv => 3,
        PixelFormat::Nv12 => 4,
    }
}

fn kernel_name(prefix: &str, format: PixelFormat, layout: TensorLayout, dtype: TensorDtype) -> String {
    let layout = match layout {
        TensorLayout::Nchw => "nchw",
        TensorLayout::Nhwc => "nhwc",
    };
    let dtype = match dtype {
        TensorDtype::U8 => "u8",
        TensorDtype::F16 => "f16",
        TensorDtype::F32 => "f32",
    };
    format!("{prefix}_{}_{layout}_{dtype}", format.name())
}

/// NVRTC options. `--fmad=false` keeps the kernel bit-identical to the CPU implementation.
fn compile_options(device: &GpuDevice) -> Vec<String> {
    let arch = device.probe().compute_capability.replace('.', "");
    vec![format!("--gpu-architecture=compute_{arch}"), "--fmad=false".to_owned(), "--std=c++17".to_owned()]
}

/// Cache file name: hash of everything the PTX depends on.
fn cache_key(device: &GpuDevice, options: &[String]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(KERNEL_SOURCE.as_bytes());
    for part in options
        .iter()
        .map(String::as_str)
        .chain([device.probe().name.as_str(), device.probe().compute_capability.as_str()])
    {
        hasher.update([0]);
        hasher.update(part.as_bytes());
    }
    hasher.finalize().iter().take(8).map(|byte| format!("{byte:02x}")).collect()
}

/// Loads the kernel module: cached PTX when it exists and loads, else NVRTC (then caches it).
pub(super) fn load_module(device: &GpuDevice, cache_dir: Option<&Path>) -> Result<Arc<CudaModule>, GpuError> {
    let options = compile_options(device);
    let cache_file = cache_dir.map(|dir| dir.join(format!("preprocess-{}.ptx", cache_key(device, &options))));
    if let Some(path) = &cache_file {
        if let Ok(ptx) = std::fs::read_to_string(path) {
            match device.context().load_module(Ptx::from_src(ptx)) {
                Ok(module) => return Ok(module),
                Err(error) => log::warn!("cached kernel {} does not load ({error}); recompiling", path.display()),
            }
        }
    }
    let ptx = compile(options)?;
    if let Some(path) = &cache_file {
        if let Err(error) = crate::sys::files::atomic_write(path, ptx.as_bytes()) {
            log::warn!("cannot cache the preprocessing kernel: {error}");
        }
    }
    device.context().load_module(Ptx::from_src(ptx)).during("cuModuleLoadData")
}

fn compile(options: Vec<String>) -> Result<String, GpuError> {
    // SAFETY: only tries to dlopen libnvrtc; cudarc panics on first use when it is missing.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(GpuError::NoNvrtc);
    }
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(
        KERNEL_SOURCE,
        CompileOptions { options, name: Some("preprocess.cu".to_owned()), ..CompileOptions::default() },
    )
    .map_err(|error| GpuError::Compile(error.to_string()))?;
    Ok(ptx.to_src())
}

/// The staging buffer's new size for a frame of `needed` bytes, or `None` while the `current`
/// one holds it: the slot's capacity (which the slot grew to for this or an earlier frame, within
/// `[limits]`), at least the frame and the `configured` size, so a larger mode grows it once.
fn staging_size(current: usize, needed: usize, slot_capacity: usize, configured: usize) -> Option<usize> {
    (needed > current || current == 0).then(|| needed.max(slot_capacity).max(configured))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_starts_at_the_configured_size_and_follows_a_larger_slot_once() {
        const MIB: usize = 1 << 20;
        assert_eq!(staging_size(0, 2 * MIB, 2 * MIB, 6 * MIB), Some(6 * MIB), "first frame: the configured size");
        assert_eq!(staging_size(6 * MIB, 2 * MIB, 2 * MIB, 6 * MIB), None, "fits");
        assert_eq!(
            staging_size(6 * MIB, 8 * MIB, 12 * MIB, 6 * MIB),
            Some(12 * MIB),
            "the slot's size, not the frame's"
        );
        assert_eq!(staging_size(12 * MIB, 12 * MIB, 12 * MIB, 6 * MIB), None, "grown once");
        assert_eq!(staging_size(0, 8 * MIB, 0, 6 * MIB), Some(8 * MIB), "never smaller than the frame");
    }

    #[test]
    fn kernel_params_match_the_cuda_struct_size() {
        // Five pointers, eleven ints, nine floats and five ints: 40 + 44 + 36 + 20 = 140 bytes,
        // padded to 144, a multiple of the pointers' alignment (in C as in Rust).
        assert_eq!(std::mem::size_of::<KernelParams>(), 144);
    }

    #[test]
    fn every_kernel_name_is_instantiated_in_the_source() {
        for format in ALL_FORMATS {
            let name = format.name();
            let instantiation = format!("FOR_LAYOUTS(FMT_{}, {name})", name.to_uppercase());
            assert!(KERNEL_SOURCE.contains(&instantiation), "{instantiation} missing");
        }
        for prefix in ["preprocess", "resample"] {
            assert!(KERNEL_SOURCE.contains(&format!(" {prefix}_##FNAME##_##LNAME##_##DNAME(Params p)")));
        }
        assert_eq!(
            kernel_name("resample", PixelFormat::Nv12, TensorLayout::Nhwc, TensorDtype::F16),
            "resample_nv12_nhwc_f16"
        );
    }

    #[test]
    fn kernel_constants_match_the_source() {
        assert!(KERNEL_SOURCE.contains(&format!("#define TILE_W {TILE_WIDTH}\n")));
        assert!(KERNEL_SOURCE.contains(&format!("#define BLOCK_ROWS {BLOCK_ROWS}\n")));
    }

    #[test]
    fn pad_value_is_the_cpu_definition_of_a_pad_pixel() {
        let mut spec = crate::preprocess::PreprocessSpec {
            name: None,
            width: 1,
            height: 1,
            layout: TensorLayout::Nchw,
            dtype: TensorDtype::F32,
            color: ColorOrder::Bgr,
            resize: crate::config::ResizeKind::Letterbox,
            filter: ResizeFilter::Antialias,
            pad: 114,
            mean: [123.675, 116.28, 103.53],
            std: [58.395, 57.12, 57.375],
        };
        // A 3x1 frame letterboxed into 3x3: rows 0 and 2 are pad.
        spec.width = 3;
        spec.height = 3;
        let meta = FrameMeta {
            width: 3,
            height: 1,
            format: PixelFormat::Rgb8,
            sequence: 0,
            captured_at: std::time::SystemTime::UNIX_EPOCH,
        };
        let mut out = vec![0u8; spec.bytes()];
        crate::preprocess::preprocess_cpu(&[9; 9], &meta, &spec, &mut out).expect("cpu");
        let values: Vec<f32> = out.chunks_exact(4).map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]])).collect();
        let pad = pad_value(&spec);
        for c in 0..3 {
            assert_eq!(values[c * 9].to_bits(), pad[c].to_bits(), "channel {c}, first pad pixel");
        }
        spec.dtype = TensorDtype::U8;
        assert_eq!(pad_value(&spec), [114.0; 3]);
    }
}
