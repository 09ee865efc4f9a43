//! The `selftest` report: every check's verdict and what each check found ([`SelftestReport`]),
//! and its text for a terminal ([`render_text`]; `serde` gives the JSON).
//!
//! Owns: the report's types and their rendering. Must not: run a check (the checks, in `super`
//! and its files, fill the report in).

use serde::Serialize;
use serde_json::Value;

use super::agreement::Agreement;
use super::clocks::ClockReport;
use super::compare;
use super::latency::LatencySummary;
use crate::backend::BackendInfo;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    /// Works, but something deserves attention (clocks not pinned, no plugin library).
    Warn,
    Fail,
    /// Not applicable here, with the reason (no GPU, CPU backend configured).
    Skip,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
            Status::Skip => "SKIP",
        }
    }
}

/// One line of the verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub detail: String,
}

/// The engine: how long it took to get and what it costs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EngineReport {
    /// Engine file (cache or `model.engine`).
    pub path: Option<String>,
    /// It was in the cache before this selftest ran.
    pub cached_before: bool,
    /// Seconds to load (deserialise) it, build included when it was not cached.
    pub load_seconds: Option<f64>,
    pub cold_build_seconds: Option<f64>,
    pub warm_build_seconds: Option<f64>,
    /// warm / cold: what the timing cache saves on a rebuild.
    pub warm_to_cold_ratio: Option<f64>,
}

/// Execution contexts created with user-managed device memory, one per camera.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ContextReport {
    pub contexts: usize,
    pub scratch_bytes_per_context: u64,
    /// What a context allocated for itself beyond its scratch (the fall of the device's free
    /// memory while it was created; TensorRT does not report it).
    pub persistent_bytes_per_context: u64,
    /// The one arena they share.
    pub arena_bytes: u64,
    /// What one scratch allocation per context would have taken beyond the shared arena.
    pub saved_bytes: u64,
}

/// One sample image through the configured backend (and the CPU backend to compare with).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImageResult {
    pub file: String,
    pub detections: usize,
    /// The CPU backend's count, when the configured backend is another one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_detections: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agreement: Option<Agreement>,
    /// Whether the backends agree (absent when nothing was compared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agree: Option<bool>,
    /// Labels and scores found: `person 0.91, dog 0.80`.
    pub found: String,
    /// What went wrong (unreadable image, inference error, disagreement details).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Timed inferences (preprocessing, inference and output copy of one frame; wall clock).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyReport {
    pub backend: &'static str,
    pub image: String,
    pub back_to_back: Option<LatencySummary>,
    pub paused: Option<LatencySummary>,
    pub pause_ms: u64,
    /// The sentence printed when paused inferences are much slower.
    pub verdict: Option<String>,
}

/// Everything `selftest` found; `passed` is what the exit status says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SelftestReport {
    pub version: &'static str,
    pub arch: &'static str,
    pub config: String,
    pub passed: bool,
    pub checks: Vec<Check>,
    /// The configured backend as loaded.
    pub backend: Option<BackendInfo>,
    /// `probe`'s GPU section.
    pub gpu: Value,
    /// `probe`'s TensorRT section (library, headers, plugins), when this binary has TensorRT.
    pub tensorrt: Option<Value>,
    pub clocks: ClockReport,
    pub engine: Option<EngineReport>,
    pub contexts: Option<ContextReport>,
    /// Every model the inference worker would hold a context of, and their one arena.
    pub models: Option<crate::backend::WorkerMemory>,
    pub images: Vec<ImageResult>,
    /// The engine against the CPU on the images, per label, as the daemon checks a new engine.
    pub compare: Option<compare::CompareReport>,
    pub latency: Option<LatencyReport>,
}

impl SelftestReport {
    /// The report of this binary before any check: the config's origin, `probe`'s GPU section
    /// and the clocks as read.
    pub(super) fn new(config: String, gpu: Value, clocks: ClockReport) -> SelftestReport {
        SelftestReport {
            version: env!("CARGO_PKG_VERSION"),
            arch: std::env::consts::ARCH,
            config,
            passed: false,
            checks: Vec::new(),
            backend: None,
            gpu,
            tensorrt: None,
            clocks,
            engine: None,
            contexts: None,
            models: None,
            images: Vec::new(),
            compare: None,
            latency: None,
        }
    }

    pub(super) fn check(&mut self, name: &'static str, status: Status, detail: impl Into<String>) {
        self.checks.push(Check { name, status, detail: detail.into() });
    }
}

