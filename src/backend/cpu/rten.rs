//! The rten engine: pure Rust, compiled in, runs everywhere (the always-there fallback).
//!
//! Owns: loading a model with rten, each session's thread pool (the worker's share of the cores,
//! which preprocessing and inference take turns on), and converting tensors in and out. Must not:
//! preprocess (the backend writes each session's input) or decode.

use std::path::Path;
use std::sync::Arc;

use rten::{DataType, Dimension, Model, ModelOptions, NodeId, RunOptions, ThreadPool, Value, ValueType, ValueView};

use super::engine::{Dim, Engine, EngineSession, InputElement, ModelInput};
use crate::backend::error::BackendError;
use crate::model::OutputTensor;
use crate::preprocess::TensorDtype;

/// The rten version in `info()`; kept in step with Cargo.toml by a test.
pub(super) const RTEN_VERSION: &str = "0.27";
/// The first bytes of a model in rten's own format (rten reads every other file as ONNX).
const RTEN_MAGIC: &[u8] = b"RTEN";

/// A model optimised by rten, shared by every worker's session.
pub(super) struct RtenEngine {
    model: Arc<RtenModel>,
    inputs: Vec<ModelInput>,
    outputs: Vec<String>,
}

struct RtenModel {
    model: Model,
    input_ids: Vec<NodeId>,
    output_ids: Vec<NodeId>,
}

/// rten's element type for a model input: f16 inputs are computed in f32.
fn rten_input_element(dtype: ValueType) -> InputElement {
    let name = match dtype {
        ValueType::Tensor(DataType::Float) | ValueType::Sequence(DataType::Float) => "f32 or f16".into(),
        ValueType::Tensor(DataType::UInt8) | ValueType::Sequence(DataType::UInt8) => "u8".into(),
        ValueType::Tensor(DataType::Int8) | ValueType::Sequence(DataType::Int8) => "i8".into(),
        ValueType::Tensor(DataType::Int32) | ValueType::Sequence(DataType::Int32) => "i32".into(),
        other => format!("{other:?}").to_lowercase(),
    };
    let takes = match dtype {
        ValueType::Tensor(DataType::Float) => vec![TensorDtype::F32, TensorDtype::F16],
        ValueType::Tensor(DataType::UInt8) => vec![TensorDtype::U8],
        _ => Vec::new(),
    };
    InputElement { name, takes }
}

impl RtenEngine {
    pub(super) fn load(onnx: &Path) -> Result<RtenEngine, BackendError> {
        let load_error = |message: String| BackendError::Load { path: onnx.to_path_buf(), message };
        let mut options = ModelOptions::with_all_ops();
        // Weights packed once at load for the matrix kernels, not again on every inference.
        options.prepack_weights(true);
        // rten picks the loader by extension; another name is read and recognised by content
        // (external tensor data then cannot be found, as it is named relative to the file).
        // The file is read whole first to check the framing rten's reader hangs on
        // (`super::rten_framing`); an `.onnx` is then loaded by name for its external data.
        let is_onnx_name = onnx.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("onnx"));
        let bytes = crate::sys::files::read(onnx, crate::sys::files::MAX_MODEL_BYTES)
            .map_err(|error| load_error(error.to_string()))?;
        if !bytes.starts_with(RTEN_MAGIC) {
            super::rten_framing::check(&bytes).map_err(|error| load_error(error.to_string()))?;
        }
        let model = if is_onnx_name {
            drop(bytes);
            options.load_file(onnx)
        } else {
            options.load(bytes)
        }
        .map_err(|error| load_error(error.to_string()))?;

        let name = |id: &NodeId| model.node_info(*id).and_then(|n| n.name()).unwrap_or("").to_string();
        let inputs = model
            .input_ids()
            .iter()
            .map(|id| {
                let info = model.node_info(*id);
                ModelInput {
                    name: name(id),
                    element: info.as_ref().and_then(|info| info.dtype()).map(rten_input_element),
                    dims: info.and_then(|info| info.shape()).map(|dims| {
                        dims.iter()
                            .map(|dim| match dim {
                                Dimension::Fixed(size) => Dim::Fixed(*size),
                                Dimension::Symbolic(name) => Dim::Symbolic(name.clone()),
                            })
                            .collect()
                    }),
                }
            })
            .collect();
        let outputs = model.output_ids().iter().map(name).collect();
        let (input_ids, output_ids) = (model.input_ids().to_vec(), model.output_ids().to_vec());
        Ok(RtenEngine { model: Arc::new(RtenModel { model, input_ids, output_ids }), inputs, outputs })
    }
}

impl Engine for RtenEngine {
    fn name(&self) -> String {
        format!("rten {RTEN_VERSION}")
    }

    fn inputs(&self) -> &[ModelInput] {
        &self.inputs
    }

