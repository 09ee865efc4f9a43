//! How the MQTT outlet's sections, `[mqtt]` and `[homeassistant]` ([`super::config`]'s types),
//! are read: their part of the built-in default with its documentation (`mqtt.toml`,
//! `homeassistant.toml`), the rules between their keys, their secrets, their paths and what a
//! reload applies ([`Section`]).
//!
//! Owns: those rules, and their bounds. Must not: read the password or TLS files
//! (`super::settings` does, at start), or know another outlet.

use std::path::PathBuf;

use super::config::{HomeAssistantConfig, MqttConfig};
use super::homeassistant::collision;
use crate::config::validate::{is_rate, is_variable_name, RATE_ALLOWED};
use crate::config::{topic_segment, Config, ConfigError};
use crate::config::{Resolve, Section};

/// Largest `mqtt.shutdown_flush_ms` accepted: a minute, within systemd's default stop timeout (90 s).
pub const MAX_SHUTDOWN_FLUSH_MS: u64 = 60_000;
/// Largest `mqtt.reconnect_max_ms` accepted: ten minutes between attempts.
pub const MAX_RECONNECT_MS: u64 = 600_000;
/// Bounds of `mqtt.queue_max_mib`: room for two of the largest messages (8 MiB), at most 4 GiB.
const MIN_QUEUE_MIB: u32 = 17;
const MAX_QUEUE_MIB: u32 = 4096;
/// Longest topic prefix accepted, in bytes: MQTT topics hold at most 65535 bytes, and the daemon
/// appends levels to the prefix (camera names, Home Assistant ids), for which 1 KiB is kept.
pub const MAX_TOPIC_PREFIX_BYTES: usize = 65535 - 1024;

impl Section for MqttConfig {
    const KEY: &'static str = "mqtt";
    const DEFAULTS: &'static str = include_str!("mqtt.toml");
    const RELOADABLE: &'static [&'static str] = &["mqtt.publish", "mqtt.max_rate_hz"];

    fn resolve_paths(&mut self, resolve: &mut Resolve<'_>) {
        if let Some(path) = self.password_file.as_mut() {
            resolve(path, &["mqtt", "password_file"]);
        }
        if let Some(tls) = self.tls.as_mut() {
            resolve(&mut tls.ca_file, &["mqtt", "tls"]);
            if let Some(path) = tls.client_cert.as_mut() {
                resolve(path, &["mqtt", "tls"]);
            }
            if let Some(path) = tls.client_key.as_mut() {
                resolve(path, &["mqtt", "tls"]);
            }
        }
    }

    fn validate(&self, config: &Config) -> Result<(), ConfigError> {
        if self.qos > 2 {
            return Err(config.invalid("mqtt.qos", format!("{} is not 0, 1 or 2", self.qos)));
        }
        if self.queue_capacity == 0 {
            return Err(config.invalid("mqtt.queue_capacity", "must be at least 1"));
        }
        if !(MIN_QUEUE_MIB..=MAX_QUEUE_MIB).contains(&self.queue_max_mib) {
            return Err(config.invalid(
                "mqtt.queue_max_mib",
                format!("allowed: {MIN_QUEUE_MIB}..={MAX_QUEUE_MIB} (the largest message is 8 MiB)"),
            ));
        }
        if !is_rate(self.max_rate_hz) {
            return Err(config.invalid("mqtt.max_rate_hz", format!("{}: {RATE_ALLOWED}", self.max_rate_hz)));
        }
        if let Err(reason) = check_host(&self.host) {
            return Err(config.invalid("mqtt.host", format!("{:?}: {reason}", self.host)));
        }
        if self.port == 0 {
            return Err(config.invalid("mqtt.port", "0 is outside 1..=65535"));
        }
        if self.shutdown_flush_ms > MAX_SHUTDOWN_FLUSH_MS {
            return Err(config.invalid(
                "mqtt.shutdown_flush_ms",
                format!("{} is outside 0..={MAX_SHUTDOWN_FLUSH_MS}", self.shutdown_flush_ms),
            ));
        }
        if self.reconnect_max_ms > MAX_RECONNECT_MS {
            return Err(config.invalid(
                "mqtt.reconnect_max_ms",
                format!("{} is outside 1..={MAX_RECONNECT_MS}", self.reconnect_max_ms),
            ));
        }
        if self.reconnect_min_ms == 0 || self.reconnect_min_ms > self.reconnect_max_ms {
            return Err(config.invalid("mqtt.reconnect_min_ms", "must be ≥ 1 and ≤ reconnect_max_ms"));
        }
        if let Some(name) = &self.password_env {
            if !is_variable_name(name) {
                // The value is not echoed: a password put here by mistake must not reach a log.
                return Err(config.invalid(
                    "mqtt.password_env",
                    "must be the name of an environment variable (letters, digits and `_`, not starting with a \
                     digit, at most 255), not the password itself",
                ));
            }
        }
        if self.password_file.is_some() && self.password_env.is_some() {
            return Err(config.invalid("mqtt.password_file", "set either password_file or password_env, not both"));
        }
        if (self.password_file.is_some() || self.password_env.is_some()) && self.username.is_none() {
            return Err(config.invalid("mqtt.username", "a password needs a username"));
        }
        if let Some(problem) = self.prefix.as_deref().and_then(topic_prefix_problem) {
            return Err(config.invalid("mqtt.prefix", problem));
        }
        if let Some(tls) = &self.tls {
            if tls.client_cert.is_some() != tls.client_key.is_some() {
                return Err(config.invalid("mqtt.tls.client_cert", "set client_cert and client_key together"));
            }
        }
        Ok(())
    }

    fn secret_files(&self) -> Vec<(String, PathBuf)> {
        let password = self.password_file.iter().map(|path| ("mqtt.password_file".to_owned(), path.clone()));
        let key = self.tls.iter().filter_map(|tls| tls.client_key.clone());
        password.chain(key.map(|path| ("mqtt.tls.client_key".to_owned(), path))).collect()
    }

    /// A client certificate goes with its key.
    fn forget_secret(&mut self, key: &str) {
        match key {
            "mqtt.password_file" => self.password_file = None,
            "mqtt.tls.client_key" => {
                if let Some(tls) = self.tls.as_mut() {
                    tls.client_cert = None;
                    tls.client_key = None;
                }
            }
            _ => {}
        }
    }

    fn reloaded(&self, reloaded: &MqttConfig) -> MqttConfig {
        MqttConfig { publish: reloaded.publish, max_rate_hz: reloaded.max_rate_hz, ..self.clone() }
    }

    fn effective(&self, config: &Config) -> MqttConfig {
        MqttConfig { prefix: Some(self.topic_prefix(config)), client_id: Some(self.client_id(config)), ..self.clone() }
    }
}

