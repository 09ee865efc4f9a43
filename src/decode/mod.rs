//! Raw model outputs → detections in source-frame pixels.
//!
//! Owns: the output decoders (SSD, YOLOv5, YOLOv8/11, end-to-end NMS, NMS-free YOLOv10/YOLO26, the
//! DETR family, NanoDet's GFL head, and classifiers' class scores in [`classify`]), score
//! thresholding, the class allow-list, per-class NMS, max detections, and mapping boxes back
//! through the resize geometry.
//! Must not: run models, read files, or know about MQTT.
//!
//! Every decoder turns its tensors into candidates (class, score, box in input-tensor pixels); a
//! candidate survives only if its score is at least `score_threshold`, its class is allowed, its box
//! is finite and still has an area once mapped to source pixels. The survivors go through greedy
//! per-class NMS in descending score order (skipped for `end2end`, `nmsfree` and `detr`, whose models
//! give one box per object), and
//! the first `max_detections` kept are the result, highest score first. NMS compares the boxes in
//! tensor space, as the model produced them, which is what reference implementations do.
//! Malformed outputs (wrong count, shape or length, invalid values) are a [`DecodeError`], never a panic.

pub mod classify;
mod detr;
mod end2end;
pub mod nanodet;
mod nms;
mod nms_free;
mod ssd;
mod tensor;
mod yolo;

pub use detr::{BOX_NAMES as DETR_BOX_NAMES, LOGIT_NAMES as DETR_LOGIT_NAMES};

use crate::config::{ClassScores, DecoderKind, ModelConfig};
use crate::detection::{BoundingBox, Detection, Labels};
use crate::model::{ModelOutputs, ModelSpec};
use crate::preprocess::ResizeGeometry;

/// How many label names an unknown-class error lists.
const EXAMPLE_LABELS: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The outputs do not have the count or shapes the decoder needs.
    #[error("the {decoder} decoder expects {expected}; the model gave {actual}")]
    Outputs { decoder: &'static str, expected: &'static str, actual: String },
    /// One output has the right shape but unusable contents.
    #[error("the {decoder} decoder: output `{tensor}` {message}")]
    Tensor { decoder: &'static str, tensor: String, message: String },
    /// `model.classes` names a label the label file does not have.
    #[error("`model.classes`: unknown label `{name}`; the label file has {count} labels, such as {examples}")]
    UnknownClass { name: String, count: usize, examples: String },
    /// The model scores another number of classes than the label file names: every name from the
    /// first difference on would be wrong.
    #[error(
        "`model.labels`: the label file names {labels} classes (ids 0 to {last}), but the {decoder} model scores \
         {model} classes: the labels are not this model's, and detections would carry wrong names. The bundled \
         coco_labels.txt follows COCO's 91 ids with gaps (for the bundled SSD model); a model trained on COCO's \
         80 classes needs its own 80 names, one per line in class order (the book: Bring your own model > YOLO)",
        last = labels.saturating_sub(1)
    )]
    LabelCount { decoder: &'static str, model: usize, labels: usize },
    /// An entry of a classifier's `groups` names no class of its label file.
    #[error("group `{group}`: `{entry}` {message}")]
    Group { group: String, entry: String, message: String },
}

/// What to decode and which detections to keep. Reloadable at run time (SIGHUP).
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeParams {
    pub kind: DecoderKind,
    /// Candidates scoring below this are ignored; a score equal to it is kept.
    pub score_threshold: f32,
    /// Boxes of one class overlapping a higher-scoring kept box by more than this IoU are suppressed.
    pub nms_iou: f32,
    pub max_detections: usize,
    /// Class ids to report; `None` reports every class.
    pub allowed_classes: Option<Vec<usize>>,
    /// How the `detr` decoder makes scores of its class outputs (the other decoders' models give
    /// scores).
    pub class_scores: ClassScores,
    /// Classes the label file names (its largest id + 1), which a model whose outputs say how
    /// many classes it scores (YOLO) must match; `None`: not checked.
    pub label_count: Option<usize>,
}

impl DecodeParams {
    /// Parameters for the outputs of `model` (its decoder and class scores, fixed while it is
    /// loaded) with the thresholds and class filter of `choices`, its config table (reloadable);
    /// `classes` names are resolved through `labels`, the model's label file.
    pub fn new(model: &ModelSpec, choices: &ModelConfig, labels: &Labels) -> Result<DecodeParams, DecodeError> {
        let allowed_classes = if choices.classes.is_empty() {
            None
        } else {
            let ids = choices
                .classes
                .iter()
                .map(|name| labels.id_of(name).ok_or_else(|| unknown_class(name, labels)))
                .collect::<Result<Vec<usize>, DecodeError>>()?;
            Some(ids)
        };
        Ok(DecodeParams {
            kind: model.decoder,
            score_threshold: choices.score_threshold,
            nms_iou: choices.nms_iou,
            max_detections: choices.max_detections,
            allowed_classes,
            class_scores: model.class_scores,
            label_count: Some(labels.len()),
        })
    }
}

fn unknown_class(name: &str, labels: &Labels) -> DecodeError {
    // Gap fillers (`class<id>`) are not names a user would look for, so they are not offered.
    let real_names =
        (0..labels.len()).map(|id| labels.name(id)).filter(|label| !is_gap_filler(label)).collect::<Vec<_>>();
    let wanted = name.to_lowercase();
    let similar = real_names
        .iter()
        .filter(|label| {
            let label = label.to_lowercase();
            label.contains(&wanted) || wanted.contains(&label)
        })
        .take(EXAMPLE_LABELS)
        .map(|label| format!("`{}`", label.escape_debug()))
        .collect::<Vec<_>>();
    let examples = if similar.is_empty() {
        real_names.iter().take(EXAMPLE_LABELS).map(|label| format!("`{}`", label.escape_debug())).collect::<Vec<_>>()
    } else {
        similar
    };
    DecodeError::UnknownClass { name: name.to_string(), count: real_names.len(), examples: examples.join(", ") }
}

