//! The preprocessing kernel's host side: NVRTC compilation with an on-disk PTX cache, and launches
//! on a camera's stream.
//!
//! Owns: `preprocess.cu` (included at build time), the PTX cache files
//! `<cache_dir>/preprocess-<key>.ptx` (key = hash of kernel source, compile options, device name
//! and compute capability), the device staging buffer of discrete GPUs, and the device copies of
//! the sampling tables ([`AxisTaps`]) for the current frame size.
//! Must not: synchronise the stream (the caller does, once per frame, after inference), or
//! allocate per frame (only when the frame size changes).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{
    CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{CompileOptions, Ptx};
use sha2::{Digest, Sha256};

use super::slots::{HostMemoryKind, HostSlotMemory};
use super::{DriverContext, GpuDevice, GpuError};
use crate::config::{ColorOrder, ResizeFilter, TensorDtype, TensorLayout};
use crate::frame::{FrameMeta, FrameSlot, PixelFormat};
use crate::preprocess::{AxisTaps, PreprocessSpec, ResizeGeometry};

const KERNEL_SOURCE: &str = include_str!("preprocess.cu");

/// Output pixels per thread of the production kernel. The source also instantiates 2 (adjacent in
/// x, one vector store per NCHW plane), which the benchmark times against it: on an H100 both ran
/// the 1080p YUYV → 640² f16 case in the same 6.9 µs, and 1 keeps more threads in flight.
pub(crate) const PIXELS_PER_THREAD: u32 = 1;
const BLOCK: (u32, u32) = (32, 8);

/// Mirrors `struct Params` in `preprocess.cu` field for field.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct KernelParams {
    src: CUdeviceptr,
    dst: CUdeviceptr,
    x_taps: CUdeviceptr,
    x_weights: CUdeviceptr,
    y_taps: CUdeviceptr,
    y_weights: CUdeviceptr,
    src_w: i32,
    src_h: i32,
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
    pad: f32,
    swap_out: i32,
    antialias: i32,
}

// SAFETY: #[repr(C)] plain-old-data whose layout matches `struct Params` of the kernel (six 64-bit
// pointers, then 32-bit fields only, no padding differences); it is passed by value.
unsafe impl DeviceRepr for KernelParams {}

/// Turns frames into the model's input tensor on the GPU, on one camera's stream.
///
/// Per frame: [`GpuPreprocessor::run`] enqueues (discrete GPU) an async copy of the slot into a
/// device staging buffer and the kernel; on an integrated GPU with a mapped slot the kernel reads
/// the slot in place. Nothing is synchronised: the caller enqueues inference on the same stream,
/// synchronises once, and only then releases the slot back to the ring.
pub struct GpuPreprocessor {
    device: GpuDevice,
    stream: Arc<CudaStream>,
    spec: PreprocessSpec,
    /// Keeps the loaded module alive for `kernels`.
    _module: Arc<CudaModule>,
    /// One kernel per [`PixelFormat`], in `format_index` order.
    kernels: Vec<CudaFunction>,
    pixels_per_thread: u32,
    staging: Option<CudaSlice<u8>>,
    max_frame_bytes: usize,
    /// Step 2's tap tables (antialias only) for the last frame size seen.
    taps: Option<DeviceTaps>,
}

/// [`AxisTaps`] of both axes in device memory, for frames of `src_width` × `src_height`.
struct DeviceTaps {
    src_width: u32,
    src_height: u32,
    x: DeviceAxisTaps,
    y: DeviceAxisTaps,
}

impl DeviceTaps {
    fn upload(
        stream: &Arc<CudaStream>,
        filter: ResizeFilter,
        meta: &FrameMeta,
        geometry: &ResizeGeometry,
    ) -> Result<Self, GpuError> {
        Ok(DeviceTaps {
            src_width: meta.width,
            src_height: meta.height,
            x: DeviceAxisTaps::upload(stream, &AxisTaps::new(filter, meta.width, geometry.content_width))?,
            y: DeviceAxisTaps::upload(stream, &AxisTaps::new(filter, meta.height, geometry.content_height))?,
        })
    }
}

struct DeviceAxisTaps {
    /// `(first, count)` per content pixel.
    spans: CudaSlice<i32>,
    weights: CudaSlice<f32>,
    stride: i32,
}

