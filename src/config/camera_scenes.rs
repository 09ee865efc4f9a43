//! Each configured camera's scene ([`camera_scene`]): its zones and lines parsed (`scene`) and
//! their labels resolved against the label file, an error naming the config key. Must not: read
//! the label file (the caller hands it in).

use super::error::ConfigError;
use super::scene::parse_scene;
use super::whole::Config;
use crate::detection::Labels;
use crate::track::events::Scene;

/// The zones and lines of `config.cameras[index]`, zone labels resolved against the label file:
/// an error names the config key (`camera[0].zone[1].labels`, or `model.labels` when the label
/// file is what must change).
pub fn camera_scene(config: &Config, index: usize, labels: &Labels) -> Result<Scene, ConfigError> {
    let camera = &config.cameras[index];
    parse_scene(&camera.name, &camera.zones, &camera.lines)
        .and_then(|parsed| parsed.resolve(labels, &config.model.labels))
        .map_err(|e| ConfigError::Invalid {
            origin: config.origin.clone(),
            key: if e.in_label_file { "model.labels".to_owned() } else { format!("camera[{index}].{}", e.key) },
            message: e.message,
        })
}

/// The zones and lines of every configured camera, in config order.
pub fn camera_scenes(config: &Config, labels: &Labels) -> Result<Vec<Scene>, ConfigError> {
    (0..config.cameras.len()).map(|index| camera_scene(config, index, labels)).collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::origin::ConfigOrigin;

    /// Issue 21: `d+o#g/x` and `D_O_G_X` shared one retained zone-count topic.
    #[test]
    fn labels_that_share_a_topic_level_are_refused_for_a_zone_that_counts_both() {
        let text = "[[camera]]\nname = \"front\"\nsource = { kind = \"synthetic\" }\n[[camera.zone]]\nname = \"z\"\n\
                    polygon = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]\n";
        let config =
            Config::from_toml(text, ConfigOrigin::File("test.toml".into()), Path::new("/base")).expect("config");
        let colliding = Labels::parse("cat\nd+o#g/x\nD_O_G_X\n", Path::new("labels")).expect("labels");
        match camera_scene(&config, 0, &colliding) {
            Err(ConfigError::Invalid { key, message, .. }) => {
                assert_eq!(key, "model.labels");
                assert!(message.contains("d_o_g_x") && message.contains("D_O_G_X"), "{message}");
            }
            other => panic!("expected a collision, got {other:?}"),
        }
        let labels = Labels::parse("person\ntraffic light\n", Path::new("labels")).expect("labels");
        assert!(camera_scene(&config, 0, &labels).is_ok());
    }
}
