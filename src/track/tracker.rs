//! The multi-object tracker of one camera: which detection is which object, frame after frame.
//!
//! Owns: track lifecycles (tentative → confirmed → lost → ended), ByteTrack-style two-stage
//! association, absorbing duplicate boxes, the score-weighted label vote, the cap on live tracks,
//! and track ids. Must not: know about zones, lines, events, messages or wall-clock reading — time
//! comes in with each frame (its capture time, in seconds), so tests and replays drive it with
//! synthetic times and it behaves the same at 5 and 30 frames per second.
//!
//! One update, in order:
//! 1. Every live track's Kalman filter predicts its box at the frame's time; a confirmed track not
//!    seen for more than `max_lost_s` seconds ends (before matching: it has ended whether or not its
//!    object shows up on this frame, and it frees its place under the cap).
//! 2. Detections scoring at least `high_score` are matched to every live track (IoU ≥ `match_iou`).
//! 3. Lower-scoring detections are matched to the confirmed tracks left over, at a stricter IoU
//!    ([`LOW_SCORE_MIN_IOU`]): a partly occluded object keeps its track through a weak detection,
//!    while a weak detection alone never starts a track (ByteTrack's second stage).
//! 4. Each detection still unmatched, best score first, is absorbed into the track of an already
//!    assigned detection it overlaps by [`DUPLICATE_IOU`] or more: per-class NMS leaves a `dog` and a
//!    `horse` box on one animal, and that is one object, one track, with both boxes voting for its
//!    label. Otherwise a high-scoring one starts a tentative track (if fewer than `max_tracks` live).
//! 5. A tentative track becomes confirmed — and gets its id — once it was seen on `min_hits` frames;
//!    a tentative track missing from a frame is discarded.
//!
//! Matching ignores classes, and a track's label is the class with the highest sum of detection
//! scores over its life, so a detector flipping between similar classes does not split the object.
//! Track ids count up from 1 per tracker, only confirmed tracks get one, and none is ever reused.
//! Once its buffers are warm, an update allocates nothing.

use super::association::Matcher;
use super::kalman::BoxFilter;
use crate::detection::{BoundingBox, Detection};

/// A confirmed track's number, unique per camera for the life of the process.
pub type TrackId = u64;

/// Minimum IoU for matching a detection below `high_score` to a track (ByteTrack's second stage).
pub const LOW_SCORE_MIN_IOU: f32 = 0.5;
/// An unmatched detection overlapping a detection already assigned to a track by at least this
/// much is the same object (a second class's box on it), not a new one.
pub const DUPLICATE_IOU: f32 = 0.7;
/// Distinct classes a track remembers votes for; a new class displaces the weakest when full.
const LABEL_CANDIDATES: usize = 4;

/// The tracker's settings (`[tracking]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrackerParams {
    /// A confirmed track unseen for longer than this (seconds) ends.
    pub max_lost_s: f64,
    /// Frames a track must be seen on before it is confirmed.
    pub min_hits: u32,
    /// Detections at or above this score start tracks and are matched first.
    pub high_score: f32,
    /// Minimum IoU between a track's predicted box and a detection for a match.
    pub match_iou: f32,
    /// Live tracks at most; further objects get no track until some end.
    pub max_tracks: usize,
}

/// What happened to a track in the last update (or [`Tracker::finish`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// Seen on this frame (matched, or created from a detection); `confirmed_now` when it reached
    /// `min_hits` on this frame and got its id.
    Observed { confirmed_now: bool },
    /// A track not seen on this frame, still within `max_lost_s`.
    Missed,
    /// A confirmed track that was lost too long (or finished). Readable until the next update.
    Ended,
    /// A tentative track that was not seen again. Readable until the next update.
    Discarded,
}

/// One track's fate in the last update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// Where the track lives ([`Tracker::track`]); stable for the track's life, reused after it.
    pub slot: usize,
    pub lifecycle: Lifecycle,
}

