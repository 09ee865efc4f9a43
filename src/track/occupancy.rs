//! Zone occupancy: how many confirmed objects are in each zone, in total and per label, and which
//! of those counts changed.
//!
//! Owns: the counts and the memory of what was last reported for each, so that a count goes out
//! only when it changes. Must not: decide zone membership (the watcher's settled zones do) or know
//! topics and payloads.
//!
//! Only confirmed, live tracks count; a track that is lost but not yet ended still counts where it
//! was last seen, so a short occlusion does not make a zone flicker to empty. Counts of a zone's
//! configured labels and its total are known from the start (reported as 0 at once, replacing
//! whatever a previous run left retained); other labels are reported from their first sighting on.

use std::sync::Arc;

use super::events::{Scene, Watcher};
use super::tracker::{Lifecycle, Tracker};

/// A count to report. `count: None` means the zone is gone (SIGHUP removed it): clear its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OccupancyChange {
    pub zone: Arc<str>,
    /// `None`: the zone's total over every label.
    pub class_id: Option<usize>,
    pub count: Option<u32>,
}

#[derive(Debug, Clone)]
struct Entry {
    zone: usize,
    zone_name: Arc<str>,
    class_id: Option<usize>,
    count: u32,
    reported: Option<u32>,
}

/// The occupancy counts of one camera's zones.
#[derive(Debug, Default)]
pub struct Occupancy {
    entries: Vec<Entry>,
    changes: Vec<OccupancyChange>,
}

impl Occupancy {
    /// Counts for `scene`'s zones; [`Occupancy::take_unreported`] yields their initial zeros.
    pub fn new(scene: &Scene) -> Occupancy {
        let mut occupancy = Occupancy::default();
        occupancy.add_known_entries(scene);
        occupancy
    }

    /// Changes of the last [`Occupancy::recount`] or [`Occupancy::set_scene`].
    pub fn changes(&self) -> &[OccupancyChange] {
        &self.changes
    }

    /// Every count not reported yet, as it stands (the zeros at start and after a reload).
    pub fn take_unreported(&mut self) -> &[OccupancyChange] {
        self.changes.clear();
        self.report(|entry| entry.reported.is_none());
        &self.changes
    }

    /// Adds every entry `due` picks to the changes, as reported now.
    fn report(&mut self, due: impl Fn(&Entry) -> bool) {
        for entry in self.entries.iter_mut().filter(|entry| due(entry)) {
            entry.reported = Some(entry.count);
            self.changes.push(OccupancyChange {
                zone: entry.zone_name.clone(),
                class_id: entry.class_id,
                count: Some(entry.count),
            });
        }
    }

    /// Recounts after the tracker and the watcher have seen a frame.
    pub fn recount(&mut self, tracker: &Tracker, watcher: &Watcher, scene: &Scene) {
        for entry in &mut self.entries {
            entry.count = 0;
        }
        for report in tracker.reports() {
            if !matches!(report.lifecycle, Lifecycle::Observed { .. } | Lifecycle::Missed) {
                continue;
            }
            let Some(track) = tracker.track(report.slot).filter(|t| t.is_confirmed()) else { continue };
            let zones = watcher.zones(report.slot);
            for (zone, _) in scene.zones.iter().enumerate().filter(|(i, _)| zones & (1 << i) != 0) {
                self.entry(zone, None, scene).count += 1;
                self.entry(zone, Some(track.class_id()), scene).count += 1;
            }
        }
        self.changes.clear();
        self.report(|entry| entry.reported.is_some_and(|reported| reported != entry.count));
        // Counts seen for the first time (a label the zone does not list) go out as they are.
        self.report(|entry| entry.reported.is_none());
    }

    /// The zones changed (SIGHUP): counts follow their zone's name, a removed zone's counts are
    /// cleared, and a new zone's known counts are reported on the next [`Occupancy::take_unreported`].
    pub fn set_scene(&mut self, new: &Scene) {
        self.changes.clear();
        let mut kept = Vec::with_capacity(self.entries.len());
        for mut entry in self.entries.drain(..) {
            match new.zones.iter().position(|z| *z.name == *entry.zone_name) {
                Some(zone) => {
                    entry.zone = zone;
                    kept.push(entry);
                }
                None => self.changes.push(OccupancyChange {
                    zone: entry.zone_name.clone(),
                    class_id: entry.class_id,
                    count: None,
                }),
            }
        }
        self.entries = kept;
        self.add_known_entries(new);
    }

    fn add_known_entries(&mut self, scene: &Scene) {
        for (zone, config) in scene.zones.iter().enumerate() {
            self.entry(zone, None, scene);
            for &class_id in &config.classes {
                self.entry(zone, Some(class_id), scene);
            }
        }
    }

