//! What a model is, apart from what runs it, and the device settings it is loaded with.
//!
//! Owns: [`ModelSpec`] (a model described once from the config: files, labels, decoder, input
//! contract, engine options) and [`DeviceSpec`] (which GPU, which CPU engine and threads, the
//! fallback, the cache directory), which are all `crate::backend` sees of the config; and
//! [`ModelOutputs`] / [`OutputTensor`], the raw tensors of one inference in the model's output
//! order, which a backend fills and a decoder reads; and whether the engines of several models fit
//! the GPU's free memory ([`footprint`]). Below both `backend` and `decode`, so that
//! neither imports the other. Must not: run models, decode detections or read files.

mod device;
pub mod footprint;
mod outputs;
mod spec;

pub use device::DeviceSpec;
pub use outputs::{ModelOutputs, OutputTensor};
pub use spec::{EngineOptions, ModelFiles, ModelSpec};
