//! Telemetry: per-camera frame statistics, process/system load, Jetson sysfs readings, and the
//! `<prefix>/telemetry` JSON message.
//!
//! Owns: [`CameraStats`] (lock-free counters plus bounded latency rings, fed by the pipeline),
//! [`CameraSnapshot`] (those numbers with the camera's source state), the `STATUS=` line,
//! [`SystemSampler`] (sysinfo, kept between samples for CPU deltas), [`JetsonSysfs`] (GPU load,
//! devfreq clocks and governor, thermal zones, INA3221 power rails — each optional: a file that is
//! missing or unreadable is skipped, as on any non-Jetson machine), and [`telemetry_message`], whose
//! field names are a stable, documented interface (the book: docs/src/reference/telemetry.md). Must not: publish
//! (the daemon hands the bytes to the MQTT publisher), or allocate per frame.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use super::run_id::Stamp;
use crate::frame::{CaptureMode, FrameTimings, Rfc3339Millis, Stage};
use crate::source::{SourceReport, SourceState};
use crate::sys::lock::lock;

/// Version of the telemetry message layout; bumped on any incompatible change.
pub const TELEMETRY_SCHEMA: u32 = 1;

/// Latency samples kept per stage and camera; percentiles cover the most recent ones.
pub const LATENCY_SAMPLES: usize = 512;

/// Fixed-size ring of the latest latencies of one stage, in milliseconds.
#[derive(Debug)]
struct LatencyRing {
    samples: Box<[f32; LATENCY_SAMPLES]>,
    len: usize,
    next: usize,
}

impl LatencyRing {
    fn new() -> Self {
        LatencyRing { samples: Box::new([0.0; LATENCY_SAMPLES]), len: 0, next: 0 }
    }

    fn push(&mut self, ms: f32) {
        self.samples[self.next] = ms;
        self.next = (self.next + 1) % LATENCY_SAMPLES;
        self.len = (self.len + 1).min(LATENCY_SAMPLES);
    }

    /// Nearest-rank p50 and p99, or `None` without samples.
    fn percentiles(&self) -> Option<Percentiles> {
        if self.len == 0 {
            return None;
        }
        let mut sorted = self.samples[..self.len].to_vec();
        sorted.sort_by(f32::total_cmp);
        let rank = |p: f64| {
            let index = (p * sorted.len() as f64).ceil() as usize;
            sorted[index.clamp(1, sorted.len()) - 1]
        };
        Some(Percentiles { p50: round3(rank(0.50)), p99: round3(rank(0.99)) })
    }
}

/// Latency percentiles of one stage, milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    pub p50: f32,
    pub p99: f32,
}

fn round3(value: f32) -> f32 {
    (value * 1000.0).round() / 1000.0
}

/// Upper bounds (seconds) of the latency histogram buckets, beyond which `+Inf` counts the rest.
pub const LATENCY_BUCKETS_S: [f64; 13] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// Every latency of one stage since start, bucketed (for Prometheus histograms).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatencyHistogram {
    /// Samples at or below each bound of [`LATENCY_BUCKETS_S`] (not cumulative).
    pub buckets: [u64; LATENCY_BUCKETS_S.len()],
    pub count: u64,
    pub sum_s: f64,
}

impl LatencyHistogram {
    fn record(&mut self, seconds: f64) {
        self.count += 1;
        self.sum_s += seconds;
        if let Some(bucket) = LATENCY_BUCKETS_S.iter().position(|bound| seconds <= *bound) {
            self.buckets[bucket] += 1;
        }
    }
}

/// The latency rings and histograms of every stage, under one lock.
#[derive(Debug)]
struct StageLatencies {
    rings: [LatencyRing; Stage::ALL.len()],
    histograms: [LatencyHistogram; Stage::ALL.len()],
}

#[derive(Debug)]
struct FpsWindow {
    since: Instant,
    frames_then: u64,
}

/// Statistics of one camera pipeline; shared between its pipeline thread and the telemetry task.
#[derive(Debug)]
pub struct CameraStats {
    name: String,
    frames: AtomicU64,
    dropped: AtomicU64,
    over_limit: AtomicU64,
    truncated: AtomicU64,
    latencies: Mutex<StageLatencies>,
    window: Mutex<FpsWindow>,
    capture: Mutex<CaptureWindow>,
}

