//! The gallery of recent tracks' appearances across every camera, and the rules that link a new
//! track to an earlier one of the same object.
//!
//! Owns: one entry per track that was sighted (its label, appearance, first and last sighting,
//! object id, and the link it made), the link rules, object ids, and the bounds: entries of ended
//! tracks leave [`GalleryParams::window_s`] after their last sighting, and at most
//! [`GalleryParams::max_entries`] are kept (an ended entry, oldest sighting first, makes room; when
//! every entry is a live track a new one is not kept and is counted). Must not: read clocks,
//! choose crops or know cameras beyond their names.
//!
//! A track `T` links to the entry `E` that is most similar to it of those that
//! - have `T`'s label;
//! - were last sighted before `T` was first sighted, and at most `window_s` before: two tracks
//!   sighted at the same time are two objects, so live tracks are never merged (cameras whose
//!   views overlap see one object twice at once: those stay two tracks);
//! - no other track links to already (a track continues at most one earlier track, and is
//!   continued by at most one later one);
//! - are at least [`GalleryParams::min_similarity`] similar.
//!
//! A link is sought when asked ([`Gallery::link`]: the daemon asks at a track's confirmation and
//! at its end) until one is made, and is never undone. A linked track takes the object id of the
//! track it continues, so a chain of links (driveway → porch → behind the lamp post → porch
//! again) shares one id; every other track has an id of its own, given when it is first sighted.

use std::collections::HashMap;
use std::sync::Arc;

use super::appearance::Appearance;

/// How links are made and how much is kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GalleryParams {
    /// An ended track is a candidate for this many seconds after its last sighting.
    pub window_s: f64,
    /// Most entries kept, live tracks included.
    pub max_entries: usize,
    /// Least cosine similarity of two appearances for a link.
    pub min_similarity: f32,
}

/// A track of one camera.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TrackKey {
    pub camera: Arc<str>,
    pub track: u64,
}

/// The earlier track a track continues.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    pub camera: Arc<str>,
    pub track: u64,
    /// Of the two appearances when the link was made.
    pub similarity: f32,
    /// The earlier track's last sighting, in the sightings' seconds.
    pub seen_at: f64,
}

/// Who a track is, as its events say: its object id (shared by linked tracks) and the earlier
/// track it continues, once linked.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    pub object_id: u64,
    pub same_as: Option<Link>,
}

#[derive(Debug)]
struct Entry {
    label: usize,
    appearance: Appearance,
    first_seen: f64,
    last_seen: f64,
    ended: bool,
    object_id: u64,
    link: Option<Link>,
    /// A later track links to this one.
    continued: bool,
}

/// What the gallery holds, for telemetry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GalleryFigures {
    pub entries: usize,
    /// Of those, tracks that have ended.
    pub ended: usize,
    /// Heap bytes of the entries and their appearances.
    pub bytes: usize,
    /// Links made so far.
    pub links: u64,
    /// Tracks not kept because every entry was a live track.
    pub refused: u64,
}

/// Recent tracks' appearances and their links.
#[derive(Debug)]
pub struct Gallery {
    params: GalleryParams,
    entries: HashMap<TrackKey, Entry>,
    next_object_id: u64,
    links: u64,
    refused: u64,
    /// The capture time of the last [`Gallery::expire_now_and_then`] walk.
    expired_at: f64,
}

/// Seconds of capture time between two expiry walks of [`Gallery::expire_now_and_then`].
pub const EXPIRY_PERIOD_S: f64 = 1.0;

impl Gallery {
    pub fn new(params: GalleryParams) -> Gallery {
        Gallery {
            params,
            entries: HashMap::new(),
            next_object_id: 1,
            links: 0,
            refused: 0,
            expired_at: f64::NEG_INFINITY,
        }
    }

    /// `key` (of `label`) was sighted at `at`: its entry is made on the first sighting (when there
    /// is room) and its last sighting moved on. `false`: the gallery does not hold it.
    pub fn sighted(&mut self, key: &TrackKey, label: usize, at: f64) -> bool {
        if !at.is_finite() {
            return self.entries.contains_key(key);
        }
        if let Some(entry) = self.entries.get_mut(key) {
            entry.last_seen = entry.last_seen.max(at);
            return true;
        }
        if self.entries.len() >= self.params.max_entries && !self.make_room() {
            self.refused += 1;
            return false;
        }
        let object_id = self.next_object_id;
        self.next_object_id += 1;
        let entry = Entry {
            label,
            appearance: Appearance::default(),
            first_seen: at,
            last_seen: at,
            ended: false,
            object_id,
            link: None,
            continued: false,
        };
        self.entries.insert(key.clone(), entry);
        true
    }

