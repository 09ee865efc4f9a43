//! CPU backend: rten inference behind the preprocessing fast path.
//!
//! Owns: loading and optimising an ONNX model with rten, checking its input against the
//! [`PreprocessSpec`] (fixed dimensions must match; symbolic ones such as `batch`, `height` or
//! `floor(height/2 - 1/2) + 1` are pinned by the spec's shape at run time), the thread pool that
//! runs one inference (`device.cpu_threads` threads), and per-camera sessions that reuse their
//! input tensor and output buffers from frame to frame. Must not: decode detections or know about
//! sources.
//!
//! rten computes in f32: a model whose input is f16 gets the preprocessed f16 values widened to
//! f32, so it sees exactly what the f16 tensor holds.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use rten::{DataType, Dimension, Model, ModelOptions, NodeId, RunOptions, ThreadPool, Value, ValueType, ValueView};

use super::{Backend, BackendError, BackendInfo, BackendTimings, InferenceSession, ModelOutputs, OutputTensor};
use crate::config::TensorDtype;
use crate::frame::FrameSlot;
use crate::preprocess::{FastPreprocessor, PreprocessSpec};

/// An ONNX model optimised by rten, shared by every camera, and the pool its inferences run on.
pub struct CpuBackend {
    runner: Arc<Runner>,
    /// Inference workers the scheduler runs on this backend (they share the pool); `None`: the
    /// default for the number of cameras.
    workers: Option<NonZeroUsize>,
    model_path: PathBuf,
    input_name: String,
    outputs: Vec<(NodeId, String)>,
}

/// What every session of a backend shares to run the model.
struct Runner {
    model: Model,
    pool: Arc<ThreadPool>,
    threads: usize,
    spec: PreprocessSpec,
    input_id: NodeId,
}

impl std::fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuBackend")
            .field("model_path", &self.model_path)
            .field("input_name", &self.input_name)
            .field("outputs", &self.outputs)
            .field("threads", &self.runner.threads)
            .field("spec", &self.runner.spec)
            .finish_non_exhaustive()
    }
}

fn dtype_name(dtype: TensorDtype) -> &'static str {
    match dtype {
        TensorDtype::U8 => "u8",
        TensorDtype::F16 => "f16",
        TensorDtype::F32 => "f32",
    }
}

/// The element type rten feeds a model input with: f16 inputs are computed in f32.
fn rten_data_type(dtype: TensorDtype) -> DataType {
    match dtype {
        TensorDtype::U8 => DataType::UInt8,
        TensorDtype::F16 | TensorDtype::F32 => DataType::Float,
    }
}

fn data_type_name(dtype: DataType) -> String {
    match dtype {
        DataType::Float => "f32 or f16".into(),
        DataType::UInt8 => "u8".into(),
        DataType::Int8 => "i8".into(),
        DataType::Int32 => "i32".into(),
        other => format!("{other:?}").to_lowercase(),
    }
}

impl CpuBackend {
    /// Loads `onnx`, checks that its single input (named `input_name` when given) can take the
    /// tensor `spec` describes, and prepares a pool of `threads` threads (at least 1) for it.
    pub fn load(
        onnx: &Path,
        spec: PreprocessSpec,
        input_name: Option<&str>,
        threads: usize,
    ) -> Result<CpuBackend, BackendError> {
        let load_error = |message: String| BackendError::Load { path: onnx.to_path_buf(), message };
        let mut options = ModelOptions::with_all_ops();
        // Weights packed once at load for the matrix kernels, not again on every inference.
        options.prepack_weights(true);
        // rten picks the loader by extension; another name is read and recognised by content
        // (external tensor data then cannot be found, as it is named relative to the file).
        let is_onnx_name = onnx.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("onnx"));
        let model = if is_onnx_name {
            options.load_file(onnx)
        } else {
            let bytes = crate::bounded_read::read(onnx, crate::bounded_read::MAX_MODEL_BYTES)
                .map_err(|error| load_error(error.to_string()))?;
            options.load(bytes)
        }
        .map_err(|error| load_error(error.to_string()))?;

