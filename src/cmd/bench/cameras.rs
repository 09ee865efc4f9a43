//! The cameras benchmark: N cameras showing one image, through the real inference scheduler, each
//! on the detector `super::models` assigned it (one lane per detector, as the daemon runs them).
//!
//! Owns: [`bench_cameras`] (a still-image source per camera, a sink that counts and encodes, the
//! measurement window) and its report ([`CamerasBench`]: all cameras, each camera, each model). Must not: open files per frame (each
//! frame is a copy of the decoded image, the cost of a camera handing over a frame).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use super::error::BenchError;
use super::models::BenchModels;
use super::preprocess::preprocess_alone;
use super::running_cameras::{CameraSetup, RunningCameras};
use super::summary::{summarise, StageSummary};
use crate::backend::WorkerSeat;
use crate::config::{CpuBudget, LimitsConfig};
use crate::detection::{Detection, Labels};
use crate::frame::{FrameSlot, FrameTimings};
use crate::infer::step;
use crate::publish::payload::{detections_message, Latency};
use crate::source::image_decode;
use crate::sys::lock::{lock, wait_timeout_while};

/// N cameras showing the same image, through the scheduler.
#[derive(Debug, Serialize)]
pub struct CamerasBench {
    pub cameras: usize,
    pub workers: usize,
    /// CPU backend: each worker's share of the cores (`device.cpu_threads`), the threads its
    /// inference and its preprocessing run on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads_per_worker: Option<Vec<usize>>,
    /// Each worker runs two sessions that take turns, one preprocessing its next frame on one
    /// thread while the other's inference runs ([`Backend::overlaps_preprocessing`](crate::backend::Backend::overlaps_preprocessing)).
    pub overlapping: bool,
    /// Frames one inference may take (`engine.max_batch`, or less where the model allows less).
    pub max_batch: usize,
    /// Frames each camera ran before the measurement window, and at least in it.
    pub warmup: usize,
    pub iterations: usize,
    /// Length of the window in which every camera was past its warm-up.
    pub seconds: f64,
    /// Frames per second of all cameras together, and of each.
    pub fps_total: f64,
    pub fps_per_camera: Vec<f64>,
    /// The model each camera runs (`model`, `models.<name>`; `--models` assigns them round robin).
    pub camera_models: Vec<String>,
    /// Frames in the window, and frames per second, of the cameras of each model.
    pub frames_per_model: BTreeMap<String, usize>,
    pub fps_per_model: BTreeMap<String, f64>,
    /// Capture to message (source copy + preprocess + inference + decode + encoding), per frame.
    pub latency: StageSummary,
    /// Per frame outside inference: source → slot copy, preprocessing (a batch's, for a frame in a
    /// batch), decoding and message encoding.
    pub outside_inference: StageSummary,
    /// Preprocessing per frame (a batch's, for a frame in a batch), the part of
    /// `outside_inference` that runs on the worker's threads.
    pub preprocess: StageSummary,
    /// CPU backend: the same preprocessing with nothing else running, on the threads a worker's
    /// preprocessing has beside an inference (1 when overlapping, else the first worker's share):
    /// what `preprocess` would be uncontended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preprocess_alone: Option<StageSummary>,
    /// Inference per frame (a batch's, for a frame in a batch): the model's run on the worker's
    /// threads and its outputs' conversion.
    pub inference: StageSummary,
    /// Between two frames a camera delivered, the time none of the second frame's stages on the
    /// worker (preprocessing, inference, decoding, message) account for: taking the frame from the
    /// ring, giving the slot back, waiting for a frame. With one worker per camera and a frame always
    /// ready, what the worker spends per frame outside its stages; with a worker serving several
    /// cameras it also holds the other cameras' frames.
    pub between_frames: StageSummary,
    /// Inferences by batch size, over the whole run.
    pub batch_sizes: BTreeMap<usize, u64>,
    pub memory: crate::backend::MemoryReport,
}

