//! What the scheduler reports (telemetry `engine.scheduler`, `bench`): the workers, the cameras, the
//! batch sizes run and the contexts' memory; and the counters the workers keep for it.
//!
//! Owns: [`ScheduleReport`] and [`BatchStats`]. Must not: run anything.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::backend::MemoryReport;

/// What the scheduler reports (telemetry `engine.scheduler`, `bench`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ScheduleReport {
    pub workers: usize,
    pub cameras: usize,
    /// Frames one inference may take: `engine.max_batch`, or less where the model or backend
    /// allows less (1 for a model with a fixed batch of 1).
    pub max_batch: usize,
    /// Inferences run, and the frames in them.
    pub batches: u64,
    pub frames: u64,
    /// Inferences by batch size (only sizes that occurred).
    pub batch_sizes: BTreeMap<usize, u64>,
    pub memory: MemoryReport,
}

/// The batch sizes the workers ran, counted as they go.
pub(super) struct BatchStats {
    /// Inferences by batch size − 1.
    pub(super) by_size: Vec<AtomicU64>,
    /// The smallest batch limit a worker's session allows (starts at the plan's), or the limit
    /// of a session whose backend changed last (an engine that took over from the CPU).
    pub(super) max_batch: AtomicUsize,
}

impl BatchStats {
    /// Counters for batches of up to `max_batch` frames.
    pub(super) fn new(max_batch: usize) -> BatchStats {
        BatchStats {
            by_size: (0..max_batch).map(|_| AtomicU64::new(0)).collect(),
            max_batch: AtomicUsize::new(max_batch),
        }
    }

    /// One inference of `frames` frames ran.
    pub(super) fn count(&self, frames: usize) {
        self.by_size[frames - 1].fetch_add(1, Ordering::Relaxed);
    }

    /// A worker's session of some model takes at most `limit` frames.
    pub(super) fn limit_to(&self, limit: usize) {
        self.max_batch.fetch_min(limit, Ordering::Relaxed);
    }

    /// Inferences by batch size (only sizes that occurred).
    pub(super) fn sizes(&self) -> BTreeMap<usize, u64> {
        self.by_size
            .iter()
            .enumerate()
            .map(|(index, count)| (index + 1, count.load(Ordering::Relaxed)))
            .filter(|(_, count)| *count > 0)
            .collect()
    }

    /// The smallest batch limit of any worker's session so far.
    pub(super) fn max_batch(&self) -> usize {
        self.max_batch.load(Ordering::Relaxed)
    }
}
