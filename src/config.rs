//! Typed daemon configuration: parsing, defaults and validation.
//!
//! Owns: the TOML schema (`config/jetson-detectd.toml` documents every key and is also the embedded
//! default), resolution of relative paths, and [`ConfigError`], which always names the file, the
//! key and what is allowed. Must not: open models, cameras or sockets — `check-config` relies on
//! validation having no side effects beyond reading the config (and the password file it names).

use std::collections::BTreeSet;
use std::fmt;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The documented example, also used when no `--config` is given.
pub const EMBEDDED_DEFAULT: &str = include_str!("../config/jetson-detectd.toml");

/// Where a config came from, for error messages and relative paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigOrigin {
    File(PathBuf),
    Embedded,
}

impl fmt::Display for ConfigOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigOrigin::File(path) => write!(f, "{}", path.display()),
            ConfigOrigin::Embedded => f.write_str("<embedded default config>"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{origin}: cannot read config: {source}")]
    Read { origin: ConfigOrigin, source: std::io::Error },
    #[error("{origin}: {message}")]
    Parse { origin: ConfigOrigin, message: String },
    #[error("{origin}: `{key}`: {message}")]
    Invalid { origin: ConfigOrigin, key: String, message: String },
}

/// The whole configuration, validated.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub device: DeviceConfig,
    pub model: ModelConfig,
    #[serde(default)]
    pub engine: EngineConfig,
    #[serde(rename = "camera")]
    pub cameras: Vec<CameraConfig>,
    #[serde(default)]
    pub mqtt: MqttConfig,
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    #[serde(default)]
    pub snapshot: SnapshotConfig,
    #[serde(default)]
    pub homeassistant: HomeAssistantConfig,
    #[serde(default)]
    pub tracking: TrackingConfig,
    /// Where the config came from (not a TOML key).
    #[serde(skip, default = "embedded_origin")]
    pub origin: ConfigOrigin,
}

