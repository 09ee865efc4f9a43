//! The per-frame sink of the daemon: every processed frame becomes messages and statistics.
//!
//! Owns: per camera, the step "track → publish policy → detections payload → tracking messages →
//! snapshot → MQTT outbox" and the frame's statistics; what the live view gets (a frame when a
//! reader asked for one, every event); Home Assistant discovery at start and on reload; the end
//! reports of cameras and inference workers. Runs on the inference worker, so it
//! must not block: publishing is a hand-over to the MQTT connection task's bounded outbox. Must
//! not: run inference, touch frame rings, or read files.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::mpsc;

use super::live::LiveView;
use super::mqtt::counts::LabelCounts;
use super::mqtt::homeassistant::{discovery_messages, DiscoveryContext, ZoneDiscovery};
use super::mqtt::policy::PublishPolicy;
use super::mqtt::Publisher;
use super::payload::{tracked_detections_message, Latency};
use super::snapshot::Snapshotter;
use super::tracking::{tracking_params, CameraTracking, Outgoing};
use crate::config::Config;
use crate::detection::{Detection, Labels};
use crate::frame::{FrameSlot, FrameTimings};
use crate::infer::step::{FrameSink, PipelineError};
use crate::service::run_id::Stamp;
use crate::service::telemetry::CameraStats;
use crate::sys::lock::lock;
use crate::track::events::Scene;

/// Per-camera state the sink keeps.
struct CameraEntry {
    stats: Arc<CameraStats>,
    policy: Mutex<PublishPolicy>,
    snapshotter: Option<Mutex<Snapshotter>>,
    /// With `tracking.enabled`.
    tracking: Option<Mutex<CameraTracking>>,
    /// With Home Assistant discovery: the counts of `homeassistant.labels` its sensors read.
    counts: Option<Mutex<LabelCounts>>,
    detections_topic: String,
    snapshot_topic: String,
    /// Detections messages of this camera so far in the run (their `seq`).
    detections_seq: AtomicU64,
    events_topic: String,
    /// Index of the camera in the live view.
    live: usize,
}

/// Turns processed frames into MQTT messages and statistics.
pub struct PublishSink {
    publisher: Publisher,
    /// This start's run id (`crate::service::run_id::Stamp`).
    run: Arc<str>,
    labels: Arc<Labels>,
    cameras: HashMap<String, CameraEntry>,
    ended: mpsc::Sender<Ended>,
    /// With Home Assistant discovery: the zone entities published, so a reload can remove the
    /// ones whose zone is gone.
    zone_discovery: Option<Mutex<ZoneDiscovery>>,
    /// What the HTTP stage shows: frames on request, events.
    live: Arc<LiveView>,
}

/// A camera or inference worker that stopped (`what` names it): `Err` carries why it failed.
pub type Ended = (String, Result<(), String>);

impl PublishSink {
    /// Sets up every camera's publishing and tracking, and publishes what subscribers need before
    /// the first frame: Home Assistant discovery and each camera's tracking start-up (zone counts
    /// at 0). `scenes` are the cameras' zones and lines in config order; the end of every camera
    /// and inference worker is reported on `ended`. `run` (this start's id) and a per-camera
    /// sequence number stamp every detections and event message. Each camera's statistics are the
    /// live view's.
    pub fn start(
        config: &Config,
        publisher: Publisher,
        run: Arc<str>,
        labels: Arc<Labels>,
        scenes: Vec<Scene>,
        ended: mpsc::Sender<Ended>,
        live: Arc<LiveView>,
    ) -> PublishSink {
        let camera_names: Vec<String> = config.cameras.iter().map(|c| c.name.clone()).collect();
        let mut zone_discovery = None;
        if config.homeassistant.discovery {
            let prefix = config.topic_prefix();
            let device_id = config.device_id();
            let context = DiscoveryContext {
                device_id: &device_id,
                topic_prefix: &prefix,
                cameras: &camera_names,
                sw_version: env!("CARGO_PKG_VERSION"),
            };
            for message in discovery_messages(&config.homeassistant, &context) {
                publisher.publish(message.topic, message.payload, true);
            }
            if config.tracking.enabled {
                let mut discovery = ZoneDiscovery::new(config, device_id, prefix, camera_names.clone());
                for message in discovery.messages(config) {
                    publisher.publish(message.topic, message.payload, message.retain);
                }
                zone_discovery = Some(Mutex::new(discovery));
            }
        }
        let event_snapshots = config.snapshot.events.then_some(config.snapshot.jpeg_quality);
        let cameras = config
            .cameras
            .iter()
            .zip(scenes)
            .enumerate()
            .map(|(index, (camera, scene))| {
                let tracking = config.tracking.enabled.then(|| {
                    let mut tracking = CameraTracking::new(
                        &camera.name,
                        publisher.topic(&camera.name),
                        tracking_params(&config.tracking),
                        scene,
                        event_snapshots,
                        Some(run.clone()),
                    );
                    let mut out = Vec::new();
                    tracking.startup(&labels, &mut out);
                    for message in out {
                        publisher.publish(message.topic, message.payload, message.retain);
                    }
                    Mutex::new(tracking)
                });
                let counts = config.homeassistant.discovery.then(|| {
                    let mut counts = LabelCounts::new(&publisher.topic(&camera.name), &config.homeassistant.labels);
                    for message in counts.startup() {
                        publisher.publish(message.topic, message.payload, message.retain);
                    }
                    Mutex::new(counts)
                });
                let entry = CameraEntry {
                    stats: live.cameras[index].stats.clone(),
                    policy: Mutex::new(PublishPolicy::new(config.mqtt.publish, config.mqtt.max_rate_hz)),
                    snapshotter: config.snapshot.enabled.then(|| Mutex::new(Snapshotter::new(&config.snapshot))),
                    tracking,
                    counts,
                    detections_topic: publisher.topic(&format!("{}/detections", camera.name)),
                    snapshot_topic: publisher.topic(&format!("{}/snapshot", camera.name)),
                    detections_seq: AtomicU64::new(0),
                    events_topic: publisher.topic(&format!("{}/events", camera.name)),
                    live: index,
                };
                (camera.name.clone(), entry)
            })
            .collect();
        PublishSink { publisher, run, labels, cameras, ended, zone_discovery, live }
    }

