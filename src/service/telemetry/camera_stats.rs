//! Per-camera frame statistics: what the pipeline counts and times, read by telemetry, the live
//! view and `/metrics`.
//!
//! Owns: [`CameraStats`] (lock-free counters plus bounded latency rings and histograms, fed by the
//! per-frame sink and the camera's ring counts) and [`CameraSnapshot`] (those numbers, with the
//! camera's source state). Must not: allocate per frame, or know how the numbers are published.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::frame::{CaptureMode, FrameTimings, Stage};
use crate::source::SourceReport;
use crate::sys::lock::lock;

/// Latency samples kept per stage and camera; percentiles cover the most recent ones.
pub const LATENCY_SAMPLES: usize = 512;

/// Fixed-size ring of the latest latencies of one stage, in milliseconds.
#[derive(Debug)]
struct LatencyRing {
    samples: Box<[f32; LATENCY_SAMPLES]>,
    len: usize,
    next: usize,
}

impl LatencyRing {
    fn new() -> Self {
        LatencyRing { samples: Box::new([0.0; LATENCY_SAMPLES]), len: 0, next: 0 }
    }

    fn push(&mut self, ms: f32) {
        self.samples[self.next] = ms;
        self.next = (self.next + 1) % LATENCY_SAMPLES;
        self.len = (self.len + 1).min(LATENCY_SAMPLES);
    }

    fn clear(&mut self) {
        self.len = 0;
        self.next = 0;
    }

    /// Nearest-rank p50 and p99, or `None` without samples.
    fn percentiles(&self) -> Option<Percentiles> {
        if self.len == 0 {
            return None;
        }
        let mut sorted = self.samples[..self.len].to_vec();
        sorted.sort_by(f32::total_cmp);
        let rank = |p: f64| {
            let index = (p * sorted.len() as f64).ceil() as usize;
            sorted[index.clamp(1, sorted.len()) - 1]
        };
        Some(Percentiles { p50: round3(rank(0.50)), p99: round3(rank(0.99)) })
    }
}

/// Latency percentiles of one stage, milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    pub p50: f32,
    pub p99: f32,
}

fn round3(value: f32) -> f32 {
    (value * 1000.0).round() / 1000.0
}

/// Upper bounds (seconds) of the latency histogram buckets, beyond which `+Inf` counts the rest.
/// 1-2-5 steps from 10 µs to 10 s: a CPU stage of tens of microseconds lands in a bucket of its own
/// size, and no bucket is more than 2.5 times as wide as the one below it.
pub const LATENCY_BUCKETS_S: [f64; 19] = [
    0.000_01, 0.000_02, 0.000_05, 0.000_1, 0.000_2, 0.000_5, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0,
    2.0, 5.0, 10.0,
];

/// Every latency of one stage since start, bucketed (for Prometheus histograms).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatencyHistogram {
    /// Samples at or below each bound of [`LATENCY_BUCKETS_S`] (not cumulative).
    pub buckets: [u64; LATENCY_BUCKETS_S.len()],
    pub count: u64,
    pub sum_s: f64,
}

impl LatencyHistogram {
    fn record(&mut self, seconds: f64) {
        self.count += 1;
        self.sum_s += seconds;
        if let Some(bucket) = LATENCY_BUCKETS_S.iter().position(|bound| seconds <= *bound) {
            self.buckets[bucket] += 1;
        }
    }
}

/// The latency rings and histograms of every stage, under one lock.
#[derive(Debug)]
struct StageLatencies {
    rings: [LatencyRing; Stage::ALL.len()],
    histograms: [LatencyHistogram; Stage::ALL.len()],
}

#[derive(Debug)]
struct FpsWindow {
    since: Instant,
    frames_then: u64,
}

/// Statistics of one camera pipeline; shared between its pipeline thread and the telemetry task.
#[derive(Debug)]
pub struct CameraStats {
    name: String,
    frames: AtomicU64,
    dropped: AtomicU64,
    over_limit: AtomicU64,
    truncated: AtomicU64,
    classify_skipped: AtomicU64,
    /// Frames the motion gate kept from inference, and the inference time that saved (each
    /// counted at the last processed frame's preprocessing, inference and decoding time).
    gated: AtomicU64,
    saved_us: AtomicU64,
    /// The last processed frame's preprocessing, inference and decoding time.
    last_inference_us: AtomicU64,
    latencies: Mutex<StageLatencies>,
    window: Mutex<FpsWindow>,
    capture: Mutex<CaptureWindow>,
}