/// A camera that shows one decoded image forever: each frame is a copy of it into the slot, the
/// cost of a camera handing over a frame (no file decoding, which would swamp the numbers). It
/// keeps one frame ready beyond the one in the works: frame n + 1 is copied while frame n is in
/// inference (once frame n − 1 has been delivered), so a worker that delivers frame n finds
/// n + 1 waiting, as it finds a live camera's newest frame when the camera is faster than the
/// worker. It neither spins on copies (an uncapped source would take CPU time from the CPU
/// backend's inference that a live camera, delivering at its frame rate, does not) nor queues
/// stale frames (never more than one waits).
struct StillSource {
    frame: Vec<u8>,
    meta: crate::frame::FrameMeta,
    camera: usize,
    handed_over: u64,
    turns: std::sync::Arc<Turns>,
}

/// Per camera: frames delivered, for the sources that wait for their turn, and how long the
/// source took to copy each frame not yet delivered. The pipeline's `source` stage cannot tell
/// that copy from the wait for the turn, which also happens inside the source; a camera's frames
/// are delivered in the order they were copied, so the oldest copy is the delivered frame's.
struct Turns {
    cameras: std::sync::Mutex<Vec<Turn>>,
    changed: std::sync::Condvar,
}

#[derive(Clone, Default)]
struct Turn {
    delivered: u64,
    /// At most two: the frame in the works and the one ready.
    copies: std::collections::VecDeque<Duration>,
}

