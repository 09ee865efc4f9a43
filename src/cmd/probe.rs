//! `jetson-detectd probe`: what this machine offers the daemon, as one JSON document.
//!
//! Owns: gathering the GPU, TensorRT, camera and broker facts (the broker's login too, as
//! `<client id>-probe`) without changing anything.
//! Must not: fail (every section reports its own problem), build engines, or publish.

use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};

use crate::backend::cpu::{EngineChoice, EngineKind};
use crate::config::{BackendChoice, Config, Fallback, SourceConfig};
use crate::frame::SlotAllocator;
use crate::publish::mqtt::config::MqttConfig;
use crate::publish::mqtt::login::try_login;
use crate::publish::mqtt::MqttSettings;
use crate::source::v4l2::{SourceState, V4l2Source};
use crate::source::{FrameSource, Opening};

/// How long the broker check waits for a TCP connection, and then for the login's answer.
const BROKER_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, Serialize)]
pub struct ProbeReport {
    pub version: &'static str,
    pub arch: &'static str,
    pub config: String,
    /// `{"available": bool, ...}`: the CUDA device as the driver reports it, or why there is none.
    pub gpu: Value,
    /// `{"available": bool, "summary": ...}`: whether libnvinfer loads, and the engine it would use.
    pub tensorrt: Value,
    /// Which backend `run` would use with this config, and why ([`BackendVerdict`]).
    pub backend: BackendVerdict,
    /// `{"engine": "rten" | "onnxruntime", "version", "library", "reason"}`: the CPU backend's
    /// engine as `device.cpu_engine` picks it here, or `{"engine": null, "error"}`.
    pub cpu_engine: Value,
    /// V4L2 capture nodes present (`/dev/video*`).
    pub video_devices: Vec<String>,
    pub cameras: Vec<CameraProbe>,
    pub broker: BrokerProbe,
    /// What the config's model description took from the ONNX file (the keys the config leaves
    /// unset), one line each; empty when the config describes its model itself.
    pub recognised: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct CameraProbe {
    pub name: String,
    pub ok: bool,
    /// The opened source's description, or why it cannot be opened.
    pub detail: String,
    /// RTSP cameras: per codec the stream may carry, the decoder this machine would use and
    /// whether it is hardware (`{"H.264": {"decoder": "nvv4l2decoder", "hardware": true}, …}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decoders: Option<Value>,
    /// RTSP cameras: the stream the camera announced when asked, and the decoder it gets here
    /// (`{"codec": "H.264", "decoder": "avdec_h264", "hardware": false}`), or `{"error": …}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<Value>,
    /// V4L2 cameras that opened: how frames leave the driver and why
    /// (`{"mode": "userptr" | "mmap+copy" | "mmap+decode", "reason": …}`). Probed with heap
    /// memory; the daemon lends the driver the backend's slot memory (page-locked on the GPU
    /// backend), and falls back to mmap + copy, with a log line, should the driver refuse that.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<Value>,
}

/// The broker as `run` would meet it: its port, then a login with the config's client options
/// (credentials, TLS) as `<client id>-probe`, which leaves a running daemon's session alone.
#[derive(Debug, Serialize)]
pub struct BrokerProbe {
    pub address: String,
    /// The port accepts TCP connections.
    pub reachable: bool,
    /// The broker accepted the login (or a connection without one, when the config has none).
    pub logged_in: bool,
    /// What was tried and the answer; a refused login names the keys to check.
    pub detail: String,
}

/// Which backend `run` would use, as `probe` says it: `backend = "auto"` on a machine where
/// TensorRT does not load runs on the CPU, several times slower, and that must not go unnoticed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackendVerdict {
    /// `device.backend`.
    pub configured: BackendChoice,
    /// `tensorrt` or `cpu`; `none` when `device.backend = "tensorrt"` without fallback cannot start.
    pub run_uses: &'static str,
    /// Why, when it is not what the configuration asks for first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// [`BackendVerdict`] from the config and the probed sections (`available` and `summary` of each).
pub fn backend_verdict(configured: BackendChoice, fallback: Fallback, gpu: &Value, tensorrt: &Value) -> BackendVerdict {
    let available = |section: &Value| section.get("available").and_then(Value::as_bool).unwrap_or(false);
    let summary = |section: &Value| section.get("summary").and_then(Value::as_str).unwrap_or("unknown").to_owned();
    let missing = if !available(gpu) {
        Some(format!("no GPU: {}", summary(gpu)))
    } else if !available(tensorrt) {
        Some(format!("no TensorRT: {}", summary(tensorrt)))
    } else {
        None
    };
    let (run_uses, warning) = match (configured, missing) {
        (BackendChoice::Cpu, _) => ("cpu", None),
        (_, None) => ("tensorrt", None),
        (BackendChoice::Tensorrt, Some(why)) if fallback == Fallback::None => {
            ("none", Some(format!("device.backend = \"tensorrt\" cannot start: {why}")))
        }
        (_, Some(why)) => ("cpu", Some(format!("runs on the CPU backend (much slower): {why}"))),
    };
    BackendVerdict { configured, run_uses, warning }
}

pub fn probe(config: &Config) -> ProbeReport {
    let gpu = crate::backend::load::gpu_section(config.device.gpu as usize);
    let tensorrt = tensorrt_section(config);
    ProbeReport {
        version: env!("CARGO_PKG_VERSION"),
        arch: std::env::consts::ARCH,
        config: config.origin.to_string(),
        backend: backend_verdict(config.device.backend, config.device.fallback, &gpu, &tensorrt),
        gpu,
        tensorrt,
        cpu_engine: cpu_engine_section(config),
        video_devices: video_devices(),
        cameras: config.cameras.iter().map(|camera| camera_probe(camera, config.limits)).collect(),
        broker: broker_probe(config),
        recognised: config.recognised().map(str::to_string).collect(),
    }
}

/// With TensorRT and a GPU present, also the engine file the config would use and whether it is
/// already in the cache (if not, the first `run` builds it: minutes on a Jetson); for a cached
/// engine, the context memory the daemon would hold (`context_memory`).
#[cfg(feature = "tensorrt")]
fn tensorrt_section(config: &Config) -> Value {
    use crate::backend::load::expected_engine_path;
    use crate::model::{DeviceSpec, ModelSpec};
    let probe = crate::backend::trt::probe();
    let mut section = serde_json::to_value(&probe).unwrap_or(Value::Null);
    let (model, on) = (ModelSpec::from_config(config).ok(), DeviceSpec::from_config(config));
    let engine = probe.usable_version.and(model.as_ref()).and_then(|model| expected_engine_path(model, &on));
    if let Some(path) = engine {
        let cached = path.is_file();
        section["engine"] = json!({ "cached": cached, "path": path });
        // What the cameras' one inference worker would hold: scratch, persistent context memory,
        // and the saving against one context per camera.
        if let Some(model) = model.as_ref().filter(|_| cached) {
            let cameras = config.cameras.len();
            section["context_memory"] =
                match crate::backend::trt::backend::planned_context_memory(model, &on, cameras, &path) {
                    Ok(memory) => serde_json::to_value(memory).unwrap_or(Value::Null),
                    Err(error) => json!({ "error": error.to_string() }),
                };
        }
    }
    section
}

#[cfg(not(feature = "tensorrt"))]
fn tensorrt_section(_config: &Config) -> Value {
    json!({ "available": false, "summary": "this binary was built without the `tensorrt` feature" })
}

/// The CPU engine the CPU backend would run on (loading ONNX Runtime's library to know).
fn cpu_engine_section(config: &Config) -> Value {
    match EngineChoice::choose(config.device.cpu_engine, config.device.onnxruntime_library.as_deref()) {
        Ok(choice) => {
            let engine = match choice.kind {
                EngineKind::Rten => "rten",
                EngineKind::OnnxRuntime => "onnxruntime",
            };
            json!({
                "engine": engine,
                "version": choice.engine(),
                "library": choice.library.as_ref().map(|library| library.path.display().to_string()),
                "reason": choice.reason,
            })
        }
        Err(error) => json!({ "engine": null, "error": error.to_string() }),
    }
}

fn video_devices() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/dev") else { return Vec::new() };
    let mut devices: Vec<String> = entries
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path())
        .filter(|path| path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("video")))
        .map(|path| path.display().to_string())
        .collect();
    devices.sort();
    devices
}

