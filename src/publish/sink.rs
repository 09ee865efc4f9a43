//! The per-frame sink of the daemon: every processed frame becomes typed values for the outlets,
//! and statistics.
//!
//! Owns: per camera, the step "track → periodic snapshot (while its snapshots switch is on) →
//! outlets" and the frame's statistics, serialised with the end of its detection (a frame already
//! on its way when detection was switched off is dropped, never published after its counts went
//! to 0); the picture of a camera whose detection is off (its periodic snapshot, the live view)
//! and of a frame its motion gate held (its tracks hold, the frame counts as gated);
//! tracking outside frames (start-up counts, reloads, zone changes from the page, a camera that
//! ended, went offline or whose detection was switched off, shutdown); the end reports of cameras
//! and inference workers. Runs on the inference worker (a picture, a camera gone offline: on the
//! camera's source thread), so it must not block: the outlets only hand over (`super::outlet` says
//! what they may do there); each camera's tracks go to its per-track step
//! (`super::camera_events` hands them to `crate::infer::per_track`, which runs the per-track models
//! on a bounded number of them with the worker's sessions). Must not: know topics or JSON, run inference itself, touch frame rings, or
//! read files.

use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use tokio::sync::mpsc;

use super::camera_events::{tracking_params, CameraEvents};
use super::camera_reid::{CameraReid, ReidFigures, ReidState};
use super::clips::ClipNaming;
use super::dispatch::Outlets;
use super::object_event::{ClipRef, ObjectEvent};
use super::outlet::{FrameResult, TrackingUpdate};
use super::snapshot::Snapshotter;
use crate::config::Config;
use crate::controls::{CameraControls, Controls, Switch};
use crate::detection::{Detection, Labels};
use crate::frame::{FrameSlot, FrameTimings};
use crate::infer::per_track::{crop_rules, PerTrackSessions};
use crate::infer::step::{FrameSink, PipelineError};
use crate::reid::{Gallery, GalleryParams};
use crate::service::telemetry::CameraStats;
use crate::sys::lock::{lock, try_lock};
use crate::track::detection_zones::DetectionZones;
use crate::track::events::Scene;

/// Per-camera state the sink keeps.
struct CameraEntry {
    name: String,
    stats: Arc<CameraStats>,
    snapshotter: Option<Mutex<Snapshotter>>,
    /// The camera's tracking (with `tracking.enabled`), and the lock that serialises its frames
    /// with the end of its detection.
    step: Mutex<Option<CameraEvents>>,
    /// The camera's run-time switches (detection, snapshots).
    switches: Option<Arc<CameraControls>>,
    /// When the camera's source last lost its stream, until a frame captured after it arrives: a
    /// frame captured before, still on its way, is dropped (its objects' tracks have ended).
    /// Taken under `step`'s lock.
    offline_since: Mutex<Option<SystemTime>>,
}

/// Turns processed frames into values for the outlets, and statistics.
pub struct PublishSink {
    outlets: Outlets,
    /// Names each event's clip before the outlets see it (the recorder, when a camera records).
    clips: Option<Arc<dyn ClipNaming>>,
    labels: Arc<Labels>,
    /// In config order.
    cameras: Vec<CameraEntry>,
    ended: mpsc::Sender<Ended>,
    /// With `[reid]`: the gallery and counts every camera shares.
    reid: Option<Arc<ReidState>>,
}

/// A camera or inference worker that stopped (`what` names it): `Err` carries why it failed.
pub type Ended = (String, Result<(), String>);