/// The source's capture mode and its running counts of frames and full-frame copies: now, and as
/// of the previous snapshot.
#[derive(Debug, Default)]
struct CaptureWindow {
    mode: Option<CaptureMode>,
    /// (frames produced, copies made) as last set.
    now: (u64, u64),
    /// The same at the previous snapshot.
    then: (u64, u64),
}

/// What [`CameraStats::snapshot`] reports.
#[derive(Debug, Clone, PartialEq)]
pub struct CameraSnapshot {
    pub name: String,
    /// Frames per second since the previous snapshot.
    pub fps: f64,
    /// Frames processed since start.
    pub frames: u64,
    /// Frames dropped since start (the pipeline was behind, or the source lost them).
    pub dropped: u64,
    /// Frames skipped since start because they were larger than `[limits]` allows.
    pub over_limit: u64,
    /// Frames decoded from truncated data since start (processed, the missing part grey).
    pub truncated: u64,
    /// Stages with at least one sample, in [`Stage::ALL`] order.
    pub latency_ms: Vec<(Stage, Percentiles)>,
    /// The camera's source state and since when, when known (see [`CameraSnapshot::with_source`]).
    pub source: Option<SourceReport>,
    /// How the source gets frames into the slots; `None` before its first frame.
    pub capture_mode: Option<CaptureMode>,
    /// Full-frame copies the source made per frame since the previous snapshot; `None` when it
    /// produced no frame meanwhile.
    pub frame_copies: Option<f64>,
}

impl CameraSnapshot {
    /// The snapshot with the state of the camera's source, which the pipeline keeps.
    pub fn with_source(mut self, report: SourceReport) -> CameraSnapshot {
        self.source = Some(report);
        self
    }
}

