//! The one zone parser: a camera's zones and lines, as `[[camera.zone]]` and `[[camera.line]]`
//! (or a body saved from the page) say them, become a checked tracking [`Scene`], or an error that
//! names the field ("parse, don't validate").
//!
//! Owns: every rule of a zone or a line — names (topic levels, unique per camera among zones and
//! lines together: an event names a zone or a line alike), counts, labels listed once, the
//! polygon and the segment (built by `crate::track`'s own constructors, so a shape accepted here
//! is one the tracker can use), zone labels against the label file, and labels that would share
//! one retained count topic. Config validation, the zones file, the HTTP API and the daemon's
//! tracking all call it. Must not: read the label file (its callers have it) or know where the
//! scene goes.
//!
//! Why here: `track/` holds the checked types ([`Scene`], [`Polygon`], [`Segment`]) and must stay
//! free of config imports; `config/` already sits above `track/`, and everything that parses a zone
//! (config validation, `http/`, `publish/`) sits above `config/`. So the parser lives where all of
//! them can import it without an arrow back up.
//!
//! Parsing has two steps because the label file is read after the config: [`parse_scene`] checks
//! names and shapes (what `Config` parsing can check), [`ParsedScene::resolve`] turns zone labels
//! into class ids (at `check-config`, at start, on reload, and for a zone saved from the page).

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use super::camera::{LineConfig, ZoneConfig};
use super::topic::{is_topic_segment, topic_segment};
use crate::detection::Labels;
use crate::motion::MAX_MASKS;
use crate::track::events::{Line, Scene, Zone};
use crate::track::lines::{Segment, MAX_LINES};
use crate::track::zones::{Polygon, MAX_ZONES};

/// A zone or line mistake: the key under the camera (`zone[1].polygon`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SceneError {
    pub key: String,
    pub message: String,
    /// The mistake is the label file's, not the zone's: two of its labels would share a count
    /// topic of a zone that counts every label (the config names `model.labels` then).
    pub in_label_file: bool,
}

impl SceneError {
    fn new(key: String, message: String) -> SceneError {
        SceneError { key, message, in_label_file: false }
    }
}

/// A zone whose name and shape are checked; its labels are names still.
#[derive(Debug, Clone, PartialEq)]
struct ParsedZone {
    name: String,
    polygon: Polygon,
    labels: Vec<String>,
}

/// One camera's zones and lines, checked but for the zone labels ([`ParsedScene::resolve`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedScene {
    camera: String,
    zones: Vec<ParsedZone>,
    lines: Vec<Line>,
}

/// Checks one camera's zones and lines: names, counts, polygons, segments.
pub fn parse_scene(camera: &str, zones: &[ZoneConfig], lines: &[LineConfig]) -> Result<ParsedScene, SceneError> {
    if zones.len() > MAX_ZONES {
        return Err(SceneError::new("zone".into(), format!("at most {MAX_ZONES} zones per camera")));
    }
    if lines.len() > MAX_LINES {
        return Err(SceneError::new("line".into(), format!("at most {MAX_LINES} lines per camera")));
    }
    let mut parsed = ParsedScene { camera: camera.into(), zones: Vec::new(), lines: Vec::new() };
    let mut names = BTreeSet::new();
    for (j, zone) in zones.iter().enumerate() {
        let what = format!("camera {camera:?}, zone {:?}", zone.name);
        if !is_topic_segment(&zone.name) {
            return Err(SceneError::new(
                format!("zone[{j}].name"),
                format!("{what}: use 1..=64 letters, digits, `_` or `-` (it is a topic level)"),
            ));
        }
        if !names.insert(zone.name.as_str()) {
            return Err(SceneError::new(format!("zone[{j}].name"), format!("{what}: two zones have this name")));
        }
        let polygon = Polygon::new(&zone.polygon)
            .map_err(|reason| SceneError::new(format!("zone[{j}].polygon"), format!("{what}: {reason}")))?;
        if zone.labels.iter().any(|label| label.trim().is_empty()) {
            return Err(SceneError::new(format!("zone[{j}].labels"), format!("{what}: empty label name")));
        }
        let mut listed = BTreeSet::new();
        if let Some(twice) = zone.labels.iter().find(|label| !listed.insert(label.as_str())) {
            return Err(SceneError::new(format!("zone[{j}].labels"), format!("{what}: {twice:?} is listed twice")));
        }
        parsed.zones.push(ParsedZone { name: zone.name.clone(), polygon, labels: zone.labels.clone() });
    }
    let mut names = BTreeSet::new();
    for (j, line) in lines.iter().enumerate() {
        let what = format!("camera {camera:?}, line {:?}", line.name);
        if !is_topic_segment(&line.name) {
            return Err(SceneError::new(
                format!("line[{j}].name"),
                format!("{what}: use 1..=64 letters, digits, `_` or `-`"),
            ));
        }
        if !names.insert(line.name.as_str()) {
            return Err(SceneError::new(format!("line[{j}].name"), format!("{what}: two lines have this name")));
        }
        if zones.iter().any(|zone| zone.name == line.name) {
            return Err(SceneError::new(
                format!("line[{j}].name"),
                format!("{what}: a zone has this name too, and events name both alike: give each its own"),
            ));
        }
        let segment = Segment::new(line.points)
            .map_err(|reason| SceneError::new(format!("line[{j}].points"), format!("{what}: {reason}")))?;
        parsed.lines.push(Line { name: line.name.clone(), segment });
    }
    Ok(parsed)
}

