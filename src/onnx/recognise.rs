//! Which decoder and which input contract an ONNX model's interface implies, so that a model
//! works from its file and label list alone.
//!
//! Owns: the rules, each stated where it is applied, that map output names and shapes to a
//! [`DecoderKind`] (and, for `detr`, [`ClassScores`]) and the first input's declaration plus the
//! graph's own input scaling to an [`PreprocessSpec`]; and the refusal that lists what the model has
//! and which `decoder` values could be set. Must not: read files, decode tensors, or override a
//! value the config sets (the caller merges: an explicit key always wins).
//!
//! The rules look at declared shapes only; a dimension the file leaves symbolic never decides.

use crate::config::{ClassScores, ColorOrder, DecoderKind, ResizeFilter, ResizeKind, TensorDtype, TensorLayout};
use crate::decode::nanodet::OutputShape;
use crate::preprocess::PreprocessSpec;

use super::interface::{Dim, ElementType, ModelInterface, TensorInfo};

/// NMS-free heads keep a few hundred rows (YOLOv10 and YOLO26: 300); anchor-based heads have
/// thousands (YOLOv5 at 640: 25 200; SSD at 300: 1917). So do DETR-family query counts (100–900).
const MAX_QUERY_ROWS: u64 = 1000;

/// The `decoder` values, for refusals.
pub const DECODER_VALUES: &str = "\"ssd\", \"yolov5\", \"yolov8\", \"end2end\", \"nmsfree\", \"detr\", \"nanodet\"";

/// Names of the four outputs of TensorRT's EfficientNMS exports.
const END2END_NAMES: [&str; 4] = ["num_dets", "det_boxes", "det_scores", "det_classes"];
/// RF-DETR's output names: its inputs are ImageNet-normalised outside the graph.
const RF_DETR_NAMES: [&str; 2] = ["dets", "labels"];
/// The classes of ImageNet-1k, the classifiers' usual training set.
const IMAGENET_CLASSES: u64 = 1000;
/// ImageNet mean and standard deviation in 0..255 pixel units.
const IMAGENET_MEAN: [f32; 3] = [123.675, 116.28, 103.53];
const IMAGENET_STD: [f32; 3] = [58.395, 57.12, 57.375];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecogniseError {
    #[error(
        "no decoder fits its outputs ({outputs}){hint}; set `decoder` to one of {DECODER_VALUES} \
         if one of them reads these outputs"
    )]
    NoDecoder { outputs: String, hint: String },
    #[error("its input {0}")]
    Input(String),
    #[error("as a classifier it {0}")]
    Classifier(String),
}

/// The decoder a model's outputs call for, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecognisedDecoder {
    pub kind: DecoderKind,
    pub class_scores: ClassScores,
    /// One line for `probe` and `check-config --print`, e.g. "one output [1, 300, 6]: NMS-free YOLO".
    pub why: String,
}

/// The input contract a model's first input and graph call for.
#[derive(Debug, Clone, PartialEq)]
pub struct RecognisedInput {
    pub input: PreprocessSpec,
    /// Where the value range comes from, for `probe` and `check-config --print`.
    pub value_range: &'static str,
}

/// The dims of `tensor` after a leading batch dimension of 1 or symbolic, when all are fixed:
/// `[1, 300, 6]` and `[batch, 300, 6]` give `[300, 6]`.
fn unbatched(tensor: &TensorInfo) -> Option<Vec<u64>> {
    let dims = tensor.dims.as_ref()?;
    let (first, rest) = dims.split_first()?;
    if !matches!(first, Dim::Symbolic | Dim::Fixed(1)) {
        return None;
    }
    rest.iter().map(|dim| if let Dim::Fixed(value) = dim { Some(*value) } else { None }).collect()
}

fn named<'a>(interface: &'a ModelInterface, names: &[&str]) -> Option<&'a TensorInfo> {
    names.iter().find_map(|name| interface.outputs.iter().find(|output| output.name == *name))
}

fn decoder(kind: DecoderKind, why: String) -> RecognisedDecoder {
    RecognisedDecoder { kind, class_scores: ClassScores::Sigmoid, why }
}

