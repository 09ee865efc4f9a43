//! Routes and the checks every request passes before a handler sees it.
//!
//! Owns: the route table, the host guard (a request whose `Host` names another server is refused
//! with 421: [`super::hosts`]), the write guard (a request that is not `GET`/`HEAD` must come from the
//! page's own origin — an `Origin` header, when present, names the `Host` the request was sent to,
//! and `Sec-Fetch-Site` is not cross-site — and carry `Authorization: Bearer <token>` when a token
//! is set: 403 and 401 otherwise), the request body bounds (413 beyond [`MAX_BODY_BYTES`]; a
//! write's whole body within [`BODY_TIMEOUT`], or 408 and the connection closed) and the response
//! headers that keep the page from being framed or sniffed. Must not: log a request's
//! headers (the token travels in one).

use axum::body::Body;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::state::HttpState;
use super::{api, clips, event_entry, event_stream, live, motion, page};

/// Largest request body: a camera's 64 zones of 64 points and 64 lines fit with room to spare.
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// A write's whole body must arrive within this, counted from the end of its headers: a client
/// that trickles a body, or never sends it, must not keep a connection (there are at most
/// `connections::MAX_CONNECTIONS`) for as long as it likes.
pub const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Every route of the page, the API and `/metrics`.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/", get(page::index))
        .route("/app.js", get(page::script))
        .route("/review.js", get(page::review_script))
        .route("/live.js", get(page::live_script))
        .route("/motion.js", get(page::motion_script))
        .route("/style.css", get(page::style))
        .route("/healthz", get(api::healthz))
        .route("/metrics", get(api::metrics))
        .route("/api/status", get(api::status))
        .route("/api/events", get(event_entry::events))
        .route("/api/events/stream", get(event_stream::stream))
        .route("/api/cameras/{name}/latest.jpg", get(api::latest_jpeg))
        .route("/api/cameras/{name}/events/{track}/picture.jpg", get(event_entry::picture))
        .route("/api/cameras/{name}/live.mp4", get(live::video))
        .route("/api/cameras/{name}/live.boxes", get(live::boxes))
        .route("/api/cameras/{name}/live.m3u8", get(live::playlist))
        .route("/api/cameras/{name}/live.motion", get(motion::motion))
        .route("/api/cameras/{name}/hls/{file}", get(live::hls_file))
        .route("/api/cameras/{name}/zones", get(api::zones).put(api::put_zones))
        .route("/api/controls", get(api::controls).put(api::put_controls))
        .route("/api/cameras/{name}/clips", get(clips::list))
        .route("/api/cameras/{name}/clips/{file}", get(clips::clip).delete(clips::delete))
        .route("/api/cameras/{name}/clips/{file}/boxes", get(clips::boxes))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// Refuses requests for another host (421), writes from another origin (403), writes without the
/// token (401) and writes whose body is too large (413) or late (408); adds the headers every
/// response carries.
async fn guard(State(state): State<HttpState>, request: Request<Body>, next: Next) -> Response {
    let host = request.headers().get(header::HOST).map(|host| host.to_str().unwrap_or(""));
    if !state.hosts.admits(host) {
        return api::error(
            StatusCode::MISDIRECTED_REQUEST,
            format!(
                "this server does not answer to the host {:?}: add the name to `http.allowed_hosts`",
                host.unwrap_or_default()
            ),
            None,
        );
    }
    let is_write = !matches!(*request.method(), Method::GET | Method::HEAD);
    if is_write {
        if !is_same_origin(request.headers()) {
            return api::error(StatusCode::FORBIDDEN, "cross-origin writes are refused", None);
        }
        if let Some(token) = &state.token {
            let presented = request
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.strip_prefix("Bearer "));
            if !presented.is_some_and(|candidate| token.matches(candidate.trim())) {
                let mut response =
                    api::error(StatusCode::UNAUTHORIZED, "this write needs `Authorization: Bearer <token>`", None);
                response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                return response;
            }
        }
    }
    let request = if is_write {
        match body_in_time(request).await {
            Ok(request) => request,
            Err(refusal) => return refusal,
        }
    } else {
        request
    };
    let mut response = next.run(request).await.into_response();
    let headers = response.headers_mut();
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

/// `request` with its whole body read, within [`BODY_TIMEOUT`] and [`MAX_BODY_BYTES`]: 408 with
/// `Connection: close` when it is late (what came of it is not read on), 413 when it is too large.
async fn body_in_time(request: Request<Body>) -> Result<Request<Body>, Response> {
    let (parts, body) = request.into_parts();
    // The body's extractor applies the router's `DefaultBodyLimit`, which travels in the extensions.
    let mut reading = Request::new(body);
    *reading.extensions_mut() = parts.extensions.clone();
    match tokio::time::timeout(BODY_TIMEOUT, Bytes::from_request(reading, &())).await {
        Ok(Ok(bytes)) => Ok(Request::from_parts(parts, Body::from(bytes))),
        Ok(Err(rejection)) => Err(rejection.into_response()),
        Err(_) => {
            let message = format!("the request's body did not arrive within {} s", BODY_TIMEOUT.as_secs());
            let mut response = api::error(StatusCode::REQUEST_TIMEOUT, message, None);
            response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            Err(response)
        }
    }
}

/// Whether a request comes from the page's own origin, as far as the browser says: no `Origin`
/// (not a cross-origin browser request: curl, Prometheus) or one whose host equals `Host`, and no
/// `Sec-Fetch-Site` other than `same-origin` or `none`.
pub fn is_same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        if !matches!(site.as_bytes(), b"same-origin" | b"none") {
            return false;
        }
    }
    let Some(origin) = headers.get(header::ORIGIN) else { return true };
    let Some(host) = headers.get(header::HOST).and_then(|host| host.to_str().ok()) else { return false };
    let Ok(origin) = origin.to_str() else { return false };
    let authority = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
    authority.is_some_and(|authority| authority.eq_ignore_ascii_case(host))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| (header::HeaderName::from_static(name), HeaderValue::from_static(value)))
            .collect()
    }

    #[test]
    fn only_the_pages_own_origin_may_write() {
        assert!(is_same_origin(&headers(&[("host", "127.0.0.1:8090")])), "no Origin: curl");
        assert!(is_same_origin(&headers(&[("host", "127.0.0.1:8090"), ("origin", "http://127.0.0.1:8090")])));
        assert!(is_same_origin(&headers(&[("host", "Jetson:8090"), ("origin", "http://jetson:8090")])));
        assert!(!is_same_origin(&headers(&[("host", "127.0.0.1:8090"), ("origin", "http://evil.example")])));
        assert!(!is_same_origin(&headers(&[("host", "127.0.0.1:8090"), ("origin", "http://127.0.0.1:8091")])));
        assert!(!is_same_origin(&headers(&[("host", "127.0.0.1:8090"), ("origin", "null")])));
        assert!(!is_same_origin(&headers(&[("origin", "http://127.0.0.1:8090")])), "no Host to compare");
        assert!(!is_same_origin(&headers(&[("host", "127.0.0.1:8090"), ("sec-fetch-site", "cross-site")])));
        assert!(is_same_origin(&headers(&[("host", "a:1"), ("sec-fetch-site", "same-origin")])));
    }
}