impl CameraStats {
    pub fn new(name: impl Into<String>) -> Self {
        CameraStats {
            name: name.into(),
            frames: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            over_limit: AtomicU64::new(0),
            truncated: AtomicU64::new(0),
            latencies: Mutex::new(StageLatencies {
                rings: std::array::from_fn(|_| LatencyRing::new()),
                histograms: [LatencyHistogram::default(); Stage::ALL.len()],
            }),
            window: Mutex::new(FpsWindow { since: Instant::now(), frames_then: 0 }),
            capture: Mutex::new(CaptureWindow::default()),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// One processed frame and its stage timings.
    pub fn record_frame(&self, timings: &FrameTimings) {
        self.frames.fetch_add(1, Ordering::Relaxed);
        let mut latencies = lock(&self.latencies);
        for stage in Stage::ALL {
            if let Some(duration) = timings.get(stage) {
                latencies.rings[stage.index()].push(duration.as_secs_f32() * 1000.0);
                latencies.histograms[stage.index()].record(duration.as_secs_f64());
            }
        }
    }

    /// `count` frames that were dropped before processing.
    pub fn record_drop(&self, count: u64) {
        self.dropped.fetch_add(count, Ordering::Relaxed);
    }

    /// The source's running count of frames skipped for being over `[limits]`.
    pub fn set_over_limit(&self, total: u64) {
        self.over_limit.store(total, Ordering::Relaxed);
    }

    /// The source's capture mode and its running totals of frames produced and full-frame copies
    /// made (the camera's ring counts both).
    pub fn set_capture(&self, mode: Option<CaptureMode>, produced: u64, copies: u64) {
        let mut capture = lock(&self.capture);
        capture.mode = mode;
        capture.now = (produced, copies);
    }

    /// The source's running count of frames decoded from truncated data.
    pub fn set_truncated(&self, total: u64) {
        self.truncated.store(total, Ordering::Relaxed);
    }

    /// Counters, fps since the previous snapshot, and latency percentiles.
    pub fn snapshot(&self) -> CameraSnapshot {
        self.snapshot_at(Instant::now())
    }

    /// [`CameraStats::snapshot`] as seen at `now`; starts the next fps window at `now`.
    pub fn snapshot_at(&self, now: Instant) -> CameraSnapshot {
        let frames = self.frames.load(Ordering::Relaxed);
        let fps = {
            let mut window = lock(&self.window);
            let elapsed = now.saturating_duration_since(window.since).as_secs_f64();
            let fps = if elapsed > 0.0 { (frames - window.frames_then) as f64 / elapsed } else { 0.0 };
            *window = FpsWindow { since: now, frames_then: frames };
            (fps * 100.0).round() / 100.0
        };
        let snapshot = CameraSnapshot { fps, ..self.peek() };
        // The next frame_copies window starts here too.
        let mut capture = lock(&self.capture);
        capture.then = capture.now;
        snapshot
    }

    /// Counters, latency percentiles and copies per frame without touching the fps and copies
    /// windows (`fps` is 0): for readers other than the telemetry tick, which owns the windows.
    pub fn peek(&self) -> CameraSnapshot {
        let latency_ms = {
            let latencies = lock(&self.latencies);
            Stage::ALL
                .iter()
                .filter_map(|stage| Some((*stage, latencies.rings[stage.index()].percentiles()?)))
                .collect()
        };
        let (capture_mode, frame_copies) = {
            let capture = lock(&self.capture);
            let produced = capture.now.0.saturating_sub(capture.then.0);
            let copies = capture.now.1.saturating_sub(capture.then.1);
            let per_frame = (produced > 0).then(|| (copies as f64 / produced as f64 * 100.0).round() / 100.0);
            (capture.mode, per_frame)
        };
        CameraSnapshot {
            name: self.name.clone(),
            fps: 0.0,
            frames: self.frames.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            over_limit: self.over_limit.load(Ordering::Relaxed),
            truncated: self.truncated.load(Ordering::Relaxed),
            latency_ms,
            source: None,
            capture_mode,
            frame_copies,
        }
    }

    /// The latency histogram of every stage since start, in [`Stage::ALL`] order.
    pub fn histograms(&self) -> [(Stage, LatencyHistogram); Stage::ALL.len()] {
        let latencies = lock(&self.latencies);
        std::array::from_fn(|i| (Stage::ALL[i], latencies.histograms[i]))
    }
}

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

/// Everything one telemetry message carries. `mqtt` and `engine` are filled by their owners
/// (publisher statistics, backend/engine info) and embedded as they are.
#[derive(Debug, Clone)]
pub struct TelemetryReport<'a> {
    /// The daemon's run and this message's sequence number (`crate::service::run_id::Stamp`).
    pub stamp: Option<Stamp<'a>>,
    pub cameras: &'a [CameraSnapshot],
    pub load: Option<SystemSample>,
    pub jetson: &'a JetsonSysfs,
    pub mqtt: Option<serde_json::Value>,
    pub engine: Option<serde_json::Value>,
    pub ts: SystemTime,
}

#[derive(Serialize)]
struct CameraJson<'a> {
    /// `state` and, while reconnecting, `attempt` and `last_error`.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    source: Option<&'a SourceState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<String>,
    fps: f64,
    frames: u64,
    dropped: u64,
    over_limit: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    capture_mode: Option<CaptureMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    frame_copies: Option<f64>,
    truncated: u64,
    latency_ms: BTreeMap<&'static str, &'a Percentiles>,
}

#[derive(Serialize)]
struct TelemetryJson<'a> {
    schema: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    run: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seq: Option<u64>,
    ts: String,
    cameras: BTreeMap<&'a str, CameraJson<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    process: Option<&'a ProcessLoad>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<&'a SystemLoad>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu: Option<&'a GpuState>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    thermal: &'a BTreeMap<String, f64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    power: &'a BTreeMap<String, PowerRail>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mqtt: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    engine: Option<&'a serde_json::Value>,
    warnings: Vec<String>,
}

