//! The `[record]` section (event clips) and each camera's `record` overrides.
//!
//! Owns: the schema of the recording keys, their ranges, and resolving one camera's recording
//! settings ([`Config::recording`]: the camera's overrides over `[record]`). Must not: open the
//! record directory, check free space or know what a source can encode (that is `crate::record`'s
//! business at start and at `check-config`).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::camera::{CameraConfig, ZoneConfig};
use super::error::ConfigError;
use super::load::Config;

/// Longest pre-roll: the encoded ring holds this much per camera (plus a GOP).
pub const MAX_PRE_S: f32 = 60.0;
/// Longest recording after an event ends.
pub const MAX_POST_S: f32 = 300.0;
/// Longest an event may have to last before it gets a clip.
pub const MAX_MIN_EVENT_S: f32 = 60.0;
/// Clip length bounds: a clip longer than `max_clip_s` is closed and the recording goes on in a new
/// one, so that a parked car cannot make one file of a day.
pub const MIN_CLIP_S: u32 = 10;
pub const MAX_CLIP_S: u32 = 3600;
/// Pre-roll memory per camera, MiB.
pub const MAX_PREROLL_MIB: u32 = 1024;
/// Longest age kept, days (ten years).
pub const MAX_DAYS: u32 = 3650;
/// Largest raw-source encoding rate and width.
pub const MAX_ENCODE_FPS: f32 = 60.0;
pub const MAX_ENCODE_WIDTH: u32 = 3840;
pub const MAX_BITRATE_KBPS: u32 = 100_000;

/// How a raw source (V4L2, CSI, images, a test pattern) gets its frames encoded for clips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EncoderChoice {
    /// The hardware H.264 encoder where the machine has one (`nvv4l2h264enc`), else software.
    Auto,
    /// Only the hardware encoder: a camera that would need software is refused.
    Hardware,
    /// The software encoder (x264) at the reduced rate and size below.
    Software,
    /// Raw sources are not encoded: recording such a camera is refused at `check-config`.
    None,
}

/// `[record.encoder]`: what raw sources are encoded with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncoderConfig {
    pub kind: EncoderChoice,
    /// Frames per second encoded (the camera's frames are thinned to this).
    pub fps: f32,
    /// Widest frame encoded; wider frames are scaled down, aspect kept.
    pub max_width: u32,
    pub bitrate_kbps: u32,
}

/// `[record]`: defaults for every camera and the recorder's shared budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordConfig {
    pub enabled: bool,
    /// Where clips go: one folder per camera. Default: the service's state directory + `clips`.
    #[serde(default = "default_record_dir")]
    pub dir: PathBuf,
    pub pre_s: f32,
    pub post_s: f32,
    /// Labels whose events get a clip; empty: every label.
    pub labels: Vec<String>,
    pub min_event_s: f32,
    pub max_clip_s: u32,
    /// Byte budget of the whole directory, GiB; oldest clips go first.
    pub max_gib: f64,
    /// Clips older than this many days are removed; 0: no age limit.
    pub max_days: u32,
    /// Recording pauses while the file system has less free space than this, MiB.
    pub min_free_mib: u32,
    /// Most memory the encoded pre-roll of one camera may hold, MiB.
    pub preroll_max_mib: u32,
    pub encoder: EncoderConfig,
}

/// A camera's `record = { … }`: each key set here replaces `[record]`'s for this camera.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CameraRecordConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_s: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_s: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    /// Only events inside one of these zones of the camera get a clip; empty: anywhere.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_event_s: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoder: Option<EncoderChoice>,
}

/// One camera's recording settings, resolved and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    pub pre: Duration,
    pub post: Duration,
    /// Empty: every label.
    pub labels: Vec<String>,
    /// Empty: anywhere in the frame.
    pub zones: Vec<String>,
    pub min_event: Duration,
    pub max_clip: Duration,
    pub preroll_max_bytes: usize,
    pub encoder: EncoderConfig,
}

pub(super) fn default_record_dir() -> PathBuf {
    super::service_dirs::ServiceDir::State.default_dir().join("clips")
}

impl Config {
    /// `camera`'s recording settings, `None` when it does not record.
    pub fn recording(&self, camera: &CameraConfig) -> Option<Recording> {
        let defaults = &self.record;
        let own = camera.record.clone().unwrap_or_default();
        if !own.enabled.unwrap_or(defaults.enabled) {
            return None;
        }
        let mut encoder = defaults.encoder;
        if let Some(kind) = own.encoder {
            encoder.kind = kind;
        }
        Some(Recording {
            pre: seconds(own.pre_s.unwrap_or(defaults.pre_s)),
            post: seconds(own.post_s.unwrap_or(defaults.post_s)),
            labels: own.labels.unwrap_or_else(|| defaults.labels.clone()),
            zones: own.zones,
            min_event: seconds(own.min_event_s.unwrap_or(defaults.min_event_s)),
            max_clip: Duration::from_secs(u64::from(defaults.max_clip_s)),
            preroll_max_bytes: (defaults.preroll_max_mib as usize) << 20,
            encoder,
        })
    }

