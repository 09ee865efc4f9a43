//! Home Assistant MQTT discovery: the retained config messages that make Home Assistant create
//! the daemon's device and its entities.
//!
//! One device, `jetson-detectd <device id>`, with:
//! - the daemon: `Online` (connectivity: on while `online` or `building`), `Engine` (`building`,
//!   `running`, `stopped`; the telemetry's `engine` section as attributes), `Engine build` (the
//!   state of an engine built while the CPU serves, `none` without one; `engine.build` as
//!   attributes: progress, which engine serves, the check's figures), `CPU`, and where the
//!   board reported them at start `SoC temperature` and `GPU load` (diagnostic sensors read from
//!   telemetry), the `Score threshold` (a number), and with a camera that records clips and
//!   telemetry reports, `Recording storage` (the record directory's GiB; clips, budget and pause
//!   as attributes);
//! - per camera: a count sensor per `homeassistant.labels` label and an `occupied` binary sensor
//!   per such label, an `all` count (objects of every label), with `[motion]` gating a `motion`
//!   binary sensor, switches for detection,
//!   recording (a camera that records clips) and (with `[snapshot]`) snapshots, the snapshot as
//!   an `image`, and diagnostic
//!   sensors for its fps, dropped frames and inference time;
//! - per zone (with tracking): its total, a count per label (its own labels, else
//!   `homeassistant.labels`) and an `occupied` binary sensor;
//! - per camera (with tracking): an `event` entity read from its events (`start`, `end`, and
//!   `crossed` for a line crossing; label, zones, track id, and with `http.public_url` the clip's
//!   absolute URL, as attributes);
//! - per camera and classifier (with tracking): the classifier's latest answer on the camera's
//!   tracks (a sensor read from the events: their `attributes.<classifier>` label, its score as
//!   an attribute; an event without it keeps the last).
//!
//! Every entity but the daemon's status entities is unavailable while `<prefix>/status` is not
//! `online`. Names are sentence case and never repeat the device's name.
//!
//! Owns: discovery topics, unique ids, the JSON of each config message, [`collision`] (two
//! entities that would share an id, refused before anything starts), and [`Discovery`] (what was
//! published, so that a reload removes the entities that are gone). Must not: publish (the outlet
//! hands the messages over as retained state) or know the payloads: every state topic it names
//! holds a plain value or the telemetry message.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::config::{HomeAssistantConfig, MqttConfig};
use super::topics;
use crate::config::models::{Answers, ModelKind};
use crate::config::{topic_segment, Config, ConfigError};
use crate::controls::Switch;
use crate::detection::Labels;
use crate::infer::gating::MotionConfig;
use crate::infer::per_track::registered;

/// One config message, and the entity's unique id.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoveryMessage {
    pub topic: String,
    pub payload: Vec<u8>,
    pub unique_id: String,
    /// The entity's name, for messages about it.
    pub name: String,
}

/// Which board sensors the machine reported at start: only those get an entity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BoardSensors {
    pub temperature: bool,
    pub gpu_load: bool,
}

/// What the discovery messages describe.
#[derive(Debug, Clone, Copy)]
pub struct DiscoveryContext<'a> {
    pub config: &'a Config,
    /// Daemon version, shown on the device page.
    pub sw_version: &'a str,
    pub board: BoardSensors,
}

/// One entity before it becomes a message.
struct Entity {
    component: &'static str,
    object_id: String,
    name: String,
    /// Unavailable while the daemon is not `online`.
    follows_status: bool,
    fields: Value,
}

fn entity(component: &'static str, object_id: String, name: String, fields: Value) -> Entity {
    Entity { component, object_id, name: sentence(&name), follows_status: true, fields }
}

