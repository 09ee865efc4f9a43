//! `jetson-detectd selftest` as a user runs it: the bundled model and a sample image, few timed
//! inferences (the aarch64 suite runs under qemu, where one inference takes seconds).
//!
//! On a machine without a GPU or TensorRT (CI) the GPU checks must be skipped with a reason and the
//! run must pass on the CPU backend; on a GPU machine they may pass instead, never fail.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::arch::daemon_command as daemon;
use crate::daemon::{sample_source, TestConfig};

/// A config on the bundled model with one `images` camera and `backend = "auto"` (TensorRT where
/// it loads, else the CPU backend): what a user's first `selftest` runs.
fn config(dir: &Path, image: &str) -> std::path::PathBuf {
    TestConfig::new(1883, "selftest-test")
        .set("device", "backend", "\"auto\"")
        .set("engine", "cache_dir", &format!("{:?}", dir.join("cache").display().to_string()))
        .camera("demo", 2.0, &sample_source(image, "once"))
        .write(&dir.join("selftest.toml"))
}

fn selftest(config: &Path, extra: &[&str]) -> Output {
    let output = daemon()
        .args(["selftest", "--runs", "3", "--paused-runs", "2", "--pause-ms", "10", "--config"])
        .arg(config)
        .args(extra)
        .output()
        .expect("run jetson-detectd selftest");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "selftest panicked:\n{stderr}");
    output
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|check| check["name"] == name))
        .unwrap_or_else(|| panic!("no `{name}` check in {report:#}"))
}

#[test]
fn selftest_passes_on_the_cpu_backend_and_says_what_it_skipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = selftest(&config(dir.path(), "chelsea.png"), &["--json"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}\n{stderr}"));
    assert!(output.status.success(), "selftest failed:\n{report:#}\n{stderr}");
    assert_eq!(report["passed"], true);

    for check in report["checks"].as_array().expect("checks") {
        let status = check["status"].as_str().expect("status");
        assert!(["pass", "warn", "skip"].contains(&status), "a passing run has no failed check: {check}");
        assert!(!check["detail"].as_str().unwrap_or_default().is_empty(), "every check says why: {check}");
    }
    if check(&report, "gpu")["status"] == "skip" {
        // No GPU: every GPU check is skipped with its reason, and the CPU backend did the work.
        for name in ["tensorrt", "plugins", "cache_dir", "engine", "contexts", "agreement"] {
            assert_eq!(check(&report, name)["status"], "skip", "{name} without a GPU: {report:#}");
        }
        assert_eq!(report["backend"]["kind"], "cpu");
        assert!(!dir.path().join("cache").exists(), "the CPU backend needs no engine cache and makes none");
    }
    assert_eq!(check(&report, "inference")["status"], "pass");
    // Every model the inference worker would hold, here `[model]` alone; the CPU backend says it
    // has no device arena instead of reporting zero bytes.
    assert_eq!(check(&report, "models")["status"], "pass", "{report:#}");
    assert_eq!(report["models"]["models"][0]["name"], "model", "{report:#}");
    if report["backend"]["kind"] == "cpu" {
        assert!(report["models"]["arena"].as_str().is_some_and(|arena| arena.starts_with("none")), "{report:#}");
    }

    // The configured image ran and found its cat.
    let images = report["images"].as_array().expect("images");
    assert_eq!(images.len(), 1, "{report:#}");
    assert_eq!(images[0]["file"], "chelsea.png");
    assert!(images[0]["found"].as_str().is_some_and(|found| found.starts_with("cat ")), "{report:#}");

    // Exactly the requested number of timed inferences, with percentiles.
    let latency = &report["latency"];
    assert_eq!(latency["back_to_back"]["runs"], 3, "{report:#}");
    assert_eq!(latency["paused"]["runs"], 2, "{report:#}");
    assert_eq!(latency["pause_ms"], 10);
    assert!(latency["back_to_back"]["p99_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{report:#}");
    let jitter_flagged = latency["verdict"].is_string();
    assert_eq!(check(&report, "latency")["status"], if jitter_flagged { "warn" } else { "pass" });
}

#[test]
fn selftest_fails_with_exit_status_1_when_an_image_cannot_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let garbage = dir.path().join("garbage.png");
    std::fs::write(&garbage, b"this is not a PNG file").expect("write");
    let output = selftest(&config(dir.path(), "chelsea.png"), &["--images", &garbage.display().to_string()]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "stdout:\n{stdout}\nstderr:\n{stderr}");
    // The terminal summary: one line per check, the image's problem, the verdict, and why on stderr.
    assert!(stdout.contains("  FAIL  inference"), "{stdout}");
    assert!(stdout.contains("garbage.png") && stdout.contains("cannot read the image"), "{stdout}");
    assert!(stdout.contains("result: FAIL"), "{stdout}");
    assert!(stderr.contains("selftest failed: inference"), "{stderr}");
}
