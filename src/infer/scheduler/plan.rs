//! How the frames of all cameras are run: how many inference workers, how many frames one
//! inference takes, how long a worker waits for more cameras' frames.
//!
//! Owns: [`SchedulePlan`], from the config and what the backend wants. Must not: start anything.

use std::time::Duration;

use crate::backend::Backend;
use crate::config::Config;

/// How the frames of all cameras are run: workers, batch size, batch wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulePlan {
    /// Inference workers, each with its own session (at least 1).
    pub workers: usize,
    /// Most frames one inference takes (at least 1); the session may allow fewer.
    pub max_batch: usize,
    /// Longest wait for more cameras' frames once one is ready.
    pub batch_timeout: Duration,
}

impl SchedulePlan {
    /// The plan the config asks for, on `backend` (which says how many workers it wants for
    /// `cameras` cameras).
    pub fn new(config: &Config, backend: &dyn Backend, cameras: usize) -> SchedulePlan {
        SchedulePlan {
            workers: backend.inference_workers(cameras).max(1),
            max_batch: config.engine.max_batch.get(),
            batch_timeout: config.engine.batch_timeout(),
        }
    }
}
