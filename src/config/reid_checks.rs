//! `[reid]` against the rest of the config: the note that the bundled embedder stands in, and the
//! checks (ranges; tracking on; `reid.model` names a model whose kind answers a vector: an
//! embedder). Must not: open the model.

use toml::Table;

use super::error::ConfigError;
use super::merge::is_set;
use super::models::{Answers, PerTrackRole};
use super::reid::{BUNDLED_KIND, DEFAULT_EMBEDDER, MAX_ENTRIES, MAX_WINDOW_S};
use super::whole::Config;

impl Config {
    /// Says in what was recognised that `reid.model` is the bundled embedder
    /// ([`add_default_embedder`](super::reid::add_default_embedder) put it there: the user's file does not set it).
    pub(super) fn note_default_embedder(&mut self, user: &Table) {
        if self.reid.model.as_deref() != Some(DEFAULT_EMBEDDER) || is_set(user, &["reid", "model"]) {
            return;
        }
        if let Some(named) = self.models.get_mut(DEFAULT_EMBEDDER) {
            let onnx = named.model.onnx.as_deref().map(|path| path.display().to_string()).unwrap_or_default();
            named.model.recognised.push(format!(
                "reid.model = \"{DEFAULT_EMBEDDER}\": the bundled embedder (MobileNetV2's `embedding`, {onnx}) \
                 on every label's tracks"
            ));
        }
    }

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
        // What it compares is a vector: the kinds that answer one are named after the first
        // (the bundled one's, read without the kinds).
        let kind = (self.per_track_roles.iter().find(|role| role.answers == Answers::Vector))
            .map_or(BUNDLED_KIND, |role: &PerTrackRole| role.name);
        let embedders: Vec<String> = (self.models.iter())
            .filter(|(_, named)| self.answers(named, Answers::Vector))
            .map(|(name, _)| format!("`{name}`"))
            .collect();
        let known = if embedders.is_empty() {
            format!("the config has no `[models.<name>]` with `kind = \"{kind}\"`")
        } else {
            format!("the {kind}s are {}", embedders.join(", "))
        };
        match reid.model.as_deref() {
            None => Err(self.invalid(
                "reid.model",
                format!(
                    "must name the {kind} to compare: {known} (the bundled one stands in only for a config \
                     with no {kind} and no `[models.{DEFAULT_EMBEDDER}]` of its own)"
                ),
            )),
            Some(name) if self.models.get(name).is_some_and(|named| self.answers(named, Answers::Vector)) => Ok(()),
            Some(name) => Err(self.invalid("reid.model", format!("`{name}` is no {kind}: {known}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::error::ConfigError;
    use crate::config::origin::ConfigOrigin;
    use crate::config::reid::DEFAULT_EMBEDDER_ONNX;

    use super::*;

    const LOOKS: &str = "[tracking]\nenabled = true\n[models.looks]\nkind = \"embedder\"\non = [\"person\"]\n\
                         onnx = \"mobilenet.onnx\"\n";

    /// Read as the daemon reads it: with the registered kinds of per-track model.
    fn parse(text: &str) -> Result<Config, ConfigError> {
        crate::cmd::outlets::schema()
            .from_toml(text, ConfigOrigin::Embedded, Path::new("/base"))
            .map_err(ConfigError::one)
    }

    #[test]
    fn reid_is_off_by_default_and_may_name_an_embedder_when_on() {
        let default = Config::embedded_default().expect("default");
        assert_eq!((default.reid.enabled, default.reid.model.as_deref()), (false, None));
        let on = parse(&format!("{LOOKS}[reid]\nenabled = true\nmodel = \"looks\"\nwindow_s = 60\n")).expect("valid");
        assert_eq!((on.reid.model.as_deref(), on.reid.window_s), (Some("looks"), 60.0));
    }

    #[test]
    fn reid_enabled_alone_compares_the_bundled_embedder_on_every_label_and_says_so() {
        let config = parse("[tracking]\nenabled = true\n[reid]\nenabled = true\n").expect("valid");
        assert_eq!(config.reid.model.as_deref(), Some(DEFAULT_EMBEDDER));
        let bundled = &config.models[DEFAULT_EMBEDDER];
        assert_eq!((bundled.kind.name(), bundled.on.is_empty()), (BUNDLED_KIND, true));
        assert_eq!(
            bundled.model.onnx.as_deref(),
            Some(crate::config::merge::data_dir().join(DEFAULT_EMBEDDER_ONNX).as_path())
        );
        assert!(config.recognised().any(|line| line.starts_with("reid.model = \"reid\": the bundled embedder")));
        // The effective config names it, and reads back as the same.
        let printed = config.to_toml().expect("print");
        let again = parse(&printed).expect("the printed config is valid");
        assert_eq!(
            (again.reid.model, again.models[DEFAULT_EMBEDDER].model.onnx.clone()),
            (config.reid.model, bundled.model.onnx.clone())
        );
        // Off, or with an embedder of the user's, there is none.
        assert!(parse("[tracking]\nenabled = true\n").expect("valid").models.is_empty());
        let named = parse(&format!("{LOOKS}[reid]\nenabled = true\nmodel = \"looks\"\n")).expect("valid");
        assert_eq!(named.models.keys().collect::<Vec<_>>(), ["looks"]);
    }

    #[test]
    fn reid_without_an_embedder_tracking_or_in_range_values_is_refused_naming_the_key() {
        for (text, key, words) in [
            (format!("{LOOKS}[reid]\nenabled = true\n"), "reid.model", "the embedders are `looks`"),
            (
                "[tracking]\nenabled = true\n[models.reid]\nonnx = \"d.onnx\"\nlabels = \"d.txt\"\n[reid]\nenabled = true\n"
                    .to_string(),
                "reid.model",
                "no `[models.reid]` of its own",
            ),
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
