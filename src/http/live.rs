//! The live routes: a camera's video as one fragmented MP4 file that never ends, and its boxes as
//! lines of JSON on the video's timeline.
//!
//! `GET /api/cameras/<c>/live.mp4` answers `video/mp4; codecs="…"` (what a browser's Media Source
//! is asked whether it plays) with the init segment, the fragments since the last keyframe and
//! every fragment after; `GET /api/cameras/<c>/live.boxes` answers `application/x-ndjson`, one
//! `{"t":seconds,"boxes":[…]}` line per processed frame; `GET /api/cameras/<c>/live.m3u8` is the
//! same video as HLS (its segments under `hls/`, `crate::watch::hls`). All are GETs, so the API's rules apply
//! as to any read (the host guard; no token). Owns: the answers and their codes (404 for an
//! unknown camera, 409 for a camera that sends raw frames — its live view is the JPEG picture —,
//! 503 with `Retry-After` before the stream's first keyframe or while [`MAX_VIEWERS`] streams
//! play; an HLS file the playlist no longer names is 404), and pumping a viewer's items into its response, which ends when the daemon stops. Must
//! not: wait on the feed (a viewer's receiver lags and skips, `crate::watch::viewer`), or buffer
//! more than the feed's bounded channels.
//!
//! [`MAX_VIEWERS`]: crate::watch::hub::MAX_VIEWERS

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, StreamExt};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, watch, OwnedSemaphorePermit};

use super::api::error;
use super::state::HttpState;
use super::streamed::{busy, ndjson};
use crate::watch::feed::{CameraFeed, FeedItem};
use crate::watch::hls::HlsStream;
use crate::watch::hub::{Unwatchable, WatchHub};
use crate::watch::viewer::{Joined, Next, Viewer};

/// How long a playlist request waits for the first segment, and how often it looks.
const PLAYLIST_WAIT: Duration = Duration::from_secs(10);
const PLAYLIST_POLL: Duration = Duration::from_millis(100);

/// `GET /api/cameras/<c>/live.mp4`.
pub async fn video(State(state): State<HttpState>, Path(name): Path<String>) -> Response {
    let (hub, feed, permit) = match admit(&state, &name) {
        Ok(admitted) => admitted,
        Err(refused) => return refused.into_response(),
    };
    let Some(Joined { viewer, start, first, receiver }) = Viewer::join(feed) else {
        return busy(format!("camera {name:?} has not sent a keyframe yet"));
    };
    let pump = VideoPump { viewer, receiver, stopping: hub.stopping(), _permit: permit };
    let body =
        stream::iter(first.into_iter().map(Ok::<Bytes, Infallible>)).chain(stream::unfold(pump, VideoPump::next));
    let content_type = HeaderValue::from_str(&format!("video/mp4; codecs=\"{}\"", start.codecs))
        .unwrap_or(HeaderValue::from_static("video/mp4"));
    let headers = [(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, HeaderValue::from_static("no-store"))];
    (headers, Body::from_stream(body)).into_response()
}

/// `GET /api/cameras/<c>/live.boxes`.
pub async fn boxes(State(state): State<HttpState>, Path(name): Path<String>) -> Response {
    let (hub, feed, permit) = match admit(&state, &name) {
        Ok(admitted) => admitted,
        Err(refused) => return refused.into_response(),
    };
    let pump = BoxesPump { receiver: feed.join_boxes(), stopping: hub.stopping(), _permit: permit };
    ndjson(stream::unfold(pump, BoxesPump::next))
}

/// Why a live request is refused.
enum Refused {
    /// No web server feeds (the daemon serves no live video: `check-config`, tests).
    NotServed,
    Camera(Unwatchable),
    /// Every place for a viewer is taken.
    Full,
}

impl IntoResponse for Refused {
    /// 404 for an unknown camera, 409 for one that sends raw frames, 503 while every place is
    /// taken.
    fn into_response(self) -> Response {
        match self {
            Refused::NotServed => error(StatusCode::NOT_FOUND, "live video is not served", None),
            Refused::Camera(why @ Unwatchable::Unknown(_)) => error(StatusCode::NOT_FOUND, why.to_string(), None),
            Refused::Camera(why @ Unwatchable::Raw(_)) => error(StatusCode::CONFLICT, why.to_string(), None),
            Refused::Full => busy("every place for a live viewer is taken".to_owned()),
        }
    }
}

type Admitted = (Arc<WatchHub>, Arc<CameraFeed>, OwnedSemaphorePermit);

