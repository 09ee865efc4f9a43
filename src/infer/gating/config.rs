//! The `[motion]` section: whether frames without motion are kept from inference, how motion is
//! judged, and each camera's own values and masks (`[motion.camera.<name>]`).
//!
//! Owns: the section's schema, its part of the built-in default (`motion.toml`), its ranges and
//! checks (a camera it names exists; masks are polygons), the one rule by which masks saved from
//! the page meet the config's ([`MotionConfig::with_saved_masks`]: a camera's masks in the zones
//! file replace its `[motion.camera.<name>].masks`; a camera the page never saved masks for keeps
//! the config's), and [`MotionConfig::for_camera`], which turns it into what a camera's gate runs
//! with ([`CameraMotion`]: typed, checked values). Must not: judge motion or gate frames
//! (`super::camera_gate`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::zones_file::SavedMasks;
use crate::config::Section;
use crate::config::{parse_masks, Config, ConfigError, MaskPoints};
use crate::motion::{Fraction, MotionParams};
use crate::track::zones::Polygon;

/// Bounds of the times in seconds (`background_s`, `detect_interval_s`).
const MIN_SECONDS: f64 = 0.1;
const MAX_SECONDS: f64 = 3600.0;

/// `[motion]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MotionConfig {
    /// Frames without motion are kept from inference (every camera).
    pub enabled: bool,
    pub threshold: u8,
    pub min_area: f32,
    pub background_s: f32,
    pub light_change: f32,
    pub detect_interval_s: f64,
    /// `[motion.camera.<name>]`: a camera's own values and masks.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub camera: BTreeMap<String, CameraMotionConfig>,
}

/// `[motion.camera.<name>]`: any of `[motion]`'s values for one camera, and its masks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CameraMotionConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_area: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_s: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub light_change: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detect_interval_s: Option<f64>,
    /// Polygons in frame fractions whose changes are not motion.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub masks: Vec<MaskPoints>,
}

/// What one camera's gate runs with: checked values.
#[derive(Debug, Clone, PartialEq)]
pub struct CameraMotion {
    pub params: MotionParams,
    pub masks: Vec<Polygon>,
    /// The floor rate: at least one frame to the detector this often (seconds).
    pub detect_interval_s: f64,
}

/// A value of the section that does not fit: its key from the top and why.
type Misfit = (String, String);

impl MotionConfig {
    /// `camera`'s values: its own over the section's, checked.
    pub fn for_camera(&self, camera: &str) -> Result<CameraMotion, Misfit> {
        let own = self.camera.get(camera).cloned().unwrap_or_default();
        let key = |name: &str| match self.camera.get(camera).is_some_and(|_| own_sets(&own, name)) {
            true => format!("motion.camera.{camera}.{name}"),
            false => format!("motion.{name}"),
        };
        let threshold = own.threshold.unwrap_or(self.threshold);
        if threshold == 0 {
            return Err((key("threshold"), "must be 1..=255 levels".into()));
        }
        let share = |name: &str, value: f32| {
            Fraction::new(value)
                .filter(|share| share.get() > 0.0)
                .ok_or_else(|| (key(name), format!("{value} is outside 0 < share <= 1")))
        };
        let min_area = share("min_area", own.min_area.unwrap_or(self.min_area))?;
        let light_change = share("light_change", own.light_change.unwrap_or(self.light_change))?;
        let seconds = |name: &str, value: f64| match (MIN_SECONDS..=MAX_SECONDS).contains(&value) {
            true => Ok(value),
            false => Err((key(name), format!("{value} is outside {MIN_SECONDS}..={MAX_SECONDS} s"))),
        };
        let background_s = seconds("background_s", own.background_s.unwrap_or(self.background_s) as f64)? as f32;
        let detect_interval_s = seconds("detect_interval_s", own.detect_interval_s.unwrap_or(self.detect_interval_s))?;
        let masks = parse_masks(camera, &own.masks).map_err(|e| {
            let under = e.key.strip_prefix("masks").unwrap_or_default();
            (format!("{}{under}", key("masks")), e.message)
        })?;
        Ok(CameraMotion {
            params: MotionParams { threshold, min_area, background_s, light_change },
            masks,
            detect_interval_s,
        })
    }
}

impl MotionConfig {
    /// The section as the cameras run with it: each camera's masks saved from the page (`saved`,
    /// the config's [`Config::masks_from_file`]) replace its `[motion.camera.<name>].masks`; a
    /// camera without saved masks keeps the config's. The one place the two meet.
    pub fn with_saved_masks(&self, saved: &SavedMasks) -> MotionConfig {
        let mut running = self.clone();
        for (camera, masks) in saved {
            running.camera.entry(camera.clone()).or_default().masks.clone_from(masks);
        }
        running
    }

    /// `camera`'s masks as it runs with them ([`MotionConfig::with_saved_masks`]'s rule).
    pub fn masks_of<'a>(&'a self, camera: &str, saved: &'a SavedMasks) -> &'a [MaskPoints] {
        match saved.get(camera) {
            Some(masks) => masks,
            None => self.camera.get(camera).map_or(&[], |own| own.masks.as_slice()),
        }
    }
}