/// The `<prefix>/telemetry` payload (JSON; field reference in the book, docs/src/reference/telemetry.md).
pub fn telemetry_message(report: &TelemetryReport<'_>) -> Vec<u8> {
    let cameras = report
        .cameras
        .iter()
        .map(|camera| {
            let latency_ms = camera.latency_ms.iter().map(|(stage, p)| (stage.name(), p)).collect();
            let json = CameraJson {
                source: camera.source.as_ref().map(|report| &report.state),
                since: camera.source.as_ref().map(|report| Rfc3339Millis(report.since).to_string()),
                fps: camera.fps,
                frames: camera.frames,
                dropped: camera.dropped,
                over_limit: camera.over_limit,
                capture_mode: camera.capture_mode,
                frame_copies: camera.frame_copies,
                truncated: camera.truncated,
                latency_ms,
            };
            (camera.name.as_str(), json)
        })
        .collect();
    let message = TelemetryJson {
        schema: TELEMETRY_SCHEMA,
        run: report.stamp.map(|stamp| stamp.run),
        seq: report.stamp.map(|stamp| stamp.seq),
        ts: Rfc3339Millis(report.ts).to_string(),
        cameras,
        process: report.load.as_ref().map(|load| &load.process),
        system: report.load.as_ref().map(|load| &load.system),
        gpu: report.jetson.gpu.as_ref(),
        thermal: &report.jetson.thermal,
        power: &report.jetson.power,
        mqtt: report.mqtt.as_ref(),
        engine: report.engine.as_ref(),
        warnings: report.jetson.clock_warning().into_iter().collect(),
    };
    // Serialising plain structs, string-keyed maps and finite numbers cannot fail; an empty payload
    // would only ever show up as an obviously broken message, never as a crash.
    serde_json::to_vec(&message).unwrap_or_default()
}

/// Longest error text `STATUS=` shows of a reconnecting camera (telemetry has all of it).
const STATUS_ERROR_CHARS: usize = 80;

/// One-line summary for systemd's `STATUS=`: totals and broker state, then each camera's state:
/// `2 cameras, 14.8 fps, 3 dropped, broker connected; front: 14.8 fps; gate: reconnecting for 2 min
/// 5 s, attempt 5: Could not read from resource. (rtspsrc0: …)`.
pub fn status_line(cameras: &[CameraSnapshot], broker_connected: bool) -> String {
    status_line_at(cameras, broker_connected, SystemTime::now())
}

/// [`status_line`] as seen at `now` (for the "for …" of a camera's state).
pub fn status_line_at(cameras: &[CameraSnapshot], broker_connected: bool, now: SystemTime) -> String {
    let total_fps: f64 = cameras.iter().map(|c| c.fps).sum();
    let dropped: u64 = cameras.iter().map(|c| c.dropped).sum();
    let mut line = format!(
        "{} camera{}, {:.1} fps, {} dropped, broker {}",
        cameras.len(),
        if cameras.len() == 1 { "" } else { "s" },
        total_fps,
        dropped,
        if broker_connected { "connected" } else { "disconnected" },
    );
    for camera in cameras {
        line.push_str("; ");
        line.push_str(&camera.name);
        line.push_str(": ");
        let state = camera.source.as_ref().map(|report| (&report.state, report.since));
        match state {
            None | Some((SourceState::Streaming, _)) => line.push_str(&format!("{:.1} fps", camera.fps)),
            Some((SourceState::Reconnecting { attempt, last_error }, since)) => {
                let offline_for = now.duration_since(since).unwrap_or_default();
                line.push_str(&format!(
                    "reconnecting for {}, attempt {attempt}: {}",
                    human_duration(offline_for),
                    shortened(last_error, STATUS_ERROR_CHARS)
                ));
            }
            Some((SourceState::Ended, _)) => line.push_str("ended"),
            Some((SourceState::Stopped, _)) => line.push_str("stopped"),
        }
    }
    line
}

/// `42 s`, `2 min 5 s`, `3 h 12 min`.
fn human_duration(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min {} s", secs / 60, secs % 60),
        _ => format!("{} h {} min", secs / 3600, secs / 60 % 60),
    }
}

