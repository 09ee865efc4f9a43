//! The `bench` command: what it is asked ([`BenchRequest`]), the benchmarks it runs for that, in
//! order ([`run`]), and what it prints ([`BenchOutput`]).
//!
//! Owns: choosing the benchmarks and the image, loading the models the cameras run, the device
//! memory of every model a worker holds. Must not: time anything itself (each benchmark's file
//! does) or print (`main` does).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use super::cameras::bench_cameras;
use super::capacity::{bench_capacity, CapacityBench, CapacityRequest, DEFAULT_FPS};
use super::error::BenchError;
#[cfg(feature = "cuda")]
use super::gpu::{gpu_path_bench, gpu_preprocess_bench};
use super::models::{BenchModels, ModelChoice};
#[cfg(not(feature = "cuda"))]
use super::no_gpu::{gpu_path_bench, gpu_preprocess_bench};
use super::scene::MotionScene;
use super::stages::{bench_backend, BenchReport};
use crate::backend::{Backend, WorkerMemory};
use crate::cmd::models::worker_memory;
use crate::config::Config;
use crate::decode::DecodeParams;
use crate::detection::Labels;
use crate::infer::scheduler::SchedulePlan;

/// What `bench` is asked to measure.
#[derive(Debug, Clone)]
pub struct BenchRequest<'a> {
    /// Image to run; `None`: the first image of the first `images` camera.
    pub image: Option<&'a Path>,
    pub warmup: usize,
    pub iterations: usize,
    /// Also the GPU path outside inference and the preprocessing kernel.
    pub gpu: bool,
    /// Also this many cameras through the inference scheduler.
    pub cameras: Option<usize>,
    /// The detectors the cameras run, assigned round robin: `default` (`[model]`) and names of
    /// `[models.<name>]` detectors; empty: `[model]` alone.
    pub models: &'a [String],
    /// With `cameras`: each camera delivers this many frames per second, live, and the cameras
    /// run find the most of them that keep it (the capacity) instead of the throughput.
    pub fps: Option<f64>,
    /// With `cameras`: the capacity with `[motion]` gating, the cameras showing this scene (at
    /// `fps`, else [`DEFAULT_FPS`]).
    pub motion: Option<MotionScene>,
}

/// The `bench` command: the one-frame pipeline, then what `request` adds (N cameras through the
/// scheduler, or their capacity at a frame rate; the GPU path), on `backend` loaded from `config` (`[model]`'s; the other models
/// are loaded here), and the device memory of every model a worker holds.
pub fn run(
    config: &Config,
    backend: Arc<dyn Backend>,
    params: DecodeParams,
    labels: Arc<Labels>,
    request: &BenchRequest<'_>,
) -> Result<BenchOutput, BenchError> {
    let BenchRequest { warmup, iterations, .. } = *request;
    let image = match request.image {
        Some(path) => path.to_path_buf(),
        None => first_configured_image(config)
            .ok_or_else(|| BenchError::Setup("no `images` camera in the config: name an image with --image".into()))?,
    };
    let choices = ModelChoice::parse_list(request.models)?;
    if request.cameras.is_none() && choices != [ModelChoice::Default] {
        return Err(BenchError::Setup("--models: the models run on the cameras of --cameras N".into()));
    }
    let cameras = request.cameras.unwrap_or(0);
    let models = BenchModels::load(config, Arc::clone(&backend), params.clone(), &labels, &choices, cameras)?;
    let worker_models = models.worker_models();
    let mut pipeline =
        bench_backend(backend.as_ref(), params.clone(), &labels, &image, &config.limits, warmup, iterations)?;
    let plan = SchedulePlan::new(config, backend.as_ref(), cameras.max(1));
    let mut capacity = None;
    if request.fps.is_some() || request.motion.is_some() {
        let Some(most) = request.cameras else {
            return Err(BenchError::Setup("--fps, --motion: the capacity of the cameras of --cameras N".into()));
        };
        let fps = request.fps.unwrap_or(DEFAULT_FPS);
        let asked = CapacityRequest { most, fps, motion: request.motion, warmup, iterations };
        let motion = config.sections.get::<crate::infer::gating::MotionConfig>();
        let load = |cameras: usize| -> Result<(BenchModels, SchedulePlan), BenchError> {
            let models = BenchModels::load(config, Arc::clone(&backend), params.clone(), &labels, &choices, cameras)?;
            Ok((models, SchedulePlan::new(config, backend.as_ref(), cameras)))
        };
        drop(models);
        capacity = Some(bench_capacity(asked, &image, motion, params.score_threshold, &config.limits, load)?);
    } else if request.cameras.is_some() {
        let run = bench_cameras(models, params.score_threshold, plan, &image, &config.limits, warmup, iterations)?;
        pipeline.fps_total = Some(run.fps_total);
        pipeline.cameras = Some(run);
    }
    let (gpu_preprocess, gpu_path) = if request.gpu {
        let path = gpu_path_bench(config, backend.as_ref(), params, &labels, &image, warmup, iterations)?;
        (Some(gpu_preprocess_bench(config)?), Some(path))
    } else {
        (None, None)
    };
    // After the runs: a TensorRT context's own memory is measured when it is created.
    let models = worker_memory(plan.workers, &worker_models);
    Ok(BenchOutput { pipeline, capacity, models, gpu_path, gpu_preprocess })
}

/// What `bench` prints: stage order as in the pipeline, not alphabetical.
#[derive(Serialize)]
pub struct BenchOutput {
    pipeline: BenchReport,
    /// With `--fps` or `--motion`: the most cameras that keep the rate, and each run of the search.
    #[serde(skip_serializing_if = "Option::is_none")]
    capacity: Option<CapacityBench>,
    /// Every model a worker of the cameras benchmark holds a context of (`[model]`, the `--models`
    /// detectors, the classifiers), its backend and device memory, and the worker's one arena.
    models: WorkerMemory,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu_path: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu_preprocess: Option<serde_json::Value>,
}

/// The first image file of the first `images` camera (a file, or the first image of a directory).
fn first_configured_image(config: &Config) -> Option<PathBuf> {
    use crate::config::SourceConfig;
    config.cameras.iter().find_map(|camera| match &camera.source {
        SourceConfig::Images(images) if images.path.is_file() => Some(images.path.clone()),
        SourceConfig::Images(images) => {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&images.path)
                .ok()?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e != "md"))
                .collect();
            files.sort();
            files.into_iter().next()
        }
        _ => None,
    })
}
