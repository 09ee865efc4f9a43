//! Property tests of every output decoder: random shapes and values (NaN, ±inf, huge, negative)
//! give an error or sane detections — finite, inside the source frame, sorted, within the
//! threshold, allow-list and `max_detections` — never a panic.

use proptest::prelude::*;

use super::decoder::Decoder;
use super::params::DecodeParams;
use crate::config::{ClassScores, DecoderKind, ResizeKind};
use crate::model::{ModelOutputs, OutputTensor};
use crate::preprocess::ResizeGeometry;

/// Cases per decoder and run on the host; see `proptest_support`.
const CASES: u32 = 512;

/// Values a broken or hostile model could produce, and ordinary ones.
fn value() -> impl Strategy<Value = f32> {
    prop_oneof![
        prop::sample::select(vec![
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            -0.0,
            0.0,
            0.5,
            1.0,
            1e30,
            -1e30,
            3.0,
            4.0,
        ]),
        0.0f32..1.0,
        -10.0f32..700.0,
        any::<f32>(),
    ]
}

fn tensor(name: &str, shape: Vec<usize>, values: &[f32]) -> OutputTensor {
    let len = shape.iter().product::<usize>();
    let data = values.iter().copied().cycle().take(if values.is_empty() { 0 } else { len }).collect();
    OutputTensor { name: name.into(), shape, data }
}

/// Outputs shaped as `kind` expects, with `values` (cycled) as their contents; `tweak` reorders
/// or renames them so that name- and order-based lookups are both exercised.
fn well_formed(kind: DecoderKind, rows: usize, classes: usize, values: &[f32], tweak: bool) -> ModelOutputs {
    let tensors = match kind {
        DecoderKind::Ssd => {
            let (boxes, scores) = if tweak { ("a", "b") } else { ("boxes", "scores") };
            let mut tensors =
                vec![tensor(boxes, vec![1, rows, 4], values), tensor(scores, vec![1, rows, classes + 1], values)];
            if tweak {
                tensors.reverse();
            }
            tensors
        }
        DecoderKind::Yolov5 => vec![tensor("output0", vec![1, rows, 5 + classes], values)],
        DecoderKind::Yolov8 if tweak => vec![tensor("output0", vec![1, rows, 4 + classes], values)],
        DecoderKind::Yolov8 => vec![tensor("output0", vec![1, 4 + classes, rows], values)],
        DecoderKind::End2end => {
            let names: [&str; 4] =
                if tweak { ["w", "x", "y", "z"] } else { ["num_dets", "det_boxes", "det_scores", "det_classes"] };
            vec![
                tensor(names[0], vec![1, 1], values),
                tensor(names[1], vec![1, rows, 4], values),
                tensor(names[2], vec![1, rows], values),
                tensor(names[3], vec![1, rows], values),
            ]
        }
        DecoderKind::NmsFree => vec![tensor("output0", vec![1, rows, 6], values)],
        DecoderKind::Detr => {
            let (boxes, logits) = if tweak { ("a", "b") } else { ("pred_boxes", "logits") };
            vec![tensor(logits, vec![1, rows, classes], values), tensor(boxes, vec![1, rows, 4], values)]
        }
        // Strides 8 and 16 of a 64×32 input (a third of `geometry`'s inputs; the others exercise
        // the refusal), `rows % 6 + 2` bins per side.
        DecoderKind::Nanodet => {
            let bins = rows % 6 + 2;
            let names = if tweak {
                ["a", "b", "c", "d"]
            } else {
                ["cls_stride8", "reg_stride8", "cls_stride16", "reg_stride16"]
            };
            vec![
                tensor(names[0], vec![1, 32, classes], values),
                tensor(names[1], vec![1, 32, 4 * bins], values),
                tensor(names[2], vec![1, 8, classes], values),
                tensor(names[3], vec![1, 8, 4 * bins], values),
            ]
        }
    };
    ModelOutputs { tensors }
}

