//! jetson-detectd: camera frames → object detections → MQTT, on Jetson (CUDA + TensorRT) or any
//! Linux box (CPU backend). `main.rs` is only the CLI; everything else lives here so that the
//! integration tests and benches can drive the same code.
//!
//! The folders follow a frame: `source` (frames in) → `infer` (camera rings, the scheduler, the
//! per-frame step) → `preprocess` / `gpu` → `backend` (CPU, TensorRT) → `decode` → `track` →
//! `publish` (MQTT, Home Assistant, snapshots, the live view). `http` (the page, the API, `/metrics`)
//! reads what `publish` and `service` expose. `service` is the daemon's life under systemd
//! (notify, telemetry, logging) and `cmd` holds the subcommands that wire the stages together.
//! Each stage imports only what lies below it.

pub mod backend;
pub mod cmd;
pub mod config;
pub mod decode;
pub mod detection;
pub mod frame;
pub mod http;
pub mod infer;
pub mod model;
pub mod preprocess;
pub mod publish;
pub mod service;
pub mod source;
pub mod sys;
pub mod track;

#[cfg(test)]
mod proptest_support;

#[cfg(feature = "cuda")]
pub mod gpu;
