//! Fairness: which ready frames a worker takes, and the gathering of a batch.
//!
//! Owns: the rounds. A worker takes at most one frame per camera, starting after the camera served
//! last, skipping a camera with a frame in flight (an overlapping worker may take a camera's next
//! frame while it holds the previous one), all of one lane per batch, waiting up to
//! `engine.batch_timeout_ms` for more; a camera whose ring closed and drained is reported ended;
//! frames go back to their rings when done. Where a frame is admitted to inference or not, it is
//! here. Must not: run inference, or hold the feeds' lock while the sink is called.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::feeds::Taken;
use super::shared::Shared;
use super::turns::Turns;
use crate::sys::lock::lock;

impl Shared {
    /// Takes one ready frame for a thread of overlapping worker `worker`, round robin, with its
    /// ticket: the next frame of a camera whose previous one this worker holds, when the camera's
    /// ring has a slot left for the camera to fill; or a frame of a camera with none in flight,
    /// unless this worker holds a frame while another holds none (that one should take it: two
    /// cameras on one worker's cores while another worker's cores idle would halve the pair's
    /// rate). Tells the sink about cameras that ended.
    pub(super) fn take_one(&self, worker: usize, batch: &mut Vec<Taken>, turns: &Turns) -> Option<u64> {
        let mut ended = Vec::new();
        let mut ticket = None;
        {
            let mut feeds = lock(&self.feeds);
            let count = feeds.cameras.len();
            let start = feeds.next;
            let mine = feeds.held.get(worker).copied().unwrap_or(0);
            let another_idle = feeds.held.iter().enumerate().any(|(other, held)| other != worker && *held == 0);
            let may_take_new = mine == 0 || !another_idle;
            for offset in 0..count {
                let index = (start + offset) % count;
                let feed = &mut feeds.cameras[index];
                let free = (feed.in_flight == 0 && may_take_new)
                    || (feed.in_flight == 1 && feed.held_by == worker && feed.ring.slot_count() > 2);
                if !free || feed.ended {
                    continue;
                }
                if let Some(slot) = feed.ring.try_take_ready() {
                    batch.push(feeds.take(index, worker, slot));
                    ticket = Some(turns.issue());
                    break;
                } else if feed.in_flight == 0 && feed.ring.is_finished() {
                    feed.ended = true;
                    ended.push(Arc::clone(&feed.name));
                }
            }
        }
        for name in ended {
            self.sink.camera_ended(&name, &Ok(()));
        }
        ticket
    }

    /// Takes up to its lane's limit of frames in all, at most one per camera and all of the lane of
    /// the first one taken, round robin from where the last round stopped. Tells the sink about
    /// cameras whose ring has closed and drained.
    pub(super) fn gather(&self, worker: usize, batch: &mut Vec<Taken>, limits: &[usize]) {
        let mut ended = Vec::new();
        {
            let mut feeds = lock(&self.feeds);
            let count = feeds.cameras.len();
            let start = feeds.next;
            for offset in 0..count {
                if batch.first().is_some_and(|first| batch.len() >= limits[first.lane]) {
                    break;
                }
                let index = (start + offset) % count;
                let feed = &mut feeds.cameras[index];
                let other_lane = batch.first().is_some_and(|first| first.lane != feed.lane);
                if feed.in_flight > 0 || feed.ended || other_lane {
                    continue;
                }
                if let Some(slot) = feed.ring.try_take_ready() {
                    batch.push(feeds.take(index, worker, slot));
                } else if feed.ring.is_finished() {
                    feed.ended = true;
                    ended.push(Arc::clone(&feed.name));
                }
            }
        }
        for name in ended {
            self.sink.camera_ended(&name, &Ok(()));
        }
    }

    /// With `engine.batch_timeout_ms`, waits up to that long for other cameras' frames to fill a
    /// batch that has room left.
    pub(super) fn fill_within_timeout(&self, worker: usize, batch: &mut Vec<Taken>, limits: &[usize]) {
        let limit = batch.first().map_or(1, |first| limits[first.lane]);
        if self.plan.batch_timeout.is_zero() || batch.len() >= limit {
            return;
        }
        let deadline = Instant::now() + self.plan.batch_timeout;
        loop {
            let rung = self.doorbell.rung();
            self.gather(worker, batch, limits);
            let now = Instant::now();
            if batch.len() >= limit || now >= deadline || self.stop.load(Ordering::SeqCst) {
                return;
            }
            self.doorbell.wait(rung, deadline - now);
        }
    }

    /// Returns the slots to their rings and lets the cameras be served again.
    pub(super) fn give_back(&self, batch: &mut Vec<Taken>) {
        let mut feeds = lock(&self.feeds);
        for taken in batch.drain(..) {
            taken.ring.release(taken.slot);
            let Some(feed) = feeds.cameras.get_mut(taken.feed) else { continue };
            feed.in_flight = feed.in_flight.saturating_sub(1);
            let worker = feed.held_by;
            if let Some(held) = feeds.held.get_mut(worker) {
                *held = held.saturating_sub(1);
            }
        }
        drop(feeds);
        self.doorbell.ring();
    }
}
