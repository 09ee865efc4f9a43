//! What the workers of one scheduler share: the models, the sink, the stop flag, the plan, the
//! cameras (`super::feeds`), the doorbell every camera's ring rings, and the batch counters.
//!
//! Owns: [`Shared`] and whether a worker overlaps. Must not: run anything itself (each job's file
//! adds its part of `Shared`'s methods).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::feeds::Feeds;
use super::lanes::ModelLane;
use super::plan::SchedulePlan;
use super::report::BatchStats;
use crate::backend::WorkerSeat;
use crate::frame::Doorbell;
use crate::infer::per_track::PerTrackLane;
use crate::infer::step::FrameSink;

/// How often an idle worker looks at the stop flag and beats.
pub(super) const POLL: Duration = Duration::from_millis(100);

/// What the workers share.
pub(super) struct Shared {
    /// Lane 0 serves cameras no other lane lists.
    pub(super) lanes: Vec<ModelLane>,
    /// The per-track models: every worker holds a session of each and lends them to the sink
    /// with every frame ([`FrameSink::frame`]).
    pub(super) per_track: Arc<[PerTrackLane]>,
    pub(super) sink: Arc<dyn FrameSink>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) plan: SchedulePlan,
    pub(super) feeds: Mutex<Feeds>,
    pub(super) doorbell: Arc<Doorbell>,
    pub(super) stats: BatchStats,
}

impl Shared {
    /// Whether worker `seat` runs two sessions that take turns: where every lane's backend
    /// overlaps preprocessing with inference.
    pub(super) fn overlaps(&self, seat: WorkerSeat) -> bool {
        self.lanes.iter().all(|lane| lane.backend.overlaps_preprocessing(seat))
    }

    /// Sessions of each model the workers hold: one per worker, two per overlapping one.
    pub(super) fn sessions(&self) -> usize {
        let workers = self.plan.workers;
        (0..workers).map(|index| if self.overlaps(WorkerSeat { index, workers }) { 2 } else { 1 }).sum()
    }
}