fn is_gap_filler(label: &str) -> bool {
    label.strip_prefix("class").is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
}

/// One possible detection, before NMS.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Candidate {
    score: f32,
    class_id: usize,
    /// Position in the model's output order: ties in score keep that order, so results are reproducible.
    order: u32,
    /// Input-tensor pixels, used for NMS.
    tensor_box: BoundingBox,
    /// Source-frame pixels, clamped to the frame, reported.
    source_box: BoundingBox,
}

/// Applies the filters every decoder shares while candidates are collected.
struct CandidateSink<'a> {
    score_threshold: f32,
    /// Sorted allowed class ids; `None`: every class.
    allowed: Option<&'a [usize]>,
    geometry: &'a ResizeGeometry,
    candidates: &'a mut Vec<Candidate>,
}

impl CandidateSink<'_> {
    fn score_passes(&self, score: f32) -> bool {
        score.is_finite() && score >= self.score_threshold
    }

    /// Whether any of `scores` can pass the threshold: a scan without early exit, which the
    /// compiler vectorises, so that decoders skip the rows where nothing passes (almost all of
    /// them: an SSD frame has ~172 000 anchor-class scores and a handful above it).
    fn any_may_pass(&self, scores: &[f32]) -> bool {
        scores.iter().fold(false, |any, &score| any | (score >= self.score_threshold))
    }

    fn class_allowed(&self, class_id: usize) -> bool {
        self.allowed.is_none_or(|allowed| allowed.binary_search(&class_id).is_ok())
    }

    /// Keeps the candidate if it passes the threshold, the allow-list, and has an area in the source frame.
    fn offer(&mut self, class_id: usize, score: f32, tensor_box: BoundingBox) {
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
mod properties;
#[cfg(test)]
mod test_support;

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;
    use crate::config::Config;
    use std::path::Path;

    fn labels() -> Labels {
        Labels::parse("0 person\n1 bicycle\n2 car\n4 airplane\n17 dog\n", Path::new("labels.txt")).expect("labels")
    }

    /// The parameters of `config`'s `[model]`, as `run` makes them.
    fn params_of(config: &Config, labels: &Labels) -> Result<DecodeParams, DecodeError> {
        DecodeParams::new(&ModelSpec::from_config(config).expect("spec"), &config.model, labels)
    }

    #[test]
    fn the_parameters_resolve_class_names() {
        let mut config = Config::embedded_default().expect("embedded config");
        config.model.classes = vec!["dog".into(), "person".into()];
        let params = params_of(&config, &labels()).expect("params");
        assert_eq!(params.kind, config.model.decoder);
        assert_eq!(params.score_threshold, config.model.score_threshold);
        assert_eq!(params.nms_iou, config.model.nms_iou);
        assert_eq!(params.max_detections, config.model.max_detections);
        assert_eq!(params.allowed_classes, Some(vec![17, 0]));

        config.model.classes.clear();
        assert_eq!(params_of(&config, &labels()).expect("params").allowed_classes, None);
    }

    /// A reload's table changes the thresholds, never how the loaded model's outputs are read.
    #[test]
    fn the_decoder_and_class_scores_come_from_the_model_and_the_thresholds_from_the_table() {
        let mut config = Config::embedded_default().expect("embedded config");
        config.model.decoder = DecoderKind::Detr;
        config.model.class_scores = Some(ClassScores::Softmax);
        let model = ModelSpec::from_config(&config).expect("spec");
        let mut choices = Config::embedded_default().expect("embedded config").model;
        choices.score_threshold = 0.25;
        let params = DecodeParams::new(&model, &choices, &labels()).expect("params");
        assert_eq!((params.kind, params.class_scores), (DecoderKind::Detr, ClassScores::Softmax));
        assert_eq!(params.score_threshold, 0.25);
    }

    #[test]
    fn the_parameters_name_an_unknown_class_and_offer_real_ones() {
        let mut config = Config::embedded_default().expect("embedded config");
        config.model.classes = vec!["person".into(), "cars".into()];
        let message = params_of(&config, &labels()).expect_err("unknown").to_string();
        assert!(message.contains("`cars`"), "{message}");
        assert!(message.contains("`car`"), "{message}");

        config.model.classes = vec!["zebra".into()];
        let message = params_of(&config, &labels()).expect_err("unknown").to_string();
        assert!(message.contains("`zebra`") && message.contains("5 labels"), "{message}");
        assert!(message.contains("`person`, `bicycle`"), "{message}");
        assert!(!message.contains("class3"), "gap fillers are not offered: {message}");
    }

    /// A label that differs from what was asked only in a character nobody sees is shown escaped.
    #[test]
    fn an_unknown_class_shows_invisible_characters_of_similar_labels() {
        let mut config = Config::embedded_default().expect("embedded config");
        config.model.classes = vec!["person".into()];
        let labels = Labels::parse("person\u{200b}\ncar\n", std::path::Path::new("labels.txt")).unwrap();
        let message = params_of(&config, &labels).expect_err("unknown").to_string();
        assert!(message.contains("`person\\u{200b}`"), "{message}");
    }

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
