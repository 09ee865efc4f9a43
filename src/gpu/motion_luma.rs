//! The motion luma image on the GPU: `motion.cu`'s kernel turns the frame in a slot into the
//! small luma image `crate::motion` judges, on a stream of its own, reading a mapped slot in place.
//!
//! Owns: [`GpuLumaSampler`] (its stream, the kernels of the shared module, a device buffer for the
//! cells and, for slots the GPU cannot read in place, a staging buffer). Must not: judge motion
//! (the CPU does that on the small image: a few kilobytes), allocate per frame (only when a larger
//! frame or grid arrives), or touch the inference worker's stream.
//!
//! Thread: a camera's source thread (it decides whether a frame goes to the worker at all, so it
//! cannot wait for the worker); it binds the device's primary context, as slot allocation on that
//! thread already does, and synchronises only its own stream, once per frame.

use std::path::Path;
use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{
    CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, LaunchConfig, PushKernelArg,
};

use super::error::{DriverContext, GpuError};
use super::preprocessor::{format_index, load_module, ALL_FORMATS};
use super::probe::GpuDevice;
use super::slots::{HostMemoryKind, HostSlotMemory};
use crate::frame::{FrameMeta, FrameSlot};
use crate::motion::{luma_bytes, CellGrid, LumaImage};

/// Threads per block: 128 neighbouring cells of one cell row.
const BLOCK: u32 = 128;

/// Mirrors `struct LumaParams` in `motion.cu` field for field.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct LumaParams {
    src: CUdeviceptr,
    dst: CUdeviceptr,
    row_bytes: i32,
    cell: i32,
    cols: i32,
    rows: i32,
}

// SAFETY: #[repr(C)] plain-old-data whose layout matches `struct LumaParams` of the kernel (two
// 64-bit pointers, then four 32-bit ints, no padding); it is passed by value.
unsafe impl DeviceRepr for LumaParams {}

/// Makes luma images of frames on the GPU.
pub struct GpuLumaSampler {
    device: GpuDevice,
    stream: Arc<CudaStream>,
    /// Keeps the loaded module alive for the kernels.
    _module: Arc<CudaModule>,
    /// One kernel per format, in `format_index` order.
    kernels: Vec<CudaFunction>,
    cells: Option<CudaSlice<u8>>,
    staging: Option<CudaSlice<u8>>,
}

