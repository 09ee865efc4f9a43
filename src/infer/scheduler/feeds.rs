//! The cameras as the workers see them: each camera's ring, its lane, its frames in flight and
//! which worker holds them, and where the next round starts.
//!
//! Owns: [`Feeds`], [`Feed`] and [`Taken`] (a frame a worker took, with where it goes back). Must
//! not: choose frames (`super::fairness` does).

use std::sync::Arc;

use crate::frame::{FrameRing, FrameSlot};

#[derive(Default)]
pub(super) struct Feeds {
    pub(super) cameras: Vec<Feed>,
    /// Where the next round starts: after the camera served last.
    pub(super) next: usize,
    /// Frames in each worker's hands.
    pub(super) held: Vec<usize>,
}

impl Feeds {
    /// `slot`, the ready frame of camera `index`, taken by `worker`: counted in flight, and the
    /// round robin moves past the camera.
    pub(super) fn take(&mut self, index: usize, worker: usize, slot: FrameSlot) -> Taken {
        let feed = &mut self.cameras[index];
        feed.in_flight += 1;
        feed.held_by = worker;
        let taken =
            Taken { feed: index, lane: feed.lane, name: Arc::clone(&feed.name), ring: Arc::clone(&feed.ring), slot };
        if let Some(held) = self.held.get_mut(worker) {
            *held += 1;
        }
        self.next = (index + 1) % self.cameras.len();
        taken
    }
}

/// One camera as the workers see it.
pub(super) struct Feed {
    pub(super) name: Arc<str>,
    pub(super) ring: Arc<FrameRing>,
    /// Its detector's lane.
    pub(super) lane: usize,
    /// Frames of this camera in a worker's hands: at most one, or two in the hands of one
    /// overlapping worker (which delivers them in the order it took them).
    pub(super) in_flight: usize,
    /// The worker that took the frame in flight last.
    pub(super) held_by: usize,
    /// Its ring closed and drained, and the sink was told.
    pub(super) ended: bool,
}

/// A frame a worker took, with where it goes back.
pub(super) struct Taken {
    pub(super) feed: usize,
    pub(super) lane: usize,
    pub(super) name: Arc<str>,
    pub(super) ring: Arc<FrameRing>,
    pub(super) slot: FrameSlot,
}
