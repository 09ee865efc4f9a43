//! Telemetry: what the operator sees of the running daemon's work — per-camera statistics,
//! process and system load, Jetson board readings, the `<prefix>/telemetry` message and the
//! `STATUS=` line.
//!
//! One job per file: [`camera_stats`] (counters and latencies the pipeline feeds), [`system`]
//! (CPU and memory), [`jetson`] (sysfs: GPU, clocks, thermal zones, power rails), [`message`] (the
//! JSON, a documented interface) and [`status_line`](mod@status_line) (systemd's `STATUS=`). Must not: publish (the
//! outlets do, with the report `crate::publish::reporting` gathers), or allocate per frame.

pub mod camera_stats;
pub mod jetson;
pub mod message;
pub mod status_line;
pub mod system;

pub use camera_stats::{
    CameraSnapshot, CameraStats, LatencyHistogram, Percentiles, LATENCY_BUCKETS_S, LATENCY_SAMPLES,
};
pub use jetson::{GpuState, JetsonSysfs, PowerRail};
pub use message::{telemetry_message, TelemetryReport, TELEMETRY_SCHEMA};
pub use status_line::{status_line, status_line_at};
pub use system::{ProcessLoad, SystemLoad, SystemSample, SystemSampler};
