//! Classifier outputs → the best class of each input row (each crop), with its score.
//!
//! Owns: finding the class output (the one of `C` columns, `C` the label count: a model may have
//! others, as the bundled MobileNetV2's `embedding`), reading `[N, C]` (or `[C]`, `[N, C, 1, 1]`)
//! row by row and turning a row into one score per class as [`ClassScores`] says: softmax over
//! logits, sigmoid of the best logit, or probabilities as they are; and [`ClassGroups`], coarse
//! classes a user names that gather the model's own (a group's score is the sum of its classes'
//! probabilities, or with independent sigmoid scores their maximum). Must not: choose crops,
//! threshold (the caller keeps what it wants), or know labels beyond their names.

use std::collections::BTreeMap;

use crate::config::ClassScores;
use crate::detection::Labels;
use crate::model::{ModelOutputs, OutputTensor};

use super::error::DecodeError;
use super::tensor::values;

const DECODER: &str = "classifier";

/// Coarse classes that a classifier answers instead of its own (`groups` of its table): each a
/// name and the model's classes it gathers; a class is in at most one group, and a class in none
/// counts for no group.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassGroups {
    names: Vec<String>,
    /// The group of each class id.
    group_of: Vec<Option<usize>>,
}

impl ClassGroups {
    /// The groups of `groups` (name → entries) over `labels`. An entry is a label as the file has
    /// it, one of the comma-separated names of a label (`tabby` for `tabby, tabby cat`) that no
    /// other label has, or an inclusive range of class ids `first-last` (`151-268`).
    pub fn resolve(groups: &BTreeMap<String, Vec<String>>, labels: &Labels) -> Result<ClassGroups, DecodeError> {
        let mut group_of = vec![None; labels.len()];
        for (group, (name, entries)) in groups.iter().enumerate() {
            for entry in entries {
                let error = |message: String| DecodeError::Group { group: name.clone(), entry: entry.clone(), message };
                for class_id in entry_classes(entry, labels).map_err(error)? {
                    match group_of[class_id] {
                        Some(other) if other != group => {
                            let other = groups.keys().nth(other).cloned().unwrap_or_default();
                            return Err(error(format!("`{}` is in group `{other}` already", labels.name(class_id))));
                        }
                        _ => group_of[class_id] = Some(group),
                    }
                }
            }
        }
        Ok(ClassGroups { names: groups.keys().cloned().collect(), group_of })
    }

    /// The name of group `index`.
    pub fn name(&self, index: usize) -> &str {
        self.names.get(index).map_or("", String::as_str)
    }
}

/// The class ids an entry of a group names (see [`ClassGroups::resolve`]).
fn entry_classes(entry: &str, labels: &Labels) -> Result<Vec<usize>, String> {
    let entry = entry.trim();
    if let Some(class_id) = labels.id_of(entry) {
        return Ok(vec![class_id]);
    }
    let synonyms = (0..labels.len())
        .filter(|&class_id| labels.name(class_id).split(',').any(|name| name.trim() == entry))
        .collect::<Vec<_>>();
    match synonyms.as_slice() {
        [class_id] => return Ok(vec![*class_id]),
        [first, second, ..] => {
            return Err(format!(
                "names both `{}` and `{}`: write the whole label",
                labels.name(*first),
                labels.name(*second)
            ))
        }
        [] => {}
    }
    let range = entry
        .split_once('-')
        .and_then(|(first, last)| Some((first.trim().parse::<usize>().ok()?, last.trim().parse::<usize>().ok()?)));
    match range {
        Some((first, last)) if first <= last && last < labels.len() => Ok((first..=last).collect()),
        Some(_) => Err(format!("is not a range of class ids within 0-{}", labels.len().saturating_sub(1))),
        None => Err(format!(
            "is no label of the label file ({} labels), nor one of a label's comma-separated names, nor a \
             range of class ids `first-last`",
            labels.len()
        )),
    }
}

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

/// The output of `outputs` that holds `classes` class scores for each of `rows` rows: the first
/// one shaped so, else the first output when it is the only one.
fn class_output(outputs: &ModelOutputs, rows: usize, classes: usize) -> Option<&OutputTensor> {
    let only = match outputs.tensors.as_slice() {
        [only] => Some(only),
        _ => None,
    };
    outputs.tensors.iter().find(|tensor| classes_of(&tensor.shape, rows) == Some(classes)).or(only)
}

