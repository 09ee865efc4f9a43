//! The zones of a frame's detections: per detection, the zones its confirmed track is in, as the
//! event rules settled them (`super::events`), so that what draws or stores a frame's boxes names
//! the same zones as the track's events.
//!
//! Owns: [`DetectionZones`], a borrowed view of one frame's memberships and the scene's zones.
//! Must not: judge membership (the event rules do) or outlive the frame's tracking step.

use super::events::Zone;

/// Per detection of one frame, the zones its confirmed track is in (none for a detection without
/// one, and none at all while tracking is off).
#[derive(Debug, Clone, Copy, Default)]
pub struct DetectionZones<'a> {
    /// Per detection: bit i set when its track is in `zones[i]`.
    bits: &'a [u64],
    zones: &'a [Zone],
}

impl<'a> DetectionZones<'a> {
    /// `bits[i]`: the zones (bit j: `zones[j]`) of detection i's track.
    pub fn new(bits: &'a [u64], zones: &'a [Zone]) -> DetectionZones<'a> {
        DetectionZones { bits, zones }
    }

    /// The names of the zones detection `index`'s track is in, in the scene's order.
    pub fn of(&self, index: usize) -> impl Iterator<Item = &'a str> + 'a {
        let bits = self.bits.get(index).copied().unwrap_or(0);
        self.zones.iter().enumerate().filter(move |(i, _)| bits & (1 << i) != 0).map(|(_, zone)| zone.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::track::zones::Polygon;

    fn zone(name: &str) -> Zone {
        let square = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]];
        Zone { name: name.into(), polygon: Polygon::new(&square).expect("a square"), classes: vec![] }
    }

    #[test]
    fn each_detection_names_its_tracks_zones_in_the_scenes_order() {
        let zones = [zone("yard"), zone("lawn"), zone("drive")];
        let zones = DetectionZones::new(&[0b101, 0], &zones);
        assert_eq!(zones.of(0).collect::<Vec<_>>(), ["yard", "drive"]);
        assert_eq!(zones.of(1).count(), 0, "a detection in no zone");
        assert_eq!(zones.of(2).count(), 0, "beyond the frame's detections");
        assert_eq!(DetectionZones::default().of(0).count(), 0, "tracking off");
    }
}
