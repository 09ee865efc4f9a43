//! What `selftest` is asked: how many inferences to time and how, where the images come from,
//! whether to time engine builds.
//!
//! Owns: [`SelftestOptions`] and their defaults. Must not: run anything.

use std::path::PathBuf;
use std::time::Duration;

/// What to time, and where the images come from.
#[derive(Debug, Clone, PartialEq)]
pub struct SelftestOptions {
    /// Inferences timed back to back.
    pub runs: usize,
    /// Inferences timed with [`pause`](Self::pause) before each.
    pub paused_runs: usize,
    pub pause: Duration,
    /// Image file or directory; default: the first `images` camera's, else the bundled samples.
    pub images: Option<PathBuf>,
    /// Time a cold and a warm engine build even when the engine is cached.
    pub rebuild: bool,
}

impl Default for SelftestOptions {
    fn default() -> Self {
        SelftestOptions { runs: 200, paused_runs: 50, pause: Duration::from_millis(200), images: None, rebuild: false }
    }
}
