//! The `rtsp` kind: an IP camera's RTSP stream (feature `gstreamer`): the codec (H.264, H.265,
//! MJPEG) comes from the stream, the decoder is the best this machine has. Owns its table
//! ([`RtspConfig`]), its documentation, checks (a URL without credentials) and secret (the
//! password file); the source itself is `crate::source::gstreamer`'s.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::through_gstreamer::{self, Pipelined};
use crate::source::error::SourceError;
use crate::source::frame_source::FrameSource;
#[cfg(feature = "gstreamer")]
use crate::source::gstreamer::{rtsp, PipelineSpec};
use crate::source::kind::{Opening, SourceKind, SourceProblem};
use crate::source::limits::LimitsConfig;
use crate::source::rtsp_transport::RtspTransport;

/// Its lines of the built-in default's documentation of `source`.
pub const DOCUMENTATION: &str = r#"#   { kind = "rtsp", url = "rtsp://192.168.1.20:554/stream1", user = "viewer", password_file = "/etc/jetson-detectd/cam.pw" }
#       An IP camera (needs the `gstreamer` build feature). The password file is a secret like
#       mqtt.password_file: root's and group jetson-detectd's, mode 0640. H.264, H.265 or MJPEG, as the stream
#       says; decoded by the best decoder here (nvv4l2decoder on a Jetson, else a hardware decoder
#       GStreamer ranks highest, else avdec_h264/avdec_h265/jpegdec; `probe` shows which).
#       Credentials never go in the URL (refused): `user`, and `password_file` (first line; at most
#       4 KiB) or `password_env = "VARIABLE"`. Optional: transport = "tcp" | "udp" (= "tcp"),
#       latency_ms = 200 (jitter buffer, at most 10000).
"#;

/// Longest `latency_ms`: a jitter buffer beyond this delays every frame more than any network
/// needs.
pub const MAX_RTSP_LATENCY_MS: u32 = 10_000;

/// `source = { kind = "rtsp", ... }`. Credentials go in `user` and
/// `password_file`/`password_env`, never in the URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RtspConfig {
    /// `rtsp://host[:port]/path` (or `rtsps://`), without `user:password@`.
    pub url: String,
    #[serde(default)]
    pub user: Option<String>,
    /// File whose first line is the password (preferred).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// Environment variable holding the password.
    #[serde(default)]
    pub password_env: Option<String>,
    #[serde(default)]
    pub transport: RtspTransport,
    /// Jitter buffer: how long packets may wait for late ones, in milliseconds.
    #[serde(default = "default_latency_ms")]
    pub latency_ms: u32,
}

fn default_latency_ms() -> u32 {
    200
}

impl Pipelined for RtspConfig {
    const KIND: &'static str = "rtsp";

    /// The GStreamer pipeline that receives it for camera `camera`, with its password read.
    #[cfg(feature = "gstreamer")]
    fn pipeline(&self, camera: &str) -> Result<PipelineSpec, SourceError> {
        let password =
            rtsp::read_password(self.password_file.as_deref(), self.password_env.as_deref()).map_err(|message| {
                SourceError::Open {
                    source_name: format!("{} source", Self::KIND),
                    message: format!("source.{message}"),
                }
            })?;
        Ok(PipelineSpec::Rtsp(rtsp::RtspSpec {
            camera: camera.to_owned(),
            url: self.url.clone(),
            user: self.user.clone(),
            password,
            transport: self.transport,
            latency_ms: self.latency_ms,
        }))
    }
}

impl SourceKind for RtspConfig {
    fn delivers_encoded(&self) -> bool {
        true
    }

    fn validate(&self, _limits: &LimitsConfig) -> Result<(), SourceProblem> {
        if let Some(problem) = url_problem(&self.url) {
            return Err(SourceProblem::key("url", problem));
        }
        if self.password_file.is_some() && self.password_env.is_some() {
            return Err(SourceProblem::key("password_file", "set either password_file or password_env, not both"));
        }
        if (self.password_file.is_some() || self.password_env.is_some()) && self.user.is_none() {
            return Err(SourceProblem::key("user", "a password needs a user"));
        }
        if self.user.as_deref().is_some_and(|user| user.is_empty() || user.chars().any(char::is_control)) {
            return Err(SourceProblem::key("user", "must not be empty or hold control characters"));
        }
        if self.latency_ms > MAX_RTSP_LATENCY_MS {
            return Err(SourceProblem::key("latency_ms", format!("at most {MAX_RTSP_LATENCY_MS} (milliseconds)")));
        }
        Ok(())
    }

    fn paths_mut(&mut self) -> Vec<&mut PathBuf> {
        self.password_file.iter_mut().collect()
    }

    fn secret_files(&self) -> Vec<(&'static str, &Path)> {
        self.password_file.iter().map(|path| ("password_file", path.as_path())).collect()
    }

    fn forget_secret(&mut self, key: &str) {
        if key == "password_file" {
            self.password_file = None;
        }
    }

    /// A password that cannot be read is refused.
    fn check(&self, camera: &str) -> Result<(), SourceError> {
        through_gstreamer::check(self, camera)
    }

    fn open(&self, camera: &str, opening: Opening<'_>) -> Result<Box<dyn FrameSource>, SourceError> {
        through_gstreamer::open(self, camera, opening)
    }
}

/// What is wrong with an RTSP camera URL, if anything. The message never repeats the URL: it may
/// hold a password.
fn url_problem(url: &str) -> Option<&'static str> {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    let rest = if lower.starts_with("rtsp://") {
        &url[7..]
    } else if lower.starts_with("rtsps://") {
        &url[8..]
    } else {
        return Some("must start with rtsp:// (or rtsps://)");
    };
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Some("must not hold spaces or control characters");
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Some(
            "the URL carries credentials (`user:password@`): remove them from the URL and set `user` and \
             `password_file` (or `password_env`), which never show in logs or `check-config --print`",
        );
    }
    if authority.is_empty() || authority.starts_with(':') {
        return Some("names no host (rtsp://host[:port]/path)");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 33: `camera front_door: camera front_door: …`. The error that carries a source error
    /// names the camera; the source error names the source.
    #[test]
    fn a_source_error_names_the_source_and_leaves_the_camera_to_its_carrier() {
        let source: RtspConfig = toml::from_str(
            "url = \"rtsp://cam.lan/s\"\nuser = \"viewer\"\npassword_file = \"/nonexistent/porch.pw\"\n",
        )
        .expect("an rtsp source");
        let message = source.check("front_door").expect_err("no password file").to_string();
        assert!(message.starts_with("rtsp source: "), "{message}");
        assert!(!message.contains("front_door"), "{message}");
    }
}
