//! The MQTT outlet: the one place where the pipeline's values become topics and bytes, and where
//! what arrives on the daemon's subscriptions becomes a change of its controls.
//!
//! Owns: every topic under `<prefix>` and what goes on it ([`super::topics`] names them) — per
//! camera `detections` (under `mqtt.publish` and `mqtt.max_rate_hz`, stamped with the run and a
//! per-camera sequence), `events` and each `end`'s `events/snapshot/<label>/<track id>`, the
//! retained `zones/…` and `counts/<label>` values, `snapshot` and `controls/<switch>`; the
//! retained `telemetry` (stamped with its own sequence), `controls/score_threshold` and `status`;
//! Home Assistant discovery ([`super::homeassistant`]: at start and whenever the config changes).
//! Everything that says how things are now is published as retained *state*
//! ([`Publisher::publish_state`]): the publisher sends it again after every reconnect, and this
//! outlet has it sent again when Home Assistant announces itself (`online` on
//! `homeassistant.status_topic`), so its entities come back after any restart of anything. At start
//! every count a discovered sensor reads gets a value (0) before the status says `online`.
//!
//! Commands: `<prefix>/<camera>/controls/<switch>/set` (`ON`/`OFF`) and
//! `<prefix>/controls/score_threshold/set` set the [`Controls`]; `crate::cmd::run` applies the
//! change and tells the outlets ([`Outlet::controls`]), which is when the new state is published.
//! Commands are events, not state: a retained one (the broker sends it at every subscription, so
//! at every start and reconnect it would undo what was set since, over HTTP or kept in the
//! controls file) is ignored and cleared, with a note; an empty one is such a clearing. A refused
//! command is logged with an excerpt of its payload, at most once per [`COMMAND_LOG_INTERVAL`]
//! with the count of those not logged.
//! With discovery, the outlet also subscribes to this device's discovery configs: those the broker
//! kept of entities no longer configured (removed while the daemon was stopped) are deleted, with
//! the retained values only they read. The subscription's messages are read by a task of this
//! outlet, never by the inference worker.
//!
//! Runs on the inference worker (frames, tracking), so it only encodes and hands each message to
//! the publisher's bounded outbox; the connection task does the rest. Must not: decide what
//! happened (tracking and the sink do), apply a control change, or block.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::config::{HomeAssistantConfig, MqttConfig};
use super::counts::LabelCounts;
use super::homeassistant::{discovery_filter, Announcement, BoardSensors, Discovery, DiscoveryContext, Stale};
use super::inbound::TOPIC_EXCERPT_CHARS;
use super::inbound::{Inbound, Incoming};
use super::message::Outgoing;
use super::outbox::{MqttStats, STATUS_BUILDING, STATUS_ONLINE};
use super::policy::PublishPolicy;
use super::publisher::Publisher;
use super::retained::StateClass;
use super::settings::{MqttError, MqttSettings};
use super::topics::{self, CommandTopic};
use crate::config::{topic_segment, Config};
use crate::controls::{ControlError, ControlValues, Controls, Switch};
use crate::detection::Labels;
use crate::frame::FrameSlot;
use crate::infer::gating::MotionConfig;
use crate::publish::event_message::EventMessage;
use crate::publish::figures::{self, Metric, OutletFigures};
use crate::publish::outlet::{DaemonStatus, FrameResult, Outlet, Stop, Stopping, TrackingUpdate};
use crate::publish::payload::{tracked_detections_message, Latency};
use crate::service::run_id::Stamp;
use crate::service::telemetry::{telemetry_message, TelemetryReport};
use crate::sys::lock::lock;
use crate::sys::log_limit::{excerpt, RateLimitedLog};
use crate::track::events::EventKind;

