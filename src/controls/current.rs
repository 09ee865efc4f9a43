//! The controls' current values, which the pipeline reads without a lock (the camera's source
//! thread reads `detect` and its motion gate `gating` on every frame, the sink `snapshots`, the
//! recorder `record`), and the change signal that whoever applies or announces a change waits on
//! ([`Controls::changes`]).
//!
//! Owns: [`Controls`] and [`CameraControls`]: start values from the config, values restored from
//! the controls file, a set checked ([`super::values`]) before it changes anything. Must not:
//! apply a change or know MQTT or HTTP (see the folder's doc).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use super::values::{check_threshold, CameraValues, ControlError, ControlValues, Switch};
use crate::config::Config;

/// One camera's switches, read by its pipeline on every frame.
#[derive(Debug)]
pub struct CameraControls {
    name: String,
    detect: AtomicBool,
    snapshots: AtomicBool,
    record: AtomicBool,
    gating: AtomicBool,
}

impl CameraControls {
    fn flag(&self, switch: Switch) -> &AtomicBool {
        match switch {
            Switch::Detect => &self.detect,
            Switch::Snapshots => &self.snapshots,
            Switch::Record => &self.record,
            Switch::Gating => &self.gating,
        }
    }

    pub fn get(&self, switch: Switch) -> bool {
        self.flag(switch).load(Ordering::Relaxed)
    }

    pub fn values(&self) -> CameraValues {
        let mut values = CameraValues { detect: false, snapshots: false, record: false, gating: false };
        Switch::ALL.into_iter().for_each(|switch| *values.field(switch) = self.get(switch));
        values
    }
}

/// Every camera's switches and the score threshold; see the module doc.
#[derive(Debug)]
pub struct Controls {
    /// In config order.
    cameras: Vec<Arc<CameraControls>>,
    /// `f32` bits.
    score_threshold: AtomicU32,
    /// Counts the changes; its receivers wake on each.
    changed: watch::Sender<u64>,
}

impl Controls {
    /// The config's values: detection, recording and motion gating on, snapshots as
    /// `snapshot.enabled`, the threshold `model.score_threshold`.
    pub fn new(config: &Config) -> Controls {
        let names = config.cameras.iter().map(|camera| camera.name.clone());
        Controls::with_cameras(names, config.snapshot.enabled, config.model.score_threshold)
    }

    /// Cameras named `names`, detecting, recording and gating, with `snapshots` on or off.
    pub fn with_cameras(names: impl IntoIterator<Item = String>, snapshots: bool, score_threshold: f32) -> Controls {
        let cameras = names
            .into_iter()
            .map(|name| {
                Arc::new(CameraControls {
                    name,
                    detect: AtomicBool::new(true),
                    snapshots: AtomicBool::new(snapshots),
                    record: AtomicBool::new(true),
                    gating: AtomicBool::new(true),
                })
            })
            .collect();
        Controls { cameras, score_threshold: AtomicU32::new(score_threshold.to_bits()), changed: watch::Sender::new(0) }
    }

    /// Takes over what users set before (the controls file, which checked its threshold); cameras
    /// it names that the config lacks are ignored. Not a change: nobody is told.
    pub fn restore(&self, saved: &ControlValues) {
        if check_threshold(saved.score_threshold).is_ok() {
            self.score_threshold.store(saved.score_threshold.to_bits(), Ordering::Relaxed);
        }
        for camera in &self.cameras {
            if let Some(values) = saved.cameras.get(&camera.name) {
                for switch in Switch::ALL {
                    camera.flag(switch).store(values.get(switch), Ordering::Relaxed);
                }
            }
        }
    }

    pub fn camera(&self, name: &str) -> Option<&Arc<CameraControls>> {
        self.cameras.iter().find(|camera| camera.name == name)
    }

