//! Home Assistant MQTT discovery: the retained config messages that make Home Assistant create a
//! detection-count sensor per camera and label, and an availability binary sensor.
//!
//! Owns: discovery topics, unique ids, and the JSON of each config message. Must not: publish (the
//! daemon hands the messages to the MQTT publisher, retained, after connecting) or know the
//! detection payload beyond the documented `detections[].label` field its templates read.
//!
//! A count sensor's state comes from `<prefix>/<camera>/detections`. With `mqtt.publish =
//! "detections"` a frame without detections sends nothing, so the count never falls back to 0;
//! `every_frame` (or `on_change`, which also reports the change to "nothing") keeps it current.

use serde_json::json;

use crate::config::HomeAssistantConfig;

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
    let device = json!({
        "identifiers": [node_id],
        "name": format!("jetson-detectd {}", context.device_id),
        "manufacturer": "jetson-detectd",
        "model": "Object detector",
        "sw_version": context.sw_version,
    });
    let mut messages = Vec::with_capacity(context.cameras.len() * config.labels.len() + 1);
    for camera in context.cameras {
        for label in &config.labels {
            let object_id = format!("{camera}_{}_count", sanitize(label));
            let payload = json!({
                "name": format!("{camera} {label} count"),
                "unique_id": format!("{node_id}_{object_id}"),
                "state_topic": format!("{}/{camera}/detections", context.topic_prefix),
                "value_template": count_template(label),
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

/// Jinja template counting the detections of one label in a detection message.
fn count_template(label: &str) -> String {
    let quoted = label.replace('\\', "\\\\").replace('\'', "\\'");
    format!("{{{{ value_json.detections | selectattr('label', 'equalto', '{quoted}') | list | count }}}}")
}

/// Discovery object ids allow `[a-zA-Z0-9_-]`; labels such as `traffic light` do not.
fn sanitize(label: &str) -> String {
    label.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c.to_ascii_lowercase() } else { '_' }).collect()
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
        assert_eq!(sensor["state_topic"], "jetson-detectd/orin1/front/detections");
        assert_eq!(sensor["availability_topic"], "jetson-detectd/orin1/status");
        assert_eq!(sensor["unique_id"], "jetson-detectd_orin1_front_traffic_light_count");
        assert_eq!(
            sensor["value_template"],
            "{{ value_json.detections | selectattr('label', 'equalto', 'traffic light') | list | count }}"
        );
        let online = json(&messages[4]);
        assert_eq!(
            (online["state_topic"].as_str(), online["payload_on"].as_str()),
            (Some("jetson-detectd/orin1/status"), Some("online"))
        );
        assert_eq!(online["device"], sensor["device"], "every entity belongs to one device");
    }

    #[test]
    fn quotes_in_labels_cannot_break_the_template() {
        assert_eq!(
            count_template("it's"),
            "{{ value_json.detections | selectattr('label', 'equalto', 'it\\'s') | list | count }}"
        );
    }
}