impl PublishSink {
    /// Sets up every camera's tracking and snapshots, and gives the outlets what subscribers need
    /// before the first frame (`Outlet::starting`, then each camera's zone counts at 0). `scenes`
    /// are the cameras' zones and lines and `stats` their statistics, both in config order; the
    /// end of every camera and inference worker is reported on `ended`. `run` (this start's id)
    /// and a per-camera sequence number stamp every event; `controls` say whether a camera's
    /// periodic snapshots are made. `clips` names each event's clip before the outlets see it.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        config: &Config,
        run: Arc<str>,
        labels: Arc<Labels>,
        scenes: Vec<Scene>,
        stats: Vec<Arc<CameraStats>>,
        ended: mpsc::Sender<Ended>,
        outlets: Outlets,
        clips: Option<Arc<dyn ClipNaming>>,
        controls: Arc<Controls>,
    ) -> PublishSink {
        outlets.starting(config);
        let event_snapshots = config.snapshot.events.then_some(config.snapshot.jpeg_quality);
        // `run`'s preflight refused a config whose rules name unknown labels.
        let rules = crop_rules(config, &labels).unwrap_or_else(|e| {
            log::error!("per-track models not run: {e}");
            Vec::new()
        });
        // One gallery for every camera: re-identification spans them.
        let reid = &config.reid;
        let gallery = reid.model.as_deref().filter(|_| reid.enabled).map(|model| {
            let params = GalleryParams {
                window_s: reid.window_s,
                max_entries: reid.max_entries as usize,
                min_similarity: reid.min_similarity,
            };
            (model, ReidState::new(Gallery::new(params)))
        });
        let cameras = config
            .cameras
            .iter()
            .zip(scenes)
            .zip(stats)
            .map(|((camera, scene), stats)| {
                let tracking = config.tracking.enabled.then(|| {
                    let mut tracking = CameraEvents::new(
                        &camera.name,
                        tracking_params(&config.tracking),
                        scene,
                        event_snapshots,
                        Some(run.clone()),
                    )
                    .with_per_track_models(&rules);
                    if let Some((model, gallery)) = &gallery {
                        tracking = tracking.with_reid(CameraReid::new(&camera.name, model, gallery.clone()));
                    }
                    outlets.tracking(&camera.name, &tracking.startup());
                    tracking
                });
                CameraEntry {
                    name: camera.name.clone(),
                    stats,
                    snapshotter: config.snapshot.enabled.then(|| Mutex::new(Snapshotter::new(&config.snapshot))),
                    step: Mutex::new(tracking),
                    switches: controls.camera(&camera.name).cloned(),
                    offline_since: Mutex::new(None),
                }
            })
            .collect();
        let reid = gallery.map(|(_, state)| state);
        PublishSink { outlets, clips, labels, cameras, ended, reid }
    }

    fn camera(&self, name: &str) -> Option<&CameraEntry> {
        self.cameras.iter().find(|entry| entry.name == name)
    }

    /// The statistics of `camera`, which telemetry reports.
    pub fn camera_stats(&self, camera: &str) -> Option<&Arc<CameraStats>> {
        self.camera(camera).map(|entry| &entry.stats)
    }

    /// Re-identification's figures, which telemetry reports (`None`: `[reid]` is off).
    pub fn reid_figures(&self) -> Option<ReidFigures> {
        self.reid.as_ref().map(|state| state.figures())
    }

    /// The labels every message names classes with.
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// Applies a reloaded `config`'s tracking settings and each camera's zones and lines
    /// (`scenes`, in config order) — live tracks continue —, then tells the outlets
    /// (`Outlet::reconfigured`: publish settings, discovery, the live view's config).
    pub fn reload(&self, config: &Config, scenes: Vec<Scene>) {
        let params = tracking_params(&config.tracking);
        for (camera, scene) in config.cameras.iter().zip(scenes) {
            if let Some(entry) = self.camera(&camera.name) {
                if let Some(tracking) = lock(&entry.step).as_mut() {
                    self.outlets.tracking(&camera.name, &tracking.reload(params, scene));
                }
            }
        }
        self.outlets.reconfigured(config);
    }

    /// Applies one camera's new zones and lines (saved from the page; `config` is the running
    /// config with them in place): its live tracks continue, as with [`PublishSink::reload`].
    pub fn apply_scene(&self, config: &Config, camera: &str, scene: Scene) {
        if let Some(entry) = self.camera(camera) {
            if let Some(tracking) = lock(&entry.step).as_mut() {
                self.outlets.tracking(camera, &tracking.reload(tracking_params(&config.tracking), scene));
            }
        }
        self.outlets.reconfigured(config);
    }

    /// `camera`'s detection was switched off (call it after the switch): its frames stop coming,
    /// so its tracks end now (`end` events, counts back to 0) instead of staying in view, its
    /// label counts go to 0 and its recent inference times are forgotten. A frame on its way
    /// meanwhile waits for this, then is dropped.
    pub fn stop_detection(&self, camera: &str) {
        let Some(entry) = self.camera(camera) else { return };
        let mut step = lock(&entry.step);
        self.finish(&entry.name, &mut step);
        self.outlets.detection_stopped(camera);
        entry.stats.forget_latencies();
    }

    /// Ends every camera's tracks: `end` events, event snapshots, counts back to 0 (shutdown).
    pub fn finish_tracking(&self) {
        for entry in &self.cameras {
            self.finish_camera(entry);
        }
    }

    fn finish_camera(&self, entry: &CameraEntry) {
        self.finish(&entry.name, &mut lock(&entry.step));
    }

    fn finish(&self, camera: &str, tracking: &mut Option<CameraEvents>) {
        if let Some(tracking) = tracking {
            let clips = |event: &ObjectEvent| self.clip_of(camera, event);
            self.outlets.tracking(camera, &tracking.finish(&clips));
        }
    }

    /// The clip `event` of `camera` belongs to, named before the outlets see the event.
    fn clip_of(&self, camera: &str, event: &ObjectEvent) -> Option<ClipRef> {
        self.clips.as_ref().and_then(|clips| clips.clip_of(camera, event))
    }

    /// The camera's periodic snapshot of this frame, if one is due and its snapshots are on.
    fn snapshot(
        &self,
        entry: &CameraEntry,
        slot: &FrameSlot,
        detections: &[Detection],
        now: Instant,
    ) -> Option<Vec<u8>> {
        let snapshots_on = entry.switches.as_ref().is_none_or(|switches| switches.get(Switch::Snapshots));
        let snapshotter = entry.snapshotter.as_ref().filter(|_| snapshots_on)?;
        match lock(snapshotter).maybe_render(slot, detections, &self.labels, now) {
            Ok(jpeg) => jpeg,
            Err(e) => {
                log::warn!("camera {}: snapshot failed: {e}", entry.name);
                None
            }
        }
    }
}