/// A motion mask as the config, the zones file and the page say it: a polygon's points in frame
/// fractions.
pub type MaskPoints = Vec<[f64; 2]>;

/// Checks a camera's motion masks (`[motion.camera.<name>].masks`, or the zones file's and the
/// page's `masks`): at most [`MAX_MASKS`], each a polygon as a zone's is. An error's key is under
/// the masks (`masks`, `masks[2]`).
pub fn parse_masks(camera: &str, masks: &[MaskPoints]) -> Result<Vec<Polygon>, SceneError> {
    if masks.len() > MAX_MASKS {
        let message = format!("camera {camera:?}: {} masks; at most {MAX_MASKS}", masks.len());
        return Err(SceneError::new("masks".into(), message));
    }
    masks
        .iter()
        .enumerate()
        .map(|(j, points)| {
            Polygon::new(points).map_err(|reason| {
                SceneError::new(format!("masks[{j}]"), format!("camera {camera:?}, mask {j}: {reason}"))
            })
        })
        .collect()
}

impl ParsedScene {
    /// The tracking scene: each zone's labels as class ids of `labels` (read from `label_file`).
    /// A label the file does not have is an error naming the zone and the label.
    pub fn resolve(self, labels: &Labels, label_file: &Path) -> Result<Scene, SceneError> {
        let mut scene = Scene { zones: Vec::with_capacity(self.zones.len()), lines: self.lines };
        for (j, zone) in self.zones.into_iter().enumerate() {
            let what = format!("camera {:?}, zone {:?}", self.camera, zone.name);
            let classes = zone
                .labels
                .iter()
                .map(|label| {
                    labels.id_of(label).ok_or_else(|| {
                        SceneError::new(
                            format!("zone[{j}].labels"),
                            format!("{what}: {label:?} is not in the label file {}", label_file.display()),
                        )
                    })
                })
                .collect::<Result<Vec<usize>, SceneError>>()?;
            check_topic_collisions(labels, &classes).map_err(|message| SceneError {
                key: format!("zone[{j}].labels"),
                message: format!("{what}: {message}"),
                in_label_file: zone.labels.is_empty(),
            })?;
            scene.zones.push(Zone { name: zone.name, polygon: zone.polygon, classes });
        }
        Ok(scene)
    }
}

