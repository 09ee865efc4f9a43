//! Classifiers on detections as the inference workers run them (`[models.<name>]` with
//! `kind = "classifier"`): each worker's sessions of every classifier, and running one
//! classifier on crops of the frame the worker holds.
//!
//! Owns: [`ClassifierLane`] (a classifier's backend, labels, how its scores read and the groups
//! it answers with) and
//! [`Classifiers`], a worker's sessions of every lane, created on its thread on its seat like its
//! detectors' (on the GPU: the same stream and arena), which the sink borrows for one frame.
//! Must not: choose which tracks to classify (`crate::track::crop_plan`), keep results, or
//! publish.

use std::sync::Arc;

use crate::backend::{Backend, BackendError, InferenceSession, WorkerSeat};
use crate::config::ClassScores;
use crate::decode::classify::{classify, ClassGroups, Classification};
use crate::detection::Labels;
use crate::frame::FrameSlot;
use crate::preprocess::Roi;

/// A classifier the workers run: its `[models.<name>]` name, backend, labels and scores.
pub struct ClassifierLane {
    pub name: String,
    pub backend: Arc<dyn Backend>,
    pub labels: Labels,
    pub scores: ClassScores,
    /// The coarse classes it answers instead of its labels (`groups`), if any.
    pub groups: Option<ClassGroups>,
}

/// One crop's answer: the classifier's label and its score in 0..1.
#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    pub label: String,
    pub score: f32,
}

/// One worker's sessions of every classifier, in the order of its lanes.
pub struct Classifiers {
    lanes: Arc<[ClassifierLane]>,
    sessions: Vec<Box<dyn InferenceSession>>,
    rows: Vec<Option<Classification>>,
    /// Scratch space for grouping a row's scores.
    group_scores: Vec<f32>,
}

impl Classifiers {
    /// Opens a session of every lane on this thread for the worker in `seat`.
    pub fn open(lanes: Arc<[ClassifierLane]>, seat: WorkerSeat) -> Result<Classifiers, BackendError> {
        let sessions = lanes.iter().map(|lane| lane.backend.new_worker_session(seat)).collect::<Result<_, _>>()?;
        Ok(Classifiers { lanes, sessions, rows: Vec::new(), group_scores: Vec::new() })
    }

    /// None: for sinks and tests without classifiers.
    pub fn none() -> Classifiers {
        Classifiers { lanes: Arc::from(Vec::new()), sessions: Vec::new(), rows: Vec::new(), group_scores: Vec::new() }
    }

    /// The classifiers' names, in lane order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.lanes.iter().map(|lane| lane.name.as_str())
    }

    /// Runs classifier `index` on `rois` of the frame in `slot` (as many per inference as its
    /// session takes) and appends one answer per ROI to `out` (`None`: scores that were not numbers).
    pub fn run(
        &mut self,
        index: usize,
        slot: &FrameSlot,
        rois: &[Roi],
        out: &mut Vec<Option<Label>>,
    ) -> Result<(), BackendError> {
        let (Some(lane), Some(session)) = (self.lanes.get(index), self.sessions.get_mut(index)) else {
            return Err(BackendError::Inference(format!("no classifier {index}")));
        };
        let limit = session.max_batch().max(1);
        for chunk in rois.chunks(limit) {
            let (outputs, _) = session.run_regions(slot, chunk)?;
            self.rows.clear();
            let groups = lane.groups.as_ref();
            classify(
                outputs,
                chunk.len(),
                lane.labels.len(),
                lane.scores,
                groups,
                &mut self.group_scores,
                &mut self.rows,
            )
            .map_err(|e| BackendError::Inference(format!("models.{}: {e}", lane.name)))?;
            out.extend(self.rows.iter().map(|row| {
                row.map(|class| {
                    let label = match groups {
                        Some(groups) => groups.name(class.class_id).to_string(),
                        None => lane.labels.name(class.class_id).into_owned(),
                    };
                    Label { label, score: class.score }
                })
            }));
        }
        Ok(())
    }
}
