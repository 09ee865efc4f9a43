//! The motion route: a camera's motion as its gate sees it, frame after frame, for the page's
//! debug view.
//!
//! `GET /api/cameras/<c>/live.motion` answers `application/x-ndjson`, one line per frame the gate
//! judged while the response is open: `{"t":seconds,"state":"moving","light_change":false,
//! "gated":false,"changed":0.012,"regions":[[x1,y1,x2,y2],…]}` (`t` the capture time in Unix
//! seconds, the regions as fractions of the frame, largest first). A GET: the API's rules apply
//! as to any read (the host guard; no token). Owns: the line's form and the answers' codes (404
//! for an unknown camera or where no live view is served, 409 for a camera without a motion gate
//! — `[motion]` is not enabled —, 503 with `Retry-After` while every place for a live viewer is
//! taken: a motion viewer takes one of the live streams' `crate::watch::hub::MAX_VIEWERS`). Must
//! not: make the gate wait or queue for a viewer: each response holds only the newest frame's
//! motion (one that falls behind skips to it), and the gate copies motion out only while a
//! response is open (`crate::infer::gating::link`). Ends when the daemon stops.

use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use futures_util::stream;
use serde::Serialize;
use tokio::sync::{watch, OwnedSemaphorePermit};

use super::api::error;
use super::state::HttpState;
use super::streamed::{busy, ndjson};
use crate::infer::gating::MotionView;
use crate::motion::MotionState;
use crate::track::scene_tracker::seconds;

/// One line of `live.motion`.
#[derive(Debug, Serialize)]
struct MotionLine {
    t: f64,
    state: MotionState,
    light_change: bool,
    gated: bool,
    changed: f32,
    regions: Vec<[f32; 4]>,
}

impl MotionLine {
    fn of(view: &MotionView) -> MotionLine {
        let (width, height) = (view.width.max(1) as f32, view.height.max(1) as f32);
        let regions = view
            .regions
            .iter()
            .map(|r| {
                let (x, y) = (r.x as f32, r.y as f32);
                [
                    x / width,
                    y / height,
                    ((x + r.width as f32) / width).min(1.0),
                    ((y + r.height as f32) / height).min(1.0),
                ]
            })
            .collect();
        MotionLine {
            t: seconds(view.captured_at),
            state: view.state,
            light_change: view.state == MotionState::LightChange,
            gated: view.gated,
            changed: view.changed,
            regions,
        }
    }

    /// The line, with its newline.
    fn to_bytes(&self) -> Bytes {
        // Numbers, booleans and a name: serialising cannot fail.
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        line.push(b'\n');
        Bytes::from(line)
    }
}

/// `GET /api/cameras/<c>/live.motion`.
pub async fn motion(State(state): State<HttpState>, Path(name): Path<String>) -> Response {
    let Some(hub) = state.watch.clone() else {
        return error(StatusCode::NOT_FOUND, "live views are not served", None);
    };
    if state.view.camera(&name).is_none() {
        return error(StatusCode::NOT_FOUND, format!("no camera named {name:?}"), None);
    }
    let Some(link) = state.motion.as_ref().and_then(|gates| gates.link(&name)) else {
        let message = format!("camera {name:?} has no motion gate: [motion] is not enabled");
        return error(StatusCode::CONFLICT, message, None);
    };
    let Some(permit) = hub.admit() else {
        return busy("every place for a live viewer is taken".to_owned());
    };
    let pump = MotionPump { receiver: link.watch(), stopping: hub.stopping(), _permit: permit };
    ndjson(stream::unfold(pump, MotionPump::next))
}

/// A motion viewer's response; while it lives, the camera's gate copies its motion out.
struct MotionPump {
    receiver: watch::Receiver<MotionView>,
    stopping: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
}

impl MotionPump {
    /// The newest frame's line once there is one the viewer has not had; `None` ends the
    /// response (the daemon stops).
    async fn next(mut self) -> Option<(Result<Bytes, Infallible>, MotionPump)> {
        tokio::select! {
            changed = self.receiver.changed() => changed.ok()?,
            _ = self.stopping.wait_for(|stopping| *stopping) => return None,
        }
        let line = MotionLine::of(&self.receiver.borrow_and_update()).to_bytes();
        Some((Ok(line), self))
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::motion::Region;

    #[test]
    fn a_line_gives_the_regions_as_fractions_of_the_frame_and_names_a_light_change() {
        let view = MotionView {
            frame: 3,
            captured_at: SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_250),
            width: 640,
            height: 480,
            state: MotionState::Moving,
            changed: 0.25,
            gated: false,
            regions: vec![Region { x: 64, y: 120, width: 320, height: 240, cells: 40 }],
        };
        let line: serde_json::Value = serde_json::from_slice(&MotionLine::of(&view).to_bytes()).expect("JSON");
        assert_eq!(
            line,
            serde_json::json!({"t": 1_700_000_000.25, "state": "moving", "light_change": false, "gated": false,
                               "changed": 0.25, "regions": [[0.1, 0.25, 0.6, 0.75]]})
        );
        let light = MotionView { state: MotionState::LightChange, regions: Vec::new(), ..view };
        let line = String::from_utf8(MotionLine::of(&light).to_bytes().to_vec()).expect("UTF-8");
        assert!(line.ends_with("}\n") && line.contains("\"light_change\":true"), "{line}");
    }
}
