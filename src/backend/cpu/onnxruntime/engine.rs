//! The CPU backend's ONNX Runtime engine, through the `ort` crate, with the library loaded at run
//! time ([`library`]).
//!
//! Owns: the process's one ONNX Runtime environment; one ONNX Runtime session per inference
//! worker, built from the model file with every graph optimisation on and an intra-op thread pool
//! of its own, as many threads as the worker's share of the cores (the worker's own thread is one
//! of them: ONNX Runtime runs part of every parallel section on the calling thread); the
//! session's input tensor, reused from frame to frame (f16 inputs are fed as f16), and its
//! outputs converted to f32; and the worker's preprocessing threads, a rayon pool of one thread
//! fewer (the worker's own thread preprocesses beside them), for a frame preprocessed
//! while no inference runs (beside an inference the backend preprocesses on the calling thread
//! alone), kept awake over the end of each inference while frames come back to back
//! (`backend::cpu::standby`). The session's intra-op threads spin for work during an inference
//! (ONNX Runtime's default, which keeps a small model's many short operators fast) and stop the
//! moment it returns (`session.force_spinning_stop`), so they leave the cores to the next
//! preprocessing and to the other session of an overlapping worker. Must not: call any `ort` function before [`library::load`] has succeeded (`ort` panics
//! when it has no library), share a thread pool between workers, preprocess, or decode.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ort::environment::Environment;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::{DynValue, TensorElementType, TensorRef, ValueType};

use super::library;
use crate::backend::cpu::engine::{Dim, Engine, EngineSession, InputElement, ModelInput};
use crate::backend::cpu::standby::StandBy;
use crate::backend::error::BackendError;
use crate::model::OutputTensor;
use crate::preprocess::TensorDtype;
use crate::sys::lock::lock;

/// The environment, made on the first load (ONNX Runtime allows one per process).
static ENVIRONMENT: Mutex<Option<Environment>> = Mutex::new(None);

fn environment() -> Result<Environment, String> {
    let mut environment = lock(&ENVIRONMENT);
    if let Some(env) = environment.as_ref() {
        return Ok(env.clone());
    }
    let env = ort::init().with_name("jetson-detectd").build().map_err(|e| e.to_string())?;
    *environment = Some(env.clone());
    Ok(env)
}

/// A model loaded by ONNX Runtime; every inference worker builds its own session of it.
pub struct OrtEngine {
    name: String,
    model_path: PathBuf,
    env: Environment,
    /// The session made at load (to read the model's inputs) and its threads, handed to the first
    /// worker that asks for that many: a worker alone, which has every core and is kept to no
    /// CPUs, so that the session's threads (created on the loading thread) run where its own
    /// would.
    spare: Mutex<Option<(Session, usize)>>,
    inputs: Vec<ModelInput>,
    outputs: Vec<String>,
}

impl OrtEngine {
    /// Loads `onnx` into a session on `threads` threads, to be handed to the first worker with
    /// that share. The library must be loaded ([`library::load`]).
    pub fn load(onnx: &Path, threads: usize) -> Result<OrtEngine, BackendError> {
        let unavailable = |message: String| BackendError::Unavailable("cpu", format!("ONNX Runtime: {message}"));
        let library = library::loaded().ok_or_else(|| unavailable("the library is not loaded".into()))?;
        let env = environment().map_err(unavailable)?;
        let mut engine = OrtEngine {
            name: format!("ONNX Runtime {}", library.version),
            model_path: onnx.to_path_buf(),
            env,
            spare: Mutex::new(None),
            inputs: Vec::new(),
            outputs: Vec::new(),
        };
        let session = engine.build_session(threads)?;
        engine.inputs = session.inputs().iter().map(|input| model_input(input.name(), input.dtype())).collect();
        engine.outputs = session.outputs().iter().map(|output| output.name().to_string()).collect();
        engine.spare = Mutex::new(Some((session, threads)));
        Ok(engine)
    }

