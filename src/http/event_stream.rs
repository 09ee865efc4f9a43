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
use serde::Deserialize;

use super::api::error;
use super::event_entry;
use super::state::HttpState;
use crate::publish::event_feed::FeedItem;

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
    // (subscription, camera filter, whether the stream is over)
    let events = futures_util::stream::unfold((subscription, query.camera, false), move |(mut feed, camera, over)| {
        let view = view.clone();
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
                let data = event_entry::entry(&view, &event).to_string();
                return Some((Ok(Event::default().event("event").data(data)), (feed, camera, false)));
            }
        }
    });
    let stream = futures_util::StreamExt::chain(futures_util::stream::once(async move { Ok(first) }), events);
    Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response()
}
