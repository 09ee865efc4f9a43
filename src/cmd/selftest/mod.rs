//! `jetson-detectd selftest`: proves that a device runs the configured model, in one command.
//!
//! Owns: nothing itself; one file per job. `sequence` runs the checks in order ([`run`], asked
//! [`SelftestOptions`], `options`); `device` checks the GPU, TensorRT and its plugins, the cache
//! directory and the clocks ([`clocks`] reads them); `engine` builds or loads the engine, with
//! cold/warm build times, and loads the configured backend; `contexts` opens the execution contexts
//! and reports their shared scratch memory; [`models`] loads every model a worker runs and reports
//! its device memory; `images` runs the sample images through the configured backend and the CPU
//! backend and compares their detections ([`agreement`]; per label, [`compare`]); `timing` times
//! inferences back to back and after pauses ([`latency`] summarises them). Each fills in the
//! [`SelftestReport`] (`report`: its types and its text for a terminal, [`render_text`]; JSON for
//! an issue report). Every check says pass, warn, fail or skip with a reason; on a machine without
//! a GPU or TensorRT the GPU checks are skipped, never failed, unless the config demands TensorRT
//! (`backend = "tensorrt"` without a CPU fallback), because then the daemon itself would not start.
//! Must not: publish over MQTT, open cameras, change clocks or power modes, or judge speed (latency
//! is reported; only the jitter between back-to-back and paused runs gets a sentence).

pub mod agreement;
pub mod clocks;
pub mod compare;
mod contexts;
mod device;
mod engine;
mod images;
pub mod latency;
pub mod models;
mod options;
mod report;
mod sequence;
mod timing;

pub use images::image_source;
pub use options::SelftestOptions;
pub use report::{render_text, Check, ContextReport, EngineReport, ImageResult, LatencyReport, SelftestReport, Status};
pub use sequence::run;
