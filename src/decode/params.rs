//! What to decode and which detections to keep: a model's decoder and class scores with its
//! table's thresholds and class filter.
//!
//! Owns: [`DecodeParams`] and resolving `model.classes` names through the label file (an unknown
//! name is an error that offers similar real labels). Must not: decode.

use super::error::DecodeError;
use crate::config::{ClassScores, DecoderKind, ModelConfig};
use crate::detection::Labels;
use crate::model::ModelSpec;

/// How many label names an unknown-class error lists.
const EXAMPLE_LABELS: usize = 8;

/// What to decode and which detections to keep. Reloadable at run time (SIGHUP).
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeParams {
    pub kind: DecoderKind,
    /// Candidates scoring below this are ignored; a score equal to it is kept.
    pub score_threshold: f32,
    /// Boxes of one class overlapping a higher-scoring kept box by more than this IoU are suppressed.
    pub nms_iou: f32,
    pub max_detections: usize,
    /// Class ids to report; `None` reports every class.
    pub allowed_classes: Option<Vec<usize>>,
    /// How the `detr` decoder makes scores of its class outputs (the other decoders' models give
    /// scores).
    pub class_scores: ClassScores,
    /// Classes the label file names (its largest id + 1), which a model whose outputs say how
    /// many classes it scores (YOLO) must match; `None`: not checked.
    pub label_count: Option<usize>,
}

impl DecodeParams {
    /// Parameters for the outputs of `model` (its decoder and class scores, fixed while it is
    /// loaded) with the thresholds and class filter of `choices`, its config table (reloadable);
    /// `classes` names are resolved through `labels`, the model's label file.
    pub fn new(model: &ModelSpec, choices: &ModelConfig, labels: &Labels) -> Result<DecodeParams, DecodeError> {
        let allowed_classes = if choices.classes.is_empty() {
            None
        } else {
            let ids = choices
                .classes
                .iter()
                .map(|name| labels.id_of(name).ok_or_else(|| unknown_class(name, labels)))
                .collect::<Result<Vec<usize>, DecodeError>>()?;
            Some(ids)
        };
        Ok(DecodeParams {
            kind: model.decoder,
            score_threshold: choices.score_threshold,
            nms_iou: choices.nms_iou,
            max_detections: choices.max_detections,
            allowed_classes,
            class_scores: model.class_scores,
            label_count: Some(labels.len()),
        })
    }
}

fn unknown_class(name: &str, labels: &Labels) -> DecodeError {
    // Gap fillers (`class<id>`) are not names a user would look for, so they are not offered.
    let real_names =
        (0..labels.len()).map(|id| labels.name(id)).filter(|label| !is_gap_filler(label)).collect::<Vec<_>>();
    let wanted = name.to_lowercase();
    let similar = real_names
        .iter()
        .filter(|label| {
            let label = label.to_lowercase();
            label.contains(&wanted) || wanted.contains(&label)
        })
        .take(EXAMPLE_LABELS)
        .map(|label| format!("`{}`", label.escape_debug()))
        .collect::<Vec<_>>();
    let examples = if similar.is_empty() {
        real_names.iter().take(EXAMPLE_LABELS).map(|label| format!("`{}`", label.escape_debug())).collect::<Vec<_>>()
    } else {
        similar
    };
    DecodeError::UnknownClass { name: name.to_string(), count: real_names.len(), examples: examples.join(", ") }
}

fn is_gap_filler(label: &str) -> bool {
    label.strip_prefix("class").is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::path::Path;

    fn labels() -> Labels {
        Labels::parse("0 person\n1 bicycle\n2 car\n4 airplane\n17 dog\n", Path::new("labels.txt")).expect("labels")
    }

    /// The parameters of `config`'s `[model]`, as `run` makes them.
    fn params_of(config: &Config, labels: &Labels) -> Result<DecodeParams, DecodeError> {
        DecodeParams::new(&ModelSpec::from_config(config).expect("spec"), &config.model, labels)
    }

    #[test]
    fn the_parameters_resolve_class_names() {
        let mut config = Config::embedded_default().expect("embedded config");
        config.model.classes = vec!["dog".into(), "person".into()];
        let params = params_of(&config, &labels()).expect("params");
        assert_eq!(params.kind, config.model.decoder);
        assert_eq!(params.score_threshold, config.model.score_threshold);
        assert_eq!(params.nms_iou, config.model.nms_iou);
        assert_eq!(params.max_detections, config.model.max_detections);
        assert_eq!(params.allowed_classes, Some(vec![17, 0]));

        config.model.classes.clear();
        assert_eq!(params_of(&config, &labels()).expect("params").allowed_classes, None);
    }

    /// A reload's table changes the thresholds, never how the loaded model's outputs are read.
    #[test]
    fn the_decoder_and_class_scores_come_from_the_model_and_the_thresholds_from_the_table() {
        let mut config = Config::embedded_default().expect("embedded config");
        config.model.decoder = DecoderKind::Detr;
        config.model.class_scores = Some(ClassScores::Softmax);
        let model = ModelSpec::from_config(&config).expect("spec");
        let mut choices = Config::embedded_default().expect("embedded config").model;
        choices.score_threshold = 0.25;
        let params = DecodeParams::new(&model, &choices, &labels()).expect("params");
        assert_eq!((params.kind, params.class_scores), (DecoderKind::Detr, ClassScores::Softmax));
        assert_eq!(params.score_threshold, 0.25);
    }

    #[test]
    fn the_parameters_name_an_unknown_class_and_offer_real_ones() {
        let mut config = Config::embedded_default().expect("embedded config");
        config.model.classes = vec!["person".into(), "cars".into()];
        let message = params_of(&config, &labels()).expect_err("unknown").to_string();
        assert!(message.contains("`cars`"), "{message}");
        assert!(message.contains("`car`"), "{message}");

        config.model.classes = vec!["zebra".into()];
        let message = params_of(&config, &labels()).expect_err("unknown").to_string();
        assert!(message.contains("`zebra`") && message.contains("5 labels"), "{message}");
        assert!(message.contains("`person`, `bicycle`"), "{message}");
        assert!(!message.contains("class3"), "gap fillers are not offered: {message}");
    }

    /// A label that differs from what was asked only in a character nobody sees is shown escaped.
    #[test]
    fn an_unknown_class_shows_invisible_characters_of_similar_labels() {
        let mut config = Config::embedded_default().expect("embedded config");
        config.model.classes = vec!["person".into()];
        let labels = Labels::parse("person\u{200b}\ncar\n", std::path::Path::new("labels.txt")).unwrap();
        let message = params_of(&config, &labels).expect_err("unknown").to_string();
        assert!(message.contains("`person\\u{200b}`"), "{message}");
    }
}
