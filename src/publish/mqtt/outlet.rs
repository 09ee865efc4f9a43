//! The MQTT outlet: the one place where the pipeline's values become topics and bytes.
//!
//! Owns: every topic under `<prefix>` and what goes on it — per camera `detections` (under
//! `mqtt.publish` and `mqtt.max_rate_hz`, stamped with the run and a per-camera sequence),
//! `events` and each `end`'s `events/snapshot/<label>/<track id>`, the retained `zones/…` and
//! `counts/<label>` values and `snapshot`; `telemetry` (stamped with its own sequence) and
//! `status`; Home Assistant discovery (at start and whenever the zones change). It runs on the
//! inference worker, so it only encodes and hands each message to the publisher's bounded outbox
//! ([`Publisher`]); the connection task does the rest. Must not: decide what happened (tracking
//! and the sink do), or block.
//!
//! The state Home Assistant's birth message will need re-sent (issue 34) lives here: the label
//! counts ([`LabelCounts`]), the zone entities ([`ZoneDiscovery`]) and the status (the outbox's);
//! zone counts come from tracking (`crate::publish::outlet` says how).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::counts::LabelCounts;
use super::homeassistant::{discovery_messages, DiscoveryContext, ZoneDiscovery};
use super::outbox::Outgoing;
use super::policy::PublishPolicy;
use super::{MqttError, MqttSettings, Publisher, STATUS_BUILDING, STATUS_ONLINE};
use crate::config::{topic_segment, Config};
use crate::detection::Labels;
use crate::publish::events::EventMessage;
use crate::publish::outlet::{ConnectionStats, DaemonStatus, FrameResult, Outlet, TrackingUpdate};
use crate::publish::payload::{tracked_detections_message, Latency};
use crate::service::run_id::Stamp;
use crate::service::telemetry::{telemetry_message, TelemetryReport};
use crate::sys::lock::lock;
use crate::track::events::EventKind;

/// What the retained status topic says.
fn status_payload(status: DaemonStatus) -> &'static str {
    match status {
        DaemonStatus::Building => STATUS_BUILDING,
        DaemonStatus::Online => STATUS_ONLINE,
    }
}

/// One camera's topics and publishing state.
struct CameraTopics {
    /// `<prefix>/<camera>`.
    base: String,
    detections: String,
    snapshot: String,
    events: String,
    policy: Mutex<PublishPolicy>,
    /// With Home Assistant discovery: the counts of `homeassistant.labels` its sensors read.
    counts: Option<Mutex<LabelCounts>>,
    /// Detections messages of this camera so far in the run (their `seq`).
    detections_seq: AtomicU64,
}

/// The MQTT outlet; see the module doc.
pub struct MqttOutlet {
    publisher: Publisher,
    /// This start's run id (`crate::service::run_id::Stamp`).
    run: Arc<str>,
    labels: Arc<Labels>,
    cameras: HashMap<String, CameraTopics>,
    /// With Home Assistant discovery and tracking: the zone entities published, so a reload can
    /// remove the ones whose zone is gone.
    zone_discovery: Option<Mutex<ZoneDiscovery>>,
    /// Telemetry messages so far in the run.
    telemetry_seq: AtomicU64,
}

impl std::fmt::Debug for MqttOutlet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MqttOutlet").field("publisher", &self.publisher).field("run", &self.run).finish()
    }
}

impl MqttOutlet {
    /// Connects in the background (inside a tokio runtime) with `status` on the retained status
    /// topic; publishes nothing else until told. `run` (this start's id) and a per-kind sequence
    /// number stamp every JSON message but the status.
    pub fn start(
        settings: MqttSettings,
        status: DaemonStatus,
        config: &Config,
        run: Arc<str>,
        labels: Arc<Labels>,
    ) -> Result<MqttOutlet, MqttError> {
        let publisher = Publisher::start_with_status(settings, status_payload(status))?;
        Ok(MqttOutlet::new(config, publisher, run, labels))
    }

    fn new(config: &Config, publisher: Publisher, run: Arc<str>, labels: Arc<Labels>) -> MqttOutlet {
        let cameras = config
            .cameras
            .iter()
            .map(|camera| {
                let base = publisher.topic(&camera.name);
                let topics = CameraTopics {
                    detections: format!("{base}/detections"),
                    snapshot: format!("{base}/snapshot"),
                    events: format!("{base}/events"),
                    policy: Mutex::new(PublishPolicy::new(config.mqtt.publish, config.mqtt.max_rate_hz)),
                    counts: config
                        .homeassistant
                        .discovery
                        .then(|| Mutex::new(LabelCounts::new(&base, &config.homeassistant.labels))),
                    detections_seq: AtomicU64::new(0),
                    base,
                };
                (camera.name.clone(), topics)
            })
            .collect();
        let zone_discovery = (config.homeassistant.discovery && config.tracking.enabled).then(|| {
            let names = config.cameras.iter().map(|c| c.name.clone()).collect();
            Mutex::new(ZoneDiscovery::new(config, config.device_id(), config.topic_prefix(), names))
        });
        MqttOutlet { publisher, run, labels, cameras, zone_discovery, telemetry_seq: AtomicU64::new(0) }
    }

