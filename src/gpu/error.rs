//! The CUDA layer's error, and naming the failed operation on a cudarc error.
//!
//! Owns: [`GpuError`] and [`DriverContext`]. Must not: call CUDA.

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
    Roi(crate::preprocess::UnusableRoi),
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
