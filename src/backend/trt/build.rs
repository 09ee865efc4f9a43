//! Building TensorRT engines: what the TensorRT toolchain (`super::toolchain`) does between the
//! engine lifecycle's plan and TensorRT's builder.
//!
//! Owns: the device identity TensorRT engines are keyed by, the builder fingerprint (the shim's
//! source and the headers it was compiled against), the checks before a build that only TensorRT
//! needs (a precision TensorRT 11 cannot choose, an INT8 model without Q/DQ nodes, a fixed model
//! input that contradicts the config, an optimisation level 8.5 ignores), and running one build on
//! a helper thread while progress and ticks are reported on the caller's thread, cancelled past
//! `engine.build_timeout_s` or when the caller asks. Must not: look in caches, lock, save, create
//! execution contexts or allocate device memory (`crate::backend::engine::chain` decides and saves).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::CudaContext;

use super::error::TrtError;
use super::ffi;
use super::runtime::{header_version, BuildEvent, BuildOutput, BuildRequest, TrtRuntime};
use super::version::TrtVersion;
use crate::backend::engine::cache::{precision_name, sha256_hex};
use crate::backend::engine::device_key::{board_identity, read_device_tree_model, DeviceIdentity};
use crate::backend::engine::EngineError;
use crate::backend::engine::Progress;
use crate::config::Precision;
use crate::model::ModelSpec;

/// How often a running build reports elapsed time.
const TICK: Duration = Duration::from_secs(1);

/// What identifies the GPU in the cache key: name, compute capability, SM count, memory, and the
/// board (`/proc/device-tree/model` on a Jetson, else the GPU's UUID).
pub fn device_identity(ordinal: u32) -> Result<(Arc<CudaContext>, DeviceIdentity), TrtError> {
    // SAFETY: only probes whether libcuda can be dlopened; cudarc panics on first use otherwise.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(TrtError::NoGpu("libcuda (the NVIDIA driver) is not installed".into()));
    }
    let context = CudaContext::new(ordinal as usize).map_err(|e| TrtError::NoGpu(format!("GPU {ordinal}: {e}")))?;
    let cuda = |e: cudarc::driver::DriverError| TrtError::Cuda(e.to_string());
    let name = context.name().map_err(cuda)?;
    let (major, minor) = context.compute_capability().map_err(cuda)?;
    let multiprocessors =
        context.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).map_err(cuda)?;
    let total_memory_bytes = context.total_mem().map_err(cuda)? as u64;
    // c_char is i8 or u8 depending on the target; to_ne_bytes reads either as a byte.
    let uuid = context.uuid().map_err(cuda)?.bytes.map(|b| b.to_ne_bytes()[0]);
    let device = DeviceIdentity {
        name,
        compute_capability: (major.max(0) as u32, minor.max(0) as u32),
        multiprocessors: multiprocessors.max(0) as u32,
        total_memory_bytes,
        board: board_identity(read_device_tree_model(Path::new("/")).as_deref(), &uuid),
    };
    Ok((context, device))
}

/// The shim's source, compiled into this binary: its hash identifies the builder in the cache key.
const SHIM_SOURCE: &[u8] = include_bytes!("shim.cpp");

/// What builds engines in this binary: the shim's source hash and the TensorRT headers it was
/// compiled against. A change to either can change the engine a build makes without any other key
/// field changing, so both are in the key, and no version number has to be bumped by hand.
pub fn builder_fingerprint() -> String {
    let shim = sha256_hex(SHIM_SOURCE);
    format!("shim {}, TensorRT headers {}", &shim[..12], header_version())
}

/// Explains why a precision cannot be honoured by this TensorRT, if it cannot.
pub fn check_precision(precision: Precision, tensorrt_major: i32) -> Result<(), TrtError> {
    if tensorrt_major >= 11 && precision != Precision::Fp32 {
        return Err(TrtError::Config(format!(
            "engine.precision = \"{}\": TensorRT {tensorrt_major} builds strongly typed networks, so precision \
             comes from the ONNX model itself (export it in FP16, or with Q/DQ nodes for INT8) and cannot be \
             chosen at build time; set engine.precision = \"fp32\" and use an FP16 or INT8 model",
            precision_name(precision)
        )));
    }
    Ok(())
}