    /// A session whose intra-op pool has `threads` threads (the calling one among them), whose
    /// threads stop spinning when an inference returns.
    fn build_session(&self, threads: usize) -> Result<Session, BackendError> {
        let load_error = |message: String| BackendError::Load { path: self.model_path.clone(), message };
        // The file's own error (as rten reports it), not ONNX Runtime's wording of it.
        std::fs::File::open(&self.model_path).map_err(|error| load_error(error.to_string()))?;
        Session::builder(&self.env)
            .map_err(|e| load_error(e.to_string()))?
            .with_optimization_level(GraphOptimizationLevel::All)
            .map_err(|e| load_error(e.to_string()))?
            .with_intra_threads(threads)
            .map_err(|e| load_error(e.to_string()))?
            .with_config_entry("session.force_spinning_stop", "1")
            .map_err(|e| load_error(e.to_string()))?
            .commit_from_file(&self.model_path)
            .map_err(|e| load_error(e.to_string()))
    }
}

/// A model input as ONNX Runtime describes it.
fn model_input(name: &str, dtype: &ValueType) -> ModelInput {
    let ValueType::Tensor { ty, shape, dimension_symbols } = dtype else {
        return ModelInput {
            name: name.into(),
            element: Some(InputElement { name: dtype.to_string(), takes: Vec::new() }),
            dims: None,
        };
    };
    let takes = match ty {
        TensorElementType::Uint8 => vec![TensorDtype::U8],
        TensorElementType::Float16 => vec![TensorDtype::F16],
        TensorElementType::Float32 => vec![TensorDtype::F32],
        _ => Vec::new(),
    };
    let element_name = match ty {
        TensorElementType::Uint8 => "u8".to_string(),
        TensorElementType::Float16 => "f16".to_string(),
        TensorElementType::Float32 => "f32".to_string(),
        other => other.to_string(),
    };
    let dims = shape
        .iter()
        .enumerate()
        .map(|(index, size)| match usize::try_from(*size) {
            Ok(size) => Dim::Fixed(size),
            Err(_) => Dim::Symbolic(
                dimension_symbols.get(index).filter(|symbol| !symbol.is_empty()).cloned().unwrap_or_else(|| "?".into()),
            ),
        })
        .collect();
    ModelInput { name: name.into(), element: Some(InputElement { name: element_name, takes }), dims: Some(dims) }
}

impl Engine for OrtEngine {
    fn name(&self) -> String {
        self.name.clone()
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
        let threads = threads.max(1);
        let spare = lock(&self.spare).take();
        let session = match spare {
            Some((session, spare_threads)) if spare_threads == threads => session,
            _ => self.build_session(threads)?,
        };
        let elements = shape.iter().product();
        let input = match dtype {
            TensorDtype::U8 => Input::U8(vec![0; elements]),
            TensorDtype::F16 => Input::F16(vec![0; elements]),
            TensorDtype::F32 => Input::F32(vec![0.0; elements]),
        };
        let preprocess = PreprocessThreads::new(threads)
            .map_err(|e| BackendError::Unavailable("cpu", format!("preprocessing threads: {e}")))?;
        Ok(Box::new(OrtSession { session, input, shape, preprocess, standby: StandBy::new() }))
    }
}

/// A worker's preprocessing threads beside its own: a rayon pool of its share less one (the
/// worker's thread preprocesses too), none when the share is 1 thread.
struct PreprocessThreads(Option<rayon::ThreadPool>);

impl PreprocessThreads {
    fn new(threads: usize) -> Result<PreprocessThreads, rayon::ThreadPoolBuildError> {
        if threads <= 1 {
            return Ok(PreprocessThreads(None));
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads - 1)
            .thread_name(|i| format!("preprocess-{i}"))
            .build()?;
        Ok(PreprocessThreads(Some(pool)))
    }
}

/// One worker's input tensor, in the model's element type.
enum Input {
    U8(Vec<u8>),
    /// f16 bits, as preprocessing writes them.
    F16(Vec<u16>),
    F32(Vec<f32>),
}