impl DeviceAxisTaps {
    fn upload(stream: &Arc<CudaStream>, taps: &AxisTaps) -> Result<Self, GpuError> {
        let to_i32 = |value: u32| {
            i32::try_from(value)
                .map_err(|_| GpuError::FrameTooLarge { needed: value as usize, capacity: i32::MAX as usize })
        };
        let spans = taps
            .first
            .iter()
            .zip(&taps.count)
            .flat_map(|(first, count)| [to_i32(*first), to_i32(*count)])
            .collect::<Result<Vec<i32>, _>>()?;
        let stride = u32::try_from(taps.stride).map_or(Ok(i32::MAX), to_i32)?;
        Ok(DeviceAxisTaps {
            spans: stream.clone_htod(&spans).during("cuMemcpyHtoD(taps)")?,
            weights: stream.clone_htod(&taps.weights).during("cuMemcpyHtoD(weights)")?,
            stride,
        })
    }
}

impl GpuPreprocessor {
    /// Compiles (or loads from `cache_dir`) the kernel for `spec` and prepares for frames of up to
    /// `max_frame_bytes`. Call on the camera's GPU thread, once at start.
    pub fn new(
        device: &GpuDevice,
        stream: Arc<CudaStream>,
        spec: &PreprocessSpec,
        cache_dir: Option<&Path>,
        max_frame_bytes: usize,
    ) -> Result<Self, GpuError> {
        Self::with_pixels_per_thread(device, stream, spec, cache_dir, max_frame_bytes, PIXELS_PER_THREAD)
    }

