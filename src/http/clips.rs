//! The clips of the API: each camera's list, and each clip's bytes with HTTP range requests (a
//! browser's `<video>` seeks with them).
//!
//! Owns: `GET /api/cameras/{name}/clips` (newest first, `?limit=`, and `?before=` a clip's start in
//! ms since the epoch for the next page), `GET /api/cameras/{name}/clips/{file}` (`video/mp4`: 200
//! whole, 206 for one `Range: bytes=` range, 416 for a range past the end, 409 while the clip still
//! records, 404 for a clip the index does not know), `DELETE` of the same (204; 409 while it
//! records, 404 unknown), parsing the range, and `GET /api/cameras/{name}/clips/{file}/boxes` (the
//! boxes of the clip's metadata track, for the page to draw over its playback). Reads follow the
//! API's rules (no token); a delete is a write, which the guard lets through only with the token.
//! Must not: open a file the recorder's index does not list (a request path never becomes a file
//! path by itself), or read a clip into memory whole (it is streamed in chunks).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use super::api::error;
use super::state::HttpState;
use crate::record::boxes::{BoxFrame, FrameBox};
use crate::record::deletion::{self, DeleteError};
use crate::record::mp4::{self, METADATA_TRACK};
use crate::record::{clip_url, Recorder};

/// Clips listed without `limit`.
const DEFAULT_CLIPS: usize = 100;
/// Bytes read from the file per chunk of the body.
const CHUNK: usize = 64 * 1024;

#[derive(Debug, Deserialize)]
pub struct ClipsQuery {
    limit: Option<usize>,
    /// Only clips that started before this, ms since the epoch (the next page).
    before: Option<u64>,
}

/// The recorder of `camera`, or why there is none (404).
fn recorder<'a>(state: &'a HttpState, camera: &str) -> Result<&'a Arc<Recorder>, String> {
    if state.view.camera(camera).is_none() {
        return Err(format!("no camera named {camera:?}"));
    }
    match &state.record {
        Some(recorder) if recorder.records(camera) => Ok(recorder),
        _ => Err(format!("camera {camera:?} does not record clips ([record])")),
    }
}

/// `GET /api/cameras/{name}/clips?limit=`: the camera's clips, newest first, each with its URL.
pub async fn list(
    State(state): State<HttpState>,
    Path(name): Path<String>,
    Query(query): Query<ClipsQuery>,
) -> Response {
    let recorder = match recorder(&state, &name) {
        Ok(recorder) => recorder,
        Err(message) => return error(StatusCode::NOT_FOUND, message, None),
    };
    let before = query.before.map(|ms| std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms));
    let clips: Vec<serde_json::Value> = recorder
        .index()
        .list_before(Some(&name), before, query.limit.unwrap_or(DEFAULT_CLIPS))
        .into_iter()
        .map(|entry| {
            let file = entry.path.rsplit('/').next().unwrap_or_default().to_owned();
            let mut json = serde_json::to_value(&entry).unwrap_or_default();
            json["url"] = serde_json::Value::String(clip_url(&entry.camera, &file));
            json
        })
        .collect();
    Json(serde_json::json!({ "camera": name, "clips": clips })).into_response()
}

/// `GET /api/cameras/{name}/clips/{file}`: the clip, whole or the one range asked for.
pub async fn clip(
    State(state): State<HttpState>,
    Path((name, file)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let recorder = match recorder(&state, &name) {
        Ok(recorder) => recorder,
        Err(message) => return error(StatusCode::NOT_FOUND, message, None),
    };
    let Some(entry) = recorder.index().get(&format!("{name}/{file}")) else {
        return error(StatusCode::NOT_FOUND, format!("camera {name:?} has no clip {file:?}"), None);
    };
    if entry.recording {
        let mut response = error(StatusCode::CONFLICT, "the clip is still recording; it is served once complete", None);
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        return response;
    }
    let path = recorder.root().join(&entry.path);
    let mut file = match tokio::fs::File::open(&path).await {
        Ok(file) => file,
        // Removed by retention since the index was read.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return error(StatusCode::NOT_FOUND, format!("camera {name:?} has no clip {}", entry.path), None)
        }
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot read the clip: {e}"), None),
    };
    let length = match file.metadata().await {
        Ok(metadata) => metadata.len(),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot read the clip: {e}"), None),
    };
    let range = headers.get(header::RANGE).and_then(|value| value.to_str().ok()).map(|value| byte_range(value, length));
    let (status, start, end) = match range {
        None | Some(Range::Whole) => (StatusCode::OK, 0, length),
        Some(Range::Part(start, end)) => (StatusCode::PARTIAL_CONTENT, start, end),
        Some(Range::Unsatisfiable) => {
            let mut response = error(StatusCode::RANGE_NOT_SATISFIABLE, "the range is past the end of the clip", None);
            if let Ok(value) = HeaderValue::from_str(&format!("bytes */{length}")) {
                response.headers_mut().insert(header::CONTENT_RANGE, value);
            }
            return response;
        }
    };
    if start > 0 {
        if let Err(e) = file.seek(std::io::SeekFrom::Start(start)).await {
            return error(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot read the clip: {e}"), None);
        }
    }
    let body = Body::from_stream(tokio_util::io::ReaderStream::with_capacity(file.take(end - start), CHUNK));
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("video/mp4"));
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(end - start));
    if status == StatusCode::PARTIAL_CONTENT {
        if let Ok(value) = HeaderValue::from_str(&format!("bytes {start}-{}/{length}", end - 1)) {
            headers.insert(header::CONTENT_RANGE, value);
        }
    }
    response
}

