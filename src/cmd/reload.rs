//! SIGHUP: the config read again and what a reload may change applied while the daemon runs.
//!
//! Owns: [`reload`]. Must not: apply what needs a restart (it names those keys in the log), or
//! decide which keys a reload applies (`crate::config::reload` knows).

use std::path::Path;

use super::models::named_detectors;
use super::outlets::schema;
use super::preflight::check_zones_file_labels;
use crate::config::camera_scenes;
use crate::config::reload::{applied, keys_needing_a_restart};
use crate::controls::Controls;
use crate::decode::DecodeParams;
use crate::detection::Labels;
use crate::infer::scheduler::Scheduler;
use crate::model::ModelSpec;
use crate::publish::live::LiveView;
use crate::publish::sink::PublishSink;

/// SIGHUP: re-reads the config and applies thresholds, class filter, publish settings, tracking
/// settings and each running camera's zones and lines (live tracks continue). A config that is
/// invalid in any of these — a bad zone included — is refused as a whole. Other changes (model,
/// cameras added, removed or renamed, broker, turning tracking on or off) need a restart: the log
/// names each such key, and the running cameras keep their names until then.
///
/// A `model.score_threshold` that differs from the running config's is what the user wants now:
/// it becomes the control's value (and is saved); otherwise the control's value stays. Returns the
/// decode settings now in force.
pub fn reload(
    live: &LiveView,
    config_path: Option<&Path>,
    sink: &PublishSink,
    scheduler: &Scheduler,
    controls: &Controls,
) -> Option<DecodeParams> {
    let Some(path) = config_path else {
        log::info!("SIGHUP: running on the built-in config; nothing to reload");
        return None;
    };
    let running = live.config();
    let loaded =
        schema().load(path).and_then(|mut config| crate::onnx::describe::describe(&mut config).map(|()| config));
    let reloaded = loaded.map_err(|e| e.to_string()).and_then(|config| {
        // The loaded models are the running config's: a reload changes their thresholds and
        // class filters, never their decoders.
        let model = ModelSpec::from_config(&running).map_err(|e| e.to_string())?;
        // `[model]`'s class filter names `[model]`'s own labels, as at start: the shared list also
        // holds the named detectors' labels, whose ids `[model]` never produces.
        let own = Labels::load(&model.labels).map_err(|e| e.to_string())?;
        let mut params = DecodeParams::new(&model, &config.model, &own).map_err(|e| e.to_string())?;
        let detectors = named_detectors(&config, &running, &mut sink.labels().clone()).map_err(|e| e.to_string())?;
        check_zones_file_labels(&config, sink.labels()).map_err(|e| e.to_string())?;
        // Every camera's zones and lines are checked; the running cameras' are applied: what runs
        // after the reload is the running config with the reloadable keys taken from the file
        // (the cameras keep their names).
        camera_scenes(&config, sink.labels()).map_err(|e| e.to_string())?;
        let running_now = applied(&running, &config);
        let scenes = camera_scenes(&running_now, sink.labels()).map_err(|e| e.to_string())?;
        // The sections' checks of what runs now: the running cameras with the reloaded zones.
        running_now.check_sections().map_err(|e| e.to_string())?;
        if config.model.score_threshold != running.model.score_threshold {
            // Tells the outlets and saves the file through the controls' change, like a command.
            let _ = controls.set_score_threshold(config.model.score_threshold);
        }
        params.score_threshold = controls.score_threshold();
        Ok((config, running_now, params, detectors, scenes))
    });
    match reloaded {
        Ok((config, running_now, params, detectors, scenes)) => {
            scheduler.reload(params.clone());
            // The named detectors' lanes, by name; when which detectors run changed (a restart
            // applies that, the log below names the keys), they keep theirs.
            let running_names =
                running.models.keys().filter(|name| running.cameras.iter().any(|c| c.model.as_ref() == Some(*name)));
            if running_names.eq(detectors.iter().map(|detector| &detector.name)) {
                for detector in detectors {
                    scheduler.reload_model(Some(&detector.name), detector.params);
                }
            }
            sink.reload(&running_now, scenes);
            for problem in &config.zones_file_problems {
                log::error!("SIGHUP: {}", problem.describe(&config.http.zones_file));
            }
            let not_applied = keys_needing_a_restart(&running, &config);
            if !not_applied.is_empty() {
                log::warn!("SIGHUP: not applied, these need a restart: {}", not_applied.join(", "));
            }
            log::info!(
                "SIGHUP: reloaded thresholds, class filter, publish and tracking settings, zones and lines \
                 from {}",
                path.display()
            );
            Some(params)
        }
        Err(message) => {
            log::error!("SIGHUP: keeping the running settings: {message}");
            None
        }
    }
}