    /// `key`'s appearance so far (its embedder's answer), replacing the one it had. `false`: the
    /// gallery does not hold `key`.
    pub fn set_appearance(&mut self, key: &TrackKey, appearance: &Appearance) -> bool {
        self.entries.get_mut(key).map(|entry| entry.appearance.clone_from(appearance)).is_some()
    }

    /// The link of `key`: the one it made, else one made now by the rules above (`None`: no
    /// entry qualifies, or `key` has no appearance yet).
    pub fn link(&mut self, key: &TrackKey) -> Option<&Link> {
        let entry = self.entries.get(key)?;
        if entry.link.is_none() && !entry.appearance.is_empty() {
            let (label, first_seen) = (entry.label, entry.first_seen);
            let best = self
                .entries
                .iter()
                .filter(|(other, candidate)| {
                    *other != key
                        && candidate.label == label
                        && !candidate.continued
                        && candidate.last_seen < first_seen
                        && first_seen - candidate.last_seen <= self.params.window_s
                })
                .filter_map(|(other, candidate)| {
                    let similarity = entry.appearance.similarity(&candidate.appearance)?;
                    (similarity >= self.params.min_similarity).then_some((other, candidate, similarity))
                })
                .max_by(|a, b| a.2.total_cmp(&b.2).then(a.1.last_seen.total_cmp(&b.1.last_seen)));
            if let Some((other, candidate, similarity)) = best {
                let link =
                    Link { camera: other.camera.clone(), track: other.track, similarity, seen_at: candidate.last_seen };
                let (object_id, other) = (candidate.object_id, other.clone());
                if let Some(candidate) = self.entries.get_mut(&other) {
                    candidate.continued = true;
                }
                if let Some(entry) = self.entries.get_mut(key) {
                    entry.link = Some(link);
                    entry.object_id = object_id;
                }
                self.links += 1;
            }
        }
        self.entries.get(key)?.link.as_ref()
    }

    /// `key`'s object id (its own, or since it linked the one of the track it continues) and its
    /// link (`None`: the gallery does not hold it).
    pub fn identity(&self, key: &TrackKey) -> Option<Identity> {
        self.entries.get(key).map(|entry| Identity { object_id: entry.object_id, same_as: entry.link.clone() })
    }

