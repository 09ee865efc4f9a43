//! Frame sources: where a camera's frames come from.
//!
//! Owns: the [`FrameSource`] trait, [`SourceError`], checking and opening the configured source,
//! [`image_decode`], the one bounded decoder every source (and `detect`) decodes untrusted image
//! bytes through, and [`tap`], what a source hands a recording camera's recorder. Each
//! implementation writes straight into the frame slot it is given. Must not: preprocess, run
//! models, pace frames (a camera's fps cap is its source thread's, in `crate::infer::camera`), or
//! block forever without checking its stop flag.

#[cfg(feature = "gstreamer")]
pub mod gstreamer;
pub mod v4l2;

use crate::frame::{CaptureMode, FrameSlot, SlotAllocator};
pub use reconnect::{SourceReport, SourceState, SourceStatus};

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{source_name}: {message}")]
    Open { source_name: String, message: String },
    #[error("{source_name}: {message}")]
    Read { source_name: String, message: String },
}

/// What a call to [`FrameSource::next_frame`] produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capture {
    /// The slot holds a new frame.
    Frame,
    /// The source has no more frames (a finite image list); the camera ends normally.
    End,
    /// Nothing this time (a corrupt file skipped, a device reconnecting); call again.
    Retry,
    /// The slot holds a frame decoded from truncated data (a JPEG cut short: the missing part is
    /// grey). It is processed like any frame and counted in telemetry (`truncated`).
    TruncatedFrame,
    /// A frame over `[limits]` was skipped (the source logged it, rate-limited); counted in
    /// telemetry. Call again.
    OverLimit,
}

/// A producer of frames for one camera. Runs on its own thread.
pub trait FrameSource: Send {
    /// A short description for logs and telemetry (`images:/path`, `v4l2:/dev/video0 1280x720 MJPEG`).
    fn describe(&self) -> String;
    /// Writes the next frame into `slot` (via [`FrameSlot::prepare`]) and sets its metadata except
    /// `sequence`, which the pipeline assigns. Transient trouble is logged by the source and reported
    /// as [`Capture::Retry`]; an error ends the camera.
    fn next_frame(&mut self, slot: &mut FrameSlot) -> Result<Capture, SourceError>;
    /// How this source's frames get into the slots as of its latest frame (telemetry's
    /// `capture_mode`); the copies themselves are counted per slot ([`FrameSlot::note_copy`]).
    fn capture_mode(&self) -> CaptureMode;
    /// Every frame must reach inference: the pipeline waits for a free slot instead of dropping
    /// the oldest waiting frame (a replayed recording; a live camera must never wait).
    fn keeps_every_frame(&self) -> bool {
        false
    }
    /// The connection state of a source that can lose its device and reconnect (V4L2, GStreamer),
    /// shared with telemetry. `None` for sources that cannot (files, test patterns): the pipeline
    /// keeps their state.
    fn connection_status(&self) -> Option<SourceStatus> {
        None
    }
}

pub mod image_decode;
pub mod images;
pub mod reconnect;
pub mod synthetic;
pub mod tap;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::config::{LimitsConfig, SourceConfig};

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
/// `record`: the camera's recorder, which a GStreamer source hands its H.264/H.265 stream to.
#[cfg_attr(not(feature = "gstreamer"), allow(unused_variables, reason = "only GStreamer sources use the name"))]
pub fn open(
    camera: &str,
    config: &SourceConfig,
    limits: LimitsConfig,
    stop: Arc<AtomicBool>,
    slots: &SlotAllocator,
    record: Option<tap::RecordTap>,
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
            let options =
                gstreamer::GstreamerOptions { slots: slots.clone(), record, ..gstreamer::GstreamerOptions::default() };
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
