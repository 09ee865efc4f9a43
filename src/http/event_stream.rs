//! `GET /api/events/stream?camera=`: the events pushed to the page as they happen, as Server-Sent
//! Events (`text/event-stream`), instead of a poll.
//!
//! Owns: the stream's wire form — each event an SSE event named `event` whose data is the JSON of
//! one `GET /api/events` entry ([`super::event_entry::entry`]), a keep-alive comment
//! every [`KEEP_ALIVE`] — and what happens to a client that reads too slowly: once it is a whole
//! feed behind (`crate::publish::event_feed::FEED_CAPACITY` events), it gets one `behind` event
//! (the number it missed) and the stream ends; a browser's `EventSource` reconnects by itself and
//! the page reads what it missed from `GET /api/events`. Must not: make the pipeline wait (the feed
//! never does) or hold anything for a client beyond its place in the feed.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde::Deserialize;

use super::api::error;
use super::event_entry;
use super::state::HttpState;
use crate::publish::event_feed::{FeedItem, FeedSubscription};
use crate::publish::live_event::LiveEvent;

/// A comment this often keeps proxies from closing a quiet stream.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// What a browser waits before it reconnects a stream that ended.
const RETRY: Duration = Duration::from_secs(1);

#[derive(Debug, Deserialize)]
pub struct StreamQuery {
    camera: Option<String>,
}

/// `GET /api/events/stream?camera=`: every camera's events from now on (or `camera`'s).
pub async fn stream(State(state): State<HttpState>, Query(query): Query<StreamQuery>) -> Response {
    if let Some(name) = &query.camera {
        if state.view.camera(name).is_none() {
            return error(StatusCode::NOT_FOUND, format!("no camera named {name:?}"), None);
        }
    }
    let subscription = state.view.feed.subscribe();
    let view = state.view.clone();
    let first = Event::default().comment("events from now on").retry(RETRY);
    let events = events(subscription, query.camera, move |event| event_entry::entry(&view, event).to_string());
    let stream = futures_util::StreamExt::chain(futures_util::stream::once(async move { Ok(first) }), events);
    Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response()
}

/// The stream's events read from `feed` (only `camera`'s, with one), each event's data as `entry`
/// writes it; a subscriber a whole feed behind gets one `behind` event with the number it missed,
/// and the stream ends after it, as it does when the feed closes.
fn events(
    feed: FeedSubscription,
    camera: Option<String>,
    entry: impl Fn(&LiveEvent) -> String + Clone + Send + 'static,
) -> impl Stream<Item = Result<Event, Infallible>> {
    // (subscription, camera filter, whether the stream is over)
    futures_util::stream::unfold((feed, camera, false), move |(mut feed, camera, over)| {
        let entry = entry.clone();
        async move {
            if over {
                return None;
            }
            loop {
                let event = match feed.next().await {
                    FeedItem::Event(event) if camera.as_ref().is_none_or(|name| *name == event.camera) => event,
                    FeedItem::Event(_) => continue,
                    FeedItem::Behind(missed) => {
                        let behind = Event::default().event("behind").data(missed.to_string());
                        return Some((Ok::<_, Infallible>(behind), (feed, camera, true)));
                    }
                    FeedItem::Closed => return None,
                };
                return Some((Ok(Event::default().event("event").data(entry(&event))), (feed, camera, false)));
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::publish::event_feed::{EventFeed, FEED_CAPACITY};
    use crate::publish::object_event::ObjectEvent;

    fn event(camera: &str, track: u64) -> LiveEvent {
        LiveEvent { camera: camera.into(), event: Arc::new(ObjectEvent::example(track)) }
    }

    /// The body a client reads, until the stream ends.
    fn body(events: impl Stream<Item = Result<Event, Infallible>> + Send + 'static) -> String {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let bytes = runtime
            .block_on(axum::body::to_bytes(Sse::new(events).into_response().into_body(), 1 << 20))
            .expect("the whole body");
        String::from_utf8(bytes.to_vec()).expect("UTF-8")
    }

    fn track_of(event: &LiveEvent) -> String {
        format!("{}#{}", event.camera, event.event.track_id)
    }

    #[test]
    fn a_client_a_whole_feed_behind_reads_one_behind_event_with_the_number_it_missed_and_the_stream_ends() {
        let feed = EventFeed::default();
        let slow = feed.subscribe();
        for track in 0..FEED_CAPACITY as u64 + 3 {
            feed.offer(event("front", track));
        }
        assert_eq!(body(events(slow, None, track_of)), "event: behind\ndata: 3\n\n");
    }

    #[test]
    fn a_cameras_stream_carries_its_events_only_each_as_an_event_named_event() {
        let feed = EventFeed::default();
        let front = feed.subscribe();
        feed.offer(event("back", 1));
        feed.offer(event("front", 2));
        let first = futures_util::StreamExt::take(events(front, Some("front".into()), track_of), 1);
        assert_eq!(body(first), "event: event\ndata: front#2\n\n");
    }
}
