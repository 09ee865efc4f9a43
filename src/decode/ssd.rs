//! SSD outputs: anchor-decoded boxes `[1,N,4]` (ymin,xmin,ymax,xmax in 0..1 of the input) and
//! sigmoid scores `[1,N,C]` whose column 0 is background; column j is class id j − 1.
//!
//! Owns: finding the two tensors and turning every (anchor, class) score into a candidate. Every
//! class column of an anchor is considered, not only the best one, as TFLite's SSD post-processing
//! (and the reference results in the models' notice) do. Must not: threshold or suppress on its own.

use crate::detection::BoundingBox;
use crate::model::{ModelOutputs, OutputTensor};

use super::candidate::CandidateSink;
use super::error::DecodeError;
use super::tensor::{matrix, matrix_dims, unexpected};

const DECODER: &str = "ssd";
const EXPECTED: &str = "two outputs, `boxes` [1,N,4] (ymin,xmin,ymax,xmax in 0..1) and `scores` [1,N,C] \
                        (column 0 = background, C ≥ 2)";

/// `boxes` and `scores` by name; otherwise, of exactly two outputs, the one whose last dimension is 4
/// holds the boxes (the first one if both do).
fn find(outputs: &ModelOutputs) -> Option<(&OutputTensor, &OutputTensor)> {
    if let (Some(boxes), Some(scores)) = (outputs.by_name("boxes"), outputs.by_name("scores")) {
        return Some((boxes, scores));
    }
    let has_box_columns = |tensor: &OutputTensor| matrix_dims(tensor).is_some_and(|(_, cols)| cols == 4);
    match outputs.tensors.as_slice() {
        [first, second] if has_box_columns(first) => Some((first, second)),
        [first, second] if has_box_columns(second) => Some((second, first)),
        _ => None,
    }
}

