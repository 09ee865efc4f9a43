//! A camera's events as the daemon makes them: frames in, the camera's tracker run, typed events
//! and zone counts out.
//!
//! Owns: the camera's [`SceneTracker`], turning its events into [`ObjectEvent`]s (stamped with the
//! run and this camera's event sequence, with the clip a [`ClipNamer`] names), its occupancy changes, and the event snapshots — for
//! each confirmed live track, the JPEG of the frame where it scored best, kept until its `end`,
//! which carries it. Must not: know outlets, topics or JSON (the sink hands the values to the
//! outlets), or keep more than one JPEG per live track (the track cap bounds the memory).
//!
//! Per-track models (classifiers): after each update the camera's tracks go to its per-track step
//! ([`CameraPerTrack`], `crate::infer::per_track`), which runs the models on crops of them with
//! the worker's sessions and keeps their answers per track; every event of a track carries the
//! latest attributes, its `end` the last.
//!
//! Re-identification (`[reid]`, [`CameraReid`]): every frame the camera's confirmed tracks are
//! sighted in the gallery all cameras share, and every event of a track carries its identity
//! (`object_id`, `same_as`), its embedder's appearance handed over first.
//!
//! A track's snapshot is re-rendered only when its score beats the kept picture's by
//! [`RESHOOT_STEP`], so a track is encoded at most a handful of times in its life; all tracks that
//! improved on one frame share one JPEG of it, so a frame costs at most one encode.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use super::camera_reid::{CameraReid, Sighting};
use super::object_event::{ClipRef, EventStamp, ObjectEvent};
use super::outlet::TrackingUpdate;
use crate::config::TrackingConfig;
use crate::detection::{Detection, Labels};
use crate::frame::FrameSlot;
use crate::infer::per_track::embedder::AppearanceAnswer;
use crate::infer::per_track::{CameraPerTrack, PerTrackSessions, TrackAttributes};
use crate::publish::snapshot::render_jpeg;
use crate::track::crop_plan::CropRule;
use crate::track::detection_zones::DetectionZones;
use crate::track::events::{EventKind, Scene, WatchParams};
use crate::track::occupancy::OccupancyChange;
use crate::track::scene_tracker::{seconds, SceneTracker, TrackingParams};
use crate::track::tracker::{Lifecycle, TrackId, TrackerParams};

/// Names the clip an event belongs to (the sink's clip stage, `super::clips::ClipNaming`).
pub type ClipNamer<'a> = dyn Fn(&ObjectEvent) -> Option<ClipRef> + 'a;

/// A track's kept picture is replaced when a detection beats its score by this much.
pub const RESHOOT_STEP: f32 = 0.05;

/// The best picture of one track.
#[derive(Debug)]
struct Shot {
    score: f32,
    jpeg: Arc<Vec<u8>>,
}

/// Event snapshots of one camera.
#[derive(Debug)]
struct BestShots {
    quality: u8,
    rgb: Vec<u8>,
    shots: HashMap<TrackId, Shot>,
    wanted: Vec<(TrackId, Detection)>,
}

/// The tracking state of one camera, and what its last step produced.
#[derive(Debug)]
pub struct CameraEvents {
    camera: String,
    tracking: SceneTracker,
    shots: Option<BestShots>,
    /// The daemon's run id, stamped with `event_seq` on every event.
    run: Option<Arc<str>>,
    /// Events of this camera so far in the run.
    event_seq: u64,
    /// What the last step produced (buffers reused from step to step).
    events: Vec<ObjectEvent>,
    occupancy: Vec<OccupancyChange>,
    /// The continuity of the last frame ([`FrameSlot::continuity`]); a frame with another one
    /// shows something unrelated, and every track ends before it is tracked.
    continuity: Option<u64>,
    per_track: CameraPerTrack,
    reid: Option<CameraReid>,
}