fn detecting(entry: &CameraEntry) -> bool {
    entry.switches.as_ref().is_none_or(|switches| switches.get(Switch::Detect))
}

impl FrameSink for PublishSink {
    fn frame(
        &self,
        camera: &str,
        slot: &FrameSlot,
        detections: &[Detection],
        timings: &FrameTimings,
        per_track: &mut PerTrackSessions,
    ) {
        let Some(entry) = self.camera(camera) else { return };
        let publish_started = Instant::now();
        let mut step = lock(&entry.step);
        // A frame that was on its way when the camera's detection was switched off: its tracks have
        // ended and its counts are 0 (or will be, once this lock is free); it must not bring them
        // back. Checked under the lock, which `stop_detection` takes after the switch.
        if !detecting(entry) {
            return;
        }
        // Likewise a frame captured before the camera went offline.
        {
            let mut offline_since = lock(&entry.offline_since);
            if let Some(since) = *offline_since {
                if slot.meta().captured_at <= since {
                    return;
                }
                *offline_since = None;
            }
        }
        let (track_ids, zones, attributes, update) = match step.as_mut() {
            Some(tracking) => {
                let clips = |event: &ObjectEvent| self.clip_of(camera, event);
                let (track_ids, zones, attributes, update) =
                    tracking.frame(slot, detections, &self.labels, &clips, per_track);
                (track_ids, zones, Some(attributes), update)
            }
            None => (&[][..], DetectionZones::default(), None, TrackingUpdate::default()),
        };
        let snapshot = self.snapshot(entry, slot, detections, publish_started);
        self.outlets.frame(&FrameResult {
            camera,
            slot,
            detections,
            track_ids,
            zones,
            attributes,
            timings,
            tracking: update,
            snapshot: snapshot.as_deref(),
        });
        if let Some(tracking) = step.as_mut() {
            entry.stats.record_classify_skipped(tracking.take_per_track_skipped());
        }
        let mut timings = *timings;
        timings.publish = Some(publish_started.elapsed());
        // Under the step's lock too: `stop_detection` forgets the inference times after this.
        entry.stats.record_frame(&timings);
    }