        let input_names: Vec<&str> =
            model.input_ids().iter().map(|id| model.node_info(*id).and_then(|n| n.name()).unwrap_or("")).collect();
        let ([input_id], [model_input]) = (model.input_ids(), &input_names[..]) else {
            return Err(BackendError::InputMismatch(format!(
                "expected a model with one input, {} has {}: {input_names:?}",
                onnx.display(),
                input_names.len()
            )));
        };
        let (input_id, model_input) = (*input_id, model_input.to_string());
        if let Some(expected) = input_name.filter(|expected| *expected != model_input) {
            return Err(BackendError::InputMismatch(format!(
                "expected input `{expected}`, the model's input is `{model_input}`"
            )));
        }

        let info = model.node_info(input_id);
        let expected_dt = rten_data_type(spec.dtype);
        if let Some(ValueType::Tensor(actual_dt) | ValueType::Sequence(actual_dt)) =
            info.as_ref().and_then(|info| info.dtype()).filter(|dt| *dt != ValueType::Tensor(expected_dt))
        {
            return Err(BackendError::InputMismatch(format!(
                "input `{model_input}` is {}, the config says dtype = \"{}\"",
                data_type_name(actual_dt),
                dtype_name(spec.dtype)
            )));
        }
        let expected_shape = spec.shape();
        if let Some(dims) = info.and_then(|info| info.shape()) {
            let fits = dims.len() == expected_shape.len()
                && dims.iter().zip(expected_shape).all(|(dim, expected)| match dim {
                    Dimension::Fixed(size) => *size == expected,
                    Dimension::Symbolic(_) => true,
                });
            if !fits {
                let dims: Vec<String> = dims
                    .iter()
                    .map(|dim| match dim {
                        Dimension::Fixed(size) => size.to_string(),
                        Dimension::Symbolic(name) => name.clone(),
                    })
                    .collect();
                return Err(BackendError::InputMismatch(format!(
                    "input `{model_input}` has shape [{}], the config's {} {}x{} input needs {expected_shape:?}",
                    dims.join(", "),
                    format!("{:?}", spec.layout).to_lowercase(),
                    spec.width,
                    spec.height
                )));
            }
        }

        let outputs = model
            .output_ids()
            .iter()
            .map(|id| (*id, model.node_info(*id).and_then(|n| n.name()).unwrap_or("").to_string()))
            .collect();
        let threads = threads.max(1);
        let runner = Runner { model, pool: Arc::new(ThreadPool::with_num_threads(threads)), threads, spec, input_id };
        Ok(CpuBackend {
            runner: Arc::new(runner),
            workers: None,
            model_path: onnx.to_path_buf(),
            input_name: model_input,
            outputs,
        })
    }
}

impl CpuBackend {
    /// Lets `workers` inference workers run frames at the same time (`None`: the default for the
    /// cameras served, [`crate::config::cpu_workers`]). They share the backend's thread pool, so
    /// the compute threads stay `threads` however many there are.
    pub fn with_workers(mut self, workers: Option<NonZeroUsize>) -> CpuBackend {
        self.workers = workers;
        self
    }
}

impl Backend for CpuBackend {
    fn info(&self) -> BackendInfo {
        let Runner { threads, spec, .. } = &*self.runner;
        let output_names: Vec<&str> = self.outputs.iter().map(|(_, name)| name.as_str()).collect();
        BackendInfo {
            kind: "cpu",
            model: self.model_path.display().to_string(),
            detail: format!(
                "rten {}, {} thread{}, input `{}` {} {:?}, outputs {}",
                RTEN_VERSION,
                threads,
                if *threads == 1 { "" } else { "s" },
                self.input_name,
                dtype_name(spec.dtype),
                spec.shape(),
                output_names.join(", ")
            ),
        }
    }

    fn threads(&self) -> Option<usize> {
        Some(self.runner.threads)
    }

    fn inference_workers(&self, cameras: usize) -> usize {
        crate::config::cpu_workers(self.workers, self.runner.threads, cameras)
    }

    fn spec(&self) -> &PreprocessSpec {
        &self.runner.spec
    }

    fn new_session(&self) -> Result<Box<dyn InferenceSession>, BackendError> {
        let outputs = ModelOutputs {
            tensors: self
                .outputs
                .iter()
                .map(|(_, name)| OutputTensor { name: name.clone(), ..Default::default() })
                .collect(),
        };
        Ok(Box::new(CpuSession {
            runner: Arc::clone(&self.runner),
            preprocessor: FastPreprocessor::new(),
            input: InputTensor::new(&self.runner.spec),
            output_ids: self.outputs.iter().map(|(id, _)| *id).collect(),
            outputs,
        }))
    }
}

