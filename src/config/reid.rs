//! The `[reid]` section: re-identification of tracks across cameras and after occlusions.
//!
//! Owns: the schema of the re-identification keys, their ranges, and the checks against the
//! rest of the config: it needs tracking and names an embedder (`[models.<name>]` with
//! `kind = "embedder"`) whose appearances it compares. Must not: open the model or keep a
//! gallery (`crate::reid` keeps it; the publish stage feeds it).

use serde::{Deserialize, Serialize};

use super::models::ModelKind;
use super::{Config, ConfigError};

/// Longest `window_s`: a day.
pub const MAX_WINDOW_S: f64 = 86_400.0;
/// Most tracks the gallery holds.
pub const MAX_ENTRIES: u32 = 65_536;

/// `[reid]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReidConfig {
    pub enabled: bool,
    /// The embedder whose appearances are compared (a `[models.<name>]` name); needed when
    /// enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Seconds an ended track stays a candidate after it was last seen.
    pub window_s: f64,
    /// Least cosine similarity of two tracks' appearances for a link.
    pub min_similarity: f32,
    /// Most tracks held, live ones included.
    pub max_entries: u32,
}

impl Config {
    pub(super) fn validate_reid(&self) -> Result<(), ConfigError> {
        let reid = &self.reid;
        if !(reid.window_s > 0.0 && reid.window_s <= MAX_WINDOW_S) {
            return Err(self.invalid("reid.window_s", format!("allowed: above 0 and at most {MAX_WINDOW_S} (a day)")));
        }
        if !(0.0..=1.0).contains(&reid.min_similarity) {
            return Err(self.invalid("reid.min_similarity", format!("{} is outside 0.0..=1.0", reid.min_similarity)));
        }
        if !(1..=MAX_ENTRIES).contains(&reid.max_entries) {
            return Err(self.invalid("reid.max_entries", format!("{} is outside 1..={MAX_ENTRIES}", reid.max_entries)));
        }
        if !reid.enabled {
            return Ok(());
        }
        if !self.tracking.enabled {
            return Err(
                self.invalid("reid.enabled", "re-identification links tracks: it needs `tracking.enabled = true`")
            );
        }
        let embedders: Vec<String> = self
            .models
            .iter()
            .filter(|(_, named)| named.kind == ModelKind::Embedder)
            .map(|(name, _)| format!("`{name}`"))
            .collect();
        let known = if embedders.is_empty() {
            "the config has no `[models.<name>]` with `kind = \"embedder\"`".to_string()
        } else {
            format!("the embedders are {}", embedders.join(", "))
        };
        match reid.model.as_deref() {
            None => Err(self.invalid("reid.model", format!("must be set when enabled: {known}"))),
            Some(name) if self.models.get(name).is_some_and(|named| named.kind == ModelKind::Embedder) => Ok(()),
            Some(name) => Err(self.invalid("reid.model", format!("`{name}` is no embedder: {known}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{ConfigError, ConfigOrigin};

    use super::*;

    const LOOKS: &str = "[tracking]\nenabled = true\n[models.looks]\nkind = \"embedder\"\non = [\"person\"]\n\
                         onnx = \"mobilenet.onnx\"\n";

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml(text, ConfigOrigin::Embedded, Path::new("/base")).map_err(ConfigError::one)
    }

    #[test]
    fn reid_is_off_by_default_and_names_an_embedder_when_on() {
        let default = Config::embedded_default().expect("default");
        assert_eq!((default.reid.enabled, default.reid.model.as_deref()), (false, None));
        let on = parse(&format!("{LOOKS}[reid]\nenabled = true\nmodel = \"looks\"\nwindow_s = 60\n")).expect("valid");
        assert_eq!((on.reid.model.as_deref(), on.reid.window_s), (Some("looks"), 60.0));
    }

    #[test]
    fn reid_without_an_embedder_tracking_or_in_range_values_is_refused_naming_the_key() {
        for (text, key, words) in [
            (format!("{LOOKS}[reid]\nenabled = true\n"), "reid.model", "the embedders are `looks`"),
            (format!("{LOOKS}[reid]\nenabled = true\nmodel = \"lokos\"\n"), "reid.model", "`lokos` is no embedder"),
            (
                format!(
                    "{}[reid]\nenabled = true\nmodel = \"looks\"\n",
                    LOOKS.replace("enabled = true", "enabled = false")
                ),
                "reid.enabled",
                "tracking.enabled",
            ),
            (format!("{LOOKS}[reid]\nwindow_s = 0\n"), "reid.window_s", "above 0"),
            (format!("{LOOKS}[reid]\nmin_similarity = 1.5\n"), "reid.min_similarity", "0.0..=1.0"),
            (format!("{LOOKS}[reid]\nmax_entries = 0\n"), "reid.max_entries", "1..=65536"),
        ] {
            match parse(&text) {
                Err(ConfigError::Invalid { key: found, message, .. }) => {
                    assert_eq!(found, key, "{message}");
                    assert!(message.contains(words), "{key}: {message}");
                }
                other => panic!("{key}: expected an invalid key, got {other:?}"),
            }
        }
    }
}