/// Commands, birth messages and this device's discovery configs (at each subscription the broker
/// sends every retained one: about a dozen per camera) waiting for the outlet's task; more are
/// dropped (and logged).
const INBOUND_QUEUE: usize = 1024;
/// Characters of a command's payload a log line shows.
const PAYLOAD_EXCERPT_CHARS: usize = 40;
/// At most one line per this for refused commands, and for retained commands cleared.
const COMMAND_LOG_INTERVAL: Duration = Duration::from_secs(10);

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
    /// The camera records clips: it has a `record` switch to publish.
    records: bool,
    /// `[motion]` is enabled: the camera has a `gating` switch to publish.
    gates: bool,
}

impl CameraTopics {
    /// Whether the camera has `switch` to publish: `record` only when it records, `gating` only
    /// with motion gating.
    fn shows(&self, switch: Switch) -> bool {
        match switch {
            Switch::Record => self.records,
            Switch::Gating => self.gates,
            Switch::Detect | Switch::Snapshots => switch.on_every_camera(),
        }
    }
}

/// Home Assistant discovery: what was announced, and the zone counts that have a value.
struct HomeAssistant {
    discovery: Discovery,
    board: BoardSensors,
    /// Zone count topics published in this run: a discovered one without a value gets 0.
    zone_values: BTreeSet<String>,
}

/// The MQTT outlet; see the module doc.
pub struct MqttOutlet {
    publisher: Publisher,
    prefix: String,
    /// This start's run id (`crate::service::run_id::Stamp`).
    run: Arc<str>,
    labels: Arc<Labels>,
    cameras: HashMap<String, CameraTopics>,
    /// With `homeassistant.discovery`.
    home_assistant: Option<Arc<Mutex<HomeAssistant>>>,
    controls: Arc<Controls>,
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
    /// topic, subscribed to the command topics (and with discovery to Home Assistant's status
    /// topic); publishes nothing else until told. `run` (this start's id) and a per-kind sequence
    /// number stamp every JSON message but the status. Commands set `controls`; `board` says which
    /// board sensors Home Assistant gets.
    pub fn start(
        settings: MqttSettings,
        status: DaemonStatus,
        config: &Config,
        run: Arc<str>,
        labels: Arc<Labels>,
        controls: Arc<Controls>,
        board: BoardSensors,
    ) -> Result<MqttOutlet, MqttError> {
        let prefix = MqttConfig::of(config).topic_prefix(config);
        let discovery = HomeAssistantConfig::of(config);
        let home_assistant_status = discovery.discovery.then(|| discovery.status_topic());
        let home_assistant = discovery.discovery.then(|| {
            Arc::new(Mutex::new(HomeAssistant { discovery: Discovery::default(), board, zone_values: BTreeSet::new() }))
        });
        let (sender, receiver) = mpsc::channel(INBOUND_QUEUE);
        let mut filters: Vec<String> = topics::command_filters(&prefix).into();
        filters.extend(home_assistant_status.clone());
        // The configs of this device the broker kept: those of entities gone since an earlier run
        // are deleted.
        let discovered = home_assistant.as_ref().map(|home_assistant| {
            let filter = discovery_filter(config);
            filters.push(filter.clone());
            DiscoveredConfigs { filter, home_assistant: home_assistant.clone() }
        });
        let publisher =
            Publisher::start_with_status(settings, status_payload(status), Some(Inbound { filters, sender }))?;
        let commands = Commands {
            publisher: publisher.clone(),
            controls: controls.clone(),
            prefix,
            home_assistant_status,
            discovered,
            refused_log: RateLimitedLog::new(COMMAND_LOG_INTERVAL),
            retained_log: RateLimitedLog::new(COMMAND_LOG_INTERVAL),
        };
        tokio::spawn(commands.serve(receiver));
        log::info!("MQTT: publishing under {}", publisher.topic(""));
        Ok(MqttOutlet::new(config, publisher, run, labels, controls, home_assistant))
    }

