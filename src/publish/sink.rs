//! The per-frame sink of the daemon: every processed frame becomes typed values for the outlets,
//! and statistics.
//!
//! Owns: per camera, the step "track → periodic snapshot (while its snapshots switch is on) →
//! outlets" and the frame's statistics; tracking outside frames (start-up counts, reloads, zone
//! changes from the page, a camera that ended or whose detection was switched off, shutdown); the end reports of cameras and inference workers. Runs on the inference
//! worker, so it must not block: the outlets only hand over (`super::outlet` says what they may
//! do there). Must not: know topics or JSON, run inference, touch frame rings, or read files.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::mpsc;

use super::events::ObjectEvent;
use super::outlet::{FrameResult, Outlet, Outlets, TrackingUpdate};
use super::snapshot::Snapshotter;
use super::tracking::{tracking_params, CameraTracking};
use crate::config::Config;
use crate::controls::{CameraControls, Controls, Switch};
use crate::detection::{Detection, Labels};
use crate::frame::{FrameSlot, FrameTimings};
use crate::infer::step::{FrameSink, PipelineError};
use crate::service::telemetry::CameraStats;
use crate::sys::lock::lock;
use crate::track::events::Scene;

/// Per-camera state the sink keeps.
struct CameraEntry {
    name: String,
    stats: Arc<CameraStats>,
    snapshotter: Option<Mutex<Snapshotter>>,
    /// With `tracking.enabled`.
    tracking: Option<Mutex<CameraTracking>>,
    /// The camera's run-time switches (detection, snapshots).
    switches: Option<Arc<CameraControls>>,
}

/// Turns processed frames into values for the outlets, and statistics.
pub struct PublishSink {
    outlets: Outlets,
    labels: Arc<Labels>,
    /// In config order.
    cameras: Vec<CameraEntry>,
    ended: mpsc::Sender<Ended>,
}

/// A camera or inference worker that stopped (`what` names it): `Err` carries why it failed.
pub type Ended = (String, Result<(), String>);