/// The hub, `name`'s feed and a viewer's place.
fn admit(state: &HttpState, name: &str) -> Result<Admitted, Refused> {
    let hub = state.watch.clone().ok_or(Refused::NotServed)?;
    let feed = hub.feed(name).map_err(Refused::Camera)?;
    let permit = hub.admit().ok_or(Refused::Full)?;
    Ok((hub, feed, permit))
}

/// A video viewer's response: its place in the feed, held until the response is dropped.
struct VideoPump {
    viewer: Viewer,
    receiver: broadcast::Receiver<FeedItem>,
    stopping: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
}

impl VideoPump {
    /// The next bytes of the viewer's file; `None` ends it (a new start of the stream, the
    /// daemon stops).
    async fn next(mut self) -> Option<(Result<Bytes, Infallible>, VideoPump)> {
        loop {
            let item = tokio::select! {
                item = self.receiver.recv() => item,
                _ = self.stopping.wait_for(|stopping| *stopping) => return None,
            };
            match item {
                Ok(item) => match self.viewer.item(item) {
                    Next::Send(bytes) => return Some((Ok(bytes), self)),
                    Next::Skip => {}
                    Next::End => return None,
                },
                Err(RecvError::Lagged(missed)) => self.viewer.lagged(missed),
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

/// A boxes viewer's response.
struct BoxesPump {
    receiver: broadcast::Receiver<Bytes>,
    stopping: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
}

impl BoxesPump {
    /// The next line; a viewer that fell behind goes on with the newest (boxes of frames it
    /// missed are of no use to it any more).
    async fn next(mut self) -> Option<(Result<Bytes, Infallible>, BoxesPump)> {
        loop {
            let line = tokio::select! {
                line = self.receiver.recv() => line,
                _ = self.stopping.wait_for(|stopping| *stopping) => return None,
            };
            match line {
                Ok(line) => return Some((Ok(line), self)),
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

/// `GET /api/cameras/<c>/live.m3u8`: the HLS playlist, once its first segment is whole (the
/// request waits up to [`PLAYLIST_WAIT`] for it: the segmenter starts with the first request).
pub async fn playlist(State(state): State<HttpState>, Path(name): Path<String>) -> Response {
    let (hub, hls) = match hls_of(&state, &name) {
        Ok(found) => found,
        Err(refused) => return refused.into_response(),
    };
    let stopping = hub.stopping();
    let deadline = tokio::time::Instant::now() + PLAYLIST_WAIT;
    loop {
        if let Some(text) = hls.playlist(&stopping) {
            let headers = [
                (header::CONTENT_TYPE, HeaderValue::from_static("application/vnd.apple.mpegurl")),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            ];
            return (headers, text).into_response();
        }
        if tokio::time::Instant::now() >= deadline || *stopping.borrow() {
            return busy(format!("camera {name:?} has no whole keyframe interval yet"));
        }
        tokio::time::sleep(PLAYLIST_POLL).await;
    }
}

/// `GET /api/cameras/<c>/hls/<file>`: the init segment (`init-<start>.mp4`) or a segment
/// (`<sequence>.m4s`) the playlist names; 404 for one it no longer names.
pub async fn hls_file(State(state): State<HttpState>, Path((name, file)): Path<(String, String)>) -> Response {
    let (_, hls) = match hls_of(&state, &name) {
        Ok(found) => found,
        Err(refused) => return refused.into_response(),
    };
    let number = |prefix: &str, suffix: &str| file.strip_prefix(prefix)?.strip_suffix(suffix)?.parse::<u64>().ok();
    let found = match (number("init-", ".mp4"), number("", ".m4s")) {
        (Some(version), _) => hls.init(version),
        (None, Some(sequence)) => hls.segment(sequence),
        (None, None) => None,
    };
    let Some(bytes) = found else {
        return error(StatusCode::NOT_FOUND, format!("camera {name:?} has no HLS file {file:?} now"), None);
    };
    let content_type = if file.ends_with(".m4s") { "video/iso.segment" } else { "video/mp4" };
    ([(header::CONTENT_TYPE, HeaderValue::from_static(content_type))], Body::from(bytes)).into_response()
}

/// The hub and `name`'s HLS stream.
fn hls_of(state: &HttpState, name: &str) -> Result<(Arc<WatchHub>, Arc<HlsStream>), Refused> {
    let hub = state.watch.clone().ok_or(Refused::NotServed)?;
    let hls = hub.hls(name).map_err(Refused::Camera)?;
    Ok((hub, hls))
}