pub(super) fn collect(
    outputs: &ModelOutputs,
    input_width: f32,
    input_height: f32,
    sink: &mut CandidateSink<'_>,
) -> Result<(), DecodeError> {
    let (boxes, scores) = find(outputs).ok_or_else(|| unexpected(DECODER, EXPECTED, outputs))?;
    let (Some(boxes), Some(scores)) = (matrix(DECODER, boxes)?, matrix(DECODER, scores)?) else {
        return Err(unexpected(DECODER, EXPECTED, outputs));
    };
    if boxes.cols != 4 || scores.rows != boxes.rows || scores.cols < 2 {
        return Err(unexpected(DECODER, EXPECTED, outputs));
    }
    for (anchor_box, anchor_scores) in boxes.data.chunks_exact(4).zip(scores.data.chunks_exact(scores.cols)) {
        let class_scores = &anchor_scores[1..];
        if !sink.any_may_pass(class_scores) {
            continue;
        }
        let &[ymin, xmin, ymax, xmax] = anchor_box else { continue };
        let tensor_box = BoundingBox {
            x1: xmin * input_width,
            y1: ymin * input_height,
            x2: xmax * input_width,
            y2: ymax * input_height,
        };
        for (class_id, &score) in class_scores.iter().enumerate() {
            sink.offer(class_id, score, tensor_box);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::DecoderKind;
    use crate::decode::decoder::Decoder;
    use crate::decode::params::DecodeParams;
    use crate::decode::test_support::*;
    use crate::detection::BoundingBox;
    use crate::model::{ModelOutputs, OutputTensor};

    /// One anchor per entry: box (ymin,xmin,ymax,xmax) and scores with the background column first.
    fn outputs(anchors: &[([f32; 4], [f32; 4])]) -> ModelOutputs {
        let n = anchors.len();
        ModelOutputs {
            tensors: vec![
                OutputTensor {
                    name: "boxes".into(),
                    shape: vec![1, n, 4],
                    data: anchors.iter().flat_map(|a| a.0).collect(),
                },
                OutputTensor {
                    name: "scores".into(),
                    shape: vec![1, n, 4],
                    data: anchors.iter().flat_map(|a| a.1).collect(),
                },
            ],
        }
    }

    fn decode(params: DecodeParams, outputs: &ModelOutputs) -> Vec<crate::detection::Detection> {
        let mut out = Vec::new();
        Decoder::new(params).decode(outputs, 300, 300, &stretch(1280, 720, 300), &mut out).expect("decode");
        out
    }

    #[test]
    fn background_column_is_skipped_and_boxes_reach_source_pixels() {
        let outputs = outputs(&[([0.25, 0.5, 0.75, 1.0], [0.99, 0.2, 0.9, 0.1])]);
        let out = decode(params(DecoderKind::Ssd), &outputs);
        assert_eq!(classes(&out), [1]);
        assert_eq!(out[0].score, 0.9);
        assert_box(out[0].bbox, BoundingBox { x1: 640.0, y1: 180.0, x2: 1280.0, y2: 540.0 });
    }

    #[test]
    fn every_class_of_an_anchor_above_threshold_counts() {
        let outputs = outputs(&[([0.0, 0.0, 0.5, 0.5], [0.0, 0.8, 0.6, 0.3])]);
        let out = decode(params(DecoderKind::Ssd), &outputs);
        assert_eq!(classes(&out), [0, 1]);
    }

    #[test]
    fn threshold_is_inclusive() {
        let outputs =
            outputs(&[([0.0, 0.0, 0.5, 0.5], [0.0, 0.4, 0.0, 0.0]), ([0.5, 0.5, 1.0, 1.0], [0.0, 0.0, 0.3999, 0.0])]);
        let out = decode(params(DecoderKind::Ssd), &outputs);
        assert_eq!(classes(&out), [0]);
        assert_eq!(out[0].score, 0.4);
    }

    #[test]
    fn allow_list_and_per_class_nms() {
        let outputs = outputs(&[
            ([0.0, 0.0, 0.5, 0.5], [0.0, 0.9, 0.8, 0.7]),
            ([0.0, 0.01, 0.5, 0.51], [0.0, 0.85, 0.0, 0.0]),
            ([0.5, 0.5, 1.0, 1.0], [0.0, 0.5, 0.0, 0.0]),
        ]);
        let out = decode(params(DecoderKind::Ssd), &outputs);
        let found: Vec<(usize, f32)> = out.iter().map(|d| (d.class_id, d.score)).collect();
        assert_eq!(found, [(0, 0.9), (1, 0.8), (2, 0.7), (0, 0.5)]);

        let allowed = DecodeParams { allowed_classes: Some(vec![2]), ..params(DecoderKind::Ssd) };
        assert_eq!(classes(&decode(allowed, &outputs)), [2]);
    }

    #[test]
    fn tensors_are_found_by_shape_when_names_differ() {
        let outputs = ModelOutputs {
            tensors: vec![
                OutputTensor { name: "raw_scores".into(), shape: vec![1, 1, 3], data: vec![0.0, 0.0, 0.9] },
                OutputTensor { name: "raw_boxes".into(), shape: vec![1, 1, 4], data: vec![0.0, 0.0, 0.5, 0.5] },
            ],
        };
        let out = decode(params(DecoderKind::Ssd), &outputs);
        assert_eq!(classes(&out), [1]);
        assert_box(out[0].bbox, BoundingBox { x1: 0.0, y1: 0.0, x2: 640.0, y2: 360.0 });
    }

    #[test]
    fn malformed_outputs_are_errors() {
        let good = outputs(&[([0.0, 0.0, 0.5, 0.5], [0.0, 0.9, 0.0, 0.0])]);
        let mut decoder = Decoder::new(params(DecoderKind::Ssd));
        let mut out = Vec::new();
        let mut check = |outputs: ModelOutputs, wanted: &str| {
            let error = decoder.decode(&outputs, 300, 300, &identity(300), &mut out).expect_err("malformed");
            assert!(error.to_string().contains(wanted), "{error}");
        };
        let mut one_output = good.clone();
        one_output.tensors.pop();
        check(one_output, "expects two outputs");
        let mut anchor_mismatch = good.clone();
        anchor_mismatch.tensors[1].shape = vec![1, 2, 2];
        check(anchor_mismatch, "the model gave `boxes` [1, 1, 4], `scores` [1, 2, 2]");
        let mut short_data = good.clone();
        short_data.tensors[0].data.pop();
        check(short_data, "`boxes` has shape [1, 1, 4] but 3 values");
        let mut only_background = good.clone();
        only_background.tensors[1] = OutputTensor { name: "scores".into(), shape: vec![1, 1, 1], data: vec![0.9] };
        check(only_background, "C ≥ 2");
        let mut batch_of_two = good;
        batch_of_two.tensors[0].shape = vec![2, 1, 2];
        check(batch_of_two, "expects two outputs");
    }
}