/// Score-weighted votes for a track's label.
#[derive(Debug, Clone, Copy, PartialEq)]
struct LabelVotes {
    entries: [(usize, f32); LABEL_CANDIDATES],
    len: usize,
}

impl LabelVotes {
    fn new(class_id: usize, weight: f32) -> LabelVotes {
        let mut votes = LabelVotes { entries: [(0, 0.0); LABEL_CANDIDATES], len: 0 };
        votes.add(class_id, weight);
        votes
    }

    fn add(&mut self, class_id: usize, weight: f32) {
        if let Some(entry) = self.entries[..self.len].iter_mut().find(|(class, _)| *class == class_id) {
            entry.1 += weight;
        } else if self.len < LABEL_CANDIDATES {
            self.entries[self.len] = (class_id, weight);
            self.len += 1;
        } else if let Some(weakest) =
            self.entries.iter_mut().min_by(|a, b| a.1.total_cmp(&b.1)).filter(|(_, w)| *w < weight)
        {
            *weakest = (class_id, weight);
        }
    }

    /// The class with the most weight; the earlier one on a tie.
    fn leader(&self) -> usize {
        let mut best = self.entries[0];
        for &entry in &self.entries[1..self.len] {
            if entry.1 > best.1 {
                best = entry;
            }
        }
        best.0
    }
}

/// One object being tracked.
#[derive(Debug, Clone)]
pub struct Track {
    id: Option<TrackId>,
    filter: BoxFilter,
    /// The box of the detection last matched.
    bbox: BoundingBox,
    last_score: f32,
    best_score: f32,
    votes: LabelVotes,
    first_seen: f64,
    last_seen: f64,
    /// Time the filter's estimate refers to.
    predicted_at: f64,
    hits: u32,
    /// Matched on the current frame.
    observed: bool,
    /// Reported [`Lifecycle::Ended`] or [`Lifecycle::Discarded`]; freed on the next update.
    gone: bool,
}

impl Track {
    /// The public id, once confirmed.
    pub fn id(&self) -> Option<TrackId> {
        self.id
    }

    /// The class with the highest score-weighted vote.
    pub fn class_id(&self) -> usize {
        self.votes.leader()
    }

    /// The box of the detection last matched (not the prediction).
    pub fn bbox(&self) -> &BoundingBox {
        &self.bbox
    }

    /// The filter's current estimate of the box.
    pub fn predicted_bbox(&self) -> BoundingBox {
        self.filter.bbox()
    }

    /// Score of the detection last matched.
    pub fn last_score(&self) -> f32 {
        self.last_score
    }

    /// Best score of any detection matched so far.
    pub fn best_score(&self) -> f32 {
        self.best_score
    }

    /// Time (seconds) of the first and the latest frame the track was seen on.
    pub fn first_seen(&self) -> f64 {
        self.first_seen
    }

    pub fn last_seen(&self) -> f64 {
        self.last_seen
    }

    /// Frames the track was seen on.
    pub fn hits(&self) -> u32 {
        self.hits
    }

    pub fn is_confirmed(&self) -> bool {
        self.id.is_some()
    }
}

/// Tracks the objects of one camera.
#[derive(Debug)]
pub struct Tracker {
    params: TrackerParams,
    slots: Vec<Option<Track>>,
    free: Vec<usize>,
    next_id: TrackId,
    live: usize,
    reports: Vec<Report>,
    /// Per detection of the last update: the slot of the track it was assigned to.
    assigned: Vec<Option<usize>>,
    /// Set while the track cap turns objects away, so the warning is logged once per episode.
    cap_reached: bool,
    matcher: Matcher,
    candidate_slots: Vec<usize>,
    candidate_boxes: Vec<BoundingBox>,
    detection_indices: Vec<usize>,
    detection_boxes: Vec<BoundingBox>,
    matches: Vec<(usize, usize)>,
}

