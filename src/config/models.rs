//! Named models: `[models.<name>]` tables beside the default `[model]`. A detector there serves
//! the cameras that name it (`[[camera]] model = "<name>"`); a per-track model (`kind = "<kind>"`:
//! a classifier, an embedder) runs on crops of the detections whose label it lists in `on` (an
//! embedder without `on`: of every label).
//!
//! Owns: [`NamedModel`] (a [`ModelConfig`] with its [`ModelKind`]), what a kind of per-track
//! model declares about its table ([`PerTrackRole`], [`Answers`]: the kinds' own values are
//! `crate::infer::per_track`'s) and filling each table's unset keys with the built-in `[model]`
//! defaults before it is typed (resolving its paths, the checks between models and cameras and
//! which model serves what are `named_models`'). Must not: name a kind of per-track model, or open
//! model or label files (whether `on` names real labels is checked where the labels are loaded,
//! with the detectors').

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toml::{Table, Value};

use super::merge::merge;
use super::model::ModelConfig;

/// Smallest box side a classifier's `min_size` may ask for, and the largest.
pub(super) const MIN_SIZE_RANGE: std::ops::RangeInclusive<u32> = 1..=8192;
/// Largest `every`: a frame count, more than a day at 1 frame/s.
pub(super) const MAX_EVERY: u32 = 100_000;

/// What a named model does: `kind = "detector"` (the default), or the name of a kind of
/// per-track model. The kinds are registered above this floor (`crate::infer::per_track`), and
/// handed to the config's reading as their roles ([`PerTrackRole`], in the
/// `crate::config::section::Schema`): that a kind exists, and its own checks, are
/// `named_models`' with them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum ModelKind {
    /// Finds objects in the frames of the cameras that name it.
    #[default]
    Detector,
    /// Runs on crops of tracks: the kind's name (`classifier`, `embedder`).
    PerTrack(String),
}

impl ModelKind {
    /// As `kind = "…"` spells it.
    pub fn name(&self) -> &str {
        match self {
            ModelKind::Detector => DETECTOR,
            ModelKind::PerTrack(name) => name,
        }
    }
}

/// `kind = "detector"`.
pub const DETECTOR: &str = "detector";

impl From<String> for ModelKind {
    fn from(name: String) -> ModelKind {
        if name == DETECTOR {
            ModelKind::Detector
        } else {
            ModelKind::PerTrack(name)
        }
    }
}

impl From<ModelKind> for String {
    fn from(kind: ModelKind) -> String {
        kind.name().to_string()
    }
}

/// What a kind of per-track model declares about its `[models.<name>]` table: its config
/// identity, as data the floors below `infer` can read. The kinds' own values are in
/// `crate::infer::per_track` (each kind's `ROLE`, registered there once); the daemon reads its
/// config with them (`crate::cmd::outlets::schema`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerTrackRole {
    /// As `kind = "…"` spells it.
    pub name: &'static str,
    /// `a` or `an`, before its name in messages.
    pub article: &'static str,
    /// It reads a label file of its own: `labels` must be set.
    pub labelled: bool,
    /// It runs only on the detector labels it lists: `on` must be set.
    pub needs_on: bool,
    /// It answers coarse classes of its labels when asked (`groups`).
    pub takes_groups: bool,
    /// What each crop's answer is.
    pub answers: Answers,
}

/// What a per-track model answers for each crop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answers {
    /// One of its labels, with a score: one score per label comes out of its file (a Home
    /// Assistant sensor per model shows it).
    Label,
    /// A vector (an appearance): only its file's input is recognised; what re-identification
    /// compares.
    Vector,
}

/// One `[models.<name>]` table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NamedModel {
    #[serde(default)]
    pub kind: ModelKind,
    /// Classifier, embedder: the detector labels whose boxes it looks at; an embedder's may be
    /// empty: every label's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on: Vec<String>,
    /// Classifier, embedder: boxes narrower or lower than this many source pixels are not looked
    /// at ([`NamedModel::min_size`]: default 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_size: Option<u32>,
    /// Classifier, embedder: 0 (the default) looks at each track once, at its best-scoring
    /// detection so far (again only when a detection scores higher, or for an embedder when its
    /// box has grown); N looks at a track every N of its camera's frames ([`NamedModel::every`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<u32>,
    /// Classifier: coarse classes it answers instead of its labels, each a name and the labels
    /// (or class id ranges `first-last`) it gathers; empty: its own labels. Resolved against the
    /// label file where that is loaded (`crate::decode::classify::ClassGroups`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub groups: BTreeMap<String, Vec<String>>,
    #[serde(flatten)]
    pub model: ModelConfig,
}

impl NamedModel {
    pub fn min_size(&self) -> u32 {
        self.min_size.unwrap_or(32)
    }

    pub fn every(&self) -> u32 {
        self.every.unwrap_or(0)
    }
}

/// The `[model]` keys a `[models.<name>]` table may set besides [`ROLE_KEYS`] (the flattened
/// [`ModelConfig`] cannot refuse unknown keys itself).
pub(super) const MODEL_KEYS: [&str; 10] = [
    "onnx",
    "engine",
    "labels",
    "decoder",
    "input",
    "score_threshold",
    "nms_iou",
    "max_detections",
    "classes",
    "class_scores",
];

/// The keys of a `[models.<name>]` table that are not `[model]` keys.
pub(super) const ROLE_KEYS: [&str; 5] = ["kind", "on", "min_size", "every", "groups"];

/// Fills every `[models.<name>]` table of `merged` with the built-in `[model]` defaults
/// (`defaults`, without its model file) under the keys it does not set.
pub(super) fn fill_model_defaults(merged: &mut Table, defaults: &Table) {
    let Some(Value::Table(models)) = merged.get_mut("models") else { return };
    let mut base = defaults.clone();
    base.remove("onnx");
    base.remove("engine");
    for (_, table) in models.iter_mut() {
        if let Value::Table(named) = table {
            let mut filled = base.clone();
            merge(&mut filled, named);
            *named = filled;
        }
    }
}

/// The named models as the effective config has them, for `check-config --print`.
pub type NamedModels = BTreeMap<String, NamedModel>;
