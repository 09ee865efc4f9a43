//! One camera's objects over time: the tracker, the event rules and the zone counts, in step.
//!
//! Owns: the order of the per-frame steps (track → events → occupancy), the frame's capture time
//! as the only clock, the per-detection track ids and zones, and applying reloaded settings and scenes to
//! live state. Must not: encode, render or publish anything (the daemon's side of tracking does),
//! or read a clock: everything is a function of the detections and their capture times, which is
//! what makes replays and tests reproducible.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::detection_zones::DetectionZones;
use super::events::{Scene, TrackEvent, WatchParams, Watcher};
use super::occupancy::{Occupancy, OccupancyChange};
use super::tracker::{TrackId, Tracker, TrackerParams};
use crate::detection::Detection;

/// Every tracking setting of a camera (`[tracking]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrackingParams {
    pub tracker: TrackerParams,
    pub watch: WatchParams,
}

/// The tracking state of one camera.
#[derive(Debug)]
pub struct SceneTracker {
    tracker: Tracker,
    watcher: Watcher,
    occupancy: Occupancy,
    scene: Scene,
    track_ids: Vec<Option<TrackId>>,
    /// Per detection of the last frame: the zones of its confirmed track (bit i: `scene.zones[i]`).
    track_zones: Vec<u64>,
    frame_size: (u32, u32),
}

impl SceneTracker {
    pub fn new(params: TrackingParams, scene: Scene) -> SceneTracker {
        SceneTracker {
            tracker: Tracker::new(params.tracker),
            watcher: Watcher::new(params.watch),
            occupancy: Occupancy::new(&scene),
            scene,
            track_ids: Vec::new(),
            track_zones: Vec::new(),
            frame_size: (1, 1),
        }
    }

    /// Feeds one frame: its detections, its size in pixels and its capture time.
    pub fn update(&mut self, detections: &[Detection], width: u32, height: u32, captured_at: SystemTime) {
        self.frame_size = (width, height);
        self.tracker.update(detections, seconds(captured_at));
        self.after_tracker();
    }

    /// A frame the motion gate kept from the detector (nothing moved), captured at `captured_at`:
    /// the tracks stay as they are ([`Tracker::hold`]); no events, counts or ids change.
    pub fn hold(&mut self, captured_at: SystemTime) {
        self.tracker.hold(seconds(captured_at));
    }

    /// Whether a frame without motion may be held: see [`Tracker::is_settled`].
    pub fn is_settled(&self) -> bool {
        self.tracker.is_settled()
    }

    /// Ends every track (the camera stopped, or shutdown): `end` events and counts back to 0.
    pub fn finish(&mut self) {
        self.tracker.finish();
        self.after_tracker();
    }

    fn after_tracker(&mut self) {
        let (width, height) = self.frame_size;
        self.watcher.observe(&self.tracker, &self.scene, width, height);
        self.occupancy.recount(&self.tracker, &self.watcher, &self.scene);
        self.track_ids.clear();
        self.track_zones.clear();
        let (tracker, watcher) = (&self.tracker, &self.watcher);
        for slot in tracker.assignments() {
            let confirmed = slot.and_then(|s| Some((s, tracker.track(s)?.id()?)));
            self.track_ids.push(confirmed.map(|(_, id)| id));
            self.track_zones.push(confirmed.map_or(0, |(s, _)| watcher.zones(s)));
        }
    }

    /// New settings (SIGHUP); live tracks keep their ids and state.
    pub fn set_params(&mut self, params: TrackingParams) {
        self.tracker.set_params(params.tracker);
        self.watcher.set_params(params.watch);
    }

    /// New zones and lines (SIGHUP); live tracks stay. Cleared counts of removed zones are in
    /// [`SceneTracker::occupancy_changes`], the zeros of new ones in
    /// [`SceneTracker::take_unreported_occupancy`].
    pub fn set_scene(&mut self, scene: Scene) {
        self.watcher.remap(&self.scene, &scene);
        self.occupancy.set_scene(&scene);
        self.scene = scene;
    }

    /// Per detection of the last frame: the id of its confirmed track.
    pub fn track_ids(&self) -> &[Option<TrackId>] {
        &self.track_ids
    }

