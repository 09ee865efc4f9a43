//! The CPU backend's engines, driven as a user would: `detect` on every bundled sample with ONNX
//! Runtime and with rten, `auto` on a machine without ONNX Runtime, and a configured library that
//! is missing, not a library, or too old.
//!
//! ONNX Runtime comes from `ORT_DYLIB_PATH` (`.ci/run` installs PyPI's onnxruntime and exports it).
//! Without it the tests that need it print why and pass, except in CI on x86_64 (`CI=true`), where
//! they fail ([`crate::prerequisite`]): the aarch64 suite under qemu has no ONNX Runtime.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use jetson_detectd::publish::payload::DetectionRecord;
use serde::Deserialize;

use crate::arch::daemon_command as daemon;
use crate::daemon::{sample, sample_source, toml_string, RunningDaemon, TestConfig};
use crate::prerequisite::or_skip;

/// Largest difference allowed between the engines' scores of one object; each printed score is
/// also rounded to 0.001, so two printed values may differ by 0.001 more.
const SCORE_TOLERANCE: f64 = 0.01 + 0.001;
/// Largest difference allowed between the engines' box edges, in source pixels; each printed edge
/// is also rounded to 0.1 px.
const BOX_TOLERANCE: f64 = 0.5 + 0.1;
/// Detections at or above this score are compared (as in the `detect` tests).
const THRESHOLD: f64 = 0.4;

const SAMPLES: [&str; 5] = ["astronaut.png", "chelsea.png", "coffee.png", "dog.jpg", "person.jpg"];

/// One line of `detect` output (the fields this test reads).
#[derive(Debug, Deserialize)]
struct FileResult {
    file: String,
    detections: Vec<DetectionRecord>,
}

/// The ONNX Runtime library the tests may use: `ORT_DYLIB_PATH`, which must be set in CI on x86_64.
fn onnxruntime_library() -> Option<PathBuf> {
    let library = std::env::var_os("ORT_DYLIB_PATH").filter(|path| !path.is_empty()).map(PathBuf::from);
    or_skip(library.ok_or_else(|| {
        "ORT_DYLIB_PATH is not set (pip install onnxruntime, then export \
         ORT_DYLIB_PATH=<site-packages>/onnxruntime/capi/libonnxruntime.so.<version>)"
            .to_owned()
    }))
}

fn config_with(dir: &Path, name: &str, device: &[(&str, String)]) -> PathBuf {
    let mut config = TestConfig::new(1883, "engine-test").camera("demo", 2.0, &sample_source("chelsea.png", "once"));
    for (key, value) in device {
        config = config.set("device", key, value);
    }
    config.write(&dir.join(name))
}

/// `detect` at [`THRESHOLD`] on every sample, logging at info so that the engine line shows.
fn detect(config: &Path, env: &[(&str, &OsStr)]) -> Output {
    let mut command = daemon();
    command.args(["detect", "--threshold", &THRESHOLD.to_string(), "--config"]).arg(config);
    command.args(SAMPLES.map(sample)).env("RUST_LOG", "info");
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().expect("run jetson-detectd detect");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "detect panicked:\n{stderr}");
    output
}

fn parse_lines(output: &Output) -> Vec<FileResult> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("bad detect line {line:?}: {e}")))
        .collect()
}