    fn outputs(&self) -> &[String] {
        &self.outputs
    }

    fn new_session(
        &self,
        shape: [usize; 4],
        dtype: TensorDtype,
        threads: usize,
    ) -> Result<Box<dyn EngineSession>, BackendError> {
        Ok(Box::new(RtenSession {
            model: Arc::clone(&self.model),
            pool: Arc::new(ThreadPool::with_num_threads(threads.max(1))),
            input: InputTensor::new(shape, dtype),
            shape,
        }))
    }
}

/// One worker's thread pool and input tensor on rten.
struct RtenSession {
    model: Arc<RtenModel>,
    pool: Arc<ThreadPool>,
    input: InputTensor,
    shape: [usize; 4],
}

impl EngineSession for RtenSession {
    fn fill_input(&mut self, fill: &mut (dyn FnMut(&mut [u8], Option<&rayon::ThreadPool>) + Send)) {
        let target = self.input.preprocess_target();
        // rten keeps its rayon pool to itself: the rows are split inside it.
        self.pool.run(|| fill(target, None));
    }

    fn input(&mut self) -> &mut [u8] {
        self.input.preprocess_target()
    }

    fn run(&mut self, outputs: &mut [OutputTensor]) -> Result<(), BackendError> {
        let RtenModel { model, input_ids, output_ids } = &*self.model;
        let pool = &self.pool;
        let input_id = *input_ids.first().ok_or_else(|| BackendError::Inference("the model has no input".into()))?;
        let input = self.input.view(self.shape)?;
        let options = RunOptions::default().with_thread_pool(Some(Arc::clone(pool)));
        let results = model
            .run(vec![(input_id, input.into())], output_ids, Some(options))
            .map_err(|e| BackendError::Inference(e.to_string()))?;
        for (result, output) in results.into_iter().zip(outputs) {
            copy_output(result, output)?;
        }
        Ok(())
    }
}

/// One worker's input tensor, in the element type rten takes.
enum InputTensor {
    U8(Vec<u8>),
    /// f32 specs are preprocessed straight into it; f16 specs into `half` first, then widened.
    F32 {
        values: Vec<f32>,
        half: Vec<u16>,
    },
}

impl InputTensor {
    fn new(shape: [usize; 4], dtype: TensorDtype) -> Self {
        let elements = shape.iter().product();
        match dtype {
            TensorDtype::U8 => InputTensor::U8(vec![0; elements]),
            TensorDtype::F32 => InputTensor::F32 { values: vec![0.0; elements], half: Vec::new() },
            TensorDtype::F16 => InputTensor::F32 { values: vec![0.0; elements], half: vec![0; elements] },
        }
    }

    /// Where the preprocessor writes: the tensor's bytes as the spec's dtype.
    fn preprocess_target(&mut self) -> &mut [u8] {
        match self {
            InputTensor::U8(bytes) => bytes,
            InputTensor::F32 { half, .. } if !half.is_empty() => bytemuck::cast_slice_mut(half),
            InputTensor::F32 { values, .. } => bytemuck::cast_slice_mut(values),
        }
    }

    /// Widens f16 values to f32 after preprocessing, then lends the tensor to rten.
    fn view(&mut self, shape: [usize; 4]) -> Result<ValueView<'_>, BackendError> {
        let view = match self {
            InputTensor::U8(bytes) => ValueView::from_shape(shape, &bytes[..]).map_err(|e| e.to_string()),
            InputTensor::F32 { values, half } => {
                if !half.is_empty() {
                    use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
                    half.reinterpret_cast::<half::f16>().convert_to_f32_slice(values);
                }
                ValueView::from_shape(shape, &values[..]).map_err(|e| e.to_string())
            }
        };
        view.map_err(BackendError::Inference)
    }
}

/// Converts one rten output to f32 into the session's reused buffer.
fn copy_output(value: Value, output: &mut OutputTensor) -> Result<(), BackendError> {
    use rten_tensor::{AsView, Layout};
    output.shape.clear();
    output.data.clear();
    match &value {
        Value::FloatTensor(t) => {
            output.shape.extend_from_slice(t.shape());
            output.data.extend(t.iter().copied());
        }
        Value::Int32Tensor(t) => {
            output.shape.extend_from_slice(t.shape());
            output.data.extend(t.iter().map(|v| *v as f32));
        }
        Value::Int8Tensor(t) => {
            output.shape.extend_from_slice(t.shape());
            output.data.extend(t.iter().map(|v| *v as f32));
        }
        Value::UInt8Tensor(t) => {
            output.shape.extend_from_slice(t.shape());
            output.data.extend(t.iter().map(|v| *v as f32));
        }
        _ => return Err(BackendError::Inference(format!("output `{}` is not a tensor", output.name))),
    }
    Ok(())
}
