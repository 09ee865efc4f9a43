//! The capacity benchmark: `bench --cameras N --fps F [--motion idle|busy]`, the most cameras (up
//! to N) that keep F frames per second each, as live cameras: each delivers at its rate and its
//! ring drops a frame inference has not taken when the next arrives. With `--motion`, every
//! camera's frames go through its `[motion]` gate (enabled, whatever the config says), which
//! keeps frames without motion from inference, as in the daemon.
//!
//! Owns: one run of n cameras at the rate ([`run_at_rate`]: a [`super::scene`] source per camera,
//! a sink that counts the frames detected and gated), whether a run kept the rate
//! ([`keeps_rate`]), the search over the number of cameras ([`most_that_keep`]) and the report
//! ([`CapacityBench`]). Must not: assert on time (the report says whether the rate was kept; the
//! caller prints it) or judge motion itself (`crate::infer::gating` does, on the source thread).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use super::error::BenchError;
use super::models::BenchModels;
use super::running_cameras::{CameraSetup, RunningCameras};
use super::scene::{MotionScene, SceneFrames};
use crate::config::LimitsConfig;
use crate::detection::{Detection, Labels};
use crate::frame::{FrameSlot, FrameTimings};
use crate::infer::gating::MotionConfig;
use crate::infer::scheduler::SchedulePlan;
use crate::infer::step;
use crate::publish::payload::{detections_message, Latency};

/// A camera keeps the rate when it delivers (detected or gated) at least this share of it in the
/// window: one frame in 20 may fall to the window's edges and the source thread's timer.
pub const KEEP_SHARE: f64 = 0.95;

/// The capacity at one rate, with or without motion gating.
#[derive(Debug, Serialize)]
pub struct CapacityBench {
    /// The rate each camera delivers at (`--fps`).
    pub fps: f64,
    /// What the cameras show (`--motion`); `null`: the idle scene with no gating.
    pub motion: Option<MotionScene>,
    /// With gating: the floor rate, a frame to the detector at least this often per camera.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detect_interval_s: Option<f64>,
    /// The most cameras of the runs that kept the rate (0: not even one).
    pub capacity: usize,
    /// The first run, with N cameras, kept the rate: more might too (ask for a larger N).
    pub at_least: bool,
    /// Every run, in the order of the search.
    pub runs: Vec<CapacityRun>,
}

/// One run of a number of cameras at the rate.
#[derive(Debug, Serialize)]
pub struct CapacityRun {
    pub cameras: usize,
    /// Length of the measurement window, after the warm-up.
    pub seconds: f64,
    /// Every camera delivered at least [`KEEP_SHARE`] of the rate.
    pub keeps_fps: bool,
    /// Frames per second each camera delivered in the window, detected and gated together.
    pub fps_per_camera: Vec<f64>,
    /// Frames of all cameras in the window that went to inference, and that the gates kept from it.
    pub frames_detected: u64,
    pub frames_gated: u64,
    /// Frames the rings dropped in the whole run because inference had not taken the one before.
    pub frames_dropped: u64,
}

/// What a run needs besides its models.
pub struct RateRun<'a> {
    pub fps: f64,
    pub frames: &'a Arc<SceneFrames>,
    /// `[motion]`, enabled; `None`: no gating.
    pub motion: Option<&'a Arc<MotionConfig>>,
    pub score_threshold: f32,
    pub limits: &'a LimitsConfig,
    pub warmup: usize,
    pub iterations: usize,
}

/// Whether every camera of a run delivered at least [`KEEP_SHARE`] of `fps`.
pub fn keeps_rate(fps_per_camera: &[f64], fps: f64) -> bool {
    !fps_per_camera.is_empty() && fps_per_camera.iter().all(|&delivered| delivered >= KEEP_SHARE * fps)
}

