//! The motion luma image on the GPU: `motion.cu`'s kernel turns the frame in a slot into the
//! small luma image `crate::motion` judges, on a stream of its own, reading a mapped slot in place.
//!
//! Owns: [`GpuLumaSampler`] (its stream, the kernels of the shared module, a device buffer for the
//! cells, page-locked host memory they come back to, the event that says they are there and, for
//! slots the GPU cannot read in place, a staging buffer), and its [`LumaSampler`] side for a
//! camera's gate: a frame whose cells are not back within [`LATE_AFTER`], or that comes while an
//! earlier one is still on the stream, is declined (the gate downscales it on the CPU). Must not:
//! judge motion (the CPU does that on the small image: a few kilobytes), allocate per frame (only
//! when another frame size or grid arrives), or touch the inference worker's stream.
//!
//! Thread: a camera's source thread (it decides whether a frame goes to the worker at all, so it
//! cannot wait for the worker, nor for long on the GPU); it binds the device's primary context,
//! as slot allocation on that thread already does, and waits only on its own stream's event, for
//! at most its bound ([`GpuLumaSampler::run`], for tests and the benchmark, waits for the result).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::sys::{CUdeviceptr, CUevent_flags};
use cudarc::driver::{
    CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, LaunchConfig,
    PinnedHostSlice, PushKernelArg,
};

use super::error::{DriverContext, GpuError};
use super::preprocessor::{format_index, load_module, ALL_FORMATS};
use super::probe::GpuDevice;
use super::slots::mapped_device_ptr;
use crate::frame::{FrameMeta, FrameSlot};
use crate::motion::{luma_bytes, CellGrid, LumaImage, LumaSampler, Sampled, SamplerFailed};

