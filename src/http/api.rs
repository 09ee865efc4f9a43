//! The handlers of the JSON API, the annotated picture, the run-time controls, `/healthz` and
//! `/metrics`.
//!
//! Owns: each route's answer and error codes (404 for an unknown camera, 400 naming the field of a
//! bad zone body, 503 while a camera has no frame yet or the watchdog sees a stall), and the zone
//! change: parsed by the one zone parser (`config::scene`, labels against the label file) into the
//! tracking scene, one change at a time, then saved to the zones file and applied by the daemon's
//! loop before the answer; a control change (checked, set on the shared `Controls`, which the
//! daemon's loop applies, saves and announces). Must not: hold a view lock across an await, render
//! a picture itself ([`super::picture`] does, once per frame), or touch a file (the daemon's loop
//! writes the zones file; [`super::clips`] serves the clips).

use std::collections::BTreeMap;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::exposition::Format;
use super::picture::Overlay;
use super::state::{HttpState, ZonesChange};
use crate::config::zones_file::CameraScene;
use crate::config::{
    parse_masks, parse_scene as parse_zones_and_lines, Config, ConfigError, LineConfig, MaskPoints, ZoneConfig,
};
use crate::controls::{check_threshold, ControlError, Switch};
use crate::infer::gating::MotionConfig;
use crate::publish::reporting::with_builds;
use crate::service::telemetry::{telemetry_message, TelemetryReport};
use crate::track::events::Scene;
use crate::track::zones::Polygon;

/// Longest wait for a camera's next frame before the latest kept one is shown.
pub const FRAME_WAIT: Duration = Duration::from_secs(1);

/// A JSON error: `{"error": "...", "field": "zones[0].polygon"}` (`field` only for a bad body).
pub fn error(status: StatusCode, message: impl Into<String>, field: Option<String>) -> Response {
    #[derive(Serialize)]
    struct ErrorJson {
        error: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        field: Option<String>,
    }
    (status, Json(ErrorJson { error: message.into(), field })).into_response()
}

fn unknown_camera(name: &str) -> Response {
    error(StatusCode::NOT_FOUND, format!("no camera named {name:?}"), None)
}

/// `GET /healthz`: 200 `ok` while every pipeline makes progress and every camera delivers frames,
/// else 503 naming the stalls and the cameras offline.
pub async fn healthz(State(state): State<HttpState>) -> Response {
    match state.view.health() {
        Ok(()) => (StatusCode::OK, "ok\n").into_response(),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")).into_response(),
    }
}

/// `GET /metrics`: OpenMetrics text, or the classic text format for a scraper that prefers it.
pub async fn metrics(State(state): State<HttpState>, headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|value| value.to_str().ok());
    let format = Format::negotiate(accept);
    match state.metrics.encode(format) {
        Ok(text) => ([(header::CONTENT_TYPE, HeaderValue::from_static(format.content_type()))], text).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode metrics: {e}"), None),
    }
}