impl Tracker {
    pub fn new(params: TrackerParams) -> Tracker {
        Tracker {
            params,
            slots: Vec::new(),
            free: Vec::new(),
            next_id: 1,
            live: 0,
            reports: Vec::new(),
            assigned: Vec::new(),
            cap_reached: false,
            matcher: Matcher::default(),
            candidate_slots: Vec::new(),
            candidate_boxes: Vec::new(),
            detection_indices: Vec::new(),
            detection_boxes: Vec::new(),
            matches: Vec::new(),
        }
    }

    /// New settings (SIGHUP); live tracks stay.
    pub fn set_params(&mut self, params: TrackerParams) {
        self.params = params;
    }

    pub fn params(&self) -> &TrackerParams {
        &self.params
    }

    /// The track in `slot`, including one reported ended or discarded by the last update.
    pub fn track(&self, slot: usize) -> Option<&Track> {
        self.slots.get(slot).and_then(Option::as_ref)
    }

    /// What happened to each track in the last update, in slot order.
    pub fn reports(&self) -> &[Report] {
        &self.reports
    }

    /// The slot of the track each detection of the last update belongs to (`None`: no track).
    pub fn assignments(&self) -> &[Option<usize>] {
        &self.assigned
    }

    /// Tracks alive (tentative or confirmed, not ended).
    pub fn live_tracks(&self) -> usize {
        self.live
    }

    /// Feeds one frame's detections, captured at `at` seconds.
    pub fn update(&mut self, detections: &[Detection], at: f64) {
        self.retire();
        self.assigned.clear();
        self.assigned.resize(detections.len(), None);
        for track in self.slots.iter_mut().flatten() {
            track.filter.predict((at - track.predicted_at) as f32);
            track.predicted_at = track.predicted_at.max(at);
            track.observed = false;
        }
        self.expire(at);

        // Stage 1: confident detections against every live track.
        let high = self.params.high_score;
        self.select_candidates(|_| true);
        self.select_detections(detections, |d, _| d.score >= high);
        self.match_and_apply(detections, self.params.match_iou, at);

        // Stage 2: weak detections against the confirmed tracks left over.
        self.select_candidates(|t| t.is_confirmed() && !t.observed);
        self.select_detections(detections, |d, assigned| assigned.is_none() && d.score < high);
        self.match_and_apply(detections, self.params.match_iou.max(LOW_SCORE_MIN_IOU), at);

        self.absorb_or_start(detections, at);
        self.settle_lifecycles();
    }

    /// Whether every live track is confirmed and was seen on the last update: no track waits for
    /// its confirmation or counts down to its end, so a frame without motion may skip the update
    /// ([`Tracker::hold`]) without changing what the tracks become.
    pub fn is_settled(&self) -> bool {
        self.slots.iter().flatten().filter(|t| !t.gone).all(|t| t.is_confirmed() && t.observed)
    }

    /// A frame captured at `at` seconds that went to no detector because nothing moved on it (the
    /// motion gate held it). Every track seen on the last update is still where it was: it counts
    /// as seen at `at`, and its filter does not move its box over the time held. So the lost time
    /// that ends a track is time the detector looked and did not find it, never time it did not
    /// look: a parked car keeps its track between the floor rate's updates, however short
    /// `max_lost_s` is beside them. Reports and assignments stay the last update's: a held frame
    /// has no events.
    pub fn hold(&mut self, at: f64) {
        for track in self.slots.iter_mut().flatten().filter(|t| !t.gone) {
            track.predicted_at = track.predicted_at.max(at);
            if track.observed {
                track.last_seen = track.last_seen.max(at);
            }
        }
    }

