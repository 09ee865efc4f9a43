//! Validation of a typed config: every value checked against what is allowed, each error naming
//! the file, the key and the allowed range.
//!
//! Owns: the rules between the core's keys (a model must be described, DLA needs reduced
//! precision, a camera's names must be valid topic levels), and the checks every section may use
//! ([`is_rate`], [`is_variable_name`]); zones and lines go through the one zone
//! parser (`super::scene`). A component's section checks its own keys
//! (`super::whole::Section::validate`). Must not: open models, cameras or sockets
//! (`check-config` relies on it).

use std::collections::BTreeSet;

use toml::Table;

use super::device::{BackendChoice, MAX_CPU_THREADS};
use super::engine::{Precision, MAX_BATCH, MAX_BATCH_TIMEOUT_MS, MAX_FRAME_SLOTS, MAX_WORKSPACE_MIB};
use super::error::ConfigError;
use super::merge::{is_set, names_a_model};
use super::model::{DESCRIPTION_KEYS, MAX_DETECTIONS};
use super::scene::parse_scene;
use super::topic::is_topic_segment;
use super::whole::Config;
use crate::preprocess::TensorDtype;
use crate::source::limits::{MAX_ALLOC_MIB, MAX_IMAGE_SIDE};

impl Config {
    /// The `[model]` defaults describe the bundled model; with another model they would be silently
    /// wrong (a YOLO export fed 300×300 u8 NHWC input, decoded as SSD, labelled as COCO). A config
    /// that names its own ONNX file must name its labels (the rest is recognised from the file);
    /// one that names only a prebuilt engine, which cannot be read here, must describe it all.
    pub(super) fn check_model_is_described(&self, user: &Table) -> Result<(), ConfigError> {
        if !names_a_model(user) {
            return Ok(());
        }
        let required: &[&[&str]] = if self.model.onnx.is_some() { &MODEL_DESCRIPTION[..1] } else { &MODEL_DESCRIPTION };
        match required.iter().find(|key| !is_set(user, key)) {
            None => Ok(()),
            Some(missing) if self.model.onnx.is_some() => Err(self.invalid(
                &missing.join("."),
                "must be set when `model.onnx` is: the default labels are the bundled model's, not yours",
            )),
            Some(missing) => Err(self.invalid(
                &missing.join("."),
                "must be set when only `model.engine` is: a prebuilt engine cannot be read to recognise it, and \
                 the defaults of `model.labels`, `model.decoder` and `model.input` (width, height, layout, dtype) \
                 describe the bundled model, not yours",
            )),
        }
    }

