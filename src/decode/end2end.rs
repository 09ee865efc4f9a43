//! Models with NMS inside (TensorRT EfficientNMS, YOLO "end2end" exports): `num_dets` `[1,1]`,
//! `det_boxes` `[1,K,4]` (x1,y1,x2,y2 in input pixels), `det_scores` `[1,K]`, `det_classes` `[1,K]`.
//!
//! Owns: finding the four tensors (by those names, else by output order) and reading the first
//! `num_dets` rows. Must not: run NMS again — the model did it; threshold, allow-list and
//! `max_detections` still apply.

use crate::detection::BoundingBox;
use crate::model::{ModelOutputs, OutputTensor};

use super::candidate::CandidateSink;
use super::error::DecodeError;
use super::tensor::{matrix, unexpected, values};

const DECODER: &str = "end2end";
const EXPECTED: &str = "four outputs `num_dets` [1,1], `det_boxes` [1,K,4] (x1,y1,x2,y2 in input pixels), \
                        `det_scores` [1,K] and `det_classes` [1,K] (found by these names, else in this order)";
const NAMES: [&str; 4] = ["num_dets", "det_boxes", "det_scores", "det_classes"];

fn find(outputs: &ModelOutputs) -> Option<[&OutputTensor; 4]> {
    if let [Some(count), Some(boxes), Some(scores), Some(classes)] = NAMES.map(|name| outputs.by_name(name)) {
        return Some([count, boxes, scores, classes]);
    }
    match outputs.tensors.as_slice() {
        [count, boxes, scores, classes] => Some([count, boxes, scores, classes]),
        _ => None,
    }
}

fn invalid(tensor: &OutputTensor, message: String) -> DecodeError {
    DecodeError::Tensor { decoder: DECODER, tensor: tensor.name.clone(), message }
}

/// `value` as a whole number in `0..=max`.
fn whole_number(value: f32, max: usize) -> Option<usize> {
    let whole = value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value <= max as f32;
    whole.then_some(value as usize)
}

