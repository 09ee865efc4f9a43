//! The `images` kind: an image file or a directory of images (sorted by name), played once or in
//! a loop, as a recording (`replay_fps`) or each shown for a while (`hold_s`). Owns its table
//! ([`ImagesConfig`]), its documentation, checks and path; the source itself is
//! `crate::source::images`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::source::error::SourceError;
use crate::source::frame_source::FrameSource;
use crate::source::images::{self, ImageMode, ImagesSource, Playback};
use crate::source::kind::{Opening, SourceKind, SourceProblem};

/// Its lines of the built-in default's documentation of `source`.
pub const DOCUMENTATION: &str = r#"#   { kind = "images", path = "DIR or FILE", mode = "loop" | "once" }   (png, jpg, bmp, ppm; sorted by name; mode = "loop")
#       only regular files are read (a FIFO or device named like an image is passed over).
#       optional replay_fps = 10.0: play the files as a recording made at 10 frames per second —
#       file n is stamped start + n / 10 s (tracking runs on these times), and no file is dropped
#       when inference is behind. Without it, files are stamped when read and dropped like a live
#       camera's frames. Pair it with fps = 0 to replay as fast as inference goes.
#       Without replay_fps the files are unrelated pictures, not a video: each file is a scene of
#       its own, and tracking ends every track when the next file comes (an object is never
#       carried from one picture into the next). optional hold_s = 3.0: show each file for 3
#       seconds (at the camera's fps) before the next, long enough for its objects to become tracks
#       with `start` and `end` events (0..=86400; not with replay_fps).
"#;

/// Longest interval a replay rate may stand for, in seconds (a day).
const MAX_INTERVAL_S: f32 = 86_400.0;

/// `source = { kind = "images", ... }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImagesConfig {
    pub path: PathBuf,
    #[serde(default)]
    pub mode: ImageMode,
    /// Play the files as a recording made at this many frames per second: file n is stamped
    /// `start + n / replay_fps`, and no file is dropped when inference is behind (the source
    /// waits for a free slot). Absent: stamped when read, dropped like a live camera's frames.
    #[serde(default)]
    pub replay_fps: Option<f32>,
    /// Show each file for this many seconds before the next (at the camera's `fps`). Each file
    /// of a directory is a scene of its own for tracking, unless `replay_fps` makes the files a
    /// recording; absent: the next file on every frame.
    #[serde(default)]
    pub hold_s: Option<f32>,
}

impl ImagesConfig {
    /// The files at `path`, played once, as they are.
    pub fn once(path: PathBuf) -> ImagesConfig {
        ImagesConfig { path, mode: ImageMode::Once, replay_fps: None, hold_s: None }
    }
}

impl SourceKind for ImagesConfig {
    fn delivers_encoded(&self) -> bool {
        false
    }

    fn validate(&self, _limits: &crate::source::limits::LimitsConfig) -> Result<(), SourceProblem> {
        if let Some(fps) = self.replay_fps {
            if !(fps.is_finite() && fps >= 1.0 / MAX_INTERVAL_S) {
                return Err(SourceProblem::key("replay_fps", "allowed: from 1/86400 (one frame a day) up, per second"));
            }
        }
        if let Some(hold) = self.hold_s {
            if !(hold.is_finite() && (0.0..=MAX_INTERVAL_S).contains(&hold)) {
                return Err(SourceProblem::key("hold_s", "allowed: 0 to 86400 seconds (a day) per file"));
            }
            if self.replay_fps.is_some() {
                return Err(SourceProblem::key(
                    "hold_s",
                    "`replay_fps` plays the files as one recording, `hold_s` shows each as a scene of its own: \
                     set one of them",
                ));
            }
        }
        Ok(())
    }

    fn paths_mut(&mut self) -> Vec<&mut PathBuf> {
        vec![&mut self.path]
    }

    /// A path that does not exist is refused; a folder without image files is waited for.
    fn check(&self, _camera: &str) -> Result<(), SourceError> {
        images::check(&self.path)
    }

    fn open(&self, _camera: &str, opening: Opening<'_>) -> Result<Box<dyn FrameSource>, SourceError> {
        let playback = Playback { mode: self.mode, replay_fps: self.replay_fps, hold_s: self.hold_s };
        Ok(Box::new(ImagesSource::open(&self.path, playback, opening.limits)?))
    }
}
