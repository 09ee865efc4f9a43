//! `[controls]`: where the run-time switches are kept. Must not: read or write that file
//! (`crate::controls` does).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::service_dirs::ServiceDir;

/// `[controls]`: where the switches set at run time (MQTT command topics, the HTTP API) are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlsConfig {
    /// The file that keeps them across restarts. The default depends on the environment (systemd's
    /// `StateDirectory=`), so it is computed here.
    #[serde(default = "default_controls_file")]
    pub file: PathBuf,
}

fn default_controls_file() -> PathBuf {
    ServiceDir::State.default_dir().join("controls.toml")
}
