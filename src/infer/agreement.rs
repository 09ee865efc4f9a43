//! Whether an engine agrees with its model: the engine's answers against the CPU reference's on
//! the same frames, compared as users see them.
//!
//! Owns: [`compare_detectors`] (both backends on the frames, decoded alike, boxes matched per label
//! by IoU ≥ [`MIN_IOU`], best overlap first, each box in at most one pair), what a per-track kind
//! compares its answers from ([`whole_frame_answers`]: each whole frame one crop; the kind
//! compares them itself, `super::per_track::kind::PerTrackKind::compare`), the figures ([`Agreement`]: the
//! engine's recall and precision against the reference, overall and per label) and their verdict
//! against `engine.min_agreement` ([`Agreement::verdict`]). Must not: choose the frames, keep the
//! engine or decide what a refusal does (the caller does).
//!
//! Objects at the score threshold are not disagreements: a reference box that the engine scores a
//! little under the threshold is still found. So both sides are decoded down to
//! [`SCORE_MARGIN`] under the threshold, recall counts the reference's boxes at the threshold that
//! match any engine box, and precision the engine's boxes at the threshold that match any
//! reference box.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::backend::{Backend, BackendError, InferenceSession};
use crate::decode::{DecodeParams, Decoder};
use crate::detection::{Detection, Labels};
use crate::frame::{FrameCopy, FrameSlot};
use crate::model::ModelOutputs;
use crate::preprocess::Roi;

/// Boxes of one label overlap at least this much to be the same object.
pub const MIN_IOU: f32 = 0.5;
/// How far under the score threshold the other side's boxes still count as found.
pub const SCORE_MARGIN: f32 = 0.1;

/// One label's figures (or all labels').
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LabelFigures {
    /// Boxes the reference found at the threshold, and of those the engine found too.
    pub reference: usize,
    pub found: usize,
    /// Boxes the engine found at the threshold, and of those the reference found too.
    pub engine: usize,
    pub confirmed: usize,
}

impl LabelFigures {
    /// `found / reference`; `None` without reference boxes.
    pub fn recall(&self) -> Option<f64> {
        ratio(self.found, self.reference)
    }

    /// `confirmed / engine`; `None` without engine boxes.
    pub fn precision(&self) -> Option<f64> {
        ratio(self.confirmed, self.engine)
    }

    fn add(&mut self, other: &LabelFigures) {
        self.reference += other.reference;
        self.found += other.found;
        self.engine += other.engine;
        self.confirmed += other.confirmed;
    }
}

fn ratio(part: usize, whole: usize) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// How an engine compares with its reference on some frames.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Agreement {
    pub frames: usize,
    /// The engine's recall and precision against the reference (`None`: nothing to count).
    pub recall: Option<f64>,
    pub precision: Option<f64>,
    pub totals: LabelFigures,
    /// By label name.
    pub labels: BTreeMap<String, LabelFigures>,
}

/// What [`Agreement::verdict`] says.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Agrees,
    /// Neither side found anything on the frames: nothing says the engine is wrong.
    Inconclusive,
    /// Recall or precision under the minimum: why, in words.
    Disagrees(String),
}

impl Agreement {
    /// The figures of `frames` frames from each label's.
    pub fn from_labels(frames: usize, labels: BTreeMap<String, LabelFigures>) -> Agreement {
        let mut totals = LabelFigures::default();
        labels.values().for_each(|figures| totals.add(figures));
        Agreement { frames, recall: totals.recall(), precision: totals.precision(), totals, labels }
    }

    /// The figures against `min` (0..=1): both recall and precision must reach it.
    pub fn verdict(&self, min: f64) -> Verdict {
        let low = |name: &str, value: Option<f64>| value.filter(|value| *value < min).map(|v| format!("{name} {v:.2}"));
        let low: Vec<String> =
            [low("recall", self.recall), low("precision", self.precision)].into_iter().flatten().collect();
        match (self.recall, self.precision) {
            (None, None) => Verdict::Inconclusive,
            _ if low.is_empty() => Verdict::Agrees,
            _ => Verdict::Disagrees(format!(
                "{} under engine.min_agreement = {min} on {} frame(s) (the CPU found {} object(s), the engine {}, {} \
                 in common)",
                low.join(" and "),
                self.frames,
                self.totals.reference,
                self.totals.engine,
                self.totals.found
            )),
        }
    }