    pub(crate) fn with_pixels_per_thread(
        device: &GpuDevice,
        stream: Arc<CudaStream>,
        spec: &PreprocessSpec,
        cache_dir: Option<&Path>,
        max_frame_bytes: usize,
        pixels_per_thread: u32,
    ) -> Result<Self, GpuError> {
        if spec.width == 0 || spec.height == 0 || i32::try_from(spec.elements()).is_err() {
            return Err(GpuError::TensorSize { width: spec.width, height: spec.height });
        }
        device.bind_to_thread()?;
        let module = device.preprocess_module(|| load_module(device, cache_dir))?;
        let kernels = ALL_FORMATS
            .iter()
            .map(|format| {
                let name = kernel_name(*format, spec.layout, spec.dtype, pixels_per_thread);
                module.load_function(&name).during("cuModuleGetFunction")
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(GpuPreprocessor {
            device: device.clone(),
            stream,
            spec: spec.clone(),
            _module: module,
            kernels,
            pixels_per_thread,
            staging: None,
            max_frame_bytes,
            taps: None,
        })
    }

    pub fn spec(&self) -> &PreprocessSpec {
        &self.spec
    }

    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Enqueues preprocessing of the frame in `slot` into `dst` (exactly `spec.bytes()` bytes).
    /// The slot must stay untouched until the stream has been synchronised.
    pub fn run(&mut self, slot: &FrameSlot, dst: &mut CudaSlice<u8>) -> Result<(), GpuError> {
        let stream = self.stream.clone();
        let dst_bytes = dst.len();
        let (dst_ptr, _dst_written) = dst.device_ptr_mut(&stream);
        // SAFETY: `dst_ptr` addresses `dst_bytes` bytes of device memory that stay alive (borrowed)
        // and are ordered on this stream by the guard.
        unsafe { self.run_into(slot, dst_ptr, dst_bytes) }
    }

    /// [`GpuPreprocessor::run`] into raw device memory (e.g. a TensorRT input binding).
    ///
    /// # Safety
    /// `dst` must address at least `dst_bytes` bytes of device memory of this context that stay
    /// allocated until the stream has executed the kernel.
    pub unsafe fn run_into(&mut self, slot: &FrameSlot, dst: CUdeviceptr, dst_bytes: usize) -> Result<(), GpuError> {
        self.check_output(dst_bytes)?;
        let frame = slot.data();
        let mapped = slot
            .memory()
            .as_any()
            .downcast_ref::<HostSlotMemory>()
            .filter(|memory| memory.kind() == HostMemoryKind::Mapped)
            .and_then(HostSlotMemory::device_ptr);
        match mapped {
            Some(src) => self.launch(src, slot.meta(), dst),
            None => {
                let capacity = self.max_frame_bytes;
                if frame.len() > capacity {
                    return Err(GpuError::FrameTooLarge { needed: frame.len(), capacity });
                }
                self.device.bind_to_thread()?;
                let stream = self.stream.clone();
                let mut staging = match self.staging.take() {
                    Some(staging) => staging,
                    None => stream.alloc_zeros::<u8>(capacity.max(1)).during("cuMemAlloc(staging)")?,
                };
                let (src, staging_written) = staging.device_ptr_mut(&stream);
                // SAFETY: `src` has `capacity >= frame.len()` bytes; `frame` stays valid until the
                // stream is synchronised (the slot is not released before, see `run`). Pinned
                // slots make this copy truly asynchronous; pageable memory is staged by the driver.
                let result = cudarc::driver::result::memcpy_htod_async(src, frame, stream.cu_stream())
                    .during("cuMemcpyHtoDAsync")
                    .and_then(|()| self.launch(src, slot.meta(), dst));
                drop(staging_written);
                self.staging = Some(staging);
                result
            }
        }
    }

    /// Enqueues preprocessing of a frame already in device memory (`src` holds at least the
    /// frame's bytes). Used by the benchmark and by sources that decode on the GPU.
    pub fn run_device(
        &mut self,
        src: &CudaSlice<u8>,
        meta: &FrameMeta,
        dst: &mut CudaSlice<u8>,
    ) -> Result<(), GpuError> {
        self.check_output(dst.len())?;
        let needed = meta
            .format
            .frame_bytes(meta.width, meta.height)
            .ok_or(GpuError::FrameTooLarge { needed: usize::MAX, capacity: src.len() })?;
        if needed > src.len() {
            return Err(GpuError::FrameTooLarge { needed, capacity: src.len() });
        }
        let stream = self.stream.clone();
        let (src_ptr, _src_read) = src.device_ptr(&stream);
        let (dst_ptr, _dst_written) = dst.device_ptr_mut(&stream);
        // SAFETY: both pointers address live device allocations of the checked sizes, ordered
        // on this stream by their guards.
        unsafe { self.launch(src_ptr, meta, dst_ptr) }
    }

    fn check_output(&self, actual: usize) -> Result<(), GpuError> {
        let expected = self.spec.bytes();
        if actual != expected {
            return Err(GpuError::OutputSize { expected, actual });
        }
        Ok(())
    }

    /// # Safety
    /// `src` addresses the whole frame described by `meta` and `dst` `spec.bytes()` bytes, both
    /// device-accessible in this context until the stream has run the kernel.
    unsafe fn launch(&mut self, src: CUdeviceptr, meta: &FrameMeta, dst: CUdeviceptr) -> Result<(), GpuError> {
        let geometry = self.spec.geometry(meta.width, meta.height);
        // Bilinear computes its two taps per axis in the kernel (no dependent table loads; the
        // same f32 operations as `AxisTaps`); antialias reads the tables.
        let taps = match self.spec.filter {
            ResizeFilter::Bilinear => None,
            ResizeFilter::Antialias => Some(match self.taps.take() {
                Some(taps) if (taps.src_width, taps.src_height) == (meta.width, meta.height) => self.taps.insert(taps),
                _ => self.taps.insert(DeviceTaps::upload(&self.stream, self.spec.filter, meta, &geometry)?),
            }),
        };
        let spec = &self.spec;
        let stream = &self.stream;
        let (x_taps, _x_taps_read) = taps.as_ref().map(|taps| taps.x.spans.device_ptr(stream)).unzip();
        let (x_weights, _x_weights_read) = taps.as_ref().map(|taps| taps.x.weights.device_ptr(stream)).unzip();
        let (y_taps, _y_taps_read) = taps.as_ref().map(|taps| taps.y.spans.device_ptr(stream)).unzip();
        let (y_weights, _y_weights_read) = taps.as_ref().map(|taps| taps.y.weights.device_ptr(stream)).unzip();
        let to_i32 = |value: u32| {
            i32::try_from(value)
                .map_err(|_| GpuError::FrameTooLarge { needed: value as usize, capacity: i32::MAX as usize })
        };
        let params = KernelParams {
            src,
            dst,
            x_taps: x_taps.unwrap_or(0),
            x_weights: x_weights.unwrap_or(0),
            y_taps: y_taps.unwrap_or(0),
            y_weights: y_weights.unwrap_or(0),
            src_w: to_i32(meta.width)?,
            src_h: to_i32(meta.height)?,
            out_w: to_i32(spec.width)?,
            out_h: to_i32(spec.height)?,
            content_w: to_i32(geometry.content_width)?,
            content_h: to_i32(geometry.content_height)?,
            pad_x: to_i32(geometry.pad_x)?,
            pad_y: to_i32(geometry.pad_y)?,
            x_stride: taps.as_ref().map_or(0, |taps| taps.x.stride),
            y_stride: taps.as_ref().map_or(0, |taps| taps.y.stride),
            antialias: i32::from(spec.filter == ResizeFilter::Antialias),
            mean: spec.mean,
            std: spec.std,
            pad: f32::from(spec.pad),
            swap_out: i32::from(spec.color == ColorOrder::Bgr),
        };
        let threads_x = BLOCK.0 * self.pixels_per_thread;
        let config = LaunchConfig {
            grid_dim: (spec.width.div_ceil(threads_x), spec.height.div_ceil(BLOCK.1), 1),
            block_dim: (BLOCK.0, BLOCK.1, 1),
            shared_mem_bytes: 0,
        };
        let kernel = &self.kernels[format_index(meta.format)];
        let mut launch = self.stream.launch_builder(kernel);
        launch.arg(&params);
        // SAFETY: the kernel reads only the frame bytes `src` was checked to hold (every tap
        // index lies inside the frame the tables were built for, which is this frame's size) and
        // writes exactly `spec.bytes()` bytes at `dst` (caller contract); the tap tables live in
        // `self.taps` and are ordered on this stream by their guards; `params` matches the
        // kernel's parameter struct.
        unsafe { launch.launch(config) }.during("cuLaunchKernel(preprocess)")?;
        Ok(())
    }
}

const ALL_FORMATS: [PixelFormat; 5] =
    [PixelFormat::Rgb8, PixelFormat::Bgr8, PixelFormat::Rgba8, PixelFormat::Yuyv, PixelFormat::Nv12];

fn format_index(format: PixelFormat) -> usize {
    match format {
        PixelFormat::Rgb8 => 0,
        PixelFormat::Bgr8 => 1,
        PixelFormat::Rgba8 => 2,
        PixelFormat::Yuyv => 3,
        PixelFormat::Nv12 => 4,
    }
}

fn kernel_name(format: PixelFormat, layout: TensorLayout, dtype: TensorDtype, pixels_per_thread: u32) -> String {
    let layout = match layout {
        TensorLayout::Nchw => "nchw",
        TensorLayout::Nhwc => "nhwc",
    };
    let dtype = match dtype {
        TensorDtype::U8 => "u8",
        TensorDtype::F16 => "f16",
        TensorDtype::F32 => "f32",
    };
    format!("preprocess_{}_{layout}_{dtype}_x{pixels_per_thread}", format.name())
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
fn load_module(device: &GpuDevice, cache_dir: Option<&Path>) -> Result<Arc<CudaModule>, GpuError> {
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
        if let Err(error) = write_atomically(path, ptx.as_bytes()) {
            log::warn!("cannot cache the preprocessing kernel at {}: {error}", path.display());
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

/// Temp file in the same directory, fsync, rename, fsync the directory: a crash never leaves a
/// truncated file under the final name.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    std::fs::create_dir_all(&dir)?;
    let temp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default(),
        std::process::id()
    ));
    let result = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        std::fs::File::open(&dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_params_match_the_cuda_struct_size() {
        // Six pointers, ten ints, seven floats and two ints: 48 + 40 + 28 + 8 = 124 bytes, padded
        // to 128 for the pointers' alignment (in C as in Rust).
        assert_eq!(std::mem::size_of::<KernelParams>(), 128);
    }

    #[test]
    fn every_kernel_name_is_instantiated_in_the_source() {
        for format in ALL_FORMATS {
            let name = format.name();
            let instantiation = format!("FOR_LAYOUTS(FMT_{}, {name}, PIX)", name.to_uppercase());
            assert!(KERNEL_SOURCE.contains(&instantiation), "{instantiation} missing");
        }
        assert!(KERNEL_SOURCE.contains(&format!("FOR_FORMATS({PIXELS_PER_THREAD})")));
        assert_eq!(
            kernel_name(PixelFormat::Nv12, TensorLayout::Nhwc, TensorDtype::F16, 2),
            "preprocess_nv12_nhwc_f16_x2"
        );
    }

    #[test]
    fn atomic_write_replaces_the_file_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub").join("k.ptx");
        write_atomically(&path, b"first").expect("write");
        write_atomically(&path, b"second").expect("rewrite");
        assert_eq!(std::fs::read(&path).expect("read"), b"second");
        assert_eq!(std::fs::read_dir(path.parent().expect("parent")).expect("list").count(), 1, "no temp file left");
    }
}