/// The decoder for `interface`'s outputs; `labels`, when known, separates YOLOv5 from
/// anchor-major YOLOv8 and softmax from sigmoid DETR heads.
pub fn recognise_decoder(
    interface: &ModelInterface,
    labels: Option<usize>,
) -> Result<RecognisedDecoder, RecogniseError> {
    let outputs = &interface.outputs;
    let shapes = outputs.iter().map(unbatched).collect::<Vec<_>>();
    let refuse =
        |hint: &str| RecogniseError::NoDecoder { outputs: interface.describe_outputs(), hint: hint.to_string() };

    // TensorRT EfficientNMS: by its four names, else by the shapes [1,1], [1,K,4], [1,K], [1,K].
    let by_name = END2END_NAMES.iter().all(|name| outputs.iter().any(|output| output.name == *name));
    let by_shape = matches!(shapes.as_slice(),
        [Some(count), Some(boxes), Some(scores), Some(classes)]
            if count.as_slice() == [1] && boxes.len() == 2 && boxes[1] == 4
                && scores.as_slice() == [boxes[0]] && classes.as_slice() == [boxes[0]]);
    if by_name || by_shape {
        let why = if by_name {
            "outputs num_dets, det_boxes, det_scores, det_classes"
        } else {
            "four outputs shaped [1,1], [1,K,4], [1,K], [1,K]"
        };
        return Ok(decoder(DecoderKind::End2end, format!("{why}: NMS inside the model (TensorRT EfficientNMS)")));
    }

    if let Some(why) = nanodet(interface, &shapes, labels) {
        return Ok(decoder(DecoderKind::Nanodet, why));
    }

    if let [first, second] = outputs.as_slice() {
        // SSD's and DETR's two outputs have the same shapes; names tell them apart, else the row count.
        let ssd_named = named(interface, &["boxes"]).is_some() && named(interface, &["scores"]).is_some();
        let detr_named = !ssd_named
            && named(interface, &crate::decode::DETR_BOX_NAMES).is_some()
            && named(interface, &crate::decode::DETR_LOGIT_NAMES).is_some();
        let pair = match (&shapes[0], &shapes[1]) {
            (Some(a), Some(b)) if a.len() == 2 && b.len() == 2 && a[0] == b[0] => {
                if a[1] == 4 && b[1] != 4 {
                    Some((first, second, a[0]))
                } else if b[1] == 4 {
                    Some((second, first, a[0]))
                } else {
                    None
                }
            }
            _ => None,
        };
        if let Some((boxes, scores, rows)) = pair {
            let ssd = ssd_named || (!detr_named && rows > MAX_QUERY_ROWS);
            if ssd {
                let why = format!("outputs {boxes} and {scores}: SSD (anchor-decoded corner boxes, sigmoid scores)");
                return Ok(decoder(DecoderKind::Ssd, why));
            }
            let columns = unbatched(scores).and_then(|dims| dims.last().copied()).unwrap_or(0);
            let (class_scores, how) = detr_class_scores(scores, columns, labels);
            let why = format!("outputs {boxes} and {scores}: the DETR family (centre boxes in 0..1), {how}");
            return Ok(RecognisedDecoder { kind: DecoderKind::Detr, class_scores, why });
        }
    }

    let Some(first) = outputs.first() else { return Err(refuse("")) };
    let rest_are_raw_heads = outputs[1..].iter().all(|output| output.dims.as_ref().is_some_and(|dims| dims.len() == 5));
    match shapes[0].as_deref() {
        Some(&[rows, 6]) if outputs.len() == 1 && rows <= MAX_QUERY_ROWS => Ok(decoder(
            DecoderKind::NmsFree,
            format!("one output {first}: NMS-free YOLO (YOLOv10, YOLO26; x1,y1,x2,y2, score, class)"),
        )),
        Some(&[channels, anchors]) if outputs.len() == 1 && channels < anchors && channels >= 5 => Ok(decoder(
            DecoderKind::Yolov8,
            format!("one output {first}, channel-major: YOLOv8 / YOLO11 ({} classes)", channels - 4),
        )),
        Some(&[rows, columns]) if rest_are_raw_heads && rows > columns && columns >= 6 => {
            let classes = usize::try_from(columns).unwrap_or(usize::MAX);
            if labels.is_some_and(|labels| classes == labels + 4) {
                let why = format!("one output {first}, anchor-major with 4 + {} label columns: YOLOv8", classes - 4);
                return Ok(decoder(DecoderKind::Yolov8, why));
            }
            let why = format!("output {first}, anchor-major: YOLOv5 (objectness and {} classes)", classes - 5);
            Ok(decoder(DecoderKind::Yolov5, why))
        }
        Some([_]) if outputs.len() == 1 => Err(refuse(
            " — one score per class, which is a classifier: set `kind = \"classifier\"` on a `[models.<name>]` table",
        )),
        _ => Err(refuse("")),
    }
}