impl Turns {
    fn new(cameras: usize) -> Turns {
        Turns { cameras: std::sync::Mutex::new(vec![Turn::default(); cameras]), changed: std::sync::Condvar::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Turn>> {
        lock(&self.cameras)
    }

    /// Counts a delivered frame of `camera` and returns its copy time.
    fn delivered(&self, camera: usize) -> Duration {
        let copy = self.lock().get_mut(camera).map_or(Duration::ZERO, |turn| {
            turn.delivered += 1;
            turn.copies.pop_front().unwrap_or_default()
        });
        self.changed.notify_all();
        copy
    }

    fn copied(&self, camera: usize, took: Duration) {
        if let Some(turn) = self.lock().get_mut(camera) {
            turn.copies.push_back(took);
        }
    }

    /// Waits until `camera` has `count` frames delivered, or `timeout` passes; true if it has.
    fn wait_for(&self, camera: usize, count: u64, timeout: Duration) -> bool {
        let cameras = wait_timeout_while(&self.changed, self.lock(), timeout, |cameras| {
            cameras.get(camera).is_some_and(|t| t.delivered < count)
        });
        cameras.get(camera).is_none_or(|t| t.delivered >= count)
    }
}

impl crate::source::FrameSource for StillSource {
    /// The still image is copied into the slot, as a camera's buffer would be.
    fn capture_mode(&self) -> crate::frame::CaptureMode {
        crate::frame::CaptureMode::Copy
    }

    fn describe(&self) -> String {
        format!("still image {}x{}", self.meta.width, self.meta.height)
    }

    fn keeps_every_frame(&self) -> bool {
        true
    }

    fn next_frame(&mut self, slot: &mut FrameSlot) -> Result<crate::source::Capture, crate::source::SourceError> {
        // One frame in the works and one ready: frame n + 1 waits for frame n − 1's delivery.
        // Bounded, so that the pipeline sees its stop flag when the worker has gone.
        let delivered = self.handed_over.saturating_sub(1);
        if !self.turns.wait_for(self.camera, delivered, Duration::from_millis(200)) {
            return Ok(crate::source::Capture::Retry);
        }
        let copy_started = Instant::now();
        let target = slot
            .prepare(self.meta.width, self.meta.height, self.meta.format)
            .map_err(|message| crate::source::SourceError::Read { source_name: self.describe(), message })?;
        target.copy_from_slice(&self.frame);
        slot.note_copy();
        self.turns.copied(self.camera, copy_started.elapsed());
        slot.meta_mut().captured_at = SystemTime::now();
        self.handed_over += 1;
        Ok(crate::source::Capture::Frame)
    }
}

/// What the benchmark's sink keeps of every frame.
struct Delivered {
    camera: usize,
    at: Instant,
    latency: Duration,
    outside_inference: Duration,
    preprocess: Duration,
    inference: Duration,
    /// The frame's stages on the worker: preprocessing, inference, decoding and the message.
    on_worker: Duration,
}

/// Counts frames per camera and encodes the message the daemon would publish.
struct BenchSink {
    cameras: Vec<String>,
    labels: std::sync::Arc<Labels>,
    delivered: std::sync::Mutex<Vec<Delivered>>,
    turns: std::sync::Arc<Turns>,
}

impl step::FrameSink for BenchSink {
    fn frame(
        &self,
        camera: &str,
        slot: &FrameSlot,
        detections: &[Detection],
        timings: &FrameTimings,
        _: &mut crate::infer::per_track::PerTrackSessions,
    ) {
        let publish_started = Instant::now();
        let message = detections_message(camera, slot.meta(), &Latency::from(timings), detections, &self.labels);
        std::hint::black_box(message);
        let publish = publish_started.elapsed();
        let Some(index) = self.cameras.iter().position(|name| name == camera) else { return };
        let stage = |d: Option<Duration>| d.unwrap_or_default();
        let source = self.turns.delivered(index);
        let delivered = Delivered {
            camera: index,
            at: Instant::now(),
            latency: source + stage(timings.total) + publish,
            outside_inference: source + stage(timings.pre) + stage(timings.post) + publish,
            preprocess: stage(timings.pre),
            inference: stage(timings.infer),
            on_worker: stage(timings.pre) + stage(timings.infer) + stage(timings.post) + publish,
        };
        lock(&self.delivered).push(delivered);
    }

    fn camera_ended(&self, _: &str, _: &Result<(), step::PipelineError>) {}

    fn worker_failed(&self, worker: &str, error: &step::PipelineError) {
        log::error!("{worker}: {error}");
    }
}

/// Longest a multi-camera benchmark may run before it gives up.
const CAMERAS_BENCH_LIMIT: Duration = Duration::from_secs(600);

/// Runs the cameras of `models`, each showing `image`, through the scheduler on their lanes as
/// `plan` says (`score_threshold`: the controls' threshold), until every camera has delivered
/// `warmup + iterations` frames; measures from the moment every camera is past `warmup` until the
/// last has its `warmup + iterations` (every camera runs until then). Each source hands
/// over its next frame as soon as its previous one is delivered ([`StillSource`]): the numbers are
/// what the scheduler and the backend sustain with every camera always ready, and the latency is
/// that of a camera whose frame waits one turn of the round robin.
#[allow(clippy::too_many_arguments)]
pub fn bench_cameras(
    models: BenchModels,
    score_threshold: f32,
    plan: crate::infer::scheduler::SchedulePlan,
    image: &Path,
    limits: &LimitsConfig,
    warmup: usize,
    iterations: usize,
) -> Result<CamerasBench, BenchError> {
    use std::sync::Arc;

    let BenchModels { cameras: assigned, lanes, classifiers, labels } = models;
    let Some(backend) = lanes.first().map(|lane| std::sync::Arc::clone(&lane.backend)) else {
        return Err(BenchError::Setup("no model to run".into()));
    };
    if assigned.is_empty() {
        return Err(BenchError::Setup("no camera to run".into()));
    }
    let (cameras, iterations) = (assigned.len(), iterations.max(1));
    let threads_per_worker =
        backend.threads().map(|cores| CpuBudget::new(cores, plan.workers).shares().collect::<Vec<usize>>());
    let workers = plan.workers;
    let overlapping = (0..workers).any(|index| backend.overlaps_preprocessing(WorkerSeat { index, workers }));
    let mut decoded = FrameSlot::new(Box::new(crate::frame::HeapMemory::default()));
    image_decode::decode_file(image, limits, &mut decoded)
        .map_err(|e| BenchError::Setup(format!("{}: {e}", image.display())))?;
    let preprocess_alone = match threads_per_worker.as_deref() {
        Some(shares) => {
            let threads = if overlapping { 1 } else { shares.first().copied().unwrap_or(1) };
            Some(preprocess_alone(&decoded, backend.spec(), threads, warmup, iterations)?)
        }
        None => None,
    };
    let (names, camera_models): (Vec<String>, Vec<String>) = assigned.into_iter().unzip();
    let turns = Arc::new(Turns::new(cameras));
    let sink = Arc::new(BenchSink {
        cameras: names.clone(),
        labels,
        delivered: Default::default(),
        turns: Arc::clone(&turns),
    });
    let setup = CameraSetup {
        width: decoded.meta().width,
        height: decoded.meta().height,
        fps: 0.0,
        score_threshold,
        limits,
        motion: None,
    };
    let running = RunningCameras::start(
        lanes,
        classifiers,
        plan,
        sink.clone(),
        &names,
        |camera| {
            Box::new(StillSource {
                frame: decoded.data().to_vec(),
                meta: decoded.meta().clone(),
                camera,
                handed_over: 0,
                turns: Arc::clone(&turns),
            })
        },
        &setup,
    )?;
    let wanted = warmup + iterations;
    let deadline = Instant::now() + CAMERAS_BENCH_LIMIT;
    let mut outcome = Ok(());
    while outcome.is_ok() {
        let counts = frames_per_camera(&sink, cameras);
        if counts.iter().all(|n| *n >= wanted) {
            break;
        }
        if running.stopped() {
            outcome = Err(BenchError::Setup("the inference worker failed (see the log)".into()));
        } else if Instant::now() > deadline {
            outcome = Err(BenchError::Setup(format!(
                "gave up after {} s with {counts:?} frames per camera",
                CAMERAS_BENCH_LIMIT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let stopped = running.stop()?;
    outcome?;
    let report = stopped.report();
    let delivered = std::mem::take(&mut *lock(&sink.delivered));
    let summary = summarise_cameras(&delivered, &camera_models, warmup, iterations, report)?;
    Ok(CamerasBench { threads_per_worker, overlapping, preprocess_alone, ..summary })
}

fn frames_per_camera(sink: &BenchSink, cameras: usize) -> Vec<usize> {
    let mut counts = vec![0; cameras];
    for frame in lock(&sink.delivered).iter() {
        counts[frame.camera] += 1;
    }
    counts
}

/// The window from the moment every camera is past `warmup` frames to the moment the last has
/// `warmup + iterations`, and the frames delivered in it, in all, per camera and per model
/// (`camera_models`: each camera's). The last, not the first: cameras on different models run at
/// different rates, and the window must hold the slowest one's iterations too; every camera keeps
/// delivering until the last has its frames, so the window sees all of them running.
fn summarise_cameras(
    delivered: &[Delivered],
    camera_models: &[String],
    warmup: usize,
    iterations: usize,
    report: crate::infer::scheduler::ScheduleReport,
) -> Result<CamerasBench, BenchError> {
    let cameras = camera_models.len();
    let nth_of = |camera: usize, n: usize| delivered.iter().filter(|d| d.camera == camera).nth(n).map(|d| d.at);
    let start = (0..cameras).filter_map(|c| nth_of(c, warmup.saturating_sub(1))).max();
    let end = (0..cameras).filter_map(|c| nth_of(c, warmup + iterations - 1)).max();
    let (Some(start), Some(end)) = (start, end) else {
        return Err(BenchError::Setup("a camera delivered fewer frames than warm-up and iterations".into()));
    };
    let window: Vec<&Delivered> = delivered.iter().filter(|d| d.at > start && d.at <= end).collect();
    let seconds = end.saturating_duration_since(start).as_secs_f64();
    let rate = |frames: usize| if seconds > 0.0 { frames as f64 / seconds } else { 0.0 };
    let frames_per_model = count_per_model(window.iter().map(|d| d.camera), camera_models);
    let fps_per_model = frames_per_model.iter().map(|(model, frames)| (model.clone(), round1(rate(*frames)))).collect();
    Ok(CamerasBench {
        cameras,
        workers: report.workers,
        threads_per_worker: None,
        overlapping: false,
        max_batch: report.max_batch,
        warmup,
        iterations,
        seconds: (seconds * 1000.0).round() / 1000.0,
        fps_total: round1(rate(window.len())),
        fps_per_camera: (0..cameras).map(|c| round1(rate(window.iter().filter(|d| d.camera == c).count()))).collect(),
        camera_models: camera_models.to_vec(),
        frames_per_model,
        fps_per_model,
        latency: summarise(window.iter().map(|d| d.latency).collect()),
        outside_inference: summarise(window.iter().map(|d| d.outside_inference).collect()),
        preprocess: summarise(window.iter().map(|d| d.preprocess).collect()),
        preprocess_alone: None,
        inference: summarise(window.iter().map(|d| d.inference).collect()),
        between_frames: summarise(between_frames(&window)),
        batch_sizes: report.batch_sizes,
        memory: report.memory,
    })
}

/// For every frame of `window` after its camera's first there: the time since the camera's
/// previous delivery less the frame's own stages on the worker.
fn between_frames(window: &[&Delivered]) -> Vec<Duration> {
    let mut previous: BTreeMap<usize, Instant> = BTreeMap::new();
    let mut gaps = Vec::with_capacity(window.len());
    for frame in window {
        if let Some(before) = previous.insert(frame.camera, frame.at) {
            gaps.push(frame.at.saturating_duration_since(before).saturating_sub(frame.on_worker));
        }
    }
    gaps
}

/// Frames per model, given each frame's camera and each camera's model (every model listed, with
/// 0 where its cameras delivered none).
fn count_per_model(frames: impl Iterator<Item = usize>, camera_models: &[String]) -> BTreeMap<String, usize> {
    let mut counts: BTreeMap<String, usize> = camera_models.iter().map(|model| (model.clone(), 0)).collect();
    for camera in frames {
        if let Some(count) = camera_models.get(camera).and_then(|model| counts.get_mut(model)) {
            *count += 1;
        }
    }
    counts
}

fn round1(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn between_frames_is_each_cameras_interval_less_the_frames_own_stages() {
        let start = Instant::now();
        let frame = |camera: usize, at_ms: u64, on_worker_ms: u64| Delivered {
            camera,
            at: start + Duration::from_millis(at_ms),
            latency: Duration::ZERO,
            outside_inference: Duration::ZERO,
            preprocess: Duration::ZERO,
            inference: Duration::ZERO,
            on_worker: Duration::from_millis(on_worker_ms),
        };
        let frames = [frame(0, 10, 4), frame(1, 11, 4), frame(0, 15, 4), frame(1, 20, 4), frame(0, 18, 5)];
        let window: Vec<&Delivered> = frames.iter().collect();
        let ms = |ms| Duration::from_millis(ms);
        assert_eq!(between_frames(&window), [ms(1), ms(5), ms(0)], "camera 0: 5 − 4, camera 1: 9 − 4, 3 − 5 → 0");
    }

    #[test]
    fn frames_are_counted_for_the_model_of_their_camera() {
        let models = ["model", "models.yard", "model"].map(String::from);
        let counts = count_per_model([0, 1, 2, 2, 1, 0, 0].into_iter(), &models);
        assert_eq!(counts, BTreeMap::from([("model".to_string(), 5), ("models.yard".to_string(), 2)]));
        let none = count_per_model(std::iter::empty(), &models);
        assert_eq!(none.values().sum::<usize>(), 0, "every model is listed, with no frames");
        assert_eq!(none.len(), 2);
    }
}