    /// Whether any camera records.
    pub fn records(&self) -> bool {
        self.cameras.iter().any(|camera| self.recording(camera).is_some())
    }

    pub(super) fn validate_record(&self) -> Result<(), ConfigError> {
        let r = &self.record;
        let range = |key: &str, value: f32, max: f32| {
            if value.is_finite() && (0.0..=max).contains(&value) {
                Ok(())
            } else {
                Err(self.invalid(key, format!("{value} is outside 0..={max} (seconds)")))
            }
        };
        range("record.pre_s", r.pre_s, MAX_PRE_S)?;
        range("record.post_s", r.post_s, MAX_POST_S)?;
        range("record.min_event_s", r.min_event_s, MAX_MIN_EVENT_S)?;
        if !(MIN_CLIP_S..=MAX_CLIP_S).contains(&r.max_clip_s) {
            return Err(self.invalid("record.max_clip_s", format!("allowed: {MIN_CLIP_S}..={MAX_CLIP_S} (seconds)")));
        }
        if !(r.max_gib.is_finite() && r.max_gib > 0.0 && r.max_gib <= 1_000_000.0) {
            return Err(self.invalid("record.max_gib", "allowed: above 0 and at most 1000000 (GiB)"));
        }
        if r.max_days > MAX_DAYS {
            return Err(self.invalid("record.max_days", format!("allowed: 0..={MAX_DAYS} (0: no age limit)")));
        }
        if !(1..=MAX_PREROLL_MIB).contains(&r.preroll_max_mib) {
            return Err(self.invalid("record.preroll_max_mib", format!("allowed: 1..={MAX_PREROLL_MIB} (MiB)")));
        }
        if r.min_free_mib > 1 << 20 {
            return Err(self.invalid("record.min_free_mib", "allowed: 0..=1048576 (MiB)"));
        }
        if r.dir.as_os_str().is_empty() {
            return Err(self.invalid("record.dir", "must name a directory"));
        }
        let e = &r.encoder;
        if !(e.fps.is_finite() && e.fps > 0.0 && e.fps <= MAX_ENCODE_FPS) {
            return Err(self.invalid("record.encoder.fps", format!("allowed: above 0 and at most {MAX_ENCODE_FPS}")));
        }
        if !(16..=MAX_ENCODE_WIDTH).contains(&e.max_width) || e.max_width % 2 == 1 {
            return Err(self.invalid(
                "record.encoder.max_width",
                format!("allowed: an even width in 16..={MAX_ENCODE_WIDTH} (pixels)"),
            ));
        }
        if !(64..=MAX_BITRATE_KBPS).contains(&e.bitrate_kbps) {
            return Err(self.invalid("record.encoder.bitrate_kbps", format!("allowed: 64..={MAX_BITRATE_KBPS}")));
        }
        if !self.tracking.enabled {
            if let Some(camera) = self.cameras.iter().find(|camera| self.recording(camera).is_some()) {
                return Err(self.invalid(
                    "record.enabled",
                    format!(
                        "camera {:?} records clips, which follow tracked events: set [tracking] enabled = true",
                        camera.name
                    ),
                ));
            }
        }
        for (i, camera) in self.cameras.iter().enumerate() {
            let Some(own) = &camera.record else { continue };
            let key = |name: &str| format!("camera[{i}].record.{name}");
            if let Some(pre) = own.pre_s {
                range(&key("pre_s"), pre, MAX_PRE_S)?;
            }
            if let Some(post) = own.post_s {
                range(&key("post_s"), post, MAX_POST_S)?;
            }
            if let Some(min) = own.min_event_s {
                range(&key("min_event_s"), min, MAX_MIN_EVENT_S)?;
            }
            if let Some(zone) = camera.record_zone_missing_from(&camera.zones) {
                let known: Vec<&str> = camera.zones.iter().map(|z| z.name.as_str()).collect();
                return Err(self.invalid(
                    &key("zones"),
                    format!("camera {:?} has no zone {zone:?} (its zones: {known:?})", camera.name),
                ));
            }
        }
        Ok(())
    }
}

impl CameraConfig {
    /// A zone this camera's `record.zones` names that `zones` lack: the camera's own (config
    /// validation), or zones it would have after a change (the zones file at start, a save from
    /// the page), which must keep every zone recording depends on.
    pub fn record_zone_missing_from(&self, zones: &[ZoneConfig]) -> Option<&str> {
        let named = self.record.as_ref().map(|record| record.zones.as_slice()).unwrap_or_default();
        named.iter().find(|name| !zones.iter().any(|zone| &zone.name == *name)).map(String::as_str)
    }
}

