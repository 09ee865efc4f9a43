//! [`check`]: what `check-config` refuses about recording, before anything records. Must not:
//! create the record directory or start an encoder (it only asks whether one would start).

use super::error::RecordError;
use crate::config::record::EncoderChoice;
use crate::config::Config;
use crate::detection::Labels;

/// What `check-config` refuses about recording: a recording camera whose `labels` are not in the
/// label file, a raw camera (V4L2, CSI, images, test pattern) that no encoder here can encode as
/// `[record.encoder]` asks, and any recording camera in a binary without GStreamer.
pub fn check(config: &Config, labels: &Labels) -> Result<(), RecordError> {
    if config.records() {
        super::dir::check(&config.record.dir)
            .map_err(|source| RecordError::Dir { path: config.record.dir.clone(), source })?;
    }
    for camera in &config.cameras {
        let Some(recording) = config.recording(camera) else { continue };
        let refuse =
            |key: &str, message: String| RecordError::Camera { camera: camera.name.clone(), key: key.into(), message };
        if let Some(label) = recording.labels.iter().find(|label| labels.id_of(label).is_none()) {
            return Err(refuse(
                "record.labels",
                format!("{label:?} is not in the label file {}", config.model.labels.display()),
            ));
        }
        if !camera.source.kind().delivers_encoded() {
            encoder_for(recording.encoder.kind)
                .map_err(|reason| refuse("record.encoder.kind", format!("it sends raw video: {reason}")))?;
        } else if !cfg!(feature = "gstreamer") {
            return Err(refuse(
                "record.enabled",
                "recording needs a binary built with GStreamer (`bash .ci/build` in the source tree)".into(),
            ));
        }
    }
    Ok(())
}

#[cfg(feature = "gstreamer")]
fn encoder_for(choice: EncoderChoice) -> Result<(), String> {
    super::encode::choose(choice).map(drop)
}

#[cfg(not(feature = "gstreamer"))]
fn encoder_for(choice: EncoderChoice) -> Result<(), String> {
    match choice {
        EncoderChoice::None => Err("record.encoder.kind = \"none\": raw cameras are not encoded".into()),
        _ => Err("encoding needs a binary built with GStreamer (`bash .ci/build` in the source tree)".into()),
    }
}