/// NanoDet's GFL head: two or more strides, each a pair of score and distance outputs whose rows
/// are the cells of that stride's grid over the first input (`crate::decode::nanodet::levels`
/// pairs them: by their names, else by the label count).
fn nanodet(interface: &ModelInterface, shapes: &[Option<Vec<u64>>], labels: Option<usize>) -> Option<String> {
    if interface.outputs.len() < 4 {
        return None;
    }
    let (width, height) = input_size(interface)?;
    let outputs = interface
        .outputs
        .iter()
        .zip(shapes)
        .map(|(output, dims)| match dims.as_deref() {
            Some(&[rows, cols]) => Some(OutputShape {
                name: &output.name,
                rows: usize::try_from(rows).ok()?,
                cols: usize::try_from(cols).ok()?,
            }),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    let levels = crate::decode::nanodet::levels(&outputs, labels, width, height).ok()?;
    let first = levels.first()?;
    let strides = levels.iter().map(|level| level.stride.to_string()).collect::<Vec<_>>().join(", ");
    Some(format!(
        "score and distance outputs at strides {strides} of the {width}×{height} input: NanoDet (GFL head, {} classes, \
         {} bins per side)",
        first.classes, first.bins
    ))
}

/// The fixed width and height of `interface`'s only input, an image batch `[N,3,H,W]` or `[N,H,W,3]`.
fn input_size(interface: &ModelInterface) -> Option<(u32, u32)> {
    let [input] = interface.inputs.as_slice() else { return None };
    let fixed = |dim: &Dim| if let Dim::Fixed(value) = dim { u32::try_from(*value).ok() } else { None };
    match input.dims.as_deref()? {
        [_, Dim::Fixed(3), height, width] | [_, height, width, Dim::Fixed(3)] => Some((fixed(width)?, fixed(height)?)),
        _ => None,
    }
}

/// How a classifier's scores are read, after checking that its class output is one row of
/// `labels` class scores per crop (`[1, C]`, `[N, C]`, `[C]` or `[N, C, 1, 1]`, batch symbolic or
/// 1): its only output, or of several (the bundled MobileNetV2 also gives its `embedding`) the one
/// of `labels` columns. A graph ending in a softmax or sigmoid gives probabilities, anything else
/// logits for a softmax (what ImageNet-style classifiers are trained with).
pub fn recognise_classifier(interface: &ModelInterface, labels: usize) -> Result<ClassScores, RecogniseError> {
    let output = match interface.outputs.as_slice() {
        [] => return Err(RecogniseError::Classifier("has no outputs; a classifier has one, [1, C] or [N, C]".into())),
        [output] => output,
        several => {
            several.iter().find(|output| classifier_columns(output) == u64::try_from(labels).ok()).ok_or_else(|| {
                RecogniseError::Classifier(format!(
                    "has {} outputs ({}), none of them one row of {labels} scores per crop ([1, {labels}] or \
                     [N, {labels}]) for the {labels} labels of its label file",
                    several.len(),
                    interface.describe_outputs()
                ))
            })?
        }
    };
    let Some(classes) = classifier_columns(output) else {
        return Err(RecogniseError::Classifier(format!("output {output} is not [1, C] or [N, C]")));
    };
    if u64::try_from(labels).ok() != Some(classes) {
        return Err(RecogniseError::Classifier(format!(
            "output {output} scores {classes} classes, but the label file has {labels} labels"
        )));
    }
    Ok(match output.producer.as_deref() {
        Some("Softmax" | "Sigmoid") => ClassScores::Probabilities,
        _ => ClassScores::Softmax,
    })
}

/// The class count of a classifier's output shaped `[C]`, `[N, C]` or `[N, C, 1, 1]` (N symbolic
/// or 1).
fn classifier_columns(output: &TensorInfo) -> Option<u64> {
    match output.dims.as_deref() {
        Some([Dim::Fixed(classes)])
        | Some([Dim::Symbolic | Dim::Fixed(1), Dim::Fixed(classes)])
        | Some([Dim::Symbolic | Dim::Fixed(1), Dim::Fixed(classes), Dim::Fixed(1), Dim::Fixed(1)]) => Some(*classes),
        _ => None,
    }
}

/// How a DETR head's class outputs become scores: a graph that ends in a sigmoid or softmax has
/// applied it; otherwise one column more than the labels is softmax's "no object", else sigmoid
/// (what RT-DETR, D-FINE and RF-DETR train with).
fn detr_class_scores(scores: &TensorInfo, columns: u64, labels: Option<usize>) -> (ClassScores, String) {
    match scores.producer.as_deref() {
        Some("Sigmoid") | Some("Softmax") => {
            return (
                ClassScores::Probabilities,
                format!("scores already through a {}", scores.producer.as_deref().unwrap_or_default()),
            )
        }
        _ => {}
    }
    match labels {
        Some(labels) if u64::try_from(labels).is_ok_and(|labels| columns == labels + 1) => (
            ClassScores::Softmax,
            format!("{columns} logit columns for {labels} labels: softmax with a no-object column"),
        ),
        _ => (ClassScores::Sigmoid, "sigmoid logits".to_string()),
    }
}

/// The input contract for `interface`'s first input, with the resize that `decoder`'s family
/// was trained with (YOLO: letterbox padded with 114, OpenCV's bilinear; DETR, SSD and
/// classifiers (`None`): stretched, Pillow's antialiasing filter).
pub fn recognise_input(
    interface: &ModelInterface,
    decoder: Option<DecoderKind>,
) -> Result<RecognisedInput, RecogniseError> {
    let input = match interface.inputs.as_slice() {
        [input] => input,
        [] => return Err(RecogniseError::Input("is missing: the graph declares no input".to_string())),
        inputs => {
            let names = inputs.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
            return Err(RecogniseError::Input(format!(
                "is not the only one ({names}): a model must take one image tensor (exports with an \
                 `orig_target_sizes` input include their own post-processing: export without it)"
            )));
        }
    };
    let dims = input.dims.as_deref().unwrap_or_default();
    let fixed = |dim: &Dim| if let Dim::Fixed(value) = dim { u32::try_from(*value).ok() } else { None };
    let (layout, height, width) = match dims {
        [_, Dim::Fixed(3), height, width] => (TensorLayout::Nchw, height, width),
        [_, height, width, Dim::Fixed(3)] => (TensorLayout::Nhwc, height, width),
        _ => return Err(RecogniseError::Input(format!("{input} is not an image batch [N,3,H,W] or [N,H,W,3]"))),
    };
    let (Some(height), Some(width)) = (fixed(height), fixed(width)) else {
        return Err(RecogniseError::Input(format!(
            "{input} has no fixed height and width: set `[model.input]` `width` and `height`"
        )));
    };
    if width == 0 || height == 0 {
        return Err(RecogniseError::Input(format!("{input} has an empty side")));
    }
    let dtype = match input.element {
        ElementType::Float => TensorDtype::F32,
        ElementType::Float16 => TensorDtype::F16,
        ElementType::Uint8 => TensorDtype::U8,
        other => {
            return Err(RecogniseError::Input(format!("{input} is {other}: only float32, float16 and uint8 are fed")))
        }
    };
    let (mean, std, value_range) = value_range(interface, dtype, decoder.is_none());
    let yolo = matches!(
        decoder,
        Some(DecoderKind::Yolov5 | DecoderKind::Yolov8 | DecoderKind::NmsFree | DecoderKind::End2end)
    );
    let (resize, filter) = if yolo {
        (ResizeKind::Letterbox, ResizeFilter::Bilinear)
    } else {
        (ResizeKind::Stretch, ResizeFilter::Antialias)
    };
    let input = PreprocessSpec {
        name: None,
        width,
        height,
        layout,
        dtype,
        color: ColorOrder::Rgb,
        resize,
        filter,
        pad: 114,
        mean,
        std,
    };
    Ok(RecognisedInput { input, value_range })
}

/// Mean and std (in 0..255 pixel units) for a float input of a detector or a `classifier`, and
/// where they come from.
fn value_range(interface: &ModelInterface, dtype: TensorDtype, classifier: bool) -> ([f32; 3], [f32; 3], &'static str) {
    if dtype == TensorDtype::U8 {
        return ([0.0; 3], [1.0; 3], "raw 0..255 pixels (a uint8 input)");
    }
    // A graph that shrinks its input tenfold or more (÷255, with or without its own ImageNet
    // normalisation) takes 0..255 pixels.
    if interface.input_scaling.scale.iter().all(|scale| scale.abs() <= 0.1 && *scale != 0.0) {
        return ([0.0; 3], [1.0; 3], "0..255 pixels (the graph scales its input itself)");
    }
    if RF_DETR_NAMES.iter().all(|name| interface.outputs.iter().any(|output| output.name == *name)) {
        return (IMAGENET_MEAN, IMAGENET_STD, "ImageNet mean/std on 0..1 (RF-DETR's outputs `dets`, `labels`)");
    }
    // ImageNet-1k classifiers (torchvision's, timm's) are trained on inputs normalised so.
    if classifier && interface.outputs.iter().any(|output| classifier_columns(output) == Some(IMAGENET_CLASSES)) {
        return (IMAGENET_MEAN, IMAGENET_STD, "ImageNet mean/std on 0..1 (a classifier of ImageNet's 1000 classes)");
    }
    ([0.0; 3], [255.0; 3], "0..1 (no scaling in the graph: the YOLO and DETR exports' convention)")
}

#[cfg(test)]
mod tests;