/// The source's capture mode and its running counts of frames and full-frame copies: now, and as
/// of the previous snapshot.
#[derive(Debug, Default)]
struct CaptureWindow {
    mode: Option<CaptureMode>,
    /// (frames produced, copies made) as last set.
    now: (u64, u64),
    /// The same at the previous snapshot.
    then: (u64, u64),
}

/// What [`CameraStats::snapshot`] reports.
#[derive(Debug, Clone, PartialEq)]
pub struct CameraSnapshot {
    pub name: String,
    /// Frames per second since the previous snapshot.
    pub fps: f64,
    /// Frames processed since start.
    pub frames: u64,
    /// Frames dropped since start (the pipeline was behind, or the source lost them).
    pub dropped: u64,
    /// Frames skipped since start because they were larger than `[limits]` allows.
    pub over_limit: u64,
    /// Frames decoded from truncated data since start (processed, the missing part grey).
    pub truncated: u64,
    /// Crops of tracks due for a classifier that the per-frame bound left for a later frame, since start.
    pub classify_skipped: u64,
    /// Frames the motion gate kept from inference since start.
    pub gated: u64,
    /// Inference time those frames saved, in seconds (each at the time of the camera's last
    /// processed frame: preprocessing, inference, decoding).
    pub inference_saved_s: f64,
    /// Stages with at least one sample, in [`Stage::ALL`] order.
    pub latency_ms: Vec<(Stage, Percentiles)>,
    /// The camera's source state and since when, when known (see [`CameraSnapshot::with_source`]).
    pub source: Option<SourceReport>,
    /// How the source gets frames into the slots; `None` before its first frame.
    pub capture_mode: Option<CaptureMode>,
    /// Full-frame copies the source made per frame since the previous snapshot; `None` when it
    /// produced no frame meanwhile.
    pub frame_copies: Option<f64>,
}

impl CameraSnapshot {
    /// The snapshot with the state of the camera's source, which the pipeline keeps.
    pub fn with_source(mut self, report: SourceReport) -> CameraSnapshot {
        self.source = Some(report);
        self
    }
}

