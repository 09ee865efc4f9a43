//! Completes a config's model description from the ONNX file: every key of
//! [`DESCRIPTION_KEYS`](crate::config::DESCRIPTION_KEYS) the config left unset
//! ([`ModelConfig::recognise`]) takes the recognised value, and [`ModelConfig::recognised`] says
//! what was recognised and why.
//!
//! Owns: applying [`super::recognise`] to a loaded config, once after every load (start, every
//! command, SIGHUP), so that everything downstream sees a fully described model. Must not: change a
//! key the config sets (an explicit value always wins), or load weights: it reads names and shapes.
//! A model that fits no decoder, or whose input cannot be recognised, is a configuration error
//! naming the key to set. A per-track model is recognised by what its kind answers
//! (`crate::config::models::PerTrackRole`, as the config was read with it), never by its name.

use crate::config::models::{Answers, ModelKind};
use crate::config::{ClassScores, Config, ConfigError, ConfigOrigin, DecoderKind, ModelConfig, TensorDtype};
use crate::detection::Labels;
use crate::preprocess::PreprocessSpec;

use super::recognise::{recognise_classifier, recognise_decoder, recognise_input};

/// Completes `config.model` and every `[models.<name>]` from their ONNX files (a no-op for what
/// the config describes itself).
pub fn describe(config: &mut Config) -> Result<(), ConfigError> {
    describe_model(&mut config.model, "model", None, &config.origin)?;
    let answers: Vec<Option<Answers>> = (config.models.values())
        .map(|named| match &named.kind {
            ModelKind::Detector => Ok(None),
            kind => config.per_track_role(kind).map(|role| Some(role.answers)).ok_or(kind),
        })
        .zip(config.models.keys())
        .map(|(answers, name)| {
            answers.map_err(|kind| ConfigError::Invalid {
                origin: config.origin.clone(),
                key: format!("models.{name}.kind"),
                message: format!("\"{}\": the config was read without this kind of per-track model", kind.name()),
            })
        })
        .collect::<Result<_, _>>()?;
    for ((name, named), answers) in config.models.iter_mut().zip(answers) {
        describe_model(&mut named.model, &format!("models.{name}"), answers, &config.origin)?;
    }
    Ok(())
}

/// Describes one model: a detector (`answers`: `None`), or a per-track model by what it answers.
fn describe_model(
    model: &mut ModelConfig,
    table: &str,
    answers: Option<Answers>,
    origin: &ConfigOrigin,
) -> Result<(), ConfigError> {
    let wanted = std::mem::take(&mut model.recognise);
    let Some(onnx) = model.onnx.clone().filter(|_| !wanted.is_empty()) else { return Ok(()) };
    let invalid = |key: &str, message: String| ConfigError::Invalid {
        origin: origin.clone(),
        key: format!("{table}.{key}"),
        message: format!("{}: {message}", onnx.display()),
    };
    let interface = super::read::read_file(&onnx).map_err(|error| invalid("onnx", error.to_string()))?;
    let wants = |key: &str| wanted.contains(&key);
    // The label count separates YOLOv5 from anchor-major YOLOv8 and softmax DETR heads; a label
    // file that does not load is reported where it is loaded.
    let labels = Labels::load(&model.labels).ok().map(|labels| labels.len());
    if answers == Some(Answers::Vector) {
        // A model answering a vector (an embedder) has no labels or decoder: its vectors are read
        // by their output's name (`crate::decode::embed`), and only its input is recognised.
        return describe_input(model, &interface, None, &wanted, table, &invalid);
    }
    if answers == Some(Answers::Label) {
        // A model answering a label (a classifier): its output must be one row of as many scores
        // as it has labels (item 6 of issue 32), whatever the config says about its scores.
        let labels = Labels::load(&model.labels).map_err(|error| invalid("labels", error.to_string()))?.len();
        let scores = recognise_classifier(&interface, labels).map_err(|error| invalid("onnx", error.to_string()))?;
        if wants("class_scores") {
            model.class_scores = Some(scores);
            model.recognised.push(format!("{table}.class_scores = \"{}\"", scores_name(scores)));
        }
        return describe_input(model, &interface, None, &wanted, table, &invalid);
    }

    let decoder = match recognise_decoder(&interface, labels) {
        Ok(decoder) => Some(decoder),
        Err(error) if wants("decoder") => return Err(invalid("decoder", error.to_string())),
        Err(_) => None,
    };
    if wants("decoder") {
        if let Some(decoder) = &decoder {
            model.decoder = decoder.kind;
            model.recognised.push(format!("{table}.decoder = \"{}\": {}", decoder_name(decoder.kind), decoder.why));
        }
    }
    if wants("class_scores") && model.decoder == DecoderKind::Detr {
        let scores = decoder.filter(|d| d.kind == DecoderKind::Detr).map_or(ClassScores::Sigmoid, |d| d.class_scores);
        model.class_scores = Some(scores);
        model.recognised.push(format!("{table}.class_scores = \"{}\"", scores_name(scores)));
    }

    let decoder = model.decoder;
    describe_input(model, &interface, Some(decoder), &wanted, table, &invalid)
}

