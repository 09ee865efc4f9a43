//! The clock state inference latency depends on: the GPU's devfreq governor and min/max/current
//! frequency (from [`JetsonSysfs`]) and the nvpmodel power mode.
//!
//! Owns: reading the power mode the way `nvpmodel -q` reports it, from the files nvpmodel itself
//! keeps (`/var/lib/nvpmodel/status`, `pmode:<id>`, and the mode names in `/etc/nvpmodel.conf`,
//! `< POWER_MODEL ID=<id> NAME=<name> >`), so no root and no subprocess is needed; and the verdict
//! on whether latency will jitter. Must not: change clocks or modes. Everything is optional: on a
//! machine without these files the report is empty, never an error.

use std::path::Path;

use serde::Serialize;

use crate::service::telemetry::JetsonSysfs;

/// Longest nvpmodel file read (real ones are a few KiB).
const MAX_NVPMODEL_FILE_BYTES: u64 = 256 << 10;

/// The power mode nvpmodel has set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PowerMode {
    pub id: u32,
    /// The mode's name from `/etc/nvpmodel.conf` (e.g. `MAXN`, `15W`), when listed there.
    pub name: Option<String>,
    /// True when no mode was ever selected and this is the config's boot default (`PM_CONFIG DEFAULT`).
    pub boot_default: bool,
}

/// What `selftest` reports about clocks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClockReport {
    pub governor: Option<String>,
    pub gpu_min_mhz: Option<u64>,
    pub gpu_max_mhz: Option<u64>,
    pub gpu_current_mhz: Option<u64>,
    /// The GPU runs at its maximum clock and is held there (governor `performance` or min = max).
    pub gpu_at_max_clock: Option<bool>,
    pub power_mode: Option<PowerMode>,
    /// A sentence when latency will jitter because the clock is not pinned.
    pub warning: Option<String>,
}

impl ClockReport {
    /// Reads everything under `root` (`/` on a real system; tests pass a fake tree).
    pub fn read(root: &Path) -> ClockReport {
        let sysfs = JetsonSysfs::read(root);
        let gpu = sysfs.gpu.as_ref();
        let mhz = |hz: Option<u64>| hz.map(|hz| hz / 1_000_000);
        ClockReport {
            governor: gpu.and_then(|g| g.governor.clone()),
            gpu_min_mhz: mhz(gpu.and_then(|g| g.min_freq_hz)),
            gpu_max_mhz: mhz(gpu.and_then(|g| g.max_freq_hz)),
            gpu_current_mhz: mhz(gpu.and_then(|g| g.freq_hz)),
            gpu_at_max_clock: gpu.and_then(|g| g.at_max_clock),
            power_mode: read_power_mode(root),
            warning: sysfs.clock_warning(),
        }
    }

    /// Nothing to report: not a Jetson (or not one whose files are readable).
    pub fn is_empty(&self) -> bool {
        self.governor.is_none() && self.gpu_current_mhz.is_none() && self.power_mode.is_none()
    }

    /// One line: `governor nvhost_podgov, GPU 306/1300 MHz (min 306), power mode 15W (id 0)`.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(governor) = &self.governor {
            parts.push(format!("governor {governor}"));
        }
        if let (Some(current), Some(max)) = (self.gpu_current_mhz, self.gpu_max_mhz) {
            let min = self.gpu_min_mhz.map_or(String::new(), |min| format!(" (min {min})"));
            parts.push(format!("GPU {current}/{max} MHz{min}"));
        }
        if let Some(mode) = &self.power_mode {
            let name = mode.name.as_deref().unwrap_or("unnamed");
            let default = if mode.boot_default { ", boot default" } else { "" };
            parts.push(format!("power mode {name} (id {}{default})", mode.id));
        }
        parts.join(", ")
    }
}

fn read_bounded(path: &Path) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    file.take(MAX_NVPMODEL_FILE_BYTES).read_to_string(&mut text).ok()?;
    Some(text)
}

/// The active power mode: `pmode:<id>` in `var/lib/nvpmodel/status`, named by
/// `etc/nvpmodel.conf`; without a status file (no mode ever selected) the config's boot default.
pub fn read_power_mode(root: &Path) -> Option<PowerMode> {
    let conf = read_bounded(&root.join("etc/nvpmodel.conf"));
    let selected = read_bounded(&root.join("var/lib/nvpmodel/status")).and_then(|status| {
        let id = status.split_whitespace().find_map(|word| word.strip_prefix("pmode:"))?;
        id.parse::<u32>().ok()
    });
    let (id, boot_default) = match selected {
        Some(id) => (id, false),
        None => (conf.as_deref().and_then(boot_default_mode)?, true),
    };
    let name = conf.as_deref().and_then(|conf| mode_name(conf, id));
    Some(PowerMode { id, name, boot_default })
}

