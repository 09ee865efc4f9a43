//! Which session a worker runs each model on: a session of every detector lane and of every
//! per-track model, opened on the worker's own thread for its seat (on the GPU: the worker's stream and
//! arena), with the worker's decoder of each lane and the generation of the decode parameters it
//! has adopted.
//!
//! Owns: [`WorkerSessions`], [`ModelSession`], [`LaneDecoder`] and opening them. Must not: take
//! frames or talk to the sink.

use std::sync::Arc;

use super::lanes::ModelLane;
use super::shared::Shared;
use crate::backend::{InferenceSession, WorkerSeat};
use crate::decode::Decoder;
use crate::infer::per_track::PerTrackSessions;
use crate::infer::step::PipelineError;
use crate::service::notify::LivenessHandle;

/// A worker's sessions of every model: one per detector lane, in lane order, and of every
/// per-track model, which it lends the sink with each frame.
pub(super) struct WorkerSessions {
    pub(super) models: Vec<ModelSession>,
    pub(super) per_track: PerTrackSessions,
}

/// One worker's state for one model: its session (on the GPU its execution context, created on
/// the worker's thread), its decoder, and the most frames the session takes at once.
pub(super) struct ModelSession {
    pub(super) session: Box<dyn InferenceSession>,
    pub(super) decode: LaneDecoder,
    pub(super) limit: usize,
}

/// A worker's decoder for one model, with the generation of the decode parameters it has.
pub(super) struct LaneDecoder {
    pub(super) decoder: Decoder,
    pub(super) params_seen: u64,
}

impl ModelSession {
    /// Opens a session of `model` on this thread for the worker in `seat`; batches hold at most
    /// `max_batch` frames and what the session takes.
    pub(super) fn open(model: &ModelLane, max_batch: usize, seat: WorkerSeat) -> Result<ModelSession, PipelineError> {
        let session = model.backend.new_worker_session(seat).map_err(|source| PipelineError::Worker { source })?;
        let limit = max_batch.min(session.max_batch()).max(1);
        let (params_seen, params) = model.params();
        Ok(ModelSession { session, decode: LaneDecoder { decoder: Decoder::new(params), params_seen }, limit })
    }
}

impl LaneDecoder {
    /// Adopts `model`'s decode parameters if they changed since, saying so in the log as `worker`.
    pub(super) fn adopt_params(&mut self, model: &ModelLane, worker: &str) {
        let Some((generation, params)) = model.params_since(self.params_seen) else { return };
        self.params_seen = generation;
        self.decoder.set_params(params);
        log::info!("{worker}: reloaded thresholds and class filter");
    }
}

impl Shared {
    /// A session of every lane and of every per-track model for worker `index`, opened on this thread.
    pub(super) fn open_sessions(
        &self,
        index: usize,
        liveness: &LivenessHandle,
    ) -> Result<WorkerSessions, PipelineError> {
        // All created here on the worker's thread (on the GPU: on its one stream, their contexts
        // on its one arena), each on the worker's seat: its share of the cores applies to every
        // model's session.
        let seat = WorkerSeat { index, workers: self.plan.workers };
        let mut models = Vec::with_capacity(self.lanes.len());
        for lane in &self.lanes {
            let model = ModelSession::open(lane, self.plan.max_batch, seat)?;
            liveness.beat();
            self.stats.limit_to(model.limit);
            models.push(model);
        }
        let per_track = PerTrackSessions::open(Arc::clone(&self.per_track), seat)
            .map_err(|source| PipelineError::Worker { source })?;
        liveness.beat();
        Ok(WorkerSessions { models, per_track })
    }
}
