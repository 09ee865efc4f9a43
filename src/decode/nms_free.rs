//! NMS-free YOLO exports (YOLOv10, YOLO26): one output `[1,K,6]`, each row x1,y1,x2,y2 (input
//! pixels), score, class id, best first; rows past the real detections hold low scores.
//!
//! Owns: reading every row whose score passes the threshold. Must not: run NMS — the model's
//! one-to-one head already gives one box per object; threshold, allow-list and `max_detections`
//! still apply.

use crate::detection::BoundingBox;
use crate::model::ModelOutputs;

use super::candidate::CandidateSink;
use super::error::DecodeError;
use super::tensor::{matrix, unexpected};

const DECODER: &str = "nmsfree";
const EXPECTED: &str = "one output [1,K,6] (x1,y1,x2,y2 in input pixels, score, class id)";

pub(super) fn collect(outputs: &ModelOutputs, sink: &mut CandidateSink<'_>) -> Result<(), DecodeError> {
    let first = outputs.tensors.first().ok_or_else(|| unexpected(DECODER, EXPECTED, outputs))?;
    let rows = matrix(DECODER, first)?.ok_or_else(|| unexpected(DECODER, EXPECTED, outputs))?;
    if rows.cols != 6 {
        return Err(unexpected(DECODER, EXPECTED, outputs));
    }
    for row in rows.data.chunks_exact(6) {
        let &[x1, y1, x2, y2, score, class] = row else { continue };
        if !sink.score_passes(score) {
            continue;
        }
        let whole = class.is_finite() && class >= 0.0 && class.fract() == 0.0 && class <= u32::MAX as f32;
        if !whole {
            return Err(DecodeError::Tensor {
                decoder: DECODER,
                tensor: first.name.clone(),
                message: format!("holds class {class}, which is not a class id"),
            });
        }
        sink.offer(class as usize, score, BoundingBox { x1, y1, x2, y2 });
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

    fn outputs(rows: &[[f32; 6]]) -> ModelOutputs {
        ModelOutputs {
            tensors: vec![OutputTensor {
                name: "output0".into(),
                shape: vec![1, rows.len(), 6],
                data: rows.iter().flatten().copied().collect(),
            }],
        }
    }

    fn decode(params: DecodeParams, outputs: &ModelOutputs) -> Result<Vec<Detection>, String> {
        let mut out = Vec::new();
        let result = Decoder::new(params).decode(outputs, 640, 640, &letterbox_1080p_into_640(), &mut out);
        result.map(|()| out).map_err(|error| error.to_string())
    }

    #[test]
    fn rows_are_corner_boxes_in_input_pixels_and_overlaps_are_kept() {
        let out = decode(
            params(DecoderKind::NmsFree),
            &outputs(&[
                [288.0, 304.0, 352.0, 336.0, 0.9, 3.0],
                [290.0, 304.0, 352.0, 336.0, 0.8, 3.0],
                [0.0, 0.0, 0.0, 0.0, 0.01, 0.0],
            ]),
        )
        .expect("decode");
        assert_eq!(classes(&out), [3, 3], "the model's head already removed duplicates: no NMS");
        assert_box(out[0].bbox, BoundingBox { x1: 864.0, y1: 492.0, x2: 1056.0, y2: 588.0 });
    }

    #[test]
    fn threshold_allow_list_and_max_apply() {
        let rows = [
            [0.0, 200.0, 50.0, 250.0, 0.5, 1.0],
            [100.0, 200.0, 150.0, 250.0, 0.4, 2.0],
            [200.0, 200.0, 250.0, 250.0, 0.3999, 3.0],
            [300.0, 200.0, 350.0, 250.0, 0.9, 4.0],
        ];
        assert_eq!(classes(&decode(params(DecoderKind::NmsFree), &outputs(&rows)).expect("decode")), [4, 1, 2]);
        let allowed = DecodeParams { allowed_classes: Some(vec![1, 3]), ..params(DecoderKind::NmsFree) };
        assert_eq!(classes(&decode(allowed, &outputs(&rows)).expect("decode")), [1]);
        let two = DecodeParams { max_detections: 2, ..params(DecoderKind::NmsFree) };
        assert_eq!(classes(&decode(two, &outputs(&rows)).expect("decode")), [4, 1]);
    }

    #[test]
    fn malformed_outputs_are_errors_and_low_rows_are_not_read() {
        let message = decode(params(DecoderKind::NmsFree), &outputs(&[[0.0, 0.0, 9.0, 9.0, 0.9, -1.0]]))
            .expect_err("negative class");
        assert!(message.contains("holds class -1"), "{message}");
        let ignored = decode(params(DecoderKind::NmsFree), &outputs(&[[0.0, 0.0, 9.0, 9.0, 0.1, f32::NAN]]));
        assert_eq!(ignored, Ok(Vec::new()), "a row under the threshold is padding");

        let seven = ModelOutputs {
            tensors: vec![OutputTensor { name: "output0".into(), shape: vec![1, 2, 7], data: vec![0.0; 14] }],
        };
        let message = decode(params(DecoderKind::NmsFree), &seven).expect_err("seven columns");
        assert!(message.contains("[1,K,6]") && message.contains("`output0` [1, 2, 7]"), "{message}");
        assert!(decode(params(DecoderKind::NmsFree), &ModelOutputs::default()).is_err());
    }
}