/// The `key=value` pairs of a `< TAG key=value ... >` header line, if the line is one for `tag`.
fn header_fields<'a>(line: &'a str, tag: &str) -> Option<impl Iterator<Item = (&'a str, &'a str)>> {
    let inner = line.trim().strip_prefix('<')?.strip_suffix('>')?;
    let mut words = inner.split_whitespace();
    (words.next()? == tag).then(|| words.filter_map(|word| word.split_once('=')))
}

fn mode_name(conf: &str, id: u32) -> Option<String> {
    conf.lines().filter_map(|line| header_fields(line, "POWER_MODEL")).find_map(|fields| {
        let (mut found_id, mut name) = (None, None);
        for (key, value) in fields {
            match key {
                "ID" => found_id = value.parse::<u32>().ok(),
                "NAME" => name = Some(value.to_owned()),
                _ => {}
            }
        }
        (found_id == Some(id)).then_some(name).flatten()
    })
}

fn boot_default_mode(conf: &str) -> Option<u32> {
    conf.lines()
        .filter_map(|line| header_fields(line, "PM_CONFIG"))
        .find_map(|mut fields| fields.find(|(key, _)| *key == "DEFAULT").and_then(|(_, value)| value.parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORIN_NANO_CONF: &str = "\
# nvpmodel configuration (excerpt)
< PARAM TYPE=FILE NAME=CPU_ONLINE >
CORE_0 /sys/devices/system/cpu/cpu0/online

< POWER_MODEL ID=0 NAME=15W >
CPU_ONLINE CORE_0 1
< POWER_MODEL ID=1 NAME=25W >
CPU_ONLINE CORE_0 1
< POWER_MODEL ID=2 NAME=MAXN_SUPER >
CPU_ONLINE CORE_0 1
< POWER_MODEL ID=3 NAME=7W >
CPU_ONLINE CORE_0 1

< PM_CONFIG DEFAULT=0 >
";

    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn the_selected_mode_is_named_from_the_conf() {
        let root = tempfile::tempdir().expect("tempdir");
        write(root.path(), "etc/nvpmodel.conf", ORIN_NANO_CONF);
        write(root.path(), "var/lib/nvpmodel/status", "pmode:0002 fmode:quiet\n");
        let mode = read_power_mode(root.path()).expect("mode");
        assert_eq!(mode, PowerMode { id: 2, name: Some("MAXN_SUPER".into()), boot_default: false });
    }

    #[test]
    fn without_a_status_file_the_boot_default_applies() {
        let root = tempfile::tempdir().expect("tempdir");
        write(root.path(), "etc/nvpmodel.conf", ORIN_NANO_CONF);
        let mode = read_power_mode(root.path()).expect("mode");
        assert_eq!(mode, PowerMode { id: 0, name: Some("15W".into()), boot_default: true });
    }

    #[test]
    fn an_unknown_id_keeps_its_number() {
        let root = tempfile::tempdir().expect("tempdir");
        write(root.path(), "var/lib/nvpmodel/status", "pmode:0009\n");
        assert_eq!(read_power_mode(root.path()), Some(PowerMode { id: 9, name: None, boot_default: false }));
    }

    #[test]
    fn a_pc_has_no_clock_report() {
        let root = tempfile::tempdir().expect("tempdir");
        let report = ClockReport::read(root.path());
        assert!(report.is_empty());
        assert_eq!(report.summary(), "");
        assert_eq!(report.warning, None);
    }

    #[test]
    fn a_jetson_with_its_gpu_clock_left_to_the_governor_is_reported() {
        let root = tempfile::tempdir().expect("tempdir");
        let gpu = "sys/class/devfreq/17000000.gpu";
        write(root.path(), &format!("{gpu}/governor"), "nvhost_podgov\n");
        write(root.path(), &format!("{gpu}/cur_freq"), "306000000\n");
        write(root.path(), &format!("{gpu}/min_freq"), "306000000\n");
        write(root.path(), &format!("{gpu}/max_freq"), "1020000000\n");
        write(root.path(), "etc/nvpmodel.conf", ORIN_NANO_CONF);
        write(root.path(), "var/lib/nvpmodel/status", "pmode:0000\n");
        let report = ClockReport::read(root.path());
        assert_eq!(report.gpu_at_max_clock, Some(false));
        assert_eq!(report.summary(), "governor nvhost_podgov, GPU 306/1020 MHz (min 306), power mode 15W (id 0)");
        assert!(report.warning.as_deref().is_some_and(|w| w.contains("jetson_clocks")), "{report:?}");
    }
}