/// Appends the best class (or group, with `groups`) of each of the `rows` rows of the class
/// output of `outputs` (the one of `classes` columns, `classes` the label count) to `out` (`None`
/// for a row whose scores are not numbers). `probabilities` is scratch space for grouping.
pub fn classify(
    outputs: &ModelOutputs,
    rows: usize,
    classes: usize,
    scores: ClassScores,
    groups: Option<&ClassGroups>,
    probabilities: &mut Vec<f32>,
    out: &mut Vec<Option<Classification>>,
) -> Result<(), DecodeError> {
    let expected = "an output [N, C] (or [C] for one crop): C class scores per crop, C the label count";
    let Some(tensor) = class_output(outputs, rows, classes) else {
        return Err(super::tensor::unexpected(DECODER, expected, outputs));
    };
    let columns = classes_of(&tensor.shape, rows)
        .filter(|columns| *columns > 0)
        .ok_or_else(|| super::tensor::unexpected(DECODER, expected, outputs))?;
    for row in values(DECODER, tensor)?.chunks_exact(columns) {
        out.push(match groups {
            Some(groups) => best_group(row, scores, groups, probabilities),
            None => best(row, scores),
        });
    }
    Ok(())
}

/// The group whose classes score highest together: their summed probabilities (with sigmoid
/// scores, each class on its own: their highest); the first group wins ties.
fn best_group(row: &[f32], scores: ClassScores, groups: &ClassGroups, totals: &mut Vec<f32>) -> Option<Classification> {
    let top = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let normaliser = match scores {
        ClassScores::Softmax => row.iter().map(|&value| (value - top).exp()).sum::<f32>(),
        ClassScores::Sigmoid | ClassScores::Probabilities => 1.0,
    };
    if !top.is_finite() || !normaliser.is_finite() {
        return None;
    }
    totals.clear();
    totals.resize(groups.names.len(), 0.0);
    for (&value, group) in row.iter().zip(&groups.group_of) {
        let Some(total) = group.and_then(|group| totals.get_mut(group)) else { continue };
        match scores {
            ClassScores::Softmax => *total += (value - top).exp() / normaliser,
            ClassScores::Probabilities => *total += value,
            ClassScores::Sigmoid => *total = total.max(1.0 / (1.0 + (-value).exp())),
        }
    }
    let (class_id, score) = super::yolo::best_class(totals);
    score.is_finite().then_some(Classification { class_id, score: score.clamp(0.0, 1.0) })
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

    /// Classifies with 3 labels and no groups.
    fn run(outputs: &ModelOutputs, rows: usize, scores: ClassScores) -> Result<Vec<Option<Classification>>, String> {
        let mut out = Vec::new();
        classify(outputs, rows, 3, scores, None, &mut Vec::new(), &mut out).map(|()| out).map_err(|e| e.to_string())
    }

    fn labels(names: &[&str]) -> Labels {
        Labels::parse(&names.join("\n"), std::path::Path::new("labels.txt")).expect("labels")
    }

    fn groups(entries: &[(&str, &[&str])], labels: &Labels) -> Result<ClassGroups, String> {
        let groups = entries
            .iter()
            .map(|(name, entries)| (name.to_string(), entries.iter().map(|entry| entry.to_string()).collect()))
            .collect();
        ClassGroups::resolve(&groups, labels).map_err(|error| error.to_string())
    }

    #[test]
    fn the_class_output_is_the_one_with_a_column_per_label_among_several() {
        let two = ModelOutputs {
            tensors: vec![
                OutputTensor { name: "embedding".into(), shape: vec![1, 4], data: vec![9.0; 4] },
                OutputTensor { name: "logits".into(), shape: vec![1, 3], data: vec![0.0, 5.0, 0.0] },
            ],
        };
        assert_eq!(run(&two, 1, ClassScores::Softmax).expect("classify")[0].map(|c| c.class_id), Some(1));
        let mut none = Vec::new();
        let error = classify(&two, 1, 5, ClassScores::Softmax, None, &mut Vec::new(), &mut none).expect_err("5 labels");
        assert!(error.to_string().contains("`embedding` [1, 4], `logits` [1, 3]"), "{error}");
    }

    #[test]
    fn a_group_scores_the_sum_of_its_classes_probabilities_or_their_highest_sigmoid() {
        let labels = labels(&["tabby, tabby cat", "tiger cat", "Egyptian cat", "beagle", "husky"]);
        let pets =
            groups(&[("cat", &["tabby", "tiger cat", "Egyptian cat"]), ("dog", &["3-4"])], &labels).expect("groups");
        assert_eq!((pets.name(0), pets.name(1)), ("cat", "dog"));
        // Beagle is the best class, but the cats together are likelier.
        let row = outputs(vec![1, 5], vec![0.2, 0.2, 0.2, 0.3, 0.1]);
        let mut out = Vec::new();
        classify(&row, 1, 5, ClassScores::Probabilities, Some(&pets), &mut Vec::new(), &mut out).expect("classify");
        let cat = out[0].expect("a group");
        assert_eq!(cat.class_id, 0);
        assert!((cat.score - 0.6).abs() < 1e-6, "{cat:?}");
        out.clear();
        // Softmax: the three cats together outweigh the beagle; independent sigmoids: the beagle wins.
        let logits = outputs(vec![1, 5], vec![0.0, 0.0, 0.0, 1.0, -10.0]);
        classify(&logits, 1, 5, ClassScores::Softmax, Some(&pets), &mut Vec::new(), &mut out).expect("classify");
        let total = 3.0 + 1.0f32.exp() + (-10.0f32).exp();
        let cats = out[0].expect("a group");
        assert!(cats.class_id == 0 && (cats.score - 3.0 / total).abs() < 1e-6, "{out:?}");
        out.clear();
        classify(&logits, 1, 5, ClassScores::Sigmoid, Some(&pets), &mut Vec::new(), &mut out).expect("classify");
        assert_eq!(out[0].map(|c| c.class_id), Some(1), "the dogs' best sigmoid, not a sum: {out:?}");
        out.clear();
        let nan = outputs(vec![1, 5], vec![f32::NAN; 5]);
        classify(&nan, 1, 5, ClassScores::Softmax, Some(&pets), &mut Vec::new(), &mut out).expect("classify");
        assert_eq!(out, [None]);
    }

    #[test]
    fn a_group_entry_that_names_no_class_or_two_or_a_class_of_another_group_is_refused() {
        let cranes = labels(&["crane", "crane", "tabby, tabby cat", "tiger cat"]);
        let unknown = groups(&[("cat", &["lion"])], &cranes).expect_err("no lion");
        assert!(unknown.contains("group `cat`: `lion` is no label") && unknown.contains("(4 labels)"), "{unknown}");
        let twice = groups(&[("bird", &["crane"])], &cranes).expect("a whole label is taken as the first of its name");
        assert_eq!(twice.group_of, [Some(0), None, None, None]);
        let range = groups(&[("cat", &["2-4"])], &cranes).expect_err("beyond the labels");
        assert!(range.contains("within 0-3"), "{range}");
        let overlap = groups(&[("a", &["tabby"]), ("b", &["2-3"])], &cranes).expect_err("tabby twice");
        assert!(overlap.contains("group `b`") && overlap.contains("in group `a` already"), "{overlap}");
        let ambiguous = labels(&["crane, bird", "crane, machine"]);
        let message = groups(&[("bird", &["crane"])], &ambiguous).expect_err("two cranes");
        assert!(message.contains("names both `crane, bird` and `crane, machine`"), "{message}");
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
            grouped in any::<bool>(),
        ) {
            let mut out = Vec::new();
            let groups = groups(&[("first", &["a"]), ("rest", &["1-2"])], &labels(&["a", "b", "c"])).expect("groups");
            let groups = grouped.then_some(&groups);
            if classify(&outputs(shape, data), rows, 3, kind, groups, &mut Vec::new(), &mut out).is_ok() {
                prop_assert_eq!(out.len(), rows);
                for class in out.into_iter().flatten() {
                    prop_assert!((0.0..=1.0).contains(&class.score), "{:?}", class);
                }
            }
        }
    }
}