/// Fills the `input.*` keys of `wanted` from the interface's first input.
fn describe_input(
    model: &mut ModelConfig,
    interface: &super::interface::ModelInterface,
    decoder: Option<DecoderKind>,
    wanted: &[&'static str],
    table: &str,
    invalid: &dyn Fn(&str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    let wants = |key: &str| wanted.contains(&key);
    let input_keys = wanted.iter().filter(|key| key.starts_with("input.")).collect::<Vec<_>>();
    if input_keys.is_empty() {
        return Ok(());
    }
    let recognised = recognise_input(interface, decoder).map_err(|error| invalid("input", error.to_string()))?;
    let (from, to) = (&recognised.input, &mut model.input);
    for key in &input_keys {
        match **key {
            "input.width" => to.width = from.width,
            "input.height" => to.height = from.height,
            "input.layout" => to.layout = from.layout,
            "input.dtype" => to.dtype = from.dtype,
            "input.color" => to.color = from.color,
            "input.resize" => to.resize = from.resize,
            "input.filter" => to.filter = from.filter,
            "input.pad" => to.pad = from.pad,
            "input.mean" => to.mean = from.mean,
            "input.std" => to.std = from.std,
            _ => {}
        }
    }
    // A uint8 input the config chose takes raw pixels, whatever the file's float input would.
    if to.dtype == TensorDtype::U8 && from.dtype != TensorDtype::U8 {
        to.mean = [0.0; 3];
        to.std = [1.0; 3];
    }
    let value_range = if wants("input.mean") || wants("input.std") { recognised.value_range } else { "as configured" };
    model.recognised.push(format!("{table}.input = {}: {value_range}", input_line(to)));
    Ok(())
}

fn decoder_name(kind: DecoderKind) -> String {
    serde_json::to_value(kind).ok().and_then(|value| value.as_str().map(str::to_string)).unwrap_or_default()
}

fn scores_name(scores: ClassScores) -> String {
    serde_json::to_value(scores).ok().and_then(|value| value.as_str().map(str::to_string)).unwrap_or_default()
}

/// "160x160 nchw f32 rgb, letterbox bilinear pad 114, mean [0, 0, 0] std [255, 255, 255]".
fn input_line(input: &PreprocessSpec) -> String {
    let name = |value: serde_json::Result<serde_json::Value>| {
        value.ok().and_then(|value| value.as_str().map(str::to_string)).unwrap_or_default()
    };
    format!(
        "{}x{} {} {} {}, {} {} pad {}, mean {:?} std {:?}",
        input.width,
        input.height,
        name(serde_json::to_value(input.layout)),
        name(serde_json::to_value(input.dtype)),
        name(serde_json::to_value(input.color)),
        name(serde_json::to_value(input.resize)),
        name(serde_json::to_value(input.filter)),
        input.pad,
        input.mean,
        input.std
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ResizeKind, TensorLayout};
    use std::path::Path;

    fn config(model: &str) -> Result<Config, ConfigError> {
        let root = env!("CARGO_MANIFEST_DIR");
        let text = format!("[model]\n{model}\nlabels = \"{root}/models/coco_labels.txt\"\n");
        let mut config = Config::from_toml(&text, ConfigOrigin::Embedded, Path::new(root))?;
        describe(&mut config)?;
        Ok(config)
    }

    /// `text` read as the daemon reads it: with the registered kinds of per-track model.
    fn daemon_config(text: &str) -> Result<Config, ConfigError> {
        crate::cmd::outlets::schema().from_toml(text, ConfigOrigin::Embedded, Path::new(env!("CARGO_MANIFEST_DIR")))
    }

    #[test]
    fn the_bundled_ssd_named_without_a_description_is_described_as_the_defaults_describe_it() {
        let default = Config::embedded_default().expect("default");
        let named = config("onnx = \"models/ssd_mobilenet_v2_coco_prenms_fp32.onnx\"").expect("recognised");
        assert_eq!(named.model.decoder, default.model.decoder);
        assert_eq!(named.model.input, default.model.input);
        assert_eq!(named.model.recognised.len(), 2, "{:?}", named.model.recognised);
        assert!(
            named.model.recognised[0].starts_with("model.decoder = \"ssd\": outputs `boxes`"),
            "{:?}",
            named.model.recognised
        );
    }

    #[test]
    fn yolo26_and_rt_detr_are_described_from_their_files_and_explicit_keys_win() {
        let yolo = config("onnx = \"tests/models/yolo26t_160_random.onnx\"").expect("yolo26");
        assert_eq!(yolo.model.decoder, DecoderKind::NmsFree);
        assert_eq!((yolo.model.input.width, yolo.model.input.layout), (160, TensorLayout::Nchw));
        assert_eq!((yolo.model.input.resize, yolo.model.input.std), (ResizeKind::Letterbox, [255.0; 3]));
        assert!(
            yolo.model.recognised[1].contains("160x160 nchw f32 rgb, letterbox bilinear pad 114"),
            "{:?}",
            yolo.model.recognised
        );

        let detr = config("onnx = \"tests/models/rtdetr_tiny_160_random.onnx\"").expect("rt-detr");
        assert_eq!((detr.model.decoder, detr.model.class_scores), (DecoderKind::Detr, Some(ClassScores::Sigmoid)));
        assert_eq!(detr.model.input.resize, ResizeKind::Stretch);

        let explicit =
            config("onnx = \"tests/models/yolo26t_160_random.onnx\"\ninput = { resize = \"stretch\", pad = 0 }")
                .expect("explicit keys");
        assert_eq!((explicit.model.input.resize, explicit.model.input.pad), (ResizeKind::Stretch, 0));
        assert_eq!(explicit.model.decoder, DecoderKind::NmsFree);
    }

    #[test]
    fn a_model_that_fits_no_decoder_is_a_config_error_naming_the_key_and_the_values() {
        let error = config("onnx = \"tests/models/colour_classifier.onnx\"").expect_err("a classifier").to_string();
        assert!(error.contains("`model.decoder`") && error.contains("colour_classifier.onnx"), "{error}");
        assert!(error.contains("`probabilities` float32 [1, 3]") && error.contains("\"nmsfree\""), "{error}");
        let explicit = config("onnx = \"tests/models/colour_classifier.onnx\"\ndecoder = \"yolov8\"")
            .expect("an explicit decoder is taken as it is");
        assert_eq!((explicit.model.decoder, explicit.model.input.width), (DecoderKind::Yolov8, 32));

        let missing = config("onnx = \"/nonexistent.onnx\"").expect_err("missing").to_string();
        assert!(missing.contains("`model.onnx`") && missing.contains("/nonexistent.onnx"), "{missing}");
    }

    #[test]
    fn named_detectors_and_classifiers_are_described_and_a_classifier_must_match_its_labels() {
        let text = |labels: &str| {
            format!(
                "[models.yard]\nonnx = \"tests/models/yolo26t_160_random.onnx\"\nlabels = \"models/coco_labels.txt\"\n\
                 [models.colour]\nkind = \"classifier\"\non = [\"car\"]\nonnx = \"tests/models/colour_classifier.onnx\"\n\
                 labels = \"{labels}\"\n"
            )
        };
        let mut config = daemon_config(&text("tests/models/colour_labels.txt")).expect("config");
        describe(&mut config).expect("described");
        assert_eq!(config.models["yard"].model.decoder, DecoderKind::NmsFree);
        let colour = &config.models["colour"].model;
        assert_eq!(
            (colour.class_scores, colour.input.width, colour.input.resize),
            (Some(ClassScores::Probabilities), 32, ResizeKind::Stretch)
        );
        assert_eq!(
            config.recognised().filter(|line| line.starts_with("models.")).count(),
            4,
            "{:?}",
            config.recognised().collect::<Vec<_>>()
        );

        let mut mismatched = daemon_config(&text("models/coco_labels.txt")).expect("config");
        let message = describe(&mut mismatched).expect_err("3 scores, 90 labels").to_string();
        assert!(
            message.contains("`models.colour.onnx`")
                && message.contains("scores 3 classes, but the label file has 90 labels"),
            "{message}"
        );
    }

    #[test]
    fn an_embedder_is_described_by_its_input_alone_without_labels_or_a_decoder() {
        let text =
            "[models.looks]\nkind = \"embedder\"\non = [\"person\"]\nonnx = \"models/mobilenet_v2_imagenet.onnx\"\n";
        let mut config = daemon_config(text).expect("config");
        describe(&mut config).expect("described");
        let looks = &config.models["looks"].model;
        assert_eq!((looks.input.width, looks.input.height, looks.input.layout), (224, 224, TensorLayout::Nchw));
        let lines: Vec<&str> = config.recognised().filter(|line| line.starts_with("models.looks")).collect();
        assert_eq!(lines.len(), 1, "its input only: {lines:?}");
    }

    #[test]
    fn a_per_track_model_of_a_kind_the_config_was_read_without_is_refused_naming_its_kind() {
        let text = "[models.looks]\nkind = \"embedder\"\nonnx = \"models/mobilenet_v2_imagenet.onnx\"\n";
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut config = Config::from_toml(text, ConfigOrigin::Embedded, root).expect("the core takes any kind");
        let message = describe(&mut config).expect_err("no kinds to describe it by").to_string();
        assert!(message.contains("`models.looks.kind`") && message.contains("\"embedder\""), "{message}");
    }
}