/// The rten version in `info()`; kept in step with Cargo.toml by a test.
const RTEN_VERSION: &str = "0.27";

/// One camera's input tensor, in the element type rten takes.
enum InputTensor {
    U8(Vec<u8>),
    /// f32 specs are preprocessed straight into it; f16 specs into `half` first, then widened.
    F32 {
        values: Vec<f32>,
        half: Vec<u16>,
    },
}

impl InputTensor {
    fn new(spec: &PreprocessSpec) -> Self {
        let elements = spec.elements();
        match spec.dtype {
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

/// One camera's inference state: its input tensor, preprocessing scratch and output buffers.
struct CpuSession {
    runner: Arc<Runner>,
    preprocessor: FastPreprocessor,
    input: InputTensor,
    output_ids: Vec<NodeId>,
    outputs: ModelOutputs,
}

impl InferenceSession for CpuSession {
    fn run(&mut self, slot: &FrameSlot) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        let backend = &*self.runner;
        let started = Instant::now();
        let target = self.input.preprocess_target();
        let preprocessor = &mut self.preprocessor;
        let (frame, meta) = (slot.data(), slot.meta());
        backend
            .pool
            .run(|| preprocessor.run(frame, meta, &backend.spec, target, backend.threads))
            .map_err(|e| BackendError::Preprocess(e.to_string()))?;
        let preprocessed = Instant::now();

        let input = self.input.view(backend.spec.shape())?;
        let options = RunOptions::default().with_thread_pool(Some(Arc::clone(&backend.pool)));
        let results = backend
            .model
            .run(vec![(backend.input_id, input.into())], &self.output_ids, Some(options))
            .map_err(|e| BackendError::Inference(e.to_string()))?;
        for (result, output) in results.into_iter().zip(&mut self.outputs.tensors) {
            copy_output(result, output)?;
        }
        let timings = BackendTimings { preprocess: preprocessed - started, infer: preprocessed.elapsed() };
        Ok((&self.outputs, timings))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ResizeFilter, TensorLayout};
    use crate::frame::{HeapMemory, PixelFormat};

    fn model_path() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("models/ssd_mobilenet_v2_coco_prenms_fp32.onnx")
    }

    fn ssd_spec() -> PreprocessSpec {
        PreprocessSpec::plain(300, 300, TensorLayout::Nhwc, TensorDtype::U8, ResizeFilter::Antialias)
    }

    fn dog_slot() -> FrameSlot {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/samples/dog.jpg");
        let image = image::open(path).expect("decode dog.jpg").to_rgb8();
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        slot.prepare(image.width(), image.height(), PixelFormat::Rgb8)
            .expect("prepare slot")
            .copy_from_slice(image.as_raw());
        slot
    }

    #[test]
    fn detects_the_dog_in_the_sample() {
        let backend = CpuBackend::load(&model_path(), ssd_spec(), Some("image"), 2).expect("load");
        assert_eq!(backend.info().kind, "cpu");
        let mut session = backend.new_session().expect("session");
        let slot = dog_slot();
        for _ in 0..2 {
            let (outputs, _) = session.run(&slot).expect("run");
            let boxes = outputs.by_name("boxes").expect("boxes output");
            let scores = outputs.by_name("scores").expect("scores output");
            assert_eq!(boxes.shape, [1, 1917, 4]);
            assert_eq!(scores.shape, [1, 1917, 91]);
            assert_eq!(scores.data.len(), 1917 * 91);
            // Column 18 is label id 17, "dog".
            let best_dog = scores.data.chunks_exact(91).map(|row| row[18]).fold(f32::MIN, f32::max);
            assert!(best_dog > 0.9, "best dog score {best_dog}");
        }
    }

    /// Just enough of the ONNX protobuf encoding to build test models by hand.
    mod onnx_proto {
        pub const FLOAT: u64 = 1;
        pub const FLOAT16: u64 = 10;

        /// A tensor dimension in a `ValueInfoProto`.
        pub enum Dim<'a> {
            Fixed(u64),
            Symbolic(&'a str),
        }

        fn varint(mut value: u64, out: &mut Vec<u8>) {
            while value >= 0x80 {
                out.push((value as u8) | 0x80);
                value >>= 7;
            }
            out.push(value as u8);
        }

        pub fn field_varint(field: u64, value: u64, out: &mut Vec<u8>) {
            varint(field << 3, out);
            varint(value, out);
        }

        pub fn field_bytes(field: u64, bytes: &[u8], out: &mut Vec<u8>) {
            varint(field << 3 | 2, out);
            varint(bytes.len() as u64, out);
            out.extend_from_slice(bytes);
        }

        /// `ValueInfoProto` of a tensor `name` of element type `elem_type`.
        pub fn value_info(name: &str, elem_type: u64, dims: &[Dim]) -> Vec<u8> {
            let mut shape = Vec::new();
            for dim in dims {
                let mut dimension = Vec::new();
                match dim {
                    Dim::Fixed(size) => field_varint(1, *size, &mut dimension),
                    Dim::Symbolic(name) => field_bytes(2, name.as_bytes(), &mut dimension),
                }
                field_bytes(1, &dimension, &mut shape);
            }
            let mut tensor_type = Vec::new();
            field_varint(1, elem_type, &mut tensor_type);
            field_bytes(2, &shape, &mut tensor_type);
            let mut type_proto = Vec::new();
            field_bytes(1, &tensor_type, &mut type_proto);
            let mut info = Vec::new();
            field_bytes(1, name.as_bytes(), &mut info);
            field_bytes(2, &type_proto, &mut info);
            info
        }

        /// `AttributeProto` holding a list of ints.
        pub fn ints_attribute(name: &str, values: &[u64]) -> Vec<u8> {
            const INTS: u64 = 7;
            let mut attribute = Vec::new();
            field_bytes(1, name.as_bytes(), &mut attribute);
            for value in values {
                field_varint(8, *value, &mut attribute);
            }
            field_varint(20, INTS, &mut attribute);
            attribute
        }

        /// `TensorProto` initializer of f32 values.
        pub fn f32_initializer(name: &str, dims: &[u64], values: &[f32]) -> Vec<u8> {
            let mut tensor = Vec::new();
            for dim in dims {
                field_varint(1, *dim, &mut tensor);
            }
            field_varint(2, FLOAT, &mut tensor);
            field_bytes(8, name.as_bytes(), &mut tensor);
            let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            field_bytes(9, &raw, &mut tensor);
            tensor
        }

        /// `NodeProto` of `op` from `inputs` to `outputs` with encoded `attributes`.
        pub fn node(op: &str, inputs: &[&str], outputs: &[&str], attributes: &[Vec<u8>]) -> Vec<u8> {
            let mut node = Vec::new();
            for input in inputs {
                field_bytes(1, input.as_bytes(), &mut node);
            }
            for output in outputs {
                field_bytes(2, output.as_bytes(), &mut node);
            }
            field_bytes(4, op.as_bytes(), &mut node);
            for attribute in attributes {
                field_bytes(5, attribute, &mut node);
            }
            node
        }

        /// `ModelProto` (opset 13) of a graph with these parts, each already encoded.
        pub fn model(
            nodes: &[Vec<u8>],
            initializers: &[Vec<u8>],
            inputs: &[Vec<u8>],
            outputs: &[Vec<u8>],
            value_infos: &[Vec<u8>],
        ) -> Vec<u8> {
            let mut graph = Vec::new();
            for node in nodes {
                field_bytes(1, node, &mut graph);
            }
            field_bytes(2, b"test", &mut graph);
            for (field, parts) in [(5, initializers), (11, inputs), (12, outputs), (13, value_infos)] {
                for part in parts {
                    field_bytes(field, part, &mut graph);
                }
            }
            let mut opset = Vec::new();
            field_varint(2, 13, &mut opset);
            let mut model = Vec::new();
            field_varint(1, 8, &mut model);
            field_bytes(7, &graph, &mut model);
            field_bytes(8, &opset, &mut model);
            model
        }
    }

    /// A one-node ONNX model `y = Identity(x)` with `x` and `y` of ONNX element type `elem_type`
    /// and shape `shape`: enough to drive float inputs through the backend.
    fn identity_model(elem_type: u64, shape: &[u64]) -> Vec<u8> {
        use onnx_proto::*;
        let dims: Vec<Dim> = shape.iter().map(|d| Dim::Fixed(*d)).collect();
        model(
            &[node("Identity", &["x"], &["y"], &[])],
            &[],
            &[value_info("x", elem_type, &dims)],
            &[value_info("y", elem_type, &dims)],
            &[],
        )
    }

    fn rgb_slot(width: u32, height: u32, pixels: &[u8]) -> FrameSlot {
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        slot.prepare(width, height, PixelFormat::Rgb8).expect("prepare").copy_from_slice(pixels);
        slot
    }

    #[test]
    fn float_inputs_reach_the_model_as_preprocessed() {
        let frame = [10, 20, 30, 40, 50, 60];
        for (dtype, elem_type) in [(TensorDtype::F32, onnx_proto::FLOAT), (TensorDtype::F16, onnx_proto::FLOAT16)] {
            let file = tempfile::NamedTempFile::new().expect("temp file");
            std::fs::write(file.path(), identity_model(elem_type, &[1, 3, 1, 2])).expect("write model");
            let spec = PreprocessSpec {
                width: 2,
                height: 1,
                layout: TensorLayout::Nchw,
                dtype,
                mean: [10.0, 20.0, 30.0],
                std: [2.0, 4.0, 8.0],
                ..ssd_spec()
            };
            let backend = CpuBackend::load(file.path(), spec, Some("x"), 1).expect("load identity model");
            let mut session = backend.new_session().expect("session");
            let slot = rgb_slot(2, 1, &frame);
            for _ in 0..2 {
                let (outputs, _) = session.run(&slot).expect("run");
                let y = outputs.by_name("y").expect("output y");
                assert_eq!(y.shape, [1, 3, 1, 2]);
                assert_eq!(y.data, [0.0, 15.0, 0.0, 7.5, 0.0, 3.75], "{dtype:?}");
            }
        }
    }

    #[test]
    fn missing_model_is_a_load_error_naming_the_path() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/does-not-exist.onnx");
        let error = CpuBackend::load(&path, ssd_spec(), None, 1).expect_err("missing file");
        assert!(matches!(&error, BackendError::Load { path: p, .. } if *p == path), "{error}");
        assert!(error.to_string().contains("does-not-exist.onnx"), "{error}");
    }