/// `GET /api/status`: the daemon's version and health, the model load time, and the telemetry
/// message's figures (same fields as `<prefix>/telemetry`), current as of the last second or two.
pub async fn status(State(state): State<HttpState>) -> Response {
    let view = &state.view;
    let figures = view.figures();
    let cameras: Vec<_> = view
        .cameras
        .iter()
        .enumerate()
        .map(|(i, camera)| {
            let mut snapshot = camera.stats.peek();
            snapshot.fps = figures.fps.get(i).copied().unwrap_or(0.0);
            snapshot.source = figures.sources.get(i).cloned().flatten();
            snapshot
        })
        .collect();
    let mut engine = view.facts.engine.clone();
    if let Some(scheduler) = &figures.scheduler {
        engine["scheduler"] = serde_json::to_value(scheduler).unwrap_or_default();
    }
    with_builds(&mut engine, figures.backend.as_ref(), &figures.builds);
    let report = TelemetryReport {
        // The run id and sequence number stamp MQTT messages; this answer is not one.
        stamp: None,
        cameras: &cameras,
        load: figures.system,
        jetson: &figures.jetson,
        engine: Some(engine),
        outlets: figures.outlets.iter().map(|named| (named.outlet.clone(), named.figures.report.clone())).collect(),
        reid: None,
        ts: figures.updated.unwrap_or_else(std::time::SystemTime::now),
    };
    let telemetry: serde_json::Value = serde_json::from_slice(&telemetry_message(&report)).unwrap_or_default();
    let health = view.health();
    // Which detector each camera runs, by its table (`model`, `models.<name>`): the page names
    // each camera's model from the telemetry's `engine` (`model`, `models.<name>.model`).
    let camera_models: serde_json::Map<String, serde_json::Value> = view
        .config()
        .cameras
        .iter()
        .map(|camera| {
            let table = camera.model.as_ref().map_or_else(|| "model".to_string(), |name| format!("models.{name}"));
            (camera.name.clone(), serde_json::Value::String(table))
        })
        .collect();
    Json(serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "healthy": health.is_ok(),
        "health_reason": health.err(),
        "model_load_s": view.facts.model_load.as_secs_f64(),
        "cameras": view.cameras.iter().map(|camera| camera.name.as_str()).collect::<Vec<_>>(),
        "camera_models": camera_models,
        "telemetry": telemetry,
    }))
    .into_response()
}

#[derive(Debug, Deserialize)]
pub struct PictureQuery {
    /// Draw the zones and lines (default); the page draws its own and asks without.
    zones: Option<bool>,
}

/// `GET /api/cameras/{name}/latest.jpg`: the camera's next frame (or, after [`FRAME_WAIT`], the
/// latest kept one) with boxes, track ids, zones and lines drawn, rendered once per frame for
/// every reader ([`super::picture`]). `HEAD` answers from the camera's state alone: it neither
/// asks for a frame nor renders one.
pub async fn latest_jpeg(
    State(state): State<HttpState>,
    method: Method,
    Path(name): Path<String>,
    Query(query): Query<PictureQuery>,
) -> Response {
    let Some(index) = state.view.cameras.iter().position(|camera| camera.name == name) else {
        return unknown_camera(&name);
    };
    let camera = &state.view.cameras[index];
    let no_frame = || {
        let mut response = error(StatusCode::SERVICE_UNAVAILABLE, format!("camera {name:?} has no frame yet"), None);
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        response
    };
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("image/jpeg")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
    ];
    if method == Method::HEAD {
        let has_frame = camera.latest().is_some() || camera.stats.peek().frames > 0;
        return if has_frame { (headers, ()).into_response() } else { no_frame() };
    }
    let mut arrived = camera.request_frame();
    let _ = tokio::time::timeout(FRAME_WAIT, arrived.changed()).await;
    let Some(frame) = camera.latest() else { return no_frame() };
    let overlay = match query.zones.unwrap_or(true) {
        true => state
            .view
            .config()
            .cameras
            .iter()
            .find(|camera| camera.name == name)
            .map(|camera| Overlay { zones: camera.zones.clone(), lines: camera.lines.clone() }),
        false => None,
    };
    let rendered = state.pictures.jpeg(index, frame, overlay, state.view.labels.clone()).await;
    match rendered {
        Ok(jpeg) => (headers, jpeg).into_response(),
        Err(message) => error(StatusCode::INTERNAL_SERVER_ERROR, message, None),
    }
}

/// A camera's zones, lines and motion masks in the config's shape (fractions of the frame).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SceneBody {
    pub zones: Vec<ZoneConfig>,
    pub lines: Vec<LineConfig>,
    /// The motion masks the camera runs with: saved from the page, else `[motion.camera.<name>]`'s.
    #[serde(default)]
    pub masks: Vec<MaskPoints>,
}