fn embedded_origin() -> ConfigOrigin {
    ConfigOrigin::Embedded
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    /// TensorRT when the binary has it and libnvinfer loads, else CPU.
    #[default]
    Auto,
    Cpu,
    Tensorrt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Fallback {
    /// A GPU/TensorRT failure at start is fatal.
    #[default]
    None,
    /// Fall back to the CPU backend (logged as a warning).
    Cpu,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Error,
    Warn,
    #[default]
    Info,
    Debug,
    Trace,
}

impl LogLevel {
    pub fn filter(self) -> log::LevelFilter {
        match self {
            LogLevel::Error => log::LevelFilter::Error,
            LogLevel::Warn => log::LevelFilter::Warn,
            LogLevel::Info => log::LevelFilter::Info,
            LogLevel::Debug => log::LevelFilter::Debug,
            LogLevel::Trace => log::LevelFilter::Trace,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct DeviceConfig {
    /// Identifies this daemon in MQTT topics; default: the host name.
    pub id: Option<String>,
    #[serde(default)]
    pub backend: BackendChoice,
    #[serde(default)]
    pub fallback: Fallback,
    /// CUDA device ordinal.
    #[serde(default)]
    pub gpu: u32,
    #[serde(default)]
    pub log_level: LogLevel,
    /// Threads one CPU-backend inference (and its preprocessing) runs on; default: the cores this
    /// process may use. See [`DeviceConfig::cpu_threads`].
    #[serde(default)]
    pub cpu_threads: Option<NonZeroUsize>,
}

/// Largest `device.cpu_threads` accepted: more threads than any Jetson or home server has cores.
pub const MAX_CPU_THREADS: usize = 256;

impl DeviceConfig {
    /// Threads per CPU inference: `cpu_threads`, else the cores available to this process
    /// (`sched_getaffinity`, cgroup quota), else 1.
    pub fn cpu_threads(&self) -> usize {
        self.cpu_threads
            .or_else(|| std::thread::available_parallelism().ok())
            .map_or(1, NonZeroUsize::get)
            .min(MAX_CPU_THREADS)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecoderKind {
    /// Decoded boxes `[1,N,4]` (ymin,xmin,ymax,xmax in 0..1) + scores `[1,N,C]` with a background column.
    Ssd,
    /// `[1,N,5+C]`: cx,cy,w,h in input pixels, objectness, class scores.
    Yolov5,
    /// `[1,4+C,N]`: cx,cy,w,h in input pixels, class scores (YOLOv8 / YOLO11).
    Yolov8,
    /// NMS inside the model: num_dets, boxes (x1,y1,x2,y2 input pixels), scores, classes.
    End2end,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TensorLayout {
    Nchw,
    Nhwc,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TensorDtype {
    U8,
    F16,
    F32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColorOrder {
    Rgb,
    Bgr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResizeKind {
    /// Scale each axis independently to the input size.
    Stretch,
    /// Keep aspect ratio, centre, pad with `pad`.
    Letterbox,
}

/// How source pixels are weighted when the frame is scaled to the content size (step 2 of the
/// definition in `preprocess.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResizeFilter {
    /// Two taps per axis around the half-pixel-centred sample point (OpenCV's `INTER_LINEAR`).
    /// Shrinking by more than 2× skips source pixels and aliases.
    Bilinear,
    /// Triangle filter whose support widens with the downscale factor, so every source pixel
    /// contributes (Pillow's `Image.resize(..., BILINEAR)`); equal to bilinear when enlarging.
    Antialias,
}

/// How input tensors are produced from frames. Output value = (pixel − mean[c]) / std[c], with
/// pixels in 0..255; u8 tensors take the pixel as is.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputConfig {
    /// Tensor name; default: the model's first input.
    pub name: Option<String>,
    pub width: u32,
    pub height: u32,
    pub layout: TensorLayout,
    pub dtype: TensorDtype,
    #[serde(default = "default_color")]
    pub color: ColorOrder,
    #[serde(default = "default_resize")]
    pub resize: ResizeKind,
    /// Resampling filter; default `antialias`, which is how the bundled SSD model's reference
    /// inputs were made and does not alias when shrinking camera frames.
    #[serde(default = "default_filter")]
    pub filter: ResizeFilter,
    /// Letterbox padding value (0..255 pixel units).
    #[serde(default = "default_pad")]
    pub pad: u8,
    #[serde(default = "default_mean")]
    pub mean: [f32; 3],
    #[serde(default = "default_std")]
    pub std: [f32; 3],
}

fn default_color() -> ColorOrder {
    ColorOrder::Rgb
}
fn default_resize() -> ResizeKind {
    ResizeKind::Stretch
}
fn default_filter() -> ResizeFilter {
    ResizeFilter::Antialias
}
fn default_pad() -> u8 {
    114
}
fn default_mean() -> [f32; 3] {
    [0.0; 3]
}
fn default_std() -> [f32; 3] {
    [1.0; 3]
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// ONNX model (built into a TensorRT engine, or run by the CPU backend).
    pub onnx: Option<PathBuf>,
    /// Prebuilt TensorRT engine, used as is (TensorRT backend only).
    pub engine: Option<PathBuf>,
    /// Label file: one `id name` or `name` per line.
    pub labels: PathBuf,
    pub decoder: DecoderKind,
    pub input: InputConfig,
    #[serde(default = "default_score_threshold")]
    pub score_threshold: f32,
    #[serde(default = "default_nms_iou")]
    pub nms_iou: f32,
    #[serde(default = "default_max_detections")]
    pub max_detections: usize,
    /// Allow-list of label names; empty = every class.
    #[serde(default)]
    pub classes: Vec<String>,
}

fn default_score_threshold() -> f32 {
    0.4
}
fn default_nms_iou() -> f32 {
    0.5
}
fn default_max_detections() -> usize {
    100
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    #[default]
    Fp32,
    Fp16,
    Int8,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    #[serde(default = "default_cache_dir")]
    pub cache_dir: PathBuf,
    #[serde(default)]
    pub precision: Precision,
    /// Builder workspace limit in MiB.
    #[serde(default = "default_workspace_mib")]
    pub workspace_mib: u32,
    /// DLA core (Orin: 0 or 1) with GPU fallback; absent = GPU only.
    pub dla_core: Option<u32>,
    /// TensorRT builder optimisation level 0..=5.
    #[serde(default = "default_opt_level")]
    pub optimization_level: u8,
    /// Ring slots per camera (≥ 2).
    #[serde(default = "default_frame_slots")]
    pub frame_slots: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            cache_dir: default_cache_dir(),
            precision: Precision::default(),
            workspace_mib: default_workspace_mib(),
            dla_core: None,
            optimization_level: default_opt_level(),
            frame_slots: default_frame_slots(),
        }
    }
}

fn default_cache_dir() -> PathBuf {
    // systemd's CacheDirectory= sets CACHE_DIRECTORY; outside systemd use the per-user cache.
    if let Some(dir) = std::env::var_os("CACHE_DIRECTORY") {
        PathBuf::from(dir)
    } else if let Some(xdg) = std::env::var_os("XDG_CACHE_HOME") {
        PathBuf::from(xdg).join("jetson-detectd")
    } else if let Some(home) = std::env::var_os("HOME") {
        PathBuf::from(home).join(".cache/jetson-detectd")
    } else {
        PathBuf::from("/var/cache/jetson-detectd")
    }
}
fn default_workspace_mib() -> u32 {
    1024
}
fn default_opt_level() -> u8 {
    3
}
fn default_frame_slots() -> usize {
    3
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ImageMode {
    /// Go through the files once, then the camera ends.
    Once,
    /// Start again after the last file.
    #[default]
    Loop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum V4l2Format {
    Mjpeg,
    Yuyv,
}

/// Where a camera's frames come from.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SourceConfig {
    /// An image file or a directory of images (sorted by name).
    Images {
        path: PathBuf,
        #[serde(default)]
        mode: ImageMode,
        /// Play the files as a recording made at this many frames per second: file n is stamped
        /// `start + n / replay_fps`, and no file is dropped when inference is behind (the source
        /// waits for a free slot). Absent: stamped when read, dropped like a live camera's frames.
        #[serde(default)]
        replay_fps: Option<f32>,
    },
    /// A moving test pattern.
    Synthetic {
        #[serde(default = "default_synthetic_width")]
        width: u32,
        #[serde(default = "default_synthetic_height")]
        height: u32,
    },
    /// A V4L2 capture device (USB UVC cameras).
    V4l2 {
        device: PathBuf,
        width: u32,
        height: u32,
        #[serde(default = "default_v4l2_fps")]
        fps: u32,
        format: V4l2Format,
    },
    /// A GStreamer pipeline ending in `appsink` (CSI via nvarguscamerasrc, RTSP).
    Gstreamer { pipeline: String },
}

fn default_synthetic_width() -> u32 {
    640
}
fn default_synthetic_height() -> u32 {
    480
}
fn default_v4l2_fps() -> u32 {
    30
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CameraConfig {
    /// Topic segment: letters, digits, `_` and `-`.
    pub name: String,
    pub source: SourceConfig,
    /// Frame-rate cap; 0 = as fast as the source and pipeline go.
    #[serde(default)]
    pub fps: f32,
    /// `[[camera.zone]]`: polygons whose occupancy is counted and whose entry and exit are events.
    #[serde(default, rename = "zone")]
    pub zones: Vec<ZoneConfig>,
    /// `[[camera.line]]`: segments whose crossings are events.
    #[serde(default, rename = "line")]
    pub lines: Vec<LineConfig>,
}

/// A zone: a polygon in frame fractions (x from the left, y from the top, 0.0..=1.0).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoneConfig {
    /// Topic segment: letters, digits, `_` and `-`; unique per camera.
    pub name: String,
    /// At least 3 points `[x, y]`, no self-intersection.
    pub polygon: Vec<[f64; 2]>,
    /// Only objects with these labels count in the zone; empty: every label.
    #[serde(default)]
    pub labels: Vec<String>,
}

/// A counting line: a directed segment in frame fractions; crossing it from its left to its right
/// (walking from the first point to the second) is `in`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LineConfig {
    /// Letters, digits, `_` and `-`; unique per camera.
    pub name: String,
    pub points: [[f64; 2]; 2],
}

impl CameraConfig {
    /// The largest frame this camera can deliver, in bytes, for sources that must be sized up
    /// front (page-locked GPU slots). Sources without a fixed size (image files, GStreamer) get
    /// room for a 4K RGB frame.
    pub fn max_frame_bytes(&self) -> usize {
        const UNKNOWN_SIZE: usize = 3840 * 2160 * 3;
        match &self.source {
            // MJPEG is decoded to RGB (3 bytes a pixel); YUYV needs 2.
            SourceConfig::V4l2 { width, height, .. } | SourceConfig::Synthetic { width, height } => {
                *width as usize * *height as usize * 3
            }
            SourceConfig::Images { .. } | SourceConfig::Gstreamer { .. } => UNKNOWN_SIZE,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum PublishMode {
    /// A message for every processed frame, with or without detections.
    EveryFrame,
    /// A message for every frame that has detections.
    #[default]
    Detections,
    /// Only when the set of labels seen changes (including to none).
    OnChange,
    /// No detections messages (events, snapshots and telemetry still go out).
    None,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// CA bundle (PEM) that signs the broker's certificate.
    pub ca_file: PathBuf,
    /// Client certificate + key (PEM) for mutual TLS; both or neither.
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MqttConfig {
    #[serde(default = "default_mqtt_host")]
    pub host: String,
    #[serde(default = "default_mqtt_port")]
    pub port: u16,
    /// Default: `jetson-detectd-<device id>`.
    pub client_id: Option<String>,
    /// Topic prefix; default `jetson-detectd/<device id>`.
    pub prefix: Option<String>,
    /// QoS for detections, snapshots and telemetry (0, 1 or 2). Status is always QoS 1.
    #[serde(default = "default_qos")]
    pub qos: u8,
    #[serde(default = "default_keep_alive")]
    pub keep_alive_s: u16,
    /// Messages held while the broker is slow or away; the oldest is dropped (and counted) beyond.
    #[serde(default = "default_queue_capacity")]
    pub queue_capacity: usize,
    #[serde(default)]
    pub publish: PublishMode,
    /// At most this many detection messages per camera per second; 0 = no limit.
    #[serde(default)]
    pub max_rate_hz: f32,
    pub username: Option<String>,
    /// File whose first line is the password (preferred).
    pub password_file: Option<PathBuf>,
    /// Environment variable holding the password.
    pub password_env: Option<String>,
    pub tls: Option<TlsConfig>,
    /// Longest wait at shutdown for queued QoS ≥ 1 messages to be acknowledged.
    #[serde(default = "default_shutdown_flush_ms")]
    pub shutdown_flush_ms: u64,
    /// Reconnect backoff bounds.
    #[serde(default = "default_reconnect_min_ms")]
    pub reconnect_min_ms: u64,
    #[serde(default = "default_reconnect_max_ms")]
    pub reconnect_max_ms: u64,
}

impl Default for MqttConfig {
    fn default() -> Self {
        toml::from_str("").expect("every MqttConfig key has a default")
    }
}

fn default_mqtt_host() -> String {
    "localhost".into()
}
fn default_mqtt_port() -> u16 {
    1883
}
fn default_qos() -> u8 {
    1
}
fn default_keep_alive() -> u16 {
    30
}
fn default_queue_capacity() -> usize {
    1000
}
fn default_shutdown_flush_ms() -> u64 {
    3000
}
fn default_reconnect_min_ms() -> u64 {
    500
}
fn default_reconnect_max_ms() -> u64 {
    30_000
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Seconds between telemetry messages; 0 disables them.
    #[serde(default = "default_telemetry_interval")]
    pub interval_s: u32,
    /// Root under which Jetson sysfs files are looked up (tests point it at a fake tree).
    #[serde(default = "default_sysfs_root")]
    pub sysfs_root: PathBuf,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig { interval_s: default_telemetry_interval(), sysfs_root: default_sysfs_root() }
    }
}

fn default_telemetry_interval() -> u32 {
    10
}
fn default_sysfs_root() -> PathBuf {
    PathBuf::from("/")
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotConfig {
    #[serde(default)]
    pub enabled: bool,
    /// Minimum seconds between snapshots per camera.
    #[serde(default = "default_snapshot_interval")]
    pub interval_s: f32,
    /// JPEG quality 1..=100.
    #[serde(default = "default_jpeg_quality")]
    pub jpeg_quality: u8,
    /// Publish each tracked object's best picture when its event ends (needs `tracking.enabled`).
    #[serde(default)]
    pub events: bool,
}

impl Default for SnapshotConfig {
    fn default() -> Self {
        SnapshotConfig {
            enabled: false,
            interval_s: default_snapshot_interval(),
            jpeg_quality: default_jpeg_quality(),
            events: false,
        }
    }
}

fn default_snapshot_interval() -> f32 {
    5.0
}
fn default_jpeg_quality() -> u8 {
    80
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HomeAssistantConfig {
    /// Publish Home Assistant MQTT discovery messages.
    #[serde(default)]
    pub discovery: bool,
    #[serde(default = "default_discovery_prefix")]
    pub discovery_prefix: String,
    /// Labels that get a per-camera count sensor.
    #[serde(default = "default_ha_labels")]
    pub labels: Vec<String>,
}

impl Default for HomeAssistantConfig {
    fn default() -> Self {
        HomeAssistantConfig {
            discovery: false,
            discovery_prefix: default_discovery_prefix(),
            labels: default_ha_labels(),
        }
    }
}

fn default_discovery_prefix() -> String {
    "homeassistant".into()
}
fn default_ha_labels() -> Vec<String> {
    vec!["person".into()]
}

/// `[tracking]`: the per-camera tracker and its event rules.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrackingConfig {
    /// Track objects and publish events and zone occupancy.
    #[serde(default = "default_tracking_enabled")]
    pub enabled: bool,
    /// A track unseen for longer than this (seconds of capture time) ends.
    #[serde(default = "default_max_lost_s")]
    pub max_lost_s: f32,
    /// Frames an object must be seen on before its track is confirmed (`start` event, track id).
    #[serde(default = "default_min_hits")]
    pub min_hits: u32,
    /// Detections at or above this score start tracks; weaker ones (down to `model.score_threshold`)
    /// only keep existing tracks alive.
    #[serde(default = "default_high_score")]
    pub high_score: f32,
    /// Minimum overlap (IoU) between a track's predicted box and a detection.
    #[serde(default = "default_match_iou")]
    pub match_iou: f32,
    /// Live tracks per camera at most (bounds memory, event snapshots included).
    #[serde(default = "default_max_tracks")]
    pub max_tracks: usize,
    /// A box whose corners move less than this many pixels...
    #[serde(default = "default_stationary_px")]
    pub stationary_px: f32,
    /// ...for this many seconds is stationary.
    #[serde(default = "default_stationary_s")]
    pub stationary_s: f32,
}

impl Default for TrackingConfig {
    fn default() -> Self {
        toml::from_str("").expect("every TrackingConfig key has a default")
    }
}

fn default_tracking_enabled() -> bool {
    true
}
fn default_max_lost_s() -> f32 {
    1.0
}
fn default_min_hits() -> u32 {
    3
}
fn default_high_score() -> f32 {
    0.5
}
fn default_match_iou() -> f32 {
    0.2
}
fn default_max_tracks() -> usize {
    64
}
fn default_stationary_px() -> f32 {
    10.0
}
fn default_stationary_s() -> f32 {
    10.0
}

impl Config {
    /// Reads, parses, resolves relative paths against the file's directory, and validates.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let origin = ConfigOrigin::File(path.to_path_buf());
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { origin: origin.clone(), source })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::from_toml(&text, origin, &base)
    }

    /// The embedded default; its relative paths resolve against the data directory.
    pub fn embedded_default() -> Result<Config, ConfigError> {
        Self::from_toml(EMBEDDED_DEFAULT, ConfigOrigin::Embedded, &data_dir())
    }

    /// Parses `text`, resolves relative paths against `base`, validates.
    pub fn from_toml(text: &str, origin: ConfigOrigin, base: &Path) -> Result<Config, ConfigError> {
        let mut config: Config =
            toml::from_str(text).map_err(|e| ConfigError::Parse { origin: origin.clone(), message: e.to_string() })?;
        config.origin = origin;
        config.resolve_paths(base);
        config.validate()?;
        Ok(config)
    }

    fn resolve_paths(&mut self, base: &Path) {
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        if let Some(p) = self.model.onnx.as_mut() {
            resolve(p);
        }
        if let Some(p) = self.model.engine.as_mut() {
            resolve(p);
        }
        resolve(&mut self.model.labels);
        for camera in &mut self.cameras {
            if let SourceConfig::Images { path, .. } = &mut camera.source {
                resolve(path);
            }
        }
        if let Some(p) = self.mqtt.password_file.as_mut() {
            resolve(p);
        }
        if let Some(tls) = self.mqtt.tls.as_mut() {
            resolve(&mut tls.ca_file);
            if let Some(p) = tls.client_cert.as_mut() {
                resolve(p);
            }
            if let Some(p) = tls.client_key.as_mut() {
                resolve(p);
            }
        }
    }

    fn invalid(&self, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid { origin: self.origin.clone(), key: key.into(), message: message.into() }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let m = &self.model;
        match (&m.onnx, &m.engine) {
            (None, None) => {
                return Err(self.invalid("model", "set `onnx` (a model file) or `engine` (a prebuilt TensorRT engine)"))
            }
            (None, Some(_)) if self.device.backend == BackendChoice::Cpu => {
                return Err(
                    self.invalid("model.engine", "a TensorRT engine cannot run on the CPU backend; set `model.onnx`")
                )
            }
            _ => {}
        }
        if !(0.0..=1.0).contains(&m.score_threshold) {
            return Err(self.invalid("model.score_threshold", format!("{} is outside 0.0..=1.0", m.score_threshold)));
        }
        if !(0.0..=1.0).contains(&m.nms_iou) {
            return Err(self.invalid("model.nms_iou", format!("{} is outside 0.0..=1.0", m.nms_iou)));
        }
        if m.max_detections == 0 {
            return Err(self.invalid("model.max_detections", "must be at least 1"));
        }
        let input = &m.input;
        for (key, value) in [("model.input.width", input.width), ("model.input.height", input.height)] {
            if !(1..=8192).contains(&value) {
                return Err(self.invalid(key, format!("{value} is outside 1..=8192")));
            }
        }
        if input.std.iter().any(|s| !s.is_finite() || *s == 0.0) || input.mean.iter().any(|v| !v.is_finite()) {
            return Err(self.invalid("model.input.std", "mean must be finite and std finite and non-zero"));
        }
        if input.dtype == TensorDtype::U8 && (input.mean != [0.0; 3] || input.std != [1.0; 3]) {
            return Err(self.invalid("model.input.mean", "u8 inputs take raw pixels: leave mean/std at their defaults"));
        }
        if let Some(threads) = self.device.cpu_threads.filter(|threads| threads.get() > MAX_CPU_THREADS) {
            return Err(self.invalid("device.cpu_threads", format!("{threads} is outside 1..={MAX_CPU_THREADS}")));
        }
        if self.engine.frame_slots < 2 {
            return Err(self.invalid("engine.frame_slots", "must be at least 2"));
        }
        if self.engine.optimization_level > 5 {
            return Err(self.invalid("engine.optimization_level", "allowed: 0..=5"));
        }
        if self.engine.workspace_mib == 0 {
            return Err(self.invalid("engine.workspace_mib", "must be at least 1"));
        }
        if self.engine.dla_core.is_some() && self.engine.precision == Precision::Fp32 {
            return Err(self.invalid(
                "engine.dla_core",
                "DLA cores run FP16 and INT8 layers only (with precision = \"fp32\" every layer would fall back to \
                 the GPU): set engine.precision = \"fp16\" (or \"int8\" for a model with Q/DQ nodes), or remove \
                 dla_core",
            ));
        }
        if self.cameras.is_empty() {
            return Err(self.invalid("camera", "configure at least one [[camera]]"));
        }
        let mut names = BTreeSet::new();
        for (i, camera) in self.cameras.iter().enumerate() {
            let key = format!("camera[{i}].name");
            if !is_topic_segment(&camera.name) {
                return Err(self.invalid(&key, format!("{:?}: use 1..=64 letters, digits, `_` or `-`", camera.name)));
            }
            if !names.insert(camera.name.as_str()) {
                return Err(self.invalid(&key, format!("{:?} is used by two cameras", camera.name)));
            }
            if !camera.fps.is_finite() || camera.fps < 0.0 {
                return Err(self.invalid(&format!("camera[{i}].fps"), "must be ≥ 0 (0 = uncapped)"));
            }
            match &camera.source {
                SourceConfig::Synthetic { width, height }
                    if *width == 0 || *height == 0 || width % 2 == 1 || height % 2 == 1 =>
                {
                    return Err(self
                        .invalid(&format!("camera[{i}].source"), "synthetic width/height must be even and non-zero"));
                }
                SourceConfig::V4l2 { width, height, fps, .. } if *width == 0 || *height == 0 || *fps == 0 => {
                    return Err(
                        self.invalid(&format!("camera[{i}].source"), "v4l2 width, height and fps must be non-zero")
                    );
                }
                SourceConfig::Gstreamer { pipeline } if !pipeline.contains("appsink") => {
                    return Err(
                        self.invalid(&format!("camera[{i}].source.pipeline"), "the pipeline must end in an `appsink`")
                    );
                }
                SourceConfig::Images { replay_fps: Some(fps), .. } if !fps.is_finite() || *fps <= 0.0 => {
                    return Err(self.invalid(&format!("camera[{i}].source.replay_fps"), "must be > 0"));
                }
                _ => {}
            }
            self.validate_scene(i, camera)?;
        }
        let mqtt = &self.mqtt;
        if mqtt.qos > 2 {
            return Err(self.invalid("mqtt.qos", format!("{} is not 0, 1 or 2", mqtt.qos)));
        }
        if mqtt.queue_capacity == 0 {
            return Err(self.invalid("mqtt.queue_capacity", "must be at least 1"));
        }
        if !mqtt.max_rate_hz.is_finite() || mqtt.max_rate_hz < 0.0 {
            return Err(self.invalid("mqtt.max_rate_hz", "must be ≥ 0 (0 = no limit)"));
        }
        if mqtt.host.is_empty() {
            return Err(self.invalid("mqtt.host", "must not be empty"));
        }
        if mqtt.reconnect_min_ms == 0 || mqtt.reconnect_min_ms > mqtt.reconnect_max_ms {
            return Err(self.invalid("mqtt.reconnect_min_ms", "must be ≥ 1 and ≤ reconnect_max_ms"));
        }
        if mqtt.password_file.is_some() && mqtt.password_env.is_some() {
            return Err(self.invalid("mqtt.password_file", "set either password_file or password_env, not both"));
        }
        if (mqtt.password_file.is_some() || mqtt.password_env.is_some()) && mqtt.username.is_none() {
            return Err(self.invalid("mqtt.username", "a password needs a username"));
        }
        if let Some(prefix) = &mqtt.prefix {
            if prefix.is_empty() || prefix.ends_with('/') || prefix.contains(['+', '#']) {
                return Err(
                    self.invalid("mqtt.prefix", "must be non-empty, without a trailing `/` and without `+` or `#`")
                );
            }
        }
        if let Some(tls) = &mqtt.tls {
            if tls.client_cert.is_some() != tls.client_key.is_some() {
                return Err(self.invalid("mqtt.tls.client_cert", "set client_cert and client_key together"));
            }
        }
        self.validate_tracking()?;
        if !(1..=100).contains(&self.snapshot.jpeg_quality) {
            return Err(self.invalid("snapshot.jpeg_quality", "allowed: 1..=100"));
        }
        if !self.snapshot.interval_s.is_finite() || self.snapshot.interval_s <= 0.0 {
            return Err(self.invalid("snapshot.interval_s", "must be > 0"));
        }
        if let Some(id) = &self.device.id {
            if !is_topic_segment(id) {
                return Err(self.invalid("device.id", format!("{id:?}: use 1..=64 letters, digits, `_` or `-`")));
            }
        }
        Ok(())
    }

    /// `[[camera.zone]]` and `[[camera.line]]` of camera `i`: errors name the camera and the zone or line.
    fn validate_scene(&self, i: usize, camera: &CameraConfig) -> Result<(), ConfigError> {
        use crate::track::{lines, zones};
        if camera.zones.len() > zones::MAX_ZONES {
            return Err(
                self.invalid(&format!("camera[{i}].zone"), format!("at most {} zones per camera", zones::MAX_ZONES))
            );
        }
        if camera.lines.len() > lines::MAX_LINES {
            return Err(
                self.invalid(&format!("camera[{i}].line"), format!("at most {} lines per camera", lines::MAX_LINES))
            );
        }
        let mut names = BTreeSet::new();
        for (j, zone) in camera.zones.iter().enumerate() {
            let what = format!("camera {:?}, zone {:?}", camera.name, zone.name);
            if !is_topic_segment(&zone.name) {
                return Err(self.invalid(
                    &format!("camera[{i}].zone[{j}].name"),
                    format!("{what}: use 1..=64 letters, digits, `_` or `-` (it is a topic level)"),
                ));
            }
            if !names.insert(zone.name.as_str()) {
                return Err(
                    self.invalid(&format!("camera[{i}].zone[{j}].name"), format!("{what}: two zones have this name"))
                );
            }
            if let Err(reason) = zones::Polygon::new(&zone.polygon) {
                return Err(self.invalid(&format!("camera[{i}].zone[{j}].polygon"), format!("{what}: {reason}")));
            }
            if zone.labels.iter().any(|label| label.trim().is_empty()) {
                return Err(self.invalid(&format!("camera[{i}].zone[{j}].labels"), format!("{what}: empty label name")));
            }
        }
        let mut names = BTreeSet::new();
        for (j, line) in camera.lines.iter().enumerate() {
            let what = format!("camera {:?}, line {:?}", camera.name, line.name);
            if !is_topic_segment(&line.name) {
                return Err(self.invalid(
                    &format!("camera[{i}].line[{j}].name"),
                    format!("{what}: use 1..=64 letters, digits, `_` or `-`"),
                ));
            }
            if !names.insert(line.name.as_str()) {
                return Err(
                    self.invalid(&format!("camera[{i}].line[{j}].name"), format!("{what}: two lines have this name"))
                );
            }
            if let Err(reason) = lines::Segment::new(line.points) {
                return Err(self.invalid(&format!("camera[{i}].line[{j}].points"), format!("{what}: {reason}")));
            }
        }
        Ok(())
    }

    fn validate_tracking(&self) -> Result<(), ConfigError> {
        let t = &self.tracking;
        if !t.max_lost_s.is_finite() || t.max_lost_s <= 0.0 || t.max_lost_s > 3600.0 {
            return Err(self.invalid("tracking.max_lost_s", format!("{} is outside 0 < s <= 3600", t.max_lost_s)));
        }
        if !(1..=100).contains(&t.min_hits) {
            return Err(self.invalid("tracking.min_hits", format!("{} is outside 1..=100", t.min_hits)));
        }
        if !(0.0..=1.0).contains(&t.high_score) {
            return Err(self.invalid("tracking.high_score", format!("{} is outside 0.0..=1.0", t.high_score)));
        }
        if !(t.match_iou > 0.0 && t.match_iou <= 1.0) {
            return Err(self.invalid("tracking.match_iou", format!("{} is outside 0 < iou <= 1", t.match_iou)));
        }
        if !(1..=1000).contains(&t.max_tracks) {
            return Err(self.invalid("tracking.max_tracks", format!("{} is outside 1..=1000", t.max_tracks)));
        }
        if !t.stationary_px.is_finite() || t.stationary_px < 0.0 {
            return Err(self.invalid("tracking.stationary_px", "must be ≥ 0"));
        }
        if !t.stationary_s.is_finite() || t.stationary_s <= 0.0 {
            return Err(self.invalid("tracking.stationary_s", "must be > 0"));
        }
        Ok(())
    }

    /// The device id: configured, else the host name reduced to topic-safe characters.
    pub fn device_id(&self) -> String {
        if let Some(id) = &self.device.id {
            return id.clone();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let id: String =
            host.trim().chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).take(64).collect();
        if id.is_empty() {
            "jetson".into()
        } else {
            id
        }
    }

    /// `mqtt.prefix`, else `jetson-detectd/<device id>`.
    pub fn topic_prefix(&self) -> String {
        self.mqtt.prefix.clone().unwrap_or_else(|| format!("jetson-detectd/{}", self.device_id()))
    }
}

fn is_topic_segment(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Directory the embedded default's relative paths (`models/…`) resolve against:
/// `$JETSON_DETECTD_DATA_DIR`, else `<exe>/../share/jetson-detectd` when that holds `models/`
/// (the Debian package layout), else the source tree this binary was built from.
pub fn data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("JETSON_DETECTD_DATA_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(share) =
        std::env::current_exe().ok().and_then(|exe| Some(exe.parent()?.parent()?.join("share/jetson-detectd")))
    {
        if share.join("models").is_dir() {
            return share;
        }
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml(text, ConfigOrigin::File("test.toml".into()), Path::new("/base"))
    }

    const MINIMAL: &str = r#"
        [model]
        onnx = "m.onnx"
        labels = "l.txt"
        decoder = "ssd"
        input = { width = 300, height = 300, layout = "nhwc", dtype = "u8" }
        [[camera]]
        name = "front"
        source = { kind = "synthetic" }
    "#;

    #[test]
    fn embedded_default_is_valid() {
        let config = Config::embedded_default().expect("embedded default must validate");
        assert!(config.model.onnx.as_ref().is_some_and(|p| p.is_absolute()));
    }

    #[test]
    fn cpu_threads_defaults_to_the_available_cores_and_rejects_0_and_absurd_counts() {
        let config = parse(MINIMAL).expect("minimal");
        let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        assert_eq!(config.device.cpu_threads(), cores.min(MAX_CPU_THREADS));
        let config = parse(&format!("[device]\ncpu_threads = 3\n{MINIMAL}")).expect("3 threads");
        assert_eq!(config.device.cpu_threads(), 3);
        let error = parse(&format!("[device]\ncpu_threads = 0\n{MINIMAL}")).expect_err("0 threads");
        assert!(error.to_string().contains("cpu_threads"), "{error}");
        let error = parse(&format!("[device]\ncpu_threads = 1000\n{MINIMAL}")).expect_err("1000 threads");
        assert!(error.to_string().contains("device.cpu_threads") && error.to_string().contains("1..=256"), "{error}");
    }

    #[test]
    fn minimal_config_gets_defaults_and_resolved_paths() {
        let config = parse(MINIMAL).expect("valid");
        assert_eq!(config.model.onnx.as_deref(), Some(Path::new("/base/m.onnx")));
        assert_eq!(config.mqtt.port, 1883);
        assert_eq!(config.model.input.resize, ResizeKind::Stretch);
        assert_eq!(config.model.input.filter, ResizeFilter::Antialias);
    }

    #[test]
    fn resize_filter_is_read_and_checked() {
        let bilinear =
            parse(&MINIMAL.replace("dtype = \"u8\"", "dtype = \"u8\", filter = \"bilinear\"")).expect("valid");
        assert_eq!(bilinear.model.input.filter, ResizeFilter::Bilinear);
        let err = parse(&MINIMAL.replace("dtype = \"u8\"", "dtype = \"u8\", filter = \"lanczos\"")).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("lanczos") && text.contains("antialias"), "{text}");
    }

    #[test]
    fn unknown_key_is_named() {
        let err = parse(&MINIMAL.replace("decoder = \"ssd\"", "decoder = \"ssd\"\nthreshold = 0.3")).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("test.toml") && text.contains("threshold"), "{text}");
    }

    #[test]
    fn bad_enum_value_lists_allowed_values() {
        let err = parse(&MINIMAL.replace("\"ssd\"", "\"yolov99\"")).unwrap_err().to_string();
        assert!(err.contains("yolov99") && err.contains("yolov8"), "{err}");
    }

    #[test]
    fn invalid_values_name_their_key() {
        let cases = [
            (MINIMAL.replace("[[camera]]", "[mqtt]\nqos = 3\n[[camera]]"), "mqtt.qos"),
            (MINIMAL.replace("name = \"front\"", "name = \"front/door\""), "camera[0].name"),
            (MINIMAL.replace("decoder = \"ssd\"", "decoder = \"ssd\"\nscore_threshold = 1.5"), "model.score_threshold"),
            (MINIMAL.replace("dtype = \"u8\"", "dtype = \"u8\", std = [255.0, 255.0, 255.0]"), "model.input.mean"),
            (MINIMAL.replace("onnx = \"m.onnx\"", ""), "model"),
        ];
        for (text, key) in cases {
            match parse(&text) {
                Err(ConfigError::Invalid { key: got, .. }) => assert_eq!(got, key),
                other => panic!("expected an invalid `{key}`, got {other:?}"),
            }
        }
    }

    #[test]
    fn zones_lines_and_tracking_are_read_with_defaults() {
        let config = parse(&format!(
            "{MINIMAL}\n[[camera.zone]]\nname = \"drive\"\npolygon = [[0.1, 0.5], [0.9, 0.5], [0.9, 1.0], [0.1, 1.0]]\n\
             labels = [\"car\"]\n[[camera.line]]\nname = \"gate\"\npoints = [[0.5, 1.0], [0.5, 0.0]]\n"
        ))
        .expect("valid");
        let camera = &config.cameras[0];
        assert_eq!(camera.zones[0].name, "drive");
        assert_eq!(camera.zones[0].labels, ["car"]);
        assert_eq!(camera.lines[0].points, [[0.5, 1.0], [0.5, 0.0]]);
        assert_eq!(config.tracking, TrackingConfig::default());
        assert!(config.tracking.enabled && config.tracking.min_hits == 3 && config.tracking.max_lost_s == 1.0);
        assert!(!config.snapshot.events);
        let none = parse(&MINIMAL.replace("[[camera]]", "[mqtt]\npublish = \"none\"\n[[camera]]")).expect("valid");
        assert_eq!(none.mqtt.publish, PublishMode::None);
    }

    /// Every zone and line mistake is refused with the camera, the zone or line, and the reason.
    #[test]
    fn bad_zones_and_lines_name_the_camera_and_the_zone() {
        let zone = |polygon: &str| format!("{MINIMAL}\n[[camera.zone]]\nname = \"drive\"\npolygon = {polygon}\n");
        let line = |points: &str| format!("{MINIMAL}\n[[camera.line]]\nname = \"gate\"\npoints = {points}\n");
        let cases = [
            (zone("[[0.0, 0.0], [1.0, 0.0]]"), "camera[0].zone[0].polygon", "at least 3 points"),
            (
                zone("[[0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]"),
                "camera[0].zone[0].polygon",
                "intersects itself",
            ),
            (zone("[[0.0, 0.0], [0.5, 0.5], [1.0, 1.0]]"), "camera[0].zone[0].polygon", "no area"),
            (zone("[[0.0, 0.0], [1.2, 0.0], [1.0, 1.0]]"), "camera[0].zone[0].polygon", "outside the frame"),
            (
                format!(
                    "{}[[camera.zone]]\nname = \"drive\"\npolygon = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]\n",
                    zone("[[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]")
                ),
                "camera[0].zone[1].name",
                "two zones",
            ),
            (
                zone("[[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]").replace("\"drive\"", "\"drive way\""),
                "camera[0].zone[0].name",
                "letters",
            ),
            (line("[[0.5, 0.5], [0.5, 0.5]]"), "camera[0].line[0].points", "two different points"),
            (line("[[0.5, 0.5], [0.5, -0.5]]"), "camera[0].line[0].points", "outside the frame"),
        ];
        for (text, key, reason) in cases {
            match parse(&text) {
                Err(ConfigError::Invalid { key: got, message, .. }) => {
                    assert_eq!(got, key, "{message}");
                    assert!(message.contains("camera \"front\"") && message.contains(reason), "{message}");
                }
                other => panic!("expected an invalid `{key}`, got {other:?}"),
            }
        }
    }

    #[test]
    fn bad_tracking_values_and_replay_rates_are_refused() {
        let cases = [
            ("[tracking]\nmax_lost_s = 0.0", "tracking.max_lost_s"),
            ("[tracking]\nmin_hits = 0", "tracking.min_hits"),
            ("[tracking]\nhigh_score = 1.5", "tracking.high_score"),
            ("[tracking]\nmatch_iou = 0.0", "tracking.match_iou"),
            ("[tracking]\nmax_tracks = 0", "tracking.max_tracks"),
            ("[tracking]\nstationary_s = -1.0", "tracking.stationary_s"),
        ];
        for (table, key) in cases {
            match parse(&MINIMAL.replace("[[camera]]", &format!("{table}\n[[camera]]"))) {
                Err(ConfigError::Invalid { key: got, .. }) => assert_eq!(got, key),
                other => panic!("expected an invalid `{key}`, got {other:?}"),
            }
        }
        let replay =
            MINIMAL.replace("{ kind = \"synthetic\" }", "{ kind = \"images\", path = \"d\", replay_fps = 0.0 }");
        assert!(
            matches!(parse(&replay), Err(ConfigError::Invalid { key, .. }) if key == "camera[0].source.replay_fps")
        );
    }

    #[test]
    fn dla_needs_a_reduced_precision() {
        let dla = |precision: &str| parse(&format!("{MINIMAL}\n[engine]\ndla_core = 0\nprecision = \"{precision}\"\n"));
        match dla("fp32") {
            Err(ConfigError::Invalid { key, message, .. }) => {
                assert_eq!(key, "engine.dla_core");
                assert!(message.contains("FP16") && message.contains("precision = \"fp16\""), "{message}");
            }
            other => panic!("dla_core with fp32 must be refused, got {other:?}"),
        }
        assert_eq!(dla("fp16").expect("valid").engine.dla_core, Some(0));
        assert!(dla("int8").is_ok());
    }

    #[test]
    fn duplicate_camera_names_are_rejected() {
        let text = format!("{MINIMAL}\n[[camera]]\nname = \"front\"\nsource = {{ kind = \"synthetic\" }}\n");
        assert!(matches!(parse(&text), Err(ConfigError::Invalid { key, .. }) if key == "camera[1].name"));
    }
}
