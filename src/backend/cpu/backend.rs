//! The CPU backend itself: an ONNX model run on the CPU by one of two engines, behind the
//! preprocessing fast path.
//!
//! Owns: loading the model on the engine [`super::engine_choice`] chose (rten, compiled in, runs
//! everywhere; ONNX Runtime, loaded at run time by [`super::onnxruntime`], several times faster);
//! what every engine shares: checking the model's input against the [`PreprocessSpec`] (fixed
//! dimensions must match; symbolic ones such as `batch`, `height` or `floor(height/2 - 1/2) + 1`
//! are pinned by the spec's shape at run time), preprocessing into each session's reused input
//! tensor on the session's threads, giving each inference worker its share of the cores as
//! [`crate::config::CpuBudget`] decides (`device.cpu_threads`, `device.cpu_workers`) and keeping
//! the worker's threads to the CPUs the budget gives it, and the timings. A worker of 32 threads
//! or more overlaps: the scheduler runs two sessions that take turns, one preprocessing its next
//! frame on its own thread alone ([`InferenceSession::prepare`] beside an inference) while the
//! other's inference runs on the share less two threads. The engines sit below it:
//! [`super::engine`] (what an engine offers), [`super::rten`], [`super::onnxruntime`]. Must not:
//! decode detections, know about sources, or run more than the budget's threads at a time.
//!
//! rten computes in f32: a model whose input is f16 gets the preprocessed f16 values widened to
//! f32, so it sees exactly what the f16 tensor holds. ONNX Runtime takes the f16 tensor as it is.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::engine::{dtype_name, Dim, Engine, EngineSession};
use super::engine_choice::{EngineChoice, EngineKind};
use super::onnxruntime::OrtEngine;
use super::rten::RtenEngine;
use crate::backend::error::BackendError;
use crate::backend::traits::{Backend, BackendInfo, BackendTimings, InferenceSession, WorkerSeat};
use crate::config::CpuBudget;
use crate::frame::FrameSlot;
use crate::model::{ModelOutputs, OutputTensor};
use crate::preprocess::{CpuPreprocessor, FastPreprocessor, PreprocessSpec, Roi};

/// An ONNX model loaded on a CPU engine, shared by every camera.
pub struct CpuBackend {
    engine: Arc<dyn Engine>,
    spec: PreprocessSpec,
    /// The cores of the budget: all of them for a worker alone, a share for each of several.
    cores: usize,
    /// Inference workers the scheduler runs on this backend (they share the cores); `None`: the
    /// budget's default for the number of cameras.
    workers: Option<NonZeroUsize>,
    model_path: PathBuf,
    input_name: String,
}

impl std::fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuBackend")
            .field("engine", &self.engine.name())
            .field("model_path", &self.model_path)
            .field("input_name", &self.input_name)
            .field("outputs", &self.engine.outputs())
            .field("cores", &self.cores)
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl CpuBackend {
    /// Loads `onnx` on the engine `choice` names, checks that its single input (named
    /// `input_name` when given) can take the tensor `spec` describes and that it has outputs, and
    /// gives the backend `cores` cores (at least 1).
    pub fn open(
        onnx: &Path,
        spec: PreprocessSpec,
        input_name: Option<&str>,
        cores: usize,
        choice: &EngineChoice,
    ) -> Result<CpuBackend, BackendError> {
        let cores = cores.max(1);
        let engine: Arc<dyn Engine> = match choice.kind {
            EngineKind::Rten => Arc::new(RtenEngine::load(onnx)?),
            EngineKind::OnnxRuntime => Arc::new(OrtEngine::load(onnx, cores)?),
        };
        let input_name = check_input(engine.as_ref(), onnx, &spec, input_name)?;
        if engine.outputs().is_empty() {
            // ONNX Runtime would refuse every inference ("at least one output should be
            // requested"), an error of the run and not of the model: exit 1, a restart every 5 s.
            return Err(BackendError::Load {
                path: onnx.to_path_buf(),
                message: "the model declares no outputs: there is nothing to decode".into(),
            });
        }
        Ok(CpuBackend { engine, spec, cores, workers: None, model_path: onnx.to_path_buf(), input_name })
    }

    /// Lets `workers` inference workers run frames at the same time (`None`: the budget's
    /// default for the cameras served, [`CpuBudget::for_cameras`]). They share the cores, so the
    /// threads that compute stay `cores` however many workers there are.
    pub fn with_workers(mut self, workers: Option<NonZeroUsize>) -> CpuBackend {
        self.workers = workers;
        self
    }

    /// A session on `threads` threads of its own.
    fn session_on(&self, threads: usize) -> Result<Box<dyn InferenceSession>, BackendError> {
        let outputs = ModelOutputs {
            tensors: self
                .engine
                .outputs()
                .iter()
                .map(|name| OutputTensor { name: name.clone(), ..Default::default() })
                .collect(),
        };
        Ok(Box::new(CpuSession {
            session: self.engine.new_session(self.spec.shape(), self.spec.dtype, threads)?,
            spec: self.spec.clone(),
            threads,
            preprocessor: FastPreprocessor::new(),
            region_preprocessor: CpuPreprocessor::new(),
            outputs,
            prepared: Duration::ZERO,
        }))
    }
}

