//! The scenes `bench --motion` shows its cameras: `idle`, the bench image with sensor noise (no
//! two frames in a row alike, as a real sensor's, so that the motion gate has something to
//! judge), and `busy`, the same with a textured block crossing the picture.
//!
//! Owns: [`MotionScene`] (the `--motion` values) and [`SceneFrames`] (the noisy copies of the
//! image, made once, and painting frame n of a scene into a buffer). Must not: time anything or
//! allocate per frame (a frame is a copy of a noisy image, plus the block: the cost of a camera
//! handing over a frame).

use std::str::FromStr;

use serde::Serialize;

use super::error::BenchError;
use crate::frame::{FrameMeta, PixelFormat};

/// Noisy copies of the image the frames cycle through: frame n shows copy n mod this.
const NOISY_COPIES: usize = 4;
/// Sensor noise: each byte moves by up to this many levels either way.
const NOISE_LEVELS: u8 = 6;
/// The block of `busy`: this share of the picture's width and of its height.
const BLOCK_WIDTH: usize = 6;
const BLOCK_HEIGHT: usize = 3;
/// Frames the block takes to cross the picture, then it starts again at the left edge.
const CROSSING_FRAMES: u64 = 40;
/// Side of the squares of the block's checker pattern, in pixels: whatever lies behind it, the
/// block changes the cells it enters and leaves.
const CHECKER: usize = 8;

/// `--motion`: what the cameras show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MotionScene {
    /// Nothing moves: the image with sensor noise.
    Idle,
    /// A block crosses the noisy image, a step every frame.
    Busy,
}

impl FromStr for MotionScene {
    type Err = String;

    fn from_str(text: &str) -> Result<MotionScene, String> {
        match text {
            "idle" => Ok(MotionScene::Idle),
            "busy" => Ok(MotionScene::Busy),
            other => Err(format!("`{other}`: idle or busy")),
        }
    }
}

/// The frames of a scene, made from one decoded image.
pub struct SceneFrames {
    scene: MotionScene,
    meta: FrameMeta,
    /// Bytes per pixel of the image's packed format.
    pixel: usize,
    noisy: Vec<Vec<u8>>,
}

impl SceneFrames {
    /// The noisy copies of `image` (of `meta`'s size and packed RGB/BGR/RGBA format).
    pub fn new(scene: MotionScene, image: &[u8], meta: &FrameMeta) -> Result<SceneFrames, BenchError> {
        let pixel = match meta.format {
            PixelFormat::Rgb8 | PixelFormat::Bgr8 => 3,
            PixelFormat::Rgba8 => 4,
            other => return Err(BenchError::Setup(format!("--motion: an image in {other:?}; needs RGB, BGR or RGBA"))),
        };
        if meta.format.frame_bytes(meta.width, meta.height) != Some(image.len()) {
            return Err(BenchError::Setup("--motion: the image's size does not match its pixels".into()));
        }
        let mut random = XorShift(0x9e37_79b9_7f4a_7c15);
        let noisy = (0..NOISY_COPIES).map(|_| image.iter().map(|&value| random.jitter(value)).collect()).collect();
        Ok(SceneFrames { scene, meta: meta.clone(), pixel, noisy })
    }

    pub fn meta(&self) -> &FrameMeta {
        &self.meta
    }

    /// Frame `n` of the scene into `target` (the image's size): a noisy copy, and for `busy` the
    /// block at its place of frame `n`.
    pub fn paint(&self, n: u64, target: &mut [u8]) {
        target.copy_from_slice(&self.noisy[(n % NOISY_COPIES as u64) as usize]);
        if self.scene == MotionScene::Busy {
            self.paint_block(n, target);
        }
    }

    /// Left column, top row and size of the block in frame `n`: it moves right by an equal
    /// step every frame, vertically centred.
    fn block(&self, n: u64) -> (usize, usize, usize, usize) {
        let (width, height) = (self.meta.width as usize, self.meta.height as usize);
        let (w, h) = ((width / BLOCK_WIDTH).max(1), (height / BLOCK_HEIGHT).max(1));
        let travel = width - w;
        let left = (n % CROSSING_FRAMES) as usize * travel / (CROSSING_FRAMES as usize - 1);
        (left, (height - h) / 2, w, h)
    }