impl CameraStats {
    pub fn new(name: impl Into<String>) -> Self {
        CameraStats {
            name: name.into(),
            frames: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            over_limit: AtomicU64::new(0),
            truncated: AtomicU64::new(0),
            classify_skipped: AtomicU64::new(0),
            gated: AtomicU64::new(0),
            saved_us: AtomicU64::new(0),
            last_inference_us: AtomicU64::new(0),
            latencies: Mutex::new(StageLatencies {
                rings: std::array::from_fn(|_| LatencyRing::new()),
                histograms: [LatencyHistogram::default(); Stage::ALL.len()],
            }),
            window: Mutex::new(FpsWindow { since: Instant::now(), frames_then: 0 }),
            capture: Mutex::new(CaptureWindow::default()),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// One processed frame and its stage timings.
    pub fn record_frame(&self, timings: &FrameTimings) {
        self.frames.fetch_add(1, Ordering::Relaxed);
        let inference: Duration =
            [Stage::Pre, Stage::Infer, Stage::Post].into_iter().filter_map(|s| timings.get(s)).sum();
        self.last_inference_us.store(inference.as_micros() as u64, Ordering::Relaxed);
        let mut latencies = lock(&self.latencies);
        for stage in Stage::ALL {
            if let Some(duration) = timings.get(stage) {
                latencies.rings[stage.index()].push(duration.as_secs_f32() * 1000.0);
                latencies.histograms[stage.index()].record(duration.as_secs_f64());
            }
        }
    }

    /// Forgets the recent latencies (the percentiles), not the histograms since start: the
    /// camera's detection stopped, so there is no current inference time until it goes on again.
    pub fn forget_latencies(&self) {
        let mut latencies = lock(&self.latencies);
        for ring in &mut latencies.rings {
            ring.clear();
        }
    }

    /// `count` crops a classifier's per-frame bound left for a later frame.
    pub fn record_classify_skipped(&self, count: u64) {
        if count > 0 {
            self.classify_skipped.fetch_add(count, Ordering::Relaxed);
        }
    }

    /// A frame the motion gate kept from inference: it saved what the last processed frame cost.
    pub fn record_gated(&self) {
        self.gated.fetch_add(1, Ordering::Relaxed);
        self.saved_us.fetch_add(self.last_inference_us.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// `count` frames that were dropped before processing.
    pub fn record_drop(&self, count: u64) {
        self.dropped.fetch_add(count, Ordering::Relaxed);
    }

    /// The source's running count of frames skipped for being over `[limits]`.
    pub fn set_over_limit(&self, total: u64) {
        self.over_limit.store(total, Ordering::Relaxed);
    }

    /// The source's capture mode and its running totals of frames produced and full-frame copies
    /// made (the camera's ring counts both).
    pub fn set_capture(&self, mode: Option<CaptureMode>, produced: u64, copies: u64) {
        let mut capture = lock(&self.capture);
        capture.mode = mode;
        capture.now = (produced, copies);
    }

    /// Full-frame copies the source made since start (what `frame_copies` is a rate of).
    pub fn frame_copies_total(&self) -> u64 {
        lock(&self.capture).now.1
    }

    /// The source's running count of frames decoded from truncated data.
    pub fn set_truncated(&self, total: u64) {
        self.truncated.store(total, Ordering::Relaxed);
    }

    /// Counters, fps since the previous snapshot, and latency percentiles.
    pub fn snapshot(&self) -> CameraSnapshot {
        self.snapshot_at(Instant::now())
    }

    /// [`CameraStats::snapshot`] as seen at `now`; starts the next fps window at `now`.
    pub fn snapshot_at(&self, now: Instant) -> CameraSnapshot {
        let frames = self.frames.load(Ordering::Relaxed);
        let fps = {
            let mut window = lock(&self.window);
            let elapsed = now.saturating_duration_since(window.since).as_secs_f64();
            let fps = if elapsed > 0.0 { (frames - window.frames_then) as f64 / elapsed } else { 0.0 };
            *window = FpsWindow { since: now, frames_then: frames };
            (fps * 100.0).round() / 100.0
        };
        let snapshot = CameraSnapshot { fps, ..self.peek() };
        // The next frame_copies window starts here too.
        let mut capture = lock(&self.capture);
        capture.then = capture.now;
        snapshot
    }

    /// Counters, latency percentiles and copies per frame without touching the fps and copies
    /// windows (`fps` is 0): for readers other than the telemetry tick, which owns the windows.
    pub fn peek(&self) -> CameraSnapshot {
        let latency_ms = {
            let latencies = lock(&self.latencies);
            Stage::ALL
                .iter()
                .filter_map(|stage| Some((*stage, latencies.rings[stage.index()].percentiles()?)))
                .collect()
        };
        let (capture_mode, frame_copies) = {
            let capture = lock(&self.capture);
            let produced = capture.now.0.saturating_sub(capture.then.0);
            let copies = capture.now.1.saturating_sub(capture.then.1);
            let per_frame = (produced > 0).then(|| (copies as f64 / produced as f64 * 100.0).round() / 100.0);
            (capture.mode, per_frame)
        };
        CameraSnapshot {
            name: self.name.clone(),
            fps: 0.0,
            frames: self.frames.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            over_limit: self.over_limit.load(Ordering::Relaxed),
            truncated: self.truncated.load(Ordering::Relaxed),
            classify_skipped: self.classify_skipped.load(Ordering::Relaxed),
            gated: self.gated.load(Ordering::Relaxed),
            inference_saved_s: self.saved_us.load(Ordering::Relaxed) as f64 / 1e6,
            latency_ms,
            source: None,
            capture_mode,
            frame_copies,
        }
    }

    /// The latency histogram of every stage since start, in [`Stage::ALL`] order.
    pub fn histograms(&self) -> [(Stage, LatencyHistogram); Stage::ALL.len()] {
        let latencies = lock(&self.latencies);
        std::array::from_fn(|i| (Stage::ALL[i], latencies.histograms[i]))
    }
}

#[cfg(test)]
impl CameraSnapshot {
    /// A camera at `fps` that dropped 2 frames and has nothing else to report.
    pub(super) fn for_tests(name: &str, fps: f64) -> CameraSnapshot {
        CameraSnapshot {
            name: name.into(),
            fps,
            frames: 0,
            dropped: 2,
            over_limit: 0,
            truncated: 0,
            classify_skipped: 0,
            gated: 0,
            inference_saved_s: 0.0,
            latency_ms: Vec::new(),
            source: None,
            capture_mode: None,
            frame_copies: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn timings(total_ms: u64) -> FrameTimings {
        FrameTimings {
            infer: Some(Duration::from_millis(total_ms / 2)),
            total: Some(Duration::from_millis(total_ms)),
            ..FrameTimings::default()
        }
    }

    #[test]
    fn fps_counts_frames_over_the_window() {
        let stats = CameraStats::new("front");
        let start = Instant::now();
        stats.snapshot_at(start);
        for _ in 0..10 {
            stats.record_frame(&timings(10));
        }
        stats.record_drop(3);
        stats.set_over_limit(2);
        let snapshot = stats.snapshot_at(start + Duration::from_secs(2));
        assert_eq!(snapshot.fps, 5.0);
        assert_eq!((snapshot.frames, snapshot.dropped, snapshot.over_limit), (10, 3, 2));
        let next = stats.snapshot_at(start + Duration::from_secs(4));
        assert_eq!(next.fps, 0.0, "a new window starts at every snapshot");
    }

    #[test]
    fn histograms_count_every_sample_since_start_in_its_bucket_and_peeking_keeps_the_windows() {
        let stats = CameraStats::new("front");
        let start = Instant::now();
        stats.snapshot_at(start);
        for ms in [1, 3, 3, 20_000] {
            stats.record_frame(&timings(ms));
        }
        let histograms = stats.histograms();
        let (stage, total) = histograms[Stage::Total.index()];
        assert_eq!(stage, Stage::Total);
        assert_eq!(total.count, 4);
        assert!((total.sum_s - 20.007).abs() < 1e-9, "{}", total.sum_s);
        // 1 ms is in the 1 ms bucket, 3 ms in the 5 ms one; 20 s is beyond the last bound (+Inf only).
        let bucket = |bound: f64| LATENCY_BUCKETS_S.iter().position(|b| *b == bound).unwrap();
        assert_eq!(total.buckets[bucket(0.001)], 1);
        assert_eq!(total.buckets[bucket(0.005)], 2);
        assert_eq!(total.buckets.iter().sum::<u64>(), 3);
        assert_eq!(histograms[Stage::Pre.index()].1.count, 0, "an untimed stage has no samples");
        stats.set_capture(None, 10, 5);
        assert_eq!(stats.peek().frames, 4);
        let snapshot = stats.snapshot_at(start + Duration::from_secs(2));
        assert_eq!(snapshot.fps, 2.0, "peek did not restart the fps window");
        assert_eq!(snapshot.frame_copies, Some(0.5), "peek did not restart the copies window");
    }

    #[test]
    fn stages_of_tens_of_microseconds_land_in_buckets_of_their_size() {
        let stats = CameraStats::new("front");
        let pre = |micros| FrameTimings { pre: Some(Duration::from_micros(micros)), ..FrameTimings::default() };
        for micros in [15, 30, 30, 120] {
            stats.record_frame(&pre(micros));
        }
        let histogram = stats.histograms()[Stage::Pre.index()].1;
        let bucket = |bound: f64| LATENCY_BUCKETS_S.iter().position(|b| *b == bound).unwrap();
        assert_eq!(histogram.buckets[bucket(0.000_02)], 1);
        assert_eq!(histogram.buckets[bucket(0.000_05)], 2);
        assert_eq!(histogram.buckets[bucket(0.000_2)], 1);
        assert!(LATENCY_BUCKETS_S.windows(2).all(|pair| pair[1] / pair[0] <= 2.5 + 1e-9));
    }

    #[test]
    fn percentiles_cover_only_recent_samples_of_timed_stages() {
        let stats = CameraStats::new("front");
        for _ in 0..LATENCY_SAMPLES {
            stats.record_frame(&timings(1000));
        }
        for ms in 1..=100 {
            stats.record_frame(&timings(ms));
        }
        let snapshot = stats.snapshot();
        let stages: Vec<Stage> = snapshot.latency_ms.iter().map(|(s, _)| *s).collect();
        assert_eq!(stages, [Stage::Infer, Stage::Total]);
        let total = snapshot.latency_ms[1].1;
        assert_eq!(total.p99, 1000.0, "412 of the last 512 samples are 1000 ms");

        let fresh = CameraStats::new("back");
        for ms in 1..=100 {
            fresh.record_frame(&timings(ms));
        }
        let total = fresh.snapshot().latency_ms[1].1;
        assert_eq!((total.p50, total.p99), (50.0, 99.0));
    }
}
