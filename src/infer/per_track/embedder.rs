//! The embedder, the second kind of per-track model (`[models.<name>]` with `kind = "embedder"`):
//! an appearance vector for each crop (the bundled MobileNetV2's `embedding`, or a Re-ID model's
//! output), L2-normalised; a track keeps them averaged into a few prototypes, each crop weighed by
//! its detection's score, so that the best-scoring crops count most.
//!
//! Owns: [`Embedder`] (with how its engine's vectors are compared with the CPU's: cosine at least
//! [`MIN_COSINE`]) and its answer, [`AppearanceAnswer`]. Must not: choose tracks or run
//! sessions (the per-track step does, alike for every kind), or compare appearances
//! (`crate::reid` does).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::attribute::Attribute;
use super::kind::{PerTrackKind, TrackAnswer};
use super::registration::{BuildError, Loaded, RegisteredKind};
use crate::backend::Backend;
use crate::config::models::{Answers, PerTrackRole};
use crate::decode::embed::embed;
use crate::frame::FrameCopy;
use crate::infer::agreement::{whole_frame_answers, Agreement, CompareError, LabelFigures};
use crate::model::ModelOutputs;
use crate::reid::Appearance;

/// An embedder's engine agrees on a frame when its vector's cosine with the reference's is at
/// least this: FP16 engines stay above 0.999, and re-identification thresholds sit far below.
pub const MIN_COSINE: f32 = 0.98;

/// An embedder looks at a track again when its box's area has grown this many times since its
/// last crop: the object came closer, and a bigger crop shows more of how it looks.
pub const GROWN: f32 = 1.5;

/// An embedder: its outputs read as one vector per crop (`crate::decode::embed`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Embedder;

/// What a track looks like: the appearance its crops' embeddings made.
#[derive(Debug, Clone, PartialEq)]
pub struct AppearanceAnswer {
    pub appearance: Appearance,
}

impl Embedder {
    /// `kind = "embedder"`: no label file (its vectors are read by their output's name), every
    /// label's tracks unless `on` lists some, no `groups`; a vector per crop, what `[reid]` needs.
    pub const ROLE: PerTrackRole = PerTrackRole {
        name: "embedder",
        article: "an",
        labelled: false,
        needs_on: false,
        takes_groups: false,
        answers: Answers::Vector,
    };

    /// What it registers (its line in `super::registry::KINDS`): a track is looked at again when its box grew by
    /// [`GROWN`].
    pub const REGISTERED: RegisteredKind =
        RegisteredKind { role: Self::ROLE, regrown: Some(GROWN), build: Self::build };

    fn build(_: &Loaded<'_>) -> Result<Arc<dyn PerTrackKind>, BuildError> {
        Ok(Arc::new(Embedder))
    }
}

impl PerTrackKind for Embedder {
    fn role(&self) -> PerTrackRole {
        Self::ROLE
    }

    fn read(
        &self,
        outputs: &ModelOutputs,
        scores: &[f32],
        out: &mut Vec<Option<Box<dyn TrackAnswer>>>,
    ) -> Result<(), String> {
        let mut embeddings = Vec::with_capacity(scores.len());
        embed(outputs, scores.len(), &mut embeddings).map_err(|e| e.to_string())?;
        out.extend(embeddings.into_iter().zip(scores).map(|(embedding, &score)| {
            embedding.map(|embedding| {
                let mut appearance = Appearance::default();
                appearance.add(&embedding, score);
                Box::new(AppearanceAnswer { appearance }) as Box<dyn TrackAnswer>
            })
        }));
        Ok(())
    }

    /// The engine agrees on a frame when the cosine of the two vectors is at least
    /// [`MIN_COSINE`] (recall and precision are the same figure, the share of frames on which
    /// they agree; one label, `embedding`).
    fn compare(
        &self,
        reference: &dyn Backend,
        engine: &dyn Backend,
        frames: &[FrameCopy],
    ) -> Result<Agreement, CompareError> {
        let mut rows = Vec::with_capacity(1);
        let vectors = whole_frame_answers(reference, engine, frames, |outputs| {
            rows.clear();
            embed(outputs, 1, &mut rows).map_err(|e| e.to_string())?;
            Ok(rows.pop().flatten())
        })?;
        let mut figures = LabelFigures::default();
        for (expected, found) in vectors {
            let Some(expected) = expected else { continue };
            let same = usize::from(found.is_some_and(|found| found.similarity(&expected) >= MIN_COSINE));
            (figures.reference, figures.found, figures.engine, figures.confirmed) =
                (figures.reference + 1, figures.found + same, figures.engine + 1, figures.confirmed + same);
        }
        let by_label =
            if figures.reference == 0 { BTreeMap::new() } else { [("embedding".to_owned(), figures)].into() };
        Ok(Agreement::from_labels(frames.len(), by_label))
    }
}

