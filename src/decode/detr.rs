//! The DETR family (RT-DETR, D-FINE, RF-DETR, DETR): boxes `[1,Q,4]` (cx,cy,w,h in 0..1 of the
//! input) and class outputs `[1,Q,C]` per query, turned into scores as [`ClassScores`] says.
//!
//! Owns: finding the two tensors (by the names the exporters give them, else by shape) and turning
//! each query's best class into one candidate. Sigmoid scores are compared in logit space, so a
//! query costs one sigmoid, not one per class. Must not: run NMS — each query is one object by
//! construction (set prediction); threshold, allow-list and `max_detections` still apply.

use crate::config::ClassScores;
use crate::model::{ModelOutputs, OutputTensor};

use super::candidate::CandidateSink;
use super::error::DecodeError;
use super::tensor::{matrix, matrix_dims, unexpected};
use super::yolo::{best_class, centre_box};

const DECODER: &str = "detr";
const EXPECTED: &str = "two outputs, boxes [1,Q,4] (cx,cy,w,h in 0..1; named `pred_boxes`, `boxes` or `dets`) \
                        and class logits [1,Q,C] (named `logits`, `pred_logits`, `labels` or `scores`)";
/// Output names of the boxes in the exports of Hugging Face (`pred_boxes`), the RT-DETR and D-FINE
/// repositories and RF-DETR (`dets`).
pub const BOX_NAMES: [&str; 3] = ["pred_boxes", "boxes", "dets"];
/// Output names of the class logits in the same exports.
pub const LOGIT_NAMES: [&str; 4] = ["logits", "pred_logits", "labels", "scores"];

fn find(outputs: &ModelOutputs) -> Option<(&OutputTensor, &OutputTensor)> {
    let named = |names: &[&str]| names.iter().find_map(|name| outputs.by_name(name));
    if let (Some(boxes), Some(logits)) = (named(&BOX_NAMES), named(&LOGIT_NAMES)) {
        return Some((boxes, logits));
    }
    let has_box_columns = |tensor: &OutputTensor| matrix_dims(tensor).is_some_and(|(_, cols)| cols == 4);
    match outputs.tensors.as_slice() {
        [first, second] if has_box_columns(first) && !has_box_columns(second) => Some((first, second)),
        [first, second] if has_box_columns(second) && !has_box_columns(first) => Some((second, first)),
        _ => None,
    }
}

fn sigmoid(logit: f32) -> f32 {
    1.0 / (1.0 + (-logit).exp())
}

/// The logit whose sigmoid is `probability` (±inf at 1 and 0: then every or no finite logit passes).
fn logit(probability: f32) -> f32 {
    (probability / (1.0 - probability)).ln()
}