fn camera_probe(camera: &crate::config::CameraConfig, limits: crate::config::LimitsConfig) -> CameraProbe {
    // A set stop flag keeps reconnecting sources from waiting for a device.
    let stop = Arc::new(AtomicBool::new(true));
    let mut capture = None;
    let (ok, detail) = match &camera.source {
        // A V4L2 camera that is missing or busy (another process streams from it) opens in the
        // reconnecting state: say why instead of calling it ok.
        SourceConfig::V4l2(v4l2) => {
            let (width, height, fps, format) = (v4l2.width, v4l2.height, v4l2.fps, v4l2.format);
            match V4l2Source::open(&v4l2.device, width, height, fps, format, limits, stop, &SlotAllocator::heap()) {
                Ok(source) => {
                    capture = source.capture_plan().map(|plan| json!({ "mode": plan.label(), "reason": plan.reason }));
                    match source.state() {
                        SourceState::Reconnecting { last_error, .. } => {
                            (false, format!("{}: {last_error} (the daemon keeps retrying)", source.describe()))
                        }
                        SourceState::Streaming
                        | SourceState::Connecting { .. }
                        | SourceState::Ended
                        | SourceState::Stopped => (true, source.describe()),
                    }
                }
                Err(e) => (false, e.to_string()),
            }
        }
        other => {
            match other.kind().open(&camera.name, Opening { limits, stop, slots: &SlotAllocator::heap(), tap: None }) {
                Ok(source) => (true, source.describe()),
                Err(e) => (false, e.to_string()),
            }
        }
    };
    let stream = if ok { rtsp_stream(&camera.name, &camera.source) } else { None };
    let ok = ok && stream.as_ref().is_none_or(|stream| stream.get("error").is_none());
    CameraProbe { name: camera.name.clone(), ok, detail, decoders: decoders(&camera.source), stream, capture }
}