    /// Per detection of the last frame: the zones its confirmed track is in.
    pub fn detection_zones(&self) -> DetectionZones<'_> {
        DetectionZones::new(&self.track_zones, &self.scene.zones)
    }

    /// Events of the last frame (or [`SceneTracker::finish`]).
    pub fn events(&self) -> &[TrackEvent] {
        self.watcher.events()
    }

    /// Counts that changed with the last frame, finish or scene change.
    pub fn occupancy_changes(&self) -> &[OccupancyChange] {
        self.occupancy.changes()
    }

    /// Counts never reported yet (every known count at start, a new zone's after a reload).
    pub fn take_unreported_occupancy(&mut self) -> &[OccupancyChange] {
        self.occupancy.take_unreported()
    }

    pub fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    pub fn watcher(&self) -> &Watcher {
        &self.watcher
    }

    pub fn scene(&self) -> &Scene {
        &self.scene
    }
}

/// A wall-clock time as seconds since the Unix epoch (0 for times before it).
pub fn seconds(time: SystemTime) -> f64 {
    time.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The inverse of [`seconds`], to the microsecond (an f64 of today's epoch seconds resolves about
/// a quarter of one, so rounding gives back the time that went in).
pub fn system_time(seconds: f64) -> SystemTime {
    let micros = (seconds * 1e6).round();
    UNIX_EPOCH + if micros.is_finite() && micros > 0.0 { Duration::from_micros(micros as u64) } else { Duration::ZERO }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detection::BoundingBox;
    use crate::track::events::{EventKind, Zone};
    use crate::track::zones::Polygon;

    fn params() -> TrackingParams {
        TrackingParams {
            tracker: TrackerParams { max_lost_s: 1.0, min_hits: 3, high_score: 0.5, match_iou: 0.2, max_tracks: 16 },
            watch: WatchParams { stationary_px: 5.0, stationary_s: 10.0 },
        }
    }

    fn person(x: f32) -> Detection {
        Detection { class_id: 0, score: 0.9, bbox: BoundingBox { x1: x, y1: 100.0, x2: x + 100.0, y2: 300.0 } }
    }

    #[test]
    fn frames_give_ids_zones_events_and_counts_and_finish_ends_everything() {
        let whole = Polygon::new(&[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]).expect("polygon");
        let scene = Scene { zones: vec![Zone { name: "all".into(), polygon: whole, classes: vec![] }], lines: vec![] };
        let mut tracking = SceneTracker::new(params(), scene);
        assert_eq!(tracking.take_unreported_occupancy().len(), 1, "the zone's total starts at 0");
        let start = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut kinds = Vec::new();
        for frame in 0..5u32 {
            let at = start + Duration::from_millis(200 * u64::from(frame));
            tracking.update(&[person(10.0 * frame as f32)], 640, 480, at);
            kinds.extend(tracking.events().iter().map(|e| e.kind));
        }
        assert_eq!(tracking.track_ids(), [Some(1)]);
        assert_eq!(tracking.detection_zones().of(0).collect::<Vec<_>>(), ["all"], "the track's zones");
        assert_eq!(kinds, [EventKind::Start]);
        let track = tracking.tracker().track(0).expect("track");
        assert_eq!(system_time(track.first_seen()), start);
        tracking.finish();
        assert_eq!(tracking.events().iter().map(|e| e.kind).collect::<Vec<_>>(), [EventKind::End]);
        assert_eq!(tracking.occupancy_changes().iter().map(|c| c.count).collect::<Vec<_>>(), [Some(0), Some(0)]);
    }

    #[test]
    fn times_round_trip_and_clamp_before_the_epoch() {
        let t = UNIX_EPOCH + Duration::from_millis(1_795_341_600_123);
        let back = system_time(seconds(t));
        let error = back.duration_since(t).unwrap_or_else(|e| e.duration());
        assert!(error < Duration::from_micros(1), "{error:?}");
        assert_eq!(seconds(UNIX_EPOCH - Duration::from_secs(3)), 0.0);
        assert_eq!(system_time(-1.0), UNIX_EPOCH);
        assert_eq!(system_time(f64::NAN), UNIX_EPOCH);
    }
}
