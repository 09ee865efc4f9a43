//! `jetson-detectd bench`: per-stage timings of the configured backend on one image.
//!
//! Owns: running an image through the same stages as a camera frame (decode into a slot,
//! preprocess, infer, decode/NMS, message encoding), many times, and summarising each stage
//! (median, p90, min); running N copies of it as N cameras through the real scheduler
//! ([`bench_cameras`]: throughput of all cameras together, per camera, batch sizes); and timing the
//! tracker on a synthetic scene of [`TRACKER_BENCH_OBJECTS`] moving objects; with `--gpu`, the GPU
//! path outside inference and the preprocessing kernel ([`run`] puts these together). Must not:
//! assert on time (the caller prints the numbers) or touch MQTT and real cameras.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use crate::backend::Backend;
use crate::config::{Config, LimitsConfig};
use crate::decode::{DecodeParams, Decoder};
use crate::detection::{BoundingBox, Detection, Labels};
use crate::frame::{FrameSlot, FrameTimings};
use crate::infer::scheduler::SchedulePlan;
use crate::infer::{camera, step};
use crate::publish::payload::{detections_message, Latency};
use crate::source::image_decode;
use crate::sys::lock::{lock, wait_timeout_while};
use crate::track::events::{Line, Scene, WatchParams, Zone};
use crate::track::lines::Segment;
use crate::track::scene_tracker::{SceneTracker, TrackingParams};
use crate::track::tracker::TrackerParams;
use crate::track::zones::Polygon;

/// Objects (one detection each) per frame of the tracker benchmark.
pub const TRACKER_BENCH_OBJECTS: usize = 50;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Setup(String),
    #[error("iteration {iteration}: {message}")]
    Frame { iteration: usize, message: String },
}

/// Milliseconds of one stage over the measured iterations.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct StageSummary {
    pub median_ms: f64,
    pub p90_ms: f64,
    pub min_ms: f64,
}

/// The backend the numbers are for.
#[derive(Debug, Serialize)]
pub struct BenchBackend {
    #[serde(flatten)]
    pub info: crate::backend::BackendInfo,
    /// The engine that ran the model, with its version (CPU backend: `rten 0.27`,
    /// `ONNX Runtime 1.22.0`); absent where the backend has no choice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Threads one inference ran on (CPU backend); absent where the backend does not choose it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
}

#[derive(Debug, Serialize)]
pub struct BenchReport {
    pub backend: BenchBackend,
    pub image: String,
    pub width: u32,
    pub height: u32,
    pub warmup: usize,
    pub iterations: usize,
    pub detections: usize,
    /// Image file → frame slot (decode), standing in for a camera's capture.
    pub source: StageSummary,
    pub preprocess: StageSummary,
    pub infer: StageSummary,
    /// Decoding the outputs, NMS and class filter.
    pub postprocess: StageSummary,
    /// Encoding the detections message.
    pub publish: StageSummary,
    /// All stages of one frame.
    pub total: StageSummary,
    /// 1000 / median total: frames per second one camera reaches on this backend.
    pub fps: f64,
    /// The tracker's cost per frame (part of `publish` in a camera's telemetry).
    pub tracking: TrackerBench,
    /// With `--cameras N`: frames per second of the N cameras together through the scheduler
    /// (`cameras.fps_total`), here for a quick look.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fps_total: Option<f64>,
    /// With `--cameras N`: the N-camera run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cameras: Option<CamerasBench>,
}

/// Microseconds per frame of tracking (tracker, event rules, zone counts; no message encoding)
/// on a synthetic 1920×1080 scene at 30 fps.
#[derive(Debug, Clone, Serialize)]
pub struct TrackerBench {
    /// Detections per frame.
    pub detections: usize,
    pub zones: usize,
    pub lines: usize,
    /// Frames measured (after as many again for warm-up).
    pub frames: usize,
    /// Confirmed tracks at the end: one per object when association works.
    pub tracks: usize,
    pub median_us: f64,
    pub p90_us: f64,
    pub min_us: f64,
}