/// Whether a camera's table sets `name` (so that an error names the key the user wrote).
fn own_sets(own: &CameraMotionConfig, name: &str) -> bool {
    match name {
        "threshold" => own.threshold.is_some(),
        "min_area" => own.min_area.is_some(),
        "background_s" => own.background_s.is_some(),
        "light_change" => own.light_change.is_some(),
        "detect_interval_s" => own.detect_interval_s.is_some(),
        _ => true,
    }
}

impl Section for MotionConfig {
    const KEY: &'static str = "motion";
    const DEFAULTS: &'static str = include_str!("motion.toml");

    /// Every camera's values (the section's own through a camera without a table), and each
    /// `[motion.camera.<name>]` names a camera of the config.
    fn validate(&self, config: &Config) -> Result<(), ConfigError> {
        if let Some(name) = self.camera.keys().find(|name| !config.cameras.iter().any(|c| &c.name == *name)) {
            return Err(config.invalid(&format!("motion.camera.{name}"), "names no [[camera]] of this config"));
        }
        // The zones file checked its own masks as it was read; these are the config's.
        for camera in config.cameras.iter().map(|c| c.name.as_str()).chain([""]) {
            if let Err((key, message)) = self.for_camera(camera) {
                return Err(config.invalid(&key, message));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::section::built_in;

    fn section() -> MotionConfig {
        built_in::<MotionConfig>().expect("the built-in [motion]")
    }

    #[test]
    fn the_built_in_section_is_off_with_the_motion_detectors_defaults() {
        let motion = section();
        assert!(!motion.enabled);
        let camera = motion.for_camera("any").expect("values");
        assert_eq!(camera.params, MotionParams::default());
        assert_eq!((camera.detect_interval_s, camera.masks.len()), (5.0, 0));
    }

    #[test]
    fn a_cameras_table_overrides_the_sections_values_and_adds_masks() {
        let mut motion = section();
        let porch = CameraMotionConfig {
            threshold: Some(35),
            detect_interval_s: Some(2.0),
            masks: vec![vec![[0.0, 0.0], [0.3, 0.0], [0.3, 0.5]]],
            ..CameraMotionConfig::default()
        };
        motion.camera.insert("porch".into(), porch);
        let camera = motion.for_camera("porch").expect("values");
        assert_eq!((camera.params.threshold, camera.detect_interval_s, camera.masks.len()), (35, 2.0, 1));
        assert_eq!(camera.params.background_s, 10.0);
        assert_eq!(motion.for_camera("garden").expect("values").params.threshold, 20);
    }

    #[test]
    fn values_out_of_range_name_the_key_that_set_them() {
        let mut motion = section();
        motion.min_area = 0.0;
        assert_eq!(motion.for_camera("a").map(drop).unwrap_err().0, "motion.min_area");
        let mut motion = section();
        motion.camera.insert("a".into(), CameraMotionConfig { background_s: Some(0.0), ..Default::default() });
        assert_eq!(motion.for_camera("a").map(drop).unwrap_err().0, "motion.camera.a.background_s");
        let mut motion = section();
        motion.camera.insert(
            "a".into(),
            CameraMotionConfig { masks: vec![vec![[0.0, 0.0], [2.0, 0.0], [0.0, 1.0]]], ..Default::default() },
        );
        let (key, message) = motion.for_camera("a").map(drop).unwrap_err();
        assert_eq!(key, "motion.camera.a.masks[0]");
        assert!(message.contains("outside"), "{message}");
        let mut motion = section();
        motion.threshold = 0;
        assert_eq!(motion.for_camera("a").map(drop).unwrap_err().0, "motion.threshold");
    }

    #[test]
    fn masks_saved_from_the_page_replace_a_cameras_configured_masks_and_no_other() {
        let configured = vec![[0.0, 0.0], [0.3, 0.0], [0.3, 0.5]];
        let drawn = vec![[0.5, 0.5], [1.0, 0.5], [1.0, 1.0], [0.5, 1.0]];
        let mut motion = section();
        for camera in ["porch", "garden"] {
            let own = CameraMotionConfig { threshold: Some(30), masks: vec![configured.clone()], ..Default::default() };
            motion.camera.insert(camera.into(), own);
        }
        let saved = SavedMasks::from([
            ("porch".to_string(), vec![drawn.clone(), drawn.clone()]),
            ("yard".to_string(), Vec::new()),
        ]);
        assert_eq!(motion.masks_of("porch", &saved), [drawn.clone(), drawn]);
        assert_eq!(motion.masks_of("garden", &saved), [configured]);
        assert!(motion.masks_of("yard", &saved).is_empty() && motion.masks_of("shed", &saved).is_empty());
        let running = motion.with_saved_masks(&saved);
        let porch = running.for_camera("porch").expect("values");
        assert_eq!((porch.masks.len(), porch.params.threshold), (2, 30), "the camera's other values stay");
        assert_eq!(running.for_camera("garden").expect("values").masks.len(), 1);
        assert!(running.for_camera("yard").expect("values").masks.is_empty(), "saved empty: no masks");
    }
}
