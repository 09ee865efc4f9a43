//! The `backend` and `engine` checks: the engine built or loaded (TensorRT), with cold and warm
//! build times when it was not cached or `--rebuild` asks, and the configured backend loaded the
//! way `run` loads it.
//!
//! Owns: those checks and the [`EngineReport`]'s figures. Must not: run the model.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::options::SelftestOptions;
use super::report::{EngineReport, SelftestReport, Status};
use crate::backend::engine::chain::unchecked;
use crate::backend::load::{self, BuildProgress};
use crate::backend::Backend;
use crate::config::{BackendChoice, Config, Fallback};
use crate::model::{DeviceSpec, ModelSpec};

/// Builds or loads the engine (TensorRT) and loads the configured backend the way `run` does.
pub(super) fn load_configured_backend(
    config: &Config,
    options: &SelftestOptions,
    tensorrt_usable: bool,
    progress: &mut dyn FnMut(BuildProgress),
    report: &mut SelftestReport,
) -> Option<Arc<dyn Backend>> {
    let mut engine = EngineReport::default();
    let device = DeviceSpec::from_config(config);
    let model = ModelSpec::from_config(config);
    if let Some(model) = model.as_ref().ok().filter(|_| tensorrt_usable) {
        prepare_engine(model, &device, options, &mut engine, progress, report);
    }
    // With `auto`, ask for TensorRT without a fallback first: `run` would fall back to the CPU
    // quietly, but here the reason TensorRT did not load is the finding.
    let mut fell_back = None;
    let started = Instant::now();
    let backend = model.map_err(|e| e.to_string()).and_then(|model| {
        let loaded = if tensorrt_usable && device.backend == BackendChoice::Auto {
            let strict = DeviceSpec { backend: BackendChoice::Tensorrt, fallback: Fallback::None, ..device.clone() };
            load::load_backend(&model, &strict, &mut *progress, &mut unchecked).or_else(|error| {
                fell_back = Some(error.to_string());
                let cpu = DeviceSpec { backend: BackendChoice::Cpu, ..device.clone() };
                load::load_backend(&model, &cpu, &mut *progress, &mut unchecked)
            })
        } else {
            load::load_backend(&model, &device, &mut *progress, &mut unchecked)
        };
        loaded.map_err(|e| e.to_string())
    });
    let seconds = started.elapsed().as_secs_f64();
    match backend {
        Ok(backend) => {
            let info = backend.info();
            report.check("backend", Status::Pass, format!("{}: {}", info.kind, info.detail));
            if let Some(why) = fell_back {
                // TensorRT and a GPU are here, yet `run` would use the CPU.
                report.check(
                    "engine",
                    Status::Warn,
                    format!("TensorRT is installed but its backend did not load: {why}"),
                );
            } else if info.kind == "cpu" {
                report.check("engine", Status::Skip, "the CPU backend runs the model: no TensorRT engine");
            } else {
                engine.load_seconds = Some(round3(seconds));
                report.check("engine", Status::Pass, describe_engine(&engine));
                report.engine = Some(engine);
            }
            report.backend = Some(info);
            Some(backend)
        }
        Err(error) => {
            report.check("backend", Status::Fail, error.clone());
            report.check("engine", if tensorrt_usable { Status::Fail } else { Status::Skip }, error);
            None
        }
    }
}

fn round3(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

fn describe_engine(engine: &EngineReport) -> String {
    let mut parts = Vec::new();
    if let Some(path) = &engine.path {
        parts.push(format!("{path} ({})", if engine.cached_before { "was cached" } else { "built now" }));
    }
    if let Some(seconds) = engine.load_seconds {
        parts.push(format!("loaded in {seconds:.2} s"));
    }
    match (engine.cold_build_seconds, engine.warm_build_seconds, engine.warm_to_cold_ratio) {
        (Some(cold), Some(warm), Some(ratio)) => {
            parts.push(format!("cold build {cold:.1} s, warm build (timing cache) {warm:.1} s, ratio {ratio:.2}"))
        }
        _ => parts.push("build times not measured (cached; `--rebuild` measures them)".into()),
    }
    parts.join("; ")
}

/// Times a cold and a warm build when the engine is not cached yet (or `--rebuild`).
fn prepare_engine(
    model: &ModelSpec,
    on: &DeviceSpec,
    options: &SelftestOptions,
    engine: &mut EngineReport,
    progress: &mut dyn FnMut(BuildProgress),
    report: &mut SelftestReport,
) {
    let path = || load::expected_engine_path(model, on).map(|p| p.display().to_string());
    engine.path = path();
    engine.cached_before = engine.path.as_ref().is_some_and(|p| Path::new(p).is_file());
    if model.files.engine().is_some() || (engine.cached_before && !options.rebuild) {
        return;
    }
    match load::time_builds(model, on, progress) {
        Ok(times) => {
            // A model with a static input is cached under the key without profiles.
            engine.path = path();
            engine.cold_build_seconds = Some(round3(times.cold_seconds));
            engine.warm_build_seconds = Some(round3(times.warm_seconds));
            engine.warm_to_cold_ratio =
                (times.cold_seconds > 0.0).then(|| round3(times.warm_seconds / times.cold_seconds));
        }
        Err(error) => report.check("engine_build", Status::Fail, error.to_string()),
    }
}
