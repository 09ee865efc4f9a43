//! A worker's sessions of every per-track model, and running one model on crops of the frame the
//! worker holds: as many crops per inference as the model's session takes.
//!
//! Owns: [`PerTrackSessions`], created on the worker's thread on its seat like its detectors'
//! sessions (on the GPU: the same stream and arena), which the sink borrows for one frame. Must
//! not: choose tracks or keep answers (`super::camera`).

use std::sync::Arc;

use super::kind::TrackAnswer;
use super::lane::PerTrackLane;
use crate::backend::{BackendError, InferenceSession, WorkerSeat};
use crate::frame::FrameSlot;
use crate::preprocess::Roi;

/// One worker's sessions of every per-track model, in the order of its lanes.
pub struct PerTrackSessions {
    lanes: Arc<[PerTrackLane]>,
    sessions: Vec<Box<dyn InferenceSession>>,
}

impl PerTrackSessions {
    /// Opens a session of every lane on this thread for the worker in `seat`.
    pub fn open(lanes: Arc<[PerTrackLane]>, seat: WorkerSeat) -> Result<PerTrackSessions, BackendError> {
        let sessions = lanes.iter().map(|lane| lane.backend.new_worker_session(seat)).collect::<Result<_, _>>()?;
        Ok(PerTrackSessions { lanes, sessions })
    }

    /// None: for sinks and tests without per-track models.
    pub fn none() -> PerTrackSessions {
        PerTrackSessions { lanes: Arc::from(Vec::new()), sessions: Vec::new() }
    }

    /// The lane of the model named `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.lanes.iter().position(|lane| lane.name == name)
    }

    /// Runs model `index` on `rois` of the frame in `slot` (as many per inference as its session
    /// takes) and appends one answer per ROI to `out` (`None`: no answer for that crop); `scores`
    /// are the detection scores of the ROIs' tracks, one per ROI.
    pub fn run(
        &mut self,
        index: usize,
        slot: &FrameSlot,
        rois: &[Roi],
        scores: &[f32],
        out: &mut Vec<Option<Box<dyn TrackAnswer>>>,
    ) -> Result<(), BackendError> {
        let (Some(lane), Some(session)) = (self.lanes.get(index), self.sessions.get_mut(index)) else {
            return Err(BackendError::Inference(format!("no per-track model {index}")));
        };
        let limit = session.max_batch().max(1);
        if rois.len() != scores.len() {
            return Err(BackendError::Inference(format!(
                "models.{}: {} crops with {} scores",
                lane.name,
                rois.len(),
                scores.len()
            )));
        }
        for (chunk, scores) in rois.chunks(limit).zip(scores.chunks(limit)) {
            let (outputs, _) = session.run_regions(slot, chunk)?;
            lane.kind
                .read(outputs, scores, out)
                .map_err(|message| BackendError::Inference(format!("models.{}: {message}", lane.name)))?;
        }
        Ok(())
    }
}