/// A `PUT` body: what it names replaces the camera's zones, lines or masks; what it leaves out stays.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SceneChange {
    zones: Option<Vec<ZoneConfig>>,
    lines: Option<Vec<LineConfig>>,
    masks: Option<Vec<MaskPoints>>,
}

/// Why a body that names no key is refused: it would change nothing, and before issue 35 it
/// removed every zone and line without a word.
const NOTHING_TO_CHANGE: &str = "the body names none of `zones`, `lines` and `masks`, so nothing would change; to \
                                 remove every zone and line, send {\"zones\": [], \"lines\": []}";

/// `camera`'s motion masks as it runs with them (`MotionConfig::masks_of`'s rule); none without
/// a `[motion]` section.
fn running_masks(config: &Config, camera: &str) -> Vec<MaskPoints> {
    let motion = config.sections.get::<MotionConfig>();
    motion.map(|motion| motion.masks_of(camera, &config.masks_from_file).to_vec()).unwrap_or_default()
}

/// `GET /api/cameras/{name}/zones`: the zones, lines and motion masks the camera runs with.
pub async fn zones(State(state): State<HttpState>, Path(name): Path<String>) -> Response {
    let config = state.view.config();
    match config.cameras.iter().find(|camera| camera.name == name) {
        Some(camera) => Json(SceneBody {
            zones: camera.zones.clone(),
            lines: camera.lines.clone(),
            masks: running_masks(&config, &name),
        })
        .into_response(),
        None => unknown_camera(&name),
    }
}

/// `PUT /api/cameras/{name}/zones`: replaces the camera's zones, lines or motion masks; the daemon's
/// loop saves them to the zones file and applies them (live tracks continue, as with SIGHUP; masks
/// reach the camera's running gate). Answers the scene as applied.
pub async fn put_zones(State(state): State<HttpState>, Path(name): Path<String>, body: Bytes) -> Response {
    // One change at a time, from reading the running zones to their being applied: a change merges
    // into, and is checked against, what the one before left (two at once each kept the other's
    // camera as it was before both, and the second undid the first).
    let _saving = state.saving.lock().await;
    // The running config names the running cameras (a SIGHUP keeps them): the change is checked
    // against what runs before anything is written, so a refused write changes nothing.
    let config = state.view.config();
    let Some(camera) = config.cameras.iter().find(|camera| camera.name == name) else {
        return unknown_camera(&name);
    };
    let current = CameraScene {
        name: name.clone(),
        masks: config.masks_from_file.get(&name).cloned(),
        zones: camera.zones.clone(),
        lines: camera.lines.clone(),
    };
    let label_file = config.model.labels.clone();
    let SceneUpdate { scene, tracked, masks } = match parse_scene(&body, &current, &state.view.labels, &label_file) {
        Ok(parsed) => parsed,
        Err((field, message)) => return error(StatusCode::BAD_REQUEST, message, Some(field)),
    };
    if let Some(zone) = camera.record_zone_missing_from(&scene.zones) {
        let message = format!(
            "camera {name:?} records only events in the zones its `record.zones` names in the config, {zone:?} \
             among them: keep a zone {zone:?}, or change `record.zones` first"
        );
        return error(StatusCode::BAD_REQUEST, message, Some("zones".into()));
    }
    let mut with_scene = (*config).clone();
    if let Some(camera) = with_scene.cameras.iter_mut().find(|camera| camera.name == name) {
        camera.zones.clone_from(&scene.zones);
    }
    // What the outlets' sections say of the config with these zones (Home Assistant's entity ids
    // come from zone names).
    if let Err(refused) = with_scene.check_sections() {
        let message = match refused {
            ConfigError::Invalid { key, message, .. } => format!("{key}: {message}"),
            other => other.to_string(),
        };
        return error(StatusCode::BAD_REQUEST, message, Some("zones".into()));
    }
    // The daemon's loop saves and applies the change, or, once it has stopped (shutdown), drops
    // it unsaved: a save is answered 200 or changes nothing.
    let (applied, answer) = oneshot::channel();
    let running = match &scene.masks {
        Some(saved) => saved.clone(),
        None => running_masks(&config, &name),
    };
    let body = SceneBody { zones: scene.zones.clone(), lines: scene.lines.clone(), masks: running };
    if state.changes.send(ZonesChange { scene, tracked, masks, applied }).await.is_err() {
        return error(StatusCode::SERVICE_UNAVAILABLE, "the daemon is shutting down", None);
    }
    match answer.await {
        Ok(Ok(())) => {
            log::info!("http: zones and lines of camera {name:?} saved and applied");
            Json(body).into_response()
        }
        Ok(Err(message)) => {
            log::error!("http: zones of camera {name:?} not saved: {message}");
            error(StatusCode::INTERNAL_SERVER_ERROR, message, None)
        }
        Err(_) => error(StatusCode::SERVICE_UNAVAILABLE, "the daemon is shutting down", None),
    }
}

