//! Jetson board readings from sysfs: GPU load, devfreq clocks and governor, thermal zones and
//! INA3221 power rails.
//!
//! Owns: [`JetsonSysfs`] and where each value is found. Everything is optional: a file that is
//! missing or unreadable is skipped, as on any non-Jetson machine, never an error. Must not: write
//! to sysfs (the daemon never changes clocks; it warns when they are not pinned).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Integrated-GPU state from sysfs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuState {
    /// devfreq device name, e.g. `17000000.ga10b` (Orin, JetPack 5) or `17000000.gpu` (JetPack 6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devfreq: Option<String>,
    /// Busy percent (sysfs `load` is per mille).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_percent: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freq_hz: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_freq_hz: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_freq_hz: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub governor: Option<String>,
    /// The clock is held at its maximum (`jetson_clocks` raises `min_freq` to `max_freq`, or the
    /// governor is `performance`); `None` when the frequencies are unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_max_clock: Option<bool>,
}

/// One INA3221 channel.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PowerRail {
    pub mv: u64,
    pub ma: u64,
    pub mw: u64,
}

/// Jetson sysfs readings. Everything is optional: on a machine without these files the result is
/// empty, never an error.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JetsonSysfs {
    pub gpu: Option<GpuState>,
    /// Thermal zone `type` → degrees Celsius.
    pub thermal: BTreeMap<String, f64>,
    /// Rail label → reading.
    pub power: BTreeMap<String, PowerRail>,
}

/// Kernel names of Jetson GPU devfreq devices (Nano gm20b, TX2 gp10b, Xavier gv11b, Orin ga10b;
/// JetPack 6 names the Orin one `17000000.gpu`).
const GPU_DEVFREQ_MARKERS: [&str; 5] = ["gpu", "ga10b", "gv11b", "gp10b", "gm20b"];

/// Below this a thermal zone is reporting "no reading" (Orin's GPU zone reads −256 °C when idle).
const MIN_PLAUSIBLE_CELSIUS: f64 = -100.0;

impl JetsonSysfs {
    /// Reads everything present under `root` (`/` on a real system; tests pass a fake tree).
    pub fn read(root: &Path) -> JetsonSysfs {
        JetsonSysfs { gpu: read_gpu(root), thermal: read_thermal(root), power: read_power(root) }
    }

    /// A warning to log and publish when the GPU clock is not pinned at its maximum.
    pub fn clock_warning(&self) -> Option<String> {
        let gpu = self.gpu.as_ref()?;
        if gpu.at_max_clock != Some(false) {
            return None;
        }
        Some(format!(
            "GPU clock is not pinned at its maximum ({} of {} MHz, governor {}): latency will vary; run \
             `sudo jetson_clocks` (after choosing the power mode with `nvpmodel`) for steady inference times",
            gpu.freq_hz.map_or(0, |hz| hz / 1_000_000),
            gpu.max_freq_hz.map_or(0, |hz| hz / 1_000_000),
            gpu.governor.as_deref().unwrap_or("unknown"),
        ))
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

fn read_number<T: std::str::FromStr>(path: &Path) -> Option<T> {
    read_trimmed(path)?.parse().ok()
}

/// Entries of `dir` (sorted by name, so that output is stable), or none when it is unreadable.
fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|entry| Some(entry.ok()?.path())).collect();
    paths.sort();
    paths
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

fn read_gpu(root: &Path) -> Option<GpuState> {
    let devfreq_dir = sorted_entries(&root.join("sys/class/devfreq")).into_iter().find(|path| {
        let name = file_name(path);
        GPU_DEVFREQ_MARKERS.iter().any(|marker| name.contains(marker))
    });
    let load_files = [root.join("sys/devices/platform/gpu.0/load"), root.join("sys/devices/gpu.0/load")];
    let load_per_mille: Option<u32> = load_files
        .iter()
        .chain(devfreq_dir.as_ref().map(|dir| dir.join("device/load")).iter())
        .find_map(|path| read_number(path));
    let number = |file: &str| devfreq_dir.as_ref().and_then(|dir| read_number::<u64>(&dir.join(file)));
    let (freq_hz, min_freq_hz, max_freq_hz) = (number("cur_freq"), number("min_freq"), number("max_freq"));
    let governor = devfreq_dir.as_ref().and_then(|dir| read_trimmed(&dir.join("governor")));
    if devfreq_dir.is_none() && load_per_mille.is_none() {
        return None;
    }
    let at_max_clock = match (freq_hz, max_freq_hz) {
        (Some(cur), Some(max)) => {
            let held = governor.as_deref() == Some("performance") || min_freq_hz.is_some_and(|min| min >= max);
            Some(cur >= max && held)
        }
        _ => None,
    };
    Some(GpuState {
        devfreq: devfreq_dir.as_deref().map(file_name),
        load_percent: load_per_mille.map(|per_mille| per_mille as f32 / 10.0),
        freq_hz,
        min_freq_hz,
        max_freq_hz,
        governor,
        at_max_clock,
    })
}

fn read_thermal(root: &Path) -> BTreeMap<String, f64> {
    let mut zones = BTreeMap::new();
    for zone in sorted_entries(&root.join("sys/class/thermal")) {
        if !file_name(&zone).starts_with("thermal_zone") {
            continue;
        }
        let (Some(kind), Some(millidegrees)) =
            (read_trimmed(&zone.join("type")), read_number::<i64>(&zone.join("temp")))
        else {
            continue;
        };
        let celsius = millidegrees as f64 / 1000.0;
        if celsius < MIN_PLAUSIBLE_CELSIUS {
            continue;
        }
        let key = if zones.contains_key(&kind) { format!("{kind}.{}", file_name(&zone)) } else { kind };
        zones.insert(key, celsius);
    }
    zones
}

/// INA3221 channels through the mainline hwmon driver (JetPack 5+):
/// `/sys/bus/i2c/drivers/ina3221/<bus>-<addr>/hwmon/hwmon<N>/in<C>_label`, `in<C>_input` (mV),
/// `curr<C>_input` (mA). Channels labelled `NC` are not connected.
fn read_power(root: &Path) -> BTreeMap<String, PowerRail> {
    let mut rails = BTreeMap::new();
    for device in sorted_entries(&root.join("sys/bus/i2c/drivers/ina3221")) {
        for hwmon in sorted_entries(&device.join("hwmon")) {
            for channel in 1..=8 {
                let Some(label) = read_trimmed(&hwmon.join(format!("in{channel}_label"))) else {
                    continue;
                };
                let mv = read_number::<u64>(&hwmon.join(format!("in{channel}_input")));
                let ma = read_number::<u64>(&hwmon.join(format!("curr{channel}_input")));
                let (Some(mv), Some(ma)) = (mv, ma) else {
                    continue;
                };
                if label == "NC" {
                    continue;
                }
                let key = if rails.contains_key(&label) { format!("{label}.{}", file_name(&device)) } else { label };
                rails.insert(key, PowerRail { mv, ma, mw: mv * ma / 1000 });
            }
        }
    }
    rails
}
