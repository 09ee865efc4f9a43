//! Builders and assertions shared by the decoder tests.

use crate::config::{ClassScores, DecoderKind, ResizeKind};
use crate::detection::{BoundingBox, Detection};
use crate::model::{ModelOutputs, OutputTensor};
use crate::preprocess::ResizeGeometry;

use super::params::DecodeParams;

/// The config defaults: threshold 0.4, NMS IoU 0.5, 100 detections, every class, sigmoid DETR scores.
pub(super) fn params(kind: DecoderKind) -> DecodeParams {
    DecodeParams {
        kind,
        score_threshold: 0.4,
        nms_iou: 0.5,
        max_detections: 100,
        allowed_classes: None,
        class_scores: ClassScores::Sigmoid,
        label_count: None,
    }
}

/// Source frame and input tensor are the same square: tensor pixels are source pixels.
pub(super) fn identity(size: u32) -> ResizeGeometry {
    ResizeGeometry::new(ResizeKind::Stretch, size, size, size, size)
}

/// A `src_width` × `src_height` frame stretched into a square input of `input_size`.
pub(super) fn stretch(src_width: u32, src_height: u32, input_size: u32) -> ResizeGeometry {
    ResizeGeometry::new(ResizeKind::Stretch, src_width, src_height, input_size, input_size)
}

/// A 1920 × 1080 frame letterboxed into 640 × 640: scale 1/3, 140 rows of padding above and below.
pub(super) fn letterbox_1080p_into_640() -> ResizeGeometry {
    ResizeGeometry::new(ResizeKind::Letterbox, 1920, 1080, 640, 640)
}

/// A YOLOv5 output `[1, N, 7]`: cx, cy, w, h, objectness, two class scores per row.
pub(super) fn yolov5_outputs(rows: &[[f32; 7]]) -> ModelOutputs {
    ModelOutputs {
        tensors: vec![OutputTensor {
            name: "output0".into(),
            shape: vec![1, rows.len(), 7],
            data: rows.iter().flatten().copied().collect(),
        }],
    }
}

pub(super) fn classes(detections: &[Detection]) -> Vec<usize> {
    detections.iter().map(|d| d.class_id).collect()
}

pub(super) fn assert_box(actual: BoundingBox, expected: BoundingBox) {
    let close =
        [(actual.x1, expected.x1), (actual.y1, expected.y1), (actual.x2, expected.x2), (actual.y2, expected.y2)]
            .iter()
            .all(|(a, e)| (a - e).abs() < 1e-3);
    assert!(close, "box {actual:?}, expected {expected:?}");
}
