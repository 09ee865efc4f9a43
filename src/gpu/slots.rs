//! Page-locked frame-slot memory: pinned (discrete GPUs: async copy on the inference worker's stream) or
//! pinned + mapped into the device address space (integrated GPUs: the kernel reads the frame in
//! place, zero copies).
//!
//! Owns: allocation and release of host slot memory ([`HostSlotMemory`] frees in Drop).
//! Must not: copy frames or launch kernels (that is the preprocessor's job).

use std::any::Any;
use std::ffi::c_void;

use cudarc::driver::sys::{self, CUdeviceptr};

use super::error::{DriverContext, GpuError};
use super::probe::GpuDevice;
use crate::frame::{FrameSlot, SlotMemory};

/// How a slot's page-locked memory reaches the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostMemoryKind {
    /// Page-locked; the GPU stage copies it to device memory asynchronously.
    Pinned,
    /// Page-locked and mapped: the kernel reads it through a device pointer.
    Mapped,
}

/// Page-locked host memory of one frame slot, sized by the frames the source delivers: it starts
/// empty and is reallocated when a frame needs more than it has (the first frame, and a source
/// that renegotiates a larger format). Sizing by a worst case instead would pin memory the OS
/// cannot page: 3 slots of 4K RGB per camera are 75 MB, on boards with 4 GB.
pub struct HostSlotMemory {
    /// Null while nothing is allocated.
    host: *mut u8,
    capacity: usize,
    kind: HostMemoryKind,
    /// Device address of the same bytes; `Some` for [`HostMemoryKind::Mapped`] once allocated.
    device: Option<CUdeviceptr>,
    /// Keeps the context (and thus the allocation's owner) alive until Drop.
    device_handle: GpuDevice,
}

// SAFETY: the memory is exclusively owned by this value (no aliasing handles are given out beyond
// borrows tied to `&self`/`&mut self`), and page-locked memory may be used from any thread.
unsafe impl Send for HostSlotMemory {}
// SAFETY: every `&self` method only reads: the fields, or the bytes through a shared slice. Writes
// need `&mut self` (or, for memory a GStreamer pool or a V4L2 driver was lent, happen only while no
// slot holds the frame: see `source::gstreamer::slot_pool` and `source::v4l2::userptr`).
unsafe impl Sync for HostSlotMemory {}

impl HostSlotMemory {
    /// Slot memory of `kind` holding `capacity` bytes (none allocated for 0). Binds the device's
    /// context to the calling thread, as every later growth does.
    pub fn new(device: &GpuDevice, capacity: usize, kind: HostMemoryKind) -> Result<Self, GpuError> {
        let mut slot = HostSlotMemory {
            host: std::ptr::null_mut(),
            capacity: 0,
            kind,
            device: None,
            device_handle: device.clone(),
        };
        if capacity > 0 {
            slot.grow(capacity)?;
        }
        Ok(slot)
    }

