//! CPU backend: the preprocessing reference ([`CpuPreprocessor`]) plus tract-onnx inference.
//!
//! Owns: loading and optimising an ONNX model with tract, checking its input against the
//! [`PreprocessSpec`], and per-camera sessions that reuse their input tensor, tract state and
//! output buffers from frame to frame. Must not: decode detections or know about sources.

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use tract_onnx::prelude::{
    DatumType, Framework, InferenceFact, InferenceModelExt, TValue, Tensor, TypedModel, TypedSimplePlan,
    TypedSimpleState,
};
use tract_onnx::tract_hir::infer::Factoid;

use super::{Backend, BackendError, BackendInfo, BackendTimings, InferenceSession, ModelOutputs, OutputTensor};
use crate::config::TensorDtype;
use crate::frame::FrameSlot;
use crate::preprocess::{CpuPreprocessor, PreprocessSpec};

type CpuPlan = TypedSimplePlan<TypedModel>;
type CpuState = TypedSimpleState<TypedModel, Arc<CpuPlan>>;

/// An ONNX model optimised by tract for the spec's input shape, shared by every camera.
pub struct CpuBackend {
    plan: Arc<CpuPlan>,
    spec: PreprocessSpec,
    model_path: PathBuf,
    input_name: String,
    output_names: Vec<String>,
}

impl std::fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuBackend")
            .field("model_path", &self.model_path)
            .field("input_name", &self.input_name)
            .field("output_names", &self.output_names)
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

fn tensor_datum_type(dtype: TensorDtype) -> DatumType {
    match dtype {
        TensorDtype::U8 => DatumType::U8,
        TensorDtype::F16 => DatumType::F16,
        TensorDtype::F32 => DatumType::F32,
    }
}

fn dtype_name(dtype: DatumType) -> String {
    format!("{dtype:?}").to_lowercase()
}

impl CpuBackend {
    /// Loads `onnx`, checks that its single input (named `input_name` when given) can take the
    /// tensor `spec` describes, and optimises the model for exactly that input.
    pub fn load(onnx: &Path, spec: PreprocessSpec, input_name: Option<&str>) -> Result<CpuBackend, BackendError> {
        let load_error = |error: tract_onnx::prelude::TractError| BackendError::Load {
            path: onnx.to_path_buf(),
            message: format!("{error:#}"),
        };
        let model = tract_onnx::onnx().model_for_path(onnx).map_err(load_error)?;

        let inputs = model.input_outlets().map_err(load_error)?;
        let input_names: Vec<&str> = inputs.iter().map(|outlet| model.node(outlet.node).name.as_str()).collect();
        let [model_input] = input_names[..] else {
            return Err(BackendError::InputMismatch(format!(
                "expected a model with one input, {} has {}: {input_names:?}",
                onnx.display(),
                input_names.len()
            )));
        };
        let model_input = model_input.to_string();
        if let Some(expected) = input_name.filter(|expected| *expected != model_input) {
            return Err(BackendError::InputMismatch(format!(
                "expected input `{expected}`, the model's input is `{model_input}`"
            )));
        }

        let fact = model.input_fact(0).map_err(load_error)?;
        let expected_dt = tensor_datum_type(spec.dtype);
        if let Some(actual_dt) = fact.datum_type.concretize().filter(|dt| *dt != expected_dt) {
            return Err(BackendError::InputMismatch(format!(
                "input `{model_input}` is {}, the config says dtype = \"{}\"",
                dtype_name(actual_dt),
                dtype_name(expected_dt)
            )));
        }
        let expected_shape = spec.shape();
        let shape_fits = fact.shape.is_open()
            || (fact.shape.dims().count() == expected_shape.len()
                && fact.shape.dims().zip(expected_shape).all(|(dim, expected)| {
                    dim.concretize().and_then(|dim| dim.as_i64()).is_none_or(|dim| dim == expected as i64)
                }));
        if !shape_fits {
            let dims: Vec<String> = fact.shape.dims().map(|dim| dim.to_string()).collect();
            return Err(BackendError::InputMismatch(format!(
                "input `{model_input}` has shape [{}], the config's {} {}x{} input needs {expected_shape:?}",
                dims.join(", "),
                format!("{:?}", spec.layout).to_lowercase(),
                spec.width,
                spec.height
            )));
        }

        let output_names = model
            .output_outlets()
            .map_err(load_error)?
            .iter()
            .map(|outlet| model.outlet_label(*outlet).unwrap_or(&model.node(outlet.node).name).to_string())
            .collect();
        let plan = model
            .with_input_fact(0, InferenceFact::dt_shape(expected_dt, expected_shape))
            .and_then(|model| model.into_optimized())
            .and_then(|model| model.into_runnable())
            .map_err(load_error)?;

        Ok(CpuBackend {
            plan: Arc::new(plan),
            spec,
            model_path: onnx.to_path_buf(),
            input_name: model_input,
            output_names,
        })
    }
}