    /// `<prefix>/`, for the log.
    pub fn topic_root(&self) -> String {
        self.publisher.topic("")
    }

    /// Publishes `offline`, flushes within `mqtt.shutdown_flush_ms` and disconnects
    /// ([`Publisher::shutdown`]).
    pub async fn shutdown(&self) {
        self.publisher.shutdown().await;
    }

    fn publish_all(&self, messages: Vec<Outgoing>) {
        for message in messages {
            self.publisher.publish(message.topic, message.payload, message.retain);
        }
    }

    /// Events (each `end` followed by its picture), then the zone counts that changed.
    fn publish_tracking(&self, camera: &str, topics: &CameraTopics, update: &TrackingUpdate<'_>) {
        for event in update.events {
            let message = EventMessage::new(camera, event, &self.labels);
            self.publisher.publish(topics.events.clone(), message.to_json(), false);
            if event.kind != EventKind::End {
                continue;
            }
            if let Some(picture) = &event.picture {
                let topic =
                    format!("{}/events/snapshot/{}/{}", topics.base, topic_segment(&message.label), event.track_id);
                self.publisher.publish(topic, picture.to_vec(), false);
            }
        }
        for change in update.occupancy {
            let topic = match change.class_id {
                None => format!("{}/zones/{}", topics.base, change.zone),
                Some(class_id) => {
                    format!("{}/zones/{}/{}", topics.base, change.zone, topic_segment(&self.labels.name(class_id)))
                }
            };
            // An empty retained message deletes the retained value of a zone that no longer exists.
            let payload = change.count.map(|count| count.to_string().into_bytes()).unwrap_or_default();
            self.publisher.publish(topic, payload, true);
        }
    }
}

impl Outlet for MqttOutlet {
    /// Home Assistant discovery (count sensors, availability, zones) and every label count at 0.
    fn starting(&self, config: &Config) {
        if config.homeassistant.discovery {
            let prefix = config.topic_prefix();
            let device_id = config.device_id();
            let names: Vec<String> = config.cameras.iter().map(|c| c.name.clone()).collect();
            let context = DiscoveryContext {
                device_id: &device_id,
                topic_prefix: &prefix,
                cameras: &names,
                sw_version: env!("CARGO_PKG_VERSION"),
            };
            for message in discovery_messages(&config.homeassistant, &context) {
                self.publisher.publish(message.topic, message.payload, true);
            }
        }
        if let Some(discovery) = &self.zone_discovery {
            let messages = lock(discovery).messages(config);
            self.publish_all(messages);
        }
        for camera in &config.cameras {
            if let Some(counts) = self.cameras.get(&camera.name).and_then(|topics| topics.counts.as_ref()) {
                let messages = lock(counts).startup();
                self.publish_all(messages);
            }
        }
    }

    fn frame(&self, frame: &FrameResult<'_>) {
        let Some(topics) = self.cameras.get(frame.camera) else { return };
        if lock(&topics.policy).should_publish(frame.detections, Instant::now()) {
            let stamp = Stamp { run: &self.run, seq: topics.detections_seq.fetch_add(1, Ordering::Relaxed) };
            let payload = tracked_detections_message(
                frame.camera,
                frame.slot.meta(),
                &Latency::from(frame.timings),
                frame.detections,
                frame.track_ids,
                &self.labels,
                Some(stamp),
            );
            self.publisher.publish_per_frame(topics.detections.clone(), payload, false);
        }
        self.publish_tracking(frame.camera, topics, &frame.tracking);
        if let Some(counts) = &topics.counts {
            let changed = lock(counts).frame(frame.detections, &self.labels);
            self.publish_all(changed);
        }
        if let Some(jpeg) = frame.snapshot {
            self.publisher.publish_per_frame(topics.snapshot.clone(), jpeg.to_vec(), true);
        }
    }

    fn tracking(&self, camera: &str, update: &TrackingUpdate<'_>) {
        if let Some(topics) = self.cameras.get(camera) {
            self.publish_tracking(camera, topics, update);
        }
    }

    /// New publish settings; zone discovery for the zones as they are now (removing those gone).
    fn reconfigured(&self, config: &Config) {
        for topics in self.cameras.values() {
            lock(&topics.policy).update(config.mqtt.publish, config.mqtt.max_rate_hz);
        }
        if let Some(discovery) = &self.zone_discovery {
            let messages = lock(discovery).messages(config);
            self.publish_all(messages);
        }
    }

    fn status(&self, status: DaemonStatus) {
        self.publisher.set_status(status_payload(status));
    }

    fn telemetry(&self, report: &TelemetryReport<'_>) {
        let stamp = Stamp { run: &self.run, seq: self.telemetry_seq.fetch_add(1, Ordering::Relaxed) };
        let stamped = TelemetryReport { stamp: Some(stamp), ..report.clone() };
        self.publisher.publish(self.publisher.topic("telemetry"), telemetry_message(&stamped), false);
    }

    fn connection(&self) -> Option<ConnectionStats> {
        Some(self.publisher.stats())
    }
}
