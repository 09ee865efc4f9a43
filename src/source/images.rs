//! Image files as a camera: one file, or a directory played in name order, once or in a loop.
//!
//! Owns: listing and decoding image files into slots, their capture times and their scenes.
//! Capture time: the time a file was read, or with `replay_fps` the time it would have had in a
//! recording made at that rate (file n at `start + n / replay_fps`), which makes a replay's
//! tracking independent of how fast inference runs. Scenes: a directory of pictures is not a
//! video, so, unless `replay_fps` says the files are one recording, each file is a scene of its own
//! (its frames get a new [`FrameSlot::continuity`], and tracking ends every track when that
//! changes: no track is carried from a cat to a cup); `hold_s` shows each file for that long, so
//! that its objects become tracks and their events are true ones. A single file is one scene
//! however often it is shown. Files are decoded through the bounded decoder: one that cannot be read or decoded, or is
//! over `[limits]`, is skipped with a rate-limited warning, never fatal. A folder without image
//! files, or whose files could none be used in a whole pass, is a camera offline (`reconnecting`,
//! as an unplugged USB camera): it is listed again with backoff until images come back; only a
//! path that does not exist when the camera opens is an error (a config mistake). Must not: sleep
//! longer than one poll between looks at the folder (the pipeline applies the fps cap) or cache
//! decoded images (memory stays bounded by the slots).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use super::error::SourceError;
use super::frame_source::{Capture, FrameSource};
use super::image_decode::{self, Decoded, ImageDecodeError};
use super::reconnect::{Backoff, Connection, DeviceError, INITIAL_BACKOFF};
use super::status::SourceStatus;
use crate::frame::{CaptureMode, FrameSlot};
use crate::source::limits::LimitsConfig;
use crate::sys::log_limit::RateLimitedLog;

const EXTENSIONS: [&str; 5] = ["png", "jpg", "jpeg", "bmp", "ppm"];
/// Longest wait between two looks at a folder that has no usable image: files come back by hand
/// or by a sync job, and listing a folder costs little.
const MAX_LOOK_AGAIN: Duration = Duration::from_secs(5);
/// Longest single sleep while waiting, so the camera's thread checks its stop flag in between.
const POLL: Duration = Duration::from_millis(200);

/// One pass over the files: the list made at its start, the next file, the frames made so far.
struct Pass {
    files: Vec<PathBuf>,
    next: usize,
    produced: usize,
}

/// What follows the last file (`mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ImageMode {
    /// Go through the files once, then the camera ends.
    Once,
    /// Start again after the last file.
    #[default]
    Loop,
}

/// How the files are played: once or in a loop, as a recording (`replay_fps`), or each shown for
/// `hold_s` seconds (validated by the config: not both).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Playback {
    pub mode: ImageMode,
    pub replay_fps: Option<f32>,
    pub hold_s: Option<f32>,
}

pub struct ImagesSource {
    root: PathBuf,
    mode: ImageMode,
    limits: LimitsConfig,
    /// How long each file is shown before the next (`hold_s`).
    hold: Option<Duration>,
    /// The file of the latest frame, and when it was first shown in a row.
    showing: Option<(PathBuf, Instant)>,
    /// The continuity of the latest frame: a new one with every new file, unless replaying.
    continuity: u64,
    /// Up while the folder has image files; down (waiting, listed again with backoff) while it has
    /// none, or none of them could be used in a whole pass.
    connection: Connection<Pass>,
    /// Replay: the capture time of the first frame and the interval between frames.
    replay: Option<(SystemTime, Duration)>,
    /// Frames produced since the source was opened.
    produced: u32,
    /// A looping directory with a bad file would otherwise warn on every pass.
    skip_log: RateLimitedLog,
    /// A truncated JPEG was logged: later ones are only counted.
    truncated_logged: bool,
}