/// Where the two engines' detections of one file differ beyond the tolerances. Each rten detection
/// is paired with the ONNX Runtime detection of the same label whose box is closest; a detection
/// within the score tolerance of the threshold may be on one side only.
fn differences(name: &str, rten: &[DetectionRecord], onnxruntime: &[DetectionRecord]) -> Vec<String> {
    let edges = |d: &DetectionRecord| [d.bbox.x1, d.bbox.y1, d.bbox.x2, d.bbox.y2];
    let distance = |a: &DetectionRecord, b: &DetectionRecord| {
        edges(a).iter().zip(edges(b)).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
    };
    let mut unmatched: Vec<&DetectionRecord> = onnxruntime.iter().collect();
    let mut problems = Vec::new();
    for detection in rten {
        let best = unmatched
            .iter()
            .enumerate()
            .filter(|(_, other)| other.label == detection.label)
            .min_by(|(_, a), (_, b)| distance(detection, a).total_cmp(&distance(detection, b)))
            .map(|(index, _)| index);
        let Some(index) = best else {
            if detection.score >= THRESHOLD + SCORE_TOLERANCE {
                problems.push(format!(
                    "{name}: rten finds {} {:.3} {:?}, ONNX Runtime does not",
                    detection.label,
                    detection.score,
                    edges(detection)
                ));
            }
            continue;
        };
        let other = unmatched.remove(index);
        if (detection.score - other.score).abs() > SCORE_TOLERANCE {
            problems.push(format!(
                "{name}: {} score {:.3} on rten, {:.3} on ONNX Runtime",
                detection.label, detection.score, other.score
            ));
        }
        if distance(detection, other) > BOX_TOLERANCE {
            problems.push(format!(
                "{name}: {} box {:?} on rten, {:?} on ONNX Runtime",
                detection.label,
                edges(detection),
                edges(other)
            ));
        }
    }
    for other in unmatched.into_iter().filter(|other| other.score >= THRESHOLD + SCORE_TOLERANCE) {
        problems.push(format!(
            "{name}: ONNX Runtime finds {} {:.3} {:?}, rten does not",
            other.label,
            other.score,
            edges(other)
        ));
    }
    problems
}

#[test]
fn onnxruntime_finds_what_rten_finds_on_every_sample() {
    let Some(library) = onnxruntime_library() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let rten = config_with(dir.path(), "rten.toml", &[("cpu_engine", "\"rten\"".into())]);
    let onnxruntime = config_with(
        dir.path(),
        "onnxruntime.toml",
        &[
            ("cpu_engine", "\"onnxruntime\"".into()),
            ("onnxruntime_library", toml_string(&library.display().to_string())),
        ],
    );
    let (rten, onnxruntime) = (detect(&rten, &[]), detect(&onnxruntime, &[]));
    for (engine, output) in [("rten 0.27", &rten), ("ONNX Runtime 1.", &onnxruntime)] {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{engine}: {stderr}");
        assert!(stderr.contains(&format!("CPU engine: {engine}")), "the log names {engine}:\n{stderr}");
    }
    let (rten, onnxruntime) = (parse_lines(&rten), parse_lines(&onnxruntime));
    assert_eq!((rten.len(), onnxruntime.len()), (SAMPLES.len(), SAMPLES.len()), "one line per sample");
    let mut problems = Vec::new();
    for (name, (rten, onnxruntime)) in SAMPLES.iter().zip(rten.iter().zip(&onnxruntime)) {
        assert!(rten.file.ends_with(name) && onnxruntime.file.ends_with(name), "lines in argument order");
        assert!(!rten.detections.is_empty(), "{name}: every sample has an object");
        problems.extend(differences(name, &rten.detections, &onnxruntime.detections));
    }
    assert!(problems.is_empty(), "the engines disagree:\n{}", problems.join("\n"));
}

#[test]
fn auto_without_onnxruntime_runs_rten_and_says_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config_with(dir.path(), "auto.toml", &[("cpu_engine", "\"auto\"".into())]);
    // No ORT_DYLIB_PATH, no virtual environment, a home and pyenv without Python packages: only
    // the system's library and Python directories are left to search.
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("create home");
    let hermetic = |command: &mut Command| {
        command
            .env_remove("ORT_DYLIB_PATH")
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("VIRTUAL_ENV")
            .env("HOME", &home)
            .env("PYENV_ROOT", &home)
            .env("PATH", "/usr/bin:/bin");
    };
    let mut probe = daemon();
    probe.args(["probe", "--config"]).arg(&config);
    hermetic(&mut probe);
    let report: serde_json::Value =
        serde_json::from_slice(&probe.output().expect("run probe").stdout).expect("probe prints JSON");
    let section = &report["cpu_engine"];
    if section["engine"] == "onnxruntime" {
        println!(
            "skipped: ONNX Runtime is installed system-wide ({}), so its absence cannot be tested",
            section["library"]
        );
        return;
    }
    assert_eq!(section["engine"], "rten", "{section}");
    assert!(section["reason"].as_str().is_some_and(|reason| reason.contains("ONNX Runtime not found")), "{section}");

    let mut command = daemon();
    command.args(["detect", "--config"]).arg(&config).arg(sample("dog.jpg")).env("RUST_LOG", "info");
    hermetic(&mut command);
    let output = command.output().expect("run detect");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("CPU engine: rten 0.27 (device.cpu_engine = \"auto\"; ONNX Runtime not found: "),
        "the log says which engine runs and why:\n{stderr}"
    );
    let results = parse_lines(&output);
    assert!(results.iter().any(|result| !result.detections.is_empty()), "rten still detects the dog");
}