    /// The [`DESCRIPTION_KEYS`] to recognise from the ONNX file: those `user` leaves unset when it
    /// names its own `model.onnx`. A config that describes its model as versions before
    /// recognition required (`decoder` and the input's `width`, `height`, `layout`, `dtype`) keeps
    /// the defaults for the rest, as it always had: upgrading changes none of its detections.
    pub(super) fn keys_to_recognise(&self, user: &Table) -> Vec<&'static str> {
        let described_before = MODEL_DESCRIPTION[1..].iter().all(|key| is_set(user, key));
        if !is_set(user, &["model", "onnx"]) || described_before {
            return Vec::new();
        }
        DESCRIPTION_KEYS
            .into_iter()
            .filter(|key| {
                let path = std::iter::once("model").chain(key.split('.')).collect::<Vec<_>>();
                !is_set(user, &path)
            })
            .collect()
    }

    /// An error naming `key` (`mqtt.qos`, `camera[1].fps`) of this config's file.
    pub fn invalid(&self, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid { origin: self.origin.clone(), key: key.into(), message: message.into() }
    }

    /// What is wrong with the file that `key` names (a label file that does not read or parse),
    /// as an error of this config: its file, the key, then `error`.
    pub fn file_error(&self, key: &str, error: impl std::fmt::Display) -> ConfigError {
        self.invalid(key, error.to_string())
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let m = &self.model;
        match (&m.onnx, &m.engine) {
            (None, None) => {
                return Err(self.invalid("model", "set `onnx` (a model file) or `engine` (a prebuilt TensorRT engine)"))
            }
            (None, Some(_)) if self.device.backend == BackendChoice::Cpu => {
                return Err(
                    self.invalid("model.engine", "a TensorRT engine cannot run on the CPU backend; set `model.onnx`")
                )
            }
            _ => {}
        }
        if !(0.0..=1.0).contains(&m.score_threshold) {
            return Err(self.invalid("model.score_threshold", format!("{} is outside 0.0..=1.0", m.score_threshold)));
        }
        if !(0.0..=1.0).contains(&m.nms_iou) {
            return Err(self.invalid("model.nms_iou", format!("{} is outside 0.0..=1.0", m.nms_iou)));
        }
        if !(1..=MAX_DETECTIONS).contains(&m.max_detections) {
            return Err(
                self.invalid("model.max_detections", format!("{} is outside 1..={MAX_DETECTIONS}", m.max_detections))
            );
        }
        let input = &m.input;
        for (key, value) in [("model.input.width", input.width), ("model.input.height", input.height)] {
            if !(1..=8192).contains(&value) {
                return Err(self.invalid(key, format!("{value} is outside 1..=8192")));
            }
        }
        if input.std.iter().any(|s| !s.is_finite() || *s == 0.0) || input.mean.iter().any(|v| !v.is_finite()) {
            return Err(self.invalid("model.input.std", "mean must be finite and std finite and non-zero"));
        }
        if input.dtype == TensorDtype::U8 && (input.mean != [0.0; 3] || input.std != [1.0; 3]) {
            return Err(self.invalid("model.input.mean", "u8 inputs take raw pixels: leave mean/std at their defaults"));
        }
        if let Some(threads) = self.device.cpu_threads.filter(|threads| threads.get() > MAX_CPU_THREADS) {
            return Err(self.invalid("device.cpu_threads", format!("{threads} is outside 1..={MAX_CPU_THREADS}")));
        }
        if !(2..=MAX_FRAME_SLOTS).contains(&self.engine.frame_slots) {
            return Err(self.invalid(
                "engine.frame_slots",
                format!("{} is outside 2..={MAX_FRAME_SLOTS}", self.engine.frame_slots),
            ));
        }
        if self.engine.max_batch.get() > MAX_BATCH {
            return Err(
                self.invalid("engine.max_batch", format!("{} is outside 1..={MAX_BATCH}", self.engine.max_batch))
            );
        }
        if self.engine.batch_timeout_ms > MAX_BATCH_TIMEOUT_MS {
            return Err(self.invalid(
                "engine.batch_timeout_ms",
                format!("{} is outside 0..={MAX_BATCH_TIMEOUT_MS}", self.engine.batch_timeout_ms),
            ));
        }
        if let Some(workers) = self.device.cpu_workers.filter(|workers| workers.get() > MAX_CPU_THREADS) {
            return Err(self.invalid("device.cpu_workers", format!("{workers} is outside 1..={MAX_CPU_THREADS}")));
        }
        if self.engine.optimization_level > 5 {
            return Err(self.invalid("engine.optimization_level", "allowed: 0..=5"));
        }
        if !(0.0..=1.0).contains(&self.engine.min_agreement) {
            return Err(self.invalid("engine.min_agreement", "allowed: 0.0..=1.0 (0 checks nothing)"));
        }
        if !(60..=86_400).contains(&self.engine.build_timeout_s) {
            return Err(self.invalid("engine.build_timeout_s", "allowed: 60..=86400 (a minute to a day)"));
        }
        self.validate_engine_store()?;
        if !(1..=MAX_WORKSPACE_MIB).contains(&self.engine.workspace_mib) {
            return Err(self.invalid(
                "engine.workspace_mib",
                format!("{} is outside 1..={MAX_WORKSPACE_MIB}", self.engine.workspace_mib),
            ));
        }
        if self.engine.dla_core.is_some() && self.engine.precision == Precision::Fp32 {
            return Err(self.invalid(
                "engine.dla_core",
                "DLA cores run FP16 and INT8 layers only (with precision = \"fp32\" every layer would fall back to \
                 the GPU): set engine.precision = \"fp16\" (or \"int8\" for a model with Q/DQ nodes), or remove \
                 dla_core",
            ));
        }
        let limits = &self.limits;
        for (key, value) in [("limits.max_width", limits.max_width), ("limits.max_height", limits.max_height)] {
            if value == 0 {
                return Err(self.invalid(key, "must be at least 1 (pixels)"));
            }
        }
        for (key, value) in [("limits.max_width", limits.max_width), ("limits.max_height", limits.max_height)] {
            if value > MAX_IMAGE_SIDE {
                return Err(self.invalid(key, format!("{value} is outside 1..={MAX_IMAGE_SIDE} (pixels)")));
            }
        }
        if !(1..=MAX_ALLOC_MIB).contains(&limits.max_alloc_mib) {
            return Err(self.invalid(
                "limits.max_alloc_mib",
                format!("{} is outside 1..={MAX_ALLOC_MIB} (MiB)", limits.max_alloc_mib),
            ));
        }
        if self.cameras.is_empty() {
            return Err(self.invalid("camera", "configure at least one [[camera]]"));
        }
        let mut names = BTreeSet::new();
        for (i, camera) in self.cameras.iter().enumerate() {
            let key = format!("camera[{i}].name");
            if !is_topic_segment(&camera.name) {
                return Err(self.invalid(&key, format!("{:?}: use 1..=64 letters, digits, `_` or `-`", camera.name)));
            }
            if !names.insert(camera.name.as_str()) {
                return Err(self.invalid(&key, format!("{:?} is used by two cameras", camera.name)));
            }
            if !is_rate(camera.fps) {
                return Err(self.invalid(&format!("camera[{i}].fps"), format!("{}: {RATE_ALLOWED}", camera.fps)));
            }
            camera.source.kind().validate(limits).map_err(|problem| {
                let key = match problem.key {
                    Some(key) => format!("camera[{i}].source.{key}"),
                    None => format!("camera[{i}].source"),
                };
                self.invalid(&key, problem.message)
            })?;
            // Labels are resolved once the label file is read (`scene::camera_scene`).
            parse_scene(&camera.name, &camera.zones, &camera.lines)
                .map_err(|e| self.invalid(&format!("camera[{i}].{}", e.key), e.message))?;
        }
        self.validate_tracking()?;
        if self.telemetry.interval_s > MAX_INTERVAL_S as u32 {
            return Err(self.invalid(
                "telemetry.interval_s",
                format!("{} is outside 0..={} (a day)", self.telemetry.interval_s, MAX_INTERVAL_S as u32),
            ));
        }
        self.validate_http()?;
        self.validate_record()?;
        self.validate_reid()?;
        if !(1..=100).contains(&self.snapshot.jpeg_quality) {
            return Err(self.invalid("snapshot.jpeg_quality", "allowed: 1..=100"));
        }
        if !(self.snapshot.interval_s > 0.0 && self.snapshot.interval_s <= MAX_INTERVAL_S) {
            return Err(
                self.invalid("snapshot.interval_s", format!("allowed: above 0 and at most {MAX_INTERVAL_S} (a day)"))
            );
        }
        if let Some(id) = &self.device.id {
            if !is_topic_segment(id) {
                return Err(self.invalid("device.id", format!("{id:?}: use 1..=64 letters, digits, `_` or `-`")));
            }
        }
        Ok(())
    }

    fn validate_http(&self) -> Result<(), ConfigError> {
        let http = &self.http;
        for (i, host) in http.allowed_hosts.iter().enumerate() {
            if let Err(reason) = check_allowed_host(host) {
                return Err(self.invalid(&format!("http.allowed_hosts[{i}]"), format!("{host:?}: {reason}")));
            }
        }
        if let Some(url) = &http.public_url {
            if let Err(reason) = check_public_url(url) {
                return Err(self.invalid("http.public_url", format!("{url:?}: {reason}")));
            }
        }
        if http.listen.is_empty() {
            return Ok(());
        }
        let Some(address) = http.listen_addr() else {
            return Err(self.invalid(
                "http.listen",
                format!("{:?}: use an `ip:port` such as \"127.0.0.1:8090\" (\"\" turns the server off)", http.listen),
            ));
        };
        if !address.ip().is_loopback() && http.token_file.is_none() {
            return Err(self.invalid(
                "http.token_file",
                format!(
                    "listening on {address} opens the page and the API beyond this machine: set a token_file \
                     (writes then need its token), or listen on 127.0.0.1"
                ),
            ));
        }
        Ok(())
    }

    fn validate_tracking(&self) -> Result<(), ConfigError> {
        let t = &self.tracking;
        if !t.max_lost_s.is_finite() || t.max_lost_s <= 0.0 || t.max_lost_s > 3600.0 {
            return Err(self.invalid("tracking.max_lost_s", format!("{} is outside 0 < s <= 3600", t.max_lost_s)));
        }
        if !(1..=100).contains(&t.min_hits) {
            return Err(self.invalid("tracking.min_hits", format!("{} is outside 1..=100", t.min_hits)));
        }
        if !(0.0..=1.0).contains(&t.high_score) {
            return Err(self.invalid("tracking.high_score", format!("{} is outside 0.0..=1.0", t.high_score)));
        }
        if !(t.match_iou > 0.0 && t.match_iou <= 1.0) {
            return Err(self.invalid("tracking.match_iou", format!("{} is outside 0 < iou <= 1", t.match_iou)));
        }
        if !(1..=1000).contains(&t.max_tracks) {
            return Err(self.invalid("tracking.max_tracks", format!("{} is outside 1..=1000", t.max_tracks)));
        }
        if !t.stationary_px.is_finite() || t.stationary_px < 0.0 {
            return Err(self.invalid("tracking.stationary_px", "must be ≥ 0"));
        }
        if !t.stationary_s.is_finite() || t.stationary_s <= 0.0 {
            return Err(self.invalid("tracking.stationary_s", "must be > 0"));
        }
        Ok(())
    }
}