    #[test]
    fn garbage_model_is_a_load_error() {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(file.path(), b"\x08\x07this is not an onnx model\xff\xfe").expect("write");
        let error = CpuBackend::load(file.path(), ssd_spec(), None, 1).expect_err("garbage");
        assert!(matches!(error, BackendError::Load { .. }), "{error}");
    }

    #[test]
    fn mismatched_spec_is_an_input_mismatch() {
        let mut f32_spec = ssd_spec();
        f32_spec.dtype = TensorDtype::F32;
        let error = CpuBackend::load(&model_path(), f32_spec, None, 1).expect_err("dtype mismatch");
        assert!(matches!(&error, BackendError::InputMismatch(m) if m.contains("u8") && m.contains("f32")), "{error}");

        let mut nchw_spec = ssd_spec();
        nchw_spec.layout = TensorLayout::Nchw;
        let error = CpuBackend::load(&model_path(), nchw_spec, None, 1).expect_err("layout mismatch");
        assert!(matches!(&error, BackendError::InputMismatch(m) if m.contains("[1, 3, 300, 300]")), "{error}");

        let error = CpuBackend::load(&model_path(), ssd_spec(), Some("images"), 1).expect_err("name mismatch");
        assert!(matches!(&error, BackendError::InputMismatch(m) if m.contains("`images`")), "{error}");
    }

