//! Page-locked frame-slot memory: pinned (discrete GPUs: async copy on the camera's stream) or
//! pinned + mapped into the device address space (integrated GPUs: the kernel reads the frame in
//! place, zero copies).
//!
//! Owns: allocation and release of host slot memory ([`HostSlotMemory`] frees in Drop).
//! Must not: copy frames or launch kernels (that is the preprocessor's job).

use std::any::Any;
use std::ffi::c_void;

use cudarc::driver::sys::{self, CUdeviceptr};

use super::{DriverContext, GpuDevice, GpuError};
use crate::frame::SlotMemory;

/// How a slot's page-locked memory reaches the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostMemoryKind {
    /// Page-locked; the GPU stage copies it to device memory asynchronously.
    Pinned,
    /// Page-locked and mapped: the kernel reads it through a device pointer.
    Mapped,
}

/// Fixed-size page-locked host memory of one frame slot.
pub struct HostSlotMemory {
    host: *mut u8,
    capacity: usize,
    kind: HostMemoryKind,
    /// Device address of the same bytes; `Some` for [`HostMemoryKind::Mapped`].
    device: Option<CUdeviceptr>,
    /// Keeps the context (and thus the allocation's owner) alive until Drop.
    device_handle: GpuDevice,
}

// SAFETY: the memory is exclusively owned by this value (no aliasing handles are given out beyond
// borrows tied to `&self`/`&mut self`), and page-locked memory may be used from any thread.
unsafe impl Send for HostSlotMemory {}

impl HostSlotMemory {
    /// Allocates `capacity` bytes (at least 1) of page-locked memory of `kind`. Call from the
    /// thread the device's context is bound to.
    pub fn new(device: &GpuDevice, capacity: usize, kind: HostMemoryKind) -> Result<Self, GpuError> {
        device.bind_to_thread()?;
        let flags = match kind {
            HostMemoryKind::Pinned => sys::CU_MEMHOSTALLOC_PORTABLE,
            HostMemoryKind::Mapped => sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP,
        };
        let bytes = capacity.max(1);
        // SAFETY: cuMemHostAlloc with a non-zero size; the returned pointer is owned by `slot`
        // below, whose Drop frees it exactly once.
        let host = unsafe { cudarc::driver::result::malloc_host(bytes, flags) }.during("cuMemHostAlloc")?;
        // SAFETY: `host` points to `bytes` writable bytes; zeroing them makes every later slice
        // view initialised memory and never exposes stale data.
        unsafe { std::ptr::write_bytes(host.cast::<u8>(), 0, bytes) };
        let mut slot = HostSlotMemory {
            host: host.cast::<u8>(),
            capacity: bytes,
            kind,
            device: None,
            device_handle: device.clone(),
        };
        if kind == HostMemoryKind::Mapped {
            let mut device_ptr: CUdeviceptr = 0;
            // SAFETY: `host` was allocated with CU_MEMHOSTALLOC_DEVICEMAP in the current context;
            // the call writes one device pointer through a valid pointer.
            unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device_ptr, host, 0) }
                .result()
                .during("cuMemHostGetDevicePointer")?;
            slot.device = Some(device_ptr);
        }
        Ok(slot)
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
            return Err(format!(
                "frame of {len} bytes exceeds the {}-byte page-locked slot (raise the frame size the slots are sized for)",
                self.capacity
            ));
        }
        Ok(())
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `host` points to `capacity` initialised (zeroed in `new`) bytes owned by self; the
        // borrow is tied to `&self`.
        unsafe { std::slice::from_raw_parts(self.host, self.capacity) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, with exclusive access through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.host, self.capacity) }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for HostSlotMemory {
    fn drop(&mut self) {
        if self.device_handle.bind_to_thread().is_err() {
            log::warn!("cannot bind the CUDA context to free a frame slot; leaking {} bytes", self.capacity);
            return;
        }
        // SAFETY: `host` came from cuMemHostAlloc and is freed exactly once, here. The GPU stage
        // synchronises its stream before releasing a slot, so no copy or kernel still reads it.
        if let Err(error) = unsafe { cudarc::driver::result::free_host(self.host.cast::<c_void>()) } {
            log::warn!("cuMemFreeHost failed: {error}");
        }
    }
}

/// One frame slot's memory for `device`: mapped (zero-copy) on integrated GPUs that can map host
/// memory, pinned elsewhere.
pub fn slot_memory(device: &GpuDevice, bytes: usize) -> Result<Box<dyn SlotMemory>, GpuError> {
    let kind = if device.zero_copy() { HostMemoryKind::Mapped } else { HostMemoryKind::Pinned };
    Ok(Box::new(HostSlotMemory::new(device, bytes, kind)?))
}