/// How long `probe` waits for an RTSP camera to describe its stream.
#[cfg(feature = "gstreamer")]
const RTSP_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

#[cfg(feature = "gstreamer")]
fn rtsp_stream(camera: &str, source: &SourceConfig) -> Option<Value> {
    use crate::source::gstreamer::{decoder, rtsp, PipelineSpec};
    use crate::source::kinds::through_gstreamer::Pipelined;
    let SourceConfig::Rtsp(rtsp_source) = source else {
        return None;
    };
    let answer = match rtsp_source.pipeline(camera) {
        Ok(PipelineSpec::Rtsp(spec)) => rtsp::stream_codec(&spec, RTSP_PROBE_TIMEOUT).and_then(|codec| {
            let chain = decoder::choose_chain(codec, &decoder::GstRegistry).map_err(|err| err.to_string())?;
            Ok(json!({ "codec": codec.label(), "decoder": chain.decoder, "hardware": chain.hardware }))
        }),
        Ok(_) => return None,
        Err(err) => Err(err.to_string()),
    };
    Some(answer.unwrap_or_else(|error| json!({ "error": error })))
}

#[cfg(not(feature = "gstreamer"))]
fn rtsp_stream(_camera: &str, _source: &SourceConfig) -> Option<Value> {
    None
}

#[cfg(feature = "gstreamer")]
fn decoders(source: &SourceConfig) -> Option<Value> {
    use crate::source::gstreamer::{decoder::GstRegistry, rtsp};
    match source {
        SourceConfig::Rtsp(_) => Some(match gstreamer::init() {
            Ok(()) => rtsp::decoder_report(&GstRegistry),
            Err(err) => json!({ "error": format!("cannot initialise GStreamer: {err}") }),
        }),
        _ => None,
    }
}

#[cfg(not(feature = "gstreamer"))]
fn decoders(_source: &SourceConfig) -> Option<Value> {
    None
}

