//! The `models` check: every model the daemon's inference worker would hold a context of
//! (`[model]`, the `[models.<name>]` detectors cameras name, the classifiers), loaded as `run`
//! loads them, one context of each opened on this thread (on the GPU: leasing the thread's one
//! arena, as the worker's contexts do), and their device memory ([`WorkerMemory`]).
//!
//! Owns: that check and its sentence ([`describe`]). Must not: run the models (the images and the
//! latency are `[model]`'s, in `super`).

use std::sync::Arc;

use super::report::{SelftestReport, Status};
use crate::backend::engine::chain::unchecked;
use crate::backend::load::{self, BuildProgress};
use crate::backend::memory::Arena;
use crate::backend::{Backend, WorkerMemory};
use crate::cmd::models::{
    detector_lanes, named_detectors, named_per_track, per_track_lanes, worker_memory_with_contexts, worker_models,
};
use crate::config::Config;
use crate::decode::DecodeParams;
use crate::detection::Labels;
use crate::infer::scheduler::{ModelLane, SchedulePlan};
use crate::model::{DeviceSpec, ModelSpec};

/// Loads the other models beside `[model]`'s `backend`, opens one context of each, reports them
/// (the check, and `report.models`).
pub fn check_models(
    config: &Config,
    backend: &Arc<dyn Backend>,
    progress: &mut dyn FnMut(BuildProgress),
    report: &mut SelftestReport,
) {
    match worker_models_memory(config, backend, progress) {
        Ok(memory) => {
            report.check("models", Status::Pass, describe(&memory));
            report.models = Some(memory);
        }
        Err(error) => report.check("models", Status::Fail, error),
    }
}

fn worker_models_memory(
    config: &Config,
    backend: &Arc<dyn Backend>,
    progress: &mut dyn FnMut(BuildProgress),
) -> Result<WorkerMemory, String> {
    let model = ModelSpec::from_config(config).map_err(|e| e.to_string())?;
    let mut labels = Labels::load(&model.labels).map_err(|e| e.to_string())?;
    let params = DecodeParams::new(&model, &config.model, &labels).map_err(|e| e.to_string())?;
    let detectors = named_detectors(config, config, &mut labels).map_err(|e| e.to_string())?;
    let classifiers = named_per_track(config, &labels).map_err(|e| e.to_string())?;
    let device = DeviceSpec::from_config(config);
    let mut load = |key: &str, model: &ModelSpec| {
        load::load_backend(model, &device, &mut *progress, &mut unchecked).map_err(|e| format!("models.{key}: {e}"))
    };
    let detector_backends =
        detectors.iter().map(|detector| load(&detector.name, &detector.model)).collect::<Result<Vec<_>, _>>()?;
    let classifier_backends = classifiers
        .iter()
        .map(|classifier| load(&classifier.name, &classifier.model))
        .collect::<Result<Vec<_>, _>>()?;
    let lanes = detector_lanes(Some(ModelLane::new(Arc::clone(backend), params)), detectors, detector_backends);
    let classifiers = per_track_lanes(classifiers, classifier_backends);
    let models = worker_models(&lanes, &classifiers);
    let workers = SchedulePlan::new(config, backend.as_ref(), config.cameras.len()).workers;
    worker_memory_with_contexts(workers, &models).map_err(|e| e.to_string())
}

/// One sentence: each model with its role, backend and engine (and its scratch and what it saves,
/// on the GPU), then the worker's arena.
pub fn describe(memory: &WorkerMemory) -> String {
    let models: Vec<String> = memory
        .models
        .iter()
        .map(|model| {
            let role = serde_json::to_value(model.role).ok().and_then(|v| v.as_str().map(str::to_string));
            let mut text = format!("{} ({}, {} {})", model.name, role.unwrap_or_default(), model.backend, model.engine);
            if let (Some(scratch), Some(saved)) = (model.scratch_bytes_per_context, model.saved_bytes) {
                text += &format!(": {scratch} bytes of scratch per context, saves {saved}");
            }
            text
        })
        .collect();
    let arena = match &memory.arena {
        Arena::Shared(plan) => format!(
            "one arena of {} bytes per worker against {} bytes for one allocation per context (saves {} bytes)",
            plan.arena_bytes, plan.separate_bytes, plan.saved_bytes
        ),
        Arena::None(why) => format!("no device arena: {}", why.strip_prefix("none: ").unwrap_or(why)),
    };
    format!("{}; {arena}", models.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::memory::NO_DEVICE_ARENA;
    use crate::backend::memory::{example_model as model, example_shared_worker};
    use crate::backend::ModelRole;

    #[test]
    fn the_sentence_names_every_model_and_the_arena_or_its_absence() {
        let gpu = example_shared_worker("models.colour", ModelRole::PerTrack("classifier"));
        assert_eq!(
            describe(&gpu),
            "model (detector, tensorrt model.engine): 100 bytes of scratch per context, saves 0, models.colour \
             (classifier, tensorrt models.colour.engine): 40 bytes of scratch per context, saves 40; one arena of \
             100 bytes per worker against 140 bytes for one allocation per context (saves 40 bytes)"
        );
        let cpu = WorkerMemory {
            workers: 2,
            contexts_per_worker: 1,
            arena: Arena::None(NO_DEVICE_ARENA),
            models: vec![model("model", ModelRole::Detector, None, None)],
        };
        assert_eq!(
            describe(&cpu),
            "model (detector, cpu rten 0.27); no device arena: the CPU backend uses no device memory (each session \
             keeps its own host buffers)"
        );
        assert!(NO_DEVICE_ARENA.starts_with("none: "), "the JSON's field says `none` first");
    }
}
