//! Zones, lines and motion masks saved from the page, as the daemon's loop applies them.
//!
//! Owns: [`save_and_apply_zones`]: the change saved to the zones file, then applied like a reload
//! (masks: handed to the camera's running gate), then answered. Must not: parse or check the
//! change (the HTTP API did, with the one zone parser).

use std::path::Path;

use crate::config::zones_file::ZonesFile;
use crate::http::ZonesChange;
use crate::infer::gating::MotionGates;
use crate::publish::live::LiveView;
use crate::publish::sink::PublishSink;

/// Zones, lines and masks from the page (parsed and checked): saved to the zones file, then
/// applied to the camera's tracking like a SIGHUP reload (live tracks continue) and its masks to
/// its gate (`motion`: the running gates, with `[motion]` enabled; the background stays), then
/// answered. A change that cannot be saved is not applied.
pub async fn save_and_apply_zones(
    change: ZonesChange,
    zones_file: &Path,
    sink: &PublishSink,
    live: &LiveView,
    motion: Option<&MotionGates>,
) {
    let ZonesChange { scene, tracked, masks, applied } = change;
    let mut config = (*live.config()).clone();
    if let Some(saved) = &scene.masks {
        config.masks_from_file.insert(scene.name.clone(), saved.clone());
    }
    let result = match config.cameras.iter_mut().find(|camera| camera.name == scene.name) {
        None => Err(format!("no camera named {:?}", scene.name)),
        Some(camera) => {
            camera.zones.clone_from(&scene.zones);
            camera.lines.clone_from(&scene.lines);
            let (path, name) = (zones_file.to_path_buf(), scene.name.clone());
            let saved = tokio::task::spawn_blocking(move || ZonesFile::update(&path, |file| file.set(scene)).map(drop))
                .await
                .map_err(|e| format!("save task failed: {e}"))
                .and_then(|saved| saved.map_err(|e| e.to_string()));
            saved.map(|()| {
                sink.apply_scene(&config, &name, tracked);
                if let Some((masks, link)) = masks.zip(motion.and_then(|gates| gates.link(&name))) {
                    link.set_masks(masks);
                }
            })
        }
    };
    // The requester may have gone (its connection closed); the change is saved and applied either way.
    let _ = applied.send(result);
}