impl Section for HomeAssistantConfig {
    const KEY: &'static str = "homeassistant";
    const DEFAULTS: &'static str = include_str!("homeassistant.toml");

    /// The topics and the link; the labels against each other (the label file, read at start,
    /// is `super::homeassistant::check_labels`'s); and no two entities sharing an id.
    fn validate(&self, config: &Config) -> Result<(), ConfigError> {
        if let Some(problem) = topic_prefix_problem(&self.discovery_prefix) {
            return Err(config.invalid("homeassistant.discovery_prefix", problem));
        }
        if let Some(problem) = self.status_topic.as_deref().and_then(topic_prefix_problem) {
            return Err(config.invalid("homeassistant.status_topic", problem));
        }
        if let Some(url) = &self.configuration_url {
            let scheme = url.split_once("://").map(|(scheme, _)| scheme);
            if !matches!(scheme, Some("http" | "https")) || url.len() > 2048 || url.chars().any(char::is_whitespace) {
                return Err(config.invalid(
                    "homeassistant.configuration_url",
                    format!("{url:?}: use an http:// or https:// address without spaces"),
                ));
            }
        }
        let mut sensor_ids = std::collections::BTreeSet::new();
        for label in &self.labels {
            if !sensor_ids.insert(topic_segment(label)) {
                return Err(config.invalid(
                    "homeassistant.labels",
                    format!(
                        "{label:?} gives the same sensor id as an earlier label (ids are lower case, other \
                         characters than letters, digits and `-` become `_`): list each label once"
                    ),
                ));
            }
        }
        match collision(config) {
            Some(message) => Err(config.invalid("homeassistant.discovery", message)),
            None => Ok(()),
        }
    }
}

/// Why `prefix` cannot start the topics the daemon publishes to (it appends `/<levels>`), if it
/// cannot. A broker acknowledges but drops a publish to a `$` topic (`$SYS/...`), so those would
/// be lost silently; wildcards, NUL and over-long topics make every publish fail.
fn topic_prefix_problem(prefix: &str) -> Option<String> {
    let problem = if prefix.is_empty() {
        "must not be empty".to_owned()
    } else if prefix.starts_with('$') {
        "must not start with `$`: topics starting with `$` belong to the broker ($SYS), which acknowledges \
         publishes to them and drops them"
            .to_owned()
    } else if prefix.split('/').any(str::is_empty) {
        "must not hold an empty level (a leading or trailing `/`, or `//`)".to_owned()
    } else if prefix.contains(['+', '#']) {
        "must not hold the wildcards `+` or `#`".to_owned()
    } else if prefix.contains('\0') {
        "must not hold a NUL character".to_owned()
    } else if prefix.len() > MAX_TOPIC_PREFIX_BYTES {
        format!(
            "is {} bytes; at most {MAX_TOPIC_PREFIX_BYTES} (an MQTT topic holds 65535 bytes, with room for the levels \
             appended to the prefix)",
            prefix.len()
        )
    } else {
        return None;
    };
    Some(problem)
}

/// `mqtt.host`: a host name or an IP address, without a port, a scheme or spaces.
fn check_host(host: &str) -> Result<(), &'static str> {
    if host.is_empty() {
        return Err("must not be empty");
    }
    if host.parse::<std::net::Ipv6Addr>().is_ok() {
        return Ok(());
    }
    if host.contains(':') {
        return Err("a host name or IP address only: set the port in `mqtt.port`, and no `mqtt://` scheme");
    }
    if host.len() > 253 || host.chars().any(|c| c.is_whitespace() || c.is_control() || c == '/') {
        return Err("not a host name (at most 253 characters, no spaces or `/`)");
    }
    Ok(())
}
