//! The sequence of `selftest`'s checks ([`run`]): the GPU, TensorRT and its plugins, the cache
//! directory and the clocks (`device`), the engine and the configured backend (`engine`), their
//! execution contexts (`contexts`), every model a worker runs (`models`), the images and the
//! engine's agreement with the CPU (`images`), the latency (`timing`).
//!
//! Owns: their order and what one check hands the next (the backend, its sessions, the image the
//! latency is timed on), and the verdict. Must not: check anything itself.

use serde_json::Value;

use super::clocks::ClockReport;
use super::contexts::open_sessions;
use super::device::{check_cache_dir, check_clocks, check_tensorrt, describe_gpu};
use super::engine::load_configured_backend;
use super::images::{check_engine_agreement, image_source, run_images, sized_for_images};
use super::models;
use super::options::SelftestOptions;
use super::report::{SelftestReport, Status};
use super::timing::time_inferences;
use crate::backend::load::BuildProgress;
use crate::config::Config;

/// Runs every check. Never fails: each problem is a failed check in the report. `progress` sees
/// engine-build events (a build takes minutes on a Jetson).
pub fn run(config: &Config, options: &SelftestOptions, progress: &mut dyn FnMut(BuildProgress)) -> SelftestReport {
    let mut report = SelftestReport::new(
        config.origin.to_string(),
        crate::backend::load::gpu_section(config.device.gpu as usize),
        ClockReport::read(&config.telemetry.sysfs_root),
    );
    let gpu_available = report.gpu["available"] == Value::Bool(true);
    let gpu_detail = describe_gpu(&report.gpu);
    report.check("gpu", if gpu_available { Status::Pass } else { Status::Skip }, gpu_detail);

    let tensorrt_usable = check_tensorrt(config, gpu_available, &mut report);
    check_cache_dir(config, tensorrt_usable, &mut report);
    check_clocks(&mut report);

    let images = image_source(config, options);
    let backend_config = sized_for_images(config, &images);
    let backend = load_configured_backend(&backend_config, options, tensorrt_usable, progress, &mut report);
    let uses_gpu = backend.as_ref().is_some_and(|b| b.info().kind != "cpu");
    let mut sessions = match &backend {
        Some(backend) => open_sessions(config, backend.as_ref(), uses_gpu, &mut report),
        None => Vec::new(),
    };
    match &backend {
        Some(backend) => models::check_models(&backend_config, backend, progress, &mut report),
        None => report.check("models", Status::Skip, "the configured model did not load"),
    }
    let timed_image =
        run_images(&backend_config, &images, backend.as_deref(), sessions.first_mut(), uses_gpu, &mut report);
    if let Some(engine) = backend.as_deref().filter(|_| uses_gpu) {
        check_engine_agreement(&backend_config, engine, &images, &mut report);
    }
    // Latency with one context: the others would only hold memory meanwhile.
    sessions.truncate(1);
    let (timed_backend, timed_session) = (backend.as_deref(), sessions.first_mut());
    time_inferences(options, &config.limits, timed_backend, timed_session, timed_image.as_deref(), &mut report);
    report.passed = report.checks.iter().all(|check| check.status != Status::Fail);
    report
}