    /// `key`'s track ended; its entry stays a candidate for `window_s` after its last sighting.
    pub fn ended(&mut self, key: &TrackKey) {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.ended = true;
        }
    }

    /// Drops ended entries last sighted more than `window_s` before `now`.
    pub fn expire(&mut self, now: f64) {
        let window_s = self.params.window_s;
        self.entries.retain(|_, entry| !(entry.ended && now - entry.last_seen > window_s));
    }

    /// [`Gallery::expire`] when [`EXPIRY_PERIOD_S`] of capture time has passed since the last walk
    /// (or the clock went back): every camera's every frame asks, and a walk visits every entry.
    /// An ended entry may so stay up to that long past its window, which changes no link
    /// ([`Gallery::link`] takes only candidates within the window) and no room made (the oldest
    /// ended entry goes first), only when its memory is freed.
    pub fn expire_now_and_then(&mut self, now: f64) {
        if (now - self.expired_at).abs() < EXPIRY_PERIOD_S {
            return;
        }
        self.expired_at = now;
        self.expire(now);
    }

    /// Drops the ended entry of the oldest last sighting; `false`: every entry is a live track.
    fn make_room(&mut self) -> bool {
        let oldest = self
            .entries
            .iter()
            .filter(|(_, entry)| entry.ended)
            .min_by(|a, b| a.1.last_seen.total_cmp(&b.1.last_seen))
            .map(|(key, _)| key.clone());
        oldest.is_some_and(|key| self.entries.remove(&key).is_some())
    }

    pub fn figures(&self) -> GalleryFigures {
        let bytes = self.entries.capacity() * (std::mem::size_of::<TrackKey>() + std::mem::size_of::<Entry>())
            + self
                .entries
                .iter()
                .map(|(key, entry)| {
                    key.camera.len()
                        + entry.appearance.bytes()
                        + entry.link.as_ref().map_or(0, |link| link.camera.len())
                })
                .sum::<usize>();
        GalleryFigures {
            entries: self.entries.len(),
            ended: self.entries.values().filter(|entry| entry.ended).count(),
            bytes,
            links: self.links,
            refused: self.refused,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reid::embedding::Embedding;

    const PERSON: usize = 0;
    const DOG: usize = 17;

    fn params() -> GalleryParams {
        GalleryParams { window_s: 600.0, max_entries: 16, min_similarity: 0.75 }
    }

    fn object_id(gallery: &Gallery, key: &TrackKey) -> Option<u64> {
        gallery.identity(key).map(|identity| identity.object_id)
    }

    fn key(camera: &str, track: u64) -> TrackKey {
        TrackKey { camera: camera.into(), track }
    }

    /// A look: a unit vector mostly along `axis` of 8, with a little of `tint` (another look of
    /// the same object when `axis` is the same).
    fn look(axis: usize, tint: usize) -> Embedding {
        let mut values = [0.0f32; 8];
        values[axis] = 1.0;
        values[tint] += 0.3;
        Embedding::normalised(&values).expect("a direction")
    }

    /// An appearance of one crop that looked like `look`.
    fn seen(look: &Embedding) -> Appearance {
        let mut appearance = Appearance::default();
        appearance.add(look, 0.9);
        appearance
    }

    /// `key` sighted from `from` to `to` seconds with `look`, then ended.
    fn pass(gallery: &mut Gallery, key: &TrackKey, label: usize, look: &Embedding, from: f64, to: f64) {
        assert!(gallery.sighted(key, label, from));
        gallery.set_appearance(key, &seen(look));
        gallery.sighted(key, label, to);
        gallery.ended(key);
    }

    #[test]
    fn the_same_object_on_another_camera_later_links_and_shares_the_object_id() {
        let mut gallery = Gallery::new(params());
        let drive = key("drive", 3);
        pass(&mut gallery, &drive, PERSON, &look(0, 1), 100.0, 110.0);
        let porch = key("porch", 1);
        assert!(gallery.sighted(&porch, PERSON, 130.0));
        assert_eq!(gallery.link(&porch), None, "no appearance yet");
        assert!(gallery.set_appearance(&porch, &seen(&look(0, 2))));
        let link = gallery.link(&porch).cloned().expect("the driveway's track");
        assert_eq!((&*link.camera, link.track, link.seen_at), ("drive", 3, 110.0));
        assert!(link.similarity > 0.9 && link.similarity < 1.0, "{link:?}");
        assert_eq!(object_id(&gallery, &porch), object_id(&gallery, &drive));
        let identity = gallery.identity(&porch).expect("held");
        assert_eq!((Some(identity.object_id), identity.same_as), (object_id(&gallery, &drive), Some(link.clone())));
        assert_eq!(gallery.link(&porch), Some(&link), "asked again: the same link");
        assert_eq!(gallery.figures().links, 1);
    }

    #[test]
    fn another_object_of_the_label_or_the_same_look_of_another_label_does_not_link() {
        let mut gallery = Gallery::new(params());
        pass(&mut gallery, &key("drive", 1), PERSON, &look(0, 1), 100.0, 110.0);
        let stranger = key("porch", 1);
        pass(&mut gallery, &stranger, PERSON, &look(3, 4), 130.0, 140.0);
        assert_eq!(gallery.link(&stranger), None);
        let dog = key("porch", 2);
        pass(&mut gallery, &dog, DOG, &look(0, 1), 150.0, 160.0);
        assert_eq!(gallery.link(&dog), None, "a dog that looks like the person is no person");
        assert_ne!(object_id(&gallery, &stranger), object_id(&gallery, &key("drive", 1)));
    }

    #[test]
    fn tracks_sighted_at_the_same_time_never_link() {
        let mut gallery = Gallery::new(params());
        let (a, b) = (key("drive", 1), key("porch", 1));
        gallery.sighted(&a, PERSON, 100.0);
        gallery.set_appearance(&a, &seen(&look(0, 1)));
        gallery.sighted(&b, PERSON, 101.0);
        gallery.set_appearance(&b, &seen(&look(0, 1)));
        gallery.sighted(&a, PERSON, 102.0);
        assert_eq!(gallery.link(&b), None, "a was still sighted after b appeared");
        assert_eq!(gallery.link(&a), None, "b appeared after a did");
    }

    #[test]
    fn a_lost_track_of_the_same_camera_is_continued_after_an_occlusion() {
        let mut gallery = Gallery::new(params());
        let before = key("porch", 4);
        gallery.sighted(&before, PERSON, 100.0);
        gallery.set_appearance(&before, &seen(&look(5, 6)));
        // Behind the lamp post from 105 s; the tracker gives up on it and it ends.
        gallery.sighted(&before, PERSON, 105.0);
        gallery.ended(&before);
        let after = key("porch", 5);
        gallery.sighted(&after, PERSON, 115.0);
        gallery.set_appearance(&after, &seen(&look(5, 7)));
        let link = gallery.link(&after).cloned().expect("the lost track");
        assert_eq!((&*link.camera, link.track, link.seen_at), ("porch", 4, 105.0));
    }

    #[test]
    fn a_track_is_continued_once_by_the_most_similar_later_track() {
        let mut gallery = Gallery::new(params());
        pass(&mut gallery, &key("drive", 1), PERSON, &look(0, 1), 100.0, 110.0);
        let first = key("porch", 1);
        pass(&mut gallery, &first, PERSON, &look(0, 2), 120.0, 125.0);
        assert!(gallery.link(&first).is_some());
        // A second later track that looks exactly like the driveway's links to the porch's (the
        // chain), not to the driveway's, which is continued already.
        let second = key("yard", 1);
        pass(&mut gallery, &second, PERSON, &look(0, 1), 130.0, 140.0);
        let link = gallery.link(&second).cloned().expect("continues the porch's track");
        assert_eq!((&*link.camera, link.track), ("porch", 1));
        let ids: Vec<_> = [key("drive", 1), first, second].iter().map(|k| object_id(&gallery, k)).collect();
        assert!(ids.windows(2).all(|pair| pair[0] == pair[1]), "one object: {ids:?}");
    }

    #[test]
    fn ended_tracks_leave_after_the_window_and_a_full_gallery_drops_the_oldest_ended_first() {
        let mut gallery = Gallery::new(GalleryParams { max_entries: 2, ..params() });
        pass(&mut gallery, &key("drive", 1), PERSON, &look(0, 1), 0.0, 10.0);
        let late = key("porch", 1);
        gallery.sighted(&late, PERSON, 700.0);
        gallery.set_appearance(&late, &seen(&look(0, 1)));
        assert_eq!(gallery.link(&late), None, "690 s after its last sighting: outside the 600 s window");
        gallery.expire(700.0);
        assert_eq!(gallery.figures().entries, 1, "the ended entry left");

        pass(&mut gallery, &key("drive", 2), PERSON, &look(1, 2), 710.0, 720.0);
        assert!(gallery.sighted(&key("drive", 3), PERSON, 730.0), "drive/2 (ended) makes room");
        assert!(gallery.identity(&key("drive", 2)).is_none(), "dropped");
        assert!(!gallery.sighted(&key("drive", 4), PERSON, 740.0), "both entries are live tracks");
        let figures = gallery.figures();
        assert_eq!((figures.entries, figures.ended, figures.refused), (2, 0, 1));
        assert!(figures.bytes > 0);
    }

    /// Expiring at most once a second (each frame of each camera asks) links the same tracks as
    /// expiring on every frame, and an ended entry still leaves within a second of its window.
    #[test]
    fn expiring_now_and_then_links_as_expiring_every_frame_and_frees_within_a_second() {
        let window = GalleryParams { window_s: 10.0, ..params() };
        let (mut every_frame, mut now_and_then) = (Gallery::new(window), Gallery::new(window));
        let early = key("drive", 1);
        for gallery in [&mut every_frame, &mut now_and_then] {
            pass(gallery, &early, PERSON, &look(0, 1), 0.0, 5.0);
        }
        let (mut left_every_frame, mut left_now_and_then) = (None, None);
        for frame in 0..600u32 {
            let now = 5.0 + f64::from(frame) / 30.0;
            every_frame.expire(now);
            now_and_then.expire_now_and_then(now);
            if every_frame.identity(&early).is_none() {
                left_every_frame.get_or_insert(now);
            }
            if now_and_then.identity(&early).is_none() {
                left_now_and_then.get_or_insert(now);
            }
        }
        let (every_frame_at, now_and_then_at) = (left_every_frame.expect("left"), left_now_and_then.expect("left"));
        assert!(every_frame_at > 15.0 && now_and_then_at >= every_frame_at, "{every_frame_at} {now_and_then_at}");
        assert!(now_and_then_at - every_frame_at <= EXPIRY_PERIOD_S, "{every_frame_at} {now_and_then_at}");
        for (first_seen, linked) in [(14.9, true), (15.2, false)] {
            let mut every_frame = Gallery::new(window);
            let mut now_and_then = Gallery::new(window);
            for gallery in [&mut every_frame, &mut now_and_then] {
                pass(gallery, &early, PERSON, &look(0, 1), 0.0, 5.0);
            }
            every_frame.expire(first_seen);
            now_and_then.expire_now_and_then(14.8);
            now_and_then.expire_now_and_then(first_seen);
            for gallery in [&mut every_frame, &mut now_and_then] {
                let late = key("porch", 1);
                assert!(gallery.sighted(&late, PERSON, first_seen));
                gallery.set_appearance(&late, &seen(&look(0, 2)));
                assert_eq!(gallery.link(&late).is_some(), linked, "first seen at {first_seen}");
            }
        }
    }
}