/// The name of the model's single input, once it is known to take the tensor `spec` describes.
fn check_input(
    engine: &dyn Engine,
    onnx: &Path,
    spec: &PreprocessSpec,
    expected_name: Option<&str>,
) -> Result<String, BackendError> {
    let [input] = engine.inputs() else {
        let names: Vec<&str> = engine.inputs().iter().map(|input| input.name.as_str()).collect();
        return Err(BackendError::InputMismatch(format!(
            "expected a model with one input, {} has {}: {names:?}",
            onnx.display(),
            names.len()
        )));
    };
    let model_input = &input.name;
    if let Some(expected) = expected_name.filter(|expected| expected != model_input) {
        return Err(BackendError::InputMismatch(format!(
            "expected input `{expected}`, the model's input is `{model_input}`"
        )));
    }
    if let Some(element) = input.element.as_ref().filter(|element| !element.takes.contains(&spec.dtype)) {
        return Err(BackendError::InputMismatch(format!(
            "input `{model_input}` is {}, the config says dtype = \"{}\"",
            element.name,
            dtype_name(spec.dtype)
        )));
    }
    let expected_shape = spec.shape();
    if let Some(dims) = &input.dims {
        let fits = dims.len() == expected_shape.len()
            && dims.iter().zip(expected_shape).all(|(dim, expected)| match dim {
                Dim::Fixed(size) => *size == expected,
                Dim::Symbolic(_) => true,
            });
        if !fits {
            let dims: Vec<String> = dims
                .iter()
                .map(|dim| match dim {
                    Dim::Fixed(size) => size.to_string(),
                    Dim::Symbolic(name) => name.clone(),
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
    Ok(model_input.clone())
}

impl Backend for CpuBackend {
    fn info(&self) -> BackendInfo {
        let threads = self.cores;
        BackendInfo {
            kind: "cpu",
            model: self.model_path.display().to_string(),
            detail: format!(
                "{}, {} thread{}, input `{}` {} {:?}, outputs {}",
                self.engine.name(),
                threads,
                if threads == 1 { "" } else { "s" },
                self.input_name,
                dtype_name(self.spec.dtype),
                self.spec.shape(),
                self.engine.outputs().join(", ")
            ),
        }
    }

    fn engine(&self) -> Option<String> {
        Some(self.engine.name())
    }

    fn threads(&self) -> Option<usize> {
        Some(self.cores)
    }

    fn inference_workers(&self, cameras: usize) -> usize {
        CpuBudget::for_cameras(self.cores, self.workers, cameras).workers()
    }

    fn spec(&self) -> &PreprocessSpec {
        &self.spec
    }

    fn new_session(&self) -> Result<Box<dyn InferenceSession>, BackendError> {
        self.session_on(self.cores)
    }

    /// The session of worker `seat` on its share of the cores. Called on the worker's own thread,
    /// which it keeps (with the engine's and preprocessing's threads, created here and inheriting
    /// the set) to the worker's own CPUs when the budget gives it some.
    fn new_worker_session(&self, seat: WorkerSeat) -> Result<Box<dyn InferenceSession>, BackendError> {
        let budget = CpuBudget::new(self.cores, seat.workers);
        keep_to_own_cpus(&budget, seat.index);
        let share = budget.threads_of(seat.index);
        if self.overlaps_preprocessing(seat) {
            self.session_on(share - OVERLAP_RESERVE)
        } else {
            self.session_on(share)
        }
    }

    fn overlaps_preprocessing(&self, seat: WorkerSeat) -> bool {
        CpuBudget::new(self.cores, seat.workers).threads_of(seat.index) >= OVERLAP_FROM
    }
}

/// Workers of this many threads or more overlap preprocessing with inference: where taking two
/// threads from the inference costs less than the preprocessing it hides. One camera, ONNX Runtime,
/// SSD MobileNet v2, 768x576 frames on a 16-core Xeon (`docs/src/performance/cpu-engines.md`):
/// while preprocessing took 0.45 ms at 16 threads between inferences, overlapping gave 0.92x the
/// frames/s of not overlapping at 8 threads, 0.98x at 10, 0.95x at 12, 1.01x at 14, 1.05x and 1.14x
/// at 16 (two or four cameras: 0.75-0.97x); since the SIMD conversions and handing bands straight
/// to the pool (0.17 ms at 16 threads), 0.90x at 16 (216 against 240 frames/s, 6 rounds). Above 16
/// threads it is not measured (no machine here has more cores): 32 is where this model's inference
/// gains almost nothing from its last two threads (ONNX Runtime's own 1 x 8 gives 0.8 of 1 x 16).
const OVERLAP_FROM: usize = 32;
/// Threads of an overlapping worker's share that its sessions' inference leaves to the
/// preprocessing beside it and to the camera threads: 2 (1.14x at 16 threads) rather than 1
/// (1.09x) or none (0.80x: every core's inference thread then waits for the one that shares its
/// core with the preprocessing).
const OVERLAP_RESERVE: usize = 2;

/// Keeps the calling thread, and every thread it creates from now on, to the CPUs `budget` gives
/// worker `worker` ([`CpuBudget::cpus_of`]); where it gives none, or the system refuses, the
/// threads run anywhere (slower with several workers, never wrong: the log says why).
fn keep_to_own_cpus(budget: &CpuBudget, worker: usize) {
    let allowed = match crate::sys::affinity::allowed_cpus() {
        Ok(allowed) => allowed,
        Err(error) => {
            log::warn!(
                "inference worker {worker}: cannot read the CPUs it may use ({error}); its threads run anywhere"
            );
            return;
        }
    };
    let Some(cpus) = budget.cpus_of(worker, &allowed) else { return };
    match crate::sys::affinity::keep_current_thread_to(&cpus) {
        Ok(()) => log::debug!("inference worker {worker}: threads kept to CPUs {cpus:?}"),
        Err(error) => log::warn!(
            "inference worker {worker}: cannot keep its threads to CPUs {cpus:?} ({error}); they run anywhere"
        ),
    }
}

/// One inference worker's state: the engine's session (with its input tensor and threads),
/// preprocessing scratch and output buffers.
struct CpuSession {
    session: Box<dyn EngineSession>,
    spec: PreprocessSpec,
    /// The session's threads: preprocessing shares a frame out among as many tasks.
    threads: usize,
    preprocessor: FastPreprocessor,
    /// Regions (classifier crops, a few thousand pixels each) take the reference implementation:
    /// the fast path's threads pay off on whole frames only.
    region_preprocessor: CpuPreprocessor,
    outputs: ModelOutputs,
    /// How long the preprocessing of the input [`InferenceSession::infer`] runs on took.
    prepared: Duration,
}

impl CpuSession {
    /// Preprocesses the frame in `slot` into the input tensor, shared out among `threads` tasks: on the session's
    /// threads, or on the calling thread alone for 1.
    fn preprocess(&mut self, slot: &FrameSlot, threads: usize) -> Result<(), BackendError> {
        let (preprocessor, spec) = (&mut self.preprocessor, &self.spec);
        let (frame, meta) = (slot.data(), slot.meta());
        let preprocessed = if threads <= 1 {
            preprocessor.run(frame, meta, spec, self.session.input(), 1)
        } else {
            let mut preprocessed = Ok(());
            self.session.fill_input(&mut |target, beside| {
                preprocessed = match beside {
                    Some(pool) => preprocessor.run_beside(pool, frame, meta, spec, target),
                    None => preprocessor.run(frame, meta, spec, target, threads),
                }
            });
            preprocessed
        };
        preprocessed.map_err(|e| BackendError::Preprocess(e.to_string()))
    }
}

impl InferenceSession for CpuSession {
    fn run(&mut self, slot: &FrameSlot) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        self.prepare(slot, false)?;
        self.infer()
    }

    fn prepare(&mut self, slot: &FrameSlot, beside_inference: bool) -> Result<(), BackendError> {
        let started = Instant::now();
        self.preprocess(slot, if beside_inference { 1 } else { self.threads })?;
        self.prepared = started.elapsed();
        Ok(())
    }

    fn infer(&mut self) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        let started = Instant::now();
        self.session.run(&mut self.outputs.tensors)?;
        Ok((&self.outputs, BackendTimings { preprocess: self.prepared, infer: started.elapsed() }))
    }

    fn run_regions(&mut self, slot: &FrameSlot, rois: &[Roi]) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        let &[roi] = rois else {
            return Err(BackendError::Inference(format!("{} regions given to a session that takes 1", rois.len())));
        };
        let started = Instant::now();
        let (preprocessor, spec) = (&mut self.region_preprocessor, &self.spec);
        let (frame, meta) = (slot.data(), slot.meta());
        let mut preprocessed = Ok(());
        self.session.fill_input(&mut |target, _| preprocessed = preprocessor.run_roi(frame, meta, roi, spec, target));
        preprocessed.map_err(|e| BackendError::Preprocess(e.to_string()))?;
        let inference_started = Instant::now();
        self.session.run(&mut self.outputs.tensors)?;
        let timings = BackendTimings { preprocess: inference_started - started, infer: inference_started.elapsed() };
        Ok((&self.outputs, timings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::rten::RTEN_VERSION;
    use crate::config::CpuEngine;
    use crate::frame::{HeapMemory, PixelFormat};
    use crate::preprocess::{ResizeFilter, TensorDtype, TensorLayout};

    /// Every engine this machine can run: rten, and ONNX Runtime when its library is found
    /// (`ORT_DYLIB_PATH`, the library directories, a pip package). The host suite in CI
    /// (`CI=true` on x86_64, where `.ci/run` installs it) must have it; elsewhere its absence is
    /// printed and only rten runs.
    fn engines() -> Vec<EngineChoice> {
        let mut engines = vec![EngineChoice::rten("test")];
        match EngineChoice::choose(CpuEngine::Onnxruntime, None) {
            Ok(choice) => engines.push(choice),
            Err(error) if std::env::var("CI").as_deref() == Ok("true") && cfg!(target_arch = "x86_64") => {
                panic!("CI=true on x86_64 runs every engine, but ONNX Runtime is missing: {error}")
            }
            Err(error) => eprintln!("ONNX Runtime engine skipped: {error}"),
        }
        engines
    }

    fn open(
        engine: &EngineChoice,
        onnx: &Path,
        spec: PreprocessSpec,
        input_name: Option<&str>,
        threads: usize,
    ) -> Result<CpuBackend, BackendError> {
        CpuBackend::open(onnx, spec, input_name, threads, engine)
    }

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
    fn every_engine_detects_the_dog_in_the_sample() {
        let slot = dog_slot();
        for engine in engines() {
            let backend = open(&engine, &model_path(), ssd_spec(), Some("image"), 2).expect("load");
            assert_eq!(backend.info().kind, "cpu");
            assert_eq!(backend.engine(), Some(engine.engine()));
            let mut session = backend.new_session().expect("session");
            for _ in 0..2 {
                let (outputs, _) = session.run(&slot).expect("run");
                let boxes = outputs.by_name("boxes").expect("boxes output");
                let scores = outputs.by_name("scores").expect("scores output");
                assert_eq!(boxes.shape, [1, 1917, 4]);
                assert_eq!(scores.shape, [1, 1917, 91]);
                assert_eq!(scores.data.len(), 1917 * 91);
                let best_dog = best_dog_score(outputs);
                assert!(best_dog > 0.9, "{}: best dog score {best_dog}", engine.engine());
            }
        }
    }

    fn best_dog_score(outputs: &ModelOutputs) -> f32 {
        let scores = outputs.by_name("scores").expect("scores output");
        // Column 18 is label id 17, "dog".
        scores.data.chunks_exact(91).map(|row| row[18]).fold(f32::MIN, f32::max)
    }

    /// Issue 49: a model without outputs passed ONNX Runtime's load and failed every inference
    /// ("at least one output should be requested"): exit 1 and a restart every 5 s.
    #[test]
    fn every_engine_refuses_a_model_without_outputs_at_load() {
        use crate::onnx::test_models::{graph_input, graph_node, model, node, UINT8};
        use crate::protobuf::encode::{bytes_field, varint_field};
        let dir = tempfile::tempdir().expect("tempdir");
        let onnx = dir.path().join("no-outputs.onnx");
        let input = graph_input("image", UINT8, &[Some(1), Some(300), Some(300), Some(3)]);
        let graph = model(&[input, graph_node(node("Identity", &["image"], &["out"]))]);
        // ONNX Runtime wants the operator set named (opset_import: the default domain, 13).
        let opset = bytes_field(8, &[bytes_field(1, b""), varint_field(2, 13)].concat());
        std::fs::write(&onnx, [graph, opset].concat()).expect("write");
        for engine in engines() {
            match open(&engine, &onnx, ssd_spec(), Some("image"), 1) {
                Err(BackendError::Load { message, .. }) => assert!(message.contains("no outputs"), "{message}"),
                Err(other) => panic!("{}: {other}", engine.engine()),
                Ok(_) => panic!("{}: a model without outputs loaded", engine.engine()),
            }
        }
    }

    #[test]
    fn every_worker_detects_the_dog_on_its_share_of_the_cores() {
        let slot = dog_slot();
        for engine in engines() {
            let backend = open(&engine, &model_path(), ssd_spec(), Some("image"), 3).expect("load");
            assert_eq!(backend.inference_workers(2), 2, "one worker per camera");
            assert_eq!(backend.inference_workers(8), 3, "at most one worker per core");
            for seat in [WorkerSeat { index: 0, workers: 2 }, WorkerSeat { index: 1, workers: 2 }] {
                let mut session = backend.new_worker_session(seat).expect("session");
                let (outputs, _) = session.run(&slot).expect("run");
                let best_dog = best_dog_score(outputs);
                assert!(best_dog > 0.9, "{} worker {}: best dog score {best_dog}", engine.engine(), seat.index);
            }
        }
    }

    #[test]
    fn a_frame_prepared_beside_an_inference_on_one_thread_gives_what_run_gives() {
        let slot = dog_slot();
        for engine in engines() {
            let backend = open(&engine, &model_path(), ssd_spec(), Some("image"), 3).expect("load");
            let mut session = backend.new_session().expect("session");
            let (outputs, _) = session.run(&slot).expect("run");
            let expected = outputs.clone();
            session.prepare(&slot, true).expect("prepare on one thread");
            let (outputs, timings) = session.infer().expect("infer");
            assert_eq!(outputs, &expected, "{}", engine.engine());
            assert!(timings.preprocess > Duration::ZERO, "the preparing's time is reported with the inference");
        }
    }

    #[test]
    fn only_a_worker_of_thirty_two_threads_or_more_overlaps_preprocessing_with_inference() {
        let engine = EngineChoice::rten("test");
        let backend = open(&engine, &model_path(), ssd_spec(), Some("image"), 32).expect("load");
        assert!(backend.overlaps_preprocessing(WorkerSeat { index: 0, workers: 1 }));
        assert!(!backend.overlaps_preprocessing(WorkerSeat { index: 1, workers: 2 }), "16 threads each");
        let backend = open(&engine, &model_path(), ssd_spec(), Some("image"), 16).expect("load");
        assert!(!backend.overlaps_preprocessing(WorkerSeat { index: 0, workers: 1 }));
    }

    #[test]
    fn a_worker_of_several_keeps_its_thread_to_its_own_cpus_and_a_worker_alone_runs_anywhere() {
        let engine = EngineChoice::rten("test");
        std::thread::spawn(move || {
            let allowed = crate::sys::affinity::allowed_cpus().expect("sched_getaffinity");
            let backend = open(&engine, &model_path(), ssd_spec(), Some("image"), allowed.len()).expect("load");
            backend.new_session().expect("a worker alone");
            assert_eq!(crate::sys::affinity::allowed_cpus().expect("after"), allowed, "alone: every CPU");
            let seat = WorkerSeat { index: 1, workers: 2 };
            backend.new_worker_session(seat).expect("worker 1 of 2");
            let expected = CpuBudget::new(allowed.len(), 2).cpus_of(1, &allowed).unwrap_or(allowed);
            assert_eq!(crate::sys::affinity::allowed_cpus().expect("kept"), expected);
        })
        .join()
        .expect("the worker thread");
    }

    #[test]
    fn every_engine_classifies_regions_of_a_frame_by_their_dominant_colour() {
        // Three stripes of 40 columns: red, green, blue; the test classifier's answer is the
        // crop's dominant colour (tests/models/NOTICE.md).
        let (width, height) = (120u32, 30u32);
        let stripes: Vec<u8> = (0..height)
            .flat_map(|_| (0..width).flat_map(|x| [[220, 30, 30], [30, 200, 40], [20, 40, 210]][(x / 40) as usize]))
            .collect();
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        slot.prepare(width, height, PixelFormat::Rgb8).expect("prepare slot").copy_from_slice(&stripes);
        let onnx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/models/colour_classifier.onnx");
        let mut spec = PreprocessSpec::plain(32, 32, TensorLayout::Nchw, TensorDtype::F32, ResizeFilter::Antialias);
        spec.std = [255.0; 3];
        for engine in engines() {
            let backend = open(&engine, &onnx, spec.clone(), None, 1).expect("load");
            let mut session = backend.new_session().expect("session");
            for (stripe, expected) in [(0u32, 0usize), (1, 1), (2, 2)] {
                let roi = Roi { x: stripe * 40 + 5, y: 2, width: 30, height: 20 };
                let (outputs, _) = session.run_regions(&slot, &[roi]).expect("run");
                let mut classes = Vec::new();
                crate::decode::classify::classify(
                    outputs,
                    1,
                    3,
                    crate::config::ClassScores::Probabilities,
                    None,
                    &mut Vec::new(),
                    &mut classes,
                )
                .expect("classify");
                let class = classes[0].expect("a class");
                assert_eq!(class.class_id, expected, "{}: stripe {stripe} gave {class:?}", engine.engine());
                assert!(class.score > 0.9, "{class:?}");
            }
            let outside = Roi { x: 100, y: 0, width: 40, height: 10 };
            assert!(matches!(session.run_regions(&slot, &[outside]), Err(BackendError::Preprocess(_))));
            assert!(session.run_regions(&slot, &[]).is_err(), "a CPU session takes one region at a time");
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
        let cases = [(TensorDtype::F32, onnx_proto::FLOAT), (TensorDtype::F16, onnx_proto::FLOAT16)];
        for (engine, (dtype, elem_type)) in engines().iter().flat_map(|engine| cases.map(|case| (engine, case))) {
            let file = tempfile::NamedTempFile::new().expect("temp file");
            std::fs::write(file.path(), identity_model(elem_type, &[1, 3, 1, 2])).expect("write model");
            let spec = PreprocessSpec {
                name: None,
                width: 2,
                height: 1,
                layout: TensorLayout::Nchw,
                dtype,
                mean: [10.0, 20.0, 30.0],
                std: [2.0, 4.0, 8.0],
                ..ssd_spec()
            };
            let backend = open(engine, file.path(), spec, Some("x"), 1).expect("load identity model");
            let mut session = backend.new_session().expect("session");
            let slot = rgb_slot(2, 1, &frame);
            for _ in 0..2 {
                let (outputs, _) = session.run(&slot).expect("run");
                let y = outputs.by_name("y").expect("output y");
                assert_eq!(y.shape, [1, 3, 1, 2]);
                assert_eq!(y.data, [0.0, 15.0, 0.0, 7.5, 0.0, 3.75], "{dtype:?} on {}", engine.engine());
            }
        }
    }

    #[test]
    fn missing_model_is_a_load_error_naming_the_path() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/does-not-exist.onnx");
        for engine in engines() {
            let error = open(&engine, &path, ssd_spec(), None, 1).expect_err("missing file");
            assert!(matches!(&error, BackendError::Load { path: p, .. } if *p == path), "{error}");
            assert!(error.to_string().contains("does-not-exist.onnx"), "{error}");
        }
    }

    #[test]
    fn garbage_model_is_a_load_error() {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(file.path(), b"\x08\x07this is not an onnx model\xff\xfe").expect("write");
        for engine in engines() {
            let error = open(&engine, file.path(), ssd_spec(), None, 1).expect_err("garbage");
            assert!(matches!(error, BackendError::Load { .. }), "{}: {error}", engine.engine());
        }
    }

    #[test]
    fn mismatched_spec_is_an_input_mismatch() {
        for engine in engines() {
            let mut f32_spec = ssd_spec();
            f32_spec.dtype = TensorDtype::F32;
            let error = open(&engine, &model_path(), f32_spec, None, 1).expect_err("dtype mismatch");
            assert!(
                matches!(&error, BackendError::InputMismatch(m) if m.contains("u8") && m.contains("f32")),
                "{error}"
            );

            let mut nchw_spec = ssd_spec();
            nchw_spec.layout = TensorLayout::Nchw;
            let error = open(&engine, &model_path(), nchw_spec, None, 1).expect_err("layout mismatch");
            assert!(matches!(&error, BackendError::InputMismatch(m) if m.contains("[1, 3, 300, 300]")), "{error}");

            let error = open(&engine, &model_path(), ssd_spec(), Some("images"), 1).expect_err("name mismatch");
            assert!(matches!(&error, BackendError::InputMismatch(m) if m.contains("`images`")), "{error}");
        }
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
        let sizes = [(5u32, 4u32), (8, 7)];
        for (engine, (width, height)) in engines().iter().flat_map(|engine| sizes.map(|size| (engine, size))) {
            let spec =
                PreprocessSpec { width, height, layout: TensorLayout::Nchw, dtype: TensorDtype::F32, ..ssd_spec() };
            let backend = open(engine, file.path(), spec, Some("images"), 2).expect("load a dynamic-axes model");
            let mut session = backend.new_session().expect("session");
            let pixels: Vec<u8> = (0..width * height * 3).map(|i| (i * 7 % 256) as u8).collect();
            let slot = rgb_slot(width, height, &pixels);
            let (outputs, _) = session.run(&slot).expect("run");
            let output = outputs.by_name("output0").expect("output0");
            let (out_h, out_w) = (height.div_ceil(2) as usize, width.div_ceil(2) as usize);
            assert_eq!(output.shape, [1, 2, out_h, out_w], "{width}x{height} on {}", engine.engine());
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
        for engine in engines() {
            let error = open(&engine, file.path(), spec.clone(), None, 1).expect_err("width mismatch");
            assert!(matches!(&error, BackendError::InputMismatch(m) if m.contains("[1, 3, 4, 5]")), "{error}");
        }
    }

    #[test]
    fn info_and_threads_name_the_pool() {
        for engine in engines() {
            let backend = open(&engine, &model_path(), ssd_spec(), None, 3).expect("load");
            assert_eq!(backend.threads(), Some(3));
            let detail = backend.info().detail;
            assert!(detail.starts_with(&format!("{}, 3 threads", engine.engine())), "{detail}");
            let single = open(&engine, &model_path(), ssd_spec(), None, 0).expect("load");
            assert_eq!(single.threads(), Some(1), "0 threads means 1");
        }
        assert_eq!(EngineChoice::rten("test").engine(), "rten 0.27");
    }

    #[test]
    fn rten_version_in_info_matches_the_dependency() {
        let manifest = include_str!("../../../Cargo.toml");
        assert!(manifest.contains(&format!("rten = {{ version = \"{RTEN_VERSION}\"")), "update RTEN_VERSION");
    }
}