/// Any number of tensors of any shape, with data lengths that may not match.
fn malformed() -> impl Strategy<Value = ModelOutputs> {
    let one = (
        prop::sample::select(vec![
            "boxes",
            "scores",
            "num_dets",
            "det_boxes",
            "det_scores",
            "det_classes",
            "pred_boxes",
            "logits",
            "cls_stride8",
            "reg_stride8",
            "x",
        ]),
        prop::collection::vec(0usize..8, 0..4),
        prop::collection::vec(value(), 0..64),
    )
        .prop_map(|(name, shape, data)| OutputTensor { name: name.into(), shape, data });
    prop::collection::vec(one, 0..5).prop_map(|tensors| ModelOutputs { tensors })
}

fn kind() -> impl Strategy<Value = DecoderKind> {
    prop::sample::select(vec![
        DecoderKind::Ssd,
        DecoderKind::Yolov5,
        DecoderKind::Yolov8,
        DecoderKind::End2end,
        DecoderKind::NmsFree,
        DecoderKind::Detr,
        DecoderKind::Nanodet,
    ])
}

fn outputs(kind: DecoderKind) -> impl Strategy<Value = ModelOutputs> {
    let shaped = (0usize..40, 1usize..6, prop::collection::vec(value(), 0..64), any::<bool>())
        .prop_map(move |(rows, classes, values, tweak)| well_formed(kind, rows, classes, &values, tweak));
    prop_oneof![3 => shaped, 1 => malformed()]
}

fn params(kind: DecoderKind) -> impl Strategy<Value = DecodeParams> {
    let class_scores =
        prop::sample::select(vec![ClassScores::Sigmoid, ClassScores::Softmax, ClassScores::Probabilities]);
    (0.0f32..=1.0, 0.0f32..=1.0, 1usize..50, prop::option::of(prop::collection::vec(0usize..8, 0..4)), class_scores)
        .prop_map(move |(score_threshold, nms_iou, max_detections, allowed_classes, class_scores)| DecodeParams {
            kind,
            score_threshold,
            nms_iou,
            max_detections,
            allowed_classes,
            class_scores,
            label_count: None,
        })
}

/// Source frame size, model input size and how one was fitted into the other. A third of the
/// inputs are 64×32, the grid of the well-formed NanoDet outputs.
fn geometry() -> impl Strategy<Value = (u32, u32, ResizeGeometry)> {
    let input = prop_oneof![2 => (1u32..1024, 1u32..1024), 1 => Just((64u32, 32u32))];
    (1u32..4000, 1u32..4000, input, any::<bool>()).prop_map(|(sw, sh, (iw, ih), letterbox)| {
        let resize = if letterbox { ResizeKind::Letterbox } else { ResizeKind::Stretch };
        (iw, ih, ResizeGeometry::new(resize, sw, sh, iw, ih))
    })
}

fn case() -> impl Strategy<Value = (ModelOutputs, DecodeParams)> {
    kind().prop_flat_map(|kind| (outputs(kind), params(kind)))
}

proptest! {
    #![proptest_config(crate::proptest_support::config(CASES))]

    #[test]
    fn decoders_give_an_error_or_sane_detections((outputs, params) in case(), (iw, ih, geometry) in geometry()) {
        let mut decoder = Decoder::new(params.clone());
        let mut detections = Vec::new();
        if decoder.decode(&outputs, iw, ih, &geometry, &mut detections).is_err() {
            return Ok(());
        }
        prop_assert!(detections.len() <= params.max_detections);
        let (width, height) = (geometry.src_width as f32, geometry.src_height as f32);
        for detection in &detections {
            let b = detection.bbox;
            prop_assert!(detection.score.is_finite() && detection.score >= params.score_threshold, "{:?}", detection);
            prop_assert!(0.0 <= b.x1 && b.x1 < b.x2 && b.x2 <= width, "{:?} outside {}x{}", b, width, height);
            prop_assert!(0.0 <= b.y1 && b.y1 < b.y2 && b.y2 <= height, "{:?} outside {}x{}", b, width, height);
            if let Some(allowed) = &params.allowed_classes {
                prop_assert!(allowed.contains(&detection.class_id), "{:?}", detection);
            }
        }
        prop_assert!(detections.windows(2).all(|pair| pair[0].score >= pair[1].score), "{:?}", detections);
    }
}