    fn new(
        config: &Config,
        publisher: Publisher,
        run: Arc<str>,
        labels: Arc<Labels>,
        controls: Arc<Controls>,
        home_assistant: Option<Arc<Mutex<HomeAssistant>>>,
    ) -> MqttOutlet {
        let (mqtt, discovery) = (MqttConfig::of(config), HomeAssistantConfig::of(config));
        let prefix = mqtt.topic_prefix(config);
        let gates = config.sections.get::<MotionConfig>().is_some_and(|motion| motion.enabled);
        let cameras = config
            .cameras
            .iter()
            .map(|camera| {
                let base = publisher.topic(&camera.name);
                let topics = CameraTopics {
                    detections: format!("{base}/detections"),
                    snapshot: topics::snapshot(&prefix, &camera.name),
                    events: format!("{base}/events"),
                    policy: Mutex::new(PublishPolicy::new(mqtt.publish, mqtt.max_rate_hz)),
                    counts: discovery
                        .discovery
                        .then(|| Mutex::new(LabelCounts::new(&prefix, &camera.name, &discovery.labels))),
                    detections_seq: AtomicU64::new(0),
                    records: config.recording(camera).is_some(),
                    gates,
                    base,
                };
                (camera.name.clone(), topics)
            })
            .collect();
        MqttOutlet {
            publisher,
            prefix,
            run,
            labels,
            cameras,
            home_assistant,
            controls,
            telemetry_seq: AtomicU64::new(0),
        }
    }

    /// The outbox's counters as of now.
    pub fn stats(&self) -> MqttStats {
        self.publisher.stats()
    }

    fn publish_values(&self, messages: Vec<Outgoing>) {
        for message in messages {
            self.publisher.publish_state(StateClass::Value, message.topic, message.payload);
        }
    }

    /// Discovery for `config` (removing the entities that are gone), then 0 for every zone count
    /// of `homeassistant.labels` that a zone without labels of its own has a sensor for and that
    /// has no value yet in this run. (Tracking itself starts every zone's total and its own labels'
    /// counts at 0, at start and for a zone a reload adds.)
    fn announce(&self, config: &Config) {
        let Some(home_assistant) = &self.home_assistant else { return };
        let mut home_assistant = lock(home_assistant);
        let context = DiscoveryContext { config, sw_version: env!("CARGO_PKG_VERSION"), board: home_assistant.board };
        for Announcement { topic, payload } in home_assistant.discovery.messages(&context) {
            self.publisher.publish_state(StateClass::Config, topic, payload);
        }
        let early = home_assistant.discovery.take_early();
        delete_stale(&self.publisher, early);
        if !config.tracking.enabled {
            return;
        }
        for camera in &config.cameras {
            for zone in camera.zones.iter().filter(|zone| zone.labels.is_empty()) {
                for label in &HomeAssistantConfig::of(config).labels {
                    let topic = topics::zone_label(&self.prefix, &camera.name, &zone.name, label);
                    if home_assistant.zone_values.insert(topic.clone()) {
                        self.publisher.publish_state(StateClass::Value, topic, b"0".to_vec());
                    }
                }
            }
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
                None => topics::zone_total(&self.prefix, camera, &change.zone),
                Some(class_id) => topics::zone_label(&self.prefix, camera, &change.zone, &self.labels.name(class_id)),
            };
            if let Some(home_assistant) = &self.home_assistant {
                let mut home_assistant = lock(home_assistant);
                match change.count {
                    Some(_) => home_assistant.zone_values.insert(topic.clone()),
                    None => home_assistant.zone_values.remove(&topic),
                };
            }
            // An empty retained message deletes the retained value of a zone that no longer exists.
            let payload = change.count.map(|count| count.to_string().into_bytes()).unwrap_or_default();
            self.publisher.publish_state(StateClass::Value, topic, payload);
        }
    }

    /// `camera`'s label counts (with discovery) back to 0: it sees nothing now.
    fn zero_label_counts(&self, camera: &str) {
        if let Some(counts) = self.cameras.get(camera).and_then(|topics| topics.counts.as_ref()) {
            let messages = lock(counts).frame(&[], &self.labels);
            self.publish_values(messages);
        }
    }

    /// Every control's state; a camera that does not record has no `record` switch to show, and
    /// none has a `gating` switch without `[motion]`.
    fn publish_controls(&self, values: &ControlValues) {
        let threshold = format!("{}", (values.score_threshold * 1000.0).round() / 1000.0);
        self.publisher.publish_state(StateClass::Value, topics::threshold_state(&self.prefix), threshold.into_bytes());
        for (camera, switches) in &values.cameras {
            let camera_topics = self.cameras.get(camera);
            // A camera the outlet does not know (yet) shows the switches every camera has.
            let shows = |switch: Switch| camera_topics.map_or(switch.on_every_camera(), |t| t.shows(switch));
            for switch in Switch::ALL.into_iter().filter(|switch| shows(*switch)) {
                let payload = if switches.get(switch) { "ON" } else { "OFF" };
                let topic = topics::switch_state(&self.prefix, camera, switch);
                self.publisher.publish_state(StateClass::Value, topic, payload.as_bytes().to_vec());
            }
        }
    }
}