impl Input {
    /// The tensor's bytes, as preprocessing writes them.
    fn bytes(&mut self) -> &mut [u8] {
        match self {
            Input::U8(bytes) => bytes,
            Input::F16(bits) => bytemuck::cast_slice_mut(bits),
            Input::F32(values) => bytemuck::cast_slice_mut(values),
        }
    }
}

/// One inference worker's ONNX Runtime session, input tensor and preprocessing threads.
struct OrtSession {
    session: Session,
    input: Input,
    shape: [usize; 4],
    preprocess: PreprocessThreads,
    /// Keeps the preprocessing threads awake over the end of each inference while frames come
    /// back to back.
    standby: StandBy,
}

impl EngineSession for OrtSession {
    fn fill_input(&mut self, fill: &mut (dyn FnMut(&mut [u8], Option<&rayon::ThreadPool>) + Send)) {
        self.standby.release();
        fill(self.input.bytes(), self.preprocess.0.as_ref());
    }

    fn input(&mut self) -> &mut [u8] {
        self.input.bytes()
    }

    fn run(&mut self, outputs: &mut [OutputTensor]) -> Result<(), BackendError> {
        let failed = |e: ort::Error| BackendError::Inference(e.to_string());
        let shape = self.shape;
        let input: ort::session::SessionInputValue<'_> = match &self.input {
            Input::U8(bytes) => TensorRef::from_array_view((shape, &bytes[..])).map_err(failed)?.into(),
            Input::F16(bits) => {
                use half::slice::HalfBitsSliceExt;
                let values: &[half::f16] = bits.reinterpret_cast();
                TensorRef::from_array_view((shape, values)).map_err(failed)?.into()
            }
            Input::F32(values) => TensorRef::from_array_view((shape, &values[..])).map_err(failed)?.into(),
        };
        if let Some(pool) = &self.preprocess.0 {
            self.standby.inference_starts(pool);
        }
        let results = self.session.run([input]);
        self.standby.inference_ended();
        let results = results.map_err(failed)?;
        if results.len() != outputs.len() {
            return Err(BackendError::Inference(format!(
                "ONNX Runtime returned {} outputs, the model has {}",
                results.len(),
                outputs.len()
            )));
        }
        for (index, output) in outputs.iter_mut().enumerate() {
            copy_output(&results[index], output)?;
        }
        Ok(())
    }
}

/// Converts one ONNX Runtime output to f32 into the session's reused buffer.
fn copy_output(value: &DynValue, output: &mut OutputTensor) -> Result<(), BackendError> {
    fn extend<T: ort::value::PrimitiveTensorElementType + Copy>(
        value: &DynValue,
        output: &mut OutputTensor,
        to_f32: impl Fn(T) -> f32,
    ) -> Result<(), BackendError> {
        let (shape, data) = value.try_extract_tensor::<T>().map_err(|e| BackendError::Inference(e.to_string()))?;
        output.shape.extend(shape.iter().map(|size| usize::try_from(*size).unwrap_or(0)));
        output.data.extend(data.iter().map(|v| to_f32(*v)));
        Ok(())
    }
    output.shape.clear();
    output.data.clear();
    match value.dtype() {
        ValueType::Tensor { ty: TensorElementType::Float32, .. } => extend::<f32>(value, output, |v| v),
        ValueType::Tensor { ty: TensorElementType::Float16, .. } => {
            extend::<half::f16>(value, output, half::f16::to_f32)
        }
        ValueType::Tensor { ty: TensorElementType::Float64, .. } => extend::<f64>(value, output, |v| v as f32),
        ValueType::Tensor { ty: TensorElementType::Uint8, .. } => extend::<u8>(value, output, f32::from),
        ValueType::Tensor { ty: TensorElementType::Int8, .. } => extend::<i8>(value, output, f32::from),
        ValueType::Tensor { ty: TensorElementType::Int32, .. } => extend::<i32>(value, output, |v| v as f32),
        ValueType::Tensor { ty: TensorElementType::Int64, .. } => extend::<i64>(value, output, |v| v as f32),
        other => Err(BackendError::Inference(format!("output `{}` is {other}, not a numeric tensor", output.name))),
    }
}
