//! What the routes that stream to a viewer answer alike: a body of JSON lines that no cache keeps
//! (`live.boxes`, `live.motion`), and 503 with `Retry-After` while a viewer cannot be served yet
//! (every place taken, no keyframe yet).
//!
//! Owns: [`ndjson`] and [`busy`]. Must not: admit viewers or know what the lines hold (the
//! routes do).

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;

use super::api::error;

/// `lines` as an `application/x-ndjson` response, not to be cached.
pub fn ndjson(lines: impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static) -> Response {
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
    ];
    (headers, Body::from_stream(lines)).into_response()
}

/// 503, to be asked again in a second.
pub fn busy(message: String) -> Response {
    let mut response = error(StatusCode::SERVICE_UNAVAILABLE, message, None);
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}
