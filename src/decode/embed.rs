//! Embedder outputs → one [`Embedding`] per input row (each crop): re-identification's appearance
//! vectors.
//!
//! Owns: finding the embedding output (the one named `embedding` or with `embed`/`feat` in its
//! name, else the only output: the bundled MobileNetV2 also gives `logits`; an OSNet Re-ID
//! export gives one [N, 512]), reading `[N, D]` (or `[D]` for one row, `[N, D, 1, 1]`) row by row
//! and L2-normalising each. Must not: choose crops, compare embeddings (`crate::reid` does) or
//! keep them.

use crate::model::{ModelOutputs, OutputTensor};
use crate::reid::Embedding;

use super::error::DecodeError;
use super::tensor::{unexpected, values};

const DECODER: &str = "embedder";
const EXPECTED: &str = "an output [N, D] (D ≥ 2 values per crop) named `embedding` (or with `embed` or `feat` in its \
                        name), or a single output";

/// The embedding output of `outputs`: by its name, else the only one.
fn embedding_output(outputs: &ModelOutputs) -> Option<&OutputTensor> {
    let named = |tensor: &&OutputTensor| {
        let name = tensor.name.to_ascii_lowercase();
        name.contains("embed") || name.contains("feat")
    };
    outputs.tensors.iter().find(named).or(match outputs.tensors.as_slice() {
        [only] => Some(only),
        _ => None,
    })
}

/// Values per row of an output shaped `[rows, D]`, `[D]` (one row) or `[rows, D, 1, 1]`.
fn dimensions_of(shape: &[usize], rows: usize) -> Option<usize> {
    match shape {
        [dimensions] if rows == 1 => Some(*dimensions),
        [n, dimensions] | [n, dimensions, 1, 1] if *n == rows => Some(*dimensions),
        _ => None,
    }
}

/// Appends the embedding of each of the `rows` rows of `outputs` to `out` (`None` for a row that
/// says nothing: a value that is not finite, or all zeros).
pub fn embed(outputs: &ModelOutputs, rows: usize, out: &mut Vec<Option<Embedding>>) -> Result<(), DecodeError> {
    let tensor = embedding_output(outputs).ok_or_else(|| unexpected(DECODER, EXPECTED, outputs))?;
    let dimensions = dimensions_of(&tensor.shape, rows)
        .filter(|dimensions| *dimensions >= 2)
        .ok_or_else(|| unexpected(DECODER, EXPECTED, outputs))?;
    out.extend(values(DECODER, tensor)?.chunks_exact(dimensions).map(Embedding::normalised));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tensor(name: &str, shape: Vec<usize>, data: Vec<f32>) -> OutputTensor {
        OutputTensor { name: name.into(), shape, data }
    }

    fn run(outputs: &ModelOutputs, rows: usize) -> Result<Vec<Option<Embedding>>, String> {
        let mut out = Vec::new();
        embed(outputs, rows, &mut out).map(|()| out).map_err(|error| error.to_string())
    }

    #[test]
    fn each_row_of_the_embedding_output_is_normalised_and_logits_beside_it_are_ignored() {
        let mobilenet = ModelOutputs {
            tensors: vec![
                tensor("logits", vec![2, 3], vec![9.0; 6]),
                tensor("embedding", vec![2, 2], vec![3.0, 4.0, 0.0, 0.0]),
            ],
        };
        let rows = run(&mobilenet, 2).expect("embed");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].as_ref().map(Embedding::values), Some(&[0.6f32, 0.8][..]));
        assert_eq!(rows[1], None, "a row of zeros says nothing");
        let osnet = ModelOutputs { tensors: vec![tensor("output", vec![1, 512, 1, 1], vec![1.0; 512])] };
        assert_eq!(run(&osnet, 1).expect("embed")[0].as_ref().map(Embedding::dimensions), Some(512));
    }

    #[test]
    fn outputs_without_an_embedding_of_one_row_per_crop_are_errors() {
        let two = ModelOutputs {
            tensors: vec![tensor("a", vec![1, 4], vec![1.0; 4]), tensor("b", vec![1, 4], vec![1.0; 4])],
        };
        let message = run(&two, 1).expect_err("which one?");
        assert!(message.contains("`a` [1, 4], `b` [1, 4]"), "{message}");
        let one_row_for_two = ModelOutputs { tensors: vec![tensor("features", vec![1, 4], vec![1.0; 4])] };
        assert!(run(&one_row_for_two, 2).is_err());
        let short = ModelOutputs { tensors: vec![tensor("features", vec![1, 4], vec![1.0; 3])] };
        assert!(run(&short, 1).expect_err("short").contains("3 values"));
        let scalar = ModelOutputs { tensors: vec![tensor("features", vec![1, 1], vec![1.0])] };
        assert!(run(&scalar, 1).is_err(), "one value is no direction");
    }

    proptest! {
        #![proptest_config(crate::proptest_support::config(256))]

        #[test]
        fn any_tensor_gives_an_error_or_unit_embeddings(
            shape in prop::collection::vec(0usize..6, 0..4),
            data in prop::collection::vec(prop_oneof![any::<f32>(), -50.0f32..50.0], 0..40),
            rows in 1usize..4,
        ) {
            let mut out = Vec::new();
            if embed(&ModelOutputs { tensors: vec![tensor("embedding", shape, data)] }, rows, &mut out).is_ok() {
                prop_assert_eq!(out.len(), rows);
                for embedding in out.into_iter().flatten() {
                    let length = embedding.values().iter().map(|v| f64::from(*v).powi(2)).sum::<f64>().sqrt();
                    prop_assert!((length - 1.0).abs() < 1e-3, "{:?}", embedding);
                }
            }
        }
    }
}
