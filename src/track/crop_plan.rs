//! Which of one camera's tracks a per-track model (a classifier; an embedder) looks at on a frame:
//! the rule of its `[models.<name>]` table (`on`, `min_size`, `every`), bounded per frame.
//!
//! Owns: per track, when and at which score it was last chosen, and the choice of a frame's crops
//! ([`CropPlan::choose`]). Must not: run the model, cut crops, keep its answers (the caller keeps
//! them per track) or read the config.
//!
//! A track is due when its class is one of the rule's, its box is at least `min_size` source
//! pixels wide and high, and either it was never chosen, or (`every = 0`) its detection now scores
//! higher than when it was last chosen, or (`every = N`) N of its camera's frames have passed
//! since, or (`grown`, an embedder's rule) its box's area has grown that many times since it was
//! last chosen (a closer look at it). At most `max_per_frame` due tracks are chosen, those never chosen first, then those
//! waiting longest; the others are counted as skipped and stay due for the next frame, so the
//! classifier never adds more than `max_per_frame` crops to one frame's work.

use std::collections::HashMap;

use super::tracker::TrackId;
use crate::detection::BoundingBox;

/// What makes a track worth a crop.
#[derive(Debug, Clone, PartialEq)]
pub struct CropRule {
    /// The detector class ids whose tracks get crops.
    pub classes: Vec<usize>,
    /// Smallest width and height of a box, in source pixels.
    pub min_size: f32,
    /// 0: once per track, again only at a better score; N: every N frames of the camera.
    pub every: u32,
    /// Also due when the box's area is at least this many times its area when last chosen;
    /// `None`: the box's size alone never makes a track due again.
    pub grown: Option<f32>,
}

/// One confirmed track on this frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub track: TrackId,
    pub class_id: usize,
    /// This frame's detection score.
    pub score: f32,
    /// Source pixels.
    pub bbox: BoundingBox,
}

/// The tracks chosen on one frame, in the order they were chosen, and how many due tracks the
/// bound left for a later frame.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Choice {
    pub chosen: Vec<TrackId>,
    pub skipped: usize,
}

/// When a track was last chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Chosen {
    frame: u64,
    score: f32,
    /// Of the box, in square source pixels.
    area: f32,
}

/// One camera's plan for one per-track model.
#[derive(Debug, Clone)]
pub struct CropPlan {
    rule: CropRule,
    max_per_frame: usize,
    /// Frames seen, this one included.
    frame: u64,
    chosen: HashMap<TrackId, Chosen>,
}

impl CropPlan {
    pub fn new(rule: CropRule, max_per_frame: usize) -> CropPlan {
        CropPlan { rule, max_per_frame, frame: 0, chosen: HashMap::new() }
    }

    /// The tracks to crop on this frame, of `tracks` (the camera's confirmed tracks); called
    /// once per frame of the camera. The chosen tracks count as cropped at this frame's score.
    pub fn choose(&mut self, tracks: &[Candidate]) -> Choice {
        self.frame += 1;
        let mut due: Vec<(Option<u64>, &Candidate)> = tracks
            .iter()
            .filter(|track| self.is_due(track))
            .map(|track| (self.chosen.get(&track.track).map(|chosen| chosen.frame), track))
            .collect();
        // Never chosen (`None`) first, then the longest waiting; ties keep the tracks' order.
        due.sort_by_key(|(last, _)| *last);
        let skipped = due.len().saturating_sub(self.max_per_frame);
        let mut choice = Choice { chosen: Vec::with_capacity(due.len() - skipped), skipped };
        for (_, track) in due.into_iter().take(self.max_per_frame) {
            let area = area(&track.bbox);
            self.chosen.insert(track.track, Chosen { frame: self.frame, score: track.score, area });
            choice.chosen.push(track.track);
        }
        choice
    }

    /// Forgets a track that ended: its id is never seen again, and the plan holds no more
    /// tracks than the tracker does.
    pub fn forget(&mut self, track: TrackId) {
        self.chosen.remove(&track);
    }

    fn is_due(&self, track: &Candidate) -> bool {
        let (width, height) = (track.bbox.x2 - track.bbox.x1, track.bbox.y2 - track.bbox.y1);
        if !self.rule.classes.contains(&track.class_id) || width < self.rule.min_size || height < self.rule.min_size {
            return false;
        }
        let grown = |last: &Chosen| self.rule.grown.is_some_and(|grown| area(&track.bbox) >= last.area * grown);
        match self.chosen.get(&track.track) {
            None => true,
            Some(last) if grown(last) => true,
            Some(last) if self.rule.every == 0 => track.score > last.score,
            Some(last) => self.frame - last.frame >= u64::from(self.rule.every),
        }
    }
}

