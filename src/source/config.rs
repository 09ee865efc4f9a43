//! A camera's `source` table: the kinds of source and each one's keys and defaults (`crate::config`
//! composes it into `[[camera]]`). Must not: open a source (`configured` does), or hold a password
//! (only the file or variable naming it).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ImageMode {
    /// Go through the files once, then the camera ends.
    Once,
    /// Start again after the last file.
    #[default]
    Loop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum V4l2Format {
    Mjpeg,
    Yuyv,
}

/// Where a camera's frames come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SourceConfig {
    /// An image file or a directory of images (sorted by name).
    Images {
        path: PathBuf,
        #[serde(default)]
        mode: ImageMode,
        /// Play the files as a recording made at this many frames per second: file n is stamped
        /// `start + n / replay_fps`, and no file is dropped when inference is behind (the source
        /// waits for a free slot). Absent: stamped when read, dropped like a live camera's frames.
        #[serde(default)]
        replay_fps: Option<f32>,
        /// Show each file for this many seconds before the next (at the camera's `fps`). Each file
        /// of a directory is a scene of its own for tracking, unless `replay_fps` makes the files a
        /// recording; absent: the next file on every frame.
        #[serde(default)]
        hold_s: Option<f32>,
    },
    /// A moving test pattern.
    Synthetic {
        #[serde(default = "default_synthetic_width")]
        width: u32,
        #[serde(default = "default_synthetic_height")]
        height: u32,
    },
    /// A V4L2 capture device (USB UVC cameras).
    V4l2 {
        device: PathBuf,
        width: u32,
        height: u32,
        #[serde(default = "default_v4l2_fps")]
        fps: u32,
        format: V4l2Format,
    },
    /// An IP camera's RTSP stream (feature `gstreamer`): the codec (H.264, H.265, MJPEG) comes
    /// from the stream, the decoder is the best this machine has. Credentials go in `user` and
    /// `password_file`/`password_env`, never in the URL.
    Rtsp {
        /// `rtsp://host[:port]/path` (or `rtsps://`), without `user:password@`.
        url: String,
        #[serde(default)]
        user: Option<String>,
        /// File whose first line is the password (preferred).
        #[serde(default)]
        password_file: Option<PathBuf>,
        /// Environment variable holding the password.
        #[serde(default)]
        password_env: Option<String>,
        #[serde(default)]
        transport: RtspTransport,
        /// Jitter buffer: how long packets may wait for late ones, in milliseconds.
        #[serde(default = "default_rtsp_latency_ms")]
        latency_ms: u32,
    },
    /// A Jetson CSI camera through `nvarguscamerasrc` (feature `gstreamer`), delivered as NV12.
    Csi {
        #[serde(default)]
        sensor_id: u32,
        #[serde(default = "default_csi_width")]
        width: u32,
        #[serde(default = "default_csi_height")]
        height: u32,
        #[serde(default = "default_v4l2_fps")]
        fps: u32,
    },
    /// A GStreamer pipeline ending in `appsink`, for anything the kinds above do not cover.
    Gstreamer { pipeline: String },
}

/// How RTP reaches us from an RTSP camera.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RtspTransport {
    /// RTP interleaved in the RTSP TCP connection: passes NAT and firewalls, no packet loss.
    #[default]
    Tcp,
    /// RTP over UDP: lower latency on a clean network; lost packets show as broken frames.
    Udp,
}

/// Longest `latency_ms` of an RTSP source: a jitter buffer beyond this delays every frame more
/// than any network needs.
pub const MAX_RTSP_LATENCY_MS: u32 = 10_000;
/// Largest V4L2 `fps` requested.
pub const MAX_V4L2_FPS: u32 = 1000;

fn default_rtsp_latency_ms() -> u32 {
    200
}
fn default_csi_width() -> u32 {
    1920
}
fn default_csi_height() -> u32 {
    1080
}

fn default_synthetic_width() -> u32 {
    640
}
fn default_synthetic_height() -> u32 {
    480
}
fn default_v4l2_fps() -> u32 {
    30
}
