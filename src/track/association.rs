//! Matching tracks to detections by box overlap.
//!
//! Owns: the IoU cost between candidate track boxes and detection boxes and a one-to-one assignment
//! of the best-overlapping pairs. Must not: decide which tracks or detections are candidates (the
//! tracker's stages do), or know about classes: matching is class-agnostic on purpose, so that a
//! label flip (dog → horse on the same animal) does not break a track.
//!
//! The assignment is greedy: every pair above the IoU threshold, best overlap first, each track and
//! each detection used once. Where boxes do not compete (the usual case in a camera scene) this is
//! the same assignment the Hungarian method finds; where they do, the better overlap wins, which is
//! what a box tracker wants. It needs no allocation once its buffers are warm and is deterministic
//! (ties go to the lower track, then detection, index).

use crate::detection::BoundingBox;

/// Reusable buffers for [`Matcher::assign`].
#[derive(Debug, Default)]
pub struct Matcher {
    /// (IoU, candidate track index, candidate detection index) of every pair above the threshold.
    pairs: Vec<(f32, usize, usize)>,
    track_taken: Vec<bool>,
    detection_taken: Vec<bool>,
}

impl Matcher {
    /// Assigns `tracks` to `detections` one-to-one, best IoU first, pairs below `min_iou` never.
    /// `matches` receives (index into `tracks`, index into `detections`) pairs, best first.
    pub fn assign(
        &mut self,
        tracks: &[BoundingBox],
        detections: &[BoundingBox],
        min_iou: f32,
        matches: &mut Vec<(usize, usize)>,
    ) {
        matches.clear();
        self.pairs.clear();
        for (t, track) in tracks.iter().enumerate() {
            for (d, detection) in detections.iter().enumerate() {
                let iou = track.iou(detection);
                // `>=` is false for NaN: a malformed box never matches.
                if iou >= min_iou && iou > 0.0 {
                    self.pairs.push((iou, t, d));
                }
            }
        }
        self.pairs.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        self.track_taken.clear();
        self.track_taken.resize(tracks.len(), false);
        self.detection_taken.clear();
        self.detection_taken.resize(detections.len(), false);
        for &(_, t, d) in &self.pairs {
            if !self.track_taken[t] && !self.detection_taken[d] {
                self.track_taken[t] = true;
                self.detection_taken[d] = true;
                matches.push((t, d));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(x1: f32, y1: f32, x2: f32, y2: f32) -> BoundingBox {
        BoundingBox { x1, y1, x2, y2 }
    }

    fn assign(tracks: &[BoundingBox], detections: &[BoundingBox], min_iou: f32) -> Vec<(usize, usize)> {
        let mut matches = Vec::new();
        Matcher::default().assign(tracks, detections, min_iou, &mut matches);
        matches
    }

    #[test]
    fn each_track_gets_its_own_overlapping_detection() {
        let tracks = [b(0.0, 0.0, 10.0, 10.0), b(100.0, 0.0, 110.0, 10.0)];
        let detections = [b(101.0, 0.0, 111.0, 10.0), b(1.0, 1.0, 11.0, 11.0), b(50.0, 50.0, 60.0, 60.0)];
        let mut matches = assign(&tracks, &detections, 0.3);
        matches.sort();
        assert_eq!(matches, [(0, 1), (1, 0)]);
    }

    #[test]
    fn the_better_overlap_wins_and_thresholds_hold() {
        // One detection between two tracks: it goes to the one it overlaps more.
        let tracks = [b(0.0, 0.0, 10.0, 10.0), b(4.0, 0.0, 14.0, 10.0)];
        let detections = [b(3.0, 0.0, 13.0, 10.0)];
        assert_eq!(assign(&tracks, &detections, 0.1), [(1, 0)]);
        assert_eq!(assign(&tracks, &detections, 0.95), [], "below the threshold nothing matches");
        let disjoint = [b(50.0, 50.0, 60.0, 60.0)];
        assert_eq!(assign(&tracks, &disjoint, 0.0), [], "no overlap is never a match, even at threshold 0");
    }

    #[test]
    fn ties_are_broken_by_index_and_nan_boxes_never_match() {
        let tracks = [b(0.0, 0.0, 10.0, 10.0), b(0.0, 0.0, 10.0, 10.0)];
        let detections = [b(0.0, 0.0, 10.0, 10.0)];
        assert_eq!(assign(&tracks, &detections, 0.5), [(0, 0)]);
        let nan = [b(f32::NAN, 0.0, 10.0, 10.0)];
        assert_eq!(assign(&tracks, &nan, 0.0), []);
        assert_eq!(assign(&[], &detections, 0.5), []);
    }

    #[test]
    fn buffers_are_reused_across_calls() {
        let mut matcher = Matcher::default();
        let mut matches = Vec::new();
        let boxes: Vec<BoundingBox> = (0..50).map(|i| b(i as f32 * 20.0, 0.0, i as f32 * 20.0 + 10.0, 10.0)).collect();
        matcher.assign(&boxes, &boxes, 0.3, &mut matches);
        assert_eq!(matches.len(), 50);
        let capacity = (matcher.pairs.capacity(), matches.capacity());
        matcher.assign(&boxes, &boxes, 0.3, &mut matches);
        assert_eq!((matcher.pairs.capacity(), matches.capacity()), capacity);
    }
}