impl Outlet for MqttOutlet {
    fn name(&self) -> &str {
        "mqtt"
    }

    /// Home Assistant discovery (every entity, and 0 for every zone count it reads), every label
    /// count at 0 and every control's state.
    fn starting(&self, config: &Config) {
        self.announce(config);
        for camera in &config.cameras {
            if let Some(counts) = self.cameras.get(&camera.name).and_then(|topics| topics.counts.as_ref()) {
                let messages = lock(counts).startup();
                self.publish_values(messages);
            }
        }
        self.publish_controls(&self.controls.values());
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
                frame.attributes,
                &self.labels,
                Some(stamp),
            );
            self.publisher.publish_per_frame(topics.detections.clone(), payload, false);
        }
        self.publish_tracking(frame.camera, topics, &frame.tracking);
        if let Some(counts) = &topics.counts {
            let changed = lock(counts).frame(frame.detections, &self.labels);
            self.publish_values(changed);
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

    /// New publish settings; discovery for the config as it is now (removing what is gone).
    fn reconfigured(&self, config: &Config) {
        let mqtt = MqttConfig::of(config);
        for topics in self.cameras.values() {
            lock(&topics.policy).update(mqtt.publish, mqtt.max_rate_hz);
        }
        self.announce(config);
    }

    /// Every control's state.
    fn controls(&self, values: &ControlValues) {
        self.publish_controls(values);
    }

    /// The snapshot image goes on while detection is off.
    fn picture(&self, camera: &str, _slot: &FrameSlot, snapshot: Option<&[u8]>) {
        if let (Some(topics), Some(jpeg)) = (self.cameras.get(camera), snapshot) {
            self.publisher.publish_per_frame(topics.snapshot.clone(), jpeg.to_vec(), true);
        }
    }

    /// Retained, for the camera's motion binary sensor.
    fn motion(&self, camera: &str, moving: bool) {
        let payload = if moving { "ON" } else { "OFF" };
        self.publisher.publish_state(StateClass::Value, topics::motion(&self.prefix, camera), payload.into());
    }

    /// The camera's label counts go to 0.
    fn detection_stopped(&self, camera: &str) {
        self.zero_label_counts(camera);
    }

    /// The camera's label counts go to 0.
    fn camera_offline(&self, camera: &str) {
        self.zero_label_counts(camera);
    }

    fn status(&self, status: DaemonStatus) {
        self.publisher.set_status(status_payload(status));
    }

    /// Retained, so that a subscriber (Home Assistant's diagnostic sensors) has the latest at once.
    fn telemetry(&self, report: &TelemetryReport<'_>) {
        let stamp = Stamp { run: &self.run, seq: self.telemetry_seq.fetch_add(1, Ordering::Relaxed) };
        let stamped = TelemetryReport { stamp: Some(stamp), ..report.clone() };
        self.publisher.publish_state(StateClass::Value, topics::telemetry(&self.prefix), telemetry_message(&stamped));
    }

    /// The connection and its outbox (`outlets.mqtt` in telemetry); reconnects and takeovers are
    /// MQTT's own.
    fn figures(&self) -> Option<OutletFigures> {
        let stats = self.publisher.stats();
        let metrics = vec![
            figures::connected(stats.connected),
            figures::queued_messages(stats.queued),
            figures::queued_bytes(stats.queued_bytes),
            figures::delivered_messages(stats.published),
            figures::dropped_messages(stats.dropped),
            Metric::counter("mqtt_reconnects", "Connections to the broker after the first.", None, stats.reconnects),
            Metric::counter(
                "mqtt_takeovers",
                "Connections the broker closed while another client seemed to take the session (same client id).",
                None,
                stats.takeovers,
            ),
        ];
        Some(OutletFigures { connected: Some(stats.connected), report: OutletFigures::report_of(&stats), metrics })
    }

    /// Shutdown: `offline`, then what is queued within `mqtt.shutdown_flush_ms`, and a clean
    /// disconnect ([`Publisher::shutdown`]). After a failed start, the same when connected (a
    /// moment); not connected, at once: there is nobody to flush to, and waiting for a broker
    /// would only hold back the error. A connection made meanwhile then ends uncleanly, so the
    /// broker publishes the Last Will (`offline`) instead.
    /// Retries are no longer logged ([`Publisher::stopping`]): the stop says what was not sent.
    fn stopping(&self) {
        self.publisher.stopping();
    }

    fn stop(self: Arc<Self>, why: Stop) -> Stopping {
        Box::pin(async move {
            if why == Stop::Shutdown || self.publisher.stats().connected {
                self.publisher.shutdown().await;
            }
        })
    }
}

