//! What decoding a model's outputs can fail with.
//!
//! Owns: [`DecodeError`]: outputs of another count or shape than the decoder needs, unusable
//! contents, class names the label file does not have, a label file of another model. Must not:
//! decode.

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The outputs do not have the count or shapes the decoder needs.
    #[error("the {decoder} decoder expects {expected}; the model gave {actual}")]
    Outputs { decoder: &'static str, expected: &'static str, actual: String },
    /// One output has the right shape but unusable contents.
    #[error("the {decoder} decoder: output `{tensor}` {message}")]
    Tensor { decoder: &'static str, tensor: String, message: String },
    /// `model.classes` names a label the label file does not have.
    #[error("`model.classes`: unknown label `{name}`; the label file has {count} labels, such as {examples}")]
    UnknownClass { name: String, count: usize, examples: String },
    /// The model scores another number of classes than the label file names: every name from the
    /// first difference on would be wrong.
    #[error(
        "`model.labels`: the label file names {labels} classes (ids 0 to {last}), but the {decoder} model scores \
         {model} classes: the labels are not this model's, and detections would carry wrong names. The bundled \
         coco_labels.txt follows COCO's 91 ids with gaps (for the bundled SSD model); a model trained on COCO's \
         80 classes needs its own 80 names, one per line in class order (the book: Bring your own model > YOLO)",
        last = labels.saturating_sub(1)
    )]
    LabelCount { decoder: &'static str, model: usize, labels: usize },
    /// An entry of a classifier's `groups` names no class of its label file.
    #[error("group `{group}`: `{entry}` {message}")]
    Group { group: String, entry: String, message: String },
}