pub(super) fn collect(outputs: &ModelOutputs, sink: &mut CandidateSink<'_>) -> Result<(), DecodeError> {
    let [count_tensor, boxes_tensor, scores_tensor, classes_tensor] =
        find(outputs).ok_or_else(|| unexpected(DECODER, EXPECTED, outputs))?;
    let boxes = matrix(DECODER, boxes_tensor)?.ok_or_else(|| unexpected(DECODER, EXPECTED, outputs))?;
    let count = values(DECODER, count_tensor)?;
    let scores = values(DECODER, scores_tensor)?;
    let classes = values(DECODER, classes_tensor)?;
    let &[count] = count else { return Err(unexpected(DECODER, EXPECTED, outputs)) };
    if boxes.cols != 4 || scores.len() != boxes.rows || classes.len() != boxes.rows {
        return Err(unexpected(DECODER, EXPECTED, outputs));
    }
    let count = whole_number(count, boxes.rows)
        .ok_or_else(|| invalid(count_tensor, format!("is {count}, not a whole number in 0..={}", boxes.rows)))?;
    let detections = boxes.data.chunks_exact(4).zip(scores).zip(classes).take(count);
    for ((corners, &score), &class) in detections {
        let &[x1, y1, x2, y2] = corners else { continue };
        let class_id = whole_number(class, u32::MAX as usize)
            .ok_or_else(|| invalid(classes_tensor, format!("holds {class}, which is not a class id")))?;
        sink.offer(class_id, score, BoundingBox { x1, y1, x2, y2 });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::DecoderKind;
    use crate::decode::decoder::Decoder;
    use crate::decode::params::DecodeParams;
    use crate::decode::test_support::*;
    use crate::detection::{BoundingBox, Detection};
    use crate::model::{ModelOutputs, OutputTensor};

    /// EfficientNMS-style outputs with room for `capacity` detections; the first `rows` are filled.
    fn outputs(count: f32, capacity: usize, rows: &[([f32; 4], f32, f32)]) -> ModelOutputs {
        let mut boxes = vec![0.0; capacity * 4];
        let mut scores = vec![0.0; capacity];
        let mut classes = vec![0.0; capacity];
        for (index, (corners, score, class)) in rows.iter().enumerate() {
            boxes[index * 4..index * 4 + 4].copy_from_slice(corners);
            scores[index] = *score;
            classes[index] = *class;
        }
        let tensor = |name: &str, shape: Vec<usize>, data: Vec<f32>| OutputTensor { name: name.into(), shape, data };
        ModelOutputs {
            tensors: vec![
                tensor("num_dets", vec![1, 1], vec![count]),
                tensor("det_boxes", vec![1, capacity, 4], boxes),
                tensor("det_scores", vec![1, capacity], scores),
                tensor("det_classes", vec![1, capacity], classes),
            ],
        }
    }

    fn decode(params: DecodeParams, outputs: &ModelOutputs) -> Result<Vec<Detection>, String> {
        let mut out = Vec::new();
        let result = Decoder::new(params).decode(outputs, 640, 640, &letterbox_1080p_into_640(), &mut out);
        result.map(|()| out).map_err(|error| error.to_string())
    }

    #[test]
    fn reads_only_num_dets_rows_without_running_nms_again() {
        let outputs = outputs(
            2.0,
            4,
            &[
                ([288.0, 304.0, 352.0, 336.0], 0.9, 3.0),
                ([290.0, 304.0, 352.0, 336.0], 0.8, 3.0),
                ([0.0, 200.0, 50.0, 250.0], 0.95, 1.0),
            ],
        );
        let out = decode(params(DecoderKind::End2end), &outputs).expect("decode");
        assert_eq!(classes(&out), [3, 3]);
        assert_box(out[0].bbox, BoundingBox { x1: 864.0, y1: 492.0, x2: 1056.0, y2: 588.0 });
    }

    #[test]
    fn threshold_allow_list_and_max_still_apply() {
        let rows = [
            ([0.0, 200.0, 50.0, 250.0], 0.5, 1.0),
            ([100.0, 200.0, 150.0, 250.0], 0.4, 2.0),
            ([200.0, 200.0, 250.0, 250.0], 0.3999, 3.0),
            ([300.0, 200.0, 350.0, 250.0], 0.9, 4.0),
        ];
        let outputs = outputs(4.0, 4, &rows);
        assert_eq!(classes(&decode(params(DecoderKind::End2end), &outputs).expect("decode")), [4, 1, 2]);
        let allowed = DecodeParams { allowed_classes: Some(vec![1, 3]), ..params(DecoderKind::End2end) };
        assert_eq!(classes(&decode(allowed, &outputs).expect("decode")), [1]);
        let two = DecodeParams { max_detections: 2, ..params(DecoderKind::End2end) };
        assert_eq!(classes(&decode(two, &outputs).expect("decode")), [4, 1]);
    }

    #[test]
    fn tensors_are_taken_in_order_when_names_differ() {
        let mut outputs = outputs(1.0, 2, &[([0.0, 200.0, 50.0, 250.0], 0.5, 7.0)]);
        for (index, tensor) in outputs.tensors.iter_mut().enumerate() {
            tensor.name = format!("output{index}");
        }
        assert_eq!(classes(&decode(params(DecoderKind::End2end), &outputs).expect("decode")), [7]);
    }

    #[test]
    fn malformed_outputs_are_errors() {
        let row = [([0.0, 200.0, 50.0, 250.0], 0.5, 1.0)];
        let error = |outputs: ModelOutputs| decode(params(DecoderKind::End2end), &outputs).expect_err("malformed");

        let message = error(outputs(3.0, 2, &row));
        assert!(message.contains("`num_dets` is 3, not a whole number in 0..=2"), "{message}");
        assert!(error(outputs(-1.0, 2, &row)).contains("`num_dets` is -1"));
        assert!(error(outputs(f32::NAN, 2, &row)).contains("`num_dets` is NaN"));

        let message = error(outputs(1.0, 2, &[([0.0, 200.0, 50.0, 250.0], 0.5, -1.0)]));
        assert!(message.contains("`det_classes` holds -1"), "{message}");

        let mut three = outputs(1.0, 2, &row);
        three.tensors.pop();
        assert!(error(three).contains("expects four outputs"));

        let mut mismatch = outputs(1.0, 2, &row);
        mismatch.tensors[2] = OutputTensor { name: "det_scores".into(), shape: vec![1, 3], data: vec![0.0; 3] };
        assert!(error(mismatch).contains("`det_scores` [1, 3]"));

        let mut no_count = outputs(1.0, 2, &row);
        no_count.tensors[0] = OutputTensor { name: "num_dets".into(), shape: vec![1, 0], data: vec![] };
        assert!(error(no_count).contains("`num_dets` [1, 0]"));
    }
}