fn seconds(value: f32) -> Duration {
    Duration::from_secs_f32(value.max(0.0))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::origin::ConfigOrigin;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml(text, ConfigOrigin::File("test.toml".into()), Path::new("/base")).map_err(ConfigError::one)
    }

    const CAMERA: &str = "[[camera]]\nname = \"gate\"\nsource = { kind = \"synthetic\" }\n";

    #[test]
    fn recording_is_off_by_default_and_a_camera_inherits_the_record_section() {
        let config = parse(CAMERA).expect("valid");
        assert!(!config.record.enabled && !config.records());
        assert!(config.record.dir.ends_with("clips"), "{:?}", config.record.dir);
        let config =
            parse(&format!("[record]\nenabled = true\npre_s = 3.0\nlabels = [\"person\"]\n{CAMERA}")).expect("valid");
        let recording = config.recording(&config.cameras[0]).expect("records");
        assert_eq!(recording.pre, Duration::from_secs(3));
        assert_eq!(recording.post, Duration::from_secs(5));
        assert_eq!(recording.labels, ["person"]);
        assert!(recording.zones.is_empty());
        assert_eq!(recording.encoder.kind, EncoderChoice::Auto);
    }

    #[test]
    fn a_camera_overrides_the_defaults_and_may_turn_recording_on_or_off_for_itself() {
        let zone = "[[camera.zone]]\nname = \"drive\"\npolygon = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]\n";
        let config = parse(&format!(
            "{CAMERA}record = {{ enabled = true, post_s = 12.0, zones = [\"drive\"], encoder = \"software\" }}\n{zone}\
             [[camera]]\nname = \"back\"\nsource = {{ kind = \"synthetic\" }}\n"
        ))
        .expect("valid");
        let gate = config.recording(&config.cameras[0]).expect("gate records");
        assert_eq!((gate.post, gate.zones.as_slice()), (Duration::from_secs(12), ["drive".to_owned()].as_slice()));
        assert_eq!(gate.encoder.kind, EncoderChoice::Software);
        assert!(config.recording(&config.cameras[1]).is_none(), "the default stays off");
        let off = parse(&format!("[record]\nenabled = true\n{CAMERA}record = {{ enabled = false }}\n")).expect("valid");
        assert!(!off.records());
    }

    #[test]
    fn out_of_range_values_and_unknown_zones_name_their_key() {
        let cases = [
            ("[record]\npre_s = 61.0", "record.pre_s"),
            ("[record]\npost_s = -1.0", "record.post_s"),
            ("[record]\nmin_event_s = nan", "record.min_event_s"),
            ("[record]\nmax_clip_s = 5", "record.max_clip_s"),
            ("[record]\nmax_gib = 0.0", "record.max_gib"),
            ("[record]\nmax_days = 5000", "record.max_days"),
            ("[record]\npreroll_max_mib = 0", "record.preroll_max_mib"),
            ("[record.encoder]\nfps = 0.0", "record.encoder.fps"),
            ("[record.encoder]\nmax_width = 1281", "record.encoder.max_width"),
            ("[record.encoder]\nbitrate_kbps = 1", "record.encoder.bitrate_kbps"),
        ];
        for (table, key) in cases {
            match parse(&format!("{table}\n{CAMERA}")) {
                Err(ConfigError::Invalid { key: got, .. }) => assert_eq!(got, key),
                other => panic!("expected an invalid `{key}`, got {other:?}"),
            }
        }
        match parse(&format!("{CAMERA}record = {{ enabled = true, zones = [\"nowhere\"] }}\n")) {
            Err(ConfigError::Invalid { key, message, .. }) => {
                assert_eq!(key, "camera[0].record.zones");
                assert!(message.contains("nowhere") && message.contains("gate"), "{message}");
            }
            other => panic!("an unknown zone must be refused, got {other:?}"),
        }
        assert!(parse(&format!("{CAMERA}record = {{ pre_s = 99.0 }}\n")).is_err());
        match parse(&format!("[tracking]\nenabled = false\n[record]\nenabled = true\n{CAMERA}")) {
            Err(ConfigError::Invalid { key, message, .. }) => {
                assert_eq!(key, "record.enabled");
                assert!(message.contains("tracking") && message.contains("gate"), "{message}");
            }
            other => panic!("clips without tracking must be refused, got {other:?}"),
        }
        assert!(parse(&format!("{CAMERA}record = {{ dir = \"/x\" }}\n")).is_err(), "the directory is shared");
    }
}
