//! `jetson-detectd bench`: per-stage timings of the configured backend on one image.
//!
//! Owns: running an image through the same stages as a camera frame (decode into a slot,
//! preprocess, infer, decode/NMS, message encoding), many times, and summarising each stage
//! (median, p90, min). Must not: assert on time (the caller prints the numbers)
//! or touch MQTT and cameras.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::backend::Backend;
use crate::decode::{DecodeParams, Decoder};
use crate::detection::Labels;
use crate::frame::FrameSlot;
use crate::payload::{detections_message, Latency};
use crate::pipeline;
use crate::source::images;
use crate::telemetry::FrameTimings;

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

#[derive(Debug, Serialize)]
pub struct BenchReport {
    pub backend: crate::backend::BackendInfo,
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
}

/// Runs `image` through `backend` `warmup + iterations` times and summarises the last `iterations`.
pub fn bench_backend(
    backend: &dyn Backend,
    params: DecodeParams,
    labels: &Labels,
    image: &Path,
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
        images::decode_into(image, &mut slot).map_err(|e| BenchError::Setup(format!("{}: {e}", image.display())))?;
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
        backend: backend.info(),
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
    })
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
    fn summary_picks_median_p90_and_min() {
        let durations = (1..=10).map(Duration::from_millis).collect();
        let summary = summarise(durations);
        assert_eq!(summary, StageSummary { median_ms: 6.0, p90_ms: 9.0, min_ms: 1.0 });
        assert_eq!(summarise(Vec::new()).median_ms, 0.0);
    }
}
