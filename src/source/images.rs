//! Image files as a camera: one file, or a directory played in name order, once or in a loop.
//!
//! Owns: listing and decoding image files into slots, and their capture times: the time a file was
//! read, or with `replay_fps` the time it would have had in a recording made at that rate (file n
//! at `start + n / replay_fps`), which makes a replay's tracking independent of how fast inference
//! runs. Files are decoded through the bounded decoder: one that cannot be read or decoded, or is
//! over `[limits]`, is skipped with a rate-limited warning, never fatal, unless no file at all can
//! be used. Must not: sleep (the pipeline applies the fps cap) or cache decoded images (memory stays
//! bounded by the slots).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::image_decode::{self, Decoded, ImageDecodeError};
use super::reconnect::RateLimitedLog;
use super::{Capture, FrameSource, SourceError};
use crate::config::{ImageMode, LimitsConfig};
use crate::frame::{CaptureMode, FrameSlot};

const EXTENSIONS: [&str; 5] = ["png", "jpg", "jpeg", "bmp", "ppm"];

pub struct ImagesSource {
    root: PathBuf,
    mode: ImageMode,
    limits: LimitsConfig,
    files: Vec<PathBuf>,
    next: usize,
    /// Frames produced since the list was last (re)started; a full pass with none is an error.
    produced_this_pass: usize,
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
    /// `replay_fps`: stamp the files as a recording at that rate (validated by the config). Every
    /// file is decoded within `limits`.
    pub fn open(
        path: &Path,
        mode: ImageMode,
        replay_fps: Option<f32>,
        limits: LimitsConfig,
    ) -> Result<ImagesSource, SourceError> {
        let files = list_images(path)?;
        let replay = replay_fps
            .and_then(|fps| Duration::try_from_secs_f64(1.0 / f64::from(fps)).ok())
            .map(|interval| (SystemTime::now(), interval));
        Ok(ImagesSource {
            root: path.to_path_buf(),
            mode,
            limits,
            files,
            next: 0,
            produced_this_pass: 0,
            replay,
            produced: 0,
            skip_log: RateLimitedLog::new(Duration::from_secs(10)),
            truncated_logged: false,
        })
    }

    fn error(&self, message: String) -> SourceError {
        SourceError::Read { source_name: self.describe(), message }
    }
}

