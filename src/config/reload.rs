//! What a reload can apply: the keys a SIGHUP takes live, and the difference between the running
//! config and a reloaded one that needs a restart instead.
//!
//! Owns: `RELOADABLE_KEYS` (the core's; a component's section names its own:
//! `super::whole::Section::RELOADABLE`), [`keys_needing_a_restart`] (config knowledge: which key
//! is which) and [`applied`], the running config after a reload.
//! Must not: apply anything (the daemon's loop does), or read files.

use std::collections::BTreeMap;

use super::tracking::TrackingConfig;
use super::whole::Config;

/// The core's keys a SIGHUP applies (with each section's own); every other change needs a
/// restart. `camera[i].zone` and `camera[i].line` are applied too, and the `model.` keys here of
/// every `[models.<name>]` table that runs already (see [`keys_needing_a_restart`]).
const RELOADABLE_KEYS: [&str; 5] =
    ["model.score_threshold", "model.nms_iou", "model.max_detections", "model.classes", "tracking."];

/// The keys whose value differs between `running` and `reloaded` and that a SIGHUP does not apply,
/// as `mqtt.host` or `camera[1].source.device` (whole tables when one was added or removed).
pub fn keys_needing_a_restart(running: &Config, reloaded: &Config) -> Vec<String> {
    fn flatten(prefix: &str, value: &toml::Value, out: &mut BTreeMap<String, toml::Value>) {
        let join = |key: &str| if prefix.is_empty() { key.to_owned() } else { format!("{prefix}.{key}") };
        match value {
            toml::Value::Table(table) => table.iter().for_each(|(key, value)| flatten(&join(key), value, out)),
            toml::Value::Array(items) if items.iter().all(toml::Value::is_table) && !items.is_empty() => {
                for (index, item) in items.iter().enumerate() {
                    flatten(&format!("{prefix}[{index}]"), item, out);
                }
            }
            other => {
                out.insert(prefix.to_owned(), other.clone());
            }
        }
    }
    let keys = |config: &Config| {
        let mut out = BTreeMap::new();
        if let Ok(value) = config.to_value() {
            flatten("", &value, &mut out);
        }
        out
    };
    let sections: Vec<&str> = running.sections.reloadable().collect();
    let (before, after) = (keys(running), keys(reloaded));
    let reloadable = |key: &str| {
        let scene = key.split_once('.').is_some_and(|(head, rest)| {
            head.starts_with("camera[") && (rest.starts_with("zone") || rest.starts_with("line"))
        });
        // `models.yard.score_threshold` is `model.score_threshold` of a model that runs already.
        let named = key.strip_prefix("models.").and_then(|rest| rest.split_once('.')).is_some_and(|(name, rest)| {
            running.models.contains_key(name)
                && reloaded.models.contains_key(name)
                && RELOADABLE_KEYS.iter().any(|k| k.strip_prefix("model.") == Some(rest))
        });
        scene
            || named
            || sections.contains(&key)
            || (key != "tracking.enabled"
                && RELOADABLE_KEYS.iter().any(|k| key == *k || (k.ends_with('.') && key.starts_with(k))))
    };
    let mut changed: Vec<String> = before
        .keys()
        .chain(after.keys())
        .filter(|key| before.get(*key) != after.get(*key) && !reloadable(key))
        .cloned()
        .collect();
    changed.sort();
    changed.dedup();
    changed
}