/// The most cameras, up to `most`, for which `kept` says yes, assuming that fewer cameras keep
/// the rate whenever more do: `most` first (then the answer is "at least `most`", the second
/// value), else a bisection below it. `kept` runs once per number tried.
pub fn most_that_keep<E>(most: usize, mut kept: impl FnMut(usize) -> Result<bool, E>) -> Result<(usize, bool), E> {
    if most == 0 {
        return Ok((0, false));
    }
    if kept(most)? {
        return Ok((most, true));
    }
    // `low` kept the rate (0 trivially), `high` did not.
    let (mut low, mut high) = (0, most);
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        match kept(middle)? {
            true => low = middle,
            false => high = middle,
        }
    }
    Ok((low, false))
}

/// What `bench` asks of the capacity benchmark.
#[derive(Debug, Clone, Copy)]
pub struct CapacityRequest {
    /// The most cameras to try (`--cameras N`).
    pub most: usize,
    pub fps: f64,
    pub motion: Option<MotionScene>,
    /// Frames' time each run warms up for, and measures for.
    pub warmup: usize,
    pub iterations: usize,
}

/// The rate with `--motion` and no `--fps`.
pub const DEFAULT_FPS: f64 = 5.0;
/// The highest `--fps`.
pub const MAX_FPS: f64 = 240.0;

/// The capacity search of `request` on the cameras `load(n)` gives for n cameras (their models
/// and schedule), each showing `image` (its idle scene without `--motion`), gated by `[motion]`
/// (`motion`, enabled here) with `--motion`.
pub fn bench_capacity(
    request: CapacityRequest,
    image: &std::path::Path,
    motion: Option<&MotionConfig>,
    score_threshold: f32,
    limits: &LimitsConfig,
    mut load: impl FnMut(usize) -> Result<(BenchModels, SchedulePlan), BenchError>,
) -> Result<CapacityBench, BenchError> {
    let CapacityRequest { most, fps, motion: scene, warmup, iterations } = request;
    if !(fps > 0.0 && fps <= MAX_FPS) {
        return Err(BenchError::Setup(format!("--fps {fps}: must be more than 0 and at most {MAX_FPS}")));
    }
    let mut decoded = FrameSlot::new(Box::new(crate::frame::HeapMemory::default()));
    crate::source::image_decode::decode_file(image, limits, &mut decoded)
        .map_err(|e| BenchError::Setup(format!("{}: {e}", image.display())))?;
    let frames = Arc::new(SceneFrames::new(scene.unwrap_or(MotionScene::Idle), decoded.data(), decoded.meta())?);
    let gating = match scene {
        Some(_) => {
            let section = motion.ok_or_else(|| BenchError::Setup("--motion: the config has no [motion]".into()))?;
            Some(Arc::new(MotionConfig { enabled: true, ..section.clone() }))
        }
        None => None,
    };
    let run = RateRun { fps, frames: &frames, motion: gating.as_ref(), score_threshold, limits, warmup, iterations };
    let mut runs = Vec::new();
    let (capacity, at_least) = most_that_keep(most, |cameras| -> Result<bool, BenchError> {
        let (models, plan) = load(cameras)?;
        let outcome = run_at_rate(models, plan, &run)?;
        log::info!(
            "bench: {cameras} cameras at {fps} fps: {} ({} frames detected, {} gated)",
            if outcome.keeps_fps { "kept" } else { "not kept" },
            outcome.frames_detected,
            outcome.frames_gated
        );
        let kept = outcome.keeps_fps;
        runs.push(outcome);
        Ok(kept)
    })?;
    let detect_interval_s = gating.as_ref().and_then(|m| m.for_camera("").ok()).map(|c| c.detect_interval_s);
    Ok(CapacityBench { fps, motion: scene, detect_interval_s, capacity, at_least, runs })
}

/// A live camera showing a scene: frame n of it at every turn of the source thread, which the
/// camera's fps cap paces; a frame inference has not taken when the next comes is dropped.
struct SceneSource {
    frames: Arc<SceneFrames>,
    next: u64,
}

impl crate::source::FrameSource for SceneSource {
    /// The scene's frame is copied into the slot, as a camera's buffer would be.
    fn capture_mode(&self) -> crate::frame::CaptureMode {
        crate::frame::CaptureMode::Copy
    }

