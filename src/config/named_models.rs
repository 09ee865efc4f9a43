//! The named models as the whole config holds them: their paths resolved and the keys they leave
//! to recognition, the checks between models and cameras (a camera names a known detector, a
//! per-track model's sizes are in range, a named model is described as `[model]` must be), the
//! checks a per-track kind's role asks for (its `kind` is known; `labels`, `on`, `groups` as it
//! declares: [`PerTrackRole`], handed in by the schema the config was read with), and which model
//! serves what ([`Config::detector_of`], the per-track models). Must not: open model or label
//! files, or name a kind of per-track model.

use std::path::Path;

use toml::{Table, Value};

use super::camera::CameraConfig;
use super::error::ConfigError;
use super::merge::is_set;
use super::model::{ModelConfig, DESCRIPTION_KEYS};
use super::models::{
    Answers, ModelKind, NamedModel, PerTrackRole, DETECTOR, MAX_EVERY, MIN_SIZE_RANGE, MODEL_KEYS, ROLE_KEYS,
};
use super::whole::Config;

impl Config {
    /// Resolves each named model's paths against `base` (they are always the user's) and records
    /// the description keys it leaves to recognition.
    pub(super) fn prepare_named_models(&mut self, user: &Table, base: &Path) {
        for (name, named) in &mut self.models {
            for path in [named.model.onnx.as_mut(), named.model.engine.as_mut(), Some(&mut named.model.labels)]
                .into_iter()
                .flatten()
            {
                if path.is_relative() {
                    *path = base.join(&*path);
                }
            }
            if named.model.onnx.is_some() {
                named.model.recognise = DESCRIPTION_KEYS
                    .into_iter()
                    .filter(|key| {
                        let path = ["models", name.as_str()].into_iter().chain(key.split('.')).collect::<Vec<_>>();
                        !is_set(user, &path)
                    })
                    .collect();
            }
        }
    }

