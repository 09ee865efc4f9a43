//! `[telemetry]`: how often the daemon reports on itself, and where it reads the board's sensors.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Seconds between telemetry messages; 0 disables them.
    pub interval_s: u32,
    /// Root under which Jetson sysfs files are looked up (tests point it at a fake tree).
    pub sysfs_root: PathBuf,
}