    fn describe(&self) -> String {
        let meta = self.frames.meta();
        format!("bench scene {}x{}", meta.width, meta.height)
    }

    fn next_frame(&mut self, slot: &mut FrameSlot) -> Result<crate::source::Capture, crate::source::SourceError> {
        let meta = self.frames.meta();
        let target = slot
            .prepare(meta.width, meta.height, meta.format)
            .map_err(|message| crate::source::SourceError::Read { source_name: self.describe(), message })?;
        self.frames.paint(self.next, target);
        slot.note_copy();
        slot.meta_mut().captured_at = SystemTime::now();
        self.next += 1;
        Ok(crate::source::Capture::Frame)
    }
}

/// Counts each camera's frames detected and gated, and encodes the message the daemon would
/// publish for a detected one.
struct CountingSink {
    cameras: Vec<String>,
    labels: Arc<Labels>,
    detected: Vec<AtomicU64>,
    gated: Vec<AtomicU64>,
}

impl CountingSink {
    fn index(&self, camera: &str) -> Option<usize> {
        self.cameras.iter().position(|name| name == camera)
    }

    /// Per camera, frames detected and gated so far.
    fn counts(&self) -> Vec<(u64, u64)> {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        self.detected.iter().zip(&self.gated).map(|(d, g)| (load(d), load(g))).collect()
    }
}

impl step::FrameSink for CountingSink {
    fn frame(
        &self,
        camera: &str,
        slot: &FrameSlot,
        detections: &[Detection],
        timings: &FrameTimings,
        _: &mut crate::infer::per_track::PerTrackSessions,
    ) {
        let message = detections_message(camera, slot.meta(), &Latency::from(timings), detections, &self.labels);
        std::hint::black_box(message);
        if let Some(index) = self.index(camera) {
            self.detected[index].fetch_add(1, Ordering::Relaxed);
        }
    }

    fn held(&self, camera: &str, _: &FrameSlot) {
        if let Some(index) = self.index(camera) {
            self.gated[index].fetch_add(1, Ordering::Relaxed);
        }
    }

    fn camera_ended(&self, camera: &str, result: &Result<(), step::PipelineError>) {
        if let Err(e) = result {
            log::error!("{camera}: {e}");
        }
    }

    fn worker_failed(&self, worker: &str, error: &step::PipelineError) {
        log::error!("{worker}: {error}");
    }
}

/// Runs the cameras of `models` at `run.fps` each through the scheduler as `plan` says, for
/// `run.warmup` frames' time, then measures for `run.iterations` frames' time.
pub fn run_at_rate(models: BenchModels, plan: SchedulePlan, run: &RateRun<'_>) -> Result<CapacityRun, BenchError> {
    let BenchModels { cameras: assigned, lanes, classifiers, labels } = models;
    if assigned.is_empty() {
        return Err(BenchError::Setup("no camera to run".into()));
    }
    let names: Vec<String> = assigned.into_iter().map(|(name, _)| name).collect();
    let cameras = names.len();
    let sink = Arc::new(CountingSink {
        cameras: names.clone(),
        labels,
        detected: (0..cameras).map(|_| AtomicU64::new(0)).collect(),
        gated: (0..cameras).map(|_| AtomicU64::new(0)).collect(),
    });
    let meta = run.frames.meta();
    let setup = CameraSetup {
        width: meta.width,
        height: meta.height,
        fps: run.fps as f32,
        score_threshold: run.score_threshold,
        limits: run.limits,
        motion: run.motion,
    };
    let running = RunningCameras::start(
        lanes,
        classifiers,
        plan,
        sink.clone(),
        &names,
        |camera| {
            // Cameras out of step: each starts at its own place of the scene.
            Box::new(SceneSource { frames: Arc::clone(run.frames), next: camera as u64 * 7 })
        },
        &setup,
    )?;
    let frames_time = |frames: usize| Duration::from_secs_f64(frames as f64 / run.fps);
    let mut window = None;
    let outcome = wait(&running, frames_time(run.warmup)).and_then(|()| {
        let (before, started) = (sink.counts(), Instant::now());
        wait(&running, frames_time(run.iterations.max(1)))?;
        window = Some((before, sink.counts(), started.elapsed()));
        Ok(())
    });
    let frames_dropped = running.stop()?.frames_dropped;
    outcome?;
    let Some((before, after, elapsed)) = window else {
        return Err(BenchError::Setup("the run ended before its window".into()));
    };
    Ok(summarise_run(&before, &after, elapsed, run.fps, frames_dropped))
}