/// The report for a terminal: one line per check, the images, the latency verdict, the result.
pub fn render_text(report: &SelftestReport) -> String {
    let mut text = format!("jetson-detectd {} selftest ({}), config {}\n", report.version, report.arch, report.config);
    let width = report.checks.iter().map(|check| check.name.len()).max().unwrap_or(0);
    for check in &report.checks {
        text += &format!("  {}  {:width$}  {}\n", check.status.label(), check.name, check.detail);
    }
    if !report.images.is_empty() {
        let compared = report.images.iter().any(|image| image.cpu_detections.is_some());
        let kind = report.backend.as_ref().map_or("backend", |b| b.kind);
        text += &format!("\nimages ({kind}{}):\n", if compared { " vs cpu" } else { "" });
        let width = report.images.iter().map(|image| image.file.len()).max().unwrap_or(0);
        for image in &report.images {
            let verdict = match (image.agree, &image.problem) {
                (Some(true), _) => "agree".to_owned(),
                (Some(false), Some(problem)) => format!("DISAGREE: {problem}"),
                (_, Some(problem)) => format!("FAILED: {problem}"),
                _ => image.found.clone(),
            };
            let counts = match image.cpu_detections {
                Some(cpu) => format!("{} vs {cpu} detection(s)", image.detections),
                None => format!("{} detection(s)", image.detections),
            };
            text += &format!("  {:width$}  {counts}  {verdict}\n", image.file);
        }
    }
    if let Some(compared) = &report.compare {
        text += &format!("\n{}", compared.render_text());
    }
    if let Some(latency) = &report.latency {
        text +=
            &format!("\nlatency ({}, {}: preprocessing + inference + output copy):\n", latency.backend, latency.image);
        if let Some(b) = &latency.back_to_back {
            text += &format!("  back to back    {:4} runs  p50 {:8.2} ms  p99 {:8.2} ms\n", b.runs, b.p50_ms, b.p99_ms);
        }
        if let Some(p) = &latency.paused {
            let label = format!("{} ms apart", latency.pause_ms);
            text += &format!("  {label:<14}  {:4} runs  p50 {:8.2} ms  p99 {:8.2} ms\n", p.runs, p.p50_ms, p.p99_ms);
        }
        if let Some(verdict) = &latency.verdict {
            text += &format!("  {verdict}\n");
        }
    }
    let count = |status: Status| report.checks.iter().filter(|check| check.status == status).count();
    text += &format!(
        "\nresult: {} ({} passed, {} warnings, {} failed, {} skipped)\n",
        if report.passed { "PASS" } else { "FAIL" },
        count(Status::Pass),
        count(Status::Warn),
        count(Status::Fail),
        count(Status::Skip)
    );
    text
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::*;
    use crate::cmd::selftest::latency::{jitter_verdict, summarise};

    fn report(checks: &[(&'static str, Status, &str)]) -> SelftestReport {
        let mut report = SelftestReport {
            version: "0.1.0",
            arch: "aarch64",
            backend: Some(BackendInfo { kind: "tensorrt", model: "m.engine".into(), detail: "TensorRT 10.3.0".into() }),
            ..SelftestReport::new(
                "/etc/jetson-detectd/config.toml".into(),
                serde_json::json!({ "available": true }),
                ClockReport::read(Path::new("/nonexistent-selftest-root")),
            )
        };
        for (name, status, detail) in checks {
            report.check(name, *status, *detail);
        }
        report.passed = report.checks.iter().all(|check| check.status != Status::Fail);
        report
    }

    #[test]
    fn the_terminal_summary_lists_checks_images_latency_and_the_result() {
        let mut report =
            report(&[("gpu", Status::Pass, "Orin (compute 8.7)"), ("clocks", Status::Warn, "governor nvhost_podgov")]);
        report.images.push(ImageResult {
            file: "dog.jpg".into(),
            detections: 3,
            cpu_detections: Some(3),
            agreement: None,
            agree: Some(true),
            found: "dog 0.96, bicycle 0.90, car 0.85".into(),
            problem: None,
        });
        report.images.push(ImageResult {
            file: "cat.png".into(),
            detections: 0,
            cpu_detections: Some(1),
            agreement: None,
            agree: Some(false),
            found: "nothing".into(),
            problem: Some("only the CPU found cat 0.90".into()),
        });
        let b = summarise(&[Duration::from_millis(8), Duration::from_millis(9)]);
        let p = summarise(&[Duration::from_millis(30)]);
        report.latency = Some(LatencyReport {
            backend: "tensorrt",
            image: "dog.jpg".into(),
            verdict: b.as_ref().zip(p.as_ref()).and_then(|(b, p)| jitter_verdict(b, p, Duration::from_millis(200))),
            back_to_back: b,
            paused: p,
            pause_ms: 200,
        });
        let text = render_text(&report);
        assert!(text.contains("  PASS  gpu     Orin (compute 8.7)"), "{text}");
        assert!(text.contains("  WARN  clocks  governor nvhost_podgov"), "{text}");
        assert!(text.contains("images (tensorrt vs cpu):"), "{text}");
        assert!(text.contains("dog.jpg  3 vs 3 detection(s)  agree"), "{text}");
        assert!(text.contains("cat.png  0 vs 1 detection(s)  DISAGREE: only the CPU found cat 0.90"), "{text}");
        assert!(text.contains("back to back       2 runs"), "{text}");
        assert!(text.contains("200 ms apart") && text.contains("jetson_clocks"), "{text}");
        assert!(text.ends_with("result: PASS (1 passed, 1 warnings, 0 failed, 0 skipped)\n"), "{text}");
    }

    #[test]
    fn a_failed_check_fails_the_result_and_skips_do_not() {
        let skipped = report(&[("gpu", Status::Skip, "libcuda not found"), ("inference", Status::Pass, "5 images")]);
        assert!(skipped.passed);
        let failed = report(&[("gpu", Status::Skip, "libcuda not found"), ("inference", Status::Fail, "x")]);
        assert!(!failed.passed);
        assert!(render_text(&failed).contains("result: FAIL (0 passed, 0 warnings, 1 failed, 1 skipped)"));
        let json = serde_json::to_value(&failed).expect("json");
        assert_eq!(json["checks"][1]["status"], "fail");
        assert_eq!(json["passed"], false);
    }
}
