//! `[model]`: the default detector — its files, its decoder and input contract, its thresholds.
//! The named ones (`[models.<name>]`) are `models`'. Must not: open the model (`crate::onnx`
//! recognises what a config leaves unset).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::preprocess::PreprocessSpec;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecoderKind {
    /// Decoded boxes `[1,N,4]` (ymin,xmin,ymax,xmax in 0..1) + scores `[1,N,C]` with a background column.
    Ssd,
    /// `[1,N,5+C]`: cx,cy,w,h in input pixels, objectness, class scores.
    Yolov5,
    /// `[1,4+C,N]`: cx,cy,w,h in input pixels, class scores (YOLOv8 / YOLO11).
    Yolov8,
    /// NMS inside the model: num_dets, boxes (x1,y1,x2,y2 input pixels), scores, classes.
    End2end,
    /// NMS-free `[1,K,6]`: x1,y1,x2,y2 in input pixels, score, class id (YOLOv10, YOLO26).
    NmsFree,
    /// Boxes `[1,Q,4]` (cx,cy,w,h in 0..1 of the input) + class logits `[1,Q,C]` (the DETR family:
    /// RT-DETR, D-FINE, RF-DETR, DETR); how logits become scores is [`ClassScores`].
    Detr,
    /// Per stride, class scores `[1,HW,C]` + distance bins `[1,HW,4·B]` over the input's grid
    /// (NanoDet's GFL head).
    Nanodet,
}

/// How the `detr` decoder turns a query's class outputs into scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClassScores {
    /// Logits, one independent sigmoid per class (RT-DETR, D-FINE, RF-DETR).
    Sigmoid,
    /// Logits, one softmax over the classes and a last "no object" column, which is never reported
    /// (the original DETR).
    Softmax,
    /// Already scores in 0..1, every column a class (the graph ends in a sigmoid).
    Probabilities,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// ONNX model (built into a TensorRT engine, or run by the CPU backend).
    pub onnx: Option<PathBuf>,
    /// Prebuilt TensorRT engine, used as is (TensorRT backend only).
    pub engine: Option<PathBuf>,
    /// Label file: one `id name` or `name` per line.
    pub labels: PathBuf,
    pub decoder: DecoderKind,
    /// `[model.input]`: the input contract, exactly the preprocessing stage's type.
    pub input: PreprocessSpec,
    pub score_threshold: f32,
    pub nms_iou: f32,
    pub max_detections: usize,
    /// Allow-list of label names; empty = every class.
    pub classes: Vec<String>,
    /// How `decoder = "detr"` turns class outputs into scores; default: recognised from the model.
    pub class_scores: Option<ClassScores>,
    /// The description keys ([`DESCRIPTION_KEYS`]) this config leaves to be recognised from the
    /// ONNX file (not a TOML key): those a config that names its own `onnx` does not set. Empty
    /// for the bundled model, whose defaults describe it, and for a prebuilt engine.
    #[serde(skip)]
    pub recognise: Vec<&'static str>,
    /// What was recognised, one line per key or group (not a TOML key): filled by
    /// `crate::onnx::describe`, shown by `check-config`, `probe` and the daemon's log.
    #[serde(skip)]
    pub recognised: Vec<String>,
}

/// The keys of `[model]` that describe a model's outputs and input, relative to the table; any of
/// them a config leaves unset is recognised from the ONNX file (`crate::onnx::recognise`).
pub const DESCRIPTION_KEYS: [&str; 12] = [
    "decoder",
    "class_scores",
    "input.width",
    "input.height",
    "input.layout",
    "input.dtype",
    "input.color",
    "input.resize",
    "input.filter",
    "input.pad",
    "input.mean",
    "input.std",
];

/// Largest `model.max_detections` accepted.
pub const MAX_DETECTIONS: usize = 10_000;