    /// One line: `recall 0.97, precision 1.00 on 12 frames (35 objects)`.
    pub fn summary(&self) -> String {
        let figure = |value: Option<f64>| value.map_or("-".to_owned(), |value| format!("{value:.2}"));
        format!(
            "recall {}, precision {} on {} frame(s) ({} object(s) by the CPU, {} by the engine)",
            figure(self.recall),
            figure(self.precision),
            self.frames,
            self.totals.reference,
            self.totals.engine
        )
    }

    /// The per-label table `selftest --compare` prints.
    pub fn table(&self) -> String {
        let figure = |value: Option<f64>| value.map_or("-".to_owned(), |value| format!("{value:.2}"));
        let width = self.labels.keys().map(|label| label.chars().count()).max().unwrap_or(5).max(5);
        let mut lines = vec![format!(
            "{:width$}  {:>9}  {:>6}  {:>6}  {:>6}  {:>9}",
            "label", "reference", "engine", "common", "recall", "precision"
        )];
        let row = |label: &str, figures: &LabelFigures| {
            format!(
                "{label:width$}  {:>9}  {:>6}  {:>6}  {:>6}  {:>9}",
                figures.reference,
                figures.engine,
                figures.found.min(figures.confirmed),
                figure(figures.recall()),
                figure(figures.precision())
            )
        };
        lines.extend(self.labels.iter().map(|(label, figures)| row(label, figures)));
        lines.push(row("all", &self.totals));
        lines.join("\n")
    }
}

