//! Home Assistant MQTT discovery: the retained config messages that make Home Assistant create a
//! detection-count sensor per camera and label, an availability binary sensor, and per zone an
//! occupancy-count sensor per label and an "occupied" binary sensor.
//!
//! Owns: discovery topics, unique ids, the JSON of each config message, and [`ZoneDiscovery`] (the
//! zone entities published so far, so that a reload removes those whose zone is gone). Must not:
//! publish (the MQTT outlet hands the messages to the publisher, retained, after connecting) or know
//! the payloads: every state topic it names holds a plain value.
//!
//! A camera's count sensor reads the retained `<prefix>/<camera>/counts/<label>`
//! (`super::counts`), published on every change, 0 included. (Read from the detections messages,
//! as before, it stuck at its last non-zero value: with `mqtt.publish = "detections"` a frame
//! without detections sends nothing.)

use std::collections::BTreeSet;

use serde_json::json;

use super::outbox::Outgoing;
use crate::config::{Config, HomeAssistantConfig};

/// One message to publish retained.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoveryMessage {
    pub topic: String,
    pub payload: Vec<u8>,
}

/// What the discovery messages describe.
#[derive(Debug, Clone)]
pub struct DiscoveryContext<'a> {
    /// `device.id` (already topic-safe).
    pub device_id: &'a str,
    /// The daemon's topic prefix (`mqtt.prefix`).
    pub topic_prefix: &'a str,
    /// Configured camera names.
    pub cameras: &'a [String],
    /// Daemon version, shown on the device page.
    pub sw_version: &'a str,
}

/// Discovery messages for every camera × label count sensor, then the availability sensor.
pub fn discovery_messages(config: &HomeAssistantConfig, context: &DiscoveryContext<'_>) -> Vec<DiscoveryMessage> {
    let node_id = format!("jetson-detectd_{}", context.device_id);
    let status_topic = format!("{}/status", context.topic_prefix);
    let device = device(&node_id, context);
    let mut messages = Vec::with_capacity(context.cameras.len() * config.labels.len() + 1);
    for camera in context.cameras {
        for label in &config.labels {
            let object_id = format!("{camera}_{}_count", sanitize(label));
            let payload = json!({
                "name": format!("{camera} {label} count"),
                "unique_id": format!("{node_id}_{object_id}"),
                "state_topic": format!("{}/{camera}/counts/{}", context.topic_prefix, sanitize(label)),
                "state_class": "measurement",
                "icon": "mdi:eye",
                "availability_topic": status_topic,
                "payload_available": "online",
                "payload_not_available": "offline",
                "device": device,
            });
            messages.push(DiscoveryMessage {
                topic: format!("{}/sensor/{node_id}/{object_id}/config", config.discovery_prefix),
                payload: payload.to_string().into_bytes(),
            });
        }
    }
    let availability = json!({
        "name": "Daemon online",
        "unique_id": format!("{node_id}_online"),
        "state_topic": status_topic,
        "payload_on": "online",
        "payload_off": "offline",
        "device_class": "connectivity",
        "entity_category": "diagnostic",
        "device": device,
    });
    messages.push(DiscoveryMessage {
        topic: format!("{}/binary_sensor/{node_id}/online/config", config.discovery_prefix),
        payload: availability.to_string().into_bytes(),
    });
    messages
}

/// The device every entity belongs to.
fn device(node_id: &str, context: &DiscoveryContext<'_>) -> serde_json::Value {
    json!({
        "identifiers": [node_id],
        "name": format!("jetson-detectd {}", context.device_id),
        "manufacturer": "jetson-detectd",
        "model": "Object detector",
        "sw_version": context.sw_version,
    })
}

/// One zone of one camera, for discovery.
#[derive(Debug, Clone)]
pub struct ZoneEntities<'a> {
    pub camera: &'a str,
    pub zone: &'a str,
    /// The zone's configured labels; empty: `homeassistant.labels` get a count sensor.
    pub labels: &'a [String],
}

