//! NanoDet outputs (the GFL head of NanoDet, also PP-PicoDet's): per stride `s`, class scores
//! `[1,HW,C]` (sigmoid already applied) and distance distributions `[1,HW,4·B]` over the grid of
//! `⌈W/s⌉ × ⌈H/s⌉` cells of the input, row-major.
//!
//! A cell's box: its centre `((col + ½)·s, (row + ½)·s)` in input pixels, and for each side (left,
//! top, right, bottom) a distance from it, the expectation `s · Σ i·pᵢ` of the softmax `p` of the
//! side's B bins (Generalized Focal Loss, Li et al. 2020). Every class of a cell is a candidate (as
//! mmdetection's multi-class NMS, which NanoDet uses, considers them); NMS is per class.
//!
//! Owns: pairing the outputs into levels ([`levels`], which model recognition shares: by their
//! names `cls…`/`reg…` and `stride<s>`, else by the label count and the input's grid), and turning
//! each level's cells into candidates. Must not: threshold or suppress on its own.

use crate::detection::BoundingBox;
use crate::model::ModelOutputs;

use super::candidate::CandidateSink;
use super::error::DecodeError;
use super::tensor::{matrix, matrix_dims, unexpected};

const DECODER: &str = "nanodet";
const EXPECTED: &str = "per stride, class scores [1,HW,C] and distance bins [1,HW,4·B] (B ≥ 2) over the input's \
                        ⌈W/s⌉×⌈H/s⌉ grid, e.g. `cls_stride8` and `reg_stride8`";

/// Strides a level may have when its outputs' names do not say: NanoDet's and PicoDet's heads use
/// 8 to 64 (powers of two); 4 and 128 are taken too.
const STRIDES: [u32; 6] = [4, 8, 16, 32, 64, 128];
/// Fewest bins per side: one bin would be no distribution (and an SSD's `[1,N,4]` boxes).
const MIN_BINS: usize = 2;
/// Most bins per side (NanoDet: 8 or 11, GFL: 17).
const MAX_BINS: usize = 64;

/// One output's name and `[1, rows, cols]` dimensions, as a model file declares them or an
/// inference gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputShape<'a> {
    pub name: &'a str,
    pub rows: usize,
    pub cols: usize,
}

/// One stride's pair of outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    /// Index of the class scores `[1, cells, classes]` among the outputs.
    pub scores: usize,
    /// Index of the distance bins `[1, cells, 4 · bins]`.
    pub distances: usize,
    pub stride: u32,
    /// Grid columns (`⌈input width / stride⌉`); rows are `cells / columns`.
    pub columns: usize,
    pub classes: usize,
    pub bins: usize,
}

/// What a set of outputs lacks to be a NanoDet head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LevelsError {
    /// The outputs are not pairs of score and distance matrices.
    NotPaired,
    /// One output does not fit the others or the input.
    Output { name: String, message: String },
}

