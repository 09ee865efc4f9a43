//! CUDA layer (cargo feature `cuda`): device probe, pinned/mapped frame slots and the
//! NVRTC-compiled preprocessing kernel, and the motion kernel that makes a frame's luma image. The TensorRT backend adapts these to its input stage
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
//! context) when the first frame, or a larger one, arrives, and the motion kernel
//! ([`GpuLumaSampler`]), which a camera's source thread runs on a stream of its own before the
//! frame goes to the worker (it decides whether the frame goes there at all), waiting for its
//! result no longer than a bound of its own. Nothing here may be called from tokio worker threads.
//!
//! Must not: decide fallbacks (the caller chooses the CPU backend when the config allows it), run
//! models, or allocate per frame.
//!
//! Files: [`probe`](mod@probe) (libcuda, the devices), [`slots`] (page-locked frame-slot memory, and a
//! mapped slot's device address),
//! [`preprocessor`] with [`taps`] (the kernel and its filter taps), [`bench`](mod@bench) (the kernel against
//! the CPU reference), [`motion_luma`] (the motion kernel's luma image), [`error`]. This file only declares and re-exports.

mod bench;
mod error;
mod motion_luma;
mod preprocessor;
mod probe;
mod slots;
mod taps;

pub use bench::{bench_preprocess, PreprocessBenchReport, PreprocessBenchRequest};
pub use error::GpuError;
pub use motion_luma::{GpuLumaSampler, LATE_AFTER};
pub use preprocessor::{GpuPreprocessor, TAP_CACHE_SIZES};
pub use probe::{device_count, driver_present, probe, GpuDevice, GpuProbe};
pub use slots::{slot_memory, HostMemoryKind, HostSlotMemory};

pub use cudarc::driver::{CudaSlice, CudaStream};
