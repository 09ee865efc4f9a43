//! Whether two backends found the same objects in one image.
//!
//! Owns: pairing the detections of a reference backend (the CPU) with those of the backend under
//! test, and the verdict. Must not: run inference or know where detections came from.
//!
//! Two detections match when they have the same label, their boxes overlap with IoU ≥
//! [`Tolerance::min_iou`] and their scores differ by at most [`Tolerance::max_score_delta`]. Pairs
//! are taken greedily by IoU, best first, each detection in at most one pair. A detection left
//! unpaired is a disagreement, unless its score is within `max_score_delta` of the score threshold:
//! a score of 0.41 on one backend and 0.39 on the other is the same object on both sides of the
//! threshold, not a wrong result.

use serde::Serialize;

use crate::detection::Detection;

/// How close two backends' detections must be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    pub min_iou: f32,
    pub max_score_delta: f32,
}

impl Default for Tolerance {
    /// IoU ≥ 0.9, |Δscore| ≤ 0.05: FP16 engines and other preprocessing paths stay well within it.
    fn default() -> Self {
        Tolerance { min_iou: 0.9, max_score_delta: 0.05 }
    }
}

/// The verdict for one image.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agreement {
    /// Pairs that match.
    pub matched: usize,
    /// Reference detections without a match (index into the reference list).
    #[serde(skip)]
    pub missing: Vec<usize>,
    /// Detections under test without a match (index into the candidate list).
    #[serde(skip)]
    pub extra: Vec<usize>,
    /// Unmatched detections on either side that score within the tolerance of the threshold.
    pub borderline: usize,
    /// Lowest IoU among matched pairs.
    pub worst_iou: Option<f32>,
    /// Largest |Δscore| among matched pairs.
    pub worst_score_delta: Option<f32>,
}

impl Agreement {
    pub fn agrees(&self) -> bool {
        self.missing.is_empty() && self.extra.is_empty()
    }
}

