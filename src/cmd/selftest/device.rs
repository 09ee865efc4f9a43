//! The checks of the machine: the GPU (`gpu`), TensorRT and its plugins (`tensorrt`, `plugins`),
//! the cache directory (`cache_dir`) and the clocks (`clocks`).
//!
//! Owns: those checks and their sentences. On a machine without a GPU or TensorRT they are
//! skipped, never failed, unless the config demands TensorRT (`backend = "tensorrt"` without a
//! CPU fallback), because then the daemon itself would not start. Must not: change clocks or
//! power modes, or load a model.

use serde_json::Value;

use super::report::{SelftestReport, Status};
use crate::config::{BackendChoice, Config, Fallback};

pub(super) fn describe_gpu(gpu: &Value) -> String {
    match gpu.get("device") {
        Some(device) => format!(
            "{} (compute {}), {}, {} SMs, {:.1} GiB, driver CUDA {}",
            device["name"].as_str().unwrap_or("?"),
            device["compute_capability"].as_str().unwrap_or("?"),
            if device["integrated"] == Value::Bool(true) { "integrated" } else { "discrete" },
            device["multiprocessors"],
            device["total_memory_bytes"].as_f64().unwrap_or(0.0) / f64::from(1u32 << 30),
            device["driver_version"].as_str().unwrap_or("?"),
        ),
        None => gpu["summary"].as_str().unwrap_or("no GPU").to_owned(),
    }
}

/// Whether the config leaves the daemon no way around TensorRT.
fn tensorrt_required(config: &Config) -> bool {
    config.device.backend == BackendChoice::Tensorrt && config.device.fallback == Fallback::None
}

/// The `tensorrt` and `plugins` checks; returns whether the TensorRT backend can be used.
#[cfg(feature = "tensorrt")]
pub(super) fn check_tensorrt(config: &Config, gpu_available: bool, report: &mut SelftestReport) -> bool {
    if config.device.backend == BackendChoice::Cpu {
        report.check("tensorrt", Status::Skip, "device.backend = \"cpu\"");
        report.check("plugins", Status::Skip, "device.backend = \"cpu\"");
        return false;
    }
    let unavailable = if tensorrt_required(config) { Status::Fail } else { Status::Skip };
    let probe = crate::backend::trt::probe();
    report.tensorrt = serde_json::to_value(&probe).ok();
    if probe.available {
        let version = probe.library_version.as_deref().unwrap_or("?");
        report.check(
            "tensorrt",
            Status::Pass,
            format!("TensorRT {version} from {} (this binary: headers {})", probe.library, probe.compiled_against),
        );
    } else if probe.library_version.is_some() {
        // Installed but older than the headers: a real problem even where the CPU could stand in.
        let status = if unavailable == Status::Fail { Status::Fail } else { Status::Warn };
        report.check("tensorrt", status, probe.summary.clone());
    } else {
        report.check("tensorrt", unavailable, probe.summary.clone());
    }
    match &probe.plugins {
        Some(plugins) if plugins.loaded => report.check("plugins", Status::Pass, format!("{} loaded", plugins.library)),
        Some(plugins) => {
            // end2end exports carry EfficientNMS: without the plugin library they cannot run; on
            // 8.x no ONNX model can be built without it (the parser needs the library).
            let major = crate::backend::trt::header_version().major;
            let builds_from_onnx = config.model.engine.is_none();
            let breaks_all = major < 10 && builds_from_onnx;
            let status = if config.model.decoder == crate::config::DecoderKind::End2end || breaks_all {
                Status::Fail
            } else {
                Status::Warn
            };
            let why = plugins.detail.as_deref().unwrap_or("not loaded");
            report.check("plugins", status, crate::backend::trt::runtime::missing_plugins_warning(major, why));
        }
        None => report.check("plugins", Status::Skip, "TensorRT is not available"),
    }
    probe.available && gpu_available
}

#[cfg(not(feature = "tensorrt"))]
pub(super) fn check_tensorrt(config: &Config, _gpu_available: bool, report: &mut SelftestReport) -> bool {
    let status = if tensorrt_required(config) { Status::Fail } else { Status::Skip };
    let why = "this binary was built without the `tensorrt` feature";
    report.check("tensorrt", status, why);
    report.check("plugins", Status::Skip, why);
    false
}

/// The cache directory must take files (engines, timing cache, the compiled kernel). Only the GPU
/// path writes there: without TensorRT the check neither creates nor touches it.
pub(super) fn check_cache_dir(config: &Config, tensorrt_usable: bool, report: &mut SelftestReport) {
    let dir = &config.engine.cache_dir;
    if !tensorrt_usable {
        let detail =
            format!("{}: not needed, no TensorRT engine runs here (the CPU backend caches nothing)", dir.display());
        report.check("cache_dir", Status::Skip, detail);
        return;
    }
    let probe = dir.join(format!(".selftest-{}", std::process::id()));
    let outcome = std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create it: {e}"))
        .and_then(|()| crate::sys::files::atomic_write(&probe, b"selftest").map_err(|e| e.to_string()))
        .and_then(|()| std::fs::remove_file(&probe).map_err(|e| format!("cannot remove {}: {e}", probe.display())));
    match outcome {
        Ok(()) => report.check("cache_dir", Status::Pass, format!("{} is writable", dir.display())),
        Err(why) => report.check("cache_dir", Status::Fail, format!("{}: {why}", dir.display())),
    }
}

pub(super) fn check_clocks(report: &mut SelftestReport) {
    let clocks = &report.clocks;
    let (status, detail) = if clocks.is_empty() {
        (Status::Skip, "no Jetson GPU clock or nvpmodel files here".to_owned())
    } else if let Some(warning) = &clocks.warning {
        (Status::Warn, format!("{}; {warning}", clocks.summary()))
    } else {
        (Status::Pass, clocks.summary())
    };
    report.check("clocks", status, detail);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensorrt_is_required_only_without_a_fallback() {
        let mut config = Config::embedded_default().expect("default");
        assert!(!tensorrt_required(&config), "auto falls back to the CPU");
        config.device.backend = BackendChoice::Tensorrt;
        assert!(tensorrt_required(&config));
        config.device.fallback = Fallback::Cpu;
        assert!(!tensorrt_required(&config));
    }
}
