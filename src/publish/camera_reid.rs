//! Re-identification for one camera's events: its confirmed tracks' sightings and appearances go
//! into the gallery every camera shares, and each event of a track says who the track is (its
//! `object_id`, and once linked, the earlier track it continues: `same_as`).
//!
//! Owns: [`CameraReid`] (the camera's name, its embedder's `[models.<name>]` name, the shared
//! [`ReidState`]: the gallery and the embedder's counts) and when the gallery is asked: every
//! frame, the sightings of the camera's confirmed tracks (so that live tracks are never linked to
//! each other); at a track's `start` and `end`, a link; at its `end`, that it ended. The figures
//! telemetry reports ([`ReidFigures`]). Must not: compare appearances or decide links
//! (`crate::reid::Gallery` does), run the embedder (`crate::infer::per_track`), or know JSON.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use crate::reid::{Appearance, Gallery, Identity, TrackKey};
use crate::sys::lock::lock;
use crate::track::events::EventKind;
use crate::track::tracker::TrackId;

/// What every camera's events share: the gallery, and the embedder's crops and their time.
#[derive(Debug)]
pub struct ReidState {
    gallery: Mutex<Gallery>,
    embeddings: AtomicU64,
    embedding_micros: AtomicU64,
}

/// Telemetry's `reid` section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReidFigures {
    /// Crops the embedder ran on since start, every camera together.
    pub embeddings: u64,
    /// Their inference time per crop, ms (2 decimals); `None` before the first.
    pub ms_per_crop: Option<f64>,
    /// Tracks the gallery holds (live and ended), and of those ended.
    pub tracks: usize,
    pub ended: usize,
    /// Heap bytes of the gallery.
    pub bytes: usize,
    /// Links made since start.
    pub links: u64,
    /// Tracks not held since start because every entry was a live track.
    pub refused: u64,
}

impl ReidState {
    pub fn new(gallery: Gallery) -> Arc<ReidState> {
        Arc::new(ReidState {
            gallery: Mutex::new(gallery),
            embeddings: AtomicU64::new(0),
            embedding_micros: AtomicU64::new(0),
        })
    }

    pub fn figures(&self) -> ReidFigures {
        let gallery = lock(&self.gallery).figures();
        let embeddings = self.embeddings.load(Ordering::Relaxed);
        let micros = self.embedding_micros.load(Ordering::Relaxed);
        ReidFigures {
            embeddings,
            ms_per_crop: (embeddings > 0).then(|| (micros as f64 / embeddings as f64 / 10.0).round() / 100.0),
            tracks: gallery.entries,
            ended: gallery.ended,
            bytes: gallery.bytes,
            links: gallery.links,
            refused: gallery.refused,
        }
    }
}

/// One confirmed track on a frame: its id, label, and first and latest sighting (seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sighting {
    pub track: TrackId,
    pub class_id: usize,
    pub first_seen: f64,
    pub last_seen: f64,
}

/// One camera's part in re-identification.
#[derive(Debug)]
pub struct CameraReid {
    camera: Arc<str>,
    /// The embedder whose answers are the tracks' appearances.
    model: String,
    state: Arc<ReidState>,
}

impl CameraReid {
    pub fn new(camera: &str, model: &str, state: Arc<ReidState>) -> CameraReid {
        CameraReid { camera: camera.into(), model: model.into(), state }
    }