/// Threads per block: 128 neighbouring cells of one cell row.
const BLOCK: u32 = 128;
/// How long a camera's gate waits for a frame's cells before it judges the frame on the CPU: the
/// kernel takes tens of microseconds (a 1080p frame: 9–16 µs on an H200 from device memory), so
/// only a GPU busy with other work for milliseconds makes it late, and then the CPU's downscale
/// (0.4–1 ms) is the quicker way.
pub const LATE_AFTER: Duration = Duration::from_millis(5);
/// Between two looks at the event while waiting for it.
const POLL: Duration = Duration::from_micros(20);

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
    /// The cells of the last frame, copied back: exactly one grid's bytes.
    host_cells: Option<PinnedHostSlice<u8>>,
    /// Recorded after each frame's copy back: complete once `host_cells` holds its cells.
    done: CudaEvent,
    /// A frame's work was left on the stream when it was late: nothing of the sampler's is
    /// touched until `done` says it has finished.
    in_flight: bool,
    staging: Option<CudaSlice<u8>>,
    /// How long [`LumaSampler::sample`] waits for a frame's cells.
    late_after: Duration,
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
        let done =
            device.context().new_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING)).during("cuEventCreate(motion)")?;
        Ok(GpuLumaSampler {
            device: device.clone(),
            stream: device.new_stream()?,
            _module: module,
            kernels,
            cells: None,
            host_cells: None,
            done,
            in_flight: false,
            staging: None,
            late_after: LATE_AFTER,
        })
    }

    /// The same with another bound on [`LumaSampler::sample`]'s wait (tests: zero makes most
    /// frames late).
    pub fn late_after(mut self, wait: Duration) -> GpuLumaSampler {
        self.late_after = wait;
        self
    }

    /// The luma image of the frame in `slot` into `out`: a mapped slot is read in place, any other
    /// is copied to the GPU first. Returns once the image is in `out`.
    pub fn run(&mut self, slot: &FrameSlot, out: &mut LumaImage) -> Result<(), GpuError> {
        self.run_within(slot, out, None).map(drop)
    }

    /// [`GpuLumaSampler::run`], waiting at most `wait` (`None`: until it is done) for the cells:
    /// false when they were not back in time, or (with a bound) an earlier frame's work is still on
    /// the stream (then nothing is launched); `out` is written only when true.
    pub fn run_within(
        &mut self,
        slot: &FrameSlot,
        out: &mut LumaImage,
        wait: Option<Duration>,
    ) -> Result<bool, GpuError> {
        let meta = slot.meta();
        let needed = frame_bytes(meta)?;
        let frame = slot.data();
        if frame.len() < needed {
            return Err(GpuError::FrameTooLarge { needed, capacity: frame.len() });
        }
        self.device.bind_to_thread()?;
        // An earlier frame's work still on the stream: declined without waiting for it.
        if !self.finished(wait.map(|_| Duration::ZERO))? {
            return Ok(false);
        }
        let grid = match mapped_device_ptr(slot) {
            // SAFETY: the mapped slot's device address holds the frame's `needed` bytes while the
            // slot is held, until `wait_done` has seen the stream finish. A frame that is late
            // leaves its kernel reading the slot's page-locked memory after the slot went on (the
            // sampler reads no result of it): the memory stays allocated, as a slot's memory is
            // freed only when it grows, which first synchronises the context (`super::slots`), or
            // with its ring, which outlives the camera's gate, whose sampler waits for a late
            // frame's work when dropped.
            Some(src) => unsafe { self.enqueue(src, meta) }?,
            None => {
                let stream = self.stream.clone();
                let mut staging = match self.staging.take() {
                    Some(staging) if staging.len() >= needed => staging,
                    _ => stream.alloc_zeros::<u8>(needed).during("cuMemAlloc(motion staging)")?,
                };
                let copied = stream.memcpy_htod(&frame[..needed], &mut staging).during("cuMemcpyHtoDAsync(motion)");
                let (src, staging_read) = staging.device_ptr(&stream);
                // SAFETY: `src` holds the frame's `needed` bytes on this stream, and `staging` is
                // kept (and not written again) until `done` says the stream has finished.
                let grid = copied.and_then(|()| unsafe { self.enqueue(src, meta) });
                drop(staging_read);
                self.staging = Some(staging);
                grid?
            }
        };
        self.collect(grid, out, wait)
    }

    /// The luma image of a frame already in device memory (`src` holds at least its bytes), for
    /// tests and the benchmark; waits for the result.
    pub fn run_device(&mut self, src: &CudaSlice<u8>, meta: &FrameMeta, out: &mut LumaImage) -> Result<(), GpuError> {
        let needed = frame_bytes(meta)?;
        if src.len() < needed {
            return Err(GpuError::FrameTooLarge { needed, capacity: src.len() });
        }
        self.device.bind_to_thread()?;
        self.finished(None)?;
        let stream = self.stream.clone();
        let (src_ptr, src_read) = src.device_ptr(&stream);
        // SAFETY: `src` is a live device allocation of at least the frame's bytes, borrowed until
        // `collect` below has waited for the stream to finish.
        let grid = unsafe { self.enqueue(src_ptr, meta) };
        drop(src_read);
        self.collect(grid?, out, None).map(drop)
    }

    /// Whether the stream has finished the work a late frame left on it, waiting at most `wait`.
    fn finished(&mut self, wait: Option<Duration>) -> Result<bool, GpuError> {
        if self.in_flight {
            self.in_flight = !self.wait_done(wait)?;
        }
        Ok(!self.in_flight)
    }

    /// Waits for `done`, at most `wait` (`None`: until it completes); true once it has.
    fn wait_done(&self, wait: Option<Duration>) -> Result<bool, GpuError> {
        let Some(wait) = wait else {
            self.done.synchronize().during("cuEventSynchronize(motion)")?;
            return Ok(true);
        };
        let deadline = Instant::now() + wait;
        loop {
            if self.done.try_is_complete().during("cuEventQuery(motion)")? {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            std::thread::sleep(POLL.min(deadline - now));
        }
    }

    /// The cells of the frame `enqueue` launched into `out`, once `done` completes within `wait`;
    /// false (and the work left in flight) when it does not.
    fn collect(&mut self, grid: CellGrid, out: &mut LumaImage, wait: Option<Duration>) -> Result<bool, GpuError> {
        if !self.wait_done(wait)? {
            self.in_flight = true;
            return Ok(false);
        }
        // `enqueue` leaves the host memory of the cells it launched.
        let Some(host_cells) = self.host_cells.as_ref() else { return Ok(false) };
        let cells = host_cells.as_slice().during("cuEventSynchronize(motion cells)")?;
        out.prepare(grid).copy_from_slice(&cells[..grid.len()]);
        Ok(true)
    }

    /// Launches the kernel on the frame at `src`, copies the cells back to `host_cells` and
    /// records `done` after them; returns the frame's grid without waiting.
    ///
    /// # Safety
    /// `src` must address the whole frame `meta` describes, device-readable in this context until
    /// `done` has completed, and the stream must have finished the sampler's earlier work.
    unsafe fn enqueue(&mut self, src: CUdeviceptr, meta: &FrameMeta) -> Result<CellGrid, GpuError> {
        let grid = CellGrid::new(meta.width, meta.height);
        let to_i32 = |value: usize| {
            i32::try_from(value).map_err(|_| GpuError::FrameTooLarge { needed: value, capacity: i32::MAX as usize })
        };
        let row_bytes = meta.width as usize * luma_bytes(meta.format);
        let (row_bytes, cell, cols, rows) =
            (to_i32(row_bytes)?, to_i32(grid.cell as usize)?, to_i32(grid.cols as usize)?, to_i32(grid.rows as usize)?);
        let stream = self.stream.clone();
        let mut cells = match self.cells.take() {
            Some(cells) if cells.len() >= grid.len() => cells,
            _ => stream.alloc_zeros::<u8>(grid.len()).during("cuMemAlloc(motion cells)")?,
        };
        let mut host_cells = match self.host_cells.take() {
            Some(host) if host.len() == grid.len() => host,
            // SAFETY: page-locked host memory the copy below writes whole before anything reads it.
            _ => unsafe { self.device.context().alloc_pinned_with_flags::<u8>(grid.len(), 0) }
                .during("cuMemHostAlloc(motion cells)")?,
        };
        let launched = {
            let (dst, cells_written) = cells.device_ptr_mut(&stream);
            let params = LumaParams { src, dst, row_bytes, cell, cols, rows };
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
            stream.memcpy_dtoh(&cells.slice(..grid.len()), &mut host_cells).during("cuMemcpyDtoHAsync(motion cells)")
        });
        let recorded = copied.and_then(|()| self.done.record(&stream).during("cuEventRecord(motion)"));
        self.cells = Some(cells);
        self.host_cells = Some(host_cells);
        recorded.map(|()| grid)
    }
}

impl Drop for GpuLumaSampler {
    /// A late frame's kernel may still read its slot: it finishes before the sampler (and the
    /// camera's gate that holds it) is gone, so the ring, dropped after the gate, frees no memory
    /// the GPU reads.
    fn drop(&mut self) {
        if self.in_flight {
            if let Err(error) = self.done.synchronize() {
                log::warn!("motion luma sampler: waiting for its last frame failed: {error}");
            }
        }
    }
}

/// A camera's gate asks without waiting longer than [`LATE_AFTER`] (or the sampler's own bound);
/// a frame the kernel cannot take is the CPU's to try (and to refuse), anything else ends the
/// sampler's use.
impl LumaSampler for GpuLumaSampler {
    fn sample(&mut self, slot: &FrameSlot, out: &mut LumaImage) -> Result<Sampled, SamplerFailed> {
        match self.run_within(slot, out, Some(self.late_after)) {
            Ok(true) => Ok(Sampled::Ready),
            Ok(false) | Err(GpuError::FrameTooLarge { .. }) => Ok(Sampled::Declined),
            Err(error) => Err(SamplerFailed(format!("GPU: {error}"))),
        }
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