impl ImagesSource {
    /// `playback.replay_fps`: stamp the files as a recording at that rate; `playback.hold_s`: show
    /// each file that long. Every file is decoded within `limits`. A path that does not exist or
    /// cannot be read is an error; a folder without image files opens and waits for some.
    pub fn open(path: &Path, playback: Playback, limits: LimitsConfig) -> Result<ImagesSource, SourceError> {
        let replay = playback
            .replay_fps
            .and_then(|fps| Duration::try_from_secs_f64(1.0 / f64::from(fps)).ok())
            .map(|interval| (SystemTime::now(), interval));
        let description = format!("images:{}", path.display());
        let backoff = Backoff::new(INITIAL_BACKOFF, MAX_LOOK_AGAIN);
        let connection = Connection::opened(description, backoff, POLL, "looking again", || start_pass(path))?;
        Ok(ImagesSource {
            root: path.to_path_buf(),
            mode: playback.mode,
            limits,
            hold: playback.hold_s.and_then(|seconds| Duration::try_from_secs_f32(seconds).ok()),
            showing: None,
            continuity: 0,
            connection,
            replay,
            produced: 0,
            skip_log: RateLimitedLog::new(Duration::from_secs(10)),
            truncated_logged: false,
        })
    }

    /// `path` was decoded into a frame: a file other than the last one starts a new scene, unless
    /// the files are a recording.
    fn shown(&mut self, path: PathBuf) {
        if self.showing.as_ref().is_some_and(|(shown, _)| *shown == path) {
            return;
        }
        if self.replay.is_none() {
            self.continuity += 1;
        }
        self.showing = Some((path, Instant::now()));
    }
}

/// The file shown last, while its `hold` lasts.
fn held(showing: Option<&(PathBuf, Instant)>, hold: Option<Duration>) -> Option<PathBuf> {
    let (path, since) = showing?;
    (since.elapsed() < hold?).then(|| path.clone())
}

/// The image files at `path`: the file itself, or a directory's image files in name order. A path
/// that cannot be opened or listed is [`DeviceError::Permanent`]; a directory without image files
/// is [`DeviceError::Transient`] (files may come).
fn scan(path: &Path) -> Result<Vec<PathBuf>, DeviceError> {
    let metadata = std::fs::metadata(path).map_err(|e| DeviceError::Permanent(format!("cannot open: {e}")))?;
    if metadata.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let entries = std::fs::read_dir(path).map_err(|e| DeviceError::Permanent(format!("cannot list directory: {e}")))?;
    // Only regular files (symbolic links followed): a FIFO named `x.jpg` must not be opened.
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| EXTENSIONS.iter().any(|known| known.eq_ignore_ascii_case(e)))
        })
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(DeviceError::Transient(format!("no image files ({}) in the directory", EXTENSIONS.join(", "))));
    }
    Ok(files)
}

fn start_pass(path: &Path) -> Result<Pass, DeviceError> {
    scan(path).map(|files| Pass { files, next: 0, produced: 0 })
}

/// The image files at `path`, for commands that take them all at once (`selftest`): a directory
/// without image files is an error here.
pub fn list_images(path: &Path) -> Result<Vec<PathBuf>, SourceError> {
    scan(path)
        .map_err(|e| SourceError::Open { source_name: format!("images:{}", path.display()), message: e.to_string() })
}

/// What opening `path` as an `images` camera would refuse (`check-config`): a path that does not
/// exist or cannot be listed. A folder without image files is not refused: the camera waits.
pub fn check(path: &Path) -> Result<(), SourceError> {
    match scan(path) {
        Ok(_) | Err(DeviceError::Transient(_)) => Ok(()),
        Err(DeviceError::Permanent(message)) => {
            Err(SourceError::Open { source_name: format!("images:{}", path.display()), message })
        }
    }
}

/// What the source does after a pass ended.
enum AfterPass {
    Next(Pass),
    Wait(DeviceError),
    End,
}

/// What follows a pass over the files of `root`, played in `mode`.
fn after_pass(mode: ImageMode, root: &Path, pass: &Pass) -> AfterPass {
    if pass.produced == 0 {
        return AfterPass::Wait(DeviceError::Transient(format!(
            "none of the {} image file(s) could be used (unreadable, not an image, or over [limits])",
            pass.files.len()
        )));
    }
    if mode == ImageMode::Once {
        return AfterPass::End;
    }
    // Listed again on every pass so files added or removed while running are picked up.
    match start_pass(root) {
        Ok(pass) => AfterPass::Next(pass),
        Err(error) => AfterPass::Wait(error),
    }
}

impl FrameSource for ImagesSource {
    /// Files are decoded into the slot (colour types other than 8-bit RGB and RGBA through one
    /// counted copy).
    fn capture_mode(&self) -> CaptureMode {
        CaptureMode::Decode
    }

