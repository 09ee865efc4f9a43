//! The events pushed to readers as they happen: the live view's events broadcast to every open
//! event stream (the page's, through `GET /api/events/stream`).
//!
//! Owns: [`EventFeed`], a ring of the last [`FEED_CAPACITY`] events shared by its subscribers,
//! each of which reads at its own pace ([`FeedSubscription`]); one that falls a whole ring behind
//! learns how many it missed ([`FeedItem::Behind`]) so that its reader can drop it, and every
//! subscription ends when the daemon stops ([`EventFeed::close`]). Must not: wait — an offer
//! never blocks the pipeline, with or without subscribers, and a slow subscriber costs the others
//! nothing.

use tokio::sync::{broadcast, watch};

use super::live_event::LiveEvent;

/// Events a subscriber may fall behind before it is told it missed some.
pub const FEED_CAPACITY: usize = 64;

/// The broadcast of the live view's events.
#[derive(Debug)]
pub struct EventFeed {
    events: broadcast::Sender<LiveEvent>,
    /// `false` once the daemon stops: every subscription ends.
    open: watch::Sender<bool>,
}

/// What a subscriber reads next.
#[derive(Debug)]
pub enum FeedItem {
    Event(LiveEvent),
    /// The subscriber fell this many events behind; they are gone for it.
    Behind(u64),
    /// The daemon stops.
    Closed,
}

/// One reader's place in the feed.
#[derive(Debug)]
pub struct FeedSubscription {
    events: broadcast::Receiver<LiveEvent>,
    open: watch::Receiver<bool>,
}

impl Default for EventFeed {
    fn default() -> Self {
        EventFeed { events: broadcast::channel(FEED_CAPACITY).0, open: watch::channel(true).0 }
    }
}

impl EventFeed {
    /// Hands `event` to every subscriber; nothing happens without one.
    pub fn offer(&self, event: LiveEvent) {
        // An error only says that nobody listens.
        let _ = self.events.send(event);
    }

    /// A subscription to the events offered from now on.
    pub fn subscribe(&self) -> FeedSubscription {
        FeedSubscription { events: self.events.subscribe(), open: self.open.subscribe() }
    }

    /// Ends every subscription (the daemon stops): the streams end instead of holding the HTTP
    /// server's stop.
    pub fn close(&self) {
        self.open.send_replace(false);
    }
}

impl FeedSubscription {
    /// The next event, or why there is none.
    pub async fn next(&mut self) -> FeedItem {
        if !*self.open.borrow() {
            return FeedItem::Closed;
        }
        tokio::select! {
            received = self.events.recv() => match received {
                Ok(event) => FeedItem::Event(event),
                Err(broadcast::error::RecvError::Lagged(missed)) => FeedItem::Behind(missed),
                Err(broadcast::error::RecvError::Closed) => FeedItem::Closed,
            },
            _ = self.open.wait_for(|open| !*open) => FeedItem::Closed,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::publish::object_event::ObjectEvent;

    fn event(camera: &str, track: u64) -> LiveEvent {
        LiveEvent { camera: camera.into(), event: Arc::new(ObjectEvent::example(track)) }
    }

    fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime").block_on(future)
    }

    #[test]
    fn each_subscriber_gets_every_event_offered_after_it_subscribed_in_order() {
        let feed = EventFeed::default();
        feed.offer(event("front", 1));
        let (mut a, mut b) = (feed.subscribe(), feed.subscribe());
        feed.offer(event("front", 2));
        feed.offer(event("back", 3));
        block_on(async {
            for subscription in [&mut a, &mut b] {
                for track in [2, 3] {
                    match subscription.next().await {
                        FeedItem::Event(got) => assert_eq!(got.event.track_id, track),
                        other => panic!("{other:?}"),
                    }
                }
            }
        });
    }

    #[test]
    fn a_subscriber_a_whole_ring_behind_is_told_how_many_it_missed_and_the_others_are_not() {
        let feed = EventFeed::default();
        let mut slow = feed.subscribe();
        for track in 0..FEED_CAPACITY as u64 + 5 {
            feed.offer(event("front", track));
        }
        let mut fresh = feed.subscribe();
        feed.offer(event("front", 1000));
        block_on(async {
            assert!(matches!(slow.next().await, FeedItem::Behind(6)), "69 offered, then 1 more: 6 past the ring");
            assert!(matches!(fresh.next().await, FeedItem::Event(got) if got.event.track_id == 1000));
        });
    }

    #[test]
    fn closing_ends_every_subscription_even_one_waiting() {
        let feed = Arc::new(EventFeed::default());
        let mut waiting = feed.subscribe();
        let closer = feed.clone();
        block_on(async move {
            let waited = tokio::spawn(async move { waiting.next().await });
            tokio::task::yield_now().await;
            closer.close();
            assert!(matches!(waited.await.expect("joined"), FeedItem::Closed));
        });
        assert!(matches!(block_on(feed.subscribe().next()), FeedItem::Closed), "a late subscriber too");
    }
}
