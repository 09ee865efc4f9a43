//! The page's assets, compiled into the binary: one HTML file, its scripts (`app.js`: cameras,
//! figures and the zone and mask editor; `review.js`: the events timeline and its clips; `live.js`:
//! the live video's player and the boxes over it and over a clip; `motion.js`: the motion debug
//! view), one stylesheet (plain JavaScript
//! and CSS, no framework, no CDN: the page works on a network without internet).
//!
//! Owns: serving them with their media types and a Content-Security-Policy that allows only this
//! origin. Must not: read files at run time.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

pub const INDEX_HTML: &str = include_str!("page/index.html");
pub const APP_JS: &str = include_str!("page/app.js");
pub const REVIEW_JS: &str = include_str!("page/review.js");
pub const LIVE_JS: &str = include_str!("page/live.js");
pub const MOTION_JS: &str = include_str!("page/motion.js");
pub const STYLE_CSS: &str = include_str!("page/style.css");

/// Only this origin's scripts, styles, pictures and API, and the live video's Media Source (a
/// `blob:` URL the page makes); no framing.
const CSP: &str = "default-src 'self'; img-src 'self'; media-src 'self' blob:; script-src 'self'; \
                   style-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; \
                   frame-ancestors 'none'";

fn asset(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

/// `GET /`.
pub async fn index() -> Response {
    asset(INDEX_HTML, "text/html; charset=utf-8")
}

/// `GET /app.js`.
pub async fn script() -> Response {
    asset(APP_JS, "text/javascript; charset=utf-8")
}

/// `GET /review.js`.
pub async fn review_script() -> Response {
    asset(REVIEW_JS, "text/javascript; charset=utf-8")
}

/// `GET /live.js`.
pub async fn live_script() -> Response {
    asset(LIVE_JS, "text/javascript; charset=utf-8")
}

/// `GET /motion.js`.
pub async fn motion_script() -> Response {
    asset(MOTION_JS, "text/javascript; charset=utf-8")
}

/// `GET /style.css`.
pub async fn style() -> Response {
    asset(STYLE_CSS, "text/css; charset=utf-8")
}
