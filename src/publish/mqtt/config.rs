//! The MQTT outlet's sections of the config: `[mqtt]` (the broker, the login, the queue, what is
//! published how often) and `[homeassistant]` (discovery), as types.
//!
//! Owns: [`MqttConfig`], [`TlsConfig`], [`PublishMode`], [`HomeAssistantConfig`], the built-in
//! values a config read without the outlet's sections stands on, and the computed defaults of the
//! client id and the topic prefix. How the sections are read and checked (their defaults' text,
//! their rules, secrets and what a reload applies) is `super::sections`'s, which checks discovery's
//! entity ids with `super::homeassistant` (which reads these types: kept apart, no circle). Must
//! not: read the password or TLS files (`super::settings` does, at start), or know another outlet.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use crate::config::section::built_in;
use crate::config::{machine_suffix, Config};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PublishMode {
    /// A message for every processed frame, with or without detections.
    EveryFrame,
    /// A message for every frame that has detections.
    Detections,
    /// Only when the set of labels seen changes (including to none).
    OnChange,
    /// No detections messages (events, snapshots and telemetry still go out).
    None,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// CA bundle (PEM) that signs the broker's certificate.
    pub ca_file: PathBuf,
    /// Client certificate + key (PEM) for mutual TLS; both or neither.
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
}

/// `[mqtt]`: the broker and how the outlet publishes to it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MqttConfig {
    pub host: String,
    pub port: u16,
    /// Default: `jetson-detectd-<device id>-<machine>` ([`MqttConfig::client_id`]).
    pub client_id: Option<String>,
    /// Topic prefix; default `jetson-detectd/<device id>` ([`MqttConfig::topic_prefix`]).
    pub prefix: Option<String>,
    /// QoS for detections, snapshots and telemetry (0, 1 or 2). Status is always QoS 1.
    pub qos: u8,
    pub keep_alive_s: u16,
    /// Messages held while the broker is slow or away; the oldest is dropped (and counted) beyond.
    pub queue_capacity: usize,
    /// The same bound in MiB of payload and topic (a snapshot can be 8 MiB).
    pub queue_max_mib: u32,
    pub publish: PublishMode,
    /// At most this many detection messages per camera per second; 0 = no limit.
    pub max_rate_hz: f32,
    pub username: Option<String>,
    /// File whose first line is the password (preferred).
    pub password_file: Option<PathBuf>,
    /// Environment variable holding the password.
    pub password_env: Option<String>,
    pub tls: Option<TlsConfig>,
    /// Longest wait at shutdown for queued QoS ≥ 1 messages to be acknowledged.
    pub shutdown_flush_ms: u64,
    /// Reconnect backoff bounds.
    pub reconnect_min_ms: u64,
    pub reconnect_max_ms: u64,
}

/// `[homeassistant]`: discovery through the MQTT outlet.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HomeAssistantConfig {
    /// Publish Home Assistant MQTT discovery messages.
    pub discovery: bool,
    pub discovery_prefix: String,
    /// Labels that get a per-camera count sensor.
    pub labels: Vec<String>,
    /// Home Assistant's birth and last-will topic; `None`: `<discovery_prefix>/status`.
    pub status_topic: Option<String>,
    /// The address of the web page that the device page in Home Assistant links to; `None`: the
    /// `http.listen` address when that is one address beyond loopback, else no link.
    pub configuration_url: Option<String>,
}

/// The built-in `[mqtt]` and `[homeassistant]`: what a config read without the outlet's sections
/// (`crate::config::section::Schema::CORE`) has.
static BUILT_IN: LazyLock<(MqttConfig, HomeAssistantConfig)> = LazyLock::new(|| {
    // The outlet's own text, which `built_in_sections_read` proves sets every key.
    let mqtt = built_in::<MqttConfig>().expect("mqtt.toml sets every key of [mqtt]");
    let home_assistant = built_in::<HomeAssistantConfig>().expect("homeassistant.toml sets every key");
    (mqtt, home_assistant)
});

impl MqttConfig {
    /// `config`'s `[mqtt]`, or the built-in one where the config was read without the outlet's
    /// sections.
    pub fn of(config: &Config) -> &MqttConfig {
        config.sections.get::<MqttConfig>().unwrap_or(&BUILT_IN.0)
    }

    /// `prefix`, else `jetson-detectd/<device id>`.
    pub fn topic_prefix(&self, config: &Config) -> String {
        self.prefix.clone().unwrap_or_else(|| format!("jetson-detectd/{}", config.device_id()))
    }

    /// `client_id`, else `jetson-detectd-<device id>-<machine>` ([`machine_suffix`]): two devices
    /// that share a host name (a cloned SD card) must not share an MQTT session.
    pub fn client_id(&self, config: &Config) -> String {
        self.client_id.clone().unwrap_or_else(|| match machine_suffix(Path::new("/")) {
            Some(machine) => format!("jetson-detectd-{}-{machine}", config.device_id()),
            None => format!("jetson-detectd-{}", config.device_id()),
        })
    }
}

impl HomeAssistantConfig {
    /// `config`'s `[homeassistant]`, or the built-in one where the config was read without the
    /// outlet's sections.
    pub fn of(config: &Config) -> &HomeAssistantConfig {
        config.sections.get::<HomeAssistantConfig>().unwrap_or(&BUILT_IN.1)
    }

    /// The topic Home Assistant announces itself on (`online` when it starts).
    pub fn status_topic(&self) -> String {
        self.status_topic.clone().unwrap_or_else(|| format!("{}/status", self.discovery_prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_sections_read() {
        assert_eq!(BUILT_IN.0.port, 1883);
        assert!(!BUILT_IN.1.discovery);
    }
}