    fn describe(&self) -> String {
        format!("images:{}", self.root.display())
    }

    fn keeps_every_frame(&self) -> bool {
        self.replay.is_some()
    }

    fn connection_status(&self) -> Option<SourceStatus> {
        Some(self.connection.status().clone())
    }

    /// A folder that has no usable image is waited for (state `reconnecting`), never an error.
    fn next_frame(&mut self, slot: &mut FrameSlot) -> Result<Capture, SourceError> {
        let (root, mode) = (&self.root, self.mode);
        let pass = match self.connection.link_or_retry(|| start_pass(root)) {
            Ok(pass) => pass,
            Err(capture) => return Ok(capture),
        };
        let path = match held(self.showing.as_ref(), self.hold) {
            Some(path) => path,
            None => {
                if pass.next == pass.files.len() {
                    match after_pass(mode, root, pass) {
                        AfterPass::Next(next) => *pass = next,
                        AfterPass::Wait(error) => {
                            self.connection.down(&error);
                            return Ok(Capture::Retry);
                        }
                        AfterPass::End => return Ok(Capture::End),
                    }
                }
                let path = pass.files[pass.next].clone();
                pass.next += 1;
                path
            }
        };
        match image_decode::decode_file(&path, &self.limits, slot) {
            Ok(decoded) => {
                pass.produced += 1;
                self.shown(path.clone());
                slot.set_continuity(self.continuity);
                slot.meta_mut().captured_at = match self.replay {
                    Some((start, interval)) => start + interval * self.produced,
                    None => SystemTime::now(),
                };
                self.produced = self.produced.saturating_add(1);
                self.connection.frame_arrived();
                if decoded == Decoded::Whole {
                    return Ok(Capture::Frame);
                }
                if !std::mem::replace(&mut self.truncated_logged, true) {
                    log::warn!(
                        "{}: {} is truncated (a JPEG without its end): decoded with the missing part grey; \
                         further truncated files are only counted (telemetry: cameras.<name>.truncated)",
                        self.describe(),
                        path.display()
                    );
                }
                Ok(Capture::TruncatedFrame)
            }
            Err(reason) => {
                self.skip_log.skipped(&self.describe(), &path.display().to_string(), &reason.to_string());
                match reason {
                    ImageDecodeError::OverLimit(_) => Ok(Capture::OverLimit),
                    ImageDecodeError::Invalid(_) | ImageDecodeError::Slot(_) => Ok(Capture::Retry),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::HeapMemory;
    use crate::source::status::SourceState;

    const LIMITS: LimitsConfig = LimitsConfig { max_width: 16384, max_height: 16384, max_alloc_mib: 256 };

    fn play(mode: ImageMode, replay_fps: Option<f32>) -> Playback {
        Playback { mode, replay_fps, hold_s: None }
    }

    fn slot() -> FrameSlot {
        FrameSlot::new(Box::new(HeapMemory::default()))
    }

    fn write_png(path: &Path, width: u32, height: u32) {
        image::RgbImage::from_pixel(width, height, image::Rgb([10, 20, 30])).save(path).expect("write test png");
    }

    #[test]
    fn directory_plays_in_name_order_then_ends_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_png(&dir.path().join("b.png"), 4, 2);
        write_png(&dir.path().join("a.png"), 2, 2);
        std::fs::write(dir.path().join("notes.txt"), "ignored").expect("write");
        let mut source = ImagesSource::open(dir.path(), play(ImageMode::Once, None), LIMITS).expect("open");
        let mut slot = slot();
        assert_eq!(source.next_frame(&mut slot).expect("a"), Capture::Frame);
        assert_eq!((slot.meta().width, &slot.data()[..3]), (2, &[10u8, 20, 30][..]));
        assert_eq!(source.next_frame(&mut slot).expect("b"), Capture::Frame);
        assert_eq!(slot.meta().width, 4);
        assert_eq!(source.next_frame(&mut slot).expect("end"), Capture::End);
    }

    #[test]
    fn each_file_of_a_directory_is_a_scene_of_its_own_and_a_single_file_one_scene() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_png(&dir.path().join("a.png"), 2, 2);
        write_png(&dir.path().join("b.png"), 2, 2);
        let mut slot = slot();
        let mut scenes = |source: &mut ImagesSource| -> Vec<u64> {
            (0..5)
                .map(|_| {
                    assert_eq!(source.next_frame(&mut slot).expect("frame"), Capture::Frame);
                    slot.continuity()
                })
                .collect()
        };
        let mut pictures = ImagesSource::open(dir.path(), play(ImageMode::Loop, None), LIMITS).expect("open");
        assert_eq!(scenes(&mut pictures), [1, 2, 3, 4, 5], "a new scene with every file, across the loop too");
        let mut recording = ImagesSource::open(dir.path(), play(ImageMode::Loop, Some(4.0)), LIMITS).expect("open");
        assert_eq!(scenes(&mut recording), [0; 5], "a replay is one recording");
        let mut one = ImagesSource::open(&dir.path().join("a.png"), play(ImageMode::Loop, None), LIMITS).expect("open");
        assert_eq!(scenes(&mut one), [1; 5], "one picture shown again is the same scene");
    }

    #[test]
    fn hold_shows_each_file_for_its_time_as_one_scene() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_png(&dir.path().join("a.png"), 2, 2);
        write_png(&dir.path().join("b.png"), 4, 2);
        let hold = Duration::from_millis(200);
        let playback = Playback { mode: ImageMode::Once, replay_fps: None, hold_s: Some(hold.as_secs_f32()) };
        let mut source = ImagesSource::open(dir.path(), playback, LIMITS).expect("open");
        let mut slot = slot();
        // Each frame with the time from before the first call to before and after its own: the
        // source's clock for a.png starts within the first call, so a frame whose call ended within
        // `hold` of the first call's start must be a.png, and one whose call started `hold` after
        // the first call ended must not. Bounds only, so a slow machine cannot fail it.
        let first_call = Instant::now();
        let mut first_shown = None;
        let mut shown = Vec::new();
        loop {
            let before = first_call.elapsed();
            let capture = source.next_frame(&mut slot).expect("frame");
            let after = first_call.elapsed();
            match capture {
                Capture::Frame => {
                    let first = *first_shown.get_or_insert(after);
                    shown.push((slot.meta().width, slot.continuity(), before.saturating_sub(first), after));
                }
                Capture::End => break,
                other => panic!("unexpected {other:?}"),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let b_from = shown.iter().position(|(width, ..)| *width == 4).expect("b.png shown");
        assert!(b_from > 0 && shown[b_from..].iter().all(|(width, ..)| *width == 4), "a, then b: {shown:?}");
        assert!(shown[..b_from].iter().all(|(_, scene, ..)| *scene == 1), "{shown:?}");
        assert!(shown[b_from..].iter().all(|(_, scene, ..)| *scene == 2), "{shown:?}");
        for (width, _, since_first_shown, since_first_call) in &shown {
            assert!(*since_first_call >= hold || *width == 2, "a.png held for its 0.2 s: {shown:?}");
            assert!(*since_first_shown < hold || *width == 4, "a.png replaced after its 0.2 s: {shown:?}");
        }
    }

    #[test]
    fn replay_stamps_files_at_the_recording_rate_and_keeps_every_frame() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_png(&dir.path().join("a.png"), 2, 2);
        write_png(&dir.path().join("b.png"), 2, 2);
        let mut replay = ImagesSource::open(dir.path(), play(ImageMode::Loop, Some(4.0)), LIMITS).expect("open");
        assert!(replay.keeps_every_frame());
        let mut slot = slot();
        let times: Vec<SystemTime> = (0..3)
            .map(|_| {
                assert_eq!(replay.next_frame(&mut slot).expect("frame"), Capture::Frame);
                slot.meta().captured_at
            })
            .collect();
        let steps: Vec<Duration> = times.windows(2).map(|w| w[1].duration_since(w[0]).expect("increasing")).collect();
        assert_eq!(steps, [Duration::from_millis(250); 2], "250 ms apart, also across the loop");
        assert!(!ImagesSource::open(dir.path(), play(ImageMode::Loop, None), LIMITS)
            .expect("open")
            .keeps_every_frame());
    }

    #[test]
    fn corrupt_file_is_skipped_and_loop_continues() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.jpg"), b"not a jpeg").expect("write");
        write_png(&dir.path().join("b.png"), 2, 2);
        let mut source = ImagesSource::open(dir.path(), play(ImageMode::Loop, None), LIMITS).expect("open");
        let mut slot = slot();
        let captures: Vec<Capture> = (0..4).map(|_| source.next_frame(&mut slot).expect("no error")).collect();
        assert_eq!(captures, [Capture::Retry, Capture::Frame, Capture::Retry, Capture::Frame]);
    }

    /// Issue 35: a folder whose files could none be used exited the daemon (status 1).
    #[test]
    fn a_pass_without_a_usable_file_is_a_camera_offline_not_an_error_nor_a_spin() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.png"), b"garbage").expect("write");
        let mut source = ImagesSource::open(dir.path(), play(ImageMode::Loop, None), LIMITS).expect("open");
        let mut slot = slot();
        assert_eq!(source.next_frame(&mut slot).expect("skip"), Capture::Retry);
        assert_eq!(source.next_frame(&mut slot).expect("waits"), Capture::Retry);
        let state = source.connection_status().expect("a status").get();
        assert!(matches!(&state, SourceState::Reconnecting { last_error, .. } if last_error.contains("none of the 1")));
        // Until the next look is due, each call sleeps (at most one poll) instead of returning at
        // once: the folder is listed again (`connecting`) within this many calls however slowly
        // they come, where a source that did not wait would take a call per microsecond.
        let most_calls = INITIAL_BACKOFF.as_millis().div_ceil(POLL.as_millis()) + 1;
        let mut calls = 0;
        while matches!(source.connection_status().expect("a status").get(), SourceState::Reconnecting { .. }) {
            assert!(calls < most_calls, "{calls} calls before the folder was listed again: no wait between looks");
            assert_eq!(source.next_frame(&mut slot).expect("still waiting"), Capture::Retry);
            calls += 1;
        }
    }