    /// The picture goes on while detection is off: the periodic snapshot (no boxes) and the live
    /// view; nothing is tracked or counted.
    fn picture(&self, camera: &str, slot: &FrameSlot) {
        let Some(entry) = self.camera(camera) else { return };
        let snapshot = self.snapshot(entry, slot, &[], Instant::now());
        self.outlets.picture(camera, slot, snapshot.as_deref());
    }

    /// Its tracks hold as they are (taken only if its tracking is free: a held frame never waits
    /// for the worker; the next one holds them), it counts as gated, and the picture goes on.
    fn held(&self, camera: &str, slot: &FrameSlot) {
        let Some(entry) = self.camera(camera) else { return };
        if let Some(tracking) = try_lock(&entry.step).as_mut().and_then(|step| step.as_mut()) {
            tracking.hold(slot.meta().captured_at);
        }
        entry.stats.record_gated();
        self.picture(camera, slot);
    }

    fn motion(&self, camera: &str, moving: bool) {
        self.outlets.motion(camera, moving);
    }

    fn tracking_settled(&self, camera: &str) -> bool {
        let Some(entry) = self.camera(camera) else { return true };
        try_lock(&entry.step).is_some_and(|step| step.as_ref().is_none_or(CameraEvents::is_settled))
    }

    /// Its tracks end now (`end` events, each clip given its end, counts back to 0) instead of
    /// staying in view, unseen, for as long as the camera is away; the outlets hear of it
    /// ([`Outlet::camera_offline`](super::outlet::Outlet::camera_offline): label counts to 0, the
    /// clip being written finished).
    fn camera_offline(&self, camera: &str) {
        let Some(entry) = self.camera(camera) else { return };
        let mut step = lock(&entry.step);
        *lock(&entry.offline_since) = Some(SystemTime::now());
        self.finish(&entry.name, &mut step);
        self.outlets.camera_offline(camera);
    }

    fn camera_ended(&self, camera: &str, result: &Result<(), PipelineError>) {
        // Its objects are out of sight for good: their events end now.
        if let Some(entry) = self.camera(camera) {
            self.finish_camera(entry);
        }
        let outcome = result.as_ref().map(|_| ()).map_err(|e| e.to_string());
        if self.ended.try_send((format!("camera {camera}"), outcome)).is_err() {
            log::error!("camera {camera}: end report lost (daemon already shutting down)");
        }
    }

