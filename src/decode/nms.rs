//! Greedy per-class non-maximum suppression and the `max_detections` cut.
//!
//! Owns: ordering candidates by score and choosing which survive. Must not: filter by threshold or
//! class (the decoders' sink did that) or touch geometry.

use std::cmp::Ordering;

use super::candidate::Candidate;

/// Sorts `candidates` by descending score and returns the first `max_detections` that survive
/// per-class NMS (`nms_iou` = `None`: no NMS), in that order.
///
/// Greedy NMS in descending score order decides each candidate only from the higher-scoring kept
/// boxes, so stopping once `max_detections` are kept gives the same result as suppressing
/// everything first and cutting afterwards. Survivors are moved to the front in place: no allocation.
pub(super) fn select(candidates: &mut [Candidate], nms_iou: Option<f32>, max_detections: usize) -> &[Candidate] {
    candidates.sort_unstable_by(by_descending_score);
    let mut kept = 0;
    for index in 0..candidates.len() {
        if kept == max_detections {
            break;
        }
        let candidate = candidates[index];
        let suppressed = nms_iou.is_some_and(|nms_iou| {
            candidates[..kept]
                .iter()
                .any(|k| k.class_id == candidate.class_id && k.tensor_box.iou(&candidate.tensor_box) > nms_iou)
        });
        if !suppressed {
            candidates[kept] = candidate;
            kept += 1;
        }
    }
    &candidates[..kept]
}

fn by_descending_score(a: &Candidate, b: &Candidate) -> Ordering {
    b.score.total_cmp(&a.score).then(a.order.cmp(&b.order))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detection::BoundingBox;

    fn candidate(order: u32, class_id: usize, score: f32, x1: f32) -> Candidate {
        let bbox = BoundingBox { x1, y1: 0.0, x2: x1 + 10.0, y2: 10.0 };
        Candidate { score, class_id, order, tensor_box: bbox, source_box: bbox }
    }

    fn orders(kept: &[Candidate]) -> Vec<u32> {
        kept.iter().map(|c| c.order).collect()
    }

    #[test]
    fn suppresses_same_class_overlaps_only() {
        let mut candidates = vec![
            candidate(0, 1, 0.6, 1.0), // IoU 0.82 with #1, same class: suppressed
            candidate(1, 1, 0.9, 0.0),
            candidate(2, 2, 0.8, 0.0),  // same box, other class: kept
            candidate(3, 1, 0.7, 20.0), // same class, disjoint: kept
        ];
        assert_eq!(orders(select(&mut candidates, Some(0.5), 10)), [1, 2, 3]);
    }

    #[test]
    fn iou_equal_to_the_limit_is_kept() {
        // Boxes [0,10] and [5,15]: IoU = 5 / 15 = 1/3.
        let mut candidates = vec![candidate(0, 0, 0.9, 0.0), candidate(1, 0, 0.8, 5.0)];
        let iou = candidates[0].tensor_box.iou(&candidates[1].tensor_box);
        assert_eq!(select(&mut candidates.clone(), Some(iou), 10).len(), 2);
        assert_eq!(select(&mut candidates, Some(iou - 1e-3), 10).len(), 1);
    }

    #[test]
    fn max_detections_keeps_the_highest_and_ties_keep_model_order() {
        let mut candidates = vec![
            candidate(0, 0, 0.5, 0.0),
            candidate(1, 0, 0.9, 100.0),
            candidate(2, 0, 0.7, 200.0),
            candidate(3, 0, 0.7, 300.0),
        ];
        assert_eq!(orders(select(&mut candidates, Some(0.5), 3)), [1, 2, 3]);
    }

    #[test]
    fn without_nms_overlaps_stay() {
        let mut candidates = vec![candidate(0, 0, 0.5, 0.0), candidate(1, 0, 0.9, 0.0)];
        assert_eq!(orders(select(&mut candidates, None, 10)), [1, 0]);
        assert!(select(&mut [], Some(0.5), 10).is_empty());
    }
}
