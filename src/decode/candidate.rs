//! Candidates: the detections a decoder finds, before NMS, and the filters every decoder applies
//! while it collects them.
//!
//! Owns: [`Candidate`] and [`CandidateSink`] (score threshold, class allow-list, a finite box with
//! an area once mapped to source pixels). Must not: read tensors (the decoders do) or suppress
//! overlaps (`super::nms` does).

use crate::detection::BoundingBox;
use crate::preprocess::ResizeGeometry;

/// One possible detection, before NMS.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Candidate {
    pub(super) score: f32,
    pub(super) class_id: usize,
    /// Position in the model's output order: ties in score keep that order, so results are reproducible.
    pub(super) order: u32,
    /// Input-tensor pixels, used for NMS.
    pub(super) tensor_box: BoundingBox,
    /// Source-frame pixels, clamped to the frame, reported.
    pub(super) source_box: BoundingBox,
}

/// Applies the filters every decoder shares while candidates are collected.
pub(super) struct CandidateSink<'a> {
    pub(super) score_threshold: f32,
    /// Sorted allowed class ids; `None`: every class.
    pub(super) allowed: Option<&'a [usize]>,
    pub(super) geometry: &'a ResizeGeometry,
    pub(super) candidates: &'a mut Vec<Candidate>,
}

impl CandidateSink<'_> {
    pub(super) fn score_passes(&self, score: f32) -> bool {
        score.is_finite() && score >= self.score_threshold
    }

    /// Whether any of `scores` can pass the threshold: a scan without early exit, which the
    /// compiler vectorises, so that decoders skip the rows where nothing passes (almost all of
    /// them: an SSD frame has ~172 000 anchor-class scores and a handful above it).
    pub(super) fn any_may_pass(&self, scores: &[f32]) -> bool {
        scores.iter().fold(false, |any, &score| any | (score >= self.score_threshold))
    }

    pub(super) fn class_allowed(&self, class_id: usize) -> bool {
        self.allowed.is_none_or(|allowed| allowed.binary_search(&class_id).is_ok())
    }

    /// Keeps the candidate if it passes the threshold, the allow-list, and has an area in the source frame.
    pub(super) fn offer(&mut self, class_id: usize, score: f32, tensor_box: BoundingBox) {
        if !self.score_passes(score) || !self.class_allowed(class_id) {
            return;
        }
        let finite = [tensor_box.x1, tensor_box.y1, tensor_box.x2, tensor_box.y2].iter().all(|v| v.is_finite());
        if !finite {
            return;
        }
        let source_box = BoundingBox {
            x1: self.geometry.to_source_x(tensor_box.x1),
            y1: self.geometry.to_source_y(tensor_box.y1),
            x2: self.geometry.to_source_x(tensor_box.x2),
            y2: self.geometry.to_source_y(tensor_box.y2),
        };
        if !(source_box.x2 > source_box.x1 && source_box.y2 > source_box.y1) {
            return;
        }
        let order = u32::try_from(self.candidates.len()).unwrap_or(u32::MAX);
        self.candidates.push(Candidate { score, class_id, order, tensor_box, source_box });
    }
}