    /// Sets one camera's switch; whether it changed (then everyone waiting on
    /// [`Controls::changes`] is told).
    pub fn set(&self, camera: &str, switch: Switch, on: bool) -> Result<bool, ControlError> {
        let controls = self.camera(camera).ok_or_else(|| ControlError::UnknownCamera(camera.to_string()))?;
        let changed = controls.flag(switch).swap(on, Ordering::Relaxed) != on;
        if changed {
            self.changed.send_modify(|count| *count += 1);
        }
        Ok(changed)
    }

    pub fn score_threshold(&self) -> f32 {
        f32::from_bits(self.score_threshold.load(Ordering::Relaxed))
    }

    /// Sets the score threshold of every camera's detections; whether it changed.
    pub fn set_score_threshold(&self, value: f32) -> Result<bool, ControlError> {
        check_threshold(value)?;
        let changed = self.score_threshold.swap(value.to_bits(), Ordering::Relaxed) != value.to_bits();
        if changed {
            self.changed.send_modify(|count| *count += 1);
        }
        Ok(changed)
    }

    pub fn values(&self) -> ControlValues {
        ControlValues {
            score_threshold: self.score_threshold(),
            cameras: self.cameras.iter().map(|camera| (camera.name.clone(), camera.values())).collect(),
        }
    }

    /// Wakes on every change (a receiver made now has seen none).
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::ConfigOrigin;

    fn config() -> Config {
        let text = "[snapshot]\nenabled = true\n[[camera]]\nname = \"front\"\nsource = { kind = \"synthetic\" }\n\
                    [[camera]]\nname = \"back\"\nsource = { kind = \"synthetic\" }\n";
        Config::from_toml(text, ConfigOrigin::File("test.toml".into()), Path::new("/")).expect("config")
    }

    #[test]
    fn switches_start_from_the_config_change_once_and_tell_the_watchers() {
        let controls = Controls::new(&config());
        let front = controls.camera("front").expect("front").clone();
        assert_eq!(front.values(), CameraValues { detect: true, snapshots: true, record: true, gating: true });
        let mut changes = controls.changes();
        assert_eq!(controls.set("front", Switch::Detect, false), Ok(true));
        assert!(changes.has_changed().expect("sender alive"));
        changes.mark_unchanged();
        assert_eq!(controls.set("front", Switch::Detect, false), Ok(false), "already off");
        assert!(!changes.has_changed().expect("sender alive"), "no change, no wake-up");
        assert!(!front.get(Switch::Detect), "the pipeline's handle sees it");
        assert_eq!(controls.set("side", Switch::Detect, false), Err(ControlError::UnknownCamera("side".into())));
        assert_eq!(controls.set_score_threshold(1.5), Err(ControlError::Threshold(1.5)));
        assert_eq!(controls.set_score_threshold(0.6), Ok(true));
        assert_eq!(controls.score_threshold(), 0.6);
    }

    #[test]
    fn saved_values_are_restored_for_known_cameras_only() {
        let controls = Controls::new(&config());
        let saved = ControlValues {
            score_threshold: 0.7,
            cameras: [
                ("back".to_string(), CameraValues { detect: false, snapshots: false, record: true, gating: false }),
                ("gone".to_string(), CameraValues { detect: false, snapshots: false, record: false, gating: false }),
            ]
            .into(),
        };
        controls.restore(&saved);
        let values = controls.values();
        assert_eq!(values.score_threshold, 0.7);
        assert_eq!(
            values.cameras["back"],
            CameraValues { detect: false, snapshots: false, record: true, gating: false }
        );
        assert_eq!(values.cameras["front"], CameraValues { detect: true, snapshots: true, record: true, gating: true });
        assert!(!values.cameras.contains_key("gone"));
        assert_eq!(Switch::from_name("snapshots"), Some(Switch::Snapshots));
        assert_eq!(Switch::from_name("snapshot"), None);
        assert_eq!(Switch::from_name("gating"), Some(Switch::Gating));
    }
}