/// The levels of `outputs` for an input of `width` × `height`, smallest stride first. `labels`
/// (the label file's count), when known, tells score outputs from distance outputs whose names do
/// not; their names (`cls`/`score`, `reg`/`box`/`dis`) decide first.
pub fn levels(
    outputs: &[OutputShape<'_>],
    labels: Option<usize>,
    width: u32,
    height: u32,
) -> Result<Vec<Level>, LevelsError> {
    if outputs.len() < 2 || !outputs.len().is_multiple_of(2) {
        return Err(LevelsError::NotPaired);
    }
    let role_by_name = |name: &str| {
        let name = name.to_ascii_lowercase();
        if ["cls", "score", "conf"].iter().any(|word| name.contains(word)) {
            Some(Role::Scores)
        } else if ["reg", "box", "dis", "dfl"].iter().any(|word| name.contains(word)) {
            Some(Role::Distances)
        } else {
            None
        }
    };
    let by_name: Option<Vec<Role>> = outputs.iter().map(|output| role_by_name(output.name)).collect();
    let roles = match by_name {
        Some(roles) if roles.iter().filter(|role| **role == Role::Scores).count() * 2 == roles.len() => roles,
        _ => {
            let labels = labels.ok_or(LevelsError::NotPaired)?;
            outputs.iter().map(|output| if output.cols == labels { Role::Scores } else { Role::Distances }).collect()
        }
    };
    let mut levels = Vec::with_capacity(outputs.len() / 2);
    for (scores, score_shape) in outputs.iter().enumerate().filter(|(index, _)| roles[*index] == Role::Scores) {
        let mut partners = outputs
            .iter()
            .enumerate()
            .filter(|(index, shape)| roles[*index] == Role::Distances && shape.rows == score_shape.rows);
        let (Some((distances, distance_shape)), None) = (partners.next(), partners.next()) else {
            return Err(LevelsError::NotPaired);
        };
        let output_error = |name: &str, message: String| LevelsError::Output { name: name.to_string(), message };
        if distance_shape.cols % 4 != 0 || !(MIN_BINS..=MAX_BINS).contains(&(distance_shape.cols / 4)) {
            return Err(output_error(
                distance_shape.name,
                format!(
                    "has {} columns: distance bins are 4 sides × {MIN_BINS}..={MAX_BINS} bins",
                    distance_shape.cols
                ),
            ));
        }
        if score_shape.cols == 0 {
            return Err(output_error(score_shape.name, "scores no class".to_string()));
        }
        let named = stride_in_name(score_shape.name).or_else(|| stride_in_name(distance_shape.name));
        let fits = |stride: u32| cells(width, height, stride) == Some(score_shape.rows);
        let stride = match named {
            Some(stride) if fits(stride) => stride,
            Some(stride) => {
                return Err(output_error(
                    score_shape.name,
                    format!(
                        "has {} cells, but stride {stride} of a {width}×{height} input has {}",
                        score_shape.rows,
                        cells(width, height, stride).map_or_else(|| "none".to_string(), |cells| cells.to_string())
                    ),
                ))
            }
            None => STRIDES.into_iter().find(|stride| fits(*stride)).ok_or_else(|| {
                output_error(
                    score_shape.name,
                    format!("has {} cells, which no stride of a {width}×{height} input has", score_shape.rows),
                )
            })?,
        };
        levels.push(Level {
            scores,
            distances,
            stride,
            columns: width.div_ceil(stride) as usize,
            classes: score_shape.cols,
            bins: distance_shape.cols / 4,
        });
    }
    levels.sort_by_key(|level| level.stride);
    if levels.windows(2).any(|pair| pair[0].stride == pair[1].stride) {
        return Err(LevelsError::NotPaired);
    }
    if let Some(odd) = levels.iter().find(|level| level.classes != levels[0].classes || level.bins != levels[0].bins) {
        let name = outputs[odd.scores].name;
        return Err(LevelsError::Output {
            name: name.to_string(),
            message: format!(
                "scores {} classes with {} bins per side, another level {} with {}",
                odd.classes, odd.bins, levels[0].classes, levels[0].bins
            ),
        });
    }
    Ok(levels)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Scores,
    Distances,
}

/// The number after `stride` in an output's name (`cls_stride8` → 8).
fn stride_in_name(name: &str) -> Option<u32> {
    let name = name.to_ascii_lowercase();
    let (_, after) = name.split_once("stride")?;
    let digits: String = after.chars().skip_while(|c| !c.is_ascii_digit()).take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|stride| *stride > 0)
}

/// Grid cells of stride `stride` over a `width` × `height` input.
fn cells(width: u32, height: u32, stride: u32) -> Option<usize> {
    let columns = usize::try_from(width.div_ceil(stride)).ok()?;
    let rows = usize::try_from(height.div_ceil(stride)).ok()?;
    columns.checked_mul(rows)
}