    /// The statistics of `camera`, which telemetry reports.
    pub fn camera_stats(&self, camera: &str) -> Option<&Arc<CameraStats>> {
        self.cameras.get(camera).map(|entry| &entry.stats)
    }

    /// The labels every message names classes with.
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// Applies a reloaded `config`'s publish and tracking settings and each camera's zones and
    /// lines (`scenes`, in config order); live tracks continue. Says which settings it could not
    /// apply.
    pub fn reload(&self, config: &Config, scenes: Vec<Scene>) {
        for entry in self.cameras.values() {
            lock(&entry.policy).update(config.mqtt.publish, config.mqtt.max_rate_hz);
        }
        let tracking = tracking_params(&config.tracking);
        for (camera, scene) in config.cameras.iter().zip(scenes) {
            let Some(tracker) = self.cameras.get(&camera.name).and_then(|entry| entry.tracking.as_ref()) else {
                continue;
            };
            let mut out = Vec::new();
            lock(tracker).reload(tracking, scene, &self.labels, &mut out);
            self.publish_tracking(&camera.name, out);
        }
        if let Some(discovery) = &self.zone_discovery {
            let messages = lock(discovery).messages(config);
            self.publish_all(messages);
        }
    }

    /// Applies one camera's new zones and lines (saved from the page; `config` is the running
    /// config with them in place): its live tracks continue, as with [`PublishSink::reload`].
    pub fn apply_scene(&self, config: &Config, camera: &str, scene: Scene) {
        if let Some(tracker) = self.cameras.get(camera).and_then(|entry| entry.tracking.as_ref()) {
            let mut out = Vec::new();
            lock(tracker).reload(tracking_params(&config.tracking), scene, &self.labels, &mut out);
            self.publish_tracking(camera, out);
        }
        if let Some(discovery) = &self.zone_discovery {
            let messages = lock(discovery).messages(config);
            self.publish_all(messages);
        }
    }

    /// Publishes a camera's tracking messages; its events also go to the live view.
    fn publish_tracking(&self, camera: &str, messages: Vec<Outgoing>) {
        if let Some(entry) = self.cameras.get(camera) {
            for message in messages.iter().filter(|message| message.topic == entry.events_topic) {
                self.live.record_event(camera, &message.payload);
            }
        }
        self.publish_all(messages);
    }

    fn publish_all(&self, messages: Vec<Outgoing>) {
        for message in messages {
            self.publisher.publish(message.topic, message.payload, message.retain);
        }
    }

    /// Ends every camera's tracks: `end` events, event snapshots, counts back to 0 (shutdown).
    pub fn finish_tracking(&self) {
        for (camera, entry) in &self.cameras {
            if let Some(tracking) = &entry.tracking {
                let mut out = Vec::new();
                lock(tracking).finish(&self.labels, &mut out);
                self.publish_tracking(camera, out);
            }
        }
    }
}

impl FrameSink for PublishSink {
    fn frame(&self, camera: &str, slot: &FrameSlot, detections: &[Detection], timings: &FrameTimings) {
        let Some(entry) = self.cameras.get(camera) else { return };
        let publish_started = Instant::now();
        let mut tracking_messages = Vec::new();
        let mut tracking = entry.tracking.as_ref().map(lock);
        let track_ids = match tracking.as_mut() {
            Some(tracking) => tracking.frame(slot, detections, &self.labels, &mut tracking_messages),
            None => &[],
        };
        if lock(&entry.policy).should_publish(detections, publish_started) {
            let latency = Latency::from(timings);
            let stamp = Stamp { run: &self.run, seq: entry.detections_seq.fetch_add(1, Ordering::Relaxed) };
            let payload = tracked_detections_message(
                camera,
                slot.meta(),
                &latency,
                detections,
                track_ids,
                &self.labels,
                Some(stamp),
            );
            self.publisher.publish_per_frame(entry.detections_topic.clone(), payload, false);
        }
        self.live.cameras[entry.live].offer(slot, detections, track_ids);
        drop(tracking);
        self.publish_tracking(camera, tracking_messages);
        if let Some(counts) = &entry.counts {
            let changed = lock(counts).frame(detections, &self.labels);
            self.publish_all(changed);
        }
        if let Some(snapshotter) = &entry.snapshotter {
            match lock(snapshotter).maybe_render(slot, detections, &self.labels, publish_started) {
                Ok(Some(jpeg)) => self.publisher.publish_per_frame(entry.snapshot_topic.clone(), jpeg, true),
                Ok(None) => {}
                Err(e) => log::warn!("camera {camera}: snapshot failed: {e}"),
            }
        }
        let mut timings = *timings;
        timings.publish = Some(publish_started.elapsed());
        entry.stats.record_frame(&timings);
    }

    fn camera_ended(&self, camera: &str, result: &Result<(), PipelineError>) {
        // Its objects are out of sight for good: their events end now.
        if let Some(tracking) = self.cameras.get(camera).and_then(|entry| entry.tracking.as_ref()) {
            let mut out = Vec::new();
            lock(tracking).finish(&self.labels, &mut out);
            self.publish_tracking(camera, out);
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
