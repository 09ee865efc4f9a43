//! Inference scheduling: the workers that run the frames of every camera.
//!
//! Owns: the inference workers (one per GPU; `device.cpu_workers` on the CPU backend), each an OS
//! thread (two for an overlapping worker, below) with its own backend session, created on it and
//! never leaving it (on the GPU: the device's primary context bound once, one stream, one
//! execution context); the choice of ready frames across cameras, round robin; batching (`engine.max_batch`, `engine.batch_timeout_ms`);
//! decoding each frame and handing the result to the sink; the current decode parameters (SIGHUP);
//! the batch-size and memory statistics that telemetry and `bench` report; the workers' [`Liveness`](crate::service::notify::Liveness)
//! parties (a worker beats after every batch and every idle wait). What belongs to a model is kept
//! apart from the worker that runs it: the model's backend and decode parameters ([`ModelLane`])
//! and, in each worker, its session and decoder (`model_sessions::ModelSession`).
//!
//! Models: every camera is served by one detector, its [`ModelLane`] (lane 0: `[model]`, unless no
//! camera runs it, which then has no lane; others: the `[models.<name>]` detectors cameras name; a
//! camera no lane lists runs on lane 0). Every worker holds a session of every lane, so
//! one worker per GPU serves every model on its one stream; a batch holds frames of one lane only
//! (the lane of the first camera the round finds ready). A lane's class ids are renamed into the
//! shared label list before the sink sees them, so every outlet names classes with one list.
//! Every worker also holds a session of every per-track model (`super::per_track`), opened on its
//! seat after its detectors', which it lends the sink with each frame it delivers.
//!
//! Overlapping workers: where the backend says so ([`Backend::overlaps_preprocessing`](crate::backend::Backend::overlaps_preprocessing): the CPU
//! backend's workers of many threads), a worker is two threads with a session each that
//! take turns ([`turns`]): one preprocesses its next frame while the other's inference runs
//! on the worker's cores, one inference at a time, frames delivered in the order they were taken.
//!
//! Fairness and order: a worker takes at most one frame per camera into a batch, starting after the
//! camera it served last, and a camera with a frame in flight is skipped until that frame is done
//! (an overlapping worker may take a camera's next frame while it holds the previous one, when the
//! camera's ring keeps a slot for the camera to fill). So no camera starves another, and each
//! camera's frames reach the sink in capture order (its tracker depends on that) even with several
//! workers. A camera that is behind loses its *oldest* waiting frame in its own ring (counted
//! there), never another camera's.
//!
//! Must not: read sources, publish, or block on the network — the sink decides what to do with a
//! result and must return quickly.
//!
//! Files, one job each: [`plan`] (workers, batch size, batch wait), [`threads`] (the
//! [`Scheduler`]: starting, feeding, reloading and joining the workers' threads), [`shared`] (what
//! the workers share), [`lanes`] (the models they run), [`model_sessions`] (which session of each
//! model a worker runs it on: opened on its thread), [`feeds`] (the cameras as the workers see
//! them), [`fairness`] (which ready frames a worker takes, round robin, batched by lane),
//! [`worker`] (a worker's loop: one inference per batch, decoding, delivery to the sink),
//! [`overlap`] (the two threads of an overlapping worker, with their [`turns`]), [`report`] (what
//! telemetry and `bench` show). This file only declares and re-exports.

mod fairness;
mod feeds;
mod lanes;
mod model_sessions;
mod overlap;
mod plan;
mod report;
mod shared;
mod threads;
mod turns;
mod worker;

pub use lanes::ModelLane;
pub use plan::SchedulePlan;
pub use report::ScheduleReport;
pub use threads::Scheduler;

#[cfg(test)]
mod tests;
