//! `jetson-detectd bench`: per-stage timings of the configured backend on one image.
//!
//! Owns: running an image through the same stages as a camera frame (decode into a slot,
//! preprocess, infer, decode/NMS, message encoding), many times, and summarising each stage
//! (median, p90, min); and timing the tracker on a synthetic scene of [`TRACKER_BENCH_OBJECTS`]
//! moving objects. Must not: assert on time (the caller prints the numbers) or touch MQTT and
//! cameras.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use crate::backend::Backend;
use crate::config::LimitsConfig;
use crate::decode::{DecodeParams, Decoder};
use crate::detection::{BoundingBox, Detection, Labels};
use crate::frame::FrameSlot;
use crate::payload::{detections_message, Latency};
use crate::pipeline;
use crate::source::image_decode;
use crate::telemetry::FrameTimings;
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

/// Slot size for the benchmark image on backends with fixed-size slots (room for 4K RGBA).
const MAX_IMAGE_BYTES: usize = 3840 * 2160 * 4;

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
    let mut slot =
        backend.slot_memory(MAX_IMAGE_BYTES).map(FrameSlot::new).map_err(|e| BenchError::Setup(e.to_string()))?;
    let mut detections = Vec::new();
    let mut samples: Vec<FrameTimings> = Vec::with_capacity(iterations);
    for iteration in 0..warmup + iterations {
        // Source → slot: decoding the file stands in for a camera's capture and conversion.
        let source_started = Instant::now();
        image_decode::decode_file(image, limits, &mut slot)
            .map_err(|e| BenchError::Setup(format!("{}: {e}", image.display())))?;
        let source = source_started.elapsed();
        let mut timings = pipeline::process(&mut *session, &mut decoder, &spec, &slot, &mut detections)
            .map_err(|e| BenchError::Frame { iteration, message: e.to_string() })?;
        // Publish: encoding the message the daemon would hand to the MQTT queue.
        let publish_started = Instant::now();
        let message = detections_message("bench", slot.meta(), &Latency::from(&timings), &detections, labels);
        std::hint::black_box(message);
        timings.source = Some(source);
        timings.publish = Some(publish_started.elapsed());
        if iteration >= warmup {
            samples.push(timings);
        }
    }
    let stage = |pick: fn(&FrameTimings) -> Option<Duration>| summarise(samples.iter().filter_map(pick).collect());
    let total = stage(|t| Some(t.source? + t.total? + t.publish?));
    Ok(BenchReport {
        backend: BenchBackend { info: backend.info(), threads: backend.threads() },
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

fn summarise(mut durations: Vec<Duration>) -> StageSummary {
    if durations.is_empty() {
        return StageSummary { median_ms: 0.0, p90_ms: 0.0, min_ms: 0.0 };
    }
    durations.sort();
    let ms = |d: Duration| (d.as_secs_f64() * 1e5).round() / 100.0;
    let at = |fraction: f64| durations[((durations.len() - 1) as f64 * fraction).round() as usize];
    StageSummary { median_ms: ms(at(0.5)), p90_ms: ms(at(0.9)), min_ms: ms(durations[0]) }
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