impl CameraEvents {
    /// `snapshot_quality` enables event snapshots; `run` (the daemon's run id) stamps every event
    /// with it and a sequence number.
    pub fn new(
        camera: &str,
        params: TrackingParams,
        scene: Scene,
        snapshot_quality: Option<u8>,
        run: Option<Arc<str>>,
    ) -> CameraEvents {
        CameraEvents {
            camera: camera.into(),
            tracking: SceneTracker::new(params, scene),
            run,
            event_seq: 0,
            shots: snapshot_quality.map(|quality| BestShots {
                quality,
                rgb: Vec::new(),
                shots: HashMap::new(),
                wanted: Vec::new(),
            }),
            events: Vec::new(),
            occupancy: Vec::new(),
            continuity: None,
            per_track: CameraPerTrack::new(camera, &[]),
            reid: None,
        }
    }

    /// Takes part in re-identification: its tracks' identities in their events.
    pub fn with_reid(mut self, reid: CameraReid) -> CameraEvents {
        self.reid = Some(reid);
        self
    }

    /// Runs the per-track models `rules` name (by `[models.<name>]` name) on this camera's tracks.
    pub fn with_per_track_models(mut self, rules: &[(String, CropRule)]) -> CameraEvents {
        self.per_track = CameraPerTrack::new(&self.camera, rules);
        self
    }

    /// Due tracks the per-track models' per-frame bound left for a later frame since the last call.
    pub fn take_per_track_skipped(&mut self) -> u64 {
        self.per_track.take_skipped()
    }