/// `DELETE /api/cameras/{name}/clips/{file}` (with the token): the clip leaves the index and the
/// disk.
pub async fn delete(State(state): State<HttpState>, Path((name, file)): Path<(String, String)>) -> Response {
    let recorder = match recorder(&state, &name) {
        Ok(recorder) => recorder.clone(),
        Err(message) => return error(StatusCode::NOT_FOUND, message, None),
    };
    let path = format!("{name}/{file}");
    let removed = tokio::task::spawn_blocking(move || deletion::delete(recorder.root(), recorder.index(), &path)).await;
    match removed {
        Ok(Ok(_)) => StatusCode::NO_CONTENT.into_response(),
        Ok(Err(e @ DeleteError::Unknown(_))) => error(StatusCode::NOT_FOUND, e.to_string(), None),
        Ok(Err(e @ DeleteError::Recording(_))) => error(StatusCode::CONFLICT, e.to_string(), None),
        Ok(Err(e @ DeleteError::Io { .. })) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot delete the clip: {e}"), None),
    }
}

/// The most metadata a clip's boxes answer reads: a long busy clip's boxes past it are left out
/// (the answer says so with `"cut": true`).
const MAX_BOX_BYTES: u64 = 8 << 20;

/// One sample of a clip's metadata track as the page reads it.
#[derive(Debug, Serialize)]
struct BoxSample {
    /// Start and duration on the clip's timeline, seconds.
    t: f64,
    d: f64,
    boxes: Vec<FrameBox>,
}

/// `GET /api/cameras/{name}/clips/{file}/boxes`: the boxes of the clip's metadata track,
/// `{"samples": [{"t", "d", "boxes"}], "cut": false}`, for the page to draw over its playback.
pub async fn boxes(State(state): State<HttpState>, Path((name, file)): Path<(String, String)>) -> Response {
    let recorder = match recorder(&state, &name) {
        Ok(recorder) => recorder,
        Err(message) => return error(StatusCode::NOT_FOUND, message, None),
    };
    let Some(entry) = recorder.index().get(&format!("{name}/{file}")) else {
        return error(StatusCode::NOT_FOUND, format!("camera {name:?} has no clip {file:?}"), None);
    };
    let path = recorder.root().join(&entry.path);
    let read = tokio::task::spawn_blocking(move || {
        let mut file = std::fs::File::open(&path)?;
        let length = file.metadata()?.len();
        mp4::track_samples(&mut file, length, METADATA_TRACK, MAX_BOX_BYTES).map_err(std::io::Error::other)
    })
    .await;
    let (samples, cut) = match read {
        Ok(Ok(read)) => read,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return error(StatusCode::NOT_FOUND, format!("camera {name:?} has no clip {}", entry.path), None)
        }
        Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot read the clip: {e}"), None),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot read the clip: {e}"), None),
    };
    let seconds = |ticks: u64| ticks as f64 / f64::from(mp4::TIMESCALE);
    let samples: Vec<BoxSample> = samples
        .iter()
        .filter_map(|sample| {
            let boxes = BoxFrame::parse_sample(&sample.data)?;
            Some(BoxSample { t: seconds(sample.decode_time), d: seconds(u64::from(sample.duration)), boxes })
        })
        .collect();
    Json(serde_json::json!({ "samples": samples, "cut": cut })).into_response()
}

/// What a `Range` header asks of a body of `length` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Range {
    /// No usable range (several ranges, another unit, a malformed one): the whole body.
    Whole,
    /// Bytes `start..end`.
    Part(u64, u64),
    Unsatisfiable,
}

/// Parses `bytes=a-b`, `bytes=a-` and `bytes=-n` (RFC 9110); anything else is the whole body.
fn byte_range(value: &str, length: u64) -> Range {
    let Some(spec) = value.trim().strip_prefix("bytes=") else { return Range::Whole };
    if spec.contains(',') {
        return Range::Whole;
    }
    let Some((first, last)) = spec.trim().split_once('-') else { return Range::Whole };
    let number = |text: &str| text.trim().parse::<u64>().ok();
    match (first.trim().is_empty(), number(first), number(last)) {
        (true, _, Some(0)) => Range::Unsatisfiable,
        (true, _, Some(suffix)) if length > 0 => Range::Part(length.saturating_sub(suffix), length),
        (false, Some(start), _) if start >= length => Range::Unsatisfiable,
        (false, Some(start), None) if last.trim().is_empty() => Range::Part(start, length),
        (false, Some(start), Some(end)) if end >= start => Range::Part(start, end.saturating_add(1).min(length)),
        (true, _, Some(_)) => Range::Unsatisfiable,
        _ => Range::Whole,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_read_as_browsers_send_them() {
        assert_eq!(byte_range("bytes=0-", 1000), Range::Part(0, 1000));
        assert_eq!(byte_range("bytes=100-199", 1000), Range::Part(100, 200));
        assert_eq!(byte_range("bytes=900-5000", 1000), Range::Part(900, 1000), "an end past the body is cut");
        assert_eq!(byte_range("bytes=-100", 1000), Range::Part(900, 1000));
        assert_eq!(byte_range("bytes=-5000", 1000), Range::Part(0, 1000));
        assert_eq!(byte_range("bytes=1000-", 1000), Range::Unsatisfiable);
        assert_eq!(byte_range("bytes=-0", 1000), Range::Unsatisfiable);
        assert_eq!(byte_range("bytes=0-1,5-9", 1000), Range::Whole, "several ranges: the whole body");
        assert_eq!(byte_range("items=0-1", 1000), Range::Whole);
        assert_eq!(byte_range("bytes=9-1", 1000), Range::Whole, "a reversed range is ignored");
        assert_eq!(byte_range("bytes=x-", 1000), Range::Whole);
    }
}
