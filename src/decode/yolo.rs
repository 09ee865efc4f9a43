//! YOLO outputs without NMS inside the model.
//!
//! - YOLOv5 `[1,N,5+C]`: cx,cy,w,h (input pixels), objectness, C class scores; score = objectness ×
//!   best class score.
//! - YOLOv8 / YOLO11 `[1,4+C,N]` (channel-major): cx,cy,w,h (input pixels), C class scores; score =
//!   best class score. The anchor-major `[1,N,4+C]` form is recognised by having more rows than
//!   columns (real models have thousands of anchors and at most a few hundred channels).
//!
//! Owns: turning each anchor's best class into a candidate, and refusing outputs that score
//! another number of classes than the label file names (C is the model's class count). The best class is chosen before the
//! allow-list applies, as Ultralytics does: an anchor whose best class is not allowed is dropped,
//! not relabelled. Only the first output is read (older YOLOv5 exports append raw head outputs).
//! Must not: threshold or suppress on its own.

use crate::detection::BoundingBox;
use crate::model::ModelOutputs;

use super::candidate::CandidateSink;
use super::error::DecodeError;
use super::tensor::{matrix, unexpected, Matrix};

const V5_DECODER: &str = "yolov5";
const V5_EXPECTED: &str = "one output [1,N,5+C] (cx,cy,w,h in input pixels, objectness, C ≥ 1 class scores)";
const V8_DECODER: &str = "yolov8";
const V8_EXPECTED: &str =
    "one output [1,4+C,N] (cx,cy,w,h in input pixels, C ≥ 1 class scores; [1,N,4+C] is accepted too)";

fn first_matrix<'a>(
    outputs: &'a ModelOutputs,
    decoder: &'static str,
    expected: &'static str,
) -> Result<Matrix<'a>, DecodeError> {
    let first = outputs.tensors.first().ok_or_else(|| unexpected(decoder, expected, outputs))?;
    matrix(decoder, first)?.ok_or_else(|| unexpected(decoder, expected, outputs))
}

pub(super) fn centre_box(cx: f32, cy: f32, width: f32, height: f32) -> BoundingBox {
    BoundingBox { x1: cx - width / 2.0, y1: cy - height / 2.0, x2: cx + width / 2.0, y2: cy + height / 2.0 }
}

/// (class id, score) of the highest score; the first one wins ties, NaN never wins.
pub(super) fn best_class(scores: &[f32]) -> (usize, f32) {
    scores.iter().enumerate().fold(
        (0, f32::NEG_INFINITY),
        |best, (class_id, &score)| {
            if score > best.1 {
                (class_id, score)
            } else {
                best
            }
        },
    )
}

/// The model scores `classes` classes; the label file names `labels` (when checked).
fn check_class_count(decoder: &'static str, classes: usize, labels: Option<usize>) -> Result<(), DecodeError> {
    match labels {
        Some(labels) if labels != classes => Err(DecodeError::LabelCount { decoder, model: classes, labels }),
        _ => Ok(()),
    }
}

pub(super) fn collect_v5(
    outputs: &ModelOutputs,
    labels: Option<usize>,
    sink: &mut CandidateSink<'_>,
) -> Result<(), DecodeError> {
    let rows = first_matrix(outputs, V5_DECODER, V5_EXPECTED)?;
    if rows.cols < 6 {
        return Err(unexpected(V5_DECODER, V5_EXPECTED, outputs));
    }
    check_class_count(V5_DECODER, rows.cols - 5, labels)?;
    for row in rows.data.chunks_exact(rows.cols) {
        let &[cx, cy, width, height, objectness, ref class_scores @ ..] = row else { continue };
        let (class_id, class_score) = best_class(class_scores);
        sink.offer(class_id, objectness * class_score, centre_box(cx, cy, width, height));
    }
    Ok(())
}