/// Discovery messages for zones: a count sensor per zone and label on the retained
/// `<prefix>/<camera>/zones/<zone>/<label>` counts, and an occupancy binary sensor per zone on the
/// zone's total `<prefix>/<camera>/zones/<zone>` (on while it is above 0).
pub fn zone_discovery_messages(
    config: &HomeAssistantConfig,
    context: &DiscoveryContext<'_>,
    zones: &[ZoneEntities<'_>],
) -> Vec<DiscoveryMessage> {
    let node_id = format!("jetson-detectd_{}", context.device_id);
    let status_topic = format!("{}/status", context.topic_prefix);
    let device = device(&node_id, context);
    let mut messages = Vec::new();
    for zone in zones {
        let zone_topic = format!("{}/{}/zones/{}", context.topic_prefix, zone.camera, zone.zone);
        let labels = if zone.labels.is_empty() { config.labels.as_slice() } else { zone.labels };
        for label in labels {
            let object_id = format!("{}_{}_{}_count", zone.camera, zone.zone, sanitize(label));
            let payload = json!({
                "name": format!("{} {} {label} count", zone.camera, zone.zone),
                "unique_id": format!("{node_id}_{object_id}"),
                "state_topic": format!("{zone_topic}/{}", sanitize(label)),
                "state_class": "measurement",
                "icon": "mdi:map-marker-multiple",
                "availability_topic": status_topic,
                "payload_available": "online",
                "payload_not_available": "offline",
                "device": device,
            });
            messages.push(DiscoveryMessage {
                topic: format!("{}/sensor/{node_id}/{object_id}/config", config.discovery_prefix),
                payload: payload.to_string().into_bytes(),
            });
        }
        let object_id = format!("{}_{}_occupied", zone.camera, zone.zone);
        let payload = json!({
            "name": format!("{} {} occupied", zone.camera, zone.zone),
            "unique_id": format!("{node_id}_{object_id}"),
            "state_topic": zone_topic,
            "value_template": "{{ 'ON' if (value | int(0)) > 0 else 'OFF' }}",
            "device_class": "occupancy",
            "availability_topic": status_topic,
            "payload_available": "online",
            "payload_not_available": "offline",
            "device": device,
        });
        messages.push(DiscoveryMessage {
            topic: format!("{}/binary_sensor/{node_id}/{object_id}/config", config.discovery_prefix),
            payload: payload.to_string().into_bytes(),
        });
    }
    messages
}

/// Discovery object ids allow `[a-zA-Z0-9_-]`; labels such as `traffic light` do not. The same
/// form names a label's count topics.
fn sanitize(label: &str) -> String {
    crate::config::topic_segment(label)
}

/// What the zone discovery messages are made from, and the topics published so far.
pub struct ZoneDiscovery {
    config: HomeAssistantConfig,
    device_id: String,
    topic_prefix: String,
    cameras: Vec<String>,
    published: BTreeSet<String>,
}

impl ZoneDiscovery {
    /// Nothing published yet; `config` gives the Home Assistant settings.
    pub fn new(config: &Config, device_id: String, topic_prefix: String, cameras: Vec<String>) -> ZoneDiscovery {
        ZoneDiscovery {
            config: config.homeassistant.clone(),
            device_id,
            topic_prefix,
            cameras,
            published: BTreeSet::new(),
        }
    }

    /// Discovery messages for `config`'s zones, plus an empty retained message (which deletes the
    /// entity) for every zone entity published before that `config` no longer has.
    pub fn messages(&mut self, config: &Config) -> Vec<Outgoing> {
        let context = DiscoveryContext {
            device_id: &self.device_id,
            topic_prefix: &self.topic_prefix,
            cameras: &self.cameras,
            sw_version: env!("CARGO_PKG_VERSION"),
        };
        let zones: Vec<ZoneEntities<'_>> = config
            .cameras
            .iter()
            .flat_map(|camera| {
                camera.zones.iter().map(move |zone| ZoneEntities {
                    camera: &camera.name,
                    zone: &zone.name,
                    labels: &zone.labels,
                })
            })
            .collect();
        let messages = zone_discovery_messages(&self.config, &context, &zones);
        let current: BTreeSet<String> = messages.iter().map(|m| m.topic.clone()).collect();
        let removed = self.published.difference(&current).map(|topic| Outgoing {
            topic: topic.clone(),
            payload: Vec::new(),
            retain: true,
        });
        let mut out: Vec<Outgoing> = removed.collect();
        out.extend(messages.into_iter().map(|m| Outgoing { topic: m.topic, payload: m.payload, retain: true }));
        self.published = current;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages() -> Vec<DiscoveryMessage> {
        let config = HomeAssistantConfig {
            discovery: true,
            discovery_prefix: "homeassistant".into(),
            labels: vec!["person".into(), "traffic light".into()],
        };
        let cameras = ["front".to_string(), "back".to_string()];
        let context = DiscoveryContext {
            device_id: "orin1",
            topic_prefix: "jetson-detectd/orin1",
            cameras: &cameras,
            sw_version: "0.1.0",
        };
        discovery_messages(&config, &context)
    }

    fn json(message: &DiscoveryMessage) -> serde_json::Value {
        serde_json::from_slice(&message.payload).expect("valid JSON")
    }

    #[test]
    fn one_sensor_per_camera_and_label_plus_availability() {
        let messages = messages();
        let topics: Vec<&str> = messages.iter().map(|m| m.topic.as_str()).collect();
        assert_eq!(
            topics,
            [
                "homeassistant/sensor/jetson-detectd_orin1/front_person_count/config",
                "homeassistant/sensor/jetson-detectd_orin1/front_traffic_light_count/config",
                "homeassistant/sensor/jetson-detectd_orin1/back_person_count/config",
                "homeassistant/sensor/jetson-detectd_orin1/back_traffic_light_count/config",
                "homeassistant/binary_sensor/jetson-detectd_orin1/online/config",
            ]
        );
        let sensor = json(&messages[1]);
        assert_eq!(sensor["state_topic"], "jetson-detectd/orin1/front/counts/traffic_light");
        assert_eq!(sensor["availability_topic"], "jetson-detectd/orin1/status");
        assert_eq!(sensor["unique_id"], "jetson-detectd_orin1_front_traffic_light_count");
        assert!(sensor.get("value_template").is_none(), "the count topic holds the number itself");
        let online = json(&messages[4]);
        assert_eq!(
            (online["state_topic"].as_str(), online["payload_on"].as_str()),
            (Some("jetson-detectd/orin1/status"), Some("online"))
        );
        assert_eq!(online["device"], sensor["device"], "every entity belongs to one device");
    }

    #[test]
    fn zones_get_count_sensors_per_label_and_an_occupied_sensor() {
        let config = HomeAssistantConfig {
            discovery: true,
            discovery_prefix: "homeassistant".into(),
            labels: vec!["person".into(), "traffic light".into()],
        };
        let cameras = ["front".to_string()];
        let context =
            DiscoveryContext { device_id: "orin1", topic_prefix: "jd/orin1", cameras: &cameras, sw_version: "0.1.0" };
        let cars = ["car".to_string()];
        let zones = [
            ZoneEntities { camera: "front", zone: "drive", labels: &cars },
            ZoneEntities { camera: "front", zone: "yard", labels: &[] },
        ];
        let messages = zone_discovery_messages(&config, &context, &zones);
        let topics: Vec<&str> = messages.iter().map(|m| m.topic.as_str()).collect();
        assert_eq!(
            topics,
            [
                "homeassistant/sensor/jetson-detectd_orin1/front_drive_car_count/config",
                "homeassistant/binary_sensor/jetson-detectd_orin1/front_drive_occupied/config",
                "homeassistant/sensor/jetson-detectd_orin1/front_yard_person_count/config",
                "homeassistant/sensor/jetson-detectd_orin1/front_yard_traffic_light_count/config",
                "homeassistant/binary_sensor/jetson-detectd_orin1/front_yard_occupied/config",
            ]
        );
        let count = json(&messages[3]);
        assert_eq!(count["state_topic"], "jd/orin1/front/zones/yard/traffic_light");
        assert!(count.get("value_template").is_none(), "the count topic holds the number itself");
        let occupied = json(&messages[4]);
        assert_eq!(occupied["state_topic"], "jd/orin1/front/zones/yard");
        assert_eq!(occupied["device_class"], "occupancy");
        assert_eq!(occupied["device"], json(&messages[0])["device"]);
    }
}