/// Two labels a zone counts (`classes`, or every label when empty) that would share one retained
/// count topic (`d+o#g/x` and `D_O_G_X` both become `d_o_g_x`).
fn check_topic_collisions(labels: &Labels, classes: &[usize]) -> Result<(), String> {
    let counted: Vec<usize> = if classes.is_empty() { (0..labels.len()).collect() } else { classes.to_vec() };
    let mut seen: HashMap<String, usize> = HashMap::new();
    for class in counted {
        let name = labels.name(class);
        if let Some(first) = seen.insert(topic_segment(&name), class) {
            if first != class {
                return Err(format!(
                    "labels {:?} and {name:?} both become the topic level {:?}: their zone counts would share \
                     one retained topic; rename one in the label file",
                    labels.name(first),
                    topic_segment(&name)
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    fn labels() -> Labels {
        Labels::parse("person\ntraffic light\n", Path::new("labels")).expect("labels")
    }

    #[test]
    fn a_scene_is_parsed_once_into_the_trackers_types_with_labels_resolved() {
        let zones = [ZoneConfig {
            name: "lane".into(),
            polygon: vec![[0.0, 0.5], [1.0, 0.5], [1.0, 1.0], [0.0, 1.0]],
            labels: vec!["traffic light".into()],
        }];
        let lines = [LineConfig { name: "gate".into(), points: [[0.5, 1.0], [0.5, 0.0]] }];
        let scene = parse_scene("front", &zones, &lines)
            .and_then(|parsed| parsed.resolve(&labels(), Path::new("labels")))
            .expect("a valid scene");
        assert_eq!((scene.zones[0].name.as_str(), scene.zones[0].classes.as_slice()), ("lane", &[1][..]));
        assert_eq!(scene.lines[0].name, "gate");
        let unknown = [ZoneConfig { labels: vec!["dragon".into()], ..zones[0].clone() }];
        let error = parse_scene("front", &unknown, &[]).and_then(|p| p.resolve(&labels(), Path::new("l.txt")));
        let error = error.expect_err("no dragons in the label file");
        assert_eq!(error.key, "zone[0].labels");
        assert!(error.message.contains("\"dragon\" is not in the label file l.txt"), "{}", error.message);
    }

    /// Issue 35: a zone and a line could share a name, and a zone could list a label twice.
    #[test]
    fn a_zone_and_a_line_may_not_share_a_name_and_a_label_is_listed_once() {
        let zone = ZoneConfig {
            name: "gate".into(),
            polygon: vec![[0.0, 0.5], [1.0, 0.5], [1.0, 1.0]],
            labels: vec!["person".into(), "car".into()],
        };
        let line = LineConfig { name: "gate".into(), points: [[0.5, 1.0], [0.5, 0.0]] };
        let error = parse_scene("front", std::slice::from_ref(&zone), &[line]).expect_err("one name");
        assert_eq!(error.key, "line[0].name");
        assert!(error.message.contains("a zone has this name too"), "{}", error.message);
        let twice = ZoneConfig { labels: vec!["person".into(), "car".into(), "person".into()], ..zone };
        let error = parse_scene("front", &[twice], &[]).expect_err("a label twice");
        assert_eq!(error.key, "zone[0].labels");
        assert!(error.message.contains("\"person\" is listed twice"), "{}", error.message);
    }

    #[test]
    fn masks_are_polygons_like_zones_and_an_error_names_the_mask() {
        let square = vec![[0.0, 0.0], [0.3, 0.0], [0.3, 0.3], [0.0, 0.3]];
        assert_eq!(parse_masks("front", &[square.clone(), square.clone()]).expect("two masks").len(), 2);
        let error = parse_masks("front", &[square.clone(), vec![[0.0, 0.0], [1.5, 0.0], [0.0, 1.0]]]).unwrap_err();
        assert_eq!(error.key, "masks[1]");
        assert!(error.message.contains("camera \"front\", mask 1"), "{}", error.message);
        let error = parse_masks("front", &vec![square; MAX_MASKS + 1]).unwrap_err();
        assert_eq!(error.key, "masks");
    }

    #[test]
    fn labels_become_single_topic_levels() {
        assert_eq!(topic_segment("traffic light"), "traffic_light");
        assert_eq!(topic_segment("a/b+#"), "a_b__");
        assert_eq!(topic_segment("Hot-Dog"), "hot-dog");
    }
}
