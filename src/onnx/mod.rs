//! What an ONNX file says about itself: its inputs and outputs (names, element types,
//! dimensions), which operator produces each output, and the scaling the graph applies to its
//! first input before anything else ([`interface`], read by [`read`](mod@read)). [`recognise`] turns that
//! into a decoder and an input contract, and [`describe`] completes a loaded config with what the
//! config leaves unset.
//!
//! Owns: reading a `ModelProto`'s main graph straight from the protobuf wire format ([`crate::protobuf`]),
//! bounded and without copying weights: only names, shapes and constants of at most
//! [`read::MAX_CONSTANT_VALUES`] values are kept. Must not: run the model, open files other than the one
//! it is given, or trust the bytes: a hostile file ends in an [`OnnxError`], never a panic, a hang
//! or an allocation larger than the file.
//!
//! Why not rten's or ONNX Runtime's loader: both load every weight to answer what the names and
//! shapes already say, and a file that is not ONNX must be refused at `check-config` before either
//! runs.
//!
//! This file only declares and re-exports.

pub mod describe;
mod error;
mod interface;
mod read;
pub mod recognise;

pub use error::OnnxError;
pub use interface::{Dim, ElementType, InputScaling, ModelInterface, TensorInfo};
pub use read::{read, read_file, MAX_CONSTANT_VALUES};

#[cfg(test)]
pub(crate) mod test_models;