    /// Ends every confirmed track and discards tentative ones (camera stopped, shutdown).
    pub fn finish(&mut self) {
        self.retire();
        self.assigned.clear();
        for (slot, track) in self.slots.iter_mut().enumerate() {
            if let Some(track) = track {
                let lifecycle = if track.is_confirmed() { Lifecycle::Ended } else { Lifecycle::Discarded };
                track.gone = true;
                track.observed = false;
                self.reports.push(Report { slot, lifecycle });
            }
        }
        self.live = 0;
    }

    /// Frees the tracks reported gone by the previous update.
    fn retire(&mut self) {
        for report in &self.reports {
            if matches!(report.lifecycle, Lifecycle::Ended | Lifecycle::Discarded) {
                self.slots[report.slot] = None;
                self.free.push(report.slot);
            }
        }
        self.reports.clear();
    }

    /// Ends the confirmed tracks unseen for longer than `max_lost_s` before anything is matched:
    /// such a track has ended whether or not its object shows up again on this frame, and its place
    /// under the cap is free for new objects.
    fn expire(&mut self, at: f64) {
        for (slot, track) in self.slots.iter_mut().enumerate() {
            if let Some(track) =
                track.as_mut().filter(|t| t.is_confirmed() && at - t.last_seen > self.params.max_lost_s)
            {
                track.gone = true;
                self.live -= 1;
                self.reports.push(Report { slot, lifecycle: Lifecycle::Ended });
            }
        }
    }

    fn select_candidates(&mut self, wanted: impl Fn(&Track) -> bool) {
        self.candidate_slots.clear();
        self.candidate_boxes.clear();
        for (slot, track) in self.slots.iter().enumerate() {
            if let Some(track) = track.as_ref().filter(|t| !t.gone && wanted(t)) {
                self.candidate_slots.push(slot);
                self.candidate_boxes.push(track.filter.bbox());
            }
        }
    }

    fn select_detections(&mut self, detections: &[Detection], wanted: impl Fn(&Detection, Option<usize>) -> bool) {
        self.detection_indices.clear();
        self.detection_boxes.clear();
        for (index, detection) in detections.iter().enumerate() {
            if is_usable(detection) && wanted(detection, self.assigned[index]) {
                self.detection_indices.push(index);
                self.detection_boxes.push(detection.bbox);
            }
        }
    }

    fn match_and_apply(&mut self, detections: &[Detection], min_iou: f32, at: f64) {
        self.matcher.assign(&self.candidate_boxes, &self.detection_boxes, min_iou, &mut self.matches);
        for &(candidate, index) in &self.matches {
            let (slot, detection_index) = (self.candidate_slots[candidate], self.detection_indices[index]);
            let detection = &detections[detection_index];
            if let Some(track) = self.slots[slot].as_mut() {
                track.filter.update(&detection.bbox);
                track.bbox = detection.bbox;
                track.last_score = detection.score;
                track.best_score = track.best_score.max(detection.score);
                track.votes.add(detection.class_id, detection.score);
                track.last_seen = at;
                track.hits += 1;
                track.observed = true;
                self.assigned[detection_index] = Some(slot);
            }
        }
    }

