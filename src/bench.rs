//! `jetson-detectd bench`: per-stage timings of the configured backend on one image.
//!
//! Owns: running an image through the same session/decoder sequence as a camera, many times, and
//! summarising each stage (median, p90). Must not: assert on time (the caller prints the numbers)
//! or touch MQTT and cameras.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::backend::Backend;
use crate::decode::{DecodeParams, Decoder};
use crate::frame::{FrameSlot, HeapMemory};
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
    pub preprocess: StageSummary,
    pub infer: StageSummary,
    pub postprocess: StageSummary,
    pub total: StageSummary,
    /// 1000 / median total: frames per second of one camera on this backend, excluding capture.
    pub fps: f64,
}

/// Runs `image` through `backend` `warmup + iterations` times and summarises the last `iterations`.
pub fn bench_backend(
    backend: &dyn Backend,
    params: DecodeParams,
    image: &Path,
    warmup: usize,
    iterations: usize,
) -> Result<BenchReport, BenchError> {
    let iterations = iterations.max(1);
    let mut session = backend.new_session().map_err(|e| BenchError::Setup(e.to_string()))?;
    let mut decoder = Decoder::new(params);
    let spec = backend.spec().clone();
    let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
    images::decode_into(image, &mut slot).map_err(|e| BenchError::Setup(format!("{}: {e}", image.display())))?;
    let mut detections = Vec::new();
    let mut samples: Vec<FrameTimings> = Vec::with_capacity(iterations);
    for iteration in 0..warmup + iterations {
        let timings = pipeline::process(&mut *session, &mut decoder, &spec, &slot, &mut detections)
            .map_err(|e| BenchError::Frame { iteration, message: e.to_string() })?;
        if iteration >= warmup {
            samples.push(timings);
        }
    }
    let stage = |pick: fn(&FrameTimings) -> Option<Duration>| summarise(samples.iter().filter_map(pick).collect());
    let total = stage(|t| t.total);
    Ok(BenchReport {
        backend: backend.info(),
        image: image.display().to_string(),
        width: slot.meta().width,
        height: slot.meta().height,
        warmup,
        iterations,
        detections: detections.len(),
        preprocess: stage(|t| t.pre),
        infer: stage(|t| t.infer),
        postprocess: stage(|t| t.post),
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
