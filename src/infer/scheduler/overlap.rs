//! An overlapping worker (the CPU backend's workers of many threads, where
//! [`Backend::overlaps_preprocessing`](crate::backend::Backend::overlaps_preprocessing) says so):
//! two threads with a session each that take turns (`super::turns`): one preprocesses its next
//! frame while the other's inference runs on the worker's cores, one inference at a time, frames
//! delivered in the order they were taken.
//!
//! Owns: [`Shared::run_overlapping`]. Must not: run two inferences of one worker at once, or
//! deliver a camera's frames out of order.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::feeds::Taken;
use super::model_sessions::WorkerSessions;
use super::shared::{Shared, POLL};
use super::turns::Turns;
use super::worker::WorkerState;
use crate::frame::Stage;
use crate::infer::step::{decode_frame, FrameError, PipelineError};
use crate::service::notify::LivenessHandle;

impl Shared {
    /// One of the two threads of overlapping worker `index` (see the module doc): takes one frame
    /// at a time, preprocesses it while the other thread's inference runs, then runs its
    /// inference and delivers it when `turns` says (in the order the two took frames).
    pub(super) fn run_overlapping(
        &self,
        index: usize,
        name: &str,
        liveness: &LivenessHandle,
        turns: &Turns,
    ) -> Result<(), PipelineError> {
        let WorkerSessions { mut models, mut per_track } = self.open_sessions(index, liveness)?;
        let mut work = WorkerState::default();
        let mut batch: Vec<Taken> = Vec::with_capacity(1);
        while !self.stop.load(Ordering::SeqCst) {
            let rung = self.doorbell.rung();
            let Some(ticket) = self.take_one(index, &mut batch, turns) else {
                self.doorbell.wait(rung, POLL);
                liveness.beat();
                continue;
            };
            liveness.enter(Stage::Infer);
            let taken = &batch[0];
            let (model, lane) = (&mut models[taken.lane], &self.lanes[taken.lane]);
            let started = Instant::now();
            let prepared = model.session.prepare(&taken.slot, turns.inference_ahead(ticket));
            let turn_wait_started = Instant::now();
            if !turns.wait_to_infer(ticket, &self.stop) {
                self.give_back(&mut batch);
                break;
            }
            let turn_wait = turn_wait_started.elapsed();
            let inferred = prepared.and_then(|()| model.session.infer());
            turns.inferred(ticket);
            if !turns.wait_to_deliver(ticket, &self.stop) {
                self.give_back(&mut batch);
                break;
            }
            // Decode parameters are adopted in delivery order, as one worker would: every frame
            // delivered after either thread reloaded them was decoded with them.
            model.decode.adopt_params(lane, name);
            let spec = lane.backend.spec();
            let decoder = &mut model.decode.decoder;
            let outcome = inferred.map_err(FrameError::Backend).and_then(|(outputs, backend_timings)| {
                decode_frame(decoder, spec, &taken.slot, outputs, backend_timings, &mut work.detections)
            });
            let delivered = work.deliver(taken, started, turn_wait, outcome, lane, self.sink.as_ref(), &mut per_track);
            turns.delivered(ticket);
            self.stats.count(1);
            self.give_back(&mut batch);
            liveness.beat();
            delivered?;
        }
        Ok(())
    }
}