impl TrackAnswer for AppearanceAnswer {
    /// The later crops' embeddings fold into the track's prototypes.
    fn absorb(&mut self, later: Box<dyn TrackAnswer>) {
        if let Ok(later) = (later as Box<dyn std::any::Any>).downcast::<AppearanceAnswer>() {
            self.appearance.absorb(later.appearance);
        }
    }

    /// None: an appearance is for re-identification, not for messages.
    fn attribute(&self) -> Option<Attribute> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::OutputTensor;

    fn outputs(rows: usize, data: Vec<f32>) -> ModelOutputs {
        let dimensions = data.len() / rows;
        ModelOutputs {
            tensors: vec![
                OutputTensor { name: "logits".into(), shape: vec![rows, 2], data: vec![1.0; rows * 2] },
                OutputTensor { name: "embedding".into(), shape: vec![rows, dimensions], data },
            ],
        }
    }

    /// The appearance of one crop of `values`, weighed `weight`.
    fn seen(values: &[f32], weight: f32) -> Appearance {
        let mut appearance = Appearance::default();
        appearance.add(&crate::reid::Embedding::normalised(values).expect("a direction"), weight);
        appearance
    }

    fn appearance_of(answer: &dyn TrackAnswer) -> &Appearance {
        let answer = (answer as &dyn std::any::Any).downcast_ref::<AppearanceAnswer>().expect("an appearance");
        &answer.appearance
    }

    #[test]
    fn each_crop_gets_an_appearance_and_a_row_that_says_nothing_gets_none() {
        let mut out = Vec::new();
        Embedder.read(&outputs(2, vec![3.0, 4.0, 0.0, 0.0]), &[0.9, 0.8], &mut out).expect("read");
        assert_eq!(out.len(), 2);
        let first = out[0].as_deref().expect("a direction");
        assert_eq!(appearance_of(first), &seen(&[3.0, 4.0], 0.9), "the first row, weighed by its score");
        assert_eq!(first.attribute(), None, "messages carry no vector");
        assert!(out[1].is_none(), "a row of zeros");
        let error = Embedder.read(&outputs(1, vec![1.0, 2.0]), &[0.9, 0.8], &mut out).expect_err("one row for two");
        assert!(error.contains("embedder"), "{error}");
    }

    #[test]
    fn a_track_folds_its_crops_into_prototypes_the_better_scored_counting_more() {
        let mut out = Vec::new();
        Embedder.read(&outputs(2, vec![1.0, 0.2, 1.0, -0.2]), &[0.9, 0.1], &mut out).expect("read");
        let mut answers = out.into_iter().flatten();
        let mut kept = answers.next().expect("the first crop");
        kept.absorb(answers.next().expect("the second crop"));
        let appearance = appearance_of(kept.as_ref());
        let towards = |values: &[f32]| appearance.similarity(&seen(values, 1.0)).expect("seen");
        assert!(towards(&[1.0, 0.2]) > towards(&[1.0, -0.2]), "pulled towards the 0.9 crop: {appearance:?}");
    }

    /// `onnx` (in the repository) on the CPU with rten, its input recognised from the file.
    fn cpu(onnx: &str) -> std::sync::Arc<dyn Backend> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(onnx);
        let interface = crate::onnx::read_file(&path).expect("read the model");
        let spec = crate::onnx::recognise::recognise_input(&interface, None).expect("its input").input;
        let choice = crate::backend::cpu::EngineChoice::rten("the test");
        std::sync::Arc::new(crate::backend::cpu::CpuBackend::open(&path, spec, None, 1, &choice).expect("load"))
    }

    #[test]
    fn an_embedder_agrees_with_itself_and_another_models_vectors_do_not() {
        use crate::infer::agreement::Verdict;
        let samples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/samples");
        let limits = crate::config::Config::embedded_default().expect("default").limits;
        let frames = crate::infer::engine_build::sample_frames(&samples, &limits, 2);
        let mobilenet = cpu("models/mobilenet_v2_imagenet.onnx");
        let same = Embedder.compare(mobilenet.as_ref(), mobilenet.as_ref(), &frames).expect("compared");
        assert_eq!((same.recall, same.frames, same.verdict(0.9)), (Some(1.0), 2, Verdict::Agrees));
        assert_eq!(same.labels["embedding"].reference, 2);
        let other = cpu("tests/models/colour_classifier.onnx");
        let different = Embedder.compare(mobilenet.as_ref(), other.as_ref(), &frames).expect("compared");
        assert_eq!(different.recall, Some(0.0), "3 values against 1280: not similar at all");
        assert!(matches!(different.verdict(0.9), Verdict::Disagrees(_)));
    }
}
