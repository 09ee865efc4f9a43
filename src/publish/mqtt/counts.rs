//! Per-camera label counts: `<prefix>/<camera>/counts/<label>`, retained, the number of objects of
//! that label in the camera's latest processed frame, and `<prefix>/<camera>/count`, the number of
//! objects of every label in it, each published when it changes — 0 included.
//!
//! Home Assistant's per-camera count sensors read these (`super::homeassistant`): a count built
//! from the detections messages stuck at its last non-zero value, because with the default
//! `mqtt.publish = "detections"` a frame without detections sends nothing. These counts see every
//! processed frame, whatever the publish policy.
//!
//! Owns: the counts of the configured labels and when they are sent. Must not: publish (the MQTT
//! outlet hands the messages over, as retained state), or know Home Assistant.

use crate::detection::{Detection, Labels};

use super::message::Outgoing;
use super::topics;

/// The counts of one camera.
#[derive(Debug)]
pub struct LabelCounts {
    /// Label name, its topic, and the count last published (`None`: not yet).
    counts: Vec<(String, String, Option<usize>)>,
    /// The topic of the count of every label, and the count last published.
    total: (String, Option<usize>),
}

impl LabelCounts {
    /// Counts of `camera`'s `labels` under `prefix`.
    pub fn new(prefix: &str, camera: &str, labels: &[String]) -> LabelCounts {
        let counts =
            labels.iter().map(|label| (label.clone(), topics::label_count(prefix, camera, label), None)).collect();
        LabelCounts { counts, total: (topics::camera_total(prefix, camera), None) }
    }

    /// 0 for every label at start, replacing what a previous run left retained.
    pub fn startup(&mut self) -> Vec<Outgoing> {
        self.update(|_| 0, 0)
    }

    /// The counts that changed with this frame's `detections`.
    pub fn frame(&mut self, detections: &[Detection], labels: &Labels) -> Vec<Outgoing> {
        self.update(|label| detections.iter().filter(|d| labels.name(d.class_id) == label).count(), detections.len())
    }

    fn update(&mut self, count_of: impl Fn(&str) -> usize, total: usize) -> Vec<Outgoing> {
        let (total_topic, last_total) = &mut self.total;
        let every_label = std::iter::once((total_topic, last_total, total));
        let labels = self.counts.iter_mut().map(|(label, topic, last)| (topic, last, count_of(label)));
        let mut out = Vec::new();
        for (topic, last, count) in labels.chain(every_label) {
            if *last != Some(count) {
                *last = Some(count);
                out.push(Outgoing { topic: topic.clone(), payload: count.to_string().into_bytes(), retain: true });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::detection::BoundingBox;

    fn cat() -> Detection {
        Detection { class_id: 1, score: 0.9, bbox: BoundingBox { x1: 0.0, y1: 0.0, x2: 1.0, y2: 1.0 } }
    }

    fn sent(out: &[Outgoing]) -> Vec<(&str, &str)> {
        out.iter().map(|m| (m.topic.as_str(), std::str::from_utf8(&m.payload).expect("utf-8"))).collect()
    }

    #[test]
    fn a_count_goes_back_to_zero_when_the_object_leaves() {
        let labels = Labels::parse("person\ncat\n", Path::new("labels")).expect("labels");
        let mut counts = LabelCounts::new("p", "front", &["cat".into(), "traffic light".into()]);
        let start = counts.startup();
        assert_eq!(
            sent(&start),
            [("p/front/counts/cat", "0"), ("p/front/counts/traffic_light", "0"), ("p/front/count", "0")]
        );
        assert!(start.iter().all(|m| m.retain));
        assert_eq!(sent(&counts.frame(&[cat()], &labels)), [("p/front/counts/cat", "1"), ("p/front/count", "1")]);
        assert_eq!(
            sent(&counts.frame(&[cat(), cat()], &labels)),
            [("p/front/counts/cat", "2"), ("p/front/count", "2")]
        );
        assert!(counts.frame(&[cat(), cat()], &labels).is_empty(), "nothing changed, nothing sent");
        assert_eq!(
            sent(&counts.frame(&[], &labels)),
            [("p/front/counts/cat", "0"), ("p/front/count", "0")],
            "the cats left"
        );
        assert!(counts.frame(&[], &labels).is_empty());
    }

    #[test]
    fn the_count_of_every_label_counts_labels_without_a_sensor_of_their_own() {
        let labels = Labels::parse("person\ncat\n", Path::new("labels")).expect("labels");
        let mut counts = LabelCounts::new("p", "front", &["person".into()]);
        counts.startup();
        assert_eq!(sent(&counts.frame(&[cat(), cat()], &labels)), [("p/front/count", "2")], "no person, two objects");
    }
}
