//! The `[reid]` section: re-identification of tracks across cameras and after occlusions.
//!
//! Owns: the schema of the re-identification keys, their ranges, the bundled embedder that stands
//! in when `enabled = true` names none ([`add_default_embedder`]: `[models.reid]`, the
//! MobileNetV2's `embedding` on every label's tracks); the checks against the rest of the config
//! (it needs tracking and an embedder whose appearances it compares) are `reid_checks`'. Must not: open the model or keep a gallery (`crate::reid` keeps it;
//! the publish stage feeds it).

use std::path::Path;

use serde::{Deserialize, Serialize};
use toml::{Table, Value};

/// Longest `window_s`: a day.
pub const MAX_WINDOW_S: f64 = 86_400.0;
/// Most tracks the gallery holds.
pub const MAX_ENTRIES: u32 = 65_536;

/// The `[models.<name>]` name of the bundled embedder when `[reid]` names none.
pub const DEFAULT_EMBEDDER: &str = "reid";
/// The kind of the bundled embedder, as `kind = "…"` spells it: a kind of per-track model
/// registered in `crate::infer::per_track` that answers a vector (re-identification compares them).
pub const BUNDLED_KIND: &str = "embedder";
/// The bundled embedder's file, under the data directory: MobileNetV2 (ImageNet), whose 1280-d
/// `embedding` output is the appearance (`models/NOTICE.md`).
pub const DEFAULT_EMBEDDER_ONNX: &str = "models/mobilenet_v2_imagenet.onnx";

/// `[reid]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReidConfig {
    pub enabled: bool,
    /// The embedder whose appearances are compared (a `[models.<name>]` name). Unset while enabled
    /// and the config has no embedder: [`DEFAULT_EMBEDDER`], the bundled one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Seconds an ended track stays a candidate after it was last seen.
    pub window_s: f64,
    /// Least cosine similarity of two tracks' appearances for a link.
    pub min_similarity: f32,
    /// Most tracks held, live ones included.
    pub max_entries: u32,
}

/// Adds the bundled embedder to `merged` (the default merged with the user's file, before it is
/// typed) when re-identification is enabled with no `reid.model` and the config has no embedder
/// and no `[models.reid]` of its own: `[models.reid]`, [`DEFAULT_EMBEDDER_ONNX`] under `data_dir`
/// with no `on` (every label: a track exists only for what a detector outputs, its `classes`
/// filter applied, so that is exactly the labels the cameras' detectors give, without opening a
/// label file here), and `reid.model = "reid"`. A config with embedders of its own names one.
pub(super) fn add_default_embedder(merged: &mut Table, data_dir: &Path) {
    let Some(Value::Table(reid)) = merged.get("reid") else { return };
    if reid.get("enabled").and_then(Value::as_bool) != Some(true) || reid.contains_key("model") {
        return;
    }
    let models = merged.get("models").and_then(Value::as_table);
    let taken = models.is_some_and(|models| {
        models.contains_key(DEFAULT_EMBEDDER)
            || models.values().any(|table| table.get("kind").and_then(Value::as_str) == Some(BUNDLED_KIND))
    });
    if taken {
        return;
    }
    let mut embedder = Table::new();
    embedder.insert("kind".into(), Value::String(BUNDLED_KIND.into()));
    let onnx = data_dir.join(DEFAULT_EMBEDDER_ONNX);
    embedder.insert("onnx".into(), Value::String(onnx.to_string_lossy().into_owned()));
    if let Value::Table(models) = merged.entry("models").or_insert_with(|| Value::Table(Table::new())) {
        models.insert(DEFAULT_EMBEDDER.into(), Value::Table(embedder));
    }
    if let Some(Value::Table(reid)) = merged.get_mut("reid") {
        reid.insert("model".into(), Value::String(DEFAULT_EMBEDDER.into()));
    }
}
