//! One live viewer of a camera's video: what it is sent, and when it skips.
//!
//! A viewer gets the stream's init segment, then every fragment in the order the feed sent them,
//! which makes one fragmented MP4 file that never ends (what a browser's Media Source, ffplay or
//! VLC read). A viewer that falls [`super::feed::FEED_QUEUE`] fragments behind skips everything
//! up to the next keyframe (a fragment without its reference would not decode), so a slow viewer
//! costs the feed nothing and itself a stall of at most one keyframe interval. A new start of the
//! stream (other parameter sets) ends the viewer's file: the player asks again. Owns: that state
//! machine ([`Viewer`]). Must not: know sockets (the HTTP stage pumps its bytes), or wait.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::broadcast;

use super::feed::{CameraFeed, FeedItem, StreamStart};

/// What the viewer does with the feed's next item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Send these bytes.
    Send(Bytes),
    /// Nothing to send for this item.
    Skip,
    /// The stream started again with another init segment: this viewer's file ends.
    End,
}

/// A viewer that joined: what brings it to the present and the receiver of the rest.
#[derive(Debug)]
pub struct Joined {
    pub viewer: Viewer,
    pub start: Arc<StreamStart>,
    /// The init segment, then the fragments since the last keyframe.
    pub first: Vec<Bytes>,
    pub receiver: broadcast::Receiver<FeedItem>,
}

/// One viewer's place in the feed.
#[derive(Debug)]
pub struct Viewer {
    feed: Arc<CameraFeed>,
    /// The start this viewer's file began with.
    version: u64,
    /// Fragments are skipped until the next keyframe.
    skipping: bool,
}

impl Viewer {
    /// Joins `feed` once it has a start; `None` before the stream's first keyframe.
    pub fn join(feed: Arc<CameraFeed>) -> Option<Joined> {
        let (items, receiver) = feed.join();
        let mut items = items.into_iter();
        let Some(FeedItem::Start(start)) = items.next() else { return None };
        let mut viewer = Viewer { feed, version: start.version, skipping: true };
        let mut first = vec![start.init.clone()];
        for item in items {
            if let Next::Send(bytes) = viewer.item(item) {
                first.push(bytes);
            }
        }
        Some(Joined { viewer, start, first, receiver })
    }

    /// What the viewer is sent of the feed's next item.
    pub fn item(&mut self, item: FeedItem) -> Next {
        match item {
            FeedItem::Start(start) if start.version == self.version => Next::Skip,
            FeedItem::Start(_) => Next::End,
            FeedItem::Media(fragment) => {
                if self.skipping && !fragment.keyframe {
                    self.feed.figures.skipped_items.fetch_add(1, Ordering::Relaxed);
                    return Next::Skip;
                }
                self.skipping = false;
                Next::Send(fragment.data.clone())
            }
        }
    }

    /// The viewer lost `missed` items (it fell too far behind): it skips to the next keyframe.
    pub fn lagged(&mut self, missed: u64) {
        self.skipping = true;
        self.feed.figures.lagged.fetch_add(1, Ordering::Relaxed);
        self.feed.figures.skipped_items.fetch_add(missed, Ordering::Relaxed);
    }
}
