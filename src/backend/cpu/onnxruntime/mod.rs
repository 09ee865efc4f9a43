//! The CPU backend's ONNX Runtime engine, through the `ort` crate, with the library loaded at run
//! time ([`library`]).
//!
//! Owns: the process's one ONNX Runtime environment, whose global intra-op thread pool of
//! `device.cpu_threads` threads every session shares (as rten's sessions share one pool: more
//! inference workers never mean more compute threads); one ONNX Runtime session per inference
//! worker, built from the model file with every graph optimisation on, its input tensor reused
//! from frame to frame (f16 inputs are fed as f16) and its outputs converted to f32; and the
//! rayon pool of the same size that preprocessing runs on. Must not: call any `ort` function
//! before [`library::load`] has succeeded (`ort` panics when it has no library), preprocess, or
//! decode.

pub mod library;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ort::environment::{Environment, GlobalThreadPoolOptions};
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::{DynValue, TensorElementType, TensorRef, ValueType};

use super::engine::{Dim, Engine, EngineSession, InputElement, ModelInput};
use crate::backend::BackendError;
use crate::config::TensorDtype;
use crate::model::OutputTensor;
use crate::sys::lock::lock;

/// The environment, made on the first load, and the size of its thread pool.
static ENVIRONMENT: Mutex<Option<(Environment, usize)>> = Mutex::new(None);

/// The process's environment with a global pool of `threads` intra-op threads, and whether its
/// pool has that size. ONNX Runtime allows one environment per process, so a later load that asks
/// for another size (tests do; the daemon loads once) gets sessions with pools of their own.
fn environment(threads: usize) -> Result<(Environment, bool), String> {
    let mut environment = lock(&ENVIRONMENT);
    if let Some((env, pool)) = environment.as_ref() {
        return Ok((env.clone(), *pool == threads));
    }
    let pool = GlobalThreadPoolOptions::default().with_intra_threads(threads).map_err(|e| e.to_string())?;
    let env =
        ort::init().with_name("jetson-detectd").with_global_thread_pool(pool).build().map_err(|e| e.to_string())?;
    *environment = Some((env.clone(), threads));
    Ok((env, true))
}

/// A model loaded by ONNX Runtime, shared by every inference worker.
pub struct OrtEngine {
    name: String,
    model_path: PathBuf,
    env: Environment,
    /// `None`: the sessions use the environment's pool; else their own of this many threads.
    own_threads: Option<usize>,
    preprocess_pool: rayon::ThreadPool,
    /// The session made at load (to read the model's inputs), handed to the first worker.
    spare: Mutex<Option<Session>>,
    inputs: Vec<ModelInput>,
    outputs: Vec<String>,
}

impl OrtEngine {
    /// Loads `onnx` into a session on `threads` threads. The library must be loaded
    /// ([`library::load`]).
    pub fn load(onnx: &Path, threads: usize) -> Result<OrtEngine, BackendError> {
        let unavailable = |message: String| BackendError::Unavailable("cpu", format!("ONNX Runtime: {message}"));
        let library = library::loaded().ok_or_else(|| unavailable("the library is not loaded".into()))?;
        let (env, shared) = environment(threads).map_err(unavailable)?;
        let preprocess_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|index| format!("preprocess-{index}"))
            .build()
            .map_err(|e| unavailable(format!("preprocessing threads: {e}")))?;
        let mut engine = OrtEngine {
            name: format!("ONNX Runtime {}", library.version),
            model_path: onnx.to_path_buf(),
            env,
            own_threads: (!shared).then_some(threads),
            preprocess_pool,
            spare: Mutex::new(None),
            inputs: Vec::new(),
            outputs: Vec::new(),
        };
        let session = engine.build_session()?;
        engine.inputs = session.inputs().iter().map(|input| model_input(input.name(), input.dtype())).collect();
        engine.outputs = session.outputs().iter().map(|output| output.name().to_string()).collect();
        engine.spare = Mutex::new(Some(session));
        Ok(engine)
    }

    fn build_session(&self) -> Result<Session, BackendError> {
        let load_error = |message: String| BackendError::Load { path: self.model_path.clone(), message };
        // The file's own error (as rten reports it), not ONNX Runtime's wording of it.
        std::fs::File::open(&self.model_path).map_err(|error| load_error(error.to_string()))?;
        let mut builder = Session::builder(&self.env)
            .map_err(|e| load_error(e.to_string()))?
            .with_optimization_level(GraphOptimizationLevel::All)
            .map_err(|e| load_error(e.to_string()))?;
        if let Some(threads) = self.own_threads {
            builder = builder.with_independent_thread_pool().map_err(|e| load_error(e.to_string()))?;
            builder = builder.with_intra_threads(threads).map_err(|e| load_error(e.to_string()))?;
        }
        builder.commit_from_file(&self.model_path).map_err(|e| load_error(e.to_string()))
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

    fn on_threads(&self, work: &mut (dyn FnMut() + Send)) {
        self.preprocess_pool.install(work);
    }

    fn new_session(&self, shape: [usize; 4], dtype: TensorDtype) -> Result<Box<dyn EngineSession>, BackendError> {
        let spare = lock(&self.spare).take();
        let session = match spare {
            Some(session) => session,
            None => self.build_session()?,
        };
        let elements = shape.iter().product();
        let input = match dtype {
            TensorDtype::U8 => Input::U8(vec![0; elements]),
            TensorDtype::F16 => Input::F16(vec![0; elements]),
            TensorDtype::F32 => Input::F32(vec![0.0; elements]),
        };
        Ok(Box::new(OrtSession { session, input, shape }))
    }
}

/// One worker's input tensor, in the model's element type.
enum Input {
    U8(Vec<u8>),
    /// f16 bits, as preprocessing writes them.
    F16(Vec<u16>),
    F32(Vec<f32>),
}

/// One inference worker's ONNX Runtime session and input tensor.
struct OrtSession {
    session: Session,
    input: Input,
    shape: [usize; 4],
}

impl EngineSession for OrtSession {
    fn input(&mut self) -> &mut [u8] {
        match &mut self.input {
            Input::U8(bytes) => bytes,
            Input::F16(bits) => bytemuck::cast_slice_mut(bits),
            Input::F32(values) => bytemuck::cast_slice_mut(values),
        }
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
        let results = self.session.run([input]).map_err(failed)?;
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