/// [`BrokerProbe`]: the TCP check ([`broker_reachable`]), then the login.
fn broker_probe(config: &Config) -> BrokerProbe {
    let mqtt = MqttConfig::of(config);
    let reachable = broker_reachable(&mqtt.host, mqtt.port);
    if !reachable.reachable {
        return reachable;
    }
    let login = match MqttSettings::from_config(config) {
        Ok(settings) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("login not tried: cannot start a runtime: {e}"))
            .and_then(|runtime| runtime.block_on(try_login(&settings, BROKER_TIMEOUT))),
        Err(e) => Err(format!("login not tried: {e}")),
    };
    let (logged_in, answer) = match login {
        Ok(accepted) => (true, accepted),
        Err(why) => (false, why),
    };
    BrokerProbe { logged_in, detail: format!("{}; {answer}", reachable.detail), ..reachable }
}

/// Whether the broker's port accepts a TCP connection (nothing sent).
fn broker_reachable(host: &str, port: u16) -> BrokerProbe {
    let address = format!("{host}:{port}");
    let connected =
        (host, port).to_socket_addrs().map_err(|e| format!("cannot resolve {host}: {e}")).and_then(|addresses| {
            let mut last_error = format!("{host} resolves to no address");
            for candidate in addresses {
                match TcpStream::connect_timeout(&candidate, BROKER_TIMEOUT) {
                    Ok(_) => return Ok(candidate),
                    Err(e) => last_error = format!("{candidate}: {e}"),
                }
            }
            Err(last_error)
        });
    match connected {
        Ok(candidate) => {
            BrokerProbe { address, reachable: true, logged_in: false, detail: format!("TCP connect to {candidate} ok") }
        }
        Err(detail) => BrokerProbe { address, reachable: false, logged_in: false, detail },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::kinds::v4l2::V4l2Config;
    use crate::source::v4l2::V4l2Format;

    #[test]
    fn a_closed_port_is_unreachable_with_the_reason() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        assert!(broker_reachable("127.0.0.1", port).reachable);
        drop(listener);
        let closed = broker_reachable("127.0.0.1", port);
        assert!(!closed.reachable);
        assert!(closed.detail.contains("127.0.0.1"), "{}", closed.detail);
    }

    #[test]
    fn a_missing_v4l2_camera_is_reported_with_the_reason() {
        let mut config = Config::embedded_default().expect("default");
        config.cameras[0].source = SourceConfig::V4l2(V4l2Config {
            device: "/dev/video-jetson-detectd-probe-missing".into(),
            width: 640,
            height: 480,
            fps: 30,
            format: V4l2Format::Yuyv,
        });
        let camera = camera_probe(&config.cameras[0], config.limits);
        assert!(!camera.ok);
        assert!(camera.detail.contains("No such file"), "{}", camera.detail);
        assert_eq!(camera.capture, None, "the capture mode is known once the device opens");
    }

    #[test]
    fn the_embedded_default_probes_without_failing() {
        let config = Config::embedded_default().expect("default");
        let report = probe(&config);
        assert_eq!(report.cameras.len(), config.cameras.len());
        let text = serde_json::to_string(&report).expect("serialise");
        assert!(text.contains("\"tensorrt\""), "{text}");
    }

    #[test]
    fn auto_without_tensorrt_is_reported_as_a_cpu_fallback_with_the_reason() {
        let gpu = json!({ "available": true, "device": {} });
        let no_trt = json!({ "available": false, "summary": "libnvinfer.so.10: cannot open shared object file" });
        let trt = json!({ "available": true, "summary": "TensorRT 10.3.0 loaded" });
        let auto = backend_verdict(BackendChoice::Auto, Fallback::None, &gpu, &no_trt);
        assert_eq!(auto.run_uses, "cpu");
        assert!(auto.warning.as_deref().is_some_and(|w| w.contains("libnvinfer.so.10")), "{auto:?}");
        let ok = backend_verdict(BackendChoice::Auto, Fallback::None, &gpu, &trt);
        assert_eq!((ok.run_uses, ok.warning), ("tensorrt", None));
        let strict = backend_verdict(BackendChoice::Tensorrt, Fallback::None, &json!({ "available": false }), &trt);
        assert_eq!(strict.run_uses, "none");
        let cpu = backend_verdict(BackendChoice::Cpu, Fallback::None, &gpu, &no_trt);
        assert_eq!((cpu.run_uses, cpu.warning), ("cpu", None));
    }
}