/// The image files at `path`: the file itself, or a directory's image files in name order.
pub fn list_images(path: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let open_error = |message: String| SourceError::Open { source_name: format!("images:{}", path.display()), message };
    let metadata = std::fs::metadata(path).map_err(|e| open_error(format!("cannot open: {e}")))?;
    if metadata.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let entries = std::fs::read_dir(path).map_err(|e| open_error(format!("cannot list directory: {e}")))?;
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
        return Err(open_error(format!("no image files ({}) in the directory", EXTENSIONS.join(", "))));
    }
    Ok(files)
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

    fn next_frame(&mut self, slot: &mut FrameSlot) -> Result<Capture, SourceError> {
        if self.next == self.files.len() {
            if self.produced_this_pass == 0 {
                return Err(self.error("none of the image files could be decoded".into()));
            }
            if self.mode == ImageMode::Once {
                return Ok(Capture::End);
            }
            // Re-list on every pass so files added or removed while running are picked up.
            self.files = list_images(&self.root).map_err(|e| self.error(e.to_string()))?;
            self.next = 0;
            self.produced_this_pass = 0;
        }
        let path = self.files[self.next].clone();
        self.next += 1;
        match image_decode::decode_file(&path, &self.limits, slot) {
            Ok(decoded) => {
                slot.meta_mut().captured_at = match self.replay {
                    Some((start, interval)) => start + interval * self.produced,
                    None => SystemTime::now(),
                };
                self.produced = self.produced.saturating_add(1);
                self.produced_this_pass += 1;
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
                if let Some(suppressed) = self.skip_log.admit(Instant::now()) {
                    log::warn!(
                        "{}: skipping {}: {reason} ({suppressed} more skipped since the last report)",
                        self.describe(),
                        path.display()
                    );
                }
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

    const LIMITS: LimitsConfig = LimitsConfig { max_width: 16384, max_height: 16384, max_alloc_mib: 256 };

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
        let mut source = ImagesSource::open(dir.path(), ImageMode::Once, None, LIMITS).expect("open");
        let mut slot = slot();
        assert_eq!(source.next_frame(&mut slot).expect("a"), Capture::Frame);
        assert_eq!((slot.meta().width, &slot.data()[..3]), (2, &[10u8, 20, 30][..]));
        assert_eq!(source.next_frame(&mut slot).expect("b"), Capture::Frame);
        assert_eq!(slot.meta().width, 4);
        assert_eq!(source.next_frame(&mut slot).expect("end"), Capture::End);
    }

    #[test]
    fn replay_stamps_files_at_the_recording_rate_and_keeps_every_frame() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_png(&dir.path().join("a.png"), 2, 2);
        write_png(&dir.path().join("b.png"), 2, 2);
        let mut replay = ImagesSource::open(dir.path(), ImageMode::Loop, Some(4.0), LIMITS).expect("open");
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
        assert!(!ImagesSource::open(dir.path(), ImageMode::Loop, None, LIMITS).expect("open").keeps_every_frame());
    }

    #[test]
    fn corrupt_file_is_skipped_and_loop_continues() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.jpg"), b"not a jpeg").expect("write");
        write_png(&dir.path().join("b.png"), 2, 2);
        let mut source = ImagesSource::open(dir.path(), ImageMode::Loop, None, LIMITS).expect("open");
        let mut slot = slot();
        let captures: Vec<Capture> = (0..4).map(|_| source.next_frame(&mut slot).expect("no error")).collect();
        assert_eq!(captures, [Capture::Retry, Capture::Frame, Capture::Retry, Capture::Frame]);
    }

    #[test]
    fn all_corrupt_files_is_an_error_not_a_spin() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.png"), b"garbage").expect("write");
        let mut source = ImagesSource::open(dir.path(), ImageMode::Loop, None, LIMITS).expect("open");
        let mut slot = slot();
        assert_eq!(source.next_frame(&mut slot).expect("skip"), Capture::Retry);
        assert!(matches!(source.next_frame(&mut slot), Err(SourceError::Read { .. })));
    }

    #[test]
    fn an_image_over_the_limits_is_skipped_as_over_limit() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_png(&dir.path().join("a-wide.png"), 40, 2);
        write_png(&dir.path().join("b.png"), 2, 2);
        let narrow = LimitsConfig { max_width: 16, ..LIMITS };
        let mut source = ImagesSource::open(dir.path(), ImageMode::Once, None, narrow).expect("open");
        let mut slot = slot();
        assert_eq!(source.next_frame(&mut slot).expect("skip"), Capture::OverLimit);
        assert_eq!(source.next_frame(&mut slot).expect("b"), Capture::Frame);
        assert_eq!(source.next_frame(&mut slot).expect("end"), Capture::End);
    }

    /// Issue 21: a FIFO named like an image stalled the camera for good.
    #[test]
    fn a_fifo_among_the_images_is_not_listed_and_a_folder_of_only_fifos_is_an_open_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("a.jpg");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: mkfifo reads the NUL-terminated path for the duration of the call only.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "mkfifo");
        assert!(matches!(list_images(dir.path()), Err(SourceError::Open { .. })));
        write_png(&dir.path().join("b.png"), 2, 2);
        assert_eq!(list_images(dir.path()).expect("listed"), [dir.path().join("b.png")]);
    }

    #[test]
    fn missing_or_empty_directory_is_an_open_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(matches!(ImagesSource::open(dir.path(), ImageMode::Loop, None, LIMITS), Err(SourceError::Open { .. })));
        assert!(matches!(
            ImagesSource::open(&dir.path().join("nope"), ImageMode::Loop, None, LIMITS),
            Err(SourceError::Open { .. })
        ));
    }
}