/// Compares the model's fixed input dimensions with `model.input` before a build: a mismatch was
/// found only after minutes of building, when the engine's input was checked. The batch
/// dimension is the profile's; symbolic dimensions fit anything. A model the walk cannot read is
/// left to TensorRT's parser, which says more.
pub fn check_model_input(spec: &ModelSpec, model: &[u8], path: &Path) -> Result<(), TrtError> {
    let Ok(inputs) = crate::backend::engine::onnx_external_data::graph_inputs(model) else { return Ok(()) };
    let input = match &spec.input.name {
        Some(name) => inputs.iter().find(|input| &input.name == name),
        None if inputs.len() == 1 => inputs.first(),
        None => None,
    };
    let Some(input) = input else { return Ok(()) };
    let spec = &spec.input;
    let wanted: Vec<i64> = spec.shape().iter().map(|d| *d as i64).collect();
    let fits = input.dims.len() == wanted.len()
        && input.dims.iter().zip(&wanted).skip(1).all(|(dim, want)| dim.is_none_or(|dim| dim == *want));
    if fits {
        return Ok(());
    }
    let dims: Vec<String> = input.dims.iter().map(|d| d.map_or("?".into(), |d| d.to_string())).collect();
    Err(TrtError::Config(format!(
        "model.input: {}'s input {:?} is [{}], but model.input asks for {:?} ({}x{} {:?}); nothing was built: set \
         model.input.width, height and layout to the model's",
        path.display(),
        input.name,
        dims.join(", "),
        wanted,
        spec.width,
        spec.height,
        spec.layout
    )))
}

/// `engine.precision = "int8"` needs an explicitly quantized model: no calibration is run, so
/// without Q/DQ nodes TensorRT would build FP16/FP32 kernels and the cache would file them as INT8.
pub fn check_int8_model(precision: Precision, model: &[u8], path: &Path) -> Result<(), TrtError> {
    if precision != Precision::Int8 {
        return Ok(());
    }
    match crate::backend::engine::onnx_external_data::has_quantize_nodes(model) {
        Ok(true) => Ok(()),
        Ok(false) => Err(TrtError::Config(format!(
            "engine.precision = \"int8\": {} has no QuantizeLinear/DequantizeLinear (Q/DQ) nodes, and jetson-detectd \
             runs no INT8 calibration, so TensorRT would build FP16/FP32 kernels; export a quantized model (Q/DQ, \
             e.g. with NVIDIA's Model Optimizer) or set engine.precision = \"fp16\"",
            path.display()
        ))),
        // The parser reports a malformed model with more detail than this walk.
        Err(_) => Ok(()),
    }
}

/// TensorRT's own default builder optimisation level, what 8.5 (which cannot set one) builds with.
const TENSORRT_DEFAULT_OPTIMIZATION_LEVEL: u8 = 3;

/// Says so when the configured optimisation level cannot be honoured: TensorRT 8.5 (JetPack 5.1)
/// has no `setBuilderOptimizationLevel`, so the shim compiled against its headers never sets one.
pub fn optimization_level_warning(level: u8, headers: TrtVersion) -> Option<String> {
    let supported = TrtVersion { major: 8, minor: 6, patch: 0 };
    (level != TENSORRT_DEFAULT_OPTIMIZATION_LEVEL && headers < supported).then(|| {
        format!(
            "engine.optimization_level = {level} is ignored: TensorRT {headers} has no builder optimisation level \
             (8.6 and newer do); the engine is built at TensorRT's default level"
        )
    })
}

pub fn ffi_precision(precision: Precision) -> i32 {
    match precision {
        Precision::Fp32 => ffi::JD_PRECISION_FP32,
        Precision::Fp16 => ffi::JD_PRECISION_FP16,
        Precision::Int8 => ffi::JD_PRECISION_INT8,
    }
}