/// `best_per_anchor` is scratch space, kept by the caller so that frames do not allocate.
pub(super) fn collect_v8(
    outputs: &ModelOutputs,
    labels: Option<usize>,
    best_per_anchor: &mut Vec<(f32, usize)>,
    sink: &mut CandidateSink<'_>,
) -> Result<(), DecodeError> {
    let tensor = first_matrix(outputs, V8_DECODER, V8_EXPECTED)?;
    if tensor.rows > tensor.cols {
        if tensor.cols < 5 {
            return Err(unexpected(V8_DECODER, V8_EXPECTED, outputs));
        }
        check_class_count(V8_DECODER, tensor.cols - 4, labels)?;
        for row in tensor.data.chunks_exact(tensor.cols) {
            let &[cx, cy, width, height, ref class_scores @ ..] = row else { continue };
            let (class_id, score) = best_class(class_scores);
            sink.offer(class_id, score, centre_box(cx, cy, width, height));
        }
        return Ok(());
    }
    let anchors = tensor.cols;
    if tensor.rows < 5 {
        return Err(unexpected(V8_DECODER, V8_EXPECTED, outputs));
    }
    check_class_count(V8_DECODER, tensor.rows - 4, labels)?;
    if anchors == 0 {
        return Ok(());
    }
    // Channel-major: walk each class plane contiguously, keeping the best class per anchor.
    let mut planes = tensor.data.chunks_exact(anchors);
    let (Some(cx), Some(cy), Some(width), Some(height)) = (planes.next(), planes.next(), planes.next(), planes.next())
    else {
        return Err(unexpected(V8_DECODER, V8_EXPECTED, outputs));
    };
    best_per_anchor.clear();
    best_per_anchor.resize(anchors, (f32::NEG_INFINITY, 0));
    for (class_id, plane) in planes.enumerate() {
        for (best, &score) in best_per_anchor.iter_mut().zip(plane) {
            if score > best.0 {
                *best = (score, class_id);
            }
        }
    }
    let coordinates = cx.iter().zip(cy).zip(width).zip(height);
    for ((((&cx, &cy), &width), &height), &(score, class_id)) in coordinates.zip(best_per_anchor.iter()) {
        sink.offer(class_id, score, centre_box(cx, cy, width, height));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::best_class;
    use crate::config::DecoderKind;
    use crate::decode::decoder::Decoder;
    use crate::decode::error::DecodeError;
    use crate::decode::params::DecodeParams;
    use crate::decode::test_support::*;
    use crate::detection::{BoundingBox, Detection};
    use crate::model::{ModelOutputs, OutputTensor};
    use crate::preprocess::ResizeGeometry;

    fn decode(params: DecodeParams, outputs: &ModelOutputs, geometry: &ResizeGeometry) -> Vec<Detection> {
        let mut out = Vec::new();
        Decoder::new(params).decode(outputs, 640, 640, geometry, &mut out).expect("decode");
        out
    }

    /// A YOLOv8 output `[1, 4+C, N]` from per-anchor rows (cx, cy, w, h, C class scores), padded with
    /// all-zero anchors so that there are more anchors than channels, as in real models.
    fn yolov8_channel_major(rows: &[Vec<f32>]) -> ModelOutputs {
        let channels = rows.first().map_or(0, Vec::len);
        let anchors = rows.len().max(channels + 1);
        let value = |anchor: usize, channel: usize| rows.get(anchor).map_or(0.0, |row| row[channel]);
        let data = (0..channels).flat_map(|c| (0..anchors).map(move |a| value(a, c))).collect();
        ModelOutputs { tensors: vec![OutputTensor { name: "output0".into(), shape: vec![1, channels, anchors], data }] }
    }

    fn error_of(kind: DecoderKind, outputs: &ModelOutputs) -> String {
        let mut out = Vec::new();
        let result = Decoder::new(params(kind)).decode(outputs, 640, 640, &identity(640), &mut out);
        result.expect_err("malformed").to_string()
    }

    #[test]
    fn best_class_prefers_the_first_of_equals_and_ignores_nan() {
        assert_eq!(best_class(&[0.2, 0.7, 0.7]), (1, 0.7));
        assert_eq!(best_class(&[f32::NAN, 0.3]), (1, 0.3));
    }

    #[test]
    fn v5_undoes_the_letterbox() {
        let outputs = yolov5_outputs(&[[320.0, 320.0, 64.0, 32.0, 0.9, 0.1, 1.0]]);
        let out = decode(params(DecoderKind::Yolov5), &outputs, &letterbox_1080p_into_640());
        assert_eq!(classes(&out), [1]);
        assert!((out[0].score - 0.9).abs() < 1e-6);
        assert_box(out[0].bbox, BoundingBox { x1: 864.0, y1: 492.0, x2: 1056.0, y2: 588.0 });
    }

    #[test]
    fn v5_score_is_objectness_times_class_and_threshold_is_inclusive() {
        let outputs =
            yolov5_outputs(&[[100.0, 100.0, 10.0, 10.0, 0.5, 0.8, 0.0], [300.0, 300.0, 10.0, 10.0, 0.5, 0.0, 0.79]]);
        let out = decode(params(DecoderKind::Yolov5), &outputs, &identity(640));
        assert_eq!(classes(&out), [0]);
        assert_eq!(out[0].score, 0.4);
    }

    #[test]
    fn v5_best_class_then_allow_list() {
        let outputs = yolov5_outputs(&[[100.0, 100.0, 10.0, 10.0, 1.0, 0.9, 0.8]]);
        let allowed = DecodeParams { allowed_classes: Some(vec![1]), ..params(DecoderKind::Yolov5) };
        assert!(decode(allowed, &outputs, &identity(640)).is_empty());
        let allowed = DecodeParams { allowed_classes: Some(vec![0]), ..params(DecoderKind::Yolov5) };
        assert_eq!(classes(&decode(allowed, &outputs, &identity(640))), [0]);
    }

    #[test]
    fn v5_nms_is_per_class_and_max_detections_keeps_the_highest() {
        let outputs = yolov5_outputs(&[
            [100.0, 100.0, 50.0, 50.0, 1.0, 0.6, 0.0],
            [102.0, 100.0, 50.0, 50.0, 1.0, 0.9, 0.0],
            [101.0, 100.0, 50.0, 50.0, 1.0, 0.0, 0.7],
            [400.0, 400.0, 50.0, 50.0, 1.0, 0.5, 0.0],
        ]);
        let out = decode(params(DecoderKind::Yolov5), &outputs, &identity(640));
        let found: Vec<(usize, f32)> = out.iter().map(|d| (d.class_id, d.score)).collect();
        assert_eq!(found, [(0, 0.9), (1, 0.7), (0, 0.5)]);

        let two = DecodeParams { max_detections: 2, ..params(DecoderKind::Yolov5) };
        assert_eq!(classes(&decode(two, &outputs, &identity(640))), [0, 1]);
    }

    #[test]
    fn boxes_entirely_in_the_padding_are_dropped() {
        let outputs = yolov5_outputs(&[[320.0, 60.0, 100.0, 40.0, 1.0, 0.9, 0.0]]);
        assert!(decode(params(DecoderKind::Yolov5), &outputs, &letterbox_1080p_into_640()).is_empty());
        let zero_width = yolov5_outputs(&[[320.0, 320.0, 0.0, 40.0, 1.0, 0.9, 0.0]]);
        assert!(decode(params(DecoderKind::Yolov5), &zero_width, &identity(640)).is_empty());
        let not_finite = yolov5_outputs(&[[f32::NAN, 320.0, 10.0, 40.0, 1.0, 0.9, 0.0]]);
        assert!(decode(params(DecoderKind::Yolov5), &not_finite, &identity(640)).is_empty());
    }

    #[test]
    fn v8_channel_major_undoes_the_letterbox() {
        let outputs = yolov8_channel_major(&[
            vec![320.0, 320.0, 64.0, 32.0, 0.1, 0.2, 0.95],
            vec![600.0, 200.0, 20.0, 20.0, 0.3, 0.5, 0.1],
            vec![10.0, 300.0, 20.0, 20.0, 0.3, 0.2, 0.1],
        ]);
        let out = decode(params(DecoderKind::Yolov8), &outputs, &letterbox_1080p_into_640());
        assert_eq!(classes(&out), [2, 1]);
        assert_eq!(out[0].score, 0.95);
        assert_box(out[0].bbox, BoundingBox { x1: 864.0, y1: 492.0, x2: 1056.0, y2: 588.0 });
        assert_box(out[1].bbox, BoundingBox { x1: 1770.0, y1: 150.0, x2: 1830.0, y2: 210.0 });
    }

    #[test]
    fn v8_anchor_major_gives_the_same_result() {
        let rows: Vec<Vec<f32>> =
            (0..8).map(|i| vec![40.0 + 70.0 * i as f32, 320.0, 20.0, 20.0, 0.1 * i as f32, 0.05, 0.42]).collect();
        let channel_major = yolov8_channel_major(&rows);
        let anchor_major = ModelOutputs {
            tensors: vec![OutputTensor { name: "output0".into(), shape: vec![1, 8, 7], data: rows.concat() }],
        };
        let expected = decode(params(DecoderKind::Yolov8), &channel_major, &identity(640));
        assert_eq!(classes(&expected), [0, 0, 0, 2, 2, 2, 2, 2]);
        assert_eq!(decode(params(DecoderKind::Yolov8), &anchor_major, &identity(640)), expected);
    }

    #[test]
    fn v8_threshold_allow_list_nms_and_max() {
        let outputs = yolov8_channel_major(&[
            vec![100.0, 100.0, 50.0, 50.0, 0.9, 0.0, 0.0],
            vec![102.0, 100.0, 50.0, 50.0, 0.8, 0.0, 0.0],
            vec![101.0, 100.0, 50.0, 50.0, 0.0, 0.0, 0.7],
            vec![400.0, 400.0, 50.0, 50.0, 0.0, 0.4, 0.0],
            vec![500.0, 500.0, 50.0, 50.0, 0.0, 0.3999, 0.0],
        ]);
        let out = decode(params(DecoderKind::Yolov8), &outputs, &identity(640));
        assert_eq!(classes(&out), [0, 2, 1]);
        let allowed = DecodeParams { allowed_classes: Some(vec![1, 2]), ..params(DecoderKind::Yolov8) };
        assert_eq!(classes(&decode(allowed, &outputs, &identity(640))), [2, 1]);
        let one = DecodeParams { max_detections: 1, ..params(DecoderKind::Yolov8) };
        assert_eq!(classes(&decode(one, &outputs, &identity(640))), [0]);
    }

    /// Issue 33: the bundled COCO label file (91 ids with gaps) with an 80-class model gave wrong
    /// names from class 11 on, silently.
    #[test]
    fn a_label_file_of_another_class_count_is_refused_by_both_layouts() {
        let labels = |count| DecodeParams { label_count: Some(count), ..params(DecoderKind::Yolov8) };
        let channel_major = yolov8_channel_major(&[vec![320.0, 320.0, 64.0, 32.0, 0.1, 0.2, 0.95]]);
        let anchor_major = ModelOutputs {
            tensors: vec![OutputTensor {
                name: "output0".into(),
                shape: vec![1, 8, 7],
                data: vec![vec![40.0, 320.0, 20.0, 20.0, 0.1, 0.05, 0.42]; 8].concat(),
            }],
        };
        for outputs in [&channel_major, &anchor_major] {
            assert_eq!(decode(labels(3), outputs, &identity(640)).len(), 1, "3 class scores, 3 labels");
            let mut decoder = Decoder::new(labels(91));
            let error = decoder.decode(outputs, 640, 640, &identity(640), &mut Vec::new()).expect_err("91 labels");
            let message = error.to_string();
            assert!(message.contains("names 91 classes") && message.contains("scores 3 classes"), "{message}");
            assert!(message.contains("coco_labels.txt"), "{message}");
        }
        let v5 = DecodeParams { label_count: Some(80), ..params(DecoderKind::Yolov5) };
        let outputs = yolov5_outputs(&[[320.0, 320.0, 64.0, 32.0, 0.9, 0.1, 0.8]]);
        let error = Decoder::new(v5).decode(&outputs, 640, 640, &identity(640), &mut Vec::new()).expect_err("80");
        assert!(matches!(error, DecodeError::LabelCount { model: 2, labels: 80, .. }), "{error}");
    }

    #[test]
    fn malformed_outputs_are_errors() {
        let empty = ModelOutputs::default();
        assert!(error_of(DecoderKind::Yolov5, &empty).contains("the model gave no outputs"));
        assert!(error_of(DecoderKind::Yolov8, &empty).contains("the model gave no outputs"));

        let too_narrow = OutputTensor { name: "output0".into(), shape: vec![1, 3, 5], data: vec![0.0; 15] };
        let outputs = ModelOutputs { tensors: vec![too_narrow] };
        let message = error_of(DecoderKind::Yolov5, &outputs);
        assert!(message.contains("[1,N,5+C]") && message.contains("`output0` [1, 3, 5]"), "{message}");

        let four_channels = OutputTensor { name: "output0".into(), shape: vec![1, 4, 10], data: vec![0.0; 40] };
        let message = error_of(DecoderKind::Yolov8, &ModelOutputs { tensors: vec![four_channels] });
        assert!(message.contains("[1,4+C,N]"), "{message}");

        let rank_four = OutputTensor { name: "output0".into(), shape: vec![1, 1, 84, 10], data: vec![0.0; 840] };
        let message = error_of(DecoderKind::Yolov8, &ModelOutputs { tensors: vec![rank_four] });
        assert!(message.contains("`output0` [1, 1, 84, 10]"), "{message}");

        let short = OutputTensor { name: "output0".into(), shape: vec![1, 84, 10], data: vec![0.0; 839] };
        let message = error_of(DecoderKind::Yolov8, &ModelOutputs { tensors: vec![short] });
        assert!(message.contains("839 values"), "{message}");
    }
}