    fn paint_block(&self, n: u64, target: &mut [u8]) {
        let (left, top, w, h) = self.block(n);
        let row_bytes = self.meta.width as usize * self.pixel;
        for y in top..top + h {
            let row = &mut target[y * row_bytes..(y + 1) * row_bytes];
            for x in left..left + w {
                let value = if (x / CHECKER + y / CHECKER).is_multiple_of(2) { 20 } else { 235 };
                row[x * self.pixel..(x + 1) * self.pixel].fill(value);
            }
        }
    }
}

/// A small deterministic generator for the noise (the same scene on every run).
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// `value` moved by up to [`NOISE_LEVELS`] either way, within 0..=255.
    fn jitter(&mut self, value: u8) -> u8 {
        let span = 2 * u64::from(NOISE_LEVELS) + 1;
        let offset = (self.next() % span) as i16 - i16::from(NOISE_LEVELS);
        (i16::from(value) + offset).clamp(0, 255) as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(width: u32, height: u32) -> FrameMeta {
        FrameMeta {
            width,
            height,
            format: PixelFormat::Rgb8,
            sequence: 0,
            captured_at: std::time::SystemTime::UNIX_EPOCH,
        }
    }

    fn frame(scene: &SceneFrames, n: u64) -> Vec<u8> {
        let mut target = vec![0; scene.noisy[0].len()];
        scene.paint(n, &mut target);
        target
    }

    #[test]
    fn idle_frames_differ_by_sensor_noise_only() {
        let image = vec![128u8; 60 * 40 * 3];
        let scene = SceneFrames::new(MotionScene::Idle, &image, &meta(60, 40)).expect("scene");
        let (first, second) = (frame(&scene, 0), frame(&scene, 1));
        assert_ne!(first, second, "no two frames in a row alike");
        assert!(first.iter().chain(&second).all(|v| v.abs_diff(128) <= NOISE_LEVELS));
        let mean = first.iter().map(|&v| f64::from(v)).sum::<f64>() / first.len() as f64;
        assert!((mean - 128.0).abs() < 1.0, "noise keeps the picture's brightness: {mean}");
        assert_eq!(frame(&scene, NOISY_COPIES as u64), first, "the copies repeat");
    }

    #[test]
    fn the_busy_block_crosses_the_picture_and_starts_again() {
        let image = vec![128u8; 60 * 30 * 3];
        let scene = SceneFrames::new(MotionScene::Busy, &image, &meta(60, 30)).expect("scene");
        assert_eq!(scene.block(0), (0, 10, 10, 10));
        assert_eq!(scene.block(CROSSING_FRAMES - 1).0, 50, "at the right edge");
        assert_eq!(scene.block(CROSSING_FRAMES), scene.block(0));
        let lefts: Vec<usize> = (0..CROSSING_FRAMES).map(|n| scene.block(n).0).collect();
        assert!(lefts.windows(2).all(|pair| pair[0] < pair[1]), "a step every frame: {lefts:?}");
        let painted = frame(&scene, 0);
        let pixel = |x: usize, y: usize| painted[(y * 60 + x) * 3];
        assert_eq!((pixel(0, 16), pixel(8, 16)), (20, 235), "the checker pattern");
        assert!(pixel(30, 16).abs_diff(128) <= NOISE_LEVELS, "beside the block: the noisy image");
    }

    #[test]
    fn only_packed_colour_images_make_a_scene() {
        let nv12 = FrameMeta { format: PixelFormat::Nv12, ..meta(4, 4) };
        assert!(SceneFrames::new(MotionScene::Idle, &[0; 24], &nv12).is_err());
        assert!(SceneFrames::new(MotionScene::Idle, &[0; 5], &meta(4, 4)).is_err(), "wrong length");
        assert_eq!("busy".parse(), Ok(MotionScene::Busy));
        assert!("loud".parse::<MotionScene>().is_err());
    }
}