pub(super) fn collect(
    outputs: &ModelOutputs,
    labels: Option<usize>,
    input_width: u32,
    input_height: u32,
    probabilities: &mut Vec<f32>,
    sink: &mut CandidateSink<'_>,
) -> Result<(), DecodeError> {
    let shapes = outputs
        .tensors
        .iter()
        .map(|tensor| matrix_dims(tensor).map(|(rows, cols)| OutputShape { name: &tensor.name, rows, cols }))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| unexpected(DECODER, EXPECTED, outputs))?;
    let levels = levels(&shapes, labels, input_width, input_height).map_err(|error| match error {
        LevelsError::NotPaired => unexpected(DECODER, EXPECTED, outputs),
        LevelsError::Output { name, message } => DecodeError::Tensor { decoder: DECODER, tensor: name, message },
    })?;
    if let (Some(labels), Some(level)) = (labels, levels.first()) {
        if labels != level.classes {
            return Err(DecodeError::LabelCount { decoder: DECODER, model: level.classes, labels });
        }
    }
    for level in &levels {
        let (Some(scores), Some(distances)) =
            (matrix(DECODER, &outputs.tensors[level.scores])?, matrix(DECODER, &outputs.tensors[level.distances])?)
        else {
            return Err(unexpected(DECODER, EXPECTED, outputs));
        };
        let stride = level.stride as f32;
        let cell_rows = scores.data.chunks_exact(level.classes);
        let cell_bins = distances.data.chunks_exact(4 * level.bins);
        for (cell, (class_scores, bins)) in cell_rows.zip(cell_bins).enumerate() {
            if !sink.any_may_pass(class_scores) {
                continue;
            }
            let centre_x = ((cell % level.columns) as f32 + 0.5) * stride;
            let centre_y = ((cell / level.columns) as f32 + 0.5) * stride;
            let mut sides = [0.0f32; 4];
            for (side, side_bins) in sides.iter_mut().zip(bins.chunks_exact(level.bins)) {
                *side = expected_bin(side_bins, probabilities) * stride;
            }
            let [left, top, right, bottom] = sides;
            let tensor_box =
                BoundingBox { x1: centre_x - left, y1: centre_y - top, x2: centre_x + right, y2: centre_y + bottom };
            for (class_id, &score) in class_scores.iter().enumerate() {
                sink.offer(class_id, score, tensor_box);
            }
        }
    }
    Ok(())
}

