//! `jetson-detectd bench`: per-stage timings of the configured backend, one benchmark per file.
//!
//! Owns: putting the benchmarks together as `bench` asks (`command`: [`run`], [`BenchRequest`]);
//! `summary` summarises a stage's timings ([`StageSummary`]), `error` says what failed. The
//! benchmarks: `stages` runs an image through the same stages as a camera frame (decode into a
//! slot, preprocess, infer, decode/NMS, message encoding), many times; `cameras` runs N copies of
//! it as N cameras through the real scheduler (throughput of all cameras together, per camera, per
//! model, batch sizes), on the detectors `--models` lists (`models` loads them as the daemon does,
//! with the classifiers every worker holds, and says what each model's contexts take of device
//! memory); `tracker` times the tracker on a synthetic scene; with `--gpu`, `gpu` opens the
//! configured GPU itself (besides the backend, which `main` loads) and times the GPU path outside
//! inference and the preprocessing kernel; with `--fps` or `--motion`, `capacity` finds the most of
//! N cameras that keep a frame rate each, live (a frame inference has not taken is dropped), on a
//! `scene` (a still one with sensor noise, or one where a block moves) and with `--motion` through
//! each camera's motion gate. Both start their cameras (the scheduler, a pipeline per camera) and
//! stop them through `running_cameras`. Without the `cuda` feature, `no_gpu` says `--gpu` cannot
//! run. Must not: assert on time (the caller prints the numbers) or touch MQTT and real cameras.

mod cameras;
mod capacity;
mod command;
mod error;
#[cfg(feature = "cuda")]
mod gpu;
mod models;
#[cfg(not(feature = "cuda"))]
mod no_gpu;
mod preprocess;
mod running_cameras;
mod scene;
mod stages;
mod summary;
mod tracker;

pub use capacity::DEFAULT_FPS;
pub use command::{run, BenchOutput, BenchRequest};
pub use error::BenchError;
pub use scene::MotionScene;
pub use summary::StageSummary;
