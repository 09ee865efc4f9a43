//! The MQTT outlet as it registers itself ([`OUTLET`]): its sections (`[mqtt]`,
//! `[homeassistant]`), its checks before the start (the password and TLS files, Home Assistant's
//! labels against the label file) and its start (connecting in the background, `building` until
//! the engine is ready).
//!
//! Owns: [`OUTLET`] and [`MqttOutletError`]. Must not: do what the outlet or the publisher do.

use std::sync::Arc;

use super::config::{HomeAssistantConfig, MqttConfig};
use super::homeassistant::BoardSensors;
use super::outlet::MqttOutlet;
use super::settings::{MqttError, MqttSettings};
use crate::config::section::SectionKind;
use crate::config::{Config, ConfigError};
use crate::detection::Labels;
use crate::publish::kind::{OutletError, OutletKind, OutletStart, Started};
use crate::service::telemetry::JetsonSysfs;
use crate::sys::exit::{Classified, ExitClass};

/// The MQTT outlet's registration.
pub const OUTLET: OutletKind = OutletKind {
    name: "mqtt",
    sections: &[SectionKind::of::<MqttConfig>(), SectionKind::of::<HomeAssistantConfig>()],
    check,
    start,
};

/// Why the MQTT outlet cannot start.
#[derive(Debug, thiserror::Error)]
pub enum MqttOutletError {
    #[error("MQTT: {0}")]
    Settings(#[from] MqttError),
    /// `homeassistant.labels` names a label the label file lacks.
    #[error(transparent)]
    Labels(#[from] ConfigError),
}

impl Classified for MqttOutletError {
    fn exit_class(&self) -> ExitClass {
        match self {
            MqttOutletError::Settings(error) => error.exit_class(),
            MqttOutletError::Labels(_) => ExitClass::Configuration,
        }
    }
}

/// The password and TLS files read and checked, and Home Assistant's labels in the label file.
fn check(config: &Config, labels: &Labels) -> Result<(), OutletError> {
    let checked = MqttSettings::from_config(config)
        .map_err(MqttOutletError::from)
        .and_then(|_| Ok(super::homeassistant::check_labels(config, labels)?));
    checked.map_err(OutletError::new)
}

/// The outlet, connecting in the background with `start.status` on its status topic; Home
/// Assistant gets the board sensors the board has (`telemetry.sysfs_root`).
fn start(start: &OutletStart<'_>) -> Result<Started, OutletError> {
    let config = start.config;
    let outlet = MqttSettings::from_config(config).and_then(|settings| {
        let board = JetsonSysfs::read(&config.telemetry.sysfs_root);
        let board = BoardSensors {
            temperature: !board.thermal.is_empty(),
            gpu_load: board.gpu.as_ref().is_some_and(|gpu| gpu.load_percent.is_some()),
        };
        let (run, labels, controls) = (start.run.clone(), start.labels.clone(), start.controls.clone());
        MqttOutlet::start(settings, start.status, config, run, labels, controls, board)
    });
    match outlet {
        Ok(outlet) => Ok(vec![Arc::new(outlet)]),
        Err(error) => Err(OutletError::new(MqttOutletError::from(error))),
    }
}

/// The core and this outlet's sections, for the tests of the outlet's parts.
#[cfg(test)]
pub fn schema() -> crate::config::section::Schema {
    crate::config::section::Schema::new(OUTLET.sections.iter().copied())
}