fn area(bbox: &BoundingBox) -> f32 {
    (bbox.x2 - bbox.x1) * (bbox.y2 - bbox.y1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAR: usize = 2;
    const PERSON: usize = 0;

    fn track(track: TrackId, class_id: usize, score: f32, size: f32) -> Candidate {
        Candidate { track, class_id, score, bbox: BoundingBox { x1: 10.0, y1: 20.0, x2: 10.0 + size, y2: 20.0 + size } }
    }

    fn plan(every: u32, max_per_frame: usize) -> CropPlan {
        CropPlan::new(CropRule { classes: vec![CAR], min_size: 32.0, every, grown: None }, max_per_frame)
    }

    #[test]
    fn a_track_is_chosen_once_and_again_only_at_a_better_score() {
        let mut plan = plan(0, 4);
        assert_eq!(plan.choose(&[track(1, CAR, 0.6, 64.0)]).chosen, [1]);
        assert_eq!(plan.choose(&[track(1, CAR, 0.6, 64.0)]).chosen, Vec::<TrackId>::new());
        assert_eq!(plan.choose(&[track(1, CAR, 0.5, 64.0)]).chosen, Vec::<TrackId>::new());
        assert_eq!(plan.choose(&[track(1, CAR, 0.8, 64.0)]).chosen, [1], "a better detection");
        assert_eq!(plan.choose(&[track(1, CAR, 0.7, 64.0)]).chosen, Vec::<TrackId>::new());
    }

    #[test]
    fn only_the_rules_classes_and_boxes_of_at_least_min_size_are_chosen() {
        let mut plan = plan(0, 4);
        let tracks = [track(1, PERSON, 0.9, 64.0), track(2, CAR, 0.9, 31.0), track(3, CAR, 0.9, 32.0)];
        assert_eq!(plan.choose(&tracks).chosen, [3]);
        assert_eq!(plan.choose(&[track(2, CAR, 0.9, 40.0)]).chosen, [2], "the box grew");
    }

    #[test]
    fn with_every_a_track_is_chosen_every_n_frames_of_its_camera() {
        let mut plan = plan(3, 4);
        let chosen_at: Vec<usize> =
            (1..=10).filter(|_| !plan.choose(&[track(7, CAR, 0.5, 64.0)]).chosen.is_empty()).collect();
        assert_eq!(chosen_at, [1, 4, 7, 10]);
    }

    #[test]
    fn with_grown_a_track_whose_box_grew_that_much_is_chosen_again() {
        let mut plan = CropPlan::new(CropRule { classes: vec![CAR], min_size: 32.0, every: 0, grown: Some(2.0) }, 4);
        assert_eq!(plan.choose(&[track(1, CAR, 0.6, 40.0)]).chosen, [1]);
        assert_eq!(plan.choose(&[track(1, CAR, 0.5, 56.0)]).chosen, Vec::<TrackId>::new(), "1.96 times the area");
        assert_eq!(plan.choose(&[track(1, CAR, 0.5, 57.0)]).chosen, [1], "2.03 times the area");
        assert_eq!(plan.choose(&[track(1, CAR, 0.5, 60.0)]).chosen, Vec::<TrackId>::new(), "against the last crop's");
    }

    #[test]
    fn the_bound_counts_what_it_skips_and_serves_the_skipped_tracks_first_next() {
        let mut plan = plan(2, 2);
        let tracks: Vec<Candidate> = (1..=5).map(|id| track(id, CAR, 0.9, 64.0)).collect();
        assert_eq!(plan.choose(&tracks), Choice { chosen: vec![1, 2], skipped: 3 });
        assert_eq!(plan.choose(&tracks), Choice { chosen: vec![3, 4], skipped: 1 });
        // Frame 3: 5 was never chosen; 1 and 2 are due again (every 2) and wait longest after it.
        assert_eq!(plan.choose(&tracks), Choice { chosen: vec![5, 1], skipped: 1 });
    }

    #[test]
    fn a_forgotten_track_is_no_longer_held() {
        let mut plan = plan(0, 4);
        plan.choose(&[track(1, CAR, 0.9, 64.0), track(2, CAR, 0.9, 64.0)]);
        plan.forget(1);
        assert_eq!(plan.chosen.len(), 1);
    }
}
