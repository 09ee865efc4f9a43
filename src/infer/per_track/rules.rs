//! Which tracks each per-track model looks at, from the config: its `on` labels, resolved against
//! the detectors' shared label list (an embedder without `on`: every label of it), its `min_size`
//! and `every`, and for a kind that registers it (the embedder) a box that grew (a closer look at
//! the object: `super::registry::RegisteredKind::regrown`).
//!
//! Owns: [`crop_rules`]. Must not: open models.

use super::registry::registered;
use crate::config::{Config, ConfigError};
use crate::detection::Labels;
use crate::track::crop_plan::CropRule;

/// The crop rule of every per-track model of `config` (`on` labels as ids of `labels`, the shared
/// list), by `[models.<name>]` name; `Err` names a label of `on` that no detector knows, or a
/// model without `tracking.enabled` (it runs on tracks).
pub fn crop_rules(config: &Config, labels: &Labels) -> Result<Vec<(String, CropRule)>, ConfigError> {
    let mut rules = Vec::new();
    for (name, named) in config.per_track_models() {
        if !config.tracking.enabled {
            return Err(ConfigError::Invalid {
                origin: config.origin.clone(),
                key: format!("models.{name}.kind"),
                message: format!(
                    "{} {} runs on tracks: it needs `tracking.enabled = true`",
                    registered(named.kind.name()).map_or("a", |kind| kind.role.article),
                    named.kind.name()
                ),
            });
        }
        // No `on` (an embedder's, such as `[reid]`'s bundled one: a classifier's is refused at
        // load) is every label.
        let classes = if named.on.is_empty() {
            (0..labels.len()).collect()
        } else {
            named
                .on
                .iter()
                .map(|label| {
                    labels.id_of(label).ok_or_else(|| ConfigError::Invalid {
                        origin: config.origin.clone(),
                        key: format!("models.{name}.on"),
                        message: format!("no detector's labels name `{label}`"),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?
        };
        let grown = registered(named.kind.name()).and_then(|kind| kind.regrown);
        let rule = CropRule { classes, min_size: named.min_size() as f32, every: named.every(), grown };
        rules.push((name.to_string(), rule));
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn classifier_config(on: &str, tracking: bool) -> Config {
        let text = format!(
            "[tracking]\nenabled = {tracking}\n[models.colour]\nkind = \"classifier\"\non = {on}\n\
             onnx = \"c.onnx\"\nlabels = \"c.txt\"\nmin_size = 48\nevery = 5\n"
        );
        Config::from_toml(&text, crate::config::ConfigOrigin::Embedded, Path::new("/base")).expect("valid")
    }

    #[test]
    fn a_models_rule_names_its_labels_by_their_shared_ids_and_refuses_unknown_ones() {
        let labels = Labels::parse("person\ntraffic light\n", Path::new("labels")).expect("labels");
        let rules = crop_rules(&classifier_config("[\"traffic light\"]", true), &labels).expect("known label");
        let rule = CropRule { classes: vec![1], min_size: 48.0, every: 5, grown: None };
        assert_eq!(rules, [("colour".to_string(), rule)]);
        let unknown = crop_rules(&classifier_config("[\"car\"]", true), &labels).expect_err("no detector has it");
        assert!(unknown.to_string().contains("models.colour.on") && unknown.to_string().contains("`car`"), "{unknown}");
        let untracked = crop_rules(&classifier_config("[\"person\"]", false), &labels).expect_err("no tracks");
        assert!(untracked.to_string().contains("tracking.enabled"), "{untracked}");
    }

    #[test]
    fn an_embedder_without_on_looks_at_every_label_and_again_when_a_box_grows() {
        let labels = Labels::parse("person\ntraffic light\ndog\n", Path::new("labels")).expect("labels");
        let text = "[tracking]\nenabled = true\n[models.looks]\nkind = \"embedder\"\nonnx = \"m.onnx\"\n";
        let config = Config::from_toml(text, crate::config::ConfigOrigin::Embedded, Path::new("/base")).expect("valid");
        let rule = CropRule {
            classes: vec![0, 1, 2],
            min_size: 32.0,
            every: 0,
            grown: Some(crate::infer::per_track::embedder::GROWN),
        };
        assert_eq!(crop_rules(&config, &labels).expect("every label"), [("looks".to_string(), rule)]);
        let untracked = text.replace("enabled = true", "enabled = false");
        let untracked =
            Config::from_toml(&untracked, crate::config::ConfigOrigin::Embedded, Path::new("/base")).expect("valid");
        let message = crop_rules(&untracked, &labels).expect_err("no tracks").to_string();
        assert!(message.contains("an embedder runs on tracks"), "{message}");
    }
}