    /// Step 4: duplicates join the track of the box they overlap; other confident ones start tracks.
    fn absorb_or_start(&mut self, detections: &[Detection], at: f64) {
        self.detection_indices.clear();
        self.detection_indices
            .extend((0..detections.len()).filter(|&i| self.assigned[i].is_none() && is_usable(&detections[i])));
        self.detection_indices
            .sort_unstable_by(|&a, &b| detections[b].score.total_cmp(&detections[a].score).then(a.cmp(&b)));
        for position in 0..self.detection_indices.len() {
            let index = self.detection_indices[position];
            let detection = &detections[index];
            let duplicate_of = (0..detections.len())
                .filter_map(|other| Some((self.assigned[other]?, detections[other].bbox.iou(&detection.bbox))))
                .filter(|&(_, iou)| iou >= DUPLICATE_IOU)
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(slot, _)| slot);
            if let Some(slot) = duplicate_of {
                if let Some(track) = self.slots[slot].as_mut() {
                    track.votes.add(detection.class_id, detection.score);
                }
                self.assigned[index] = Some(slot);
            } else if detection.score >= self.params.high_score {
                if self.live >= self.params.max_tracks {
                    if !self.cap_reached {
                        log::warn!(
                            "tracking: {} live tracks (tracking.max_tracks); new objects get no track until some end",
                            self.live
                        );
                        self.cap_reached = true;
                    }
                    continue;
                }
                let slot = self.start_track(detection, at);
                self.assigned[index] = Some(slot);
            }
        }
        if self.live < self.params.max_tracks {
            self.cap_reached = false;
        }
    }

    fn start_track(&mut self, detection: &Detection, at: f64) -> usize {
        let track = Track {
            id: None,
            filter: BoxFilter::new(&detection.bbox),
            bbox: detection.bbox,
            last_score: detection.score,
            best_score: detection.score,
            votes: LabelVotes::new(detection.class_id, detection.score),
            first_seen: at,
            last_seen: at,
            predicted_at: at,
            hits: 1,
            observed: true,
            gone: false,
        };
        self.live += 1;
        match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(track);
                slot
            }
            None => {
                self.slots.push(Some(track));
                self.slots.len() - 1
            }
        }
    }

    /// Step 5: confirmation and discarding; reports in slot order.
    fn settle_lifecycles(&mut self) {
        for (slot, track) in self.slots.iter_mut().enumerate() {
            let Some(track) = track.as_mut().filter(|t| !t.gone) else { continue };
            let lifecycle = if track.observed {
                let confirmed_now = track.id.is_none() && track.hits >= self.params.min_hits;
                if confirmed_now {
                    track.id = Some(self.next_id);
                    self.next_id += 1;
                }
                Lifecycle::Observed { confirmed_now }
            } else if !track.is_confirmed() {
                track.gone = true;
                self.live -= 1;
                Lifecycle::Discarded
            } else {
                Lifecycle::Missed
            };
            self.reports.push(Report { slot, lifecycle });
        }
        self.reports.sort_unstable_by_key(|report| report.slot);
    }
}