/// Runs `image` (decoded within `limits`) through `backend` `warmup + iterations` times and
/// summarises the last `iterations`.
pub fn bench_backend(
    backend: &dyn Backend,
    params: DecodeParams,
    labels: &Labels,
    image: &Path,
    limits: &LimitsConfig,
    warmup: usize,
    iterations: usize,
) -> Result<BenchReport, BenchError> {
    let iterations = iterations.max(1);
    let mut session = backend.new_session().map_err(|e| BenchError::Setup(e.to_string()))?;
    let mut decoder = Decoder::new(params);
    let spec = backend.spec().clone();
    let mut slot = backend.slot_memory().map(FrameSlot::new).map_err(|e| BenchError::Setup(e.to_string()))?;
    let mut detections = Vec::new();
    let mut samples: Vec<FrameTimings> = Vec::with_capacity(iterations);
    for iteration in 0..warmup + iterations {
        // Source → slot: decoding the file stands in for a camera's capture and conversion.
        let source_started = Instant::now();
        image_decode::decode_file(image, limits, &mut slot)
            .map_err(|e| BenchError::Setup(format!("{}: {e}", image.display())))?;
        let source = source_started.elapsed();
        let mut timings = step::process(&mut *session, &mut decoder, &spec, &slot, &mut detections)
            .map_err(|e| BenchError::Frame { iteration, message: e.to_string() })?;
        encode_message(&mut timings, source, &slot, &detections, labels);
        if iteration >= warmup {
            samples.push(timings);
        }
    }
    let stage = |pick: fn(&FrameTimings) -> Option<Duration>| summarise(samples.iter().filter_map(pick).collect());
    let total = stage(|t| Some(t.source? + t.total? + t.publish?));
    Ok(BenchReport {
        backend: BenchBackend { info: backend.info(), engine: backend.engine(), threads: backend.threads() },
        image: image.display().to_string(),
        width: slot.meta().width,
        height: slot.meta().height,
        warmup,
        iterations,
        detections: detections.len(),
        source: stage(|t| t.source),
        preprocess: stage(|t| t.pre),
        infer: stage(|t| t.infer),
        postprocess: stage(|t| t.post),
        publish: stage(|t| t.publish),
        fps: if total.median_ms > 0.0 { 1000.0 / total.median_ms } else { 0.0 },
        total,
        tracking: bench_tracker(iterations.max(300)),
        fps_total: None,
        cameras: None,
    })
}

/// The publish stage: encodes the message the daemon would hand to the MQTT queue, and records
/// that and the frame's `source` time in `timings`.
fn encode_message(
    timings: &mut FrameTimings,
    source: Duration,
    slot: &FrameSlot,
    detections: &[Detection],
    labels: &Labels,
) {
    let publish_started = Instant::now();
    let message = detections_message("bench", slot.meta(), &Latency::from(&*timings), detections, labels);
    std::hint::black_box(message);
    timings.source = Some(source);
    timings.publish = Some(publish_started.elapsed());
}

/// N cameras showing the same image, through the scheduler.
#[derive(Debug, Serialize)]
pub struct CamerasBench {
    pub cameras: usize,
    pub workers: usize,
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
    /// Capture to message (source copy + preprocess + inference + decode + encoding), per frame.
    pub latency: StageSummary,
    /// Per frame outside inference: source → slot copy, preprocessing (a batch's, for a frame in a
    /// batch), decoding and message encoding.
    pub outside_inference: StageSummary,
    /// Inferences by batch size, over the whole run.
    pub batch_sizes: std::collections::BTreeMap<usize, u64>,
    pub memory: crate::backend::MemoryReport,
}

/// A camera that shows one decoded image forever: each frame is a copy of it into the slot, the
/// cost of a camera handing over a frame (no file decoding, which would swamp the numbers). It
/// hands over its next frame as soon as its previous one has been delivered: so every camera
/// always has a frame ready for the worker, as a camera faster than the worker has, but neither
/// spins on copies (an uncapped source would take CPU time from the CPU backend's inference that a
/// live camera, delivering at its frame rate, does not) nor queues stale frames.
struct StillSource {
    frame: Vec<u8>,
    meta: crate::frame::FrameMeta,
    camera: usize,
    handed_over: u64,
    turns: std::sync::Arc<Turns>,
}

/// Per camera: frames delivered, for the sources that wait for their turn, and how long the
/// source took to copy its last frame. The pipeline's `source` stage cannot tell that copy from the
/// wait for the turn, which also happens inside the source; one frame per camera is in the works
/// at a time, so the last copy is the delivered frame's.
struct Turns {
    cameras: std::sync::Mutex<Vec<Turn>>,
    changed: std::sync::Condvar,
}