/// `text` cut to at most `max` characters, with `…` where it was cut.
fn shortened(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timings(total_ms: u64) -> FrameTimings {
        FrameTimings {
            infer: Some(Duration::from_millis(total_ms / 2)),
            total: Some(Duration::from_millis(total_ms)),
            ..FrameTimings::default()
        }
    }

    #[test]
    fn fps_counts_frames_over_the_window() {
        let stats = CameraStats::new("front");
        let start = Instant::now();
        stats.snapshot_at(start);
        for _ in 0..10 {
            stats.record_frame(&timings(10));
        }
        stats.record_drop(3);
        stats.set_over_limit(2);
        let snapshot = stats.snapshot_at(start + Duration::from_secs(2));
        assert_eq!(snapshot.fps, 5.0);
        assert_eq!((snapshot.frames, snapshot.dropped, snapshot.over_limit), (10, 3, 2));
        let next = stats.snapshot_at(start + Duration::from_secs(4));
        assert_eq!(next.fps, 0.0, "a new window starts at every snapshot");
    }

    #[test]
    fn frame_copies_are_per_frame_over_the_window_with_the_capture_mode() {
        let stats = CameraStats::new("front");
        assert_eq!((stats.snapshot().capture_mode, stats.snapshot().frame_copies), (None, None));
        stats.set_capture(Some(CaptureMode::Copy), 10, 10);
        let first = stats.snapshot();
        assert_eq!((first.capture_mode, first.frame_copies), (Some(CaptureMode::Copy), Some(1.0)));
        stats.set_capture(Some(CaptureMode::Decode), 14, 11);
        assert_eq!(stats.snapshot().frame_copies, Some(0.25), "1 copy in 4 frames since the last snapshot");
        let idle = stats.snapshot();
        assert_eq!((idle.capture_mode, idle.frame_copies), (Some(CaptureMode::Decode), None));
        let json: serde_json::Value = serde_json::from_slice(&telemetry_message(&TelemetryReport {
            cameras: &[first],
            load: None,
            jetson: &JetsonSysfs::default(),
            mqtt: None,
            engine: None,
            ts: SystemTime::UNIX_EPOCH,
            stamp: None,
        }))
        .expect("json");
        assert_eq!(json["cameras"]["front"]["capture_mode"], "copy");
        assert_eq!(json["cameras"]["front"]["frame_copies"], 1.0);
    }

    #[test]
    fn histograms_count_every_sample_since_start_in_its_bucket_and_peeking_keeps_the_windows() {
        let stats = CameraStats::new("front");
        let start = Instant::now();
        stats.snapshot_at(start);
        for ms in [1, 3, 3, 20_000] {
            stats.record_frame(&timings(ms));
        }
        let histograms = stats.histograms();
        let (stage, total) = histograms[Stage::Total.index()];
        assert_eq!(stage, Stage::Total);
        assert_eq!(total.count, 4);
        assert!((total.sum_s - 20.007).abs() < 1e-9, "{}", total.sum_s);
        // 1 ms is in the 1 ms bucket, 3 ms in the 5 ms one; 20 s is beyond the last bound (+Inf only).
        let bucket = |bound: f64| LATENCY_BUCKETS_S.iter().position(|b| *b == bound).unwrap();
        assert_eq!(total.buckets[bucket(0.001)], 1);
        assert_eq!(total.buckets[bucket(0.005)], 2);
        assert_eq!(total.buckets.iter().sum::<u64>(), 3);
        assert_eq!(histograms[Stage::Pre.index()].1.count, 0, "an untimed stage has no samples");
        stats.set_capture(None, 10, 5);
        assert_eq!(stats.peek().frames, 4);
        let snapshot = stats.snapshot_at(start + Duration::from_secs(2));
        assert_eq!(snapshot.fps, 2.0, "peek did not restart the fps window");
        assert_eq!(snapshot.frame_copies, Some(0.5), "peek did not restart the copies window");
    }

    #[test]
    fn percentiles_cover_only_recent_samples_of_timed_stages() {
        let stats = CameraStats::new("front");
        for _ in 0..LATENCY_SAMPLES {
            stats.record_frame(&timings(1000));
        }
        for ms in 1..=100 {
            stats.record_frame(&timings(ms));
        }
        let snapshot = stats.snapshot();
        let stages: Vec<Stage> = snapshot.latency_ms.iter().map(|(s, _)| *s).collect();
        assert_eq!(stages, [Stage::Infer, Stage::Total]);
        let total = snapshot.latency_ms[1].1;
        assert_eq!(total.p99, 1000.0, "412 of the last 512 samples are 1000 ms");

        let fresh = CameraStats::new("back");
        for ms in 1..=100 {
            fresh.record_frame(&timings(ms));
        }
        let total = fresh.snapshot().latency_ms[1].1;
        assert_eq!((total.p50, total.p99), (50.0, 99.0));
    }

    #[test]
    fn timestamps_are_rfc3339_utc_with_millis() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_341_600_123);
        assert_eq!(Rfc3339Millis(at).to_string(), "2026-11-22T10:00:00.123Z");
        assert_eq!(Rfc3339Millis(SystemTime::UNIX_EPOCH).to_string(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            Rfc3339Millis(SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400)).to_string(),
            "2000-02-29T00:00:00.000Z"
        );
    }

    fn camera(name: &str, fps: f64) -> CameraSnapshot {
        CameraSnapshot {
            name: name.into(),
            fps,
            frames: 0,
            dropped: 2,
            over_limit: 0,
            truncated: 0,
            latency_ms: Vec::new(),
            source: None,
            capture_mode: None,
            frame_copies: None,
        }
    }

    #[test]
    fn status_line_summarises_cameras_and_broker() {
        let line = status_line(&[camera("front", 15.0), camera("back", 14.5)], true);
        assert_eq!(line, "2 cameras, 29.5 fps, 4 dropped, broker connected; front: 15.0 fps; back: 14.5 fps");
    }

    #[test]
    fn status_line_names_an_offline_camera_with_its_state() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_341_600);
        let report = |state| SourceReport { state, since: now - Duration::from_secs(125) };
        let error_start = "Could not read from resource. (rtspsrc0: ";
        let long_error = format!("{error_start}{})", "x".repeat(200));
        let cameras = [
            camera("front", 14.8).with_source(report(SourceState::Streaming)),
            camera("gate", 0.0).with_source(report(SourceState::Reconnecting { attempt: 5, last_error: long_error })),
            camera("door", 0.0).with_source(report(SourceState::Ended)),
        ];
        let line = status_line_at(&cameras, false, now);
        let expected_error = format!("{error_start}{}…", "x".repeat(STATUS_ERROR_CHARS - error_start.len()));
        assert_eq!(
            line,
            format!(
                "3 cameras, 14.8 fps, 6 dropped, broker disconnected; front: 14.8 fps; \
                 gate: reconnecting for 2 min 5 s, attempt 5: {expected_error}; door: ended"
            )
        );
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(human_duration(Duration::from_secs(42)), "42 s");
        assert_eq!(human_duration(Duration::from_secs(125)), "2 min 5 s");
        assert_eq!(human_duration(Duration::from_secs(3 * 3600 + 12 * 60 + 9)), "3 h 12 min");
    }

    #[test]
    fn telemetry_shows_each_cameras_source_state() {
        let since = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_341_600_123);
        let offline = SourceState::Reconnecting { attempt: 3, last_error: "gone".into() };
        let cameras = [
            camera("gate", 0.0).with_source(SourceReport { state: offline, since }),
            camera("front", 5.0).with_source(SourceReport { state: SourceState::Streaming, since }),
            camera("other", 5.0),
        ];
        let jetson = JetsonSysfs::default();
        let report = TelemetryReport {
            stamp: Some(Stamp { run: "0123456789abcdef", seq: 3 }),
            cameras: &cameras,
            load: None,
            jetson: &jetson,
            mqtt: None,
            engine: None,
            ts: since,
        };
        let json: serde_json::Value = serde_json::from_slice(&telemetry_message(&report)).expect("JSON");
        let gate = &json["cameras"]["gate"];
        assert_eq!(
            (&gate["state"], &gate["since"], &gate["attempt"], &gate["last_error"]),
            (
                &serde_json::json!("reconnecting"),
                &serde_json::json!("2026-11-22T10:00:00.123Z"),
                &serde_json::json!(3),
                &serde_json::json!("gone")
            )
        );
        assert_eq!(json["cameras"]["front"]["state"], "streaming");
        assert!(json["cameras"]["front"].get("attempt").is_none());
        assert!(json["cameras"]["other"].get("state").is_none(), "no state when none is known");
        assert_eq!((&json["run"], &json["seq"]), (&serde_json::json!("0123456789abcdef"), &serde_json::json!(3)));
    }

    #[test]
    fn system_sampler_reports_memory() {
        let mut sampler = SystemSampler::new();
        let sample = sampler.sample();
        assert!(sample.system.mem_total_bytes > 0);
        assert!(sample.process.rss_bytes > 0);
    }
}