    fn worker_failed(&self, worker: &str, error: &PipelineError) {
        if self.ended.try_send((worker.to_string(), Err(error.to_string()))).is_err() {
            log::error!("{worker}: failure report lost (daemon already shutting down): {error}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::*;
    use crate::config::{camera_scenes, ConfigOrigin};
    use crate::detection::BoundingBox;
    use crate::frame::{HeapMemory, PixelFormat};
    use crate::publish::outlet::Outlet;

    /// Writes down what reaches the outlets.
    #[derive(Default)]
    struct Seen(Mutex<Vec<String>>);

    impl Outlet for Seen {
        fn name(&self) -> &str {
            "seen"
        }

        fn frame(&self, frame: &FrameResult<'_>) {
            lock(&self.0).push(format!("frame of {}", frame.camera));
            self.tracking(frame.camera, &frame.tracking);
        }

        fn picture(&self, camera: &str, _slot: &FrameSlot, snapshot: Option<&[u8]>) {
            lock(&self.0).push(format!("picture of {camera}, snapshot: {}", snapshot.is_some()));
        }

        fn detection_stopped(&self, camera: &str) {
            lock(&self.0).push(format!("detection of {camera} stopped"));
        }

        fn camera_offline(&self, camera: &str) {
            lock(&self.0).push(format!("{camera} offline"));
        }

        fn tracking(&self, camera: &str, update: &TrackingUpdate<'_>) {
            for event in update.events {
                lock(&self.0).push(format!("{:?} of track {} of {camera}", event.kind, event.track_id));
            }
        }
    }

    /// A sink of one camera `front` (labels: `person`) whose outlet is `seen`.
    fn sink_with(text: &str, seen: &Arc<Seen>) -> (PublishSink, Arc<Controls>, Arc<CameraStats>) {
        let config = Config::from_toml(text, ConfigOrigin::File("test.toml".into()), Path::new("/")).expect("config");
        let labels = Arc::new(Labels::parse("person\n", Path::new("labels.txt")).expect("labels"));
        let scenes = camera_scenes(&config, &labels).expect("scenes");
        let stats = Arc::new(CameraStats::new("front"));
        let controls = Arc::new(Controls::new(&config));
        let outlets = Outlets::new(vec![seen.clone()]);
        let (ended, _) = mpsc::channel(1);
        let sink = PublishSink::start(
            &config,
            "run".into(),
            labels,
            scenes,
            vec![stats.clone()],
            ended,
            outlets,
            None,
            controls.clone(),
        );
        (sink, controls, stats)
    }

    /// Issue 49: an RTSP camera that went offline during an event kept its tracks (no `end`, its
    /// count at 1, its clip recording) for as long as it was away.
    #[test]
    fn a_camera_going_offline_ends_its_tracks_and_a_frame_captured_before_is_dropped() {
        let text = "[tracking]\nmin_hits = 1\n[[camera]]\nname = \"front\"\nsource = { kind = \"synthetic\" }\n";
        let seen = Arc::new(Seen::default());
        let (sink, _, _) = sink_with(text, &seen);
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        slot.prepare(32, 24, PixelFormat::Rgb8).expect("a small frame").fill(90);
        let person = Detection { class_id: 0, score: 0.9, bbox: BoundingBox { x1: 4.0, y1: 4.0, x2: 12.0, y2: 20.0 } };
        let timings = FrameTimings::default();
        let start = SystemTime::now() - Duration::from_secs(10);
        for n in 0..3 {
            slot.meta_mut().captured_at = start + Duration::from_millis(100 * n);
            sink.frame("front", &slot, std::slice::from_ref(&person), &timings, &mut PerTrackSessions::none());
        }
        sink.camera_offline("front");
        // On its way when the camera went: captured before.
        slot.meta_mut().captured_at = start + Duration::from_millis(300);
        sink.frame("front", &slot, std::slice::from_ref(&person), &timings, &mut PerTrackSessions::none());
        slot.meta_mut().captured_at = SystemTime::now() + Duration::from_secs(1);
        sink.frame("front", &slot, &[], &timings, &mut PerTrackSessions::none());
        assert_eq!(
            *lock(&seen.0),
            [
                "frame of front",
                "Start of track 1 of front",
                "frame of front",
                "frame of front",
                "End of track 1 of front",
                "front offline",
                "frame of front",
            ],
            "the track ends at once; the frame from before is dropped, the one after is processed"
        );
    }

    #[test]
    fn with_detection_off_no_frame_is_published_but_the_picture_and_its_snapshot_go_on() {
        let text = "[snapshot]\nenabled = true\n[[camera]]\nname = \"front\"\nsource = { kind = \"synthetic\" }\n";
        let seen = Arc::new(Seen::default());
        let (sink, controls, stats) = sink_with(text, &seen);
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        slot.prepare(32, 24, PixelFormat::Rgb8).expect("a small frame").fill(90);
        let timings = FrameTimings { infer: Some(Duration::from_millis(5)), ..FrameTimings::default() };

        controls.set("front", Switch::Snapshots, false).expect("a known camera");
        sink.frame("front", &slot, &[], &timings, &mut PerTrackSessions::none());
        assert!(!stats.peek().latency_ms.is_empty(), "an inference time while detecting");
        controls.set("front", Switch::Detect, false).expect("a known camera");
        // A frame that was on its way when the switch flipped.
        sink.frame("front", &slot, &[], &timings, &mut PerTrackSessions::none());
        sink.stop_detection("front");
        sink.frame("front", &slot, &[], &timings, &mut PerTrackSessions::none());
        assert!(stats.peek().latency_ms.is_empty(), "no current inference time with detection off");
        controls.set("front", Switch::Snapshots, true).expect("a known camera");
        sink.picture("front", &slot);
        assert_eq!(
            *lock(&seen.0),
            ["frame of front", "detection of front stopped", "picture of front, snapshot: true"],
            "the frames after the switch are dropped; the picture goes on with the periodic snapshot"
        );
    }
}
