//! jetson-detectd: camera frames → object detections → MQTT, on Jetson (CUDA + TensorRT) or any
//! Linux box (CPU backend). `main.rs` is only the CLI; everything else lives here so that the
//! integration tests and benches can drive the same code.

pub mod backend;
pub mod bench;
pub mod config;
pub mod daemon;
pub mod decode;
pub mod detection;
pub mod engine_cache;
pub mod frame;
pub mod homeassistant;
pub mod logging;
pub mod mqtt;
pub mod notify;
pub mod oneshot;
pub mod onnx_external_data;
pub mod payload;
pub mod pipeline;
pub mod preprocess;
pub mod probe;
pub mod publish_policy;
pub mod scheduler;
pub mod selftest;
pub mod snapshot;
pub mod source;
pub mod telemetry;
pub mod track;

#[cfg(test)]
mod proptest_support;

#[cfg(feature = "cuda")]
pub mod gpu;
#[cfg(feature = "tensorrt")]
pub mod trt;
