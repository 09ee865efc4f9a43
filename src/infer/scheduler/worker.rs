//! A worker's loop: it gathers a batch of one lane's ready frames (`super::fairness`), runs them as
//! one inference where the session batches (else one after another), decodes each frame's row and
//! hands the frame to the sink with its timings, its wait in the ring included; between batches it
//! adopts reloaded decode parameters and beats its liveness.
//!
//! Owns: [`Shared::run_worker`] and [`WorkerState`] (running a batch, delivering a frame). A frame
//! the preprocessor rejects is one bad frame, skipped; any other backend or decode failure ends the
//! worker. Must not: hold the feeds' lock while it infers.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::feeds::Taken;
use super::lanes::ModelLane;
use super::model_sessions::{ModelSession, WorkerSessions};
use super::shared::{Shared, POLL};
use crate::backend::BackendError;
use crate::detection::Detection;
use crate::frame::{FrameSlot, FrameTimings, Stage};
use crate::infer::per_track::PerTrackSessions;
use crate::infer::step::{decode_frame, process, FrameError, FrameSink, PipelineError};
use crate::model::ModelOutputs;
use crate::service::notify::LivenessHandle;

impl Shared {
    /// The loop of worker `index` (not overlapping): gathers a batch of one lane's frames, runs it
    /// as one inference (or one by one where the session takes one), hands each frame to the sink.
    pub(super) fn run_worker(&self, index: usize, name: &str, liveness: &LivenessHandle) -> Result<(), PipelineError> {
        let mut sessions = self.open_sessions(index, liveness)?;
        let mut work = WorkerState::default();
        let mut limits: Vec<usize> = sessions.models.iter().map(|model| model.limit).collect();
        let mut batch: Vec<Taken> = Vec::with_capacity(self.plan.max_batch);
        while !self.stop.load(Ordering::SeqCst) {
            for (model, lane) in sessions.models.iter_mut().zip(&self.lanes) {
                model.decode.adopt_params(lane, name);
            }
            let rung = self.doorbell.rung();
            self.gather(index, &mut batch, &limits);
            if batch.is_empty() {
                // Idle because no frame came: alive, not hung.
                self.doorbell.wait(rung, POLL);
                liveness.beat();
                continue;
            }
            self.fill_within_timeout(index, &mut batch, &limits);
            liveness.enter(Stage::Infer);
            let lane = batch[0].lane;
            let WorkerSessions { models, per_track } = &mut sessions;
            let outcome = work.run(&mut models[lane], per_track, &self.lanes[lane], &batch, self.sink.as_ref());
            self.stats.count(batch.len());
            self.give_back(&mut batch);
            liveness.beat();
            outcome?;
            // A session that swapped backends between frames (the CPU serving a model until its
            // engine took over) may take other batches from its next frame on.
            let now = models[lane].session.max_batch().min(self.plan.max_batch).max(1);
            if now != limits[lane] {
                limits[lane] = now;
                models[lane].limit = now;
                self.stats.max_batch.store(now, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}

/// A worker's reusable buffers, whichever model it runs.
#[derive(Default)]
pub(super) struct WorkerState {
    pub(super) detections: Vec<Detection>,
    /// One frame's share of batched outputs.
    row_outputs: ModelOutputs,
}

impl WorkerState {
    /// Runs the frames of `batch` (one inference when the session batches, else one after another),
    /// decodes each and hands it to the sink. A frame the preprocessor rejects is skipped with a
    /// warning; any other backend or decode failure ends the worker.
    fn run(
        &mut self,
        model: &mut ModelSession,
        per_track: &mut PerTrackSessions,
        lane: &ModelLane,
        batch: &[Taken],
        sink: &dyn FrameSink,
    ) -> Result<(), PipelineError> {
        let spec = lane.backend.spec();
        if batch.len() > 1 {
            let slots: Vec<&FrameSlot> = batch.iter().map(|taken| &taken.slot).collect();
            let started = Instant::now();
            match model.session.run_batch(&slots) {
                Ok((outputs, backend_timings)) => {
                    for (row, taken) in batch.iter().enumerate() {
                        let decoded = outputs
                            .row_into(row, batch.len(), &mut self.row_outputs)
                            .map_err(FrameError::Decode)
                            .and_then(|()| {
                                decode_frame(
                                    &mut model.decode.decoder,
                                    spec,
                                    &taken.slot,
                                    &self.row_outputs,
                                    backend_timings,
                                    &mut self.detections,
                                )
                            });
                        self.deliver(taken, started, Duration::ZERO, decoded, lane, sink, per_track)?;
                    }
                    return Ok(());
                }
                // One bad frame must not cost the others theirs: run them one by one below, so
                // that only it is skipped.
                Err(BackendError::Preprocess(_)) => {}
                Err(source) => return Err(PipelineError::Worker { source }),
            }
        }
        for taken in batch {
            let started = Instant::now();
            let outcome =
                process(&mut *model.session, &mut model.decode.decoder, spec, &taken.slot, &mut self.detections);
            self.deliver(taken, started, Duration::ZERO, outcome, lane, sink, per_track)?;
        }
        Ok(())
    }

    /// Hands a frame's outcome to the sink; `started` is when its preprocessing began, so the time
    /// it waited in its ring since the source published it, with `queued` (its wait for the
    /// inference turn, between preprocessing and inference), becomes the `wait` stage (and part of
    /// `total`, which runs from the hand-over to the message).
    #[allow(clippy::too_many_arguments, reason = "the frame, its outcome and where it goes; no struct groups them")]
    pub(super) fn deliver(
        &mut self,
        taken: &Taken,
        started: Instant,
        queued: Duration,
        outcome: Result<FrameTimings, FrameError>,
        lane: &ModelLane,
        sink: &dyn FrameSink,
        per_track: &mut PerTrackSessions,
    ) -> Result<(), PipelineError> {
        let camera = &*taken.name;
        match outcome {
            Ok(mut timings) => {
                lane.to_shared_ids(&mut self.detections);
                if let Some(ready) = taken.slot.ready_at() {
                    let wait = started.saturating_duration_since(ready) + queued;
                    timings.wait = Some(wait);
                    timings.total = timings.total.map(|total| total + wait);
                }
                log::debug!(
                    "camera {camera} frame {}: {timings:?} ({} detections)",
                    taken.slot.meta().sequence,
                    self.detections.len()
                );
                sink.frame(camera, &taken.slot, &self.detections, &timings, per_track);
                Ok(())
            }
            // A frame the preprocessor cannot take (odd size, truncated data) is one bad frame,
            // not a broken pipeline.
            Err(FrameError::Backend(BackendError::Preprocess(message))) => {
                log::warn!("camera {camera} frame {}: skipped: {message}", taken.slot.meta().sequence);
                Ok(())
            }
            Err(FrameError::Backend(source)) => Err(PipelineError::Worker { source }),
            Err(FrameError::Decode(message)) => Err(PipelineError::Decode { camera: camera.to_string(), message }),
        }
    }
}
