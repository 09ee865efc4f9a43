//! Checking and opening the source a camera is configured with: the one place that maps a
//! `[camera.source]` kind to its implementation.
//!
//! Owns: [`check`] (what opening would refuse, without opening anything), [`open`], what each
//! kind delivers ([`delivers_encoded`]: raw frames only, or an encoded stream the recorder may
//! tap), and the GStreamer pipeline a source config describes ([`gstreamer_spec`]). Must not: read
//! frames.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::config::SourceConfig;
use super::error::SourceError;
use super::frame_source::FrameSource;
#[cfg(feature = "gstreamer")]
use super::gstreamer;
use super::limits::LimitsConfig;
use super::{images, synthetic, tap, v4l2};
use crate::frame::SlotAllocator;

/// What opening `camera`'s source `config` would refuse, checked without opening a device, a
/// socket or an image (`check-config` and the start of `run`): an `images` path that does not
/// exist (a folder without image files is waited for), a `v4l2` path that exists but is not a V4L2 device node, an RTSP password that cannot be
/// read, an RTSP, CSI or GStreamer camera in a binary without GStreamer. A camera that is only
/// absent now is not refused: it is waited for.
#[cfg_attr(not(feature = "gstreamer"), allow(unused_variables, reason = "only GStreamer sources use the name"))]
pub fn check(camera: &str, config: &SourceConfig) -> Result<(), SourceError> {
    match config {
        SourceConfig::Images { path, .. } => images::check(path),
        SourceConfig::V4l2 { device, .. } => v4l2::check_device_node(device),
        SourceConfig::Synthetic { .. } => Ok(()),
        #[cfg(feature = "gstreamer")]
        SourceConfig::Rtsp { .. } | SourceConfig::Csi { .. } | SourceConfig::Gstreamer { .. } => {
            gstreamer_spec(camera, config).map(drop)
        }
        #[cfg(not(feature = "gstreamer"))]
        SourceConfig::Rtsp { .. } | SourceConfig::Csi { .. } | SourceConfig::Gstreamer { .. } => {
            Err(no_gstreamer(config))
        }
    }
}

/// Whether a source of `config`'s kind delivers an encoded stream (RTSP, a GStreamer pipeline)
/// that the recorder taps as it is, or only raw frames (V4L2, CSI, images, the test pattern),
/// which it must encode. Every kind says so here: a new one does not build until it does.
pub fn delivers_encoded(config: &SourceConfig) -> bool {
    match config {
        SourceConfig::Rtsp { .. } | SourceConfig::Gstreamer { .. } => true,
        SourceConfig::V4l2 { .. } | SourceConfig::Csi { .. } | SourceConfig::Images { .. } => false,
        SourceConfig::Synthetic { .. } => false,
    }
}

/// The name errors about a camera's source give it. The error that carries it
/// ([`crate::infer::step::PipelineError::Source`]) names the camera already.
fn source_name(config: &SourceConfig) -> String {
    let kind = match config {
        SourceConfig::Images { .. } => "images",
        SourceConfig::Synthetic { .. } => "synthetic",
        SourceConfig::V4l2 { .. } => "v4l2",
        SourceConfig::Rtsp { .. } => "rtsp",
        SourceConfig::Csi { .. } => "csi",
        SourceConfig::Gstreamer { .. } => "gstreamer",
    };
    format!("{kind} source")
}

#[cfg(not(feature = "gstreamer"))]
fn no_gstreamer(config: &SourceConfig) -> SourceError {
    SourceError::Open {
        source_name: source_name(config),
        message: "RTSP, CSI and GStreamer sources need a binary built with GStreamer: `bash .ci/build` in the \
                  source tree builds one where GStreamer's development files are installed and names the Debian \
                  packages where they are not (or `cargo build --release --features gstreamer`); the Debian \
                  package has it"
            .into(),
    }
}