impl Backend for CpuBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            kind: "cpu",
            model: self.model_path.display().to_string(),
            detail: format!(
                "tract-onnx, input `{}` {} {:?}, outputs {}",
                self.input_name,
                dtype_name(tensor_datum_type(self.spec.dtype)),
                self.spec.shape(),
                self.output_names.join(", ")
            ),
        }
    }

    fn spec(&self) -> &PreprocessSpec {
        &self.spec
    }

    fn new_session(&self) -> Result<Box<dyn InferenceSession>, BackendError> {
        let state = CpuState::new(Arc::clone(&self.plan)).map_err(|e| BackendError::Inference(format!("{e:#}")))?;
        let input = Tensor::zero_dt(tensor_datum_type(self.spec.dtype), &self.spec.shape())
            .map_err(|e| BackendError::Inference(format!("{e:#}")))?;
        let outputs = ModelOutputs {
            tensors: self
                .output_names
                .iter()
                .map(|name| OutputTensor { name: name.clone(), ..Default::default() })
                .collect(),
        };
        Ok(Box::new(CpuSession {
            state,
            spec: self.spec.clone(),
            preprocessor: CpuPreprocessor::new(),
            input: Rc::new(input),
            outputs,
        }))
    }
}

/// One camera's inference state. The input tensor is shared with tract only for the duration of
/// a run, so the next frame writes into the same memory.
struct CpuSession {
    state: CpuState,
    spec: PreprocessSpec,
    preprocessor: CpuPreprocessor,
    input: Rc<Tensor>,
    outputs: ModelOutputs,
}

impl InferenceSession for CpuSession {
    fn run(&mut self, slot: &FrameSlot) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        let started = Instant::now();
        // Unique once tract has dropped the previous run's values; cloned only if it kept one.
        let input = Rc::make_mut(&mut self.input);
        self.preprocessor
            .run(slot.data(), slot.meta(), &self.spec, input.as_bytes_mut())
            .map_err(|e| BackendError::Preprocess(e.to_string()))?;
        let preprocessed = Instant::now();

        let results = self
            .state
            .run(std::iter::once(TValue::Var(Rc::clone(&self.input))).collect())
            .map_err(|e| BackendError::Inference(format!("{e:#}")))?;
        if results.len() != self.outputs.tensors.len() {
            return Err(BackendError::Inference(format!(
                "model returned {} outputs, expected {}",
                results.len(),
                self.outputs.tensors.len()
            )));
        }
        for (result, output) in results.iter().zip(&mut self.outputs.tensors) {
            let values = result.cast_to::<f32>().map_err(|e| BackendError::Inference(format!("{e:#}")))?;
            let values = values.as_slice::<f32>().map_err(|e| BackendError::Inference(format!("{e:#}")))?;
            output.shape.clear();
            output.shape.extend_from_slice(result.shape());
            output.data.clear();
            output.data.extend_from_slice(values);
        }
        let timings = BackendTimings { preprocess: preprocessed - started, infer: preprocessed.elapsed() };
        Ok((&self.outputs, timings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ColorOrder, ResizeFilter, ResizeKind, TensorLayout};
    use crate::frame::{HeapMemory, PixelFormat};

    fn model_path() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("models/ssd_mobilenet_v2_coco_prenms_fp32.onnx")
    }