    /// The shape of an Ultralytics `dynamic=True` export: input `[batch, 3, height, width]`, a
    /// stride-2 convolution whose output dims are the exporter's expressions
    /// `floor(height/2 - 1/2) + 1`, and an output of the same symbolic shape.
    fn dynamic_conv_model() -> Vec<u8> {
        use onnx_proto::*;
        let input = [Dim::Symbolic("batch"), Dim::Fixed(3), Dim::Symbolic("height"), Dim::Symbolic("width")];
        let output = [
            Dim::Symbolic("batch"),
            Dim::Fixed(2),
            Dim::Symbolic("floor(height/2 - 1/2) + 1"),
            Dim::Symbolic("floor(width/2 - 1/2) + 1"),
        ];
        // 3x3 kernels with only the centre tap: channel 0 copies input channel 0 (R), channel 1
        // is half of input channel 2 (B) plus a bias of 1, each at the even pixels.
        let mut weights = vec![0.0; 2 * 3 * 9];
        weights[4] = 1.0;
        weights[27 + 2 * 9 + 4] = 0.5;
        let conv = node(
            "Conv",
            &["images", "w", "b"],
            &["features"],
            &[
                ints_attribute("kernel_shape", &[3, 3]),
                ints_attribute("strides", &[2, 2]),
                ints_attribute("pads", &[1, 1, 1, 1]),
            ],
        );
        model(
            &[conv, node("Relu", &["features"], &["output0"], &[])],
            &[f32_initializer("w", &[2, 3, 3, 3], &weights), f32_initializer("b", &[2], &[0.0, 1.0])],
            &[value_info("images", FLOAT, &input)],
            &[value_info("output0", FLOAT, &output)],
            &[value_info("features", FLOAT, &output)],
        )
    }

