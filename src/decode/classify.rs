//! Classifier outputs → the best class of each input row (each crop), with its score.
//!
//! Owns: reading `[N, C]` (or `[C]`, `[N, C, 1, 1]`) class outputs row by row and turning a row
//! into one score per class as [`ClassScores`] says: softmax over logits, sigmoid of the best logit,
//! or probabilities as they are. Must not: choose crops, threshold (the caller keeps what it
//! wants), or know labels beyond their count.

use crate::config::ClassScores;
use crate::model::ModelOutputs;

use super::tensor::values;
use super::DecodeError;

const DECODER: &str = "classifier";

/// The best class of one row and its score in 0..1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Classification {
    pub class_id: usize,
    pub score: f32,
}

/// The number of classes a classifier's output shape gives for `rows` input rows: `[rows, C]`,
/// `[C]` for one row, or `[rows, C, 1, 1]`.
pub fn classes_of(shape: &[usize], rows: usize) -> Option<usize> {
    match shape {
        [classes] if rows == 1 => Some(*classes),
        [n, classes] | [n, classes, 1, 1] if *n == rows => Some(*classes),
        _ => None,
    }
}

/// Appends the best class of each of the `rows` rows of `outputs`' first output to `out` (`None`
/// for a row whose scores are not numbers).
pub fn classify(
    outputs: &ModelOutputs,
    rows: usize,
    scores: ClassScores,
    out: &mut Vec<Option<Classification>>,
) -> Result<(), DecodeError> {
    let expected = "one output [N, C] (or [C] for one crop): C class scores per crop";
    let Some(tensor) = outputs.tensors.first() else {
        return Err(super::tensor::unexpected(DECODER, expected, outputs));
    };
    let classes = classes_of(&tensor.shape, rows)
        .filter(|classes| *classes > 0)
        .ok_or_else(|| super::tensor::unexpected(DECODER, expected, outputs))?;
    for row in values(DECODER, tensor)?.chunks_exact(classes) {
        out.push(best(row, scores));
    }
    Ok(())
}

fn best(row: &[f32], scores: ClassScores) -> Option<Classification> {
    let (class_id, top) = super::yolo::best_class(row);
    if !top.is_finite() {
        return None;
    }
    let score = match scores {
        ClassScores::Probabilities => top,
        ClassScores::Sigmoid => 1.0 / (1.0 + (-top).exp()),
        ClassScores::Softmax => 1.0 / row.iter().map(|&value| (value - top).exp()).sum::<f32>(),
    };
    score.is_finite().then_some(Classification { class_id, score: score.clamp(0.0, 1.0) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::OutputTensor;
    use proptest::prelude::*;

    fn outputs(shape: Vec<usize>, data: Vec<f32>) -> ModelOutputs {
        ModelOutputs { tensors: vec![OutputTensor { name: "probabilities".into(), shape, data }] }
    }

    fn run(outputs: &ModelOutputs, rows: usize, scores: ClassScores) -> Result<Vec<Option<Classification>>, String> {
        let mut out = Vec::new();
        classify(outputs, rows, scores, &mut out).map(|()| out).map_err(|error| error.to_string())
    }

    #[test]
    fn each_row_gives_its_best_class_scored_as_the_model_says() {
        let two_rows = outputs(vec![2, 3], vec![0.1, 0.7, 0.2, 2.0, 0.0, 0.0]);
        let probabilities = run(&two_rows, 2, ClassScores::Probabilities).expect("classify");
        assert_eq!(
            probabilities,
            [Some(Classification { class_id: 1, score: 0.7 }), Some(Classification { class_id: 0, score: 1.0 })]
        );
        let softmax = run(&two_rows, 2, ClassScores::Softmax).expect("classify");
        let expected = 2.0f32.exp() / (2.0f32.exp() + 2.0);
        assert!((softmax[1].expect("class").score - expected).abs() < 1e-6);
        let sigmoid = run(&outputs(vec![3], vec![-1.0, 0.0, 3.0]), 1, ClassScores::Sigmoid).expect("classify");
        assert_eq!(sigmoid[0].expect("class").class_id, 2);
        let nan = run(&outputs(vec![1, 2], vec![f32::NAN, f32::NAN]), 1, ClassScores::Softmax).expect("classify");
        assert_eq!(nan, [None]);
    }

    #[test]
    fn shapes_that_are_not_one_row_of_classes_per_crop_are_errors() {
        assert_eq!(classes_of(&[1, 1000, 1, 1], 1), Some(1000));
        let message = run(&outputs(vec![1, 3], vec![0.0; 3]), 2, ClassScores::Softmax).expect_err("two crops, one row");
        assert!(message.contains("`probabilities` [1, 3]"), "{message}");
        assert!(run(&outputs(vec![1, 0], vec![]), 1, ClassScores::Softmax).is_err());
        assert!(run(&outputs(vec![1, 3], vec![0.0; 2]), 1, ClassScores::Softmax).is_err());
        assert!(run(&ModelOutputs::default(), 1, ClassScores::Softmax).is_err());
    }

    proptest! {
        #![proptest_config(crate::proptest_support::config(256))]

        #[test]
        fn any_tensor_gives_an_error_or_scores_in_0_to_1(
            shape in prop::collection::vec(0usize..6, 0..4),
            data in prop::collection::vec(prop_oneof![any::<f32>(), -50.0f32..50.0], 0..40),
            rows in 1usize..4,
            kind in prop::sample::select(vec![ClassScores::Sigmoid, ClassScores::Softmax, ClassScores::Probabilities]),
        ) {
            let mut out = Vec::new();
            if classify(&outputs(shape, data), rows, kind, &mut out).is_ok() {
                prop_assert_eq!(out.len(), rows);
                for class in out.into_iter().flatten() {
                    prop_assert!((0.0..=1.0).contains(&class.score), "{:?}", class);
                }
            }
        }
    }
}