pub(super) fn collect(
    outputs: &ModelOutputs,
    scores: ClassScores,
    input_width: f32,
    input_height: f32,
    sink: &mut CandidateSink<'_>,
) -> Result<(), DecodeError> {
    let (boxes, logits) = find(outputs).ok_or_else(|| unexpected(DECODER, EXPECTED, outputs))?;
    let (Some(boxes), Some(logits)) = (matrix(DECODER, boxes)?, matrix(DECODER, logits)?) else {
        return Err(unexpected(DECODER, EXPECTED, outputs));
    };
    let min_columns = if scores == ClassScores::Softmax { 2 } else { 1 };
    if boxes.cols != 4 || logits.rows != boxes.rows || logits.cols < min_columns {
        return Err(unexpected(DECODER, EXPECTED, outputs));
    }
    let logit_threshold = logit(sink.score_threshold);
    for (query_box, row) in boxes.data.chunks_exact(4).zip(logits.data.chunks_exact(logits.cols)) {
        let (class_id, score) = match scores {
            ClassScores::Probabilities => best_class(row),
            ClassScores::Sigmoid => {
                let (class_id, best) = best_class(row);
                // NaN and logits under the threshold's logit cannot pass: skip the exp.
                if best.is_nan() || best < logit_threshold {
                    continue;
                }
                (class_id, sigmoid(best))
            }
            ClassScores::Softmax => {
                let (classes, _no_object) = row.split_at(row.len() - 1);
                let (class_id, best) = best_class(classes);
                let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let sum = row.iter().map(|&value| (value - max).exp()).sum::<f32>();
                (class_id, (best - max).exp() / sum)
            }
        };
        let &[cx, cy, width, height] = query_box else { continue };
        let tensor_box = centre_box(cx * input_width, cy * input_height, width * input_width, height * input_height);
        sink.offer(class_id, score, tensor_box);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DecoderKind;
    use crate::decode::decoder::Decoder;
    use crate::decode::params::DecodeParams;
    use crate::decode::test_support::*;
    use crate::detection::{BoundingBox, Detection};

    fn outputs(names: [&str; 2], queries: &[([f32; 4], Vec<f32>)]) -> ModelOutputs {
        let classes = queries.first().map_or(1, |(_, logits)| logits.len());
        let boxes = queries.iter().flat_map(|(b, _)| *b).collect();
        let logits = queries.iter().flat_map(|(_, l)| l.clone()).collect();
        ModelOutputs {
            tensors: vec![
                OutputTensor { name: names[1].into(), shape: vec![1, queries.len(), classes], data: logits },
                OutputTensor { name: names[0].into(), shape: vec![1, queries.len(), 4], data: boxes },
            ],
        }
    }

    fn detr(scores: ClassScores) -> DecodeParams {
        DecodeParams { class_scores: scores, ..params(DecoderKind::Detr) }
    }

    fn decode(params: DecodeParams, outputs: &ModelOutputs) -> Result<Vec<Detection>, String> {
        let mut out = Vec::new();
        let result = Decoder::new(params).decode(outputs, 640, 640, &letterbox_1080p_into_640(), &mut out);
        result.map(|()| out).map_err(|error| error.to_string())
    }

    #[test]
    fn boxes_are_normalised_centres_and_sigmoid_picks_each_querys_best_class() {
        let queries = [
            ([0.5, 0.5, 0.1, 0.05], vec![-3.0, 2.0, 0.0]),
            ([0.5, 0.5, 0.1, 0.05], vec![1.0, -5.0, -5.0]),
            ([0.2, 0.5, 0.1, 0.05], vec![-0.5, -5.0, -5.0]),
        ];
        let out = decode(detr(ClassScores::Sigmoid), &outputs(["pred_boxes", "logits"], &queries)).expect("decode");
        assert_eq!(classes(&out), [1, 0], "one class per query, overlaps kept (no NMS), sigmoid(-0.5) < 0.4");
        assert!((out[0].score - sigmoid(2.0)).abs() < 1e-6);
        assert_box(out[0].bbox, BoundingBox { x1: 864.0, y1: 492.0, x2: 1056.0, y2: 588.0 });
    }

    #[test]
    fn softmax_never_reports_the_no_object_column() {
        let queries = [([0.5, 0.5, 0.1, 0.1], vec![2.0, 0.0, 5.0]), ([0.3, 0.5, 0.1, 0.1], vec![3.0, 0.0, -1.0])];
        let out = decode(detr(ClassScores::Softmax), &outputs(["pred_boxes", "logits"], &queries)).expect("decode");
        assert_eq!(classes(&out), [0], "the first query is mostly no-object: p(class 0) < 0.4");
        let expected = 3.0f32.exp() / (3.0f32.exp() + 1.0 + (-1.0f32).exp());
        assert!((out[0].score - expected).abs() < 1e-6, "{} vs {expected}", out[0].score);
    }

    #[test]
    fn probabilities_are_taken_as_they_are_and_outputs_are_found_by_shape() {
        let queries = [([0.5, 0.5, 0.1, 0.1], vec![0.3, 0.45]), ([0.2, 0.5, 0.1, 0.1], vec![0.9, 0.1])];
        let out = decode(detr(ClassScores::Probabilities), &outputs(["a", "b"], &queries)).expect("decode");
        assert_eq!(out.iter().map(|d| (d.class_id, d.score)).collect::<Vec<_>>(), [(0, 0.9), (1, 0.45)]);
    }

    #[test]
    fn rf_detr_names_are_recognised_and_threshold_one_keeps_nothing_finite() {
        let queries = [([0.5, 0.5, 0.1, 0.1], vec![40.0, 0.0])];
        let named = outputs(["dets", "labels"], &queries);
        assert_eq!(classes(&decode(detr(ClassScores::Sigmoid), &named).expect("decode")), [0]);
        let strict = DecodeParams { score_threshold: 1.0, ..detr(ClassScores::Sigmoid) };
        assert!(decode(strict, &outputs(["dets", "labels"], &[([0.5, 0.5, 0.1, 0.1], vec![3.0])]))
            .expect("decode")
            .is_empty());
    }

    #[test]
    fn malformed_outputs_are_errors() {
        let error = |outputs: ModelOutputs| decode(detr(ClassScores::Softmax), &outputs).expect_err("malformed");
        let one_column = outputs(["pred_boxes", "logits"], &[([0.5, 0.5, 0.1, 0.1], vec![1.0])]);
        assert!(error(one_column).contains("expects two outputs"));
        let mut mismatch = outputs(["pred_boxes", "logits"], &[([0.5, 0.5, 0.1, 0.1], vec![1.0, 0.0])]);
        mismatch.tensors[0] = OutputTensor { name: "logits".into(), shape: vec![1, 2, 2], data: vec![0.0; 4] };
        assert!(error(mismatch).contains("`logits` [1, 2, 2]"));
        assert!(error(ModelOutputs::default()).contains("no outputs"));
    }
}
