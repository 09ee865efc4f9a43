//! Black-box tests against real parts: the bundled model and images, a real mosquitto broker,
//! real files and sockets. One test binary (modules below) keeps link time and CI time down.

mod announced;
mod arch;
mod bounded;
mod broker;
#[cfg(target_arch = "x86_64")]
mod browser;
mod build_lock;
#[cfg(feature = "gstreamer")]
mod clips;
mod daemon;
#[cfg(target_arch = "x86_64")]
mod demo;
mod detect;
mod engine_build;
mod engine_pack;
mod engine_store;
mod golden;
#[cfg(feature = "cuda")]
mod gpu;
#[cfg(feature = "tensorrt")]
mod gpu_arena;
#[cfg(target_arch = "x86_64")]
mod homeassistant;
mod hostile;
mod http;
mod layering;
#[cfg(feature = "gstreamer")]
mod live;
mod login;
mod models;
mod motion;
mod mqtt;
mod notify;
mod onnxruntime;
mod pace;
mod prerequisite;
mod prometheus;
mod readme_build;
mod reid;
#[cfg(feature = "gstreamer")]
mod rtsp;
mod secrets;
mod selftest;
mod sources;
mod store_servers;
mod telemetry;
mod tracking;
mod watchdog;
mod webhook;
mod zones_file;