/// `front person count` → `Front person count`.
fn sentence(name: &str) -> String {
    let mut chars = name.chars();
    chars.next().map(|first| first.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// The template of a value in the telemetry message at `path`: `None` (Home Assistant's
/// "unknown") while telemetry lacks it (before a camera's first frame, during an engine build),
/// without the template error that a missing key in `value_json.a.b` would log.
fn from_telemetry(path: &[&str]) -> String {
    let mut expression = "value_json".to_string();
    for (index, key) in path.iter().enumerate() {
        let key = json!(key);
        expression = if index + 1 == path.len() {
            format!("{expression}.get({key})")
        } else {
            format!("({expression}.get({key}) or {{}})")
        };
    }
    format!("{{{{ {expression} }}}}")
}

/// Every entity of `config`, in a fixed order: the daemon's, then per camera, then per zone.
fn entities(context: &DiscoveryContext<'_>) -> Vec<Entity> {
    let config = context.config;
    let prefix = MqttConfig::of(config).topic_prefix(config);
    let status = topics::status(&prefix);
    let telemetry = topics::telemetry(&prefix);
    let labels = &HomeAssistantConfig::of(config).labels;
    let mut out = vec![
        Entity {
            follows_status: false,
            ..entity(
                "binary_sensor",
                "online".into(),
                "Online".into(),
                json!({
                    "state_topic": status,
                    "value_template": "{{ 'ON' if value in ('online', 'building') else 'OFF' }}",
                    "device_class": "connectivity",
                    "entity_category": "diagnostic",
                }),
            )
        },
        Entity {
            follows_status: false,
            ..entity(
                "sensor",
                "engine".into(),
                "Engine".into(),
                json!({
                    "state_topic": status,
                    "value_template": "{{ {'building': 'building', 'online': 'running'}.get(value, 'stopped') }}",
                    "device_class": "enum",
                    "options": ["building", "running", "stopped"],
                    "json_attributes_topic": telemetry,
                    "json_attributes_template": "{{ value_json.get('engine', {}) | tojson }}",
                    "entity_category": "diagnostic",
                    "icon": "mdi:chip",
                }),
            )
        },
    ];
    // The diagnostic sensors read telemetry: without reports (`telemetry.interval_s` = 0) they
    // would never get a value.
    let reports = config.telemetry.interval_s > 0;
    if reports {
        out.push(entity(
            "sensor",
            "cpu".into(),
            "CPU".into(),
            json!({
                "state_topic": telemetry,
                "value_template": from_telemetry(&["process", "cpu_percent"]),
                "unit_of_measurement": "%",
                "state_class": "measurement",
                "entity_category": "diagnostic",
                "icon": "mdi:cpu-64-bit",
            }),
        ));
    }
    if reports {
        // `none` when no engine is built while the CPU serves (a cached engine, the CPU backend).
        out.push(entity(
            "sensor",
            "engine_build".into(),
            "Engine build".into(),
            json!({
                "state_topic": telemetry,
                "value_template": "{{ ((value_json.get('engine') or {}).get('build') or {}).get('status', 'none') }}",
                "device_class": "enum",
                "options": ["none", "building", "waiting", "checking", "ready", "refused", "failed", "stopped"],
                "json_attributes_topic": telemetry,
                "json_attributes_template": "{{ ((value_json.get('engine') or {}).get('build') or {}) | tojson }}",
                "entity_category": "diagnostic",
                "icon": "mdi:progress-wrench",
            }),
        ));
    }
    if reports && context.board.temperature {
        out.push(entity(
            "sensor",
            "temperature".into(),
            "SoC temperature".into(),
            json!({
                "state_topic": telemetry,
                "value_template": "{{ (value_json.get('thermal') or {}).values() | max | default(None) }}",
                "device_class": "temperature",
                "unit_of_measurement": "°C",
                "state_class": "measurement",
                "entity_category": "diagnostic",
            }),
        ));
    }
    if reports && context.board.gpu_load {
        out.push(entity(
            "sensor",
            "gpu_load".into(),
            "GPU load".into(),
            json!({
                "state_topic": telemetry,
                "value_template": from_telemetry(&["gpu", "load_percent"]),
                "unit_of_measurement": "%",
                "state_class": "measurement",
                "entity_category": "diagnostic",
                "icon": "mdi:expansion-card",
            }),
        ));
    }
    let threshold = topics::threshold_state(&prefix);
    out.push(entity(
        "number",
        "score_threshold".into(),
        "Score threshold".into(),
        json!({
            "state_topic": threshold,
            "command_topic": topics::command(&threshold),
            "min": 0.0,
            "max": 1.0,
            "step": 0.01,
            "mode": "box",
            "entity_category": "config",
            "icon": "mdi:tune-variant",
        }),
    ));
    if reports && config.cameras.iter().any(|camera| config.recording(camera).is_some()) {
        out.push(entity(
            "sensor",
            "recording_storage".into(),
            "Recording storage".into(),
            json!({
                "state_topic": telemetry,
                "value_template": recording_storage_template(),
                "json_attributes_topic": telemetry,
                "json_attributes_template": "{{ ((value_json.get('outlets') or {}).get('record') or {}) | tojson }}",
                "device_class": "data_size",
                "unit_of_measurement": "GiB",
                "state_class": "measurement",
                "suggested_display_precision": 2,
                "entity_category": "diagnostic",
                "icon": "mdi:harddisk",
            }),
        ));
    }
    // With gating, each camera's motion sensor and gating switch.
    let motion_sensors = config.sections.get::<MotionConfig>().is_some_and(|motion| motion.enabled);
    for camera in &config.cameras {
        let name = camera.name.as_str();
        for label in labels {
            out.push(entity(
                "sensor",
                format!("{name}_{}_count", topic_segment(label)),
                format!("{name} {label} count"),
                json!({
                    "state_topic": topics::label_count(&prefix, name, label),
                    "state_class": "measurement",
                    "icon": "mdi:eye",
                }),
            ));
        }
        out.push(entity(
            "sensor",
            format!("{name}_all_count"),
            format!("{name} all count"),
            json!({
                "state_topic": topics::camera_total(&prefix, name),
                "state_class": "measurement",
                "icon": "mdi:eye-plus",
            }),
        ));
        for label in labels {
            out.push(entity(
                "binary_sensor",
                format!("{name}_{}_occupied", topic_segment(label)),
                format!("{name} {label} occupied"),
                json!({
                    "state_topic": topics::label_count(&prefix, name, label),
                    "value_template": "{{ 'ON' if (value | int(0)) > 0 else 'OFF' }}",
                    "device_class": "occupancy",
                }),
            ));
        }
        if motion_sensors {
            out.push(entity(
                "binary_sensor",
                format!("{name}_motion"),
                format!("{name} motion"),
                json!({ "state_topic": topics::motion(&prefix, name), "device_class": "motion" }),
            ));
        }
        let mut switches = vec![(Switch::Detect, "detection", "mdi:motion-sensor")];
        if config.snapshot.enabled {
            switches.push((Switch::Snapshots, "snapshots", "mdi:image-multiple"));
        }
        if config.recording(camera).is_some() {
            switches.push((Switch::Record, "recording", "mdi:record-rec"));
        }
        if motion_sensors {
            switches.push((Switch::Gating, "motion gating", "mdi:motion-pause"));
        }
        for (switch, what, icon) in switches {
            let state = topics::switch_state(&prefix, name, switch);
            out.push(entity(
                "switch",
                format!("{name}_{}", switch.name()),
                format!("{name} {what}"),
                json!({
                    "state_topic": state,
                    "command_topic": topics::command(&state),
                    "entity_category": "config",
                    "icon": icon,
                }),
            ));
        }
        if config.snapshot.enabled {
            out.push(entity(
                "image",
                format!("{name}_snapshot"),
                format!("{name} snapshot"),
                json!({ "image_topic": topics::snapshot(&prefix, name), "content_type": "image/jpeg" }),
            ));
        }
        if !reports {
            continue;
        }
        out.push(entity(
            "sensor",
            format!("{name}_fps"),
            format!("{name} fps"),
            json!({
                "state_topic": telemetry,
                "value_template": from_telemetry(&["cameras", name, "fps"]),
                "unit_of_measurement": "fps",
                "state_class": "measurement",
                "entity_category": "diagnostic",
                "icon": "mdi:speedometer",
            }),
        ));
        out.push(entity(
            "sensor",
            format!("{name}_dropped_frames"),
            format!("{name} dropped frames"),
            json!({
                "state_topic": telemetry,
                "value_template": from_telemetry(&["cameras", name, "dropped"]),
                "state_class": "total_increasing",
                "entity_category": "diagnostic",
                "icon": "mdi:image-broken-variant",
            }),
        ));
        out.push(entity(
            "sensor",
            format!("{name}_inference_time"),
            format!("{name} inference time"),
            json!({
                "state_topic": telemetry,
                "value_template": from_telemetry(&["cameras", name, "latency_ms", "infer", "p50"]),
                "device_class": "duration",
                "unit_of_measurement": "ms",
                "state_class": "measurement",
                "entity_category": "diagnostic",
            }),
        ));
    }
    if config.tracking.enabled {
        for camera in &config.cameras {
            out.push(entity(
                "event",
                format!("{}_object", camera.name),
                format!("{} object", camera.name),
                json!({
                    "state_topic": topics::events(&prefix, &camera.name),
                    "event_types": EVENT_TYPES,
                    "value_template": event_template(config.http.public_base()),
                    "device_class": "motion",
                    "icon": "mdi:motion-sensor",
                }),
            ));
            // One sensor per per-track model that answers a label (a classifier).
            let labelled = config.per_track_models().filter(|(_, named)| answers_a_label(&named.kind));
            for (classifier, _) in labelled {
                let answer = format!("value_json['attributes']['{classifier}']");
                let has_answer = format!("value_json['attributes'] is defined and {answer} is defined");
                out.push(entity(
                    "sensor",
                    format!("{}_{classifier}", camera.name),
                    format!("{} {classifier}", camera.name),
                    json!({
                        "state_topic": topics::events(&prefix, &camera.name),
                        "value_template": format!("{{{{ {answer}['label'] if {has_answer} else this.state }}}}"),
                        "json_attributes_topic": topics::events(&prefix, &camera.name),
                        "json_attributes_template":
                            format!("{{{{ {answer} | tojson if {has_answer} else this.attributes | tojson }}}}"),
                        "icon": "mdi:tag-text",
                    }),
                ));
            }
            for zone in &camera.zones {
                let (camera, zone_name) = (camera.name.as_str(), zone.name.as_str());
                let total = topics::zone_total(&prefix, camera, zone_name);
                out.push(entity(
                    "sensor",
                    format!("{camera}_{zone_name}_count"),
                    format!("{camera} {zone_name} count"),
                    json!({ "state_topic": total, "state_class": "measurement", "icon": "mdi:map-marker-multiple" }),
                ));
                for label in zone_labels(config, &zone.labels) {
                    out.push(entity(
                        "sensor",
                        format!("{camera}_{zone_name}_{}_count", topic_segment(label)),
                        format!("{camera} {zone_name} {label} count"),
                        json!({
                            "state_topic": topics::zone_label(&prefix, camera, zone_name, label),
                            "state_class": "measurement",
                            "icon": "mdi:map-marker-multiple",
                        }),
                    ));
                }
                out.push(entity(
                    "binary_sensor",
                    format!("{camera}_{zone_name}_occupied"),
                    format!("{camera} {zone_name} occupied"),
                    json!({
                        "state_topic": total,
                        "value_template": "{{ 'ON' if (value | int(0)) > 0 else 'OFF' }}",
                        "device_class": "occupancy",
                    }),
                ));
            }
        }
    }
    out
}

/// The event types of a camera's `event` entity: an object's track starts, ends, or crosses a line.
const EVENT_TYPES: [&str; 3] = ["start", "end", "crossed"];

/// The template that turns an event message into the `event` entity's event: `start`, `end`, or
/// `crossed` for an `update` that crosses a line (with the line and its direction), each with the
/// label, the zones, the track id and, with `http.public_url` (`public_base`), the clip's absolute
/// URL (`clip_url`). Any other `update` renders nothing, which Home Assistant ignores.
fn event_template(public_base: Option<&str>) -> String {
    let clip_url = match public_base {
        // A JSON string is a Jinja string literal: the URL cannot break out of it.
        Some(base) => format!(", 'clip_url': ({} ~ m.clip.url) if m.get('clip') else none", json!(base)),
        None => String::new(),
    };
    format!(
        "{{% set m = value_json %}}{{% set c = m.get('crossed') %}}\
         {{% set t = 'crossed' if c else m.get('type') %}}\
         {{% if t in {types} %}}{{{{ {{'event_type': t, 'label': m.get('label'), 'zones': m.get('zones', []), \
         'track_id': m.get('track_id'), 'line': c.line if c else none, 'direction': c.direction if c else none\
         {clip_url}}} | tojson }}}}{{% endif %}}",
        types = json!(EVENT_TYPES),
    )
}

/// The record directory's size in GiB from telemetry's `outlets.record.bytes`, `None` (unknown)
/// while telemetry lacks it.
fn recording_storage_template() -> String {
    "{% set b = ((value_json.get('outlets') or {}).get('record') or {}).get('bytes') %}\
     {{ (b / 1073741824) | round(3) if b is number else none }}"
        .into()
}

/// The labels a zone's count sensors are for: its own, else `homeassistant.labels`.
/// Whether a per-track model of `kind` answers a label, as its registered kind declares (a
/// classifier): its answer is a sensor's state.
fn answers_a_label(kind: &ModelKind) -> bool {
    registered(kind.name()).is_some_and(|kind| kind.role.answers == Answers::Label)
}

fn zone_labels<'a>(config: &'a Config, zone_labels: &'a [String]) -> &'a [String] {
    if zone_labels.is_empty() {
        &HomeAssistantConfig::of(config).labels
    } else {
        zone_labels
    }
}

/// The address the device page links to: `homeassistant.configuration_url`, else the page's when
/// `http.listen` is one address beyond loopback.
fn configuration_url(config: &Config) -> Option<String> {
    if let Some(url) = &HomeAssistantConfig::of(config).configuration_url {
        return Some(url.clone());
    }
    let address = config.http.listen_addr()?;
    (!address.ip().is_loopback() && !address.ip().is_unspecified()).then(|| format!("http://{address}/"))
}

/// Every discovery message of `context.config`.
pub fn discovery_messages(context: &DiscoveryContext<'_>) -> Vec<DiscoveryMessage> {
    let config = context.config;
    let device_id = config.device_id();
    let node_id = format!("jetson-detectd_{device_id}");
    let status = topics::status(&MqttConfig::of(config).topic_prefix(config));
    let mut device = json!({
        "identifiers": [node_id],
        "name": format!("jetson-detectd {device_id}"),
        "manufacturer": "jetson-detectd",
        "model": "Object detector",
        "sw_version": context.sw_version,
    });
    if let Some(url) = configuration_url(config) {
        device["configuration_url"] = Value::String(url);
    }
    let origin = json!({ "name": "jetson-detectd", "sw_version": context.sw_version });
    entities(context)
        .into_iter()
        .map(|entity| {
            let unique_id = format!("{node_id}_{}", entity.object_id);
            let mut payload = entity.fields;
            payload["name"] = Value::String(entity.name.clone());
            payload["unique_id"] = Value::String(unique_id.clone());
            payload["device"] = device.clone();
            payload["origin"] = origin.clone();
            if entity.follows_status {
                payload["availability_topic"] = Value::String(status.clone());
                payload["payload_available"] = Value::String("online".into());
                payload["payload_not_available"] = Value::String("offline".into());
            }
            DiscoveryMessage {
                topic: format!(
                    "{}/{}/{node_id}/{}/config",
                    HomeAssistantConfig::of(config).discovery_prefix,
                    entity.component,
                    entity.object_id
                ),
                payload: payload.to_string().into_bytes(),
                unique_id,
                name: entity.name,
            }
        })
        .collect()
}

/// Two entities of `config` that would share a unique id (camera `front` with zone `yard` and a
/// camera `front_yard` both make `front_yard_person_count`): one would silently replace the other
/// in Home Assistant. Said naming both, so the config can be fixed; `None` without discovery.
pub fn collision(config: &Config) -> Option<String> {
    if !HomeAssistantConfig::of(config).discovery {
        return None;
    }
    let every_board_sensor = BoardSensors { temperature: true, gpu_load: true };
    let context = DiscoveryContext { config, sw_version: "", board: every_board_sensor };
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for message in discovery_messages(&context) {
        if let Some(first) = seen.insert(message.unique_id.clone(), message.name.clone()) {
            return Some(format!(
                "the Home Assistant entities {first:?} and {:?} would share the id {:?}, and one would replace \
                 the other: rename a camera or zone so that their names stay apart",
                message.name, message.unique_id
            ));
        }
    }
    None
}

/// With discovery on, every `homeassistant.labels` entry must be a label of the model's label file:
/// a count sensor for a label no detection can carry (`"persn"`) would sit at 0 for ever.
pub fn check_labels(config: &Config, labels: &Labels) -> Result<(), ConfigError> {
    if !HomeAssistantConfig::of(config).discovery {
        return Ok(());
    }
    for (index, label) in HomeAssistantConfig::of(config).labels.iter().enumerate() {
        if labels.id_of(label).is_none() {
            let close: Vec<String> = (0..labels.len())
                .map(|id| labels.name(id).into_owned())
                .filter(|name| name.eq_ignore_ascii_case(label) || shares_a_prefix(name, label))
                .take(3)
                .map(|name| format!("{name:?}"))
                .collect();
            let hint = if close.is_empty() { String::new() } else { format!(" (did you mean {}?)", close.join(", ")) };
            return Err(ConfigError::Invalid {
                origin: config.origin.clone(),
                key: format!("homeassistant.labels[{index}]"),
                message: format!(
                    "{label:?} is not in the label file {}{hint}: its count sensors would stay at 0",
                    config.model.labels.display()
                ),
            });
        }
    }
    Ok(())
}

/// Whether two labels start alike (the first three characters, ignoring case): a likely typo.
fn shares_a_prefix(a: &str, b: &str) -> bool {
    let start = |s: &str| s.chars().take(3).flat_map(char::to_lowercase).collect::<String>();
    a.chars().count() >= 3 && start(a) == start(b)
}

/// What was published, so that the next [`Discovery::messages`] removes what is gone and sends
/// only what changed; and the configs of this device that the broker kept from earlier runs
/// ([`Discovery::found`]), so that entities removed from the config between runs go too.
#[derive(Debug, Default)]
pub struct Discovery {
    /// Each published config's topic and a hash of its payload.
    published: BTreeMap<String, u64>,
    /// The state topics (`state_topic`, `image_topic`) the published configs name.
    state_topics: BTreeSet<String>,
    /// `<prefix>/`, of the config announced.
    topic_root: String,
    /// Whether [`Discovery::messages`] ran: before, what is current is not known yet.
    announced: bool,
    /// Configs found on the broker before the first announcement: topic, and the state topic
    /// they name.
    found_early: BTreeMap<String, Option<String>>,
}

/// Retained messages of earlier runs to delete (empty payloads): discovery configs of entities
/// that are gone, and the values their sensors read where no current entity reads them.
#[derive(Debug, Default, PartialEq)]
pub struct Stale {
    pub configs: Vec<String>,
    pub values: Vec<String>,
}

/// The filter the configs of `config`'s device match, whatever their component and object id:
/// what [`Discovery::found`] is fed with.
pub fn discovery_filter(config: &Config) -> String {
    format!("{}/+/jetson-detectd_{}/+/config", HomeAssistantConfig::of(config).discovery_prefix, config.device_id())
}

/// A discovery message to hand over: an empty payload removes the entity.
#[derive(Debug, Clone, PartialEq)]
pub struct Announcement {
    pub topic: String,
    pub payload: Vec<u8>,
}

impl Discovery {
    /// An empty config message for every entity published before that is gone (a zone removed by
    /// a reload or from the page), then the config messages of `context.config`'s entities that
    /// are new or changed. An unchanged entity is not sent again: the publisher already keeps its
    /// config and re-sends it whenever the broker or Home Assistant may have lost it.
    pub fn messages(&mut self, context: &DiscoveryContext<'_>) -> Vec<Announcement> {
        // In the entities' order: the daemon's, then per camera, then per zone.
        let current: Vec<(String, u64, Vec<u8>)> = discovery_messages(context)
            .into_iter()
            .map(|message| (message.topic, payload_hash(&message.payload), message.payload))
            .collect();
        let topics: BTreeSet<&str> = current.iter().map(|(topic, ..)| topic.as_str()).collect();
        let mut out: Vec<Announcement> = self
            .published
            .keys()
            .filter(|topic| !topics.contains(topic.as_str()))
            .map(|topic| Announcement { topic: topic.clone(), payload: Vec::new() })
            .collect();
        self.published.retain(|topic, _| topics.contains(topic.as_str()));
        self.state_topics = current.iter().flat_map(|(_, _, payload)| named_state_topics(payload)).collect();
        self.topic_root = format!("{}/", MqttConfig::of(context.config).topic_prefix(context.config));
        self.announced = true;
        for (topic, hash, payload) in current {
            if self.published.insert(topic.clone(), hash) != Some(hash) {
                out.push(Announcement { topic, payload });
            }
        }
        out
    }

    /// A config of this device the broker delivered (a retained one of an earlier run, or our own
    /// coming back): what to delete when it is not current. Before the first announcement it is
    /// kept until then ([`Discovery::take_early`]).
    pub fn found(&mut self, topic: &str, payload: &[u8]) -> Stale {
        if payload.is_empty() || self.published.contains_key(topic) {
            return Stale::default();
        }
        let state_topic = named_state_topics(payload).into_iter().next();
        if !self.announced {
            self.found_early.insert(topic.to_string(), state_topic);
            return Stale::default();
        }
        self.stale([(topic.to_string(), state_topic)])
    }

    /// What [`Discovery::found`] kept before the first announcement and is not current: call it
    /// after [`Discovery::messages`].
    pub fn take_early(&mut self) -> Stale {
        let found = std::mem::take(&mut self.found_early);
        self.stale(found.into_iter().filter(|(topic, _)| !self.published.contains_key(topic)).collect::<Vec<_>>())
    }

    fn stale(&self, found: impl IntoIterator<Item = (String, Option<String>)>) -> Stale {
        let mut stale = Stale::default();
        for (topic, state_topic) in found {
            stale.configs.push(topic);
            // A value of ours (under this config's prefix) that no current entity reads.
            stale.values.extend(
                state_topic.filter(|value| value.starts_with(&self.topic_root) && !self.state_topics.contains(value)),
            );
        }
        stale.values.sort();
        stale.values.dedup();
        stale
    }
}

/// The state topics a discovery config names.
fn named_state_topics(payload: &[u8]) -> Vec<String> {
    let Ok(config) = serde_json::from_slice::<Value>(payload) else { return Vec::new() };
    ["state_topic", "image_topic"]
        .into_iter()
        .filter_map(|key| config.get(key).and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// Tells one config payload from another within a run.
fn payload_hash(payload: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    payload.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::ConfigOrigin;

    fn home_assistant(config: &mut Config) -> &mut HomeAssistantConfig {
        config.sections.get_mut::<HomeAssistantConfig>().expect("[homeassistant]")
    }

    #[test]
    fn a_discovery_label_the_label_file_lacks_is_refused_with_the_likely_one() {
        let labels = Labels::parse("person\nbicycle\ncar\n", Path::new("labels.txt")).expect("labels");
        let mut config = super::super::kind::schema().embedded_default().expect("default");
        home_assistant(&mut config).labels = vec!["car".into(), "persn".into()];
        assert!(check_labels(&config, &labels).is_ok(), "discovery off: the labels are not used");
        home_assistant(&mut config).discovery = true;
        let error = check_labels(&config, &labels).expect_err("persn is no label").to_string();
        assert!(error.contains("homeassistant.labels[1]") && error.contains("\"persn\""), "{error}");
        assert!(error.contains("did you mean \"person\""), "{error}");
        home_assistant(&mut config).labels = vec!["person".into(), "car".into()];
        assert!(check_labels(&config, &labels).is_ok());
    }

    fn config(extra: &str) -> Config {
        super::super::kind::schema()
            .from_toml(&config_text(extra), ConfigOrigin::File("test.toml".into()), Path::new("/"))
            .expect("config")
    }

    fn config_text(extra: &str) -> String {
        format!(
            "[device]\nid = \"orin1\"\n[mqtt]\nprefix = \"jd/orin1\"\n[snapshot]\nenabled = true\n\
             [homeassistant]\ndiscovery = true\nlabels = [\"person\", \"traffic light\"]\n\
             [[camera]]\nname = \"front\"\nsource = {{ kind = \"synthetic\" }}\n\
             [[camera.zone]]\nname = \"drive\"\npolygon = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]\nlabels = [\"car\"]\n\
             [[camera.zone]]\nname = \"yard\"\npolygon = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]\n{extra}"
        )
    }

    fn messages(config: &Config, board: BoardSensors) -> BTreeMap<String, Value> {
        let context = DiscoveryContext { config, sw_version: "0.1.0", board };
        discovery_messages(&context)
            .into_iter()
            .map(|m| {
                let object = m.topic.rsplit('/').nth(1).expect("object id").to_string();
                (object, serde_json::from_slice(&m.payload).expect("valid JSON"))
            })
            .collect()
    }

    /// Issue 50, item 6: a recording switch is for a camera that records clips, not every camera.
    #[test]
    fn only_a_camera_that_records_has_a_recording_switch() {
        let board = BoardSensors { temperature: false, gpu_load: false };
        assert!(!messages(&config(""), board).contains_key("front_record"), "recording is off by default");
        let recording = messages(&config("[record]\nenabled = true\n"), board);
        assert_eq!(recording["front_record"]["name"], "Front recording", "{:?}", recording["front_record"]);
    }

    #[test]
    fn a_camera_has_a_motion_sensor_and_a_gating_switch_only_with_motion_gating() {
        let board = BoardSensors { temperature: false, gpu_load: false };
        let plain = messages(&config(""), board);
        assert!(!plain.contains_key("front_motion") && !plain.contains_key("front_gating"));
        let schema = crate::config::section::Schema::new(
            [crate::config::section::SectionKind::of::<MotionConfig>()]
                .into_iter()
                .chain(super::super::kind::OUTLET.sections.iter().copied()),
        );
        let gated = schema
            .from_toml(
                &config_text("[motion]\nenabled = true\n"),
                ConfigOrigin::File("test.toml".into()),
                Path::new("/"),
            )
            .expect("config");
        let gated = messages(&gated, board);
        let sensor = &gated["front_motion"];
        assert_eq!(
            (&sensor["state_topic"], &sensor["device_class"]),
            (&json!("jd/orin1/front/motion"), &json!("motion"))
        );
        let switch = &gated["front_gating"];
        assert_eq!(
            (&switch["name"], &switch["state_topic"], &switch["command_topic"]),
            (
                &json!("Front motion gating"),
                &json!("jd/orin1/front/controls/gating"),
                &json!("jd/orin1/front/controls/gating/set")
            )
        );
    }

    #[test]
    fn every_entity_of_the_device_cameras_and_zones_is_discovered() {
        let config = config("");
        let all = messages(&config, BoardSensors { temperature: true, gpu_load: false });
        let ids: Vec<&str> = all.keys().map(String::as_str).collect();
        assert_eq!(
            ids,
            [
                "cpu",
                "engine",
                "engine_build",
                "front_all_count",
                "front_detect",
                "front_drive_car_count",
                "front_drive_count",
                "front_drive_occupied",
                "front_dropped_frames",
                "front_fps",
                "front_inference_time",
                "front_object",
                "front_person_count",
                "front_person_occupied",
                "front_snapshot",
                "front_snapshots",
                "front_traffic_light_count",
                "front_traffic_light_occupied",
                "front_yard_count",
                "front_yard_occupied",
                "front_yard_person_count",
                "front_yard_traffic_light_count",
                "online",
                "score_threshold",
                "temperature",
            ]
        );
        let count = &all["front_traffic_light_count"];
        assert_eq!(count["state_topic"], "jd/orin1/front/counts/traffic_light");
        assert_eq!(count["name"], "Front traffic light count");
        assert_eq!(count["unique_id"], "jetson-detectd_orin1_front_traffic_light_count");
        assert_eq!(count["availability_topic"], "jd/orin1/status");
        assert_eq!(count["origin"]["name"], "jetson-detectd");
        assert_eq!(all["front_all_count"]["state_topic"], "jd/orin1/front/count");
        assert_eq!(all["front_all_count"]["name"], "Front all count");
        let occupied = &all["front_traffic_light_occupied"];
        assert_eq!(occupied["state_topic"], "jd/orin1/front/counts/traffic_light");
        assert_eq!(
            (occupied["name"].as_str(), occupied["device_class"].as_str()),
            (Some("Front traffic light occupied"), Some("occupancy"))
        );
        assert_eq!(all["front_yard_count"]["state_topic"], "jd/orin1/front/zones/yard");
        assert_eq!(all["front_yard_person_count"]["state_topic"], "jd/orin1/front/zones/yard/person");
        let detect = &all["front_detect"];
        assert_eq!(
            (detect["state_topic"].as_str(), detect["command_topic"].as_str()),
            (Some("jd/orin1/front/controls/detect"), Some("jd/orin1/front/controls/detect/set"))
        );
        assert_eq!(all["front_snapshot"]["image_topic"], "jd/orin1/front/snapshot");
        assert_eq!(all["score_threshold"]["command_topic"], "jd/orin1/controls/score_threshold/set");
        assert_eq!(
            all["front_fps"]["value_template"],
            r#"{{ ((value_json.get("cameras") or {}).get("front") or {}).get("fps") }}"#
        );
        let online = &all["online"];
        assert!(online.get("availability_topic").is_none(), "the status entities stay available");
        assert!(online["value_template"].as_str().is_some_and(|t| t.contains("building")), "building is understood");
        assert_eq!(all["engine"]["options"], json!(["building", "running", "stopped"]));
        assert!(all.values().all(|entity| entity["device"] == online["device"]), "one device");
        assert!(online["device"].get("configuration_url").is_none(), "the page listens on loopback only");
        assert!(all.values().all(|entity| entity["name"].as_str().is_some_and(|n| n.starts_with(char::is_uppercase))));
    }

    #[test]
    fn each_camera_has_a_sensor_of_each_classifiers_latest_answer_read_from_its_events() {
        let classifier =
            "[models.colour]\nkind = \"classifier\"\non = [\"car\"]\nonnx = \"c.onnx\"\nlabels = \"c.txt\"\n\
             [models.looks]\nkind = \"embedder\"\nonnx = \"m.onnx\"\n";
        let all = messages(&config(classifier), BoardSensors::default());
        assert!(!all.contains_key("front_looks"), "an embedder answers a vector, no label: no sensor");
        let sensor = &all["front_colour"];
        assert_eq!(sensor["name"], "Front colour");
        assert_eq!(sensor["state_topic"], "jd/orin1/front/events");
        let template = sensor["value_template"].as_str().expect("a template");
        assert!(template.contains("value_json['attributes']['colour']['label']"), "{template}");
        assert!(template.contains("else this.state"), "an event without the answer keeps the last: {template}");
        assert!(!messages(&config(""), BoardSensors::default()).contains_key("front_colour"), "none without it");
    }

    #[test]
    fn each_camera_has_an_event_entity_of_starts_ends_and_crossings_read_from_its_events() {
        let all = messages(&config(""), BoardSensors::default());
        let event = &all["front_object"];
        assert_eq!(event["name"], "Front object");
        assert_eq!(event["state_topic"], "jd/orin1/front/events");
        assert_eq!(event["event_types"], json!(["start", "end", "crossed"]));
        let template = event["value_template"].as_str().expect("a template");
        for attribute in ["'label'", "'zones'", "'track_id'", "'line'", "'direction'"] {
            assert!(template.contains(attribute), "{attribute}: {template}");
        }
        assert!(!template.contains("clip_url"), "no absolute URL without http.public_url: {template}");

        let public = messages(&config("[http]\npublic_url = \"http://jetson.lan:8090/\"\n"), BoardSensors::default());
        let template = public["front_object"]["value_template"].as_str().expect("a template");
        assert!(
            template.contains(r#"'clip_url': ("http://jetson.lan:8090" ~ m.clip.url) if m.get('clip') else none"#),
            "the clip's URL on the public address, one `/` between: {template}"
        );
        let untracked = messages(&config("[tracking]\nenabled = false\n"), BoardSensors::default());
        assert!(!untracked.contains_key("front_object"), "no events without tracking");
    }

    #[test]
    fn recording_storage_is_a_sensor_only_where_a_camera_records_and_telemetry_reports() {
        let board = BoardSensors::default();
        assert!(!messages(&config(""), board).contains_key("recording_storage"), "nothing records");
        let recording = messages(&config("[record]\nenabled = true\n"), board);
        let storage = &recording["recording_storage"];
        assert_eq!(
            (storage["name"].as_str(), storage["unit_of_measurement"].as_str()),
            (Some("Recording storage"), Some("GiB"))
        );
        assert_eq!(storage["state_topic"], "jd/orin1/telemetry");
        let silent = messages(&config("[record]\nenabled = true\n[telemetry]\ninterval_s = 0\n"), board);
        assert!(!silent.contains_key("recording_storage"), "without telemetry it would never read a value");
    }

    #[test]
    fn the_device_links_to_a_page_that_others_can_reach() {
        let listening = config("").http.listen.replace("127.0.0.1", "192.168.1.20");
        let mut config = config("");
        config.http.listen = listening;
        let device = &messages(&config, BoardSensors::default())["online"]["device"];
        assert_eq!(device["configuration_url"], "http://192.168.1.20:8090/");
        home_assistant(&mut config).configuration_url = Some("https://jetson.lan/".into());
        let device = &messages(&config, BoardSensors::default())["online"]["device"];
        assert_eq!(device["configuration_url"], "https://jetson.lan/");
    }

    /// Issue 35.16: camera `front` with zone `yard` and a camera `front_yard` made the same id.
    #[test]
    fn entities_that_would_share_an_id_are_a_collision_naming_both_and_the_config_is_refused() {
        let fine = config("");
        assert_eq!(collision(&fine), None);
        // The same cameras read together: `homeassistant.discovery`'s check refuses them.
        let clash = "[[camera]]\nname = \"front_yard\"\nsource = { kind = \"synthetic\" }\n";
        let refused = super::super::kind::schema()
            .from_toml(&config_text(clash), ConfigOrigin::File("test.toml".into()), Path::new("/"))
            .expect_err("ids that collide");
        assert!(refused.to_string().contains("`homeassistant.discovery`"), "{refused}");
        // Added later (a zone change from the page, a reload): the check of the config as it is now.
        let mut changed = fine.clone();
        let mut added = changed.cameras[0].clone();
        added.name = "front_yard".into();
        added.zones.clear();
        changed.cameras.push(added);
        let message = collision(&changed).expect("a collision");
        assert!(
            message.contains("Front yard person count") && message.contains("front_yard_person_count"),
            "{message}"
        );
        assert!(changed.check_sections().is_err());
    }

    #[test]
    fn without_telemetry_reports_no_diagnostic_sensor_is_discovered() {
        let config = config("[telemetry]\ninterval_s = 0\n");
        let all = messages(&config, BoardSensors { temperature: true, gpu_load: true });
        let reading_telemetry: Vec<&String> = all
            .iter()
            .filter(|(_, entity)| entity["state_topic"].as_str().is_some_and(|topic| topic.ends_with("/telemetry")))
            .map(|(id, _)| id)
            .collect();
        assert!(reading_telemetry.is_empty(), "{reading_telemetry:?}");
        assert!(all.contains_key("engine") && all.contains_key("front_detect"), "the rest stays");
        let with_reports = messages(&self::config(""), BoardSensors { temperature: true, gpu_load: true });
        for id in ["cpu", "temperature", "gpu_load", "front_fps", "front_dropped_frames", "front_inference_time"] {
            assert!(with_reports.contains_key(id) && !all.contains_key(id), "{id}");
        }
    }

    #[test]
    fn configs_of_entities_gone_since_an_earlier_run_are_deleted_with_the_values_only_they_read() {
        let config = config("");
        let context = DiscoveryContext { config: &config, sw_version: "0.1.0", board: BoardSensors::default() };
        let stale_zone = (
            "homeassistant/sensor/jetson-detectd_orin1/front_lawn_count/config",
            br#"{"state_topic": "jd/orin1/front/zones/lawn"}"#,
        );
        let kept = discovery_messages(&context).into_iter().find(|m| m.topic.ends_with("/front_fps/config")).unwrap();
        let mut discovery = Discovery::default();
        // Found while the model loads: judged at the first announcement.
        assert_eq!(discovery.found(stale_zone.0, stale_zone.1), Stale::default());
        assert_eq!(discovery.found(&kept.topic, &kept.payload), Stale::default());
        assert!(!discovery.messages(&context).is_empty());
        let early = discovery.take_early();
        assert_eq!(early.configs, [stale_zone.0]);
        assert_eq!(early.values, ["jd/orin1/front/zones/lawn"]);
        assert_eq!(discovery.take_early(), Stale::default(), "once");
        // Found later (a camera gone whose fps sensor read telemetry, which others still read).
        let stale_fps = "homeassistant/sensor/jetson-detectd_orin1/back_fps/config";
        let found = discovery.found(stale_fps, br#"{"state_topic": "jd/orin1/telemetry"}"#);
        assert_eq!(found, Stale { configs: vec![stale_fps.to_string()], values: vec![] });
        assert_eq!(discovery.found(&kept.topic, &kept.payload), Stale::default(), "our own config");
        assert_eq!(discovery.found(stale_fps, b""), Stale::default(), "our own deletion");
        assert_eq!(discovery_filter(&config), "homeassistant/+/jetson-detectd_orin1/+/config");
    }

    #[test]
    fn a_reload_sends_only_the_entities_that_are_new_or_changed() {
        let mut discovery = Discovery::default();
        let before = config("");
        let context = DiscoveryContext { config: &before, sw_version: "0.1.0", board: BoardSensors::default() };
        let first = discovery.messages(&context);
        assert_eq!(first.len(), discovery_messages(&context).len(), "everything at first");
        assert!(discovery.messages(&context).is_empty(), "nothing changed, nothing sent");
        let mut after = before.clone();
        after.cameras[0].zones[1].name = "lawn".into();
        let context = DiscoveryContext { config: &after, ..context };
        let sent: Vec<(String, bool)> = discovery
            .messages(&context)
            .into_iter()
            .map(|m| (m.topic.rsplit('/').nth(1).expect("object id").to_string(), m.payload.is_empty()))
            .collect();
        let removed = sent.iter().filter(|(_, empty)| *empty).count();
        assert_eq!(removed, 4, "the yard's entities go: {sent:?}");
        assert_eq!(sent.len(), 8, "the lawn's entities come, nothing else: {sent:?}");
        assert!(sent.iter().all(|(id, empty)| id.starts_with(if *empty { "front_yard" } else { "front_" })));
    }

    #[test]
    fn a_reload_removes_the_entities_of_a_zone_that_is_gone() {
        let mut discovery = Discovery::default();
        let before = config("");
        let context = DiscoveryContext { config: &before, sw_version: "0.1.0", board: BoardSensors::default() };
        assert!(discovery.messages(&context).iter().all(|m| !m.payload.is_empty()));
        let mut after = before.clone();
        after.cameras[0].zones.retain(|zone| zone.name != "yard");
        let context = DiscoveryContext { config: &after, ..context };
        let removed: Vec<String> =
            discovery.messages(&context).into_iter().filter(|m| m.payload.is_empty()).map(|m| m.topic).collect();
        assert_eq!(removed.len(), 4, "{removed:?}");
        assert!(removed.iter().all(|topic| topic.contains("front_yard_")));
    }
}
