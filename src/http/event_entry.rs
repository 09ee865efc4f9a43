//! One event as the API lists it and the event stream pushes it, and its picture.
//!
//! Owns: [`entry`] — `{"camera", "event": <event message>, "picture": <URL>}`, `picture` only
//! while the live view keeps the track's best picture — `GET /api/events` (the kept events), and `GET
//! /api/cameras/{name}/events/{track}/picture.jpg`, that picture (404 once it is no longer kept, or
//! without `snapshot.events`). Must not: render or encode a picture (the sink did), or serialise
//! the event other than with the event schema.

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::Value;

use super::api::error;
use super::state::HttpState;
use crate::publish::event_message::EventMessage;
use crate::publish::live::LiveView;
use crate::publish::live_event::LiveEvent;

/// Events `GET /api/events` returns without `limit`.
const DEFAULT_EVENTS: usize = 50;

/// The route of the best picture of `camera`'s track `track`.
pub fn picture_url(camera: &str, track: u64) -> String {
    format!("/api/cameras/{camera}/events/{track}/picture.jpg")
}

/// `event` as `GET /api/events` lists it and `GET /api/events/stream` pushes it.
pub fn entry(view: &LiveView, event: &LiveEvent) -> Value {
    let message = EventMessage::new(&event.camera, &event.event, &view.labels);
    let mut entry = serde_json::json!({ "camera": event.camera, "event": message });
    if view.pictures.get(&event.camera, event.event.track_id).is_some() {
        entry["picture"] = Value::String(picture_url(&event.camera, event.event.track_id));
    }
    entry
}

#[derive(Debug, Deserialize)]
pub struct EventsQuery {
    camera: Option<String>,
    limit: Option<usize>,
}

/// `GET /api/events?camera=&limit=`: the newest events (oldest first), each in the event schema
/// (the same JSON as on `<prefix>/<camera>/events`), with its picture's URL while one is kept.
pub async fn events(State(state): State<HttpState>, Query(query): Query<EventsQuery>) -> Response {
    if let Some(name) = &query.camera {
        if state.view.camera(name).is_none() {
            return error(StatusCode::NOT_FOUND, format!("no camera named {name:?}"), None);
        }
    }
    let limit = query.limit.unwrap_or(DEFAULT_EVENTS);
    let events: Vec<serde_json::Value> =
        state.view.events(query.camera.as_deref(), limit).into_iter().map(|event| entry(&state.view, &event)).collect();
    Json(serde_json::json!({ "events": events })).into_response()
}

/// `GET /api/cameras/{name}/events/{track}/picture.jpg`.
pub async fn picture(State(state): State<HttpState>, Path((name, track)): Path<(String, u64)>) -> Response {
    match state.view.pictures.get(&name, track) {
        Some(jpeg) => (
            [
                (header::CONTENT_TYPE, HeaderValue::from_static("image/jpeg")),
                (header::CACHE_CONTROL, HeaderValue::from_static("max-age=3600")),
            ],
            jpeg.as_ref().clone(),
        )
            .into_response(),
        None => error(StatusCode::NOT_FOUND, format!("no picture of camera {name:?}'s track {track} is kept"), None),
    }
}