impl PublishSink {
    /// Sets up every camera's tracking and snapshots, and gives the outlets what subscribers need
    /// before the first frame ([`Outlet::starting`], then each camera's zone counts at 0). `scenes`
    /// are the cameras' zones and lines and `stats` their statistics, both in config order; the
    /// end of every camera and inference worker is reported on `ended`. `run` (this start's id)
    /// and a per-camera sequence number stamp every event; `controls` say whether a camera's
    /// periodic snapshots are made.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        config: &Config,
        run: Arc<str>,
        labels: Arc<Labels>,
        scenes: Vec<Scene>,
        stats: Vec<Arc<CameraStats>>,
        ended: mpsc::Sender<Ended>,
        outlets: Outlets,
        controls: Arc<Controls>,
    ) -> PublishSink {
        outlets.starting(config);
        let event_snapshots = config.snapshot.events.then_some(config.snapshot.jpeg_quality);
        let cameras = config
            .cameras
            .iter()
            .zip(scenes)
            .zip(stats)
            .map(|((camera, scene), stats)| {
                let tracking = config.tracking.enabled.then(|| {
                    let mut tracking = CameraTracking::new(
                        &camera.name,
                        tracking_params(&config.tracking),
                        scene,
                        event_snapshots,
                        Some(run.clone()),
                    );
                    outlets.tracking(&camera.name, &tracking.startup());
                    Mutex::new(tracking)
                });
                CameraEntry {
                    name: camera.name.clone(),
                    stats,
                    snapshotter: config.snapshot.enabled.then(|| Mutex::new(Snapshotter::new(&config.snapshot))),
                    tracking,
                    switches: controls.camera(&camera.name).cloned(),
                }
            })
            .collect();
        PublishSink { outlets, labels, cameras, ended }
    }

    fn camera(&self, name: &str) -> Option<&CameraEntry> {
        self.cameras.iter().find(|entry| entry.name == name)
    }

    /// The statistics of `camera`, which telemetry reports.
    pub fn camera_stats(&self, camera: &str) -> Option<&Arc<CameraStats>> {
        self.camera(camera).map(|entry| &entry.stats)
    }

    /// The labels every message names classes with.
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// Applies a reloaded `config`'s tracking settings and each camera's zones and lines
    /// (`scenes`, in config order) — live tracks continue —, then tells the outlets
    /// ([`Outlet::reconfigured`]: publish settings, discovery, the live view's config).
    pub fn reload(&self, config: &Config, scenes: Vec<Scene>) {
        let params = tracking_params(&config.tracking);
        for (camera, scene) in config.cameras.iter().zip(scenes) {
            if let Some(tracking) = self.camera(&camera.name).and_then(|entry| entry.tracking.as_ref()) {
                self.outlets.tracking(&camera.name, &lock(tracking).reload(params, scene));
            }
        }
        self.outlets.reconfigured(config);
    }

    /// Applies one camera's new zones and lines (saved from the page; `config` is the running
    /// config with them in place): its live tracks continue, as with [`PublishSink::reload`].
    pub fn apply_scene(&self, config: &Config, camera: &str, scene: Scene) {
        if let Some(tracking) = self.camera(camera).and_then(|entry| entry.tracking.as_ref()) {
            self.outlets.tracking(camera, &lock(tracking).reload(tracking_params(&config.tracking), scene));
        }
        self.outlets.reconfigured(config);
    }

    /// `camera`'s detection was switched off: its frames stop coming, so its tracks end now
    /// (`end` events, counts back to 0) instead of staying in view.
    pub fn stop_detection(&self, camera: &str) {
        if let Some(entry) = self.camera(camera) {
            self.finish_camera(entry);
        }
    }

    /// Ends every camera's tracks: `end` events, event snapshots, counts back to 0 (shutdown).
    pub fn finish_tracking(&self) {
        for entry in &self.cameras {
            self.finish_camera(entry);
        }
    }

    fn finish_camera(&self, entry: &CameraEntry) {
        if let Some(tracking) = &entry.tracking {
            let clips = |event: &ObjectEvent| self.outlets.clip_of(&entry.name, event);
            self.outlets.tracking(&entry.name, &lock(tracking).finish(&clips));
        }
    }
}

impl FrameSink for PublishSink {
    fn frame(&self, camera: &str, slot: &FrameSlot, detections: &[Detection], timings: &FrameTimings) {
        let Some(entry) = self.camera(camera) else { return };
        // A frame that was on its way when the camera's detection was switched off: its tracks have
        // ended and its counts are 0; it must not bring them back.
        if entry.switches.as_ref().is_some_and(|switches| !switches.get(Switch::Detect)) {
            return;
        }
        let publish_started = Instant::now();
        let mut tracking = entry.tracking.as_ref().map(lock);
        let (track_ids, update) = match tracking.as_mut() {
            Some(tracking) => {
                tracking.frame(slot, detections, &self.labels, &|event| self.outlets.clip_of(camera, event))
            }
            None => (&[][..], TrackingUpdate::default()),
        };
        let snapshots_on = entry.switches.as_ref().is_none_or(|switches| switches.get(Switch::Snapshots));
        let snapshot = entry.snapshotter.as_ref().filter(|_| snapshots_on).and_then(|snapshotter| {
            match lock(snapshotter).maybe_render(slot, detections, &self.labels, publish_started) {
                Ok(jpeg) => jpeg,
                Err(e) => {
                    log::warn!("camera {camera}: snapshot failed: {e}");
                    None
                }
            }
        });
        self.outlets.frame(&FrameResult {
            camera,
            slot,
            detections,
            track_ids,
            timings,
            tracking: update,
            snapshot: snapshot.as_deref(),
        });
        drop(tracking);
        let mut timings = *timings;
        timings.publish = Some(publish_started.elapsed());
        entry.stats.record_frame(&timings);
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