/// The config a SIGHUP leaves running: `running` with what a reload applies taken from `reloaded`
/// — the [`RELOADABLE_KEYS`] (of `[model]` and of each running `[models.<name>]`), each section's
/// own (`super::whole::Section::reloaded`), and each
/// running camera's zones and lines from the reloaded camera
/// of the same name — and nothing else. Cameras keep the names they run under: one that the
/// reload renamed or removed keeps its zones until a restart, so the web page and the API go on
/// answering for the cameras that run.
pub fn applied(running: &Config, reloaded: &Config) -> Config {
    let mut config = running.clone();
    config.model.score_threshold = reloaded.model.score_threshold;
    config.model.nms_iou = reloaded.model.nms_iou;
    config.model.max_detections = reloaded.model.max_detections;
    config.model.classes.clone_from(&reloaded.model.classes);
    for (name, named) in &mut config.models {
        if let Some(reloaded) = reloaded.models.get(name) {
            named.model.score_threshold = reloaded.model.score_threshold;
            named.model.nms_iou = reloaded.model.nms_iou;
            named.model.max_detections = reloaded.model.max_detections;
            named.model.classes.clone_from(&reloaded.model.classes);
        }
    }
    config.sections = running.sections.reloaded(&reloaded.sections);
    config.tracking = TrackingConfig { enabled: running.tracking.enabled, ..reloaded.tracking.clone() };
    for camera in &mut config.cameras {
        if let Some(reloaded) = reloaded.cameras.iter().find(|other| other.name == camera.name) {
            camera.zones.clone_from(&reloaded.zones);
            camera.lines.clone_from(&reloaded.lines);
        }
    }
    config
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::origin::ConfigOrigin;

    /// With the daemon's sections: `mqtt.publish` is a reloadable key of the MQTT outlet's.
    fn config(text: &str) -> Config {
        let origin = ConfigOrigin::File("test.toml".into());
        crate::cmd::outlets::schema().from_toml(text, origin, Path::new("/base")).expect("config")
    }

    const CAMERA: &str = "[[camera]]\nname = \"front\"\nsource = { kind = \"images\", path = \"a\" }\n";

    /// Issue 21: a SIGHUP that changed the broker or a camera logged only "need a restart".
    #[test]
    fn a_reload_names_each_key_it_cannot_apply_and_none_it_applies() {
        let running = config(CAMERA);
        let zone = "[[camera.zone]]\nname = \"z\"\npolygon = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]\n";
        let applied = config(&format!(
            "[model]\nscore_threshold = 0.7\nclasses = [\"person\"]\n[mqtt]\npublish = \"on_change\"\n\
             [tracking]\nmin_hits = 5\n{CAMERA}{zone}"
        ));
        assert_eq!(keys_needing_a_restart(&running, &applied), Vec::<String>::new());
        let restart = config(&format!(
            "[mqtt]\nhost = \"broker.lan\"\n[tracking]\nenabled = false\n{}",
            CAMERA.replace("path = \"a\"", "path = \"b\"")
        ));
        assert_eq!(
            keys_needing_a_restart(&running, &restart),
            ["camera[0].source.path", "mqtt.host", "tracking.enabled"]
        );
        let two_cameras =
            config(&format!("{CAMERA}[[camera]]\nname = \"back\"\nsource = {{ kind = \"synthetic\" }}\n"));
        let added = keys_needing_a_restart(&running, &two_cameras);
        assert!(added.iter().all(|key| key.starts_with("camera[1].")) && !added.is_empty(), "{added:?}");
    }

    /// Issue 35: after a SIGHUP that renamed a running camera, its zones API answered 404.
    #[test]
    fn a_reload_applies_exactly_the_reloadable_keys_and_keeps_the_running_cameras() {
        let zone = |name: &str| {
            format!("[[camera.zone]]\nname = \"{name}\"\npolygon = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]\n")
        };
        let running = config(&format!("{CAMERA}{}", zone("old")));
        let reloaded = config(&format!(
            "[model]\nscore_threshold = 0.7\n[mqtt]\nhost = \"broker.lan\"\npublish = \"on_change\"\n\
             [tracking]\nenabled = false\nmin_hits = 5\n{CAMERA}{}\
             [[camera]]\nname = \"renamed\"\nsource = {{ kind = \"synthetic\" }}\n{}",
            zone("new"),
            zone("other")
        ));
        let applied = applied(&running, &reloaded);
        assert_eq!(keys_needing_a_restart(&running, &applied), Vec::<String>::new(), "only reloadable keys change");
        assert_eq!(
            keys_needing_a_restart(&applied, &reloaded),
            keys_needing_a_restart(&running, &reloaded),
            "what needs a restart still does"
        );
        assert_eq!(
            (applied.model.score_threshold, applied.tracking.min_hits, applied.tracking.enabled),
            (0.7, 5, true)
        );
        assert_eq!(applied.cameras.len(), 1);
        assert_eq!((applied.cameras[0].name.as_str(), applied.cameras[0].zones[0].name.as_str()), ("front", "new"));
        let yard = "[models.yard]\nonnx = \"y.onnx\"\nlabels = \"l.txt\"\n";
        let (before, after) = (config(yard), config(&format!("{yard}score_threshold = 0.8\nclasses = [\"car\"]\n")));
        assert_eq!(keys_needing_a_restart(&before, &after), Vec::<String>::new(), "a named model's thresholds");
        let applied = super::applied(&before, &after);
        assert_eq!(
            (applied.models["yard"].model.score_threshold, &applied.models["yard"].model.classes[..]),
            (0.8, &["car".to_string()][..])
        );
        let moved = config(&format!("{yard}onnx = \"other.onnx\"\n").replace("onnx = \"y.onnx\"\n", ""));
        assert_eq!(keys_needing_a_restart(&before, &moved), ["models.yard.onnx"], "its file needs a restart");
        let renamed = config(&CAMERA.replace("front", "porch"));
        assert_eq!(
            super::applied(&running, &renamed).cameras[0].zones[0].name,
            "old",
            "a renamed camera keeps its zones"
        );
    }
}