/// The outlet's task: commands on the control topics, and Home Assistant's birth message.
struct Commands {
    publisher: Publisher,
    controls: Arc<Controls>,
    prefix: String,
    /// With discovery: `homeassistant.status_topic`.
    home_assistant_status: Option<String>,
    /// With discovery: the configs of this device that arrive.
    discovered: Option<DiscoveredConfigs>,
    refused_log: RateLimitedLog,
    retained_log: RateLimitedLog,
}

/// Where this device's discovery configs arrive, and the discovery state that judges them.
struct DiscoveredConfigs {
    /// [`discovery_filter`]: `<discovery_prefix>/+/jetson-detectd_<id>/+/config`.
    filter: String,
    home_assistant: Arc<Mutex<HomeAssistant>>,
}

/// Deletes retained messages of entities gone since an earlier run: their configs, then the values
/// only they read.
fn delete_stale(publisher: &Publisher, stale: Stale) {
    if !stale.configs.is_empty() {
        log::info!(
            "Home Assistant: removing {} entities no longer configured: {:?}",
            stale.configs.len(),
            stale.configs
        );
    }
    for topic in stale.configs {
        publisher.publish_state(StateClass::Config, topic, Vec::new());
    }
    for topic in stale.values {
        publisher.publish_state(StateClass::Value, topic, Vec::new());
    }
}

impl Commands {
    /// Until the publisher's connection task ends (it holds the sender).
    async fn serve(mut self, mut receiver: mpsc::Receiver<Incoming>) {
        while let Some(incoming) = receiver.recv().await {
            self.handle(&incoming);
        }
    }

