//! CUDA layer (cargo feature `cuda`): device probe, pinned/mapped frame slots and the
//! NVRTC-compiled preprocessing kernel. The TensorRT backend adapts these to its input stage
//! (`crate::backend::trt::gpu_frames`); nothing here knows TensorRT.
//!
//! Owns: every CUDA driver and NVRTC call of the crate except TensorRT's (`src/backend/trt`). libcuda is
//! loaded at run time; [`driver_present`] is checked before any cudarc call, because cudarc panics
//! when the library is missing, so a machine without the NVIDIA driver gets [`GpuError::NoDriver`].
//!
//! Thread model: all CUDA work of a GPU runs on one dedicated OS thread, the device's inference
//! worker (`crate::infer::scheduler`), which binds the device's primary context once and owns one stream;
//! it serves every camera, preprocessing each frame of a batch into its row of the input tensor
//! on that stream. One thread per GPU, not per camera: a GPU serialises the work of its contexts
//! anyway, so per-camera threads only multiplied execution contexts, their device memory and the
//! preprocessing staging buffers. The one exception is page-locked frame-slot memory
//! ([`HostSlotMemory`]), which a camera's source thread allocates (binding the same primary
//! context) when the first frame, or a larger one, arrives. Nothing here may be called from tokio
//! worker threads.
//!
//! Must not: decide fallbacks (the caller chooses the CPU backend when the config allows it), run
//! models, or allocate per frame.

mod bench;
mod preprocessor;
mod probe;
mod slots;
mod taps;

pub use bench::{bench_preprocess, PreprocessBenchReport, PreprocessBenchRequest};
pub use preprocessor::{GpuPreprocessor, TAP_CACHE_SIZES};
pub use probe::{device_count, driver_present, probe, GpuDevice, GpuProbe};
pub use slots::{slot_memory, HostMemoryKind, HostSlotMemory};

pub use cudarc::driver::{CudaSlice, CudaStream};

/// Errors of the CUDA layer.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("libcuda not found: no NVIDIA driver")]
    NoDriver,
    #[error(
        "libnvrtc not found (looked for libnvrtc.so, libnvrtc.so.12/.11 and others): install the CUDA \
         runtime compiler, or warm the kernel cache on a machine that has it"
    )]
    NoNvrtc,
    #[error("no CUDA device {ordinal} (found {count})")]
    NoDevice { ordinal: usize, count: usize },
    #[error("CUDA {operation} failed: {source}")]
    Driver {
        operation: &'static str,
        #[source]
        source: cudarc::driver::DriverError,
    },
    #[error("compiling the preprocessing kernel failed: {0}")]
    Compile(String),
    #[error("frame of {needed} bytes does not fit the {capacity}-byte GPU buffer")]
    FrameTooLarge { needed: usize, capacity: usize },
    #[error("output buffer has {actual} bytes, the input tensor needs {expected} (or a multiple, for a batch)")]
    OutputSize { expected: usize, actual: usize },
    #[error("row {row} is outside a batch of {rows} input tensors")]
    RowOutsideBatch { row: usize, rows: usize },
    #[error("impossible input tensor size {width}x{height}")]
    TensorSize { width: u32, height: u32 },
    /// A region of interest that is not inside its frame ([`Roi::check`](crate::preprocess::Roi::check)).
    #[error("{0}")]
    Roi(crate::preprocess::PreprocessError),
    #[error("CPU preprocessing (benchmark reference) failed: {0}")]
    CpuReference(#[from] crate::preprocess::PreprocessError),
}

/// Adds the name of the failing operation to a cudarc error.
pub(crate) trait DriverContext<T> {
    fn during(self, operation: &'static str) -> Result<T, GpuError>;
}

impl<T> DriverContext<T> for Result<T, cudarc::driver::DriverError> {
    fn during(self, operation: &'static str) -> Result<T, GpuError> {
        self.map_err(|source| GpuError::Driver { operation, source })
    }
}