    /// Replaces the allocation with one of `bytes` bytes (zeroed). The frame in it is gone: only
    /// called while a source is about to write a new one. The worker's GPU work on it is done (a
    /// slot returns to its source only after the worker synchronised the stream that read it), but
    /// a camera's motion kernel that was late (`super::motion_luma`) may still read it: the
    /// context's work finishes before the old bytes are freed (growth is rare: a source's first
    /// larger frame).
    fn grow(&mut self, bytes: usize) -> Result<(), GpuError> {
        self.device_handle.bind_to_thread()?;
        if !self.host.is_null() {
            self.device_handle.context().synchronize().during("cuCtxSynchronize(slot growth)")?;
        }
        let flags = match self.kind {
            HostMemoryKind::Pinned => sys::CU_MEMHOSTALLOC_PORTABLE,
            HostMemoryKind::Mapped => sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP,
        };
        // SAFETY: cuMemHostAlloc with a non-zero size; the pointer is stored in `self` below (after
        // the old one is freed), whose Drop or next growth frees it exactly once.
        let host = unsafe { cudarc::driver::result::malloc_host(bytes, flags) }.during("cuMemHostAlloc")?;
        // SAFETY: `host` points to `bytes` writable bytes; zeroing them makes every later slice
        // view initialised memory and never exposes stale data.
        unsafe { std::ptr::write_bytes(host.cast::<u8>(), 0, bytes) };
        let mut device = None;
        if self.kind == HostMemoryKind::Mapped {
            let mut device_ptr: CUdeviceptr = 0;
            // SAFETY: `host` was allocated with CU_MEMHOSTALLOC_DEVICEMAP in the current context;
            // the call writes one device pointer through a valid pointer.
            let mapped = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device_ptr, host, 0) }.result();
            if let Err(error) = mapped {
                // SAFETY: `host` came from cuMemHostAlloc above and is not stored anywhere.
                let _ = unsafe { cudarc::driver::result::free_host(host) };
                return Err(GpuError::Driver { operation: "cuMemHostGetDevicePointer", source: error });
            }
            device = Some(device_ptr);
        }
        self.free();
        self.host = host.cast::<u8>();
        self.capacity = bytes;
        self.device = device;
        Ok(())
    }

    /// Frees the allocation, if any (the context is bound by the caller).
    fn free(&mut self) {
        if self.host.is_null() {
            return;
        }
        // SAFETY: `host` came from cuMemHostAlloc and is freed exactly once: the pointer is
        // cleared right after. No GPU work reads it (see `grow` and Drop).
        if let Err(error) = unsafe { cudarc::driver::result::free_host(self.host.cast::<c_void>()) } {
            log::warn!("cuMemFreeHost failed: {error}");
        }
        self.host = std::ptr::null_mut();
        self.capacity = 0;
        self.device = None;
    }

    pub fn kind(&self) -> HostMemoryKind {
        self.kind
    }

    /// Device address of the slot's bytes (mapped memory only).
    pub fn device_ptr(&self) -> Option<CUdeviceptr> {
        self.device
    }

    /// Host address of the slot's bytes, for async copies.
    pub fn host_ptr(&self) -> *const c_void {
        self.host.cast::<c_void>()
    }
}

impl SlotMemory for HostSlotMemory {
    fn capacity(&self) -> usize {
        self.capacity
    }

    fn reserve(&mut self, len: usize) -> Result<(), String> {
        if len > self.capacity {
            self.grow(len).map_err(|e| format!("cannot allocate {len} bytes of page-locked frame memory: {e}"))?;
        }
        Ok(())
    }

    fn as_slice(&self) -> &[u8] {
        if self.host.is_null() {
            return &[];
        }
        // SAFETY: `host` points to `capacity` initialised (zeroed in `grow`) bytes owned by self;
        // the borrow is tied to `&self`.
        unsafe { std::slice::from_raw_parts(self.host, self.capacity) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        if self.host.is_null() {
            return &mut [];
        }
        // SAFETY: as in `as_slice`, with exclusive access through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.host, self.capacity) }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for HostSlotMemory {
    fn drop(&mut self) {
        if self.host.is_null() {
            return;
        }
        if self.device_handle.bind_to_thread().is_err() {
            log::warn!("cannot bind the CUDA context to free a frame slot; leaking {} bytes", self.capacity);
            return;
        }
        // The GPU stage synchronises its stream before releasing a slot, so no copy or kernel
        // still reads it.
        self.free();
    }
}

/// The device address of the frame in `slot` when a kernel can read it in place: the slot's
/// memory is page-locked and mapped ([`HostMemoryKind::Mapped`]). `None` for any other slot, whose
/// frame is copied to the device first.
pub fn mapped_device_ptr(slot: &FrameSlot) -> Option<CUdeviceptr> {
    slot.memory()
        .as_any()
        .downcast_ref::<HostSlotMemory>()
        .filter(|memory| memory.kind() == HostMemoryKind::Mapped)
        .and_then(HostSlotMemory::device_ptr)
}

/// Memory for one frame slot of `device`, allocated by the first frame written into it: mapped
/// (zero-copy) on integrated GPUs that can map host memory, pinned elsewhere.
pub fn slot_memory(device: &GpuDevice) -> Result<Box<dyn SlotMemory>, GpuError> {
    let kind = if device.zero_copy() { HostMemoryKind::Mapped } else { HostMemoryKind::Pinned };
    Ok(Box::new(HostSlotMemory::new(device, 0, kind)?))
}