impl GpuLumaSampler {
    /// Loads the kernels (the preprocessing module, compiled or from `cache_dir`) and creates the
    /// sampler's stream, on the calling thread.
    pub fn new(device: &GpuDevice, cache_dir: Option<&Path>) -> Result<GpuLumaSampler, GpuError> {
        device.bind_to_thread()?;
        let module = device.preprocess_module(|| load_module(device, cache_dir))?;
        let kernels = ALL_FORMATS
            .iter()
            .map(|format| module.load_function(&format!("luma_{}", format.name())).during("cuModuleGetFunction"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(GpuLumaSampler {
            device: device.clone(),
            stream: device.new_stream()?,
            _module: module,
            kernels,
            cells: None,
            staging: None,
        })
    }

    /// The luma image of the frame in `slot` into `out`: a mapped slot is read in place, any other
    /// is copied to the GPU first. Returns once the image is in `out`.
    pub fn run(&mut self, slot: &FrameSlot, out: &mut LumaImage) -> Result<(), GpuError> {
        let meta = slot.meta();
        let needed = frame_bytes(meta)?;
        let frame = slot.data();
        if frame.len() < needed {
            return Err(GpuError::FrameTooLarge { needed, capacity: frame.len() });
        }
        self.device.bind_to_thread()?;
        let mapped = slot
            .memory()
            .as_any()
            .downcast_ref::<HostSlotMemory>()
            .filter(|memory| memory.kind() == HostMemoryKind::Mapped)
            .and_then(HostSlotMemory::device_ptr);
        match mapped {
            // SAFETY: the mapped slot's device address holds the frame's `needed` bytes while the
            // slot is held, which is until `sample` has synchronised the stream.
            Some(src) => unsafe { self.sample(src, meta, out) },
            None => {
                let stream = self.stream.clone();
                let mut staging = match self.staging.take() {
                    Some(staging) if staging.len() >= needed => staging,
                    _ => stream.alloc_zeros::<u8>(needed).during("cuMemAlloc(motion staging)")?,
                };
                let copied = stream.memcpy_htod(&frame[..needed], &mut staging).during("cuMemcpyHtoDAsync(motion)");
                let (src, staging_read) = staging.device_ptr(&stream);
                // SAFETY: `src` holds the frame's `needed` bytes on this stream, and `staging` is
                // kept until `sample` has synchronised it.
                let result = copied.and_then(|()| unsafe { self.sample(src, meta, out) });
                drop(staging_read);
                self.staging = Some(staging);
                result
            }
        }
    }

    /// The luma image of a frame already in device memory (`src` holds at least its bytes), for
    /// tests and the benchmark.
    pub fn run_device(&mut self, src: &CudaSlice<u8>, meta: &FrameMeta, out: &mut LumaImage) -> Result<(), GpuError> {
        let needed = frame_bytes(meta)?;
        if src.len() < needed {
            return Err(GpuError::FrameTooLarge { needed, capacity: src.len() });
        }
        self.device.bind_to_thread()?;
        let stream = self.stream.clone();
        let (src_ptr, src_read) = src.device_ptr(&stream);
        // SAFETY: `src` is a live device allocation of at least the frame's bytes, borrowed until
        // `sample` has synchronised the stream.
        let result = unsafe { self.sample(src_ptr, meta, out) };
        drop(src_read);
        result
    }

    /// Launches the kernel on the frame at `src` and copies the cells into `out`; synchronises.
    ///
    /// # Safety
    /// `src` must address the whole frame `meta` describes, device-readable in this context until
    /// the stream has been synchronised (which this does before it returns).
    unsafe fn sample(&mut self, src: CUdeviceptr, meta: &FrameMeta, out: &mut LumaImage) -> Result<(), GpuError> {
        let grid = CellGrid::new(meta.width, meta.height);
        let stream = self.stream.clone();
        let mut cells = match self.cells.take() {
            Some(cells) if cells.len() >= grid.len() => cells,
            _ => stream.alloc_zeros::<u8>(grid.len()).during("cuMemAlloc(motion cells)")?,
        };
        let to_i32 = |value: usize| {
            i32::try_from(value).map_err(|_| GpuError::FrameTooLarge { needed: value, capacity: i32::MAX as usize })
        };
        let row_bytes = meta.width as usize * luma_bytes(meta.format);
        let launched = {
            let (dst, cells_written) = cells.device_ptr_mut(&stream);
            let params = LumaParams {
                src,
                dst,
                row_bytes: to_i32(row_bytes)?,
                cell: to_i32(grid.cell as usize)?,
                cols: to_i32(grid.cols as usize)?,
                rows: to_i32(grid.rows as usize)?,
            };
            let config = LaunchConfig {
                grid_dim: (grid.cols.div_ceil(BLOCK), grid.rows, 1),
                block_dim: (BLOCK, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut launch = stream.launch_builder(&self.kernels[format_index(meta.format)]);
            launch.arg(&params);
            // SAFETY: the kernel reads only the pixels of whole cells, which lie inside the frame
            // at `src` (caller contract: `cols · cell <= width`, `rows · cell <= height` rows of
            // `row_bytes`), and writes `cols · rows` bytes at `dst`, which `cells` holds; `params`
            // matches the kernel's parameter struct.
            let launched = unsafe { launch.launch(config) }.map(drop).during("cuLaunchKernel(luma)");
            drop(cells_written);
            launched
        };
        let copied = launched.and_then(|()| {
            let values = out.prepare(grid);
            stream.memcpy_dtoh(&cells.slice(..grid.len()), values).during("cuMemcpyDtoH(motion cells)")
        });
        let synchronised = copied.and_then(|()| stream.synchronize().during("cuStreamSynchronize(motion)"));
        self.cells = Some(cells);
        synchronised
    }
}

/// The bytes of a whole `meta` frame, or an error for a size the format cannot have.
fn frame_bytes(meta: &FrameMeta) -> Result<usize, GpuError> {
    meta.format.frame_bytes(meta.width, meta.height).ok_or(GpuError::FrameTooLarge { needed: usize::MAX, capacity: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luma_params_match_the_cuda_struct_size() {
        // Two pointers and four ints: 16 + 16 = 32 bytes.
        assert_eq!(std::mem::size_of::<LumaParams>(), 32);
    }

    #[test]
    fn every_format_has_a_kernel_in_the_source() {
        let source = super::super::preprocessor::KERNEL_SOURCE;
        for format in ALL_FORMATS {
            let name = format!("extern \"C\" __global__ void luma_{}(LumaParams p)", format.name());
            assert!(source.contains(&name), "{name} missing");
        }
    }
}
