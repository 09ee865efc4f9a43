//! Messages that named the wrong thing (issue 35): a zone label from the zones file blamed on the
//! config file, and a label file's byte-order mark that became part of the first label.

use super::{one_camera, run_bounded, run_command, shared_dir, toml_path};
use crate::arch::daemon_command as daemon;
use crate::daemon::{sample, TestConfig};

/// A zone saved from the web page whose label the label file lacks stopped `run` with 78 naming the
/// config file, which has no zone at all. Both commands now name the zones file, the key in it, the
/// camera and the zone.
#[test]
fn a_zones_file_label_the_label_file_lacks_names_the_zones_file_and_the_zone() {
    let dir = shared_dir();
    let zones = dir.path().join("zones.toml");
    std::fs::write(
        &zones,
        "[[camera]]\nname = \"front\"\n[[camera.zone]]\nname = \"lane\"\n\
         polygon = [[0.0, 0.5], [1.0, 0.5], [1.0, 1.0]]\nlabels = [\"unicorn\"]\n",
    )
    .expect("write");
    let config = one_camera().set("http", "zones_file", &toml_path(&zones)).write(&dir.path().join("config.toml"));
    let zones_path = zones.display().to_string();
    for command in ["check-config", "run"] {
        let outcome = run_command("a zones-file label", command, &config);
        outcome.assert_config_error(
            command,
            &[&zones_path, "camera[0].zone[0].labels", "camera \"front\", zone \"lane\"", "unicorn"],
        );
        let error = outcome.stderr.lines().rfind(|line| line.starts_with("jetson-detectd: ")).unwrap_or_default();
        assert!(!error.contains(&config.display().to_string()), "names the config:\n{}", outcome.stderr);
    }
}

/// A label file saved with a UTF-8 byte-order mark named class 0 "\u{feff}person": `model.classes
/// = ["person"]` was refused and detections said "\u{feff}person". Now the mark is not part of
/// the name.
#[test]
fn a_label_file_with_a_byte_order_mark_names_its_first_class_without_it() {
    let dir = shared_dir();
    let labels = dir.path().join("labels.txt");
    let bundled = std::fs::read_to_string(TestConfig::bundled_labels()).expect("the bundled labels");
    std::fs::write(&labels, format!("\u{feff}{bundled}")).expect("write");
    let config = one_camera()
        .model(&TestConfig::bundled_model(), &labels)
        .set("model", "classes", "[\"person\"]")
        .write(&dir.path().join("config.toml"));
    let checked = run_command("labels with a BOM", "check-config", &config);
    assert!(checked.status.success(), "{}", checked.stderr);
    let mut binary = daemon();
    binary.args(["detect", "--config"]).arg(&config).arg(sample("person.jpg"));
    let detected = run_bounded("detect with a BOM in the labels", binary);
    assert!(detected.status.success(), "{}", detected.stderr);
    assert!(detected.stdout.contains("\"label\":\"person\""), "{}", detected.stdout);
    assert!(!detected.stdout.contains("\\ufeff") && !detected.stdout.contains('\u{feff}'), "{}", detected.stdout);
}

/// A missing label file of a `[models.<name>]` detector was reported as `model.labels`, a key the
/// config does not set, and without the config file. Both commands now name the config file, the
/// model's own key and the label file.
#[test]
fn a_named_models_missing_label_file_names_its_key_and_the_config_file() {
    let dir = shared_dir();
    let labels = dir.path().join("missing-labels.txt");
    let config = one_camera()
        .append(&format!(
            "model = \"yard\"\n[models.yard]\nonnx = {}\nlabels = {}",
            toml_path(&TestConfig::bundled_model()),
            toml_path(&labels)
        ))
        .write(&dir.path().join("config.toml"));
    let wanted = [config.display().to_string(), "`models.yard.labels`".into(), labels.display().to_string()];
    for command in ["check-config", "run"] {
        let outcome = run_command("a named model's missing label file", command, &config);
        outcome.assert_config_error(command, &wanted.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(!outcome.stderr.contains("`model.labels`"), "names [model]'s key:\n{}", outcome.stderr);
    }
}