#[derive(Clone, Copy, Default)]
struct Turn {
    delivered: u64,
    copy: Duration,
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
            turn.copy
        });
        self.changed.notify_all();
        copy
    }

    fn copied(&self, camera: usize, took: Duration) {
        if let Some(turn) = self.lock().get_mut(camera) {
            turn.copy = took;
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
        // Bounded, so that the pipeline sees its stop flag when the worker has gone.
        if !self.turns.wait_for(self.camera, self.handed_over, Duration::from_millis(200)) {
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
}

/// Counts frames per camera and encodes the message the daemon would publish.
struct BenchSink {
    cameras: Vec<String>,
    labels: std::sync::Arc<Labels>,
    delivered: std::sync::Mutex<Vec<Delivered>>,
    turns: std::sync::Arc<Turns>,
}

impl step::FrameSink for BenchSink {
    fn frame(&self, camera: &str, slot: &FrameSlot, detections: &[Detection], timings: &FrameTimings) {
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

/// Runs `cameras` cameras, each showing `image`, through the scheduler on `backend` as `plan`
/// says, until every camera has delivered `warmup + iterations` frames; measures from the moment
/// every camera is past `warmup` until the first has its `warmup + iterations`. Each source hands
/// over its next frame as soon as its previous one is delivered ([`StillSource`]): the numbers are
/// what the scheduler and the backend sustain with every camera always ready, and the latency is
/// that of a camera whose frame waits one turn of the round robin.
#[allow(clippy::too_many_arguments)]
pub fn bench_cameras(
    backend: std::sync::Arc<dyn Backend>,
    plan: crate::infer::scheduler::SchedulePlan,
    params: DecodeParams,
    labels: std::sync::Arc<Labels>,
    image: &Path,
    limits: &LimitsConfig,
    cameras: usize,
    warmup: usize,
    iterations: usize,
) -> Result<CamerasBench, BenchError> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let (cameras, iterations) = (cameras.max(1), iterations.max(1));
    let mut decoded = FrameSlot::new(Box::new(crate::frame::HeapMemory::default()));
    image_decode::decode_file(image, limits, &mut decoded)
        .map_err(|e| BenchError::Setup(format!("{}: {e}", image.display())))?;
    let names: Vec<String> = (0..cameras).map(|i| format!("bench{i}")).collect();
    let turns = Arc::new(Turns::new(cameras));
    let sink = Arc::new(BenchSink {
        cameras: names.clone(),
        labels,
        delivered: Default::default(),
        turns: Arc::clone(&turns),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let liveness = crate::service::notify::Liveness::new();
    let setup = |e: step::PipelineError| BenchError::Setup(e.to_string());
    let scheduler =
        crate::infer::scheduler::Scheduler::start(backend, params, plan, sink.clone(), stop.clone(), &liveness)
            .map_err(setup)?;
    let shared = camera::PipelineShared {
        slots: 3,
        limits: *limits,
        scheduler: Arc::clone(&scheduler),
        sink: sink.clone(),
        stop: Arc::clone(&stop),
        liveness,
    };
    let mut running = Vec::new();
    let mut started = Ok(());
    for (index, name) in names.iter().enumerate() {
        let camera = crate::config::CameraConfig {
            name: name.clone(),
            source: crate::config::SourceConfig::Synthetic {
                width: decoded.meta().width,
                height: decoded.meta().height,
            },
            fps: 0.0,
            zones: Vec::new(),
            lines: Vec::new(),
        };
        let source = StillSource {
            frame: decoded.data().to_vec(),
            meta: decoded.meta().clone(),
            camera: index,
            handed_over: 0,
            turns: Arc::clone(&turns),
        };
        match camera::CameraPipeline::start_with_source(&camera, Box::new(source), &shared) {
            Ok(camera) => running.push(camera),
            Err(e) => {
                started = Err(setup(e));
                break;
            }
        }
    }
    let wanted = warmup + iterations;
    let deadline = Instant::now() + CAMERAS_BENCH_LIMIT;
    let mut outcome = started;
    while outcome.is_ok() {
        let counts = frames_per_camera(&sink, cameras);
        if counts.iter().all(|n| *n >= wanted) {
            break;
        }
        if stop.load(Ordering::SeqCst) {
            outcome = Err(BenchError::Setup("the inference worker failed (see the log)".into()));
        } else if Instant::now() > deadline {
            outcome = Err(BenchError::Setup(format!(
                "gave up after {} s with {counts:?} frames per camera",
                CAMERAS_BENCH_LIMIT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::SeqCst);
    for camera in running {
        camera.join().map_err(setup)?;
    }
    scheduler.join().map_err(setup)?;
    outcome?;
    let report = scheduler.report();
    let delivered = std::mem::take(&mut *lock(&sink.delivered));
    summarise_cameras(&delivered, cameras, warmup, iterations, report)
}

fn frames_per_camera(sink: &BenchSink, cameras: usize) -> Vec<usize> {
    let mut counts = vec![0; cameras];
    for frame in lock(&sink.delivered).iter() {
        counts[frame.camera] += 1;
    }
    counts
}

/// The window from the moment every camera is past `warmup` frames to the moment the first has
/// `warmup + iterations`, and the frames delivered in it.
fn summarise_cameras(
    delivered: &[Delivered],
    cameras: usize,
    warmup: usize,
    iterations: usize,
    report: crate::infer::scheduler::ScheduleReport,
) -> Result<CamerasBench, BenchError> {
    let nth_of = |camera: usize, n: usize| delivered.iter().filter(|d| d.camera == camera).nth(n).map(|d| d.at);
    let start = (0..cameras).filter_map(|c| nth_of(c, warmup.saturating_sub(1))).max();
    let end = (0..cameras).filter_map(|c| nth_of(c, warmup + iterations - 1)).min();
    let (Some(start), Some(end)) = (start, end) else {
        return Err(BenchError::Setup("a camera delivered fewer frames than warm-up and iterations".into()));
    };
    let window: Vec<&Delivered> = delivered.iter().filter(|d| d.at > start && d.at <= end).collect();
    let seconds = end.saturating_duration_since(start).as_secs_f64();
    let rate = |frames: usize| if seconds > 0.0 { frames as f64 / seconds } else { 0.0 };
    Ok(CamerasBench {
        cameras,
        workers: report.workers,
        max_batch: report.max_batch,
        warmup,
        iterations,
        seconds: (seconds * 1000.0).round() / 1000.0,
        fps_total: (rate(window.len()) * 10.0).round() / 10.0,
        fps_per_camera: (0..cameras)
            .map(|c| (rate(window.iter().filter(|d| d.camera == c).count()) * 10.0).round() / 10.0)
            .collect(),
        latency: summarise(window.iter().map(|d| d.latency).collect()),
        outside_inference: summarise(window.iter().map(|d| d.outside_inference).collect()),
        batch_sizes: report.batch_sizes,
        memory: report.memory,
    })
}

/// Tracks [`TRACKER_BENCH_OBJECTS`] objects wandering over a 1920×1080 frame (with detector-like
/// jitter and a label flip now and then) through 4 zones and 4 lines, `frames` frames at 30 fps
/// after as many for warm-up, timing each frame.
pub fn bench_tracker(frames: usize) -> TrackerBench {
    const WIDTH: f32 = 1920.0;
    const HEIGHT: f32 = 1080.0;
    let params = TrackingParams {
        tracker: TrackerParams { max_lost_s: 1.0, min_hits: 3, high_score: 0.5, match_iou: 0.2, max_tracks: 64 },
        watch: WatchParams { stationary_px: 10.0, stationary_s: 10.0 },
    };
    let mut tracking = SceneTracker::new(params, bench_scene());
    let mut noise = 0x2545_f491_4f6c_dd1du64;
    let mut jitter = move || {
        noise ^= noise << 13;
        noise ^= noise >> 7;
        noise ^= noise << 17;
        (noise % 1000) as f32 / 1000.0 - 0.5
    };
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut detections = Vec::with_capacity(TRACKER_BENCH_OBJECTS);
    let mut samples = Vec::with_capacity(frames);
    for frame in 0..2 * frames {
        let t = frame as f32 / 30.0;
        detections.clear();
        for i in 0..TRACKER_BENCH_OBJECTS {
            let phase = i as f32 * 0.7;
            let (column, row) = ((i % 10) as f32, (i / 10) as f32);
            let x = 60.0 + column * 185.0 + 50.0 * (0.5 * t + phase).sin() + 3.0 * jitter();
            let y = 60.0 + row * 200.0 + 20.0 * (0.3 * t + phase).cos() + 3.0 * jitter();
            let class_id = if frame % 17 == i % 17 { 16 } else { i % 3 };
            let bbox = BoundingBox { x1: x, y1: y, x2: (x + 80.0).min(WIDTH), y2: (y + 150.0).min(HEIGHT) };
            detections.push(Detection { class_id, score: 0.6 + 0.3 * (jitter() + 0.5), bbox });
        }
        let captured_at = start + Duration::from_secs_f32(t);
        let began = Instant::now();
        tracking.update(&detections, WIDTH as u32, HEIGHT as u32, captured_at);
        let took = began.elapsed();
        if frame >= frames {
            samples.push(took);
        }
        std::hint::black_box(tracking.events());
    }
    let tracks = tracking.track_ids().iter().flatten().collect::<std::collections::BTreeSet<_>>().len();
    samples.sort();
    let us = |d: Duration| (d.as_secs_f64() * 1e7).round() / 10.0;
    let at = |fraction: f64| samples.get(((samples.len().max(1) - 1) as f64 * fraction).round() as usize).copied();
    let scene = tracking.scene();
    TrackerBench {
        detections: TRACKER_BENCH_OBJECTS,
        zones: scene.zones.len(),
        lines: scene.lines.len(),
        frames,
        tracks,
        median_us: at(0.5).map_or(0.0, us),
        p90_us: at(0.9).map_or(0.0, us),
        min_us: samples.first().copied().map_or(0.0, us),
    }
}

/// Four zones (one per quadrant, six points each) and four lines across the frame.
fn bench_scene() -> Scene {
    let zones = [(0.0, 0.0), (0.5, 0.0), (0.0, 0.5), (0.5, 0.5)]
        .iter()
        .enumerate()
        .map(|(i, &(left, top))| {
            let points = [
                [left + 0.05, top + 0.05],
                [left + 0.25, top + 0.02],
                [left + 0.45, top + 0.05],
                [left + 0.45, top + 0.45],
                [left + 0.25, top + 0.48],
                [left + 0.05, top + 0.45],
            ];
            Zone {
                name: format!("zone{i}"),
                polygon: Polygon::new(&points).expect("a valid bench zone"),
                classes: vec![],
            }
        })
        .collect();
    let lines =
        [([0.5, 1.0], [0.5, 0.0]), ([0.0, 0.5], [1.0, 0.5]), ([0.2, 0.0], [0.3, 1.0]), ([0.0, 0.8], [1.0, 0.7])]
            .iter()
            .enumerate()
            .map(|(i, &(from, to))| Line {
                name: format!("line{i}"),
                segment: Segment::new([from, to]).expect("a valid bench line"),
            })
            .collect();
    Scene { zones, lines }
}

/// How the GPU path bench's frame reaches its slot.
#[cfg(feature = "cuda")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuPathCapture {
    /// Copied into the slot: a V4L2 MMAP capture, a GStreamer upstream that refuses the pool.
    Copy,
    /// Written into page-locked slot memory before it reaches the source, and lent to the slot:
    /// the GStreamer slot pool, V4L2 user pointers.
    Lent,
}

/// The per-frame work outside inference on the GPU path, for a 1920×1080 YUYV camera (a common
/// V4L2 mode) and the configured model input: what the daemon spends on a frame besides the
/// model itself.
#[cfg(feature = "cuda")]
#[derive(Debug, Serialize)]
pub struct GpuPathBench {
    pub capture: GpuPathCapture,
    /// The camera frame and the model input it is preprocessed into.
    pub frame: String,
    pub input: String,
    /// Slot memory of this GPU: `mapped` (integrated: the kernel reads the slot in place) or
    /// `pinned` (discrete: the slot is copied to the device first).
    pub slot: &'static str,
    pub iterations: usize,
    /// The source putting the frame into its slot: the one copy, or lending it.
    pub source: StageSummary,
    /// Slot → the input tensor's row on the GPU, until the stream is synchronised.
    pub preprocess: StageSummary,
    /// Decoding the model's outputs for the image (run once on the configured backend), NMS and
    /// class filter, with boxes scaled to the 1080p frame.
    pub postprocess: StageSummary,
    /// Encoding the detections message.
    pub publish: StageSummary,
    /// All of the above for one frame.
    pub total: StageSummary,
}

/// Times [`GpuPathBench`]: the model outputs come from one run of `backend` on `image`; the frame
/// is a fixed pseudo-random YUYV pattern (timings on constant data can flatter).
#[cfg(feature = "cuda")]
#[allow(clippy::too_many_arguments)]
pub fn bench_gpu_path(
    capture: GpuPathCapture,
    device: &crate::gpu::GpuDevice,
    backend: &dyn Backend,
    params: DecodeParams,
    labels: &Labels,
    image: &Path,
    limits: &LimitsConfig,
    cache_dir: Option<&Path>,
    warmup: usize,
    iterations: usize,
) -> Result<GpuPathBench, BenchError> {
    use crate::frame::{FrameRing, HeapMemory, PixelFormat};
    use crate::gpu::{slot_memory, GpuPreprocessor};

    const WIDTH: u32 = 1920;
    const HEIGHT: u32 = 1080;
    let setup = |what: &str, e: &dyn std::fmt::Display| BenchError::Setup(format!("{what}: {e}"));
    let iterations = iterations.max(1);
    let spec = backend.spec().clone();

    let mut decoded = FrameSlot::new(Box::new(HeapMemory::default()));
    image_decode::decode_file(image, limits, &mut decoded).map_err(|e| setup("decoding the image", &e))?;
    let mut session = backend.new_session().map_err(|e| setup("creating a session", &e))?;
    let outputs = session.run(&decoded).map_err(|e| setup("running the model", &e))?.0.clone();
    drop(session);

    let frame_bytes = PixelFormat::Yuyv.frame_bytes(WIDTH, HEIGHT).unwrap_or(0);
    let frame: Vec<u8> = (0..frame_bytes).map(|i| ((i as u32).wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    device.bind_to_thread().map_err(|e| setup("binding the GPU", &e))?;
    let new_slot = || slot_memory(device).map(FrameSlot::new).map_err(|e| setup("allocating a frame slot", &e));
    let ring = FrameRing::new(vec![new_slot()?, new_slot()?]);
    // The memory upstream wrote the frame into (lent mode): it goes back and forth like a pool buffer.
    let (memory_back, returned_memory) = std::sync::mpsc::channel::<Box<dyn crate::frame::SlotMemory>>();
    let mut written = slot_memory(device).map_err(|e| setup("allocating a frame slot", &e))?;
    written.reserve(frame_bytes).map_err(|e| setup("allocating a frame slot", &e))?;
    written.as_mut_slice()[..frame_bytes].copy_from_slice(&frame);
    memory_back.send(written).map_err(|e| setup("lending the frame", &e))?;
    let stream = device.new_stream().map_err(|e| setup("creating a stream", &e))?;
    let mut preprocessor = GpuPreprocessor::new(device, stream.clone(), &spec, cache_dir, frame_bytes)
        .map_err(|e| setup("preparing the preprocessing kernel", &e))?;
    let mut input = stream.alloc_zeros::<u8>(spec.bytes()).map_err(|e| setup("allocating the input tensor", &e))?;
    let mut decoder = Decoder::new(params);
    let mut detections = Vec::new();
    let mut samples: Vec<FrameTimings> = Vec::with_capacity(iterations);
    for iteration in 0..warmup + iterations {
        let frame_error = |e: &dyn std::fmt::Display| BenchError::Frame { iteration, message: e.to_string() };
        let mut slot = ring.acquire_for_write().ok_or_else(|| frame_error(&"no free slot"))?;
        let source_started = Instant::now();
        match capture {
            GpuPathCapture::Copy => {
                slot.prepare(WIDTH, HEIGHT, PixelFormat::Yuyv).map_err(|e| frame_error(&e))?.copy_from_slice(&frame)
            }
            GpuPathCapture::Lent => {
                let memory = returned_memory.recv().map_err(|e| frame_error(&e))?;
                let loan = Box::new(BenchLoan { memory, back: memory_back.clone() });
                slot.lend(WIDTH, HEIGHT, PixelFormat::Yuyv, loan).map_err(|e| frame_error(&e))?;
            }
        }
        let source = source_started.elapsed();
        let pre_started = Instant::now();
        preprocessor.enqueue_row(&slot, &mut input, 0).map_err(|e| frame_error(&e))?;
        stream.synchronize().map_err(|e| frame_error(&e))?;
        let pre = pre_started.elapsed();
        let mut timings = step::decode_frame(
            &mut decoder,
            &spec,
            &slot,
            &outputs,
            crate::backend::BackendTimings { preprocess: pre, infer: Duration::ZERO },
            &mut detections,
        )
        .map_err(|e| frame_error(&e))?;
        encode_message(&mut timings, source, &slot, &detections, labels);
        ring.release(slot);
        if iteration >= warmup {
            samples.push(timings);
        }
    }
    let stage = |pick: fn(&FrameTimings) -> Option<Duration>| summarise(samples.iter().filter_map(pick).collect());
    Ok(GpuPathBench {
        capture,
        frame: format!("{WIDTH}x{HEIGHT} YUYV"),
        input: format!("{}x{} {:?} {:?} {:?}", spec.width, spec.height, spec.layout, spec.dtype, spec.filter),
        slot: if device.zero_copy() { "mapped" } else { "pinned" },
        iterations,
        source: stage(|t| t.source),
        preprocess: stage(|t| t.pre),
        postprocess: stage(|t| t.post),
        publish: stage(|t| t.publish),
        total: stage(|t| Some(t.source? + t.pre? + t.post? + t.publish?)),
    })
}

/// The bench's lent frame: page-locked memory holding the frame, sent back when the slot is done
/// with it, as a pool buffer goes back to its pool.
#[cfg(feature = "cuda")]
struct BenchLoan {
    memory: Box<dyn crate::frame::SlotMemory>,
    back: std::sync::mpsc::Sender<Box<dyn crate::frame::SlotMemory>>,
}

#[cfg(feature = "cuda")]
impl crate::frame::LentFrame for BenchLoan {
    fn bytes(&self) -> &[u8] {
        self.memory.as_slice()
    }

    fn memory(&self) -> &dyn crate::frame::SlotMemory {
        self.memory.as_ref()
    }
}

#[cfg(feature = "cuda")]
impl Drop for BenchLoan {
    fn drop(&mut self) {
        let memory = std::mem::replace(&mut self.memory, Box::new(crate::frame::HeapMemory::default()));
        // The bench's receiver outlives every loan; a send can only fail after it returned.
        let _ = self.back.send(memory);
    }
}

fn summarise(mut durations: Vec<Duration>) -> StageSummary {
    if durations.is_empty() {
        return StageSummary { median_ms: 0.0, p90_ms: 0.0, min_ms: 0.0 };
    }
    durations.sort();
    let ms = |d: Duration| (d.as_secs_f64() * 1e5).round() / 100.0;
    let at = |fraction: f64| durations[((durations.len() - 1) as f64 * fraction).round() as usize];
    StageSummary { median_ms: ms(at(0.5)), p90_ms: ms(at(0.9)), min_ms: ms(durations[0]) }
}

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
}

/// The `bench` command: the one-frame pipeline, then what `request` adds (N cameras through the
/// scheduler, the GPU path), on `backend` loaded from `config`.
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
    let mut pipeline =
        bench_backend(backend.as_ref(), params.clone(), &labels, &image, &config.limits, warmup, iterations)?;
    if let Some(cameras) = request.cameras {
        let plan = SchedulePlan::new(config, backend.as_ref(), cameras);
        let run = bench_cameras(
            Arc::clone(&backend),
            plan,
            params.clone(),
            Arc::clone(&labels),
            &image,
            &config.limits,
            cameras,
            warmup,
            iterations,
        )?;
        pipeline.fps_total = Some(run.fps_total);
        pipeline.cameras = Some(run);
    }
    let (gpu_preprocess, gpu_path) = if request.gpu {
        let path = gpu_path_bench(config, backend.as_ref(), params, &labels, &image, warmup, iterations)?;
        (Some(gpu_preprocess_bench(config)?), Some(path))
    } else {
        (None, None)
    };
    Ok(BenchOutput { pipeline, gpu_path, gpu_preprocess })
}

/// What `bench` prints: stage order as in the pipeline, not alphabetical.
#[derive(Serialize)]
pub struct BenchOutput {
    pipeline: BenchReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu_path: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu_preprocess: Option<serde_json::Value>,
}

#[cfg(feature = "cuda")]
fn gpu_path_bench(
    config: &Config,
    backend: &dyn Backend,
    params: DecodeParams,
    labels: &Labels,
    image: &Path,
    warmup: usize,
    iterations: usize,
) -> Result<serde_json::Value, BenchError> {
    let device = crate::gpu::GpuDevice::open(config.device.gpu as usize)
        .map_err(|e| BenchError::Setup(format!("opening the GPU: {e}")))?;
    let cache_dir = Some(config.engine.cache_dir.as_path());
    let mut reports = serde_json::Map::new();
    for capture in [GpuPathCapture::Copy, GpuPathCapture::Lent] {
        let report = bench_gpu_path(
            capture,
            &device,
            backend,
            params.clone(),
            labels,
            image,
            &config.limits,
            cache_dir,
            warmup,
            iterations,
        )?;
        let key =
            serde_json::to_value(capture).ok().and_then(|key| key.as_str().map(str::to_owned)).unwrap_or_default();
        reports.insert(key, serde_json::to_value(report).unwrap_or_default());
    }
    Ok(serde_json::Value::Object(reports))
}

#[cfg(not(feature = "cuda"))]
fn gpu_path_bench(
    _config: &Config,
    _backend: &dyn Backend,
    _params: DecodeParams,
    _labels: &Labels,
    _image: &Path,
    _warmup: usize,
    _iterations: usize,
) -> Result<serde_json::Value, BenchError> {
    Err(BenchError::Setup("--gpu: this binary was built without the `cuda` feature".into()))
}

#[cfg(feature = "cuda")]
fn gpu_preprocess_bench(config: &Config) -> Result<serde_json::Value, BenchError> {
    use crate::config::ResizeFilter;
    use crate::gpu::{self, GpuDevice, PreprocessBenchRequest};
    let mut request = PreprocessBenchRequest::yuyv_1080p_to_640_nchw_f16_letterbox();
    request.cache_dir = Some(config.engine.cache_dir.clone());
    let device =
        GpuDevice::open(config.device.gpu as usize).map_err(|e| BenchError::Setup(format!("opening the GPU: {e}")))?;
    let mut reports = serde_json::Map::new();
    for (name, filter) in [("antialias", ResizeFilter::Antialias), ("bilinear", ResizeFilter::Bilinear)] {
        request.spec.filter = filter;
        let report = gpu::bench_preprocess(&device, &request)
            .map_err(|e| BenchError::Setup(format!("GPU preprocessing benchmark: {e}")))?;
        reports.insert(name.to_owned(), serde_json::to_value(report).unwrap_or_default());
    }
    Ok(serde_json::Value::Object(reports))
}

#[cfg(not(feature = "cuda"))]
fn gpu_preprocess_bench(_config: &Config) -> Result<serde_json::Value, BenchError> {
    Err(BenchError::Setup("--gpu: this binary was built without the `cuda` feature".into()))
}

/// The first image file of the first `images` camera (a file, or the first image of a directory).
fn first_configured_image(config: &Config) -> Option<PathBuf> {
    use crate::config::SourceConfig;
    config.cameras.iter().find_map(|camera| match &camera.source {
        SourceConfig::Images { path, .. } if path.is_file() => Some(path.clone()),
        SourceConfig::Images { path, .. } => {
            let mut files: Vec<PathBuf> = std::fs::read_dir(path)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracker_bench_tracks_every_object() {
        let report = bench_tracker(30);
        assert_eq!((report.detections, report.zones, report.lines, report.frames), (50, 4, 4, 30));
        assert_eq!(report.tracks, TRACKER_BENCH_OBJECTS, "one confirmed track per object");
        assert!(report.min_us <= report.median_us && report.median_us <= report.p90_us);
    }

    #[test]
    fn summary_picks_median_p90_and_min() {
        let durations = (1..=10).map(Duration::from_millis).collect();
        let summary = summarise(durations);
        assert_eq!(summary, StageSummary { median_ms: 6.0, p90_ms: 9.0, min_ms: 1.0 });
        assert_eq!(summarise(Vec::new()).median_ms, 0.0);
    }
}
