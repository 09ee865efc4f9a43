//! The best pictures of the latest ended tracks, for the page's timeline thumbnails.
//!
//! Owns: [`EventPictures`], the pictures (`snapshot.events`' JPEGs, boxes drawn) of the last
//! [`KEPT_PICTURES`] ended tracks, at most [`KEPT_BYTES`] together: the oldest go first. Must not:
//! render or encode (the sink did), or grow past its bounds.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::sys::lock::lock;
use crate::track::tracker::TrackId;

/// Pictures kept, at most.
pub const KEPT_PICTURES: usize = 32;
/// Bytes of pictures kept, at most (a 1080p picture is some 200 KB).
pub const KEPT_BYTES: usize = 16 * 1024 * 1024;

/// A camera, one of its tracks, and the track's best picture (JPEG).
type Kept = (String, TrackId, Arc<Vec<u8>>);

/// Per camera and track, its best picture, oldest first.
#[derive(Debug, Default)]
pub struct EventPictures {
    kept: Mutex<VecDeque<Kept>>,
}

impl EventPictures {
    /// Keeps `picture` of `camera`'s track `track`, making room by dropping the oldest.
    pub fn keep(&self, camera: &str, track: TrackId, picture: Arc<Vec<u8>>) {
        if picture.len() > KEPT_BYTES {
            return;
        }
        let mut kept = lock(&self.kept);
        kept.retain(|(other, id, _)| !(other == camera && *id == track));
        let mut bytes: usize = kept.iter().map(|(_, _, jpeg)| jpeg.len()).sum::<usize>() + picture.len();
        while kept.len() >= KEPT_PICTURES || bytes > KEPT_BYTES {
            let Some((_, _, oldest)) = kept.pop_front() else { break };
            bytes -= oldest.len();
        }
        kept.push_back((camera.to_owned(), track, picture));
    }

    /// The picture of `camera`'s track `track`, while it is kept.
    pub fn get(&self, camera: &str, track: TrackId) -> Option<Arc<Vec<u8>>> {
        lock(&self.kept).iter().find(|(other, id, _)| other == camera && *id == track).map(|(_, _, jpeg)| jpeg.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_pictures_are_kept_within_their_count_and_bytes() {
        let pictures = EventPictures::default();
        for track in 0..KEPT_PICTURES as u64 + 3 {
            pictures.keep("front", track, Arc::new(vec![0; 10]));
        }
        assert!(pictures.get("front", 2).is_none(), "the oldest went");
        assert!(pictures.get("front", 3).is_some() && pictures.get("front", KEPT_PICTURES as u64 + 2).is_some());
        assert!(pictures.get("back", 5).is_none(), "per camera");
        pictures.keep("back", 1, Arc::new(vec![0; KEPT_BYTES - 5]));
        assert!(pictures.get("back", 1).is_some());
        assert!(pictures.get("front", KEPT_PICTURES as u64 + 2).is_none(), "bytes make room too");
        pictures.keep("back", 2, Arc::new(vec![0; KEPT_BYTES + 1]));
        assert!(pictures.get("back", 2).is_none() && pictures.get("back", 1).is_some(), "a picture too large alone");
    }
}
