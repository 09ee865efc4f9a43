//! One camera's per-track models: after each tracking update, the camera's [`CropPlan`] of every
//! model chooses at most [`MAX_CROPS_PER_FRAME`] confirmed tracks, the worker's session of that
//! model answers on their crops of the frame, and each answer is folded into what its track keeps
//! ([`TrackAnswer::absorb`]) until the track ends; every event of the track carries the latest
//! attributes. Tracks the bound leaves for a later frame are counted
//! ([`CameraPerTrack::take_skipped`]).
//!
//! Owns: [`CameraPerTrack`], the same for every kind of model. Must not: track (it reads the
//! camera's [`Tracker`] after its update), or know how a kind reads its outputs
//! (`super::kind`).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use super::attribute::{Attributes, TrackAttributes};
use super::kind::TrackAnswer;
use super::sessions::PerTrackSessions;
use crate::frame::FrameSlot;
use crate::preprocess::Roi;
use crate::track::crop_plan::{Candidate, CropPlan, CropRule};
use crate::track::tracker::{Lifecycle, TrackId, Tracker};

/// Most crops one model runs on one frame of a camera: what a per-track model may add to a
/// frame's work, so the next frame is never delayed by more than this many crops' inference.
pub const MAX_CROPS_PER_FRAME: usize = 4;

/// One per-track model on this camera: its `[models.<name>]` name and plan.
#[derive(Debug)]
struct CameraModel {
    name: String,
    plan: CropPlan,
    /// The crops it ran on the last frame, and how long that took (`None`: it did not run).
    ran: Option<(usize, Duration)>,
}

/// The camera's per-track models, what its live tracks keep of their answers, and reused buffers.
#[derive(Debug)]
pub struct CameraPerTrack {
    camera: String,
    models: Vec<CameraModel>,
    /// What each live track keeps of each model's answers, by model name.
    kept: HashMap<TrackId, BTreeMap<String, Box<dyn TrackAnswer>>>,
    /// The same, as the outlets get it.
    attributes: TrackAttributes,
    /// Due tracks left for a later frame by the bound, since last taken.
    skipped: u64,
    candidates: Vec<Candidate>,
    rois: Vec<Roi>,
    scores: Vec<f32>,
    chosen: Vec<TrackId>,
    answers: Vec<Option<Box<dyn TrackAnswer>>>,
}

impl CameraPerTrack {
    /// Runs the models `rules` name (by `[models.<name>]` name) on the tracks of camera `camera`.
    pub fn new(camera: &str, rules: &[(String, CropRule)]) -> CameraPerTrack {
        CameraPerTrack {
            camera: camera.into(),
            models: rules
                .iter()
                .map(|(name, rule)| CameraModel {
                    name: name.clone(),
                    plan: CropPlan::new(rule.clone(), MAX_CROPS_PER_FRAME),
                    ran: None,
                })
                .collect(),
            kept: HashMap::new(),
            attributes: TrackAttributes::new(),
            skipped: 0,
            candidates: Vec::new(),
            rois: Vec::new(),
            scores: Vec::new(),
            chosen: Vec::new(),
            answers: Vec::new(),
        }
    }

    /// Runs each model on the crops of the confirmed tracks of `tracker` (just updated with the
    /// frame in `slot`) that its plan chooses, and keeps the answers. A model this worker has no
    /// session of (a sink without per-track models) is passed over; one that fails is logged and
    /// its tracks keep what they had.
    pub fn step(&mut self, slot: &FrameSlot, tracker: &Tracker, sessions: &mut PerTrackSessions) {
        if self.models.is_empty() {
            return;
        }
        self.candidates.clear();
        for report in tracker.reports() {
            if !matches!(report.lifecycle, Lifecycle::Observed { .. }) {
                continue;
            }
            let Some(track) = tracker.track(report.slot) else { continue };
            let Some(id) = track.id() else { continue };
            self.candidates.push(Candidate {
                track: id,
                class_id: track.class_id(),
                score: track.last_score(),
                bbox: *track.bbox(),
            });
        }
        let meta = slot.meta();
        for model in &mut self.models {
            model.ran = None;
            let choice = model.plan.choose(&self.candidates);
            self.skipped += choice.skipped as u64;
            let Some(index) = sessions.index_of(&model.name) else { continue };
            self.rois.clear();
            self.scores.clear();
            self.chosen.clear();
            for id in choice.chosen {
                let Some(candidate) = self.candidates.iter().find(|candidate| candidate.track == id) else {
                    continue;
                };
                let b = candidate.bbox;
                if let Some(roi) = Roi::around_box(meta, b.x1, b.y1, b.x2, b.y2) {
                    self.rois.push(roi);
                    self.scores.push(candidate.score);
                    self.chosen.push(id);
                }
            }
            if self.rois.is_empty() {
                continue;
            }
            self.answers.clear();
            let started = Instant::now();
            if let Err(e) = sessions.run(index, slot, &self.rois, &self.scores, &mut self.answers) {
                log::warn!("camera {}: models.{} failed on frame {}: {e}", self.camera, model.name, meta.sequence);
                continue;
            }
            model.ran = Some((self.rois.len(), started.elapsed()));
            for (id, answer) in self.chosen.iter().zip(self.answers.drain(..)) {
                let Some(answer) = answer else { continue };
                let kept = self.kept.entry(*id).or_default();
                let answer = match kept.remove(&model.name) {
                    Some(mut earlier) => {
                        earlier.absorb(answer);
                        earlier
                    }
                    None => answer,
                };
                match answer.attribute() {
                    Some(attribute) => {
                        self.attributes.entry(*id).or_default().insert(model.name.clone(), attribute);
                    }
                    // A track that has no attribute left has no entry (messages carry none).
                    None => {
                        if let Some(attributes) = self.attributes.get_mut(id) {
                            attributes.remove(&model.name);
                            if attributes.is_empty() {
                                self.attributes.remove(id);
                            }
                        }
                    }
                }
                kept.insert(model.name.clone(), answer);
            }
        }
    }

    /// The attributes of the camera's live tracks.
    pub fn attributes(&self) -> &TrackAttributes {
        &self.attributes
    }

    /// The attributes of live track `track` (empty while no model answered on it).
    pub fn attributes_of(&self, track: TrackId) -> Attributes {
        self.attributes.get(&track).cloned().unwrap_or_default()
    }

    /// The crops model `model` ran on in the last step, and how long that took (`None`: it ran on
    /// none).
    pub fn ran(&self, model: &str) -> Option<(usize, Duration)> {
        self.models.iter().find(|candidate| candidate.name == model)?.ran
    }

    /// What live track `track` keeps of model `model`'s answers (`None`: no answer yet).
    pub fn answer_of(&self, track: TrackId, model: &str) -> Option<&dyn TrackAnswer> {
        self.kept.get(&track)?.get(model).map(Box::as_ref)
    }

    /// Track `track` ended: what it kept is let go, and its last attributes returned (for its
    /// `end` event).
    pub fn end(&mut self, track: TrackId) -> Attributes {
        self.kept.remove(&track);
        for model in &mut self.models {
            model.plan.forget(track);
        }
        self.attributes.remove(&track).unwrap_or_default()
    }

    /// Due tracks the per-frame bound left for a later frame since the last call.
    pub fn take_skipped(&mut self) -> u64 {
        std::mem::take(&mut self.skipped)
    }
}
