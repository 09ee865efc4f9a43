//! One camera's recording as the whole config decides it ([`Config::recording`]: the camera's
//! `record` overrides over `[record]`), and `[record]`'s checks against the rest of the config
//! (tracking on, the zones it names). Must not: open the record directory or know what a source
//! can encode (`crate::record` checks that at start and at `check-config`).

use std::time::Duration;

use super::camera::{CameraConfig, ZoneConfig};
use super::error::ConfigError;
use super::record::{
    Recording, MAX_BITRATE_KBPS, MAX_CLIP_S, MAX_DAYS, MAX_ENCODE_FPS, MAX_ENCODE_WIDTH, MAX_MIN_EVENT_S, MAX_POST_S,
    MAX_PREROLL_MIB, MAX_PRE_S, MIN_CLIP_S,
};
use super::whole::Config;

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
    use crate::config::record::EncoderChoice;

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