    #[test]
    fn an_image_over_the_limits_is_skipped_as_over_limit() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_png(&dir.path().join("a-wide.png"), 40, 2);
        write_png(&dir.path().join("b.png"), 2, 2);
        let narrow = LimitsConfig { max_width: 16, ..LIMITS };
        let mut source = ImagesSource::open(dir.path(), play(ImageMode::Once, None), narrow).expect("open");
        let mut slot = slot();
        assert_eq!(source.next_frame(&mut slot).expect("skip"), Capture::OverLimit);
        assert_eq!(source.next_frame(&mut slot).expect("b"), Capture::Frame);
        assert_eq!(source.next_frame(&mut slot).expect("end"), Capture::End);
    }

    /// Issue 21: a FIFO named like an image stalled the camera for good.
    #[test]
    fn a_fifo_among_the_images_is_not_listed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("a.jpg");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: mkfifo reads the NUL-terminated path for the duration of the call only.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "mkfifo");
        assert!(matches!(list_images(dir.path()), Err(SourceError::Open { .. })), "nothing to list");
        write_png(&dir.path().join("b.png"), 2, 2);
        assert_eq!(list_images(dir.path()).expect("listed"), [dir.path().join("b.png")]);
    }

    /// Issue 35: an emptied folder exited 1, and restarting while it was empty exited 78, which
    /// systemd does not restart. An empty folder is waited for; a path that does not exist is a
    /// config mistake.
    #[test]
    fn an_empty_folder_is_waited_for_and_a_missing_path_is_an_open_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut source =
            ImagesSource::open(dir.path(), play(ImageMode::Loop, None), LIMITS).expect("an empty folder opens");
        let mut slot = slot();
        assert_eq!(source.next_frame(&mut slot).expect("waits"), Capture::Retry);
        assert!(source.connection_status().expect("a status").get().is_offline());
        check(dir.path()).expect("check-config accepts an empty folder");
        write_png(&dir.path().join("a.png"), 2, 2);
        let frame = (0..50).find_map(|_| {
            std::thread::sleep(INITIAL_BACKOFF / 10);
            (source.next_frame(&mut slot).expect("no error") == Capture::Frame).then_some(())
        });
        assert!(frame.is_some(), "the file that came back is played");
        assert_eq!(source.connection_status().expect("a status").get(), SourceState::Streaming);
        let missing = dir.path().join("nope");
        assert!(matches!(
            ImagesSource::open(&missing, play(ImageMode::Loop, None), LIMITS),
            Err(SourceError::Open { .. })
        ));
        assert!(check(&missing).is_err());
    }
}
