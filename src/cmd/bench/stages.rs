//! The one-frame benchmark: an image through the same stages as a camera frame, many times.
//!
//! Owns: [`bench_backend`] (decode into a slot, preprocess, infer, decode/NMS, message encoding,
//! each stage summarised; on the CPU backend also preprocessing alone, the uncontended time the
//! pipeline's preprocessing is held against) and the message encoding every benchmark times as
//! its publish stage. Must not: start threads beyond the backend's (the cameras benchmark does).

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::cameras::CamerasBench;
use super::error::BenchError;
use super::preprocess::preprocess_alone;
use super::summary::{summarise, StageSummary};
use super::tracker::{bench_tracker, TrackerBench};
use crate::backend::Backend;
use crate::config::LimitsConfig;
use crate::decode::{DecodeParams, Decoder};
use crate::detection::{Detection, Labels};
use crate::frame::{FrameSlot, FrameTimings};
use crate::infer::step;
use crate::publish::payload::{detections_message, Latency};
use crate::source::image_decode;

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
    /// CPU backend: the same preprocessing with nothing else running (no inference before or
    /// after it), on as many threads: what `preprocess` costs uncontended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preprocess_alone: Option<StageSummary>,
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
    image_decode::decode_file(image, limits, &mut slot)
        .map_err(|e| BenchError::Setup(format!("{}: {e}", image.display())))?;
    let preprocess_alone = match backend.threads() {
        Some(threads) => Some(preprocess_alone(&slot, &spec, threads, warmup, iterations)?),
        None => None,
    };
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
        preprocess_alone,
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
pub(super) fn encode_message(
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
