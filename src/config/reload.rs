//! What a reload can apply: the keys a SIGHUP takes live, and the difference between the running
//! config and a reloaded one that needs a restart instead.
//!
//! Owns: `RELOADABLE_KEYS` and [`keys_needing_a_restart`] (config knowledge: which key is which).
//! Must not: apply anything (the daemon's loop does), or read files.

use std::collections::BTreeMap;

use super::Config;

/// Keys a SIGHUP applies; every other change needs a restart. `camera[i].zone` and
/// `camera[i].line` are applied too (see [`keys_needing_a_restart`]).
const RELOADABLE_KEYS: [&str; 7] = [
    "model.score_threshold",
    "model.nms_iou",
    "model.max_detections",
    "model.classes",
    "mqtt.publish",
    "mqtt.max_rate_hz",
    "tracking.",
];

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
        if let Ok(value) = toml::Value::try_from(config) {
            flatten("", &value, &mut out);
        }
        out
    };
    let (before, after) = (keys(running), keys(reloaded));
    let reloadable = |key: &str| {
        let scene = key.split_once('.').is_some_and(|(head, rest)| {
            head.starts_with("camera[") && (rest.starts_with("zone") || rest.starts_with("line"))
        });
        scene
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::ConfigOrigin;

    fn config(text: &str) -> Config {
        Config::from_toml(text, ConfigOrigin::File("test.toml".into()), Path::new("/base")).expect("config")
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
}