/// Finite score and a box with a positive area; anything else is ignored.
fn is_usable(detection: &Detection) -> bool {
    let b = &detection.bbox;
    detection.score.is_finite() && [b.x1, b.y1, b.x2, b.y2].iter().all(|v| v.is_finite()) && b.x2 > b.x1 && b.y2 > b.y1
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOG: usize = 17;
    const HORSE: usize = 18;
    const PERSON: usize = 0;

    fn params() -> TrackerParams {
        TrackerParams { max_lost_s: 1.0, min_hits: 3, high_score: 0.5, match_iou: 0.2, max_tracks: 64 }
    }

    fn det(class_id: usize, score: f32, x: f32, y: f32) -> Detection {
        Detection { class_id, score, bbox: BoundingBox { x1: x, y1: y, x2: x + 100.0, y2: y + 80.0 } }
    }

    /// Ids of the confirmed tracks each detection of the last update belongs to.
    fn ids(tracker: &Tracker) -> Vec<Option<TrackId>> {
        tracker.assignments().iter().map(|slot| slot.and_then(|s| tracker.track(s)?.id())).collect()
    }

    fn lifecycles(tracker: &Tracker) -> Vec<Lifecycle> {
        tracker.reports().iter().map(|r| r.lifecycle).collect()
    }

    #[test]
    fn a_moving_object_is_confirmed_after_min_hits_and_keeps_its_id() {
        let mut tracker = Tracker::new(params());
        let mut seen = Vec::new();
        for frame in 0..10 {
            tracker.update(&[det(PERSON, 0.9, 20.0 * frame as f32, 100.0)], frame as f64 * 0.2);
            seen.push(ids(&tracker)[0]);
        }
        assert_eq!(seen[..2], [None, None], "tentative for the first two frames");
        assert!(seen[2..].iter().all(|id| *id == Some(1)), "{seen:?}");
        assert_eq!(tracker.live_tracks(), 1);
        let track = tracker.track(tracker.assignments()[0].expect("assigned")).expect("track");
        assert_eq!((track.hits(), track.first_seen(), track.last_seen()), (10, 0.0, 9.0 * 0.2));
    }

    #[test]
    fn confirmation_is_reported_once() {
        let mut tracker = Tracker::new(params());
        let mut confirmations = 0;
        for frame in 0..6 {
            tracker.update(&[det(PERSON, 0.9, 0.0, 0.0)], frame as f64);
            confirmations +=
                tracker.reports().iter().filter(|r| r.lifecycle == Lifecycle::Observed { confirmed_now: true }).count();
        }
        assert_eq!(confirmations, 1);
    }

    /// The detector flips dog/horse on one animal: one track, one id, labelled by the score-weighted
    /// majority.
    #[test]
    fn label_flips_keep_one_track_with_the_majority_label() {
        let mut tracker = Tracker::new(params());
        let classes = [DOG, HORSE, DOG, DOG, HORSE, DOG, HORSE, DOG];
        for (frame, class) in classes.iter().enumerate() {
            tracker.update(&[det(*class, 0.8, 5.0 * frame as f32, 50.0)], frame as f64 * 0.1);
        }
        assert_eq!(ids(&tracker), [Some(1)]);
        assert_eq!(tracker.live_tracks(), 1);
        let track = tracker.track(tracker.assignments()[0].expect("assigned")).expect("track");
        assert_eq!(track.class_id(), DOG);
    }

    /// Per-class NMS leaves a dog box and a horse box on one animal: both belong to one track.
    #[test]
    fn duplicate_boxes_of_other_classes_are_absorbed_not_tracked() {
        let mut tracker = Tracker::new(params());
        for frame in 0..6 {
            let x = 10.0 * frame as f32;
            let horse = Detection { class_id: HORSE, score: 0.6, bbox: det(DOG, 0.0, x + 3.0, 52.0).bbox };
            tracker.update(&[horse, det(DOG, 0.85, x, 50.0)], frame as f64 * 0.2);
        }
        assert_eq!(ids(&tracker), [Some(1), Some(1)], "both boxes carry the one track's id");
        assert_eq!(tracker.live_tracks(), 1);
        let track = tracker.track(tracker.assignments()[1].expect("assigned")).expect("track");
        assert_eq!(track.class_id(), DOG, "the higher-scoring class wins the vote");
        assert_eq!(track.hits(), 6, "a duplicate box is not an extra sighting");
    }

    #[test]
    fn a_short_gap_is_bridged_in_time_not_frames() {
        // The same 0.8 s gap at 5 and 30 fps: the track survives (max_lost_s = 1.0) and keeps its id,
        // and the Kalman prediction carries it to where the object reappears.
        for fps in [5.0, 30.0] {
            let mut tracker = Tracker::new(params());
            let dt = 1.0 / fps;
            let position = |t: f64| (200.0 * t) as f32;
            let frames = (fps as usize) + 1;
            for n in 0..frames {
                let t = n as f64 * dt;
                tracker.update(&[det(PERSON, 0.9, position(t), 100.0)], t);
            }
            let before = ids(&tracker)[0];
            let last_seen = (frames - 1) as f64 * dt;
            let reappears = last_seen + 0.8;
            let mut t = last_seen + dt;
            while t < reappears - dt / 2.0 {
                tracker.update(&[], t);
                assert_eq!(lifecycles(&tracker), [Lifecycle::Missed], "{fps} fps at {t}");
                t += dt;
            }
            tracker.update(&[det(PERSON, 0.9, position(reappears), 100.0)], reappears);
            assert_eq!(ids(&tracker)[0], before, "{fps} fps: same id after the gap");
            assert!(before.is_some());
        }
    }

    #[test]
    fn a_track_lost_longer_than_max_lost_s_ends_at_any_frame_rate() {
        for fps in [5.0, 30.0] {
            let mut tracker = Tracker::new(params());
            let dt = 1.0 / fps;
            let mut t = 0.0;
            for _ in 0..5 {
                tracker.update(&[det(PERSON, 0.9, 0.0, 0.0)], t);
                t += dt;
            }
            let last_seen = t - dt;
            let mut ended_at = None;
            while ended_at.is_none() {
                tracker.update(&[], t);
                if lifecycles(&tracker) == [Lifecycle::Ended] {
                    ended_at = Some(t);
                }
                t += dt;
            }
            let lost_for = ended_at.expect("ended") - last_seen;
            assert!(lost_for > 1.0 && lost_for <= 1.0 + dt + 1e-9, "{fps} fps: ended after {lost_for} s");
            tracker.update(&[], t);
            assert_eq!(tracker.live_tracks(), 0);
            assert!(tracker.reports().is_empty(), "an ended track is reported once");
        }
    }

    #[test]
    fn tentative_tracks_missing_a_frame_are_discarded_without_using_an_id() {
        let mut tracker = Tracker::new(params());
        tracker.update(&[det(PERSON, 0.9, 0.0, 0.0)], 0.0);
        tracker.update(&[], 0.1);
        assert_eq!(lifecycles(&tracker), [Lifecycle::Discarded]);
        for frame in 2..6 {
            tracker.update(&[det(PERSON, 0.9, 500.0, 0.0)], frame as f64 * 0.1);
        }
        assert_eq!(ids(&tracker), [Some(1)], "the discarded track took no id");
    }

    #[test]
    fn weak_detections_extend_confirmed_tracks_but_never_start_one() {
        let mut tracker = Tracker::new(params());
        for frame in 0..4 {
            tracker.update(&[det(PERSON, 0.9, 0.0, 0.0)], frame as f64 * 0.1);
        }
        for frame in 4..8 {
            // Partly occluded: weak, but where the track is.
            tracker.update(&[det(PERSON, 0.3, 2.0, 0.0), det(PERSON, 0.3, 600.0, 0.0)], frame as f64 * 0.1);
            assert_eq!(ids(&tracker), [Some(1), None]);
        }
        assert_eq!(tracker.live_tracks(), 1, "the lone weak detection started nothing");
    }

    #[test]
    fn two_objects_keep_their_ids_and_ids_are_never_reused() {
        let mut tracker = Tracker::new(params());
        for frame in 0..5 {
            let x = 30.0 * frame as f32;
            tracker.update(&[det(PERSON, 0.9, x, 0.0), det(DOG, 0.8, 900.0 - x, 300.0)], frame as f64 * 0.2);
        }
        assert_eq!(ids(&tracker), [Some(1), Some(2)]);
        // Reported in a different order, they keep their ids.
        tracker.update(&[det(DOG, 0.8, 750.0, 300.0), det(PERSON, 0.9, 150.0, 0.0)], 1.0);
        assert_eq!(ids(&tracker), [Some(2), Some(1)]);
        tracker.finish();
        assert_eq!(lifecycles(&tracker), [Lifecycle::Ended, Lifecycle::Ended]);
        for frame in 0..3 {
            tracker.update(&[det(PERSON, 0.9, 0.0, 0.0)], 10.0 + frame as f64 * 0.2);
        }
        assert_eq!(ids(&tracker), [Some(3)]);
    }

    #[test]
    fn the_track_cap_holds_and_lifts_when_tracks_end() {
        let mut tracker = Tracker::new(TrackerParams { max_tracks: 2, min_hits: 1, ..params() });
        let crowd: Vec<Detection> = (0..4).map(|i| det(PERSON, 0.9, 200.0 * i as f32, 0.0)).collect();
        tracker.update(&crowd, 0.0);
        assert_eq!(tracker.live_tracks(), 2);
        assert_eq!(ids(&tracker), [Some(1), Some(2), None, None]);
        tracker.update(&crowd[2..], 0.1);
        tracker.update(&crowd[2..], 1.5);
        assert_eq!(tracker.live_tracks(), 2, "the first two ended, two new ones started");
        assert_eq!(ids(&tracker), [Some(3), Some(4)]);
    }

    #[test]
    fn malformed_detections_are_ignored() {
        let mut tracker = Tracker::new(TrackerParams { min_hits: 1, ..params() });
        let nan = Detection { class_id: 0, score: f32::NAN, bbox: det(0, 0.0, 0.0, 0.0).bbox };
        let empty = Detection { class_id: 0, score: 0.9, bbox: BoundingBox { x1: 5.0, y1: 5.0, x2: 5.0, y2: 9.0 } };
        let infinite =
            Detection { class_id: 0, score: 0.9, bbox: BoundingBox { x1: 0.0, y1: 0.0, x2: f32::INFINITY, y2: 9.0 } };
        tracker.update(&[nan, empty, infinite], 0.0);
        assert_eq!(tracker.live_tracks(), 0);
        assert_eq!(ids(&tracker), [None, None, None]);
    }

    #[test]
    fn label_votes_keep_the_strongest_candidates() {
        let mut votes = LabelVotes::new(1, 0.5);
        for class in 2..=4 {
            votes.add(class, 0.4);
        }
        votes.add(9, 0.1);
        assert!(!votes.entries.iter().any(|(c, _)| *c == 9), "a weaker newcomer does not displace anyone");
        votes.add(9, 0.45);
        assert!(votes.entries.iter().any(|(c, _)| *c == 9));
        assert_eq!(votes.leader(), 1);
        votes.add(9, 0.2);
        assert_eq!(votes.leader(), 9);
    }

    #[test]
    fn held_frames_keep_a_standing_object_on_its_track_between_sparse_updates() {
        // Confirmed at 5 frames a second, then the detector looks every 5 s only (the floor
        // rate), far beyond max_lost_s = 1 s; the frames between are held.
        let mut tracker = Tracker::new(params());
        for frame in 0..3 {
            tracker.update(&[det(0, 0.9, 100.0, 100.0)], frame as f64 * 0.2);
        }
        assert!(tracker.is_settled());
        let id = ids(&tracker)[0].expect("confirmed");
        for frame in 3..300 {
            let at = frame as f64 * 0.2;
            if frame % 25 == 0 {
                tracker.update(&[det(0, 0.9, 100.0, 100.0)], at);
                assert_eq!(ids(&tracker), [Some(id)], "frame {frame}");
                assert!(tracker.reports().iter().all(|r| matches!(r.lifecycle, Lifecycle::Observed { .. })));
            } else {
                tracker.hold(at);
            }
        }
        let predicted = tracker.track(0).map(Track::predicted_bbox).expect("track");
        assert!(predicted.iou(&det(0, 0.9, 100.0, 100.0).bbox) > 0.99, "the box stayed: {predicted:?}");
    }

    #[test]
    fn a_missed_or_tentative_track_is_not_settled_and_holding_does_not_revive_it() {
        let mut tracker = Tracker::new(params());
        tracker.update(&[det(0, 0.9, 100.0, 100.0)], 0.0);
        assert!(!tracker.is_settled(), "tentative");
        for frame in 1..3 {
            tracker.update(&[det(0, 0.9, 100.0, 100.0)], frame as f64 * 0.2);
        }
        tracker.update(&[], 0.6);
        assert!(!tracker.is_settled(), "missed");
        // Time held does not count as seen for a track the detector missed: it ends on time.
        tracker.hold(1.0);
        tracker.hold(1.5);
        tracker.update(&[], 1.8);
        assert_eq!(tracker.reports()[0].lifecycle, Lifecycle::Ended);
    }
}