/// Pairs `candidate` with `reference` (both for one image, at score threshold `threshold`).
pub fn compare(reference: &[Detection], candidate: &[Detection], threshold: f32, tolerance: Tolerance) -> Agreement {
    let mut pairs: Vec<(f32, usize, usize)> = Vec::new();
    for (r, expected) in reference.iter().enumerate() {
        for (c, found) in candidate.iter().enumerate() {
            let iou = expected.bbox.iou(&found.bbox);
            let same = expected.class_id == found.class_id
                && iou >= tolerance.min_iou
                && (expected.score - found.score).abs() <= tolerance.max_score_delta;
            if same {
                pairs.push((iou, r, c));
            }
        }
    }
    pairs.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut reference_used = vec![false; reference.len()];
    let mut candidate_used = vec![false; candidate.len()];
    let mut agreement = Agreement {
        matched: 0,
        missing: Vec::new(),
        extra: Vec::new(),
        borderline: 0,
        worst_iou: None,
        worst_score_delta: None,
    };
    for (iou, r, c) in pairs {
        if reference_used[r] || candidate_used[c] {
            continue;
        }
        reference_used[r] = true;
        candidate_used[c] = true;
        agreement.matched += 1;
        let delta = (reference[r].score - candidate[c].score).abs();
        agreement.worst_iou = Some(agreement.worst_iou.map_or(iou, |worst| worst.min(iou)));
        agreement.worst_score_delta = Some(agreement.worst_score_delta.map_or(delta, |worst| worst.max(delta)));
    }
    let borderline = |detection: &Detection| detection.score < threshold + tolerance.max_score_delta;
    for (r, detection) in reference.iter().enumerate().filter(|(r, _)| !reference_used[*r]) {
        if borderline(detection) {
            agreement.borderline += 1;
        } else {
            agreement.missing.push(r);
        }
    }
    for (c, detection) in candidate.iter().enumerate().filter(|(c, _)| !candidate_used[*c]) {
        if borderline(detection) {
            agreement.borderline += 1;
        } else {
            agreement.extra.push(c);
        }
    }
    agreement
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detection::BoundingBox;

    fn detection(class_id: usize, score: f32, x1: f32, y1: f32, x2: f32, y2: f32) -> Detection {
        Detection { class_id, score, bbox: BoundingBox { x1, y1, x2, y2 } }
    }

    const THRESHOLD: f32 = 0.4;

    fn compare_default(reference: &[Detection], candidate: &[Detection]) -> Agreement {
        compare(reference, candidate, THRESHOLD, Tolerance::default())
    }

    #[test]
    fn identical_detections_agree() {
        let cpu = [detection(0, 0.91, 10.0, 20.0, 200.0, 400.0), detection(16, 0.8, 300.0, 50.0, 500.0, 300.0)];
        let agreement = compare_default(&cpu, &cpu);
        assert!(agreement.agrees());
        assert_eq!(agreement.matched, 2);
        assert_eq!(agreement.worst_iou, Some(1.0));
        assert_eq!(agreement.worst_score_delta, Some(0.0));
    }

    #[test]
    fn small_differences_and_another_order_agree() {
        let cpu = [detection(0, 0.91, 10.0, 20.0, 200.0, 400.0), detection(16, 0.8, 300.0, 50.0, 500.0, 300.0)];
        // FP16-like noise: boxes moved by 2 px, scores by 0.03, listed in the other order.
        let gpu = [detection(16, 0.83, 302.0, 52.0, 502.0, 298.0), detection(0, 0.89, 12.0, 18.0, 198.0, 402.0)];
        let agreement = compare_default(&cpu, &gpu);
        assert!(agreement.agrees(), "{agreement:?}");
        assert_eq!(agreement.matched, 2);
        assert!(agreement.worst_iou.is_some_and(|iou| (0.9..1.0).contains(&iou)), "{agreement:?}");
        assert!(agreement.worst_score_delta.is_some_and(|d| (d - 0.03).abs() < 1e-6), "{agreement:?}");
    }

    #[test]
    fn another_label_a_shifted_box_or_a_different_score_disagree() {
        let cpu = [detection(0, 0.91, 10.0, 20.0, 200.0, 400.0)];
        for (what, gpu) in [
            ("label", detection(1, 0.91, 10.0, 20.0, 200.0, 400.0)),
            ("box", detection(0, 0.91, 40.0, 20.0, 230.0, 400.0)),
            ("score", detection(0, 0.84, 10.0, 20.0, 200.0, 400.0)),
        ] {
            let agreement = compare_default(&cpu, std::slice::from_ref(&gpu));
            assert!(!agreement.agrees(), "another {what} must disagree: {agreement:?}");
            assert_eq!((agreement.missing.as_slice(), agreement.extra.as_slice()), (&[0][..], &[0][..]), "{what}");
        }
    }

    #[test]
    fn a_missing_or_an_extra_object_disagrees() {
        let cpu = [detection(0, 0.91, 10.0, 20.0, 200.0, 400.0), detection(2, 0.7, 300.0, 50.0, 500.0, 300.0)];
        let missing = compare_default(&cpu, &cpu[..1]);
        assert_eq!(missing.missing, vec![1]);
        let extra = compare_default(&cpu[..1], &cpu);
        assert_eq!(extra.extra, vec![1]);
        assert!(!missing.agrees() && !extra.agrees());
    }

    #[test]
    fn objects_at_the_threshold_may_appear_on_one_side_only() {
        let cpu = [detection(0, 0.91, 10.0, 20.0, 200.0, 400.0), detection(5, 0.42, 300.0, 50.0, 500.0, 300.0)];
        let gpu = [detection(0, 0.9, 10.0, 20.0, 200.0, 400.0), detection(7, 0.44, 0.0, 0.0, 50.0, 50.0)];
        let agreement = compare_default(&cpu, &gpu);
        assert!(agreement.agrees(), "{agreement:?}");
        assert_eq!((agreement.matched, agreement.borderline), (1, 2));
    }

    #[test]
    fn each_detection_is_paired_once_best_overlap_first() {
        // Two CPU boxes of one label, one GPU box close to both: it pairs with the closer one and
        // the other CPU box is missing.
        let cpu = [detection(0, 0.9, 0.0, 0.0, 100.0, 100.0), detection(0, 0.9, 2.0, 0.0, 102.0, 100.0)];
        let gpu = [detection(0, 0.9, 1.5, 0.0, 101.5, 100.0)];
        let agreement = compare_default(&cpu, &gpu);
        assert_eq!(agreement.matched, 1);
        assert_eq!(agreement.missing, vec![0]);
    }

    #[test]
    fn no_detections_on_either_side_agree() {
        let agreement = compare_default(&[], &[]);
        assert!(agreement.agrees());
        assert_eq!((agreement.matched, agreement.worst_iou), (0, None));
    }
}
