//! Decoding one model's outputs, frame after frame: the decoder its kind names, then NMS.
//!
//! Every decoder turns its tensors into candidates (class, score, box in input-tensor pixels); a
//! candidate survives only if its score is at least `score_threshold`, its class is allowed, its box
//! is finite and still has an area once mapped to source pixels. The survivors go through greedy
//! per-class NMS in descending score order (skipped for `end2end`, `nmsfree` and `detr`, whose models
//! give one box per object), and
//! the first `max_detections` kept are the result, highest score first. NMS compares the boxes in
//! tensor space, as the model produced them, which is what reference implementations do.
//!
//! Owns: [`Decoder`] (the dispatch to each kind's decoder, its scratch buffers). Must not: run
//! models or read files.

use super::candidate::{Candidate, CandidateSink};
use super::error::DecodeError;
use super::params::DecodeParams;
use super::{detr, end2end, nanodet, nms, nms_free, ssd, yolo};
use crate::config::DecoderKind;
use crate::detection::Detection;
use crate::model::ModelOutputs;
use crate::preprocess::ResizeGeometry;

/// Decodes one model's outputs frame after frame, reusing its scratch buffers.
#[derive(Debug)]
pub struct Decoder {
    params: DecodeParams,
    /// `allowed_classes`, sorted for binary search (any id, however large, costs one entry).
    allowed: Option<Vec<usize>>,
    candidates: Vec<Candidate>,
    /// Best (score, class) per anchor for channel-major YOLOv8 outputs.
    best_per_anchor: Vec<(f32, usize)>,
    /// One side's bin weights for NanoDet's distance distributions.
    bin_weights: Vec<f32>,
}

impl Decoder {
    pub fn new(params: DecodeParams) -> Decoder {
        Decoder {
            allowed: sorted_class_ids(&params),
            params,
            candidates: Vec::new(),
            best_per_anchor: Vec::new(),
            bin_weights: Vec::new(),
        }
    }

    /// Replaces thresholds and filters (the decoder kind too); scratch buffers are kept.
    pub fn set_params(&mut self, params: DecodeParams) {
        self.allowed = sorted_class_ids(&params);
        self.params = params;
    }

    pub fn params(&self) -> &DecodeParams {
        &self.params
    }

    /// Decodes `outputs` into `out` (cleared first), highest score first.
    ///
    /// `input_width`/`input_height`: the model input tensor size; `geometry` maps tensor pixels to
    /// source pixels.
    pub fn decode(
        &mut self,
        outputs: &ModelOutputs,
        input_width: u32,
        input_height: u32,
        geometry: &ResizeGeometry,
        out: &mut Vec<Detection>,
    ) -> Result<(), DecodeError> {
        out.clear();
        self.candidates.clear();
        let mut sink = CandidateSink {
            score_threshold: self.params.score_threshold,
            allowed: self.allowed.as_deref(),
            geometry,
            candidates: &mut self.candidates,
        };
        match self.params.kind {
            DecoderKind::Ssd => ssd::collect(outputs, input_width as f32, input_height as f32, &mut sink)?,
            DecoderKind::Yolov5 => yolo::collect_v5(outputs, self.params.label_count, &mut sink)?,
            DecoderKind::Yolov8 => {
                yolo::collect_v8(outputs, self.params.label_count, &mut self.best_per_anchor, &mut sink)?
            }
            DecoderKind::End2end => end2end::collect(outputs, &mut sink)?,
            DecoderKind::NmsFree => nms_free::collect(outputs, &mut sink)?,
            DecoderKind::Detr => {
                detr::collect(outputs, self.params.class_scores, input_width as f32, input_height as f32, &mut sink)?
            }
            DecoderKind::Nanodet => nanodet::collect(
                outputs,
                self.params.label_count,
                input_width,
                input_height,
                &mut self.bin_weights,
                &mut sink,
            )?,
        }
        let nms_iou = match self.params.kind {
            DecoderKind::End2end | DecoderKind::NmsFree | DecoderKind::Detr => None,
            DecoderKind::Ssd | DecoderKind::Yolov5 | DecoderKind::Yolov8 | DecoderKind::Nanodet => {
                Some(self.params.nms_iou)
            }
        };
        let kept = nms::select(&mut self.candidates, nms_iou, self.params.max_detections);
        out.extend(kept.iter().map(|c| Detection { class_id: c.class_id, score: c.score, bbox: c.source_box }));
        Ok(())
    }
}

fn sorted_class_ids(params: &DecodeParams) -> Option<Vec<usize>> {
    params.allowed_classes.as_ref().map(|ids| {
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        sorted
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::test_support::*;

    #[test]
    fn set_params_changes_threshold_and_allow_list_of_any_ids() {
        let outputs =
            yolov5_outputs(&[[320.0, 320.0, 64.0, 64.0, 1.0, 0.6, 0.1], [100.0, 100.0, 20.0, 20.0, 1.0, 0.1, 0.9]]);
        let mut decoder = Decoder::new(params(DecoderKind::Yolov5));
        let mut out = Vec::new();
        decoder.decode(&outputs, 640, 640, &identity(640), &mut out).expect("decode");
        assert_eq!(out.len(), 2);

        decoder.set_params(DecodeParams { score_threshold: 0.7, ..params(DecoderKind::Yolov5) });
        decoder.decode(&outputs, 640, 640, &identity(640), &mut out).expect("decode");
        assert_eq!(classes(&out), [1]);

        decoder.set_params(DecodeParams { allowed_classes: Some(vec![usize::MAX, 0]), ..params(DecoderKind::Yolov5) });
        assert_eq!(decoder.params().allowed_classes, Some(vec![usize::MAX, 0]));
        decoder.decode(&outputs, 640, 640, &identity(640), &mut out).expect("decode");
        assert_eq!(classes(&out), [0]);
    }

    #[test]
    fn steady_state_reuses_buffers() {
        let outputs =
            yolov5_outputs(&[[320.0, 320.0, 64.0, 64.0, 1.0, 0.6, 0.1], [100.0, 100.0, 20.0, 20.0, 1.0, 0.1, 0.9]]);
        let mut decoder = Decoder::new(params(DecoderKind::Yolov5));
        let mut out = Vec::new();
        decoder.decode(&outputs, 640, 640, &identity(640), &mut out).expect("decode");
        let (out_buffer, scratch) = (out.as_ptr(), decoder.candidates.as_ptr());
        decoder.decode(&outputs, 640, 640, &identity(640), &mut out).expect("decode");
        assert_eq!((out.as_ptr(), decoder.candidates.as_ptr()), (out_buffer, scratch));
        assert_eq!(out.len(), 2);
    }
}