    #[test]
    fn symbolic_dimensions_are_pinned_by_the_configured_input_size() {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(file.path(), dynamic_conv_model()).expect("write model");
        for (width, height) in [(5u32, 4u32), (8, 7)] {
            let spec =
                PreprocessSpec { width, height, layout: TensorLayout::Nchw, dtype: TensorDtype::F32, ..ssd_spec() };
            let backend = CpuBackend::load(file.path(), spec, Some("images"), 2).expect("load a dynamic-axes model");
            let mut session = backend.new_session().expect("session");
            let pixels: Vec<u8> = (0..width * height * 3).map(|i| (i * 7 % 256) as u8).collect();
            let slot = rgb_slot(width, height, &pixels);
            let (outputs, _) = session.run(&slot).expect("run");
            let output = outputs.by_name("output0").expect("output0");
            let (out_h, out_w) = (height.div_ceil(2) as usize, width.div_ceil(2) as usize);
            assert_eq!(output.shape, [1, 2, out_h, out_w], "{width}x{height}");
            let pixel = |x: usize, y: usize, c: usize| pixels[(y * width as usize + x) * 3 + c] as f32;
            for y in 0..out_h {
                for x in 0..out_w {
                    assert_eq!(output.data[y * out_w + x], pixel(2 * x, 2 * y, 0), "R at ({x}, {y})");
                    let b = output.data[out_h * out_w + y * out_w + x];
                    assert_eq!(b, 0.5 * pixel(2 * x, 2 * y, 2) + 1.0, "B at ({x}, {y})");
                }
            }
        }
    }

    #[test]
    fn fixed_dimensions_still_have_to_match() {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(file.path(), identity_model(onnx_proto::FLOAT, &[1, 3, 4, 5])).expect("write model");
        let spec =
            PreprocessSpec { width: 6, height: 4, layout: TensorLayout::Nchw, dtype: TensorDtype::F32, ..ssd_spec() };
        let error = CpuBackend::load(file.path(), spec, None, 1).expect_err("width mismatch");
        assert!(matches!(&error, BackendError::InputMismatch(m) if m.contains("[1, 3, 4, 5]")), "{error}");
    }

    #[test]
    fn info_and_threads_name_the_pool() {
        let backend = CpuBackend::load(&model_path(), ssd_spec(), None, 3).expect("load");
        assert_eq!(backend.threads(), Some(3));
        assert!(backend.info().detail.contains("rten 0.27, 3 threads"), "{}", backend.info().detail);
        let single = CpuBackend::load(&model_path(), ssd_spec(), None, 0).expect("load");
        assert_eq!(single.threads(), Some(1), "0 threads means 1");
    }

    #[test]
    fn rten_version_in_info_matches_the_dependency() {
        let manifest = include_str!("../../Cargo.toml");
        assert!(manifest.contains(&format!("rten = {{ version = \"{RTEN_VERSION}\"")), "update RTEN_VERSION");
    }
}