    /// The counts to announce at start: 0 for every zone's total and configured labels, replacing
    /// whatever a previous run left.
    pub fn startup(&mut self) -> TrackingUpdate<'_> {
        self.events.clear();
        self.occupancy.clear();
        self.occupancy.extend_from_slice(self.tracking.take_unreported_occupancy());
        self.update()
    }

    /// Tracks one processed frame: the track id of each detection (confirmed tracks only) and
    /// the zones its track is in, what per-track models said of the live tracks, and the frame's
    /// events and changed counts.
    /// `clips` names the clip of each event, if it has one; `per_track` (the worker's sessions)
    /// run the per-track models on the crops of the tracks this frame's plans choose.
    /// A frame of another continuity than the last ends every track first: its `end` events and
    /// zeroed counts come before the frame's own.
    pub fn frame(
        &mut self,
        slot: &FrameSlot,
        detections: &[Detection],
        labels: &Labels,
        clips: &ClipNamer<'_>,
        per_track: &mut PerTrackSessions,
    ) -> (&[Option<TrackId>], DetectionZones<'_>, &TrackAttributes, TrackingUpdate<'_>) {
        self.events.clear();
        self.occupancy.clear();
        let continuity = slot.continuity();
        if self.continuity.replace(continuity).is_some_and(|last| last != continuity) {
            self.tracking.finish();
            self.collect_events(None, clips);
            self.occupancy.extend_from_slice(self.tracking.occupancy_changes());
        }
        let meta = slot.meta();
        self.tracking.update(detections, meta.width, meta.height, meta.captured_at);
        self.per_track.step(slot, self.tracking.tracker(), per_track);
        if let Some(reid) = &self.reid {
            if let Some((crops, elapsed)) = self.per_track.ran(reid.model()) {
                reid.embedded(crops, elapsed);
            }
            let tracker = self.tracking.tracker();
            let sightings =
                tracker.reports().iter().filter(|report| matches!(report.lifecycle, Lifecycle::Observed { .. }));
            let sightings = sightings.filter_map(|report| {
                let track = tracker.track(report.slot)?;
                let (first_seen, last_seen) = (track.first_seen(), track.last_seen());
                Some(Sighting { track: track.id()?, class_id: track.class_id(), first_seen, last_seen })
            });
            reid.sighted(sightings, seconds(meta.captured_at));
        }
        self.collect_events(Some(meta.sequence), clips);
        self.occupancy.extend_from_slice(self.tracking.occupancy_changes());
        self.take_pictures(slot, labels);
        let update = TrackingUpdate { events: &self.events, occupancy: &self.occupancy };
        (self.tracking.track_ids(), self.tracking.detection_zones(), self.per_track.attributes(), update)
    }

    /// A frame the camera's motion gate kept from inference, captured at `captured_at`: the
    /// tracks stay as they are (`crate::track::tracker::Tracker::hold`); nothing is published.
    pub fn hold(&mut self, captured_at: SystemTime) {
        self.tracking.hold(captured_at);
    }

    /// Whether a frame without motion may be held (`crate::track::tracker::Tracker::is_settled`).
    pub fn is_settled(&self) -> bool {
        self.tracking.is_settled()
    }

    /// Ends every track: `end` events (with their snapshots and clips) and counts back to 0.
    pub fn finish(&mut self, clips: &ClipNamer<'_>) -> TrackingUpdate<'_> {
        self.tracking.finish();
        self.events.clear();
        self.collect_events(None, clips);
        self.occupancy.clear();
        self.occupancy.extend_from_slice(self.tracking.occupancy_changes());
        self.update()
    }

    /// New settings and scene (SIGHUP). Live tracks continue; removed zones' counts are cleared
    /// and new zones' counts start at 0.
    pub fn reload(&mut self, params: TrackingParams, scene: Scene) -> TrackingUpdate<'_> {
        self.tracking.set_params(params);
        self.tracking.set_scene(scene);
        self.events.clear();
        self.occupancy.clear();
        self.occupancy.extend_from_slice(self.tracking.occupancy_changes());
        self.occupancy.extend_from_slice(self.tracking.take_unreported_occupancy());
        self.update()
    }

    fn update(&self) -> TrackingUpdate<'_> {
        TrackingUpdate { events: &self.events, occupancy: &self.occupancy }
    }

    /// Appends the tracker's last events as typed events: stamped, an `end` with its track's
    /// picture, each with its clip.
    fn collect_events(&mut self, frame: Option<u64>, clips: &ClipNamer<'_>) {
        for event in self.tracking.events() {
            let Some(mut described) = ObjectEvent::describe(event, &self.tracking, frame) else {
                continue;
            };
            if let Some(run) = &self.run {
                described.stamp = Some(EventStamp { run: run.clone(), seq: self.event_seq });
                self.event_seq += 1;
            }
            if let Some(reid) = &self.reid {
                let appearance = self
                    .per_track
                    .answer_of(described.track_id, reid.model())
                    .and_then(|answer| (answer as &dyn std::any::Any).downcast_ref::<AppearanceAnswer>())
                    .map(|answer| &answer.appearance);
                let last_seen = seconds(described.last_seen);
                described.identity =
                    reid.identify(described.track_id, described.class_id, event.kind, last_seen, appearance);
            }
            if event.kind == EventKind::End {
                let shots = self.shots.as_mut().and_then(|shots| shots.shots.remove(&described.track_id));
                described.picture = shots.map(|shot| shot.jpeg);
                described.attributes = self.per_track.end(described.track_id);
            } else {
                described.attributes = self.per_track.attributes_of(described.track_id);
            }
            described.clip = clips(&described);
            self.events.push(described);
        }
    }

    /// Renders one picture for every confirmed track that scored its best so far on this frame.
    fn take_pictures(&mut self, slot: &FrameSlot, labels: &Labels) {
        let Some(shots) = self.shots.as_mut() else { return };
        let tracker = self.tracking.tracker();
        shots.wanted.clear();
        for report in tracker.reports() {
            if !matches!(report.lifecycle, Lifecycle::Observed { .. }) {
                continue;
            }
            let Some(track) = tracker.track(report.slot) else { continue };
            let Some(id) = track.id() else { continue };
            let kept = shots.shots.get(&id).map(|shot| shot.score);
            if kept.is_none_or(|score| track.last_score() >= score + RESHOOT_STEP) {
                let detection =
                    Detection { class_id: track.class_id(), score: track.last_score(), bbox: *track.bbox() };
                shots.wanted.push((id, detection));
            }
        }
        if shots.wanted.is_empty() {
            return;
        }
        let detections: Vec<Detection> = shots.wanted.iter().map(|(_, d)| d.clone()).collect();
        match render_jpeg(slot.data(), slot.meta(), &detections, labels, shots.quality, &mut shots.rgb) {
            Ok(jpeg) => {
                let jpeg = Arc::new(jpeg);
                for (id, detection) in &shots.wanted {
                    shots.shots.insert(*id, Shot { score: detection.score, jpeg: jpeg.clone() });
                }
            }
            Err(e) => log::warn!("camera {}: event snapshot failed: {e}", self.camera),
        }
    }
}