/// `GET /api/controls`: every camera's switches and the score threshold.
pub async fn controls(State(state): State<HttpState>) -> Response {
    Json(state.controls.values()).into_response()
}

/// What `PUT /api/controls` may change: any of the controls, the others stay.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlsBody {
    pub score_threshold: Option<f32>,
    #[serde(default, rename = "camera")]
    pub cameras: BTreeMap<String, SwitchesBody>,
}

/// A camera's switches to change.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchesBody {
    pub detect: Option<bool>,
    pub snapshots: Option<bool>,
    pub record: Option<bool>,
    pub gating: Option<bool>,
}

impl SwitchesBody {
    /// The wanted state of `switch`, if the body names it.
    fn get(&self, switch: Switch) -> Option<bool> {
        match switch {
            Switch::Detect => self.detect,
            Switch::Snapshots => self.snapshots,
            Switch::Record => self.record,
            Switch::Gating => self.gating,
        }
    }
}

/// `PUT /api/controls`: sets the controls the body names, all or none (400 naming the field of an
/// unknown camera or a threshold out of range); answers every control's value. The daemon applies
/// the change at once (the threshold, a camera's detection), saves it to the controls file and
/// publishes the new states.
pub async fn put_controls(State(state): State<HttpState>, body: Bytes) -> Response {
    let body: ControlsBody = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.to_string(), Some(".".into())),
    };
    let controls = &state.controls;
    if let Some(Err(refused)) = body.score_threshold.map(check_threshold) {
        return error(StatusCode::BAD_REQUEST, refused.to_string(), Some("score_threshold".into()));
    }
    if let Some(name) = body.cameras.keys().find(|name| controls.camera(name).is_none()) {
        let message = ControlError::UnknownCamera(name.clone()).to_string();
        return error(StatusCode::BAD_REQUEST, message, Some(format!("camera.{name}")));
    }
    if let Some(value) = body.score_threshold {
        let _ = controls.set_score_threshold(value);
    }
    for (name, switches) in &body.cameras {
        for switch in Switch::ALL {
            if let Some(on) = switches.get(switch) {
                let _ = controls.set(name, switch, on);
            }
        }
    }
    Json(controls.values()).into_response()
}

/// A checked `PUT` body: the camera's scene as the zones file keeps it, as tracking uses it, and
/// its masks as the gate uses them when the body sets them.
#[derive(Debug)]
pub struct SceneUpdate {
    pub scene: CameraScene,
    pub tracked: Scene,
    pub masks: Option<Vec<Polygon>>,
}

