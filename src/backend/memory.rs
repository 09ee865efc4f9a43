//! Device memory of the inference workers' contexts: per model of one worker (what `bench` and
//! `selftest` report; against one context per camera: `super::memory_report`).
//!
//! Owns: [`WorkerMemory`] and [`ModelMemory`], and their arithmetic: a worker holds one context
//! (session) of every model it runs, detectors and per-track models, one after another on its one
//! stream, so their scratch shares one arena sized to the largest context
//! ([`shared_arena_bytes`]). Against one scratch allocation per context, every model whose
//! context fits in an arena sized by another model saves its own context's scratch bytes; the
//! model that sizes the arena (the first of the largest) saves nothing. The CPU backend has no
//! device memory: its models say so ([`Arena::None`]) instead of reporting zeros. Must not:
//! allocate or open sessions (the backends' sessions hold the memory; this only adds up what
//! [`Backend::session_memory`] says).

use serde::Serialize;

use super::traits::Backend;
use super::trt::arena_plan::{shared_arena_bytes, ArenaPlan};

/// What a model does in the worker: it detects on whole frames, or it is a per-track model of a
/// kind (`classifier`) that runs on crops of tracks. Serialised as that word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelRole {
    Detector,
    PerTrack(&'static str),
}

impl Serialize for ModelRole {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(match self {
            ModelRole::Detector => "detector",
            ModelRole::PerTrack(kind) => kind,
        })
    }
}

/// One model a worker runs, and its share of the worker's device memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelMemory {
    /// Its table: `model` or `models.<name>`.
    pub name: String,
    pub role: ModelRole,
    /// `cpu` or `tensorrt`.
    pub backend: &'static str,
    /// What runs it: the CPU backend's engine with its version (`rten 0.27`, `ONNX Runtime
    /// 1.22.0`), TensorRT's engine file.
    pub engine: String,
    /// Scratch (activation) memory of one of its contexts; `None`: no device memory (CPU backend).
    pub scratch_bytes_per_context: Option<u64>,
    /// What one of its contexts keeps for itself beyond its scratch, as far as the driver shows it.
    pub persistent_bytes_per_context: Option<u64>,
    /// Scratch bytes its context does not allocate for itself because it fits in the worker's
    /// arena, sized by another model's context; `None` without device memory.
    pub saved_bytes: Option<u64>,
}

/// The scratch memory of one worker's contexts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Arena {
    /// One arena for every context (`arena_bytes`, the largest context's scratch) against one
    /// allocation per context (`separate_bytes`); `saved_bytes` is the difference.
    Shared(ArenaPlan),
    /// No device arena, and why (the CPU backend's sessions use host memory of their own).
    None(&'static str),
}

/// What the CPU backend's report says in place of an arena.
pub const NO_DEVICE_ARENA: &str =
    "none: the CPU backend uses no device memory (each session keeps its own host buffers)";

/// Device memory of one inference worker: every model it holds a context of, and the one arena
/// their scratch shares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerMemory {
    /// Inference workers, each holding one context of every model (one per GPU).
    pub workers: usize,
    /// Contexts one worker holds: one per model.
    pub contexts_per_worker: usize,
    /// One worker's arena; the workers' arenas together are `workers` times it.
    pub arena: Arena,
    pub models: Vec<ModelMemory>,
}

impl WorkerMemory {
    /// The report for `workers` workers running `models` (name, role, backend), in the worker's
    /// order: detectors first, then classifiers.
    pub fn new<'a>(workers: usize, models: impl IntoIterator<Item = (String, ModelRole, &'a dyn Backend)>) -> Self {
        let mut models: Vec<ModelMemory> = models
            .into_iter()
            .map(|(name, role, backend)| {
                let info = backend.info();
                let on_device = info.kind != "cpu";
                let memory = backend.session_memory();
                ModelMemory {
                    name,
                    role,
                    backend: info.kind,
                    engine: backend.engine().unwrap_or(info.model),
                    scratch_bytes_per_context: on_device.then_some(memory.scratch_bytes),
                    persistent_bytes_per_context: on_device.then_some(memory.persistent_bytes),
                    saved_bytes: None,
                }
            })
            .collect();
        let arena = share_arena(&mut models);
        WorkerMemory { workers, contexts_per_worker: models.len(), arena, models }
    }
}

