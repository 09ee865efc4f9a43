//! What a model is, apart from what runs it.
//!
//! Owns: [`ModelOutputs`] / [`OutputTensor`], the raw tensors of one inference in the model's
//! output order, which a backend fills and a decoder reads. Below both `backend` and `decode`, so
//! that neither imports the other. Must not: run models, decode detections or read files.

mod outputs;

pub use outputs::{ModelOutputs, OutputTensor};