/// The body as a camera's zones, lines and masks (what the zones file keeps), its tracking scene
/// and, when the body sets masks, the masks as the gate uses them, by the one zone parser:
/// `Err((field, message))` names the body's field (`zones[0].polygon`, `masks[1]`). The body must
/// be a JSON object naming `zones`, `lines`, `masks` or any of them; a key it leaves out keeps
/// `current`'s (the camera's scene as the zones file would keep it: masks only where the page
/// saved some, else they stay the config's). An explicit `{"zones": [], "lines": []}` removes
/// every zone and line, `{"masks": []}` every mask (the config's too).
pub fn parse_scene(
    body: &[u8],
    current: &CameraScene,
    labels: &crate::detection::Labels,
    label_file: &std::path::Path,
) -> Result<SceneUpdate, (String, String)> {
    let camera = current.name.as_str();
    let whole = |message: String| (".".to_string(), message);
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| whole(e.to_string()))?;
    if !value.is_object() {
        return Err(whole("the body must be a JSON object: {\"zones\": [...], \"lines\": [...]}".into()));
    }
    let change: SceneChange = serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        (field, e.into_inner().to_string())
    })?;
    if change.zones.is_none() && change.lines.is_none() && change.masks.is_none() {
        return Err(whole(NOTHING_TO_CHANGE.into()));
    }
    let masks = match &change.masks {
        Some(masks) => Some(parse_masks(camera, masks).map_err(|e| (e.key, e.message))?),
        None => None,
    };
    let zones = change.zones.unwrap_or_else(|| current.zones.clone());
    let lines = change.lines.unwrap_or_else(|| current.lines.clone());
    let tracked = parse_zones_and_lines(camera, &zones, &lines).and_then(|parsed| parsed.resolve(labels, label_file));
    let tracked = tracked.map_err(|e| {
        // The config's keys are `zone[1]` and `line[0]`; the body's fields are plural.
        let field = if let Some(rest) = e.key.strip_prefix("zone") {
            format!("zones{rest}")
        } else if let Some(rest) = e.key.strip_prefix("line") {
            format!("lines{rest}")
        } else {
            e.key
        };
        (field, e.message)
    })?;
    let saved = change.masks.or_else(|| current.masks.clone());
    Ok(SceneUpdate { scene: CameraScene { name: camera.to_string(), masks: saved, zones, lines }, tracked, masks })
}

#[cfg(test)]
mod tests {
    use std::path::Path as FsPath;

    use super::*;
    use crate::detection::Labels;

    fn labels() -> Labels {
        Labels::parse("person\ncar\n", FsPath::new("labels.txt")).unwrap()
    }

    fn nothing() -> CameraScene {
        CameraScene { name: "front".into(), masks: None, zones: Vec::new(), lines: Vec::new() }
    }