    fn entry(&mut self, zone: usize, class_id: Option<usize>, scene: &Scene) -> &mut Entry {
        let index = match self.entries.iter().position(|e| e.zone == zone && e.class_id == class_id) {
            Some(index) => index,
            None => {
                let zone_name: Arc<str> = self
                    .entries
                    .iter()
                    .find(|e| e.zone == zone)
                    .map_or_else(|| scene.zones[zone].name.as_str().into(), |e| e.zone_name.clone());
                self.entries.push(Entry { zone, zone_name, class_id, count: 0, reported: None });
                self.entries.len() - 1
            }
        };
        &mut self.entries[index]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detection::{BoundingBox, Detection};
    use crate::track::events::{WatchParams, Zone};
    use crate::track::tracker::TrackerParams;
    use crate::track::zones::Polygon;

    const PERSON: usize = 0;
    const DOG: usize = 17;

    fn scene(zones: &[(&str, Vec<usize>)]) -> Scene {
        let left_half = Polygon::new(&[[0.0, 0.0], [0.5, 0.0], [0.5, 1.0], [0.0, 1.0]]).expect("polygon");
        Scene {
            zones: zones
                .iter()
                .map(|(name, classes)| Zone {
                    name: (*name).into(),
                    polygon: left_half.clone(),
                    classes: classes.clone(),
                })
                .collect(),
            lines: vec![],
        }
    }

    fn at(class_id: usize, x: f32) -> Detection {
        Detection { class_id, score: 0.9, bbox: BoundingBox { x1: x - 100.0, y1: 400.0, x2: x + 100.0, y2: 600.0 } }
    }

    fn summary(changes: &[OccupancyChange]) -> Vec<(String, Option<usize>, Option<u32>)> {
        changes.iter().map(|c| (c.zone.to_string(), c.class_id, c.count)).collect()
    }

    struct Run {
        tracker: Tracker,
        watcher: Watcher,
        occupancy: Occupancy,
        scene: Scene,
        t: f64,
    }

    impl Run {
        fn new(scene: Scene) -> Run {
            let params = TrackerParams { max_lost_s: 1.0, min_hits: 3, high_score: 0.5, match_iou: 0.2, max_tracks: 8 };
            Run {
                tracker: Tracker::new(params),
                watcher: Watcher::new(WatchParams { stationary_px: 1.0, stationary_s: 100.0 }),
                occupancy: Occupancy::new(&scene),
                scene,
                t: 0.0,
            }
        }

        fn frame(&mut self, detections: &[Detection]) -> Vec<(String, Option<usize>, Option<u32>)> {
            self.tracker.update(detections, self.t);
            self.watcher.observe(&self.tracker, &self.scene, 1000, 1000);
            self.occupancy.recount(&self.tracker, &self.watcher, &self.scene);
            self.t += 0.2;
            summary(self.occupancy.changes())
        }
    }

    #[test]
    fn known_counts_start_at_zero_and_change_only_when_they_change() {
        let mut run = Run::new(scene(&[("yard", vec![DOG])]));
        assert_eq!(
            summary(run.occupancy.take_unreported()),
            [("yard".into(), None, Some(0)), ("yard".into(), Some(DOG), Some(0))]
        );
        assert!(run.occupancy.take_unreported().is_empty(), "reported once");
        // A dog walks in from the right: tentative for two frames, then confirmed inside.
        let mut changes = Vec::new();
        for x in [700.0, 640.0, 580.0, 520.0, 460.0, 400.0, 340.0] {
            changes.push(run.frame(&[at(DOG, x)]));
        }
        let non_empty: Vec<_> = changes.into_iter().filter(|c| !c.is_empty()).collect();
        assert_eq!(non_empty, [vec![("yard".into(), None, Some(1)), ("yard".into(), Some(DOG), Some(1))]]);
        // It stays hidden for a while: still counted until its track ends, then 0.
        let mut hidden = Vec::new();
        for _ in 0..7 {
            hidden.push(run.frame(&[]));
        }
        let non_empty: Vec<_> = hidden.into_iter().filter(|c| !c.is_empty()).collect();
        assert_eq!(non_empty, [vec![("yard".into(), None, Some(0)), ("yard".into(), Some(DOG), Some(0))]]);
    }

    #[test]
    fn unlisted_labels_are_counted_from_their_first_sighting() {
        let mut run = Run::new(scene(&[("yard", vec![])]));
        run.occupancy.take_unreported();
        let mut changes = Vec::new();
        for _ in 0..4 {
            changes.extend(run.frame(&[at(PERSON, 100.0)]));
        }
        assert_eq!(changes, [("yard".into(), None, Some(1)), ("yard".into(), Some(PERSON), Some(1))]);
    }

    #[test]
    fn tentative_tracks_do_not_count() {
        let mut run = Run::new(scene(&[("yard", vec![])]));
        run.occupancy.take_unreported();
        assert!(run.frame(&[at(PERSON, 100.0)]).is_empty());
        assert!(run.frame(&[at(PERSON, 100.0)]).is_empty());
        assert!(run.frame(&[]).is_empty(), "the tentative track was discarded without counting");
    }

    #[test]
    fn a_reload_keeps_counts_by_zone_name_and_clears_removed_zones() {
        let mut run = Run::new(scene(&[("a", vec![]), ("b", vec![])]));
        run.occupancy.take_unreported();
        for _ in 0..4 {
            run.frame(&[at(PERSON, 100.0)]);
        }
        let reloaded = scene(&[("b", vec![]), ("c", vec![DOG])]);
        run.watcher.remap(&run.scene, &reloaded);
        run.occupancy.set_scene(&reloaded);
        run.scene = reloaded;
        assert_eq!(summary(run.occupancy.changes()), [("a".into(), None, None), ("a".into(), Some(PERSON), None)]);
        assert_eq!(
            summary(run.occupancy.take_unreported()),
            [("c".into(), None, Some(0)), ("c".into(), Some(DOG), Some(0))]
        );
        assert!(run.frame(&[at(PERSON, 100.0)]).is_empty(), "b's count of 1 carried over unchanged");
    }
}
