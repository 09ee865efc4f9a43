//! The seam between the CPU backend and its engines: what an engine must offer (load a model,
//! describe its inputs and outputs, one session per inference worker on that worker's threads).
//!
//! Owns: [`Engine`], [`EngineSession`] and the model-input description they report. Must not:
//! preprocess, decode, decide thread counts (the backend's budget does), or know any engine's API.

use crate::backend::error::BackendError;
use crate::model::OutputTensor;
use crate::preprocess::TensorDtype;

/// One model loaded by a CPU engine, shared by every inference worker.
pub(crate) trait Engine: Send + Sync {
    /// Name and version: `rten 0.27`, `ONNX Runtime 1.22.0`.
    fn name(&self) -> String;
    /// The model's inputs (the backend takes models with exactly one).
    fn inputs(&self) -> &[ModelInput];
    /// The model's output names, in the model's order.
    fn outputs(&self) -> &[String];
    /// One inference worker's state, for an input of `shape` in `dtype`, running inference and
    /// preprocessing on `threads` threads of its own (the worker's thread counted among them).
    fn new_session(
        &self,
        shape: [usize; 4],
        dtype: TensorDtype,
        threads: usize,
    ) -> Result<Box<dyn EngineSession>, BackendError>;
}

/// One inference worker's state on an engine.
pub(crate) trait EngineSession {
    /// Runs `fill` with the input tensor's bytes, in the spec's dtype (preprocessing writes them,
    /// splitting its rows across the session's threads): on the calling thread with the pool to
    /// spread the rows beside it (`Some`), or inside the session's own pool (`None`: split them
    /// on the current pool).
    fn fill_input(&mut self, fill: &mut (dyn FnMut(&mut [u8], Option<&rayon::ThreadPool>) + Send));
    /// The input tensor's bytes, in the spec's dtype, for preprocessing on the calling thread alone.
    fn input(&mut self) -> &mut [u8];
    /// Runs the model on the input and converts every output to f32 into `outputs`, in
    /// [`Engine::outputs`] order, reusing their buffers.
    fn run(&mut self, outputs: &mut [OutputTensor]) -> Result<(), BackendError>;
}

/// A model input as an engine reads it from the file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ModelInput {
    pub name: String,
    /// Unknown when the file does not say.
    pub element: Option<InputElement>,
    /// Unknown when the file does not say.
    pub dims: Option<Vec<Dim>>,
}

/// An input's element type: its name in errors, and the preprocessing dtypes the engine feeds it
/// with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct InputElement {
    pub name: String,
    pub takes: Vec<TensorDtype>,
}

/// One dimension of a model input.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Dim {
    Fixed(usize),
    Symbolic(String),
}

pub(crate) fn dtype_name(dtype: TensorDtype) -> &'static str {
    match dtype {
        TensorDtype::U8 => "u8",
        TensorDtype::F16 => "f16",
        TensorDtype::F32 => "f32",
    }
}
