//! The run-time controls as the daemon applies them: restored from their file at start, and each
//! change (an MQTT command, the HTTP API, a reload's threshold) applied to the workers and the
//! sink, announced by the outlets and saved.
//!
//! Owns: [`restore_controls`] and [`ControlsChange`]. Must not: parse a command or a request (the
//! MQTT outlet and the HTTP API do), or block the async threads (the file is saved off them).

use std::path::Path;

use crate::controls::{ControlValues, Controls};
use crate::decode::DecodeParams;
use crate::infer::scheduler::Scheduler;
use crate::publish::dispatch::Outlets;
use crate::publish::sink::PublishSink;

/// Takes over what users set before from the controls file at `path`; a file that cannot be read
/// or checked is set aside, and the config's values apply (a warning, never a failed start).
pub fn restore_controls(controls: &Controls, path: &Path) {
    let restored = crate::controls::file::restore(path);
    if !restored.removed.is_empty() {
        log::info!(
            "controls: removed {} left by a save that was cut short: {:?}",
            restored.removed.len(),
            restored.removed
        );
    }
    match &restored.set_aside {
        Some((error, Some(aside))) => {
            log::warn!("controls: {error}; moved to {}, starting from the config's values", aside.display())
        }
        Some((error, None)) => log::warn!("controls: {error}; starting from the config's values"),
        None => {}
    }
    if !restored.unknown.is_empty() {
        log::warn!(
            "controls: {} holds keys this daemon does not know (a newer one wrote them?), left out and \
             dropped at the next save: {}",
            path.display(),
            restored.unknown.join(", ")
        );
    }
    for problem in &restored.problems {
        log::warn!("controls: {problem}");
    }
    if let Some(saved) = &restored.values {
        controls.restore(saved);
        log::info!("controls: as set before, from {}", path.display());
    }
}

/// Applies what changed in the controls since `applied`: the threshold to the inference workers,
/// the end of the tracks of a camera whose detection stopped; then tells the outlets and saves the
/// controls file (off the async threads).
pub struct ControlsChange<'a> {
    pub controls: &'a Controls,
    pub file: &'a Path,
    /// The decode settings in force, which the threshold replaces its part of.
    pub params: &'a DecodeParams,
}

impl ControlsChange<'_> {
    pub async fn apply(
        self,
        applied: &mut ControlValues,
        sink: &PublishSink,
        scheduler: &Scheduler,
        outlets: &Outlets,
    ) {
        let now = self.controls.values();
        if now.score_threshold != applied.score_threshold {
            log::info!("controls: score threshold {} (was {})", now.score_threshold, applied.score_threshold);
            scheduler.reload(DecodeParams { score_threshold: now.score_threshold, ..self.params.clone() });
        }
        for (camera, values) in &now.cameras {
            let before = applied.cameras.get(camera).copied().unwrap_or(*values);
            if before != *values {
                log::info!(
                    "controls: camera {camera}: detection {}, snapshots {}, recording {}",
                    on_off(values.detect),
                    on_off(values.snapshots),
                    on_off(values.record)
                );
            }
            if before.detect && !values.detect {
                sink.stop_detection(camera);
            }
        }
        outlets.controls(&now);
        let (file, values) = (self.file.to_path_buf(), now.clone());
        match tokio::task::spawn_blocking(move || crate::controls::file::save(&file, &values)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => log::error!("controls: {error}; they apply until the daemon stops"),
            Err(error) => log::error!("controls: saving them failed: {error}"),
        }
        *applied = now;
    }
}

fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}
