//! The topic layout under `<prefix>`: one function per kind of topic, so that what the MQTT outlet
//! publishes on, what it listens on and what discovery tells Home Assistant to read never drift
//! apart.
//!
//! Owns: the names and levels of every topic. Must not: publish, or check names (the config
//! does: camera, zone and device names are topic-safe; labels go through [`topic_segment`]).

use crate::config::topic_segment;
use crate::controls::Switch;

/// `<prefix>/status`: `online`, `building` or `offline` (retained, and the Last Will).
pub fn status(prefix: &str) -> String {
    format!("{prefix}/status")
}

/// `<prefix>/telemetry`.
pub fn telemetry(prefix: &str) -> String {
    format!("{prefix}/telemetry")
}

/// `<prefix>/<camera>/counts/<label>`: objects of a label in the camera's latest frame.
pub fn label_count(prefix: &str, camera: &str, label: &str) -> String {
    format!("{prefix}/{camera}/counts/{}", topic_segment(label))
}

/// `<prefix>/<camera>/count`: objects of every label in the camera's latest frame.
pub fn camera_total(prefix: &str, camera: &str) -> String {
    format!("{prefix}/{camera}/count")
}

/// `<prefix>/<camera>/zones/<zone>`: tracked objects in the zone.
pub fn zone_total(prefix: &str, camera: &str, zone: &str) -> String {
    format!("{prefix}/{camera}/zones/{zone}")
}

/// `<prefix>/<camera>/zones/<zone>/<label>`: tracked objects of a label in the zone.
pub fn zone_label(prefix: &str, camera: &str, zone: &str, label: &str) -> String {
    format!("{prefix}/{camera}/zones/{zone}/{}", topic_segment(label))
}

/// `<prefix>/<camera>/events`: the camera's track events (not retained).
pub fn events(prefix: &str, camera: &str) -> String {
    format!("{prefix}/{camera}/events")
}

/// `<prefix>/<camera>/snapshot`: the latest periodic snapshot (JPEG, retained).
pub fn snapshot(prefix: &str, camera: &str) -> String {
    format!("{prefix}/{camera}/snapshot")
}

/// `<prefix>/<camera>/motion`: `ON` while the camera sees motion, `OFF` once it has seen none for
/// a few seconds (retained; with `[motion]` enabled).
pub fn motion(prefix: &str, camera: &str) -> String {
    format!("{prefix}/{camera}/motion")
}

/// `<prefix>/<camera>/controls/<switch>`: `ON` or `OFF` (retained).
pub fn switch_state(prefix: &str, camera: &str, switch: Switch) -> String {
    format!("{prefix}/{camera}/controls/{}", switch.name())
}

/// `<prefix>/controls/score_threshold`: the threshold (retained).
pub fn threshold_state(prefix: &str) -> String {
    format!("{prefix}/controls/score_threshold")
}

/// Where a control's state topic takes commands: `<state topic>/set`.
pub fn command(state_topic: &str) -> String {
    format!("{state_topic}/set")
}

/// The filters the daemon subscribes to for commands: every camera's switches and the threshold.
pub fn command_filters(prefix: &str) -> [String; 2] {
    [format!("{prefix}/+/controls/+/set"), format!("{prefix}/controls/+/set")]
}

/// A command that arrived: which control, by its topic under `prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandTopic {
    Switch { camera: String, switch: Switch },
    Threshold,
}

impl CommandTopic {
    /// The control a `…/set` topic names; `None` for anything else.
    pub fn parse(prefix: &str, topic: &str) -> Option<CommandTopic> {
        let rest = topic.strip_prefix(prefix)?.strip_prefix('/')?.strip_suffix("/set")?;
        match rest.split('/').collect::<Vec<_>>()[..] {
            ["controls", "score_threshold"] => Some(CommandTopic::Threshold),
            [camera, "controls", switch] => {
                Some(CommandTopic::Switch { camera: camera.to_string(), switch: Switch::from_name(switch)? })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_topics_name_their_control_and_nothing_else_does() {
        let detect = command(&switch_state("jd/orin", "front", Switch::Detect));
        assert_eq!(detect, "jd/orin/front/controls/detect/set");
        assert_eq!(
            CommandTopic::parse("jd/orin", &detect),
            Some(CommandTopic::Switch { camera: "front".into(), switch: Switch::Detect })
        );
        assert_eq!(
            CommandTopic::parse("jd/orin", &command(&threshold_state("jd/orin"))),
            Some(CommandTopic::Threshold)
        );
        for other in [
            "jd/orin/front/controls/detect",
            "jd/orin/front/controls/zoom/set",
            "jd/orinx/front/controls/detect/set",
            "jd/orin/front/zones/controls/detect/set",
            "jd/orin/controls/detect/set",
        ] {
            assert_eq!(CommandTopic::parse("jd/orin", other), None, "{other}");
        }
    }
}
