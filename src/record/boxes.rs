//! One frame's boxes as data: what a clip's timed metadata track and the live view's box stream
//! carry, so that a player draws them over the video and no pixel is re-encoded.
//!
//! Owns: [`BoxFrame`] (a processed frame's detections with their track ids and the zones their
//! tracks are in, as fractions of the frame, stamped with the frame's capture time: the clock the
//! camera's access units carry too) and its one JSON form, [`BoxFrame::sample`]:
//! `{"boxes":[{"label":"person","score":0.91,"track":4,"zones":["yard"],"box":[x1,y1,x2,y2]}]}`
//! (a box without a confirmed track has no `track`, one in no zone no `zones`: a reader that
//! does not know a field ignores it, and a sample written before `zones` reads as in none).
//! Must not: know where a frame's picture sits on a track's timeline (the clip writer and the live
//! feed map the capture time), or hold a frame's pixels.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::detection::Labels;
use crate::publish::outlet::FrameResult;

/// One detection as drawn over the video.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameBox {
    pub label: String,
    /// Rounded to two decimals.
    pub score: f32,
    /// The confirmed track's id, when the detection has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub track: Option<u64>,
    /// The zones the confirmed track is in, in the scene's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    /// `[x1, y1, x2, y2]`, fractions of the frame's width and height, rounded to four decimals
    /// (a fifth of a pixel of a 1080p frame).
    #[serde(rename = "box")]
    pub bbox: [f32; 4],
}

/// A processed frame's boxes, with the frame's capture time.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxFrame {
    pub captured_at: SystemTime,
    pub boxes: Vec<FrameBox>,
}

/// The JSON of a sample.
#[derive(Serialize)]
struct Sample<'a> {
    boxes: &'a [FrameBox],
}

fn round(value: f32, scale: f32) -> f32 {
    (value * scale).round() / scale
}

impl BoxFrame {
    /// The boxes of a processed frame: every detection, with its track's id and zones where it
    /// has a track.
    pub fn from_frame(frame: &FrameResult<'_>, labels: &Labels) -> BoxFrame {
        let meta = frame.slot.meta();
        let (width, height) = (meta.width.max(1) as f32, meta.height.max(1) as f32);
        let fraction = |value: f32, side: f32| round((value / side).clamp(0.0, 1.0), 10_000.0);
        let boxes = frame
            .detections
            .iter()
            .enumerate()
            .map(|(index, detection)| {
                let b = &detection.bbox;
                FrameBox {
                    label: labels.name(detection.class_id).into_owned(),
                    score: round(detection.score, 100.0),
                    track: frame.track_ids.get(index).copied().flatten(),
                    zones: frame.zones.of(index).map(str::to_owned).collect(),
                    bbox: [
                        fraction(b.x1, width),
                        fraction(b.y1, height),
                        fraction(b.x2, width),
                        fraction(b.y2, height),
                    ],
                }
            })
            .collect();
        BoxFrame { captured_at: meta.captured_at, boxes }
    }

    /// The frame's boxes as one metadata sample (UTF-8 JSON).
    pub fn sample(&self) -> Vec<u8> {
        serde_json::to_vec(&Sample { boxes: &self.boxes }).unwrap_or_default()
    }

    /// The boxes of a metadata sample, if it is one.
    pub fn parse_sample(sample: &[u8]) -> Option<Vec<FrameBox>> {
        #[derive(Deserialize)]
        struct Owned {
            boxes: Vec<FrameBox>,
        }
        serde_json::from_slice::<Owned>(sample).ok().map(|owned| owned.boxes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detection::{BoundingBox, Detection};
    use crate::frame::{FrameSlot, FrameTimings, HeapMemory, PixelFormat};
    use crate::track::detection_zones::DetectionZones;
    use crate::track::events::Zone;
    use crate::track::zones::Polygon;

    #[test]
    fn a_frames_boxes_are_fractions_with_their_tracks_and_zones_and_read_back_from_their_sample() {
        let mut slot = FrameSlot::new(Box::new(HeapMemory::with_capacity(200 * 100 * 3)));
        slot.prepare(200, 100, PixelFormat::Rgb8).expect("room");
        let detection = |class_id, x1| Detection {
            class_id,
            score: 0.9149,
            bbox: BoundingBox { x1, y1: 10.0, x2: 150.0, y2: 120.0 },
        };
        let detections = [detection(0, 20.0), detection(1, -5.0)];
        let labels = Labels::parse("person\ndog\n", std::path::Path::new("labels.txt")).expect("labels");
        let timings = FrameTimings::default();
        let square = Polygon::new(&[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]).expect("a square");
        let zone = |name: &str| Zone { name: name.into(), polygon: square.clone(), classes: vec![] };
        let scene = [zone("yard"), zone("lawn")];
        let frame = FrameResult {
            camera: "gate",
            slot: &slot,
            detections: &detections,
            track_ids: &[Some(4), None],
            zones: DetectionZones::new(&[0b11, 0], &scene),
            attributes: None,
            timings: &timings,
            tracking: Default::default(),
            snapshot: None,
        };
        let boxes = BoxFrame::from_frame(&frame, &labels);
        assert_eq!(boxes.captured_at, slot.meta().captured_at);
        let sample = boxes.sample();
        assert_eq!(
            String::from_utf8_lossy(&sample),
            r#"{"boxes":[{"label":"person","score":0.91,"track":4,"zones":["yard","lawn"],"box":[0.1,0.1,0.75,1.0]},{"label":"dog","score":0.91,"box":[0.0,0.1,0.75,1.0]}]}"#
        );
        assert_eq!(BoxFrame::parse_sample(&sample), Some(boxes.boxes));
        let before_zones = br#"{"boxes":[{"label":"person","score":0.91,"track":4,"box":[0.1,0.1,0.75,1.0]}]}"#;
        let read = BoxFrame::parse_sample(before_zones).expect("a sample written before zones");
        assert!(read[0].zones.is_empty(), "reads as in no zone");
        assert_eq!(BoxFrame::parse_sample(b"not json"), None);
    }
}