/// Longest interval a rate or period may stand for, in seconds (a day): anything longer is a
/// typo, and a rate so small that its interval overflows a `Duration` would be a crash.
pub const MAX_INTERVAL_S: f32 = 86_400.0;

/// What [`is_rate`] allows, in words.
pub const RATE_ALLOWED: &str = "allowed: 0 (no limit), or from 1/86400 (once a day) up, per second";

/// A per-second rate: 0 for none, else at least once a day.
pub fn is_rate(value: f32) -> bool {
    value == 0.0 || (value.is_finite() && value >= 1.0 / MAX_INTERVAL_S)
}

/// The keys that describe a model; see [`Config::check_model_is_described`].
const MODEL_DESCRIPTION: [&[&str]; 6] = [
    &["model", "labels"],
    &["model", "decoder"],
    &["model", "input", "width"],
    &["model", "input", "height"],
    &["model", "input", "layout"],
    &["model", "input", "dtype"],
];

/// A name (`jetson`, `jetson.local`) or an IP address a browser may put in `Host`: no port, no
/// scheme, no wildcard.
fn check_allowed_host(host: &str) -> Result<(), &'static str> {
    let bare = host.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')).unwrap_or(host);
    if bare.parse::<std::net::IpAddr>().is_ok() {
        return Ok(());
    }
    let name = host.strip_suffix('.').unwrap_or(host);
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
        return Err("a host name (letters, digits, `-` and `.`) or an IP address: no port, scheme or wildcard");
    }
    Ok(())
}