/// Sizes the arena of the models with device memory and fills in what each saves: its own
/// scratch, except the first largest, whose context sizes the arena.
fn share_arena(models: &mut [ModelMemory]) -> Arena {
    let scratch: Vec<u64> = models.iter().filter_map(|model| model.scratch_bytes_per_context).collect();
    if scratch.is_empty() {
        return Arena::None(NO_DEVICE_ARENA);
    }
    let plan = shared_arena_bytes(&scratch);
    let mut sized = false;
    for model in models.iter_mut() {
        let Some(bytes) = model.scratch_bytes_per_context else { continue };
        let sizes_the_arena = !sized && bytes == plan.arena_bytes;
        sized |= sizes_the_arena;
        model.saved_bytes = Some(if sizes_the_arena { 0 } else { bytes });
    }
    Arena::Shared(plan)
}

/// A model's memory for tests elsewhere: on TensorRT (`scratch` given; engine `<name>.engine`,
/// 4096 persistent bytes) or on the CPU backend (`None`: rten, no device memory).
#[cfg(test)]
pub(crate) fn example_model(name: &str, role: ModelRole, scratch: Option<u64>, saved: Option<u64>) -> ModelMemory {
    ModelMemory {
        name: name.into(),
        role,
        backend: if scratch.is_some() { "tensorrt" } else { "cpu" },
        engine: if scratch.is_some() { format!("{name}.engine") } else { "rten 0.27".into() },
        scratch_bytes_per_context: scratch,
        persistent_bytes_per_context: scratch.map(|_| 4096),
        saved_bytes: saved,
    }
}

/// One TensorRT worker for tests elsewhere: `model` (a detector, 100 bytes of scratch, sizing
/// the arena) and a second model of 40 bytes that the arena saves.
#[cfg(test)]
pub(crate) fn example_shared_worker(second: &str, role: ModelRole) -> WorkerMemory {
    WorkerMemory {
        workers: 1,
        contexts_per_worker: 2,
        arena: Arena::Shared(crate::backend::trt::arena_plan::ArenaPlan {
            arena_bytes: 100,
            separate_bytes: 140,
            saved_bytes: 40,
        }),
        models: vec![
            example_model("model", ModelRole::Detector, Some(100), Some(0)),
            example_model(second, role, Some(40), Some(40)),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(name: &str, scratch: Option<u64>) -> ModelMemory {
        example_model(name, ModelRole::Detector, scratch, None)
    }

    #[test]
    fn every_model_but_the_one_that_sizes_the_arena_saves_its_own_scratch() {
        let mut models = [model("model", Some(96 << 20)), model("models.yard", Some(128 << 20)), model("c", Some(8))];
        let arena = share_arena(&mut models);
        let plan = ArenaPlan { arena_bytes: 128 << 20, separate_bytes: (224 << 20) + 8, saved_bytes: (96 << 20) + 8 };
        assert_eq!(arena, Arena::Shared(plan));
        let saved: Vec<Option<u64>> = models.iter().map(|m| m.saved_bytes).collect();
        assert_eq!(saved, [Some(96 << 20), Some(0), Some(8)]);
        assert_eq!(saved.iter().flatten().sum::<u64>(), plan.saved_bytes, "the models' savings add up to the arena's");
    }

    #[test]
    fn of_two_equally_large_contexts_the_first_sizes_the_arena_and_the_second_saves_its_bytes() {
        let mut models = [model("model", Some(64)), model("models.yard", Some(64))];
        assert_eq!(
            share_arena(&mut models),
            Arena::Shared(ArenaPlan { arena_bytes: 64, separate_bytes: 128, saved_bytes: 64 })
        );
        assert_eq!(models.map(|m| m.saved_bytes), [Some(0), Some(64)]);
    }

    #[test]
    fn the_cpu_backend_reports_no_device_arena_rather_than_zero_bytes() {
        let mut models = [model("model", None), model("models.colour", None)];
        assert_eq!(share_arena(&mut models), Arena::None(NO_DEVICE_ARENA));
        assert!(models.iter().all(|m| m.saved_bytes.is_none()));
        let json = serde_json::to_value(Arena::None(NO_DEVICE_ARENA)).expect("json");
        assert!(json.as_str().is_some_and(|text| text.starts_with("none")), "{json}");
    }

    #[test]
    fn a_single_model_saves_nothing() {
        let mut models = [model("model", Some(1000))];
        assert_eq!(
            share_arena(&mut models),
            Arena::Shared(ArenaPlan { arena_bytes: 1000, separate_bytes: 1000, saved_bytes: 0 })
        );
        assert_eq!(models[0].saved_bytes, Some(0));
    }
}