    /// Issue 35: `[]` and `{}` removed every zone and line without a word.
    #[test]
    fn a_body_that_names_nothing_is_refused_and_a_key_left_out_stays() {
        let current: SceneBody = serde_json::from_str(
            r#"{"zones":[{"name":"lane","polygon":[[0,0.5],[1,0.5],[1,1]]}],"lines":[{"name":"gate","points":[[0.5,1],[0.5,0]]}]}"#,
        )
        .unwrap();
        let current = CameraScene { zones: current.zones, lines: current.lines, ..nothing() };
        let parse = |body: &[u8]| parse_scene(body, &current, &labels(), FsPath::new("labels.txt"));
        for body in [&b"{}"[..], b"[]", b"[[], []]", b"null", b"{\"zones\": null}"] {
            let (field, message) = parse(body).expect_err("names nothing");
            assert_eq!(field, ".", "{}", String::from_utf8_lossy(body));
            assert!(message.contains("JSON object") || message.contains("nothing would change"), "{message}");
        }
        let SceneUpdate { scene: only_lines, masks, .. } = parse(br#"{"lines":[]}"#).unwrap();
        assert_eq!((only_lines.zones.len(), only_lines.lines.len()), (1, 0), "zones stay, lines go");
        assert!(only_lines.masks.is_none() && masks.is_none(), "masks stay the config's");
        let SceneUpdate { scene: cleared, tracked, .. } = parse(br#"{"zones":[],"lines":[]}"#).unwrap();
        assert!(cleared.zones.is_empty() && cleared.lines.is_empty() && tracked.zones.is_empty());
    }

    #[test]
    fn a_good_body_becomes_the_cameras_scene() {
        let body =
            br#"{"zones":[{"name":"lane","polygon":[[0.0,0.62],[1.0,0.62],[1.0,1.0],[0.0,1.0]],"labels":["person"]}],
                        "lines":[{"name":"gate","points":[[0.5,1.0],[0.5,0.2]]}]}"#;
        let SceneUpdate { scene, tracked, .. } =
            parse_scene(body, &nothing(), &labels(), FsPath::new("labels.txt")).unwrap();
        assert_eq!((tracked.zones[0].classes.as_slice(), tracked.lines.len()), (&[0][..], 1));
        assert_eq!(scene.name, "front");
        assert_eq!(scene.zones[0].name, "lane");
        assert_eq!(scene.lines[0].points, [[0.5, 1.0], [0.5, 0.2]]);
    }

    #[test]
    fn every_bad_body_names_its_field() {
        let cases: [(&[u8], &str, &str); 9] = [
            (
                br#"{"zones":[{"name":"lane","polygon":[[0.0,0.0],[1.0,0.0]]}]}"#,
                "zones[0].polygon",
                "at least 3 points",
            ),
            (br#"{"zones":[{"name":"a b","polygon":[[0,0],[1,0],[0,1]]}]}"#, "zones[0].name", "letters"),
            (
                br#"{"zones":[{"name":"z","polygon":[[0,0],[1,0],[0,1]],"labels":["dragon"]}]}"#,
                "zones[0].labels",
                "dragon",
            ),
            (br#"{"lines":[{"name":"g","points":[[0.5,0.5],[0.5,0.5]]}]}"#, "lines[0].points", "two different points"),
            (br#"{"lines":[{"name":"g","points":[[0.5,0.5]]}]}"#, "lines[0].points", "invalid length"),
            (br#"{"zones":[{"name":"z","polygon":"x"}]}"#, "zones[0].polygon", "invalid type"),
            (br#"{"zone":[]}"#, "zone", "unknown field"),
            (br#"{"masks":[[[0,0],[1,0],[0,1]],[[0,0],[2,0],[0,1]]]}"#, "masks[1]", "outside"),
            (br#"{"masks":[[0,0]]}"#, "masks[0][0]", "invalid type"),
        ];
        for (body, field, message) in cases {
            let (got_field, got_message) =
                parse_scene(body, &nothing(), &labels(), FsPath::new("labels.txt")).unwrap_err();
            assert_eq!(got_field, field, "{}: {got_message}", String::from_utf8_lossy(body));
            assert!(got_message.contains(message), "{}: {got_message}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn masks_in_a_body_replace_the_cameras_masks_and_a_body_without_them_keeps_those_saved() {
        let square = vec![[0.0, 0.0], [0.5, 0.0], [0.5, 0.5], [0.0, 0.5]];
        let parse = |body: &[u8], current: &CameraScene| parse_scene(body, current, &labels(), FsPath::new("l.txt"));
        let SceneUpdate { scene, masks, .. } =
            parse(br#"{"masks":[[[0,0],[0.5,0],[0.5,0.5],[0,0.5]]]}"#, &nothing()).unwrap();
        assert_eq!(scene.masks, Some(vec![square.clone()]));
        assert_eq!(masks.map(|masks| masks.len()), Some(1), "for the gate");
        let saved = CameraScene { masks: Some(vec![square.clone()]), ..nothing() };
        let SceneUpdate { scene, masks, .. } = parse(br#"{"zones":[]}"#, &saved).unwrap();
        assert_eq!((scene.masks, masks.is_none()), (Some(vec![square]), true), "kept in the file, the gate unchanged");
        let SceneUpdate { scene, masks, .. } = parse(br#"{"masks":[]}"#, &saved).unwrap();
        assert_eq!((scene.masks, masks.map(|masks| masks.len())), (Some(Vec::new()), Some(0)), "every mask removed");
    }
}
