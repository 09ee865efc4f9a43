//! Device probe and the opened device (its primary context).
//!
//! Owns: finding libcuda, opening a device's primary context, and describing the device.
//! Must not: allocate frame memory or compile kernels.

use std::sync::{Arc, Mutex};

use cudarc::driver::sys::CUdevice_attribute as Attribute;
use cudarc::driver::{CudaContext, CudaModule, CudaStream};
use serde::Serialize;

use super::error::{DriverContext, GpuError};
use crate::sys::lock::lock;

/// What `jetson-detectd probe` prints and telemetry reports about the GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuProbe {
    pub ordinal: usize,
    pub name: String,
    /// `"major.minor"`, e.g. `"8.7"` for Orin.
    pub compute_capability: String,
    /// Shares physical memory with the CPU (Jetson): frame slots are mapped, not copied.
    pub integrated: bool,
    pub can_map_host_memory: bool,
    pub multiprocessors: u32,
    pub total_memory_bytes: u64,
    pub free_memory_bytes: u64,
    /// CUDA version the driver supports, e.g. `"12.6"`.
    pub driver_version: String,
}

/// Whether libcuda can be loaded. Every other function of this module checks it first.
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the driver library by its usual names; loading libcuda runs
    // no user code beyond the library's own initialisers.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Number of CUDA devices, or [`GpuError::NoDriver`].
pub fn device_count() -> Result<usize, GpuError> {
    if !driver_present() {
        return Err(GpuError::NoDriver);
    }
    cudarc::driver::result::init().during("cuInit")?;
    let count = cudarc::driver::result::device::get_count().during("cuDeviceGetCount")?;
    Ok(usize::try_from(count).unwrap_or(0))
}

/// Probes device `ordinal` (retains its primary context for the duration of the call).
pub fn probe(ordinal: usize) -> Result<GpuProbe, GpuError> {
    Ok(GpuDevice::open(ordinal)?.probe().clone())
}

/// An opened device: its primary context and what the probe found. Cheap to clone; the context is
/// released when the last clone is dropped.
#[derive(Clone)]
pub struct GpuDevice {
    context: Arc<CudaContext>,
    probe: GpuProbe,
    /// The preprocessing module, loaded once and shared by every camera's preprocessor.
    preprocess_module: Arc<Mutex<Option<Arc<CudaModule>>>>,
}

impl std::fmt::Debug for GpuDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuDevice").field("probe", &self.probe).finish()
    }
}

impl GpuDevice {
    /// Retains the primary context of device `ordinal` and binds it to the calling thread.
    pub fn open(ordinal: usize) -> Result<Self, GpuError> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(GpuError::NoDevice { ordinal, count });
        }
        let context = CudaContext::new(ordinal).during("primary context retain")?;
        let probe = describe(&context)?;
        Ok(GpuDevice { context, probe, preprocess_module: Arc::default() })
    }

    pub fn probe(&self) -> &GpuProbe {
        &self.probe
    }

    /// Integrated GPU that can map host memory: frame slots are read in place, without a copy.
    pub fn zero_copy(&self) -> bool {
        self.probe.integrated && self.probe.can_map_host_memory
    }

    /// Makes the primary context current on the calling thread (once per GPU thread).
    pub fn bind_to_thread(&self) -> Result<(), GpuError> {
        self.context.bind_to_thread().during("cuCtxSetCurrent")
    }

    /// A new non-default stream of this device, for one camera.
    pub fn new_stream(&self) -> Result<Arc<CudaStream>, GpuError> {
        self.context.new_stream().during("cuStreamCreate")
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.context
    }

    /// The probe taken again now: free memory moves as contexts and other processes come and go.
    pub fn sample(&self) -> Result<GpuProbe, GpuError> {
        describe(&self.context)
    }

    /// The preprocessing module, loaded by `load` on first use and shared afterwards.
    pub(crate) fn preprocess_module(
        &self,
        load: impl FnOnce() -> Result<Arc<CudaModule>, GpuError>,
    ) -> Result<Arc<CudaModule>, GpuError> {
        // A panic while loading leaves the slot empty, which is still a valid state.
        let mut slot = lock(&self.preprocess_module);
        if let Some(module) = slot.as_ref() {
            return Ok(module.clone());
        }
        let module = load()?;
        *slot = Some(module.clone());
        Ok(module)
    }
}

fn describe(context: &Arc<CudaContext>) -> Result<GpuProbe, GpuError> {
    let attribute = |attribute: Attribute, operation| context.attribute(attribute).during(operation);
    let (major, minor) = context.compute_capability().during("cuDeviceGetAttribute(compute capability)")?;
    let (free, total) = context.mem_get_info().during("cuMemGetInfo")?;
    let mut driver_version = 0;
    // SAFETY: cuDriverGetVersion writes one int through the valid pointer it is given.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver_version) }.result().during("cuDriverGetVersion")?;
    Ok(GpuProbe {
        ordinal: context.ordinal(),
        name: context.name().during("cuDeviceGetName")?,
        compute_capability: format!("{major}.{minor}"),
        integrated: attribute(Attribute::CU_DEVICE_ATTRIBUTE_INTEGRATED, "cuDeviceGetAttribute(INTEGRATED)")? != 0,
        can_map_host_memory: attribute(
            Attribute::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY,
            "cuDeviceGetAttribute(CAN_MAP_HOST_MEMORY)",
        )? != 0,
        multiprocessors: u32::try_from(attribute(
            Attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)",
        )?)
        .unwrap_or(0),
        total_memory_bytes: total as u64,
        free_memory_bytes: free as u64,
        driver_version: format!("{}.{}", driver_version / 1000, (driver_version % 1000) / 10),
    })
}