/// The settings of `[tracking]`.
pub fn tracking_params(config: &TrackingConfig) -> TrackingParams {
    TrackingParams {
        tracker: TrackerParams {
            max_lost_s: f64::from(config.max_lost_s),
            min_hits: config.min_hits,
            high_score: config.high_score,
            match_iou: config.match_iou,
            max_tracks: config.max_tracks,
        },
        watch: WatchParams { stationary_px: config.stationary_px, stationary_s: f64::from(config.stationary_s) },
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::detection::BoundingBox;
    use crate::frame::{FrameMeta, HeapMemory, PixelFormat};
    use crate::track::events::{WatchParams, Zone};
    use crate::track::tracker::TrackerParams;
    use crate::track::zones::Polygon;

    fn labels() -> Labels {
        Labels::parse("person\ntraffic light\n", Path::new("labels")).expect("labels")
    }

    fn params() -> TrackingParams {
        TrackingParams {
            tracker: TrackerParams { max_lost_s: 1.0, min_hits: 2, high_score: 0.5, match_iou: 0.2, max_tracks: 4 },
            watch: WatchParams { stationary_px: 1.0, stationary_s: 100.0 },
        }
    }

    fn scene() -> Scene {
        let whole = Polygon::new(&[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]).expect("polygon");
        Scene { zones: vec![Zone { name: "yard".into(), polygon: whole, classes: vec![0] }], lines: vec![] }
    }

    fn slot(frame: u64) -> FrameSlot {
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        slot.prepare(64, 48, PixelFormat::Rgb8).expect("prepare").fill(90);
        *slot.meta_mut() = FrameMeta {
            width: 64,
            height: 48,
            format: PixelFormat::Rgb8,
            sequence: frame,
            captured_at: UNIX_EPOCH + Duration::from_millis(1_800_000_000_000 + 200 * frame),
        };
        slot
    }

    fn light(score: f32, x: f32) -> Detection {
        Detection { class_id: 1, score, bbox: BoundingBox { x1: x, y1: 10.0, x2: x + 20.0, y2: 40.0 } }
    }

    /// Each change as (zone, class, count).
    fn counts(update: &TrackingUpdate<'_>) -> Vec<(String, Option<usize>, Option<u32>)> {
        update.occupancy.iter().map(|change| (change.zone.to_string(), change.class_id, change.count)).collect()
    }

    #[test]
    fn events_counts_and_the_best_snapshot_of_a_track() {
        let labels = labels();
        let mut tracking = CameraEvents::new("front", params(), scene(), Some(80), Some("feedc0de".into()));
        assert_eq!(counts(&tracking.startup()), [("yard".into(), None, Some(0)), ("yard".into(), Some(0), Some(0))]);

        let mut events = Vec::new();
        let scores = [0.6, 0.62, 0.9, 0.7];
        for (frame, score) in scores.iter().enumerate() {
            let (ids, _, _, update) = tracking.frame(
                &slot(frame as u64),
                &[light(*score, 10.0 + frame as f32)],
                &labels,
                &|_| None,
                &mut PerTrackSessions::none(),
            );
            assert_eq!(ids, [(frame >= 1).then_some(1)]);
            events.extend(update.events.iter().cloned());
        }
        let kinds: Vec<(EventKind, Option<u64>)> = events.iter().map(|event| (event.kind, event.frame)).collect();
        assert_eq!(kinds, [(EventKind::Start, Some(1)), (EventKind::Update, Some(2))], "start, then the better score");
        assert_eq!(labels.name(events[0].class_id), "traffic light");
        let stamp = |seq| Some(EventStamp { run: "feedc0de".into(), seq });
        let stamps: Vec<_> = events.iter().map(|event| event.stamp.clone()).collect();
        assert_eq!(stamps, [stamp(0), stamp(1)], "run and sequence");
        assert!(events[0].zones.is_empty(), "the yard counts people only");
        let shots = tracking.shots.as_ref().expect("snapshots on");
        assert_eq!(shots.shots[&1].score, 0.9, "the 0.9 frame is the best picture");

        let finished = tracking.finish(&|_| None);
        let [end] = finished.events else { panic!("one end event: {:?}", finished.events) };
        assert_eq!((end.kind, end.stamp.clone(), end.frame), (EventKind::End, stamp(2), None));
        let picture = image::load_from_memory(end.picture.as_deref().expect("the best picture")).expect("a JPEG");
        assert_eq!((picture.width(), picture.height()), (64, 48));
        assert!(tracking.shots.as_ref().expect("on").shots.is_empty(), "handed over once, then forgotten");
    }

    /// Issue 33: a looping folder of unrelated pictures merged a person, a cat and a cup into one
    /// track. A frame of another continuity (the next picture) ends every track first.
    #[test]
    fn a_new_continuity_ends_every_track_before_its_first_frame_is_tracked() {
        let labels = labels();
        let mut tracking = CameraEvents::new("front", params(), scene(), None, None);
        let mut events = Vec::new();
        let mut frame = |frame: u64, continuity: u64| {
            let mut slot = slot(frame);
            slot.set_continuity(continuity);
            let (ids, _, _, update) =
                tracking.frame(&slot, &[light(0.8, 10.0)], &labels, &|_| None, &mut PerTrackSessions::none());
            let ids = ids.to_vec();
            events.extend(update.events.iter().map(|event| (event.kind, event.track_id)));
            ids
        };
        for n in 0..3 {
            frame(n, 1);
        }
        // The same box in the next picture: without the cut it would continue track 1.
        assert_eq!(frame(3, 2), [None], "a new track, not yet confirmed");
        assert_eq!(frame(4, 2), [Some(2)], "the new picture's own track");
        assert_eq!(events, [(EventKind::Start, 1), (EventKind::End, 1), (EventKind::Start, 2)]);
    }

    #[test]
    fn without_a_session_of_its_classifier_a_track_goes_unlabelled_and_the_bound_counts_what_waits() {
        let labels = labels();
        let rule = CropRule { classes: vec![1], min_size: 4.0, every: 0, grown: None };
        let mut params = params();
        params.tracker.max_tracks = 8;
        let mut tracking =
            CameraEvents::new("front", params, scene(), None, None).with_per_track_models(&[("colour".into(), rule)]);
        // Six narrow lights side by side, confirmed on the second frame.
        let lights: Vec<Detection> = (0..6)
            .map(|i| Detection {
                class_id: 1,
                score: 0.9,
                bbox: BoundingBox { x1: 10.0 * i as f32, y1: 0.0, x2: 10.0 * i as f32 + 8.0, y2: 40.0 },
            })
            .collect();
        let mut events = Vec::new();
        for frame in 0..3 {
            let (_, _, _, update) =
                tracking.frame(&slot(frame), &lights, &labels, &|_| None, &mut PerTrackSessions::none());
            events.extend(update.events.iter().cloned());
        }
        assert_eq!(events.len(), 6, "six starts: {events:?}");
        assert!(events.iter().all(|event| event.attributes.is_empty()), "no session, no answer");
        assert_eq!(tracking.take_per_track_skipped(), 2, "6 confirmed tracks, 4 per frame: 2 wait a frame");
        assert_eq!(tracking.take_per_track_skipped(), 0, "taken");
    }

    #[test]
    fn a_reload_clears_removed_zones_and_starts_new_ones_at_zero() {
        let mut tracking = CameraEvents::new("front", params(), scene(), None, None);
        tracking.startup();
        let whole = Polygon::new(&[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]).expect("polygon");
        let renamed =
            Scene { zones: vec![Zone { name: "garden".into(), polygon: whole, classes: vec![] }], lines: vec![] };
        let update = tracking.reload(params(), renamed);
        assert_eq!(
            counts(&update),
            [("yard".into(), None, None), ("yard".into(), Some(0), None), ("garden".into(), None, Some(0))]
        );
    }
}