    /// The checks between named models and cameras.
    pub(super) fn validate_named_models(&self, user: &Table) -> Result<(), ConfigError> {
        for (name, named) in &self.models {
            let key = |suffix: &str| format!("models.{name}.{suffix}");
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
                return Err(
                    self.invalid_key(&format!("models.{name}"), "a model name uses letters, digits, `_` and `-`")
                );
            }
            if let Some(Value::Table(table)) = user.get("models").and_then(|models| models.get(name.as_str())) {
                if let Some(unknown) =
                    table.keys().find(|k| !ROLE_KEYS.contains(&k.as_str()) && !MODEL_KEYS.contains(&k.as_str()))
                {
                    let allowed: Vec<&str> = ROLE_KEYS.iter().chain(&MODEL_KEYS).copied().collect();
                    return Err(self.invalid_key(&key(unknown), super::words::no_such_key(unknown, &allowed)));
                }
            }
            let per_track = matches!(named.kind, ModelKind::PerTrack(_));
            let role = self.per_track_role(&named.kind);
            if per_track && role.is_none() && !self.per_track_roles.is_empty() {
                let kinds: Vec<String> = self.kind_names().map(|kind| format!("\"{kind}\"")).collect();
                return Err(self.invalid_key(
                    &key("kind"),
                    format!("\"{}\" is not allowed (allowed: {})", named.kind.name(), kinds.join(", ")),
                ));
            }
            // A detector reads its labels; a per-track model as its kind declares (a kind the
            // config was read without: as every per-track model, no label file asked for).
            let labelled = role.map_or(!per_track, |role| role.labelled);
            if labelled && !is_set(user, &["models", name, "labels"]) {
                return Err(self.invalid_key(&key("labels"), "must be set: a named model has no default labels"));
            }
            match (&named.model.onnx, &named.model.engine) {
                (None, None) => {
                    return Err(self.invalid_key(&key("onnx"), "must be set (or `engine`, a prebuilt TensorRT engine)"))
                }
                (None, Some(_)) => {
                    let described = ["decoder", "input.width", "input.height", "input.layout", "input.dtype"];
                    if let Some(missing) = described.iter().find(|k| {
                        let path = ["models", name.as_str()].into_iter().chain(k.split('.')).collect::<Vec<_>>();
                        !is_set(user, &path)
                    }) {
                        return Err(self.invalid_key(
                            &key(missing),
                            "must be set when only `engine` is: a prebuilt engine cannot be read to recognise it",
                        ));
                    }
                }
                _ => {}
            }
            if per_track {
                if let Some(role) = role.filter(|role| role.needs_on && named.on.is_empty()) {
                    return Err(self.invalid_key(
                        &key("on"),
                        format!(
                            "{} {} lists the detector labels it runs on, e.g. [\"car\", \"truck\"]",
                            role.article, role.name
                        ),
                    ));
                }
                if !MIN_SIZE_RANGE.contains(&named.min_size()) {
                    return Err(self.invalid_key(&key("min_size"), format!("{} is outside 1..=8192", named.min_size())));
                }
                if named.every() > MAX_EVERY {
                    return Err(
                        self.invalid_key(&key("every"), format!("{} is outside 0..={MAX_EVERY}", named.every()))
                    );
                }
                if role.is_some_and(|role| !role.takes_groups) && !named.groups.is_empty() {
                    let takers: Vec<String> = (self.per_track_roles.iter())
                        .filter(|role| role.takes_groups)
                        .map(|role| format!("{} {} (`kind = \"{}\"`)", role.article, role.name, role.name))
                        .collect();
                    return Err(self.invalid_key(&key("groups"), format!("only {} takes it", takers.join(" or "))));
                }
                if let Some((group, _)) =
                    named.groups.iter().find(|(group, entries)| group.trim().is_empty() || entries.is_empty())
                {
                    return Err(self.invalid_key(
                        &key("groups"),
                        format!("group `{group}`: a group has a name and lists at least one label"),
                    ));
                }
            } else if let Some(role_key) = ROLE_KEYS[1..].iter().find(|k| is_set(user, &["models", name, k])) {
                let kinds: Vec<&str> = self.kind_names().skip(1).collect();
                let which = match kinds.split_first() {
                    Some((first, rest)) => {
                        let rest: String = rest.iter().map(|kind| format!(" or `\"{kind}\"`")).collect();
                        format!(" (`kind = \"{first}\"`{rest})")
                    }
                    None => String::new(),
                };
                return Err(self.invalid_key(&key(role_key), format!("only a per-track model{which} takes it")));
            }
        }
        for (i, camera) in self.cameras.iter().enumerate() {
            let Some(wanted) = &camera.model else { continue };
            match self.models.get(wanted) {
                Some(named) if named.kind == ModelKind::Detector => {}
                Some(named) => {
                    let article = self.per_track_role(&named.kind).map_or("a", |role| role.article);
                    return Err(self.invalid_key(
                        &format!("camera[{i}].model"),
                        format!("`{wanted}` is {article} {}; a camera names a detector", named.kind.name()),
                    ));
                }
                None => {
                    let detectors = self.detector_names().map(|name| format!("`{name}`")).collect::<Vec<_>>();
                    let known = if detectors.is_empty() {
                        "there are no `[models.<name>]` detectors".to_string()
                    } else {
                        format!("the detectors are {}", detectors.join(", "))
                    };
                    return Err(
                        self.invalid_key(&format!("camera[{i}].model"), format!("unknown model `{wanted}`: {known}"))
                    );
                }
            }
        }
        Ok(())
    }

    fn detector_names(&self) -> impl Iterator<Item = &str> {
        self.models.iter().filter(|(_, named)| named.kind == ModelKind::Detector).map(|(name, _)| name.as_str())
    }

    fn invalid_key(&self, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid { origin: self.origin.clone(), key: key.into(), message: message.into() }
    }

    /// What was recognised from the model files of `[model]` and every `[models.<name>]`.
    pub fn recognised(&self) -> impl Iterator<Item = &str> {
        let named = self.models.values().flat_map(|named| &named.model.recognised);
        self.model.recognised.iter().chain(named).map(String::as_str)
    }

    /// The role of the per-track kind `kind` names, among those the config was read with
    /// (`None`: a detector, or a kind it was read without).
    pub fn per_track_role(&self, kind: &ModelKind) -> Option<PerTrackRole> {
        let ModelKind::PerTrack(name) = kind else { return None };
        self.per_track_roles.iter().find(|role| role.name == name).copied()
    }

    /// Whether `named` is a per-track model that answers `answers`; read without the kinds
    /// (`crate::config::section::Schema::CORE`), any per-track model may.
    pub fn answers(&self, named: &NamedModel, answers: Answers) -> bool {
        match self.per_track_role(&named.kind) {
            Some(role) => role.answers == answers,
            None => matches!(named.kind, ModelKind::PerTrack(_)) && self.per_track_roles.is_empty(),
        }
    }

    /// Every `kind = "…"` the config was read with: `detector`, then the per-track kinds.
    fn kind_names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(DETECTOR).chain(self.per_track_roles.iter().map(|role| role.name))
    }

    /// The per-track models (every kind but detectors: they run on crops of tracks), by name.
    pub fn per_track_models(&self) -> impl Iterator<Item = (&str, &NamedModel)> {
        self.models
            .iter()
            .filter(|(_, named)| matches!(named.kind, ModelKind::PerTrack(_)))
            .map(|(name, named)| (name.as_str(), named))
    }

    /// The detector of camera `camera` (its `model`, else `[model]`), with its name (`None`: `[model]`).
    pub fn detector_of(&self, camera: &CameraConfig) -> (Option<&str>, &ModelConfig) {
        match camera.model.as_deref().and_then(|name| self.models.get_key_value(name)) {
            Some((name, named)) => (Some(name.as_str()), &named.model),
            None => (None, &self.model),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::{ClassScores, DecoderKind};
    use crate::config::origin::ConfigOrigin;

    /// Read as the daemon reads it: with the registered kinds of per-track model.
    fn parse(text: &str) -> Result<Config, ConfigError> {
        crate::cmd::outlets::schema()
            .from_toml(text, ConfigOrigin::Embedded, Path::new("/base"))
            .map_err(ConfigError::one)
    }

    fn per_track(kind: &str) -> ModelKind {
        ModelKind::PerTrack(kind.to_string())
    }

    const TWO_MODELS: &str = "[models.yard]\nonnx = \"yolo26.onnx\"\nlabels = \"coco.txt\"\n\
        [models.vehicle_type]\nkind = \"classifier\"\non = [\"car\", \"truck\"]\nonnx = \"vehicles.onnx\"\n\
        labels = \"vehicles.txt\"\nevery = 10\n\
        [[camera]]\nname = \"front\"\nsource = { kind = \"synthetic\" }\n\
        [[camera]]\nname = \"yard\"\nmodel = \"yard\"\nsource = { kind = \"synthetic\" }\n";

    const EMBEDDER: &str = "[models.looks]\nkind = \"embedder\"\non = [\"person\"]\nonnx = \"mobilenet.onnx\"\n";

    #[test]
    fn named_models_take_the_built_in_defaults_and_cameras_pick_their_detector() {
        let config = parse(TWO_MODELS).expect("valid");
        let yard = &config.models["yard"];
        assert_eq!(
            (&yard.kind, yard.model.onnx.as_deref()),
            (&ModelKind::Detector, Some(Path::new("/base/yolo26.onnx")))
        );
        assert_eq!(yard.model.score_threshold, config.model.score_threshold, "unset keys take the defaults");
        assert_eq!(yard.model.recognise.len(), DESCRIPTION_KEYS.len(), "the rest is recognised from its file");
        let vehicle = &config.models["vehicle_type"];
        assert_eq!(
            (vehicle.kind.clone(), vehicle.on.as_slice(), vehicle.min_size(), vehicle.every()),
            (per_track("classifier"), &["car".to_string(), "truck".to_string()][..], 32, 10)
        );
        assert_eq!(config.detector_of(&config.cameras[0]).0, None);
        assert_eq!(config.detector_of(&config.cameras[1]).0, Some("yard"));
        let labelled: Vec<&str> = config
            .per_track_models()
            .filter(|(_, named)| config.answers(named, Answers::Label))
            .map(|(name, _)| name)
            .collect();
        assert_eq!(labelled, ["vehicle_type"]);
        let printed = config.to_toml().expect("print");
        let again = parse(&printed).expect("the printed config reads back");
        assert_eq!(again.models["vehicle_type"].every(), 10);
        assert_eq!(again.models["yard"].model.decoder, DecoderKind::Ssd);
        assert_eq!(again.models["yard"].model.class_scores, None::<ClassScores>);
    }

    #[test]
    fn a_camera_naming_an_unknown_model_or_a_classifier_is_refused_naming_the_detectors() {
        let unknown = TWO_MODELS.replace("model = \"yard\"", "model = \"yrad\"");
        let message = parse(&unknown).expect_err("unknown").to_string();
        assert!(message.contains("`camera[1].model`: unknown model `yrad`: the detectors are `yard`"), "{message}");
        let classifier = TWO_MODELS.replace("model = \"yard\"", "model = \"vehicle_type\"");
        assert!(parse(&classifier).expect_err("a classifier").to_string().contains("is a classifier"));
    }

    #[test]
    fn an_embedder_needs_no_labels_takes_no_groups_and_is_no_cameras_detector() {
        let config = parse(&format!("{TWO_MODELS}{EMBEDDER}")).expect("an embedder without labels");
        let looks = &config.models["looks"];
        assert_eq!(
            (looks.kind.clone(), looks.on.as_slice(), looks.every()),
            (per_track("embedder"), &["person".to_string()][..], 0)
        );
        let per_track: Vec<&str> = config.per_track_models().map(|(name, _)| name).collect();
        assert_eq!(per_track, ["looks", "vehicle_type"]);
        let grouped = format!("{TWO_MODELS}{EMBEDDER}groups = {{ a = [\"b\"] }}\n");
        let message = parse(&grouped).expect_err("groups").to_string();
        assert!(message.contains("models.looks.groups") && message.contains("only a classifier"), "{message}");
        let named = format!("{}{EMBEDDER}", TWO_MODELS.replace("model = \"yard\"", "model = \"looks\""));
        let message = parse(&named).expect_err("a camera on an embedder").to_string();
        assert!(message.contains("`looks` is an embedder; a camera names a detector"), "{message}");
        let everywhere = format!("{TWO_MODELS}{}", EMBEDDER.replace("on = [\"person\"]\n", ""));
        assert!(parse(&everywhere).expect("an embedder without `on`: every label").models["looks"].on.is_empty());
    }

    #[test]
    fn named_models_are_checked_like_the_default_one() {
        for (text, key) in [
            (TWO_MODELS.replace("on = [\"car\", \"truck\"]\n", ""), "models.vehicle_type.on"),
            (TWO_MODELS.replace("every = 10", "every = 100001"), "models.vehicle_type.every"),
            (TWO_MODELS.replace("every = 10", "min_size = 0"), "models.vehicle_type.min_size"),
            (TWO_MODELS.replace("labels = \"coco.txt\"\n", ""), "models.yard.labels"),
            (TWO_MODELS.replace("onnx = \"yolo26.onnx\"\n", ""), "models.yard.onnx"),
            (TWO_MODELS.replace("labels = \"coco.txt\"\n", "labels = \"coco.txt\"\nevery = 3\n"), "models.yard.every"),
            (TWO_MODELS.replace("[models.yard]", "[models.\"ya rd\"]"), "models.ya rd"),
            (TWO_MODELS.replace("labels = \"coco.txt\"\n", "labels = \"coco.txt\"\nbogus = 1\n"), "models.yard"),
        ] {
            match parse(&text) {
                Err(ConfigError::Invalid { key: found, .. }) => assert!(found.starts_with(key), "{found} for {key}"),
                other => panic!("{key}: expected an invalid key, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_kind_no_per_track_model_registered_is_refused_naming_the_kinds_but_read_without_the_kinds_it_is_taken() {
        let text = TWO_MODELS.replace("kind = \"classifier\"", "kind = \"segmenter\"");
        match parse(&text) {
            Err(ConfigError::Invalid { key, message, .. }) => assert_eq!(
                (key.as_str(), message.as_str()),
                (
                    "models.vehicle_type.kind",
                    "\"segmenter\" is not allowed (allowed: \"detector\", \"classifier\", \"embedder\")"
                )
            ),
            other => panic!("expected an invalid kind, got {other:?}"),
        }
        let core = Config::from_toml(&text, ConfigOrigin::Embedded, Path::new("/base")).expect("the shared checks");
        assert_eq!(config_kind(&core), per_track("segmenter"));
        let printed = core.to_toml().expect("print");
        assert!(printed.contains("kind = \"segmenter\"") && printed.contains("kind = \"detector\""), "{printed}");
    }

    fn config_kind(config: &Config) -> ModelKind {
        config.models["vehicle_type"].kind.clone()
    }
}
