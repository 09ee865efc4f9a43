//! The tracker benchmark: tracking, event rules and zone counts on a synthetic scene.
//!
//! Owns: [`bench_tracker`] and its scene ([`TRACKER_BENCH_OBJECTS`] objects, four zones, four
//! lines). Must not: encode messages (the publish stage of the other benchmarks does).

use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use crate::detection::{BoundingBox, Detection};
use crate::track::events::{Line, Scene, WatchParams, Zone};
use crate::track::lines::Segment;
use crate::track::scene_tracker::{SceneTracker, TrackingParams};
use crate::track::tracker::TrackerParams;
use crate::track::zones::Polygon;

/// Objects (one detection each) per frame of the tracker benchmark.
pub const TRACKER_BENCH_OBJECTS: usize = 50;

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
}
