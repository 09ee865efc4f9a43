//! The classifier, the first kind of per-track model (`[models.<name>]` with
//! `kind = "classifier"`): a label from its label file, with a score, for each crop; a track keeps
//! the latest.
//!
//! Owns: [`Classifier`] (its labels, how its scores read and the groups it answers with, and how
//! its engine's top classes are compared with the CPU's) and its answer, [`LabelAnswer`].
//! Must not: choose tracks or run sessions (the per-track step does, alike for every kind).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::attribute::Attribute;
use super::kind::{PerTrackKind, TrackAnswer};
use super::registration::{BuildError, Loaded, RegisteredKind};
use crate::backend::Backend;
use crate::config::models::{Answers, PerTrackRole};
use crate::config::ClassScores;
use crate::decode::classify::{classify, ClassGroups};
use crate::detection::Labels;
use crate::frame::FrameCopy;
use crate::infer::agreement::{whole_frame_answers, Agreement, CompareError, LabelFigures};
use crate::model::ModelOutputs;

/// A classifier: its labels, how its scores read and the groups it answers with.
pub struct Classifier {
    pub labels: Labels,
    pub scores: ClassScores,
    /// The coarse classes it answers instead of its labels (`groups`), if any.
    pub groups: Option<ClassGroups>,
}

/// One crop's class: the classifier's label and its score in 0..1.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelAnswer {
    pub label: String,
    pub score: f32,
}

impl Classifier {
    /// `kind = "classifier"`: its own label file, the detector labels it runs on, optional
    /// `groups`; one score per label.
    pub const ROLE: PerTrackRole = PerTrackRole {
        name: "classifier",
        article: "a",
        labelled: true,
        needs_on: true,
        takes_groups: true,
        answers: Answers::Label,
    };

    /// What it registers (its line in `super::registry::KINDS`).
    pub const REGISTERED: RegisteredKind = RegisteredKind { role: Self::ROLE, regrown: None, build: Self::build };

    /// The classifier of a loaded model: its labels, how its scores read, its `groups` resolved
    /// against its labels.
    fn build(loaded: &Loaded<'_>) -> Result<Arc<dyn PerTrackKind>, BuildError> {
        let Loaded { config, name, named, model } = *loaded;
        let labels =
            Labels::load(&model.labels).map_err(|error| config.file_error(&format!("models.{name}.labels"), error))?;
        let groups = (!named.groups.is_empty())
            .then(|| ClassGroups::resolve(&named.groups, &labels))
            .transpose()
            .map_err(|error| BuildError::Groups { name: name.to_string(), error })?;
        Ok(Arc::new(Classifier { labels, scores: model.class_scores, groups }))
    }
}

impl PerTrackKind for Classifier {
    fn role(&self) -> PerTrackRole {
        Self::ROLE
    }

    fn read(
        &self,
        outputs: &ModelOutputs,
        scores: &[f32],
        out: &mut Vec<Option<Box<dyn TrackAnswer>>>,
    ) -> Result<(), String> {
        let rows = scores.len();
        let mut classes = Vec::with_capacity(rows);
        let mut group_scores = Vec::new();
        let groups = self.groups.as_ref();
        classify(outputs, rows, self.labels.len(), self.scores, groups, &mut group_scores, &mut classes)
            .map_err(|e| e.to_string())?;
        out.extend(classes.into_iter().map(|class| {
            class.map(|class| {
                let label = match groups {
                    Some(groups) => groups.name(class.class_id).to_string(),
                    None => self.labels.name(class.class_id).into_owned(),
                };
                Box::new(LabelAnswer { label, score: class.score }) as Box<dyn TrackAnswer>
            })
        }));
        Ok(())
    }

    /// The engine's top class is found when it is the reference's (recall and precision are the
    /// same figure, the share of frames on which they agree), per the reference's label. The
    /// model's own classes, not its `groups`: an engine must agree on what it computes.
    fn compare(
        &self,
        reference: &dyn Backend,
        engine: &dyn Backend,
        frames: &[FrameCopy],
    ) -> Result<Agreement, CompareError> {
        let (mut rows, mut probabilities) = (Vec::new(), Vec::new());
        let tops = whole_frame_answers(reference, engine, frames, |outputs| {
            rows.clear();
            classify(outputs, 1, self.labels.len(), self.scores, None, &mut probabilities, &mut rows)
                .map_err(|e| e.to_string())?;
            Ok(rows.first().copied().flatten().map(|class| class.class_id))
        })?;
        let mut by_label: BTreeMap<String, LabelFigures> = BTreeMap::new();
        for (expected, engine_top) in tops {
            let Some(expected) = expected else { continue };
            let same = usize::from(engine_top == Some(expected));
            let label = by_label.entry(self.labels.name(expected).into_owned()).or_default();
            (label.reference, label.found, label.engine, label.confirmed) =
                (label.reference + 1, label.found + same, label.engine + 1, label.confirmed + same);
        }
        Ok(Agreement::from_labels(frames.len(), by_label))
    }
}

impl TrackAnswer for LabelAnswer {
    /// The latest answer is the track's.
    fn absorb(&mut self, later: Box<dyn TrackAnswer>) {
        if let Ok(later) = (later as Box<dyn std::any::Any>).downcast::<LabelAnswer>() {
            *self = *later;
        }
    }

    fn attribute(&self) -> Option<Attribute> {
        Some(Attribute::Label { label: self.label.clone(), score: self.score })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::OutputTensor;

    fn labels() -> Labels {
        Labels::parse("red\ngreen\nblue\n", std::path::Path::new("colours.txt")).expect("labels")
    }

    #[test]
    fn each_crop_gets_its_best_label_and_a_row_without_numbers_gets_none() {
        let classifier = Classifier { labels: labels(), scores: ClassScores::Probabilities, groups: None };
        let outputs = ModelOutputs {
            tensors: vec![OutputTensor {
                name: "probabilities".into(),
                shape: vec![2, 3],
                data: vec![0.1, 0.7, 0.2, f32::NAN, f32::NAN, f32::NAN],
            }],
        };
        let mut out = Vec::new();
        classifier.read(&outputs, &[0.9, 0.8], &mut out).expect("read");
        assert_eq!(out.len(), 2);
        assert_eq!(
            out[0].as_ref().and_then(|answer| answer.attribute()),
            Some(Attribute::Label { label: "green".into(), score: 0.7 })
        );
        assert!(out[1].is_none());
    }

    #[test]
    fn a_track_keeps_the_latest_label() {
        let mut kept = LabelAnswer { label: "red".into(), score: 0.9 };
        kept.absorb(Box::new(LabelAnswer { label: "blue".into(), score: 0.6 }));
        assert_eq!(kept, LabelAnswer { label: "blue".into(), score: 0.6 });
    }
}