/// Opens the source camera `camera` is configured with; every frame it decodes is bounded by
/// `limits`. `stop` is the daemon's shutdown flag: sources that block (cameras, GStreamer) check
/// it so shutdown never waits on a silent device. Sources that lend the ring frames in memory of
/// their own (a GStreamer buffer pool, V4L2 user-pointer buffers) allocate it through `slots`.
/// `record`: the camera's tap (its recorder, its live feed), which a GStreamer source hands its
/// H.264/H.265 stream to.
#[cfg_attr(not(feature = "gstreamer"), allow(unused_variables, reason = "only GStreamer sources use the name"))]
pub fn open(
    camera: &str,
    config: &SourceConfig,
    limits: LimitsConfig,
    stop: Arc<AtomicBool>,
    slots: &SlotAllocator,
    record: Option<tap::StreamTap>,
) -> Result<Box<dyn FrameSource>, SourceError> {
    match config {
        SourceConfig::Images { path, mode, replay_fps, hold_s } => {
            let playback = images::Playback { mode: *mode, replay_fps: *replay_fps, hold_s: *hold_s };
            Ok(Box::new(images::ImagesSource::open(path, playback, limits)?))
        }
        SourceConfig::Synthetic { width, height } => Ok(Box::new(synthetic::SyntheticSource::new(*width, *height))),
        SourceConfig::V4l2 { device, width, height, fps, format } => {
            Ok(Box::new(v4l2::V4l2Source::open(device, *width, *height, *fps, *format, limits, stop, slots)?))
        }
        #[cfg(feature = "gstreamer")]
        SourceConfig::Rtsp { .. } | SourceConfig::Csi { .. } | SourceConfig::Gstreamer { .. } => {
            let spec = gstreamer_spec(camera, config)?;
            let options = gstreamer::GstreamerOptions {
                slots: slots.clone(),
                record,
                camera: Some(camera.to_owned()),
                ..gstreamer::GstreamerOptions::default()
            };
            Ok(Box::new(gstreamer::GstreamerSource::with_options(spec, options, limits, stop)?))
        }
        #[cfg(not(feature = "gstreamer"))]
        SourceConfig::Rtsp { .. } | SourceConfig::Csi { .. } | SourceConfig::Gstreamer { .. } => {
            drop(record);
            Err(no_gstreamer(config))
        }
    }
}

/// The GStreamer pipeline a camera's source config describes, with its password read.
#[cfg(feature = "gstreamer")]
pub fn gstreamer_spec(camera: &str, config: &SourceConfig) -> Result<gstreamer::PipelineSpec, SourceError> {
    use gstreamer::{csi::CsiSpec, rtsp, PipelineSpec};
    match config {
        SourceConfig::Rtsp { url, user, password_file, password_env, transport, latency_ms } => {
            let password =
                rtsp::read_password(password_file.as_deref(), password_env.as_deref()).map_err(|message| {
                    SourceError::Open { source_name: source_name(config), message: format!("source.{message}") }
                })?;
            Ok(PipelineSpec::Rtsp(rtsp::RtspSpec {
                camera: camera.to_owned(),
                url: url.clone(),
                user: user.clone(),
                password,
                transport: *transport,
                latency_ms: *latency_ms,
            }))
        }
        SourceConfig::Csi { sensor_id, width, height, fps } => {
            Ok(PipelineSpec::Csi(CsiSpec { sensor_id: *sensor_id, width: *width, height: *height, fps: *fps }))
        }
        SourceConfig::Gstreamer { pipeline } => Ok(PipelineSpec::Launch(pipeline.clone())),
        other => Err(SourceError::Open { source_name: source_name(other), message: "not a GStreamer source".into() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 33: `camera front_door: camera front_door: …`. The error that carries a source error
    /// names the camera; the source error names the source.
    #[test]
    fn a_source_error_names_the_source_and_leaves_the_camera_to_its_carrier() {
        let source: SourceConfig = toml::from_str(
            "kind = \"rtsp\"\nurl = \"rtsp://cam.lan/s\"\nuser = \"viewer\"\npassword_file = \"/nonexistent/porch.pw\"\n",
        )
        .expect("an rtsp source");
        let message = check("front_door", &source).expect_err("no password file").to_string();
        assert!(message.starts_with("rtsp source: "), "{message}");
        assert!(!message.contains("front_door"), "{message}");
    }
}
