//! The models' backends at `run`'s start: what serves at once, and what waits for its engine.
//!
//! Owns: the choice, per model, between its backend loaded now (the CPU, a prebuilt or cached
//! engine), serving on the CPU while its engine is built or fetched (`engine.serve_while_building
//! = "cpu"`: a [`HandoverBackend`] on [`load_cpu_beside_build`], and a [`PendingModel`] for the
//! engine-build thread), and waiting for the engine at start (`"none"`, or where the CPU serving
//! would not fit beside the build in a Jetson's shared memory), checked there too and cancelled by
//! the stop flag the caller's signals set. Must not: start threads or serve frames
//! (`crate::infer::engine_build` builds, the scheduler serves).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::backend::engine::{EngineChain, EngineError, Progress};
use crate::backend::handover::{Handover, HandoverBackend};
use crate::backend::load::{load_cpu, load_cpu_beside_build, start_loading, unified_free_memory, Loading};
use crate::backend::{Backend, BackendError};
use crate::config::{Config, ServeWhileBuilding};
use crate::infer::engine_build::{check_engine, check_frames, CheckPolicy, CheckSubject, PendingModel};
use crate::model::footprint::ENGINE_BYTES_PER_WEIGHT_BYTE;
use crate::model::{DeviceSpec, ModelSpec};

/// One model `run` loads: its config table (`model`, `models.<name>`), spec, and what its check
/// compares.
pub struct StartModel<'a> {
    pub name: String,
    pub spec: &'a ModelSpec,
    pub subject: CheckSubject,
}

/// Every model's backend, in the order given, why the CPU runs them when TensorRT was asked for
/// first, and the models the CPU serves until their engines are there.
pub struct LoadedModels {
    pub backends: Vec<Arc<dyn Backend>>,
    pub fallback: Option<String>,
    pub pending: Vec<PendingModel>,
}

/// How engines are checked with `config` (the sample pictures are the bundled ones).
pub fn check_policy(config: &Config) -> CheckPolicy {
    CheckPolicy {
        min_agreement: config.engine.min_agreement,
        on_disagreement: config.engine.on_disagreement,
        samples: crate::config::data_dir().join("models/samples"),
        limits: config.limits,
    }
}

/// Loads `models` on `device` (see the module doc); `progress` sees the builds waited for at start,
/// and `stop` (set by SIGTERM) cancels them.
pub fn load_models(
    models: Vec<StartModel<'_>>,
    config: &Config,
    device: &DeviceSpec,
    progress: &mut dyn FnMut(Progress),
    stop: &AtomicBool,
) -> Result<LoadedModels, BackendError> {
    let policy = check_policy(config);
    let mut loaded = LoadedModels { backends: Vec::new(), fallback: None, pending: Vec::new() };
    for StartModel { name, spec, subject } in models {
        let backend = match start_loading(spec, device)? {
            Loading::Ready((backend, fallback)) => {
                loaded.fallback = loaded.fallback.or(fallback);
                backend
            }
            Loading::Pending { chain, reason } => match serving_beside_build(config, spec, device) {
                Ok(()) => {
                    log::warn!(
                        "{name}: {reason}; the CPU serves it from now on while its engine is built (engine.serve_while_building \
                         = \"cpu\")"
                    );
                    let cpu = load_cpu_beside_build(spec, device)?;
                    let handover = Arc::new(Handover::default());
                    let toolchain = chain.toolchain().clone();
                    let backend: Arc<dyn Backend> =
                        Arc::new(HandoverBackend::new(cpu.clone(), toolchain, handover.clone()));
                    loaded.pending.push(PendingModel { name, chain, reason, cpu, handover, subject });
                    backend
                }
                Err(why) => {
                    log::warn!("{name}: {reason}; the start waits for its engine ({why})");
                    let waited = WaitedBuild { subject: &subject, policy: &policy, stop };
                    build_now(&name, chain, spec, device, waited, progress)?
                }
            },
        };
        loaded.backends.push(backend);
    }
    Ok(loaded)
}

/// Whether the CPU serves `model` while its engine builds, or why not: `engine.serve_while_building`
/// says so, and on a GPU that shares the system's memory the CPU's copy of the model must fit beside
/// the build (both estimated as [`ENGINE_BYTES_PER_WEIGHT_BYTE`] × the model's weights).
fn serving_beside_build(config: &Config, model: &ModelSpec, device: &DeviceSpec) -> Result<(), String> {
    if config.engine.serve_while_building == ServeWhileBuilding::None {
        return Err("engine.serve_while_building = \"none\"".into());
    }
    let Some(free) = unified_free_memory(device) else { return Ok(()) };
    let weights = model.files.onnx().and_then(|onnx| crate::onnx::read_file(onnx).ok()).map_or(0, |i| i.weight_bytes);
    let needed = weights.saturating_mul(ENGINE_BYTES_PER_WEIGHT_BYTE).saturating_mul(2);
    if needed > free {
        return Err(format!(
            "the CPU's copy of the model and the build would need about {} MiB of the {} MiB free in the memory the GPU \
             shares with the system",
            needed >> 20,
            free >> 20
        ));
    }
    Ok(())
}

/// How a build the start waits for is checked, and what cancels it.
struct WaitedBuild<'a> {
    subject: &'a CheckSubject,
    policy: &'a CheckPolicy,
    /// Set by SIGTERM or SIGINT: the build (or the wait for another's) ends at its next step.
    stop: &'a AtomicBool,
}

/// Builds (or fetches) `model`'s engine on this thread and checks it on the sample pictures
/// against a CPU reference loaded for the check; a refused engine leaves that reference serving.
fn build_now(
    name: &str,
    mut chain: Box<EngineChain>,
    model: &ModelSpec,
    device: &DeviceSpec,
    waited: WaitedBuild<'_>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Arc<dyn Backend>, BackendError> {
    let WaitedBuild { subject, policy, stop } = waited;
    let mut reference: Option<Arc<dyn Backend>> = None;
    let mut vet = |engine: &Arc<dyn Backend>| {
        let reference = match &reference {
            Some(reference) => reference.clone(),
            None => reference.insert(load_cpu(model, device).map_err(|e| format!("the CPU reference: {e}"))?).clone(),
        };
        let frames = check_frames(Vec::new(), policy);
        let (outcome, _) = check_engine(name, engine.as_ref(), reference.as_ref(), &frames, subject, policy);
        outcome.map(drop)
    };
    match chain.acquire(&mut vet, progress, stop) {
        Ok(acquired) => Ok(acquired.backend),
        Err(EngineError::Refused(why)) => {
            log::error!("{name}: the new engine is refused, the CPU serves instead: {why}");
            match reference {
                Some(reference) => Ok(reference),
                None => load_cpu(model, device),
            }
        }
        Err(error) => Err(error.into()),
    }
}