/// Runs the build on a scoped helper thread; this thread relays monitor events and emits a
/// [`Progress::Tick`] every second until it ends. Past `limit`, or once `cancel` is set, the build
/// is cancelled at its next step (TensorRT 10 and newer; an 8.x build runs to its end).
pub fn run_with_progress(
    runtime: &TrtRuntime,
    request: &BuildRequest<'_>,
    gpu: u32,
    limit: Duration,
    progress: &mut dyn FnMut(Progress),
    cancel: &AtomicBool,
) -> Result<BuildOutput, EngineError> {
    let started = Instant::now();
    let (sender, receiver) = mpsc::channel::<Progress>();
    std::thread::scope(|scope| {
        let builder = std::thread::Builder::new()
            .name("trt-build".into())
            .spawn_scoped(scope, move || {
                let relay = |event: BuildEvent<'_>| {
                    let event = match event {
                        BuildEvent::PhaseStart { phase, parent, steps } => {
                            Progress::PhaseStart { phase: phase.into(), parent: parent.map(Into::into), steps }
                        }
                        BuildEvent::StepComplete { phase, step } => Progress::Step { phase: phase.into(), step },
                        BuildEvent::PhaseFinish { phase } => Progress::PhaseFinish { phase: phase.into() },
                    };
                    // The receiver outlives the build; a send error would only mean nobody listens.
                    let _ = sender.send(event);
                    // false cancels the build (TensorRT 10+: its progress monitor asks after every step).
                    started.elapsed() < limit && !cancel.load(Ordering::SeqCst)
                };
                // A new thread has no current CUDA context, and TensorRT builds on the current one:
                // without this, a host with `device.gpu` other than 0 built (and timed) on GPU 0.
                let context = CudaContext::new(gpu as usize)
                    .map_err(|e| TrtError::NoGpu(format!("GPU {gpu} for the engine build: {e}")))?;
                context
                    .bind_to_thread()
                    .map_err(|e| TrtError::Cuda(format!("binding GPU {gpu} for the build: {e}")))?;
                runtime.build(request, &relay)
            })
            .map_err(|e| TrtError::Trt(format!("cannot start the build thread: {e}")))?;
        loop {
            match receiver.recv_timeout(TICK) {
                Ok(event) => progress(event),
                Err(mpsc::RecvTimeoutError::Timeout) => progress(Progress::Tick { elapsed: started.elapsed() }),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        progress(Progress::Tick { elapsed: started.elapsed() });
        let built = builder.join().map_err(|_| TrtError::Trt("the build thread panicked".into()))?;
        match built {
            Err(_) if cancel.load(Ordering::SeqCst) => Err(EngineError::Cancelled),
            Err(error) if started.elapsed() >= limit => Err(EngineError::Config(format!(
                "the engine build ran past engine.build_timeout_s ({} s) and was cancelled ({error}); raise it if \
                 this device is slower",
                limit.as_secs()
            ))),
            other => Ok(other?),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::engine::plan::test_support::{config, spec};

    #[test]
    fn a_fixed_model_input_that_contradicts_the_config_is_refused_before_building() {
        let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/ssd_mobilenet_v2_coco_prenms_fp32.onnx");
        let model = std::fs::read(&bundled).expect("bundled model");
        assert!(check_model_input(&spec(&config("")), &model, &bundled).is_ok(), "the bundled model fits its config");
        let mut wrong = config("");
        (wrong.model.input.width, wrong.model.input.height) = (640, 640);
        let message = check_model_input(&spec(&wrong), &model, &bundled).expect_err("640 against 300").to_string();
        assert!(message.contains("model.input") && message.contains("300"), "{message}");
    }

    #[test]
    fn int8_without_quantize_nodes_is_refused_before_building() {
        let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/ssd_mobilenet_v2_coco_prenms_fp32.onnx");
        let model = std::fs::read(&bundled).expect("bundled model");
        let message = check_int8_model(Precision::Int8, &model, &bundled).expect_err("fp32 model").to_string();
        assert!(message.contains("engine.precision = \"int8\"") && message.contains("Q/DQ"), "{message}");
        assert!(check_int8_model(Precision::Fp16, &model, &bundled).is_ok());
        use crate::backend::engine::onnx_external_data::encode::{bytes_field, varint_field};
        let node = bytes_field(1, &bytes_field(4, b"QuantizeLinear"));
        let quantized = [varint_field(1, 8), bytes_field(7, &node)].concat();
        assert!(check_int8_model(Precision::Int8, &quantized, Path::new("q.onnx")).is_ok());
    }

    #[test]
    fn the_builder_fingerprint_names_the_shim_and_the_headers() {
        let fingerprint = builder_fingerprint();
        assert!(fingerprint.starts_with("shim "), "{fingerprint}");
        assert!(fingerprint.ends_with(&format!("TensorRT headers {}", header_version())), "{fingerprint}");
        let options = crate::backend::engine::plan::build_options(&spec(&config("")), &fingerprint);
        assert_eq!(options.builder, fingerprint);
    }

    #[test]
    fn optimization_level_is_ignored_only_before_8_6() {
        let version = |major, minor| TrtVersion { major, minor, patch: 0 };
        let warning = optimization_level_warning(5, version(8, 5)).expect("8.5 cannot set a level");
        assert!(warning.contains("optimization_level = 5") && warning.contains("8.5.0"), "{warning}");
        assert_eq!(optimization_level_warning(TENSORRT_DEFAULT_OPTIMIZATION_LEVEL, version(8, 5)), None);
        assert_eq!(optimization_level_warning(5, version(8, 6)), None);
        assert_eq!(optimization_level_warning(0, version(10, 3)), None);
    }

    #[test]
    fn precision_on_tensorrt_11_is_explained() {
        assert!(check_precision(Precision::Fp16, 10).is_ok());
        assert!(check_precision(Precision::Fp32, 11).is_ok());
        let message = check_precision(Precision::Fp16, 11).expect_err("rejected").to_string();
        assert!(message.contains("strongly typed") && message.contains("ONNX model"), "{message}");
    }
}
