//! Process and whole-system load: CPU and memory from sysinfo.
//!
//! Owns: [`SystemSampler`] (kept between samples, because CPU figures are deltas) and its
//! [`SystemSample`]. Must not: read Jetson-specific files (`super::jetson` does).

use serde::Serialize;

/// Process and whole-system load.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SystemSample {
    pub process: ProcessLoad,
    pub system: SystemLoad,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ProcessLoad {
    /// Percent of one core since the previous sample (can exceed 100 on several cores).
    pub cpu_percent: f32,
    pub rss_bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SystemLoad {
    /// Percent of all cores since the previous sample (0..=100).
    pub cpu_percent: f32,
    pub mem_used_bytes: u64,
    pub mem_total_bytes: u64,
}

/// Samples CPU and memory. CPU percentages are deltas between two samples, so the sampler lives
/// as long as the telemetry task and the first sample's CPU figures are 0.
pub struct SystemSampler {
    system: sysinfo::System,
    pid: Option<sysinfo::Pid>,
}

impl Default for SystemSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl SystemSampler {
    pub fn new() -> Self {
        SystemSampler { system: sysinfo::System::new(), pid: sysinfo::get_current_pid().ok() }
    }

    pub fn sample(&mut self) -> SystemSample {
        self.system.refresh_cpu_usage();
        self.system.refresh_memory();
        let process = self.pid.and_then(|pid| {
            self.system.refresh_processes_specifics(
                sysinfo::ProcessesToUpdate::Some(&[pid]),
                true,
                sysinfo::ProcessRefreshKind::nothing().with_cpu().with_memory(),
            );
            self.system.process(pid)
        });
        SystemSample {
            process: ProcessLoad {
                cpu_percent: round1(process.map_or(0.0, sysinfo::Process::cpu_usage)),
                rss_bytes: process.map_or(0, sysinfo::Process::memory),
            },
            system: SystemLoad {
                cpu_percent: round1(self.system.global_cpu_usage()),
                mem_used_bytes: self.system.used_memory(),
                mem_total_bytes: self.system.total_memory(),
            },
        }
    }
}

fn round1(value: f32) -> f32 {
    (value * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_sampler_reports_memory() {
        let mut sampler = SystemSampler::new();
        let sample = sampler.sample();
        assert!(sample.system.mem_total_bytes > 0);
        assert!(sample.process.rss_bytes > 0);
    }
}