/// A configured library that cannot be used stops `detect` and `run` with exit status 78 (a
/// configuration error: systemd does not restart it) and a message naming the key.
fn assert_refused(dir: &Path, library: &Path, expected: &[&str]) {
    let config = config_with(
        dir,
        "refused.toml",
        &[("cpu_engine", "\"auto\"".into()), ("onnxruntime_library", toml_string(&library.display().to_string()))],
    );
    let output = daemon().args(["detect", "--config"]).arg(&config).arg(sample("dog.jpg")).output().expect("detect");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(78), "detect with {}: {stderr}", library.display());
    for text in ["device.onnxruntime_library", &library.display().to_string()].iter().chain(expected) {
        assert!(stderr.contains(text), "the error names {text:?}:\n{stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");

    let mut running = RunningDaemon::start(&config, &[]);
    let status = running.wait_exit();
    assert_eq!(status.code(), Some(78), "run with {}:\n{}", library.display(), running.log());
    assert!(running.log().contains("device.onnxruntime_library"), "{}", running.log());
}

#[test]
fn a_configured_library_that_is_missing_or_not_onnxruntime_exits_78_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_refused(dir.path(), &dir.path().join("libonnxruntime.so.1.22.0"), &["no such file"]);
    let garbage = dir.path().join("libonnxruntime.so");
    std::fs::write(&garbage, b"\x7fELF but not really a shared library").expect("write");
    assert_refused(dir.path(), &garbage, &["cannot load it"]);
}

/// Compiles a shared library that answers ONNX Runtime's entry point with `version` and, for every
/// C API version, null: what an ONNX Runtime that does not know ours would do. Compiled for the
/// architecture the tests run as (`CC_<arch>_unknown_linux_gnu`, as `.ci/run` sets it for aarch64).
fn fake_onnxruntime(dir: &Path, version: &str) -> PathBuf {
    let source = dir.join(format!("fake-{version}.c"));
    std::fs::write(
        &source,
        format!(
            "typedef struct {{ const void *(*get_api)(unsigned int); const char *(*get_version)(void); }} ApiBase;\n\
             static const void *get_api(unsigned int version) {{ (void)version; return 0; }}\n\
             static const char *get_version(void) {{ return \"{version}\"; }}\n\
             static const ApiBase base = {{ get_api, get_version }};\n\
             const ApiBase *OrtGetApiBase(void) {{ return &base; }}\n"
        ),
    )
    .expect("write the fake library's source");
    let library = dir.join(format!("libonnxruntime.so.{version}"));
    let compiler =
        std::env::var(format!("CC_{}_unknown_linux_gnu", std::env::consts::ARCH)).unwrap_or_else(|_| "cc".into());
    let status = Command::new(&compiler)
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .unwrap_or_else(|e| panic!("run {compiler}: {e}"));
    assert!(status.success(), "{compiler} could not build the fake library");
    library
}

#[test]
fn an_onnxruntime_too_old_or_without_our_api_is_refused_naming_both_versions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = fake_onnxruntime(dir.path(), "1.16.3");
    assert_refused(dir.path(), &old, &["ONNX Runtime 1.16.3 is too old", "needs 1.17 or newer"]);
    let no_api = fake_onnxruntime(dir.path(), "1.20.0");
    assert_refused(dir.path(), &no_api, &["ONNX Runtime 1.20.0 does not provide C API version 17"]);
}