    fn handle(&mut self, incoming: &Incoming) {
        if self.home_assistant_status.as_deref() == Some(incoming.topic.as_str()) {
            if incoming.payload == b"online" {
                log::info!("MQTT: Home Assistant is online: sending discovery and every current value again");
                self.publisher.resync();
            }
            return;
        }
        if let Some(discovered) = self.discovered.as_ref().filter(|d| topic_matches(&d.filter, &incoming.topic)) {
            let stale = lock(&discovered.home_assistant).discovery.found(&incoming.topic, &incoming.payload);
            delete_stale(&self.publisher, stale);
            return;
        }
        let Some(command) = CommandTopic::parse(&self.prefix, &incoming.topic) else { return };
        if incoming.payload.is_empty() {
            // The deletion of a retained command (ours below, or another client's): no command.
            return;
        }
        let text = String::from_utf8_lossy(&incoming.payload);
        let text = text.trim();
        if incoming.retain {
            self.clear_retained(&incoming.topic, text);
            return;
        }
        let outcome = match command {
            CommandTopic::Switch { camera, switch } => match switch_payload(text) {
                // The camera's name is in the topic, which the log line shows cut to length.
                Some(on) => self.controls.set(&camera, switch, on).map_err(|error| match error {
                    ControlError::UnknownCamera(_) => "no camera of that name".to_owned(),
                    other => other.to_string(),
                }),
                None => Err(format!("{} is neither ON nor OFF", excerpt(text, PAYLOAD_EXCERPT_CHARS))),
            },
            CommandTopic::Threshold => match text.parse::<f32>() {
                Ok(value) => self.controls.set_score_threshold(value).map_err(|e| e.to_string()),
                Err(_) => Err(format!("{} is not a number", excerpt(text, PAYLOAD_EXCERPT_CHARS))),
            },
        };
        if let Err(message) = outcome {
            if let Some(more) = self.refused_log.admit(Instant::now()) {
                log::warn!(
                    "MQTT: command on {} refused: {message}; {more} more refused since the last report",
                    excerpt(&incoming.topic, TOPIC_EXCERPT_CHARS)
                );
            }
        }
    }

    /// A command the broker kept: applying it would undo, at every start and reconnect, what was
    /// set since. It is deleted from the broker (an empty retained message) and not applied.
    fn clear_retained(&mut self, topic: &str, text: &str) {
        if let Some(more) = self.retained_log.admit(Instant::now()) {
            log::warn!(
                "MQTT: ignored the retained command {} on {}, and cleared it: commands are events, not state \
                 (publish them without the retain flag); the controls file and the latest command apply; \
                 {more} more cleared since the last report",
                excerpt(text, PAYLOAD_EXCERPT_CHARS),
                excerpt(topic, TOPIC_EXCERPT_CHARS)
            );
        }
        self.publisher.publish(topic.to_owned(), Vec::new(), true);
    }
}

/// Whether `topic` matches the MQTT filter `filter` (`+` one level; no `#`).
fn topic_matches(filter: &str, topic: &str) -> bool {
    let (mut filter, mut topic) = (filter.split('/'), topic.split('/'));
    loop {
        match (filter.next(), topic.next()) {
            (None, None) => return true,
            (Some("+"), Some(_)) => {}
            (Some(level), Some(wanted)) if level == wanted => {}
            _ => return false,
        }
    }
}

/// `ON` / `OFF`, as Home Assistant's switches send them (any case).
fn switch_payload(text: &str) -> Option<bool> {
    if text.eq_ignore_ascii_case("on") {
        Some(true)
    } else if text.eq_ignore_ascii_case("off") {
        Some(false)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_matches_one_level_per_plus_and_nothing_longer_or_shorter() {
        let filter = "homeassistant/+/jetson-detectd_orin1/+/config";
        assert!(topic_matches(filter, "homeassistant/sensor/jetson-detectd_orin1/front_fps/config"));
        assert!(!topic_matches(filter, "homeassistant/sensor/jetson-detectd_orin2/front_fps/config"));
        assert!(!topic_matches(filter, "homeassistant/sensor/jetson-detectd_orin1/front_fps/config/x"));
        assert!(!topic_matches(filter, "homeassistant/status"));
    }

    #[test]
    fn switches_take_on_and_off_in_any_case_and_nothing_else() {
        assert_eq!(switch_payload("ON"), Some(true));
        assert_eq!(switch_payload("off"), Some(false));
        assert_eq!(switch_payload("1"), None);
        assert_eq!(switch_payload(""), None);
    }
}
