//! How fast this machine runs the daemon, measured once per test binary; every wait on frame
//! processing and the watchdog timeout of test daemons derive from it.
//!
//! The aarch64 suite runs some of these tests under qemu (`.ci/run` says which) on a shared 2-core
//! machine, 10-20x slower than natively and slower still under load, so a fixed deadline is either
//! too short there or needlessly long here. [`Pace::measured`] runs `jetson-detectd detect` on one bundled sample twice in one
//! process, through the same runner as every daemon the tests start (qemu in the aarch64 suite) and
//! while the other tests run: the process's wall time is one start-up (process start, config, model
//! load, two frames) and the slower of the two frames' `latency_ms.total` is one frame. Waits are
//! failure guards only, with generous factors on top; no test asserts on speed.

use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::arch::daemon_command;
use crate::daemon::{sample, sample_source, TestConfig};

/// Factor on the measured times for every wait: the machine may get busier after the measurement
/// (parallel tests, other builds), and a wait is only ever reached when something is broken. Not
/// more: under qemu one wait is already about 14 minutes (start-up 38 s, frame 17 s measured), and a
/// broken test must still fail within CI's time.
const SLACK: u32 = 4;
/// Frames a daemon wait budgets for on top of the start-up: the longest test waits for a handful
/// of frames per step, most for one or two.
const FRAMES_PER_WAIT: u32 = 10;
/// No daemon wait is shorter than this, so that a quick measurement on an idle moment cannot make
/// the waits tight (natively they come out below it).
const MIN_DAEMON_WAIT: Duration = Duration::from_secs(60);
/// Floor of the test daemons' watchdog timeout: natively a frame takes a few hundred milliseconds
/// when measured, and several times that when the 2-core machine gets busier (parallel tests and
/// daemons, builds); the keep-alive period (half of this) must stay well above such stalls.
const MIN_WATCHDOG: Duration = Duration::from_secs(6);
/// Floor of the allowed silence of threads that do no model work (the watchdog tests' fake sources
/// and backends): only scheduling noise can delay them.
const MIN_THREAD_SILENCE: Duration = Duration::from_secs(2);
/// The watchdog timeout is this many frames: a healthy frame under load must never look hung.
const WATCHDOG_FRAMES: u32 = 10;

/// One measurement of this machine.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Wall time of `jetson-detectd detect` on two frames: process start, model load and both frames.
    pub startup: Duration,
    /// The slower frame's processing time (`latency_ms.total`: preprocess, inference, decode).
    pub frame: Duration,
}

impl Pace {
    /// The measurement, made by the first test that asks and shared by all.
    pub fn measured() -> Pace {
        static PACE: OnceLock<Pace> = OnceLock::new();
        *PACE.get_or_init(|| {
            let pace = measure();
            eprintln!(
                "pace of this machine: {pace:?}; daemon waits {:?}, watchdog {:?}",
                pace.daemon_wait(),
                pace.watchdog()
            );
            pace
        })
    }

    /// Upper bound for a daemon to start, or to get through the next few frames and publish them.
    pub fn daemon_wait(&self) -> Duration {
        ((self.startup + self.frame * FRAMES_PER_WAIT) * SLACK).max(MIN_DAEMON_WAIT)
    }

    /// `WATCHDOG_USEC` for a test daemon: far above one frame, so only a hang withholds keep-alives.
    pub fn watchdog(&self) -> Duration {
        (self.frame * WATCHDOG_FRAMES).max(MIN_WATCHDOG)
    }

    /// The allowed silence for pipeline threads that do no model work (the test sources and
    /// backends of the watchdog tests): scheduling noise, and the emulator's slowness in the
    /// aarch64 suite, which slows a frame too.
    pub fn thread_silence(&self) -> Duration {
        (self.frame * 2).max(MIN_THREAD_SILENCE)
    }
}

#[derive(serde::Deserialize)]
struct DetectLine {
    latency_ms: Latency,
}

#[derive(serde::Deserialize)]
struct Latency {
    total: f64,
}

fn measure() -> Pace {
    let dir = tempfile::tempdir().expect("temp dir");
    // `detect` talks to no broker and opens no camera; the port only has to be valid, and the
    // config must have a camera.
    let config = TestConfig::new(1, "pace")
        .camera("pace", 1.0, &sample_source("dog.jpg", "once"))
        .write(&dir.path().join("config.toml"));
    let image = sample("dog.jpg");
    let started = Instant::now();
    let output = daemon_command()
        .arg("detect")
        .arg("--config")
        .arg(&config)
        .args([&image, &image])
        .stdin(Stdio::null())
        .output()
        .expect("run jetson-detectd detect");
    let startup = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "jetson-detectd detect failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let frame_ms = stdout
        .lines()
        .map(|line| serde_json::from_str::<DetectLine>(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .map(|line| line.latency_ms.total)
        .fold(0.0, f64::max);
    assert!(frame_ms > 0.0, "no frame time in the output of detect: {stdout}");
    Pace { startup, frame: Duration::from_secs_f64(frame_ms / 1000.0) }
}

#[test]
fn pace_is_measured_and_derives_sane_waits() {
    let pace = Pace::measured();
    assert!(pace.frame < pace.startup, "{pace:?}: start-up includes both frames");
    assert!(pace.daemon_wait() >= pace.startup * SLACK, "{pace:?}");
    assert!(pace.watchdog() >= pace.frame * WATCHDOG_FRAMES, "{pace:?}");
}