    /// The embedder's `[models.<name>]` name.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The embedder ran on `crops` crops of this camera's frame in `elapsed`.
    pub fn embedded(&self, crops: usize, elapsed: Duration) {
        self.state.embeddings.fetch_add(crops as u64, Ordering::Relaxed);
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.state.embedding_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// This frame's confirmed tracks were seen (`now`: the frame's capture time, seconds); ended
    /// tracks older than the gallery's window leave (at most once a second:
    /// [`Gallery::expire_now_and_then`]).
    pub fn sighted(&self, tracks: impl IntoIterator<Item = Sighting>, now: f64) {
        let mut gallery = lock(&self.state.gallery);
        for sighting in tracks {
            let key = self.key(sighting.track);
            gallery.sighted(&key, sighting.class_id, sighting.first_seen);
            gallery.sighted(&key, sighting.class_id, sighting.last_seen);
        }
        gallery.expire_now_and_then(now);
    }

    /// Who track `track` (of label `class_id`) is, as its `kind` event says: its appearance so far
    /// (`None` while the embedder has not answered) goes to the gallery, a link is sought at
    /// `start` and `end`, and after an `end` the track is a candidate for later tracks. `None`:
    /// the gallery does not hold the track (it was full of live tracks).
    pub fn identify(
        &self,
        track: TrackId,
        class_id: usize,
        kind: EventKind,
        last_seen: f64,
        appearance: Option<&Appearance>,
    ) -> Option<Identity> {
        let key = self.key(track);
        let mut gallery = lock(&self.state.gallery);
        if !gallery.sighted(&key, class_id, last_seen) {
            return None;
        }
        if let Some(appearance) = appearance {
            gallery.set_appearance(&key, appearance);
        }
        if matches!(kind, EventKind::Start | EventKind::End) {
            gallery.link(&key);
        }
        let identity = gallery.identity(&key);
        if kind == EventKind::End {
            gallery.ended(&key);
        }
        identity
    }

    fn key(&self, track: TrackId) -> TrackKey {
        TrackKey { camera: self.camera.clone(), track }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reid::{Embedding, GalleryParams};

    const PERSON: usize = 0;

    fn seen(values: &[f32]) -> Appearance {
        let mut appearance = Appearance::default();
        appearance.add(&Embedding::normalised(values).expect("a direction"), 0.9);
        appearance
    }

    fn state() -> Arc<ReidState> {
        ReidState::new(Gallery::new(GalleryParams { window_s: 600.0, max_entries: 16, min_similarity: 0.8 }))
    }

    fn sighting(track: TrackId, first_seen: f64, last_seen: f64) -> Sighting {
        Sighting { track, class_id: PERSON, first_seen, last_seen }
    }

    #[test]
    fn a_track_on_another_camera_later_names_the_earlier_one_at_its_start_and_shares_its_object_id() {
        let state = state();
        let (drive, porch) =
            (CameraReid::new("drive", "looks", state.clone()), CameraReid::new("porch", "looks", state.clone()));
        let person = seen(&[1.0, 0.2, 0.0]);
        drive.sighted([sighting(3, 100.0, 100.5)], 100.5);
        let first = drive.identify(3, PERSON, EventKind::Start, 100.5, Some(&person)).expect("held");
        assert_eq!(first.same_as, None, "nothing earlier");
        drive.sighted([sighting(3, 100.0, 110.0)], 110.0);
        assert_eq!(drive.identify(3, PERSON, EventKind::End, 110.0, Some(&person)), Some(first.clone()));

        porch.sighted([sighting(1, 130.0, 130.2)], 130.2);
        let later = porch.identify(1, PERSON, EventKind::Start, 130.2, Some(&seen(&[1.0, 0.25, 0.0]))).expect("held");
        let link = later.same_as.expect("the driveway's track");
        assert_eq!((&*link.camera, link.track, link.seen_at), ("drive", 3, 110.0));
        assert_eq!(later.object_id, first.object_id);
        let stranger = porch.identify(2, PERSON, EventKind::Start, 131.0, Some(&seen(&[0.0, 0.0, 1.0]))).expect("held");
        assert_eq!(stranger.same_as, None, "another look");
        assert_ne!(stranger.object_id, first.object_id);
        let figures = state.figures();
        assert_eq!((figures.tracks, figures.ended, figures.links, figures.refused), (3, 1, 1, 0));
        assert!(figures.bytes > 3 * 3 * std::mem::size_of::<f32>(), "{figures:?}");
    }

    #[test]
    fn the_embedders_crops_are_counted_with_their_time_per_crop() {
        let state = state();
        assert_eq!(state.figures().ms_per_crop, None);
        let (drive, porch) =
            (CameraReid::new("drive", "looks", state.clone()), CameraReid::new("porch", "looks", state.clone()));
        drive.embedded(3, Duration::from_millis(120));
        porch.embedded(1, Duration::from_millis(50));
        let figures = state.figures();
        assert_eq!((figures.embeddings, figures.ms_per_crop), (4, Some(42.5)));
    }

    #[test]
    fn a_live_track_is_never_named_by_a_track_that_appears_while_it_is_seen() {
        let state = state();
        let (drive, porch) =
            (CameraReid::new("drive", "looks", state.clone()), CameraReid::new("porch", "looks", state));
        let person = seen(&[1.0, 0.2, 0.0]);
        drive.sighted([sighting(1, 100.0, 100.5)], 100.5);
        drive.identify(1, PERSON, EventKind::Start, 100.5, Some(&person));
        // Seen on both cameras at once (their views overlap): two tracks, not one object.
        drive.sighted([sighting(1, 100.0, 120.0)], 120.0);
        porch.sighted([sighting(1, 119.0, 120.0)], 120.0);
        let porch_start = porch.identify(1, PERSON, EventKind::Start, 120.0, Some(&person)).expect("held");
        assert_eq!(porch_start.same_as, None);
        drive.sighted([sighting(1, 100.0, 125.0)], 125.0);
        let porch_end = porch.identify(1, PERSON, EventKind::End, 126.0, Some(&person)).expect("held");
        assert_eq!(porch_end.same_as, None, "the driveway's track was seen after the porch's appeared");
    }
}