/// Sleeps for `time`, or fails as soon as a worker has set the stop flag.
fn wait(running: &RunningCameras, time: Duration) -> Result<(), BenchError> {
    let until = Instant::now() + time;
    while Instant::now() < until {
        if running.stopped() {
            return Err(BenchError::Setup("the inference worker failed (see the log)".into()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// A run's report from each camera's (detected, gated) counts at the window's start and end.
fn summarise_run(
    before: &[(u64, u64)],
    after: &[(u64, u64)],
    window: Duration,
    fps: f64,
    frames_dropped: u64,
) -> CapacityRun {
    let seconds = window.as_secs_f64();
    let in_window: Vec<(u64, u64)> =
        before.iter().zip(after).map(|((d0, g0), (d1, g1))| (d1.saturating_sub(*d0), g1.saturating_sub(*g0))).collect();
    let fps_per_camera: Vec<f64> = in_window
        .iter()
        .map(|(detected, gated)| if seconds > 0.0 { (detected + gated) as f64 / seconds } else { 0.0 })
        .collect();
    CapacityRun {
        cameras: before.len(),
        seconds: (seconds * 1000.0).round() / 1000.0,
        keeps_fps: keeps_rate(&fps_per_camera, fps),
        fps_per_camera: fps_per_camera.iter().map(|rate| (rate * 10.0).round() / 10.0).collect(),
        frames_detected: in_window.iter().map(|(detected, _)| detected).sum(),
        frames_gated: in_window.iter().map(|(_, gated)| gated).sum(),
        frames_dropped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_keeps_the_rate_when_every_camera_delivers_nearly_all_of_it() {
        assert!(keeps_rate(&[5.0, 4.8, 4.75], 5.0));
        assert!(!keeps_rate(&[5.0, 4.7], 5.0), "one camera behind");
        assert!(!keeps_rate(&[], 5.0), "no camera");
    }

    #[test]
    fn the_search_tries_n_first_then_bisects_below_it() {
        let mut tried = Vec::new();
        let found = most_that_keep(32, |n| -> Result<bool, ()> {
            tried.push(n);
            Ok(n <= 11)
        });
        assert_eq!(found, Ok((11, false)));
        assert_eq!(tried, [32, 16, 8, 12, 10, 11]);
        assert_eq!(most_that_keep(4, |_| Ok::<_, ()>(true)), Ok((4, true)), "N kept: at least N");
        assert_eq!(most_that_keep(4, |_| Ok::<_, ()>(false)), Ok((0, false)), "not even one");
        assert_eq!(most_that_keep(5, |n| if n == 2 { Err("failed") } else { Ok(false) }), Err("failed"));
    }

    #[test]
    fn a_runs_counts_are_those_of_its_window() {
        let before = [(10, 0), (3, 40)];
        let after = [(35, 0), (5, 62)];
        let run = summarise_run(&before, &after, Duration::from_secs(5), 5.0, 2);
        assert_eq!(run.fps_per_camera, [5.0, 4.8]);
        assert!(run.keeps_fps);
        assert_eq!((run.frames_detected, run.frames_gated, run.frames_dropped), (27, 22, 2));
        let behind = summarise_run(&before, &[(30, 0), (5, 62)], Duration::from_secs(5), 5.0, 0);
        assert!(!behind.keeps_fps, "camera 0 delivered 4 fps");
    }
}