/// `http.public_url`: `http://` or `https://`, a host (a name, an IPv4 address or a bracketed IPv6
/// one) with an optional port, and nothing after it but an optional `/` — an API path is appended.
fn check_public_url(url: &str) -> Result<(), &'static str> {
    const SHAPE: &str =
        "use http:// or https://, a host and an optional port, no path (e.g. \"http://jetson.lan:8090\")";
    let Some(rest) = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")) else { return Err(SHAPE) };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = match authority.strip_prefix('[').and_then(|v6| v6.split_once(']')) {
        Some((address, after)) => {
            (&authority[..address.len() + 2], after.strip_prefix(':').or(Some(after).filter(|a| !a.is_empty())))
        }
        None => match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    if port.is_some_and(|port| port.parse::<u16>().is_err()) || check_allowed_host(host).is_err() {
        return Err(SHAPE);
    }
    Ok(())
}

/// An environment variable name as shells accept it: `[A-Za-z_][A-Za-z0-9_]*`, at most 255 bytes.
pub fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 255
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Config {
    /// `[engine.store]`: its bounds, and what `push` and the store need beside the URL.
    fn validate_engine_store(&self) -> Result<(), ConfigError> {
        use super::engine_store::{StoreLocation, LEASE_S, MAX_PACK_MIB, TIMEOUT_S};
        let store = &self.engine.store;
        let bounded = [
            ("engine.store.timeout_s", store.timeout_s, TIMEOUT_S),
            ("engine.store.max_pack_mib", store.max_pack_mib, MAX_PACK_MIB),
            ("engine.store.lease_s", store.lease_s, LEASE_S),
        ];
        for (key, value, range) in bounded {
            if !range.contains(&value) {
                return Err(self.invalid(key, format!("{value} is outside {}..={}", range.start(), range.end())));
            }
        }
        if store.push && store.url.is_none() {
            return Err(self.invalid("engine.store.push", "push = true needs engine.store.url (where to push)"));
        }
        if store.push && store.signing_key.is_none() {
            return Err(self.invalid(
                "engine.store.signing_key",
                "push = true signs what it uploads: set signing_key to the fleet's private key (a secret file: \
                 root:jetson-detectd, mode 0640)",
            ));
        }
        if store.url.is_some() && store.verify && store.public_key.is_none() {
            return Err(self.invalid(
                "engine.store.public_key",
                "a store's packs are used only when their signature verifies: set public_key to the fleet's public \
                 key (`jetson-detectd engine keygen KEY` writes KEY.pub), or verify = false",
            ));
        }
        if store.password_file.is_some() && store.username.is_none() {
            return Err(
                self.invalid("engine.store.username", "password_file needs the user name (or S3 access key id)")
            );
        }
        if let Some(endpoint) = &store.endpoint {
            let s3 = matches!(&store.url, Some(StoreLocation::Objects { url }) if url.starts_with("s3://"));
            if !s3 || !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
                return Err(self.invalid(
                    "engine.store.endpoint",
                    "an S3-compatible server's http:// or https:// URL, for an s3:// store only",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_url_is_a_scheme_a_host_and_a_port_without_a_path() {
        for good in ["http://jetson.lan:8090", "https://jetson.lan/", "http://192.168.1.20:8090", "http://[::1]:8090"] {
            assert_eq!(check_public_url(good), Ok(()), "{good}");
        }
        for bad in [
            "jetson.lan:8090",
            "ftp://jetson.lan",
            "http://",
            "http://jetson.lan:port",
            "http://jetson.lan:8090/page",
            "http://jetson.lan?x=1",
            "http://[::1]x",
            "http://je tson",
            "http://a'b",
        ] {
            assert!(check_public_url(bad).is_err(), "{bad}");
        }
    }
}