    fn ssd_spec() -> PreprocessSpec {
        PreprocessSpec {
            width: 300,
            height: 300,
            layout: TensorLayout::Nhwc,
            dtype: TensorDtype::U8,
            color: ColorOrder::Rgb,
            resize: ResizeKind::Stretch,
            filter: ResizeFilter::Antialias,
            pad: 114,
            mean: [0.0; 3],
            std: [1.0; 3],
        }
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
        let backend = CpuBackend::load(&model_path(), ssd_spec(), Some("image")).expect("load");
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

    /// Protobuf encoding of a one-node ONNX model `y = Identity(x)` with `x` of ONNX element type
    /// `elem_type` and shape `shape`: enough to drive float inputs through tract.
    fn identity_model(elem_type: u64, shape: &[u64]) -> Vec<u8> {
        fn varint(mut value: u64, out: &mut Vec<u8>) {
            while value >= 0x80 {
                out.push((value as u8) | 0x80);
                value >>= 7;
            }
            out.push(value as u8);
        }
        fn field_varint(field: u64, value: u64, out: &mut Vec<u8>) {
            varint(field << 3, out);
            varint(value, out);
        }
        fn field_bytes(field: u64, bytes: &[u8], out: &mut Vec<u8>) {
            varint(field << 3 | 2, out);
            varint(bytes.len() as u64, out);
            out.extend_from_slice(bytes);
        }
        let value_info = |name: &str| {
            let mut dims = Vec::new();
            for dim in shape {
                let mut dimension = Vec::new();
                field_varint(1, *dim, &mut dimension);
                field_bytes(1, &dimension, &mut dims);
            }
            let mut tensor_type = Vec::new();
            field_varint(1, elem_type, &mut tensor_type);
            field_bytes(2, &dims, &mut tensor_type);
            let mut type_proto = Vec::new();
            field_bytes(1, &tensor_type, &mut type_proto);
            let mut info = Vec::new();
            field_bytes(1, name.as_bytes(), &mut info);
            field_bytes(2, &type_proto, &mut info);
            info
        };
        let mut node = Vec::new();
        field_bytes(1, b"x", &mut node);
        field_bytes(2, b"y", &mut node);
        field_bytes(4, b"Identity", &mut node);
        let mut graph = Vec::new();
        field_bytes(1, &node, &mut graph);
        field_bytes(2, b"identity", &mut graph);
        field_bytes(11, &value_info("x"), &mut graph);
        field_bytes(12, &value_info("y"), &mut graph);
        let mut opset = Vec::new();
        field_varint(2, 13, &mut opset);
        let mut model = Vec::new();
        field_varint(1, 8, &mut model);
        field_bytes(7, &graph, &mut model);
        field_bytes(8, &opset, &mut model);
        model
    }

    #[test]
    fn float_inputs_reach_the_model_as_preprocessed() {
        const ONNX_FLOAT: u64 = 1;
        const ONNX_FLOAT16: u64 = 10;
        let frame = [10, 20, 30, 40, 50, 60];
        for (dtype, elem_type) in [(TensorDtype::F32, ONNX_FLOAT), (TensorDtype::F16, ONNX_FLOAT16)] {
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
            let backend = CpuBackend::load(file.path(), spec, Some("x")).expect("load identity model");
            let mut session = backend.new_session().expect("session");
            let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
            slot.prepare(2, 1, PixelFormat::Rgb8).expect("prepare").copy_from_slice(&frame);
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
        let error = CpuBackend::load(&path, ssd_spec(), None).expect_err("missing file");
        assert!(matches!(&error, BackendError::Load { path: p, .. } if *p == path), "{error}");
        assert!(error.to_string().contains("does-not-exist.onnx"), "{error}");
    }

    #[test]
    fn garbage_model_is_a_load_error() {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(file.path(), b"\x08\x07this is not an onnx model\xff\xfe").expect("write");
        let error = CpuBackend::load(file.path(), ssd_spec(), None).expect_err("garbage");
        assert!(matches!(error, BackendError::Load { .. }), "{error}");
    }

    #[test]
    fn mismatched_spec_is_an_input_mismatch() {
        let mut f32_spec = ssd_spec();
        f32_spec.dtype = TensorDtype::F32;
        let error = CpuBackend::load(&model_path(), f32_spec, None).expect_err("dtype mismatch");
        assert!(matches!(&error, BackendError::InputMismatch(m) if m.contains("u8") && m.contains("f32")), "{error}");

        let mut nchw_spec = ssd_spec();
        nchw_spec.layout = TensorLayout::Nchw;
        let error = CpuBackend::load(&model_path(), nchw_spec, None).expect_err("layout mismatch");
        assert!(matches!(&error, BackendError::InputMismatch(m) if m.contains("[1, 3, 300, 300]")), "{error}");

        let error = CpuBackend::load(&model_path(), ssd_spec(), Some("images")).expect_err("name mismatch");
        assert!(matches!(&error, BackendError::InputMismatch(m) if m.contains("`images`")), "{error}");
    }
}