/// Why a comparison could not run.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("the {side}: {source}")]
    Backend { side: &'static str, source: BackendError },
    #[error("the {side}'s output: {message}")]
    Decode { side: &'static str, message: String },
    #[error("a frame to compare on: {0}")]
    Frame(String),
}

/// `engine` against `reference` on `frames`, both decoded with `params` down to
/// [`SCORE_MARGIN`] under its threshold; labels named by `labels`. Sessions of both are opened
/// on the calling thread and dropped before this returns.
pub fn compare_detectors(
    reference: &dyn Backend,
    engine: &dyn Backend,
    frames: &[FrameCopy],
    params: &DecodeParams,
    labels: &Labels,
) -> Result<Agreement, CompareError> {
    let threshold = params.score_threshold;
    let low = DecodeParams { score_threshold: (threshold - SCORE_MARGIN).max(0.0), ..params.clone() };
    let mut sides = Vec::with_capacity(2);
    for (side, backend) in [("CPU reference", reference), ("engine", engine)] {
        let session = backend.new_session().map_err(|source| CompareError::Backend { side, source })?;
        sides.push(Side {
            side,
            spec: backend.spec().clone(),
            session,
            decoder: Decoder::new(low.clone()),
            detections: Vec::new(),
        });
    }
    let mut by_label: BTreeMap<String, LabelFigures> = BTreeMap::new();
    for frame in frames {
        let slot = frame.to_slot().map_err(CompareError::Frame)?;
        for side in &mut sides {
            side.detect(&slot)?;
        }
        for (class_id, figures) in match_frame(&sides[0].detections, &sides[1].detections, threshold) {
            by_label.entry(labels.name(class_id).into_owned()).or_default().add(&figures);
        }
    }
    Ok(Agreement::from_labels(frames.len(), by_label))
}

/// One backend's side of a comparison.
struct Side {
    side: &'static str,
    spec: crate::preprocess::PreprocessSpec,
    session: Box<dyn InferenceSession>,
    decoder: Decoder,
    detections: Vec<Detection>,
}

impl Side {
    fn detect(&mut self, slot: &FrameSlot) -> Result<(), CompareError> {
        let side = self.side;
        let (outputs, _) = self.session.run(slot).map_err(|source| CompareError::Backend { side, source })?;
        let geometry = self.spec.geometry(slot.meta().width, slot.meta().height);
        self.decoder
            .decode(outputs, self.spec.width, self.spec.height, &geometry, &mut self.detections)
            .map_err(|e| CompareError::Decode { side, message: e.to_string() })
    }
}

/// One frame's boxes matched per label: for each label, how many of the reference's boxes at
/// `threshold` match any engine box, and the other way round (IoU ≥ [`MIN_IOU`], best first,
/// each box once).
fn match_frame(reference: &[Detection], engine: &[Detection], threshold: f32) -> BTreeMap<usize, LabelFigures> {
    let mut pairs: Vec<(f32, usize, usize)> = Vec::new();
    for (r, expected) in reference.iter().enumerate() {
        for (e, found) in engine.iter().enumerate() {
            let iou = expected.bbox.iou(&found.bbox);
            if expected.class_id == found.class_id && iou >= MIN_IOU {
                pairs.push((iou, r, e));
            }
        }
    }
    pairs.sort_by(|a, b| b.0.total_cmp(&a.0));
    let (mut reference_paired, mut engine_paired) = (vec![false; reference.len()], vec![false; engine.len()]);
    for (_, r, e) in pairs {
        if !reference_paired[r] && !engine_paired[e] {
            (reference_paired[r], engine_paired[e]) = (true, true);
        }
    }
    let mut figures: BTreeMap<usize, LabelFigures> = BTreeMap::new();
    for (detection, paired) in reference.iter().zip(&reference_paired).filter(|(d, _)| d.score >= threshold) {
        let label = figures.entry(detection.class_id).or_default();
        label.reference += 1;
        label.found += usize::from(*paired);
    }
    for (detection, paired) in engine.iter().zip(&engine_paired).filter(|(d, _)| d.score >= threshold) {
        let label = figures.entry(detection.class_id).or_default();
        label.engine += 1;
        label.confirmed += usize::from(*paired);
    }
    figures
}

/// `reference` and `engine` each run on every one of `frames` as one crop of the whole frame,
/// their outputs read by `read` (a per-track kind's decoder): each frame's answers, the
/// reference's first. Sessions of both are opened on the calling thread and dropped before this
/// returns. A per-track kind compares its answers from these (`super::per_track::kind::PerTrackKind::compare`).
pub fn whole_frame_answers<T>(
    reference: &dyn Backend,
    engine: &dyn Backend,
    frames: &[FrameCopy],
    mut read: impl FnMut(&ModelOutputs) -> Result<T, String>,
) -> Result<Vec<(T, T)>, CompareError> {
    let mut sessions = Vec::new();
    for (side, backend) in [("CPU reference", reference), ("engine", engine)] {
        sessions.push((side, backend.new_session().map_err(|source| CompareError::Backend { side, source })?));
    }
    let mut answers = Vec::with_capacity(frames.len());
    for frame in frames {
        let slot = frame.to_slot().map_err(CompareError::Frame)?;
        let whole = [Roi { x: 0, y: 0, width: frame.width, height: frame.height }];
        let mut pair = Vec::with_capacity(2);
        for (side, session) in &mut sessions {
            let side = *side;
            let (outputs, _) =
                session.run_regions(&slot, &whole).map_err(|source| CompareError::Backend { side, source })?;
            pair.push(read(outputs).map_err(|message| CompareError::Decode { side, message })?);
        }
        let (Some(found), Some(expected)) = (pair.pop(), pair.pop()) else { continue };
        answers.push((expected, found));
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detection::BoundingBox;

    fn detection(class_id: usize, score: f32, x1: f32, y1: f32, x2: f32, y2: f32) -> Detection {
        Detection { class_id, score, bbox: BoundingBox { x1, y1, x2, y2 } }
    }

    const THRESHOLD: f32 = 0.5;

    #[test]
    fn the_same_boxes_moved_a_little_agree_and_another_label_does_not() {
        let cpu = [detection(0, 0.9, 10.0, 10.0, 110.0, 210.0), detection(16, 0.8, 300.0, 50.0, 500.0, 300.0)];
        let engine = [detection(16, 0.82, 310.0, 60.0, 505.0, 290.0), detection(2, 0.9, 10.0, 10.0, 110.0, 210.0)];
        let figures = match_frame(&cpu, &engine, THRESHOLD);
        assert_eq!(figures[&16], LabelFigures { reference: 1, found: 1, engine: 1, confirmed: 1 });
        assert_eq!(figures[&0], LabelFigures { reference: 1, found: 0, engine: 0, confirmed: 0 }, "person missed");
        assert_eq!(figures[&2], LabelFigures { reference: 0, found: 0, engine: 1, confirmed: 0 }, "a car invented");
    }

    #[test]
    fn a_box_under_half_overlap_is_another_object() {
        let cpu = [detection(0, 0.9, 0.0, 0.0, 100.0, 100.0)];
        let engine = [detection(0, 0.9, 40.0, 0.0, 140.0, 100.0)];
        assert!(
            BoundingBox { x1: 0.0, y1: 0.0, x2: 100.0, y2: 100.0 }.iou(&BoundingBox {
                x1: 40.0,
                y1: 0.0,
                x2: 140.0,
                y2: 100.0
            }) < MIN_IOU
        );
        assert_eq!(
            match_frame(&cpu, &engine, THRESHOLD)[&0],
            LabelFigures { reference: 1, found: 0, engine: 1, confirmed: 0 }
        );
    }

    #[test]
    fn an_object_just_under_the_threshold_on_one_side_is_still_found() {
        let cpu = [detection(0, 0.52, 0.0, 0.0, 100.0, 100.0)];
        let engine = [detection(0, 0.47, 0.0, 0.0, 100.0, 100.0)];
        let figures = match_frame(&cpu, &engine, THRESHOLD);
        assert_eq!(figures[&0], LabelFigures { reference: 1, found: 1, engine: 0, confirmed: 0 });
        let agreement = Agreement::from_labels(1, [("person".to_owned(), figures[&0].clone())].into());
        assert_eq!((agreement.recall, agreement.precision), (Some(1.0), None));
        assert_eq!(agreement.verdict(0.9), Verdict::Agrees);
    }

    #[test]
    fn each_box_pairs_once_best_overlap_first() {
        let cpu = [detection(0, 0.9, 0.0, 0.0, 100.0, 100.0), detection(0, 0.9, 5.0, 0.0, 105.0, 100.0)];
        let engine = [detection(0, 0.9, 4.0, 0.0, 104.0, 100.0)];
        assert_eq!(
            match_frame(&cpu, &engine, THRESHOLD)[&0],
            LabelFigures { reference: 2, found: 1, engine: 1, confirmed: 1 }
        );
    }

    #[test]
    fn the_verdict_needs_both_figures_at_the_minimum_and_says_which_is_low() {
        let figures = |reference, found, engine, confirmed| {
            Agreement::from_labels(4, [("car".to_owned(), LabelFigures { reference, found, engine, confirmed })].into())
        };
        assert_eq!(figures(10, 10, 10, 10).verdict(0.9), Verdict::Agrees);
        assert_eq!(figures(10, 9, 9, 9).verdict(0.9), Verdict::Agrees, "0.90 reaches 0.9");
        let Verdict::Disagrees(why) = figures(10, 4, 5, 4).verdict(0.9) else { panic!("recall 0.40") };
        assert!(why.contains("recall 0.40") && why.contains("precision 0.80") && why.contains("4 frame"), "{why}");
        let Verdict::Disagrees(why) = figures(0, 0, 3, 0).verdict(0.9) else { panic!("objects the CPU never saw") };
        assert!(why.contains("precision 0.00") && !why.contains("recall"), "{why}");
        assert_eq!(figures(0, 0, 0, 0).verdict(0.9), Verdict::Inconclusive);
    }

    #[test]
    fn the_table_has_a_row_per_label_and_the_totals() {
        let agreement = Agreement::from_labels(
            2,
            [
                ("dog".to_owned(), LabelFigures { reference: 2, found: 2, engine: 2, confirmed: 2 }),
                ("person".to_owned(), LabelFigures { reference: 4, found: 3, engine: 3, confirmed: 3 }),
            ]
            .into(),
        );
        let table = agreement.table();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4, "{table}");
        assert!(lines[2].starts_with("person") && lines[2].ends_with("0.75       1.00"), "{table}");
        assert!(lines[3].starts_with("all") && lines[3].contains("  6  "), "{table}");
        assert_eq!(
            agreement.summary(),
            "recall 0.83, precision 1.00 on 2 frame(s) (6 object(s) by the CPU, 5 by the engine)"
        );
    }
}