/// `Σ i·pᵢ` of the softmax `p` of `bins` (NaN when a bin is not a number: the candidate is then
/// dropped as not finite). `scratch` holds the exponentials.
fn expected_bin(bins: &[f32], scratch: &mut Vec<f32>) -> f32 {
    let top = bins.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    scratch.clear();
    scratch.extend(bins.iter().map(|&value| (value - top).exp()));
    let total: f32 = scratch.iter().sum();
    scratch.iter().enumerate().map(|(index, &weight)| index as f32 * weight).sum::<f32>() / total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DecoderKind;
    use crate::decode::decoder::Decoder;
    use crate::decode::error::DecodeError;
    use crate::decode::params::DecodeParams;
    use crate::decode::test_support::*;
    use crate::detection::Detection;
    use crate::model::OutputTensor;

    /// Bins of one side that put all weight on bin `at` (a large logit there, 0 elsewhere).
    fn peaked(bins: usize, at: usize) -> Vec<f32> {
        (0..bins).map(|index| if index == at { 50.0 } else { 0.0 }).collect()
    }

    /// A 64×32 input at strides 8 and 16 (8×4 and 4×2 cells), two classes, 3 bins: every cell
    /// scores nothing except `hits`: (stride, cell, class, score, [left, top, right, bottom] bins).
    fn outputs(hits: &[(u32, usize, usize, f32, [usize; 4])]) -> ModelOutputs {
        let mut tensors = Vec::new();
        for (stride, cells) in [(8u32, 32usize), (16, 8)] {
            let mut scores = vec![0.0; cells * 2];
            let mut bins = vec![0.0; cells * 12];
            for &(_, cell, class, score, sides) in hits.iter().filter(|hit| hit.0 == stride) {
                scores[cell * 2 + class] = score;
                let cell_bins: Vec<f32> = sides.iter().flat_map(|&at| peaked(3, at)).collect();
                bins[cell * 12..(cell + 1) * 12].copy_from_slice(&cell_bins);
            }
            tensors.push(OutputTensor { name: format!("cls_stride{stride}"), shape: vec![1, cells, 2], data: scores });
            tensors.push(OutputTensor { name: format!("reg_stride{stride}"), shape: vec![1, cells, 12], data: bins });
        }
        ModelOutputs { tensors }
    }

    fn decode(params: DecodeParams, outputs: &ModelOutputs) -> Result<Vec<Detection>, DecodeError> {
        let mut out = Vec::new();
        let geometry = crate::preprocess::ResizeGeometry::new(crate::config::ResizeKind::Stretch, 64, 32, 64, 32);
        Decoder::new(params).decode(outputs, 64, 32, &geometry, &mut out).map(|()| out)
    }

    fn shape(name: &str, rows: usize, cols: usize) -> OutputShape<'_> {
        OutputShape { name, rows, cols }
    }

    #[test]
    fn a_cell_gives_its_centre_plus_the_expected_distance_of_each_side_times_the_stride() {
        // Stride 8, cell 9 = row 1, column 1: centre (12, 12); distances 1, 0, 2, 1 bins.
        // Stride 16, cell 5 = row 1, column 1: centre (24, 24); distances 1, 1, 0, 0 bins.
        let outputs = outputs(&[(8, 9, 1, 0.9, [1, 0, 2, 1]), (16, 5, 0, 0.6, [1, 1, 0, 0])]);
        let found = decode(params(DecoderKind::Nanodet), &outputs).expect("decode");
        assert_eq!(classes(&found), [1, 0]);
        assert_box(found[0].bbox, BoundingBox { x1: 4.0, y1: 12.0, x2: 28.0, y2: 20.0 });
        assert_box(found[1].bbox, BoundingBox { x1: 8.0, y1: 8.0, x2: 24.0, y2: 24.0 });
    }

    #[test]
    fn the_distance_is_the_expectation_of_the_softmax_of_the_bins() {
        assert!((expected_bin(&[0.0, 0.0, 0.0], &mut Vec::new()) - 1.0).abs() < 1e-6, "uniform over 0, 1, 2");
        let weights = [1.0f32, 2.0, 3.0].map(f32::exp);
        let expected = (weights[1] + 2.0 * weights[2]) / weights.iter().sum::<f32>();
        assert!((expected_bin(&[1.0, 2.0, 3.0], &mut Vec::new()) - expected).abs() < 1e-6);
        assert!(expected_bin(&[f32::NAN, 0.0], &mut Vec::new()).is_nan());
    }

    #[test]
    fn every_class_of_a_cell_counts_and_nms_is_per_class() {
        let mut outputs = outputs(&[(8, 9, 0, 0.9, [1, 1, 1, 1]), (8, 10, 0, 0.8, [1, 1, 1, 1])]);
        // Cell 9 also scores class 1; cell 10 overlaps cell 9 (IoU 1/3) but NMS at 0.3 suppresses it.
        outputs.tensors[0].data[9 * 2 + 1] = 0.7;
        let found = decode(DecodeParams { nms_iou: 0.3, ..params(DecoderKind::Nanodet) }, &outputs).expect("decode");
        assert_eq!(found.iter().map(|d| (d.class_id, d.score)).collect::<Vec<_>>(), [(0, 0.9), (1, 0.7)]);
    }

    #[test]
    fn levels_are_paired_by_name_or_by_the_label_count_and_strides_come_from_the_grid() {
        let named = [
            shape("reg_stride16", 8, 12),
            shape("cls_stride8", 32, 2),
            shape("cls_stride16", 8, 2),
            shape("reg_stride8", 32, 12),
        ];
        let found = levels(&named, None, 64, 32).expect("levels");
        assert_eq!(
            found.iter().map(|l| (l.scores, l.distances, l.stride, l.columns, l.classes, l.bins)).collect::<Vec<_>>(),
            [(1, 3, 8, 8, 2, 3), (2, 0, 16, 4, 2, 3)]
        );
        let anonymous = [shape("a", 32, 2), shape("b", 32, 12), shape("c", 8, 2), shape("d", 8, 12)];
        assert_eq!(levels(&anonymous, None, 64, 32), Err(LevelsError::NotPaired), "without labels or names");
        let by_labels = levels(&anonymous, Some(2), 64, 32).expect("levels");
        assert_eq!(by_labels.iter().map(|l| (l.scores, l.stride)).collect::<Vec<_>>(), [(0, 8), (2, 16)]);
        // A 416 input: 52², 26², 13² cells.
        let nanodet = [
            shape("x", 2704, 80),
            shape("y", 2704, 44),
            shape("z", 676, 80),
            shape("w", 676, 44),
            shape("v", 169, 80),
            shape("u", 169, 44),
        ];
        let strides: Vec<u32> =
            levels(&nanodet, Some(80), 416, 416).expect("levels").iter().map(|l| l.stride).collect();
        assert_eq!(strides, [8, 16, 32]);
    }

    #[test]
    fn outputs_that_do_not_fit_the_input_or_each_other_are_named() {
        let wrong_input = levels(&[shape("cls_stride8", 32, 2), shape("reg_stride8", 32, 12)], None, 640, 640);
        assert!(
            matches!(&wrong_input, Err(LevelsError::Output { name, message }) if name == "cls_stride8" && message.contains("stride 8 of a 640×640 input has 6400")),
            "{wrong_input:?}"
        );
        let one_bin = levels(&[shape("cls", 32, 2), shape("reg", 32, 4)], None, 64, 32);
        assert!(matches!(&one_bin, Err(LevelsError::Output { name, .. }) if name == "reg"), "{one_bin:?}");
        let odd = levels(&[shape("cls", 32, 2)], None, 64, 32);
        assert_eq!(odd, Err(LevelsError::NotPaired));
        let classes_differ = levels(
            &[shape("cls_a", 32, 2), shape("reg_a", 32, 12), shape("cls_b", 8, 3), shape("reg_b", 8, 12)],
            None,
            64,
            32,
        );
        assert!(
            matches!(&classes_differ, Err(LevelsError::Output { name, .. }) if name == "cls_b"),
            "{classes_differ:?}"
        );
    }

    #[test]
    fn a_label_file_of_another_class_count_is_refused_and_malformed_outputs_are_errors() {
        let outputs = outputs(&[(8, 9, 1, 0.9, [1, 0, 2, 1])]);
        let error =
            decode(DecodeParams { label_count: Some(80), ..params(DecoderKind::Nanodet) }, &outputs).expect_err("80");
        assert!(matches!(error, DecodeError::LabelCount { model: 2, labels: 80, .. }), "{error}");

        let mut short = outputs.clone();
        short.tensors[1].data.pop();
        let message = decode(params(DecoderKind::Nanodet), &short).expect_err("short").to_string();
        assert!(message.contains("`reg_stride8`") && message.contains("383 values"), "{message}");
        let message = decode(params(DecoderKind::Nanodet), &ModelOutputs::default()).expect_err("none").to_string();
        assert!(message.contains("cls_stride8") && message.contains("no outputs"), "{message}");
        assert_eq!(stride_in_name("cls_stride_32:0"), Some(32));
        assert_eq!(stride_in_name("cls"), None);
    }
}