/// Property tests: any camera names, counters, latencies and sysfs readings give valid JSON that
/// reads back to the same value.
#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    /// Cases per run on the host; see `proptest_support`.
    const CASES: u32 = 256;

    fn camera() -> impl Strategy<Value = CameraSnapshot> {
        let latency = (prop::sample::select(Stage::ALL.to_vec()), 0.0f32..1e9, 0.0f32..1e9)
            .prop_map(|(stage, p50, p99)| (stage, Percentiles { p50, p99 }));
        let state = prop_oneof![
            Just(SourceState::Streaming),
            (any::<u32>(), any::<String>())
                .prop_map(|(attempt, last_error)| SourceState::Reconnecting { attempt, last_error }),
            Just(SourceState::Ended),
            Just(SourceState::Stopped),
        ];
        let source = prop::option::of((state, 0u64..1_000_000_000_000).prop_map(|(state, millis)| SourceReport {
            state,
            since: SystemTime::UNIX_EPOCH + Duration::from_millis(millis),
        }));
        let counters = (any::<u64>(), any::<u64>(), any::<u64>());
        (any::<String>(), 0.0f64..1e12, counters, prop::collection::vec(latency, 0..6), source).prop_map(
            |(name, fps, (frames, dropped, over_limit), latency_ms, source)| CameraSnapshot {
                name,
                fps,
                frames,
                dropped,
                over_limit,
                truncated: over_limit / 2,
                latency_ms,
                source,
                capture_mode: None,
                frame_copies: None,
            },
        )
    }

    fn jetson() -> impl Strategy<Value = JetsonSysfs> {
        let thermal = prop::collection::btree_map(any::<String>(), -100.0f64..1e6, 0..4);
        let rail = (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(mv, ma, mw)| PowerRail { mv, ma, mw });
        let power = prop::collection::btree_map(any::<String>(), rail, 0..3);
        let gpu = prop::option::of(
            (prop::option::of(any::<String>()), prop::option::of(0.0f32..100.0), prop::option::of(any::<u64>()))
                .prop_map(|(devfreq, load_percent, freq_hz)| GpuState {
                    devfreq,
                    load_percent,
                    freq_hz,
                    min_freq_hz: freq_hz,
                    max_freq_hz: freq_hz.map(|hz| hz.saturating_add(1)),
                    governor: Some("nvhost_podgov".into()),
                    at_max_clock: Some(false),
                }),
        );
        (gpu, thermal, power).prop_map(|(gpu, thermal, power)| JetsonSysfs { gpu, thermal, power })
    }

    proptest! {
        #![proptest_config(crate::proptest_support::config(CASES))]

        #[test]
        fn telemetry_messages_are_json_that_round_trips(
            cameras in prop::collection::vec(camera(), 0..4),
            jetson in jetson(),
            seconds in 0u64..1_000_000_000_000,
        ) {
            let report = TelemetryReport {
                stamp: None,
                cameras: &cameras,
                load: None,
                jetson: &jetson,
                mqtt: Some(serde_json::json!({"connected": true, "queued": 1})),
                engine: None,
                ts: SystemTime::UNIX_EPOCH + Duration::from_secs(seconds),
            };
            let bytes = telemetry_message(&report);
            let parsed: serde_json::Value = serde_json::from_slice(&bytes)
                .map_err(|e| TestCaseError::fail(format!("{e}: {}", String::from_utf8_lossy(&bytes))))?;
            let reparsed: serde_json::Value =
                serde_json::from_slice(&serde_json::to_vec(&parsed).expect("serialise")).expect("parse");
            prop_assert_eq!(&reparsed, &parsed);
            let names: BTreeMap<&str, ()> = cameras.iter().map(|c| (c.name.as_str(), ())).collect();
            prop_assert_eq!(parsed["cameras"].as_object().map(|o| o.len()), Some(names.len()));
        }
    }
}
