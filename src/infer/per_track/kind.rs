//! What a kind of per-track model is: how its outputs for a batch of crops read as one answer per
//! crop, what a track keeps of its answers, and how its engine's answers are compared with the
//! CPU's. The classifier is the first kind
//! (`super::classifier`); the embedder (`super::embedder`: a vector per crop, averaged into a few
//! prototypes per track) the second.
//!
//! Owns: the [`PerTrackKind`] and [`TrackAnswer`] traits. Must not: choose tracks, cut crops or
//! run sessions (`super::camera` and `super::sessions` do, alike for every kind).

use std::any::Any;
use std::fmt::Debug;

use super::attribute::Attribute;
use crate::backend::Backend;
use crate::config::models::PerTrackRole;
use crate::frame::FrameCopy;
use crate::infer::agreement::{Agreement, CompareError};
use crate::model::ModelOutputs;

/// A kind of per-track model: its decoder, and the check of its engines.
pub trait PerTrackKind: Send + Sync {
    /// What the kind's `[models.<name>]` tables are: its config identity (`Classifier::ROLE`).
    ///
    /// [`Classifier::ROLE`]: super::classifier::Classifier::ROLE
    fn role(&self) -> PerTrackRole;

    /// The kind's name, as `kind = "…"`, telemetry, `bench` and `selftest` call the models of this
    /// kind (`classifier`).
    fn kind(&self) -> &'static str {
        self.role().name
    }

    /// Reads the answers of the crops of one inference from `outputs` and appends one per crop
    /// to `out`, in crop order (`None`: this crop has no answer, e.g. scores that are not
    /// numbers). `scores` holds the detection score of each crop's track on this frame, in crop
    /// order: as many as the outputs have rows (an embedder weighs its crops by them). An error
    /// says why the outputs cannot be read at all.
    fn read(
        &self,
        outputs: &ModelOutputs,
        scores: &[f32],
        out: &mut Vec<Option<Box<dyn TrackAnswer>>>,
    ) -> Result<(), String>;

    /// How far an engine of a model of this kind agrees with its CPU `reference` on `frames`
    /// (each whole frame one crop: [`crate::infer::agreement::whole_frame_answers`]), as users
    /// would see its answers: the check before the engine takes over from the CPU.
    fn compare(
        &self,
        reference: &dyn Backend,
        engine: &dyn Backend,
        frames: &[FrameCopy],
    ) -> Result<Agreement, CompareError>;
}

/// One crop's answer, and what a track keeps of its model's answers.
pub trait TrackAnswer: Debug + Send + Sync + Any {
    /// Folds `later`, a later answer of the same model on the same track, into what the track
    /// keeps: the classifier keeps the latest label; an embedder averages vectors into a few
    /// prototypes. `later` is always of this answer's own type (one model, one kind).
    fn absorb(&mut self, later: Box<dyn TrackAnswer>);

    /// What events and detections messages carry of it under `attributes.<model>` (`None`:
    /// nothing).
    fn attribute(&self) -> Option<Attribute>;
}
