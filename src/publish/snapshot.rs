//! Snapshots: a rate-limited JPEG of a camera's latest frame with its detections drawn.
//!
//! Owns: conversion of any [`PixelFormat`] to RGB for display (nearest sample, BT.601 limited
//! range as in the preprocessing contract), drawing boxes and `label score` text (8×8 bitmap font
//! from `font8x8`) — for the live view also track ids, classifier answers, zones and lines —, JPEG
//! encoding, and the
//! per-camera rate limit. Must not: publish, or run on every frame (the pipeline calls
//! [`Snapshotter::maybe_render`], which is cheap until the interval passed).

use std::time::{Duration, Instant};

use image::codecs::jpeg::JpegEncoder;
use image::ExtendedColorType;

use crate::config::{LineConfig, SnapshotConfig, ZoneConfig};
use crate::detection::{Detection, Labels};
use crate::frame::{FrameMeta, FrameSlot, PixelFormat};

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{format} frame {width}x{height} needs {expected} bytes, the slot holds {actual}")]
    FrameSize { format: &'static str, width: u32, height: u32, expected: usize, actual: usize },
    #[error("cannot encode snapshot JPEG: {0}")]
    Encode(#[from] image::ImageError),
}

/// Renders at most one snapshot per `interval` for one camera. Keeps its RGB buffer between
/// snapshots, so only the JPEG bytes are allocated per snapshot.
#[derive(Debug)]
pub struct Snapshotter {
    interval: Duration,
    quality: u8,
    last: Option<Instant>,
    rgb: Vec<u8>,
}

impl Snapshotter {
    pub fn new(config: &SnapshotConfig) -> Snapshotter {
        Snapshotter {
            interval: Duration::from_secs_f32(config.interval_s.max(0.0)),
            quality: config.jpeg_quality.clamp(1, 100),
            last: None,
            rgb: Vec::new(),
        }
    }

    /// The JPEG of `slot`'s frame with `detections` drawn, if `interval` has passed since the last
    /// one (the first call always renders). A failed render also waits for the next interval.
    pub fn maybe_render(
        &mut self,
        slot: &FrameSlot,
        detections: &[Detection],
        labels: &Labels,
        now: Instant,
    ) -> Result<Option<Vec<u8>>, SnapshotError> {
        if self.last.is_some_and(|last| now.saturating_duration_since(last) < self.interval) {
            return Ok(None);
        }
        self.last = Some(now);
        render_jpeg(slot.data(), slot.meta(), detections, labels, self.quality, &mut self.rgb).map(Some)
    }
}

/// Converts the frame to RGB in `rgb`, draws `detections`, and encodes a JPEG of the frame's size:
/// the live picture without track ids or zones ([`render_live_jpeg`]).
pub fn render_jpeg(
    data: &[u8],
    meta: &FrameMeta,
    detections: &[Detection],
    labels: &Labels,
    quality: u8,
    rgb: &mut Vec<u8>,
) -> Result<Vec<u8>, SnapshotError> {
    render_live_jpeg(data, meta, detections, &[], &[], labels, None, quality, rgb)
}

/// Zones (closed polygons) and lines in frame fractions, drawn with their names.
#[derive(Debug, Clone, Copy)]
pub struct SceneOverlay<'a> {
    pub zones: &'a [ZoneConfig],
    pub lines: &'a [LineConfig],
}

const ZONE_COLOUR: [u8; 3] = [255, 214, 0];
const LINE_COLOUR: [u8; 3] = [0, 229, 255];

/// The JPEG of a live frame: boxes captioned `#<track id> <label> <score>` (the id of confirmed
/// tracks only; `<label> <score>` for a box without an id in `track_ids`), followed by the box's
/// `attributes` text where it has one (what classifiers said of its track), and, with `overlay`,
/// every zone and line with its name.
#[allow(clippy::too_many_arguments)]
pub fn render_live_jpeg(
    data: &[u8],
    meta: &FrameMeta,
    detections: &[Detection],
    track_ids: &[Option<u64>],
    attributes: &[String],
    labels: &Labels,
    overlay: Option<SceneOverlay<'_>>,
    quality: u8,
    rgb: &mut Vec<u8>,
) -> Result<Vec<u8>, SnapshotError> {
    to_rgb(data, meta, rgb)?;
    let mut canvas = Canvas { pixels: rgb, width: meta.width as usize, height: meta.height as usize };
    // Lines and text grow with the frame so that they stay legible on 1080p and above.
    let scale = (canvas.width.min(canvas.height) / 480).max(1);
    if let Some(overlay) = overlay {
        for zone in overlay.zones {
            let points = &zone.polygon;
            for (i, point) in points.iter().enumerate() {
                canvas.draw_segment(*point, points[(i + 1) % points.len()], 2 * scale, ZONE_COLOUR);
            }
            if let Some(first) = points.first() {
                let (x, y) = (first[0] * canvas.width as f64, first[1] * canvas.height as f64);
                canvas.draw_label(x as usize, y as usize, &zone.name, scale, ZONE_COLOUR);
            }
        }
        for line in overlay.lines {
            canvas.draw_segment(line.points[0], line.points[1], 2 * scale, LINE_COLOUR);
            let (x, y) = (line.points[0][0] * canvas.width as f64, line.points[0][1] * canvas.height as f64);
            canvas.draw_label(x as usize, y as usize, &line.name, scale, LINE_COLOUR);
        }
    }
    for (i, detection) in detections.iter().enumerate() {
        let colour = PALETTE[detection.class_id % PALETTE.len()];
        canvas.draw_box(detection, 2 * scale, colour);
        let name = labels.name(detection.class_id);
        let mut caption = match track_ids.get(i).copied().flatten() {
            Some(id) => format!("#{id} {name} {:.2}", detection.score),
            None => format!("{name} {:.2}", detection.score),
        };
        if let Some(text) = attributes.get(i).filter(|text| !text.is_empty()) {
            caption.push(' ');
            caption.push_str(text);
        }
        canvas.draw_caption(detection, &caption, scale, colour);
    }
    let mut jpeg = Vec::new();
    JpegEncoder::new_with_quality(&mut jpeg, quality).encode(
        canvas.pixels,
        meta.width,
        meta.height,
        ExtendedColorType::Rgb8,
    )?;
    Ok(jpeg)
}

/// Converts a frame to packed RGB8 in `out` (resized to fit, reused between calls).
pub fn to_rgb(data: &[u8], meta: &FrameMeta, out: &mut Vec<u8>) -> Result<(), SnapshotError> {
    let (width, height) = (meta.width as usize, meta.height as usize);
    let expected = meta.format.frame_bytes(meta.width, meta.height).unwrap_or(usize::MAX);
    if data.len() < expected {
        return Err(SnapshotError::FrameSize {
            format: meta.format.name(),
            width: meta.width,
            height: meta.height,
            expected,
            actual: data.len(),
        });
    }
    out.clear();
    out.reserve(width * height * 3);
    match meta.format {
        PixelFormat::Rgb8 => out.extend_from_slice(&data[..width * height * 3]),
        PixelFormat::Bgr8 => {
            for bgr in data[..width * height * 3].chunks_exact(3) {
                out.extend_from_slice(&[bgr[2], bgr[1], bgr[0]]);
            }
        }
        PixelFormat::Rgba8 => {
            for rgba in data[..width * height * 4].chunks_exact(4) {
                out.extend_from_slice(&rgba[..3]);
            }
        }
        PixelFormat::Yuyv => {
            for pair in data[..width * height * 2].chunks_exact(4) {
                let (u, v) = (pair[1], pair[3]);
                out.extend_from_slice(&yuv_to_rgb(pair[0], u, v));
                out.extend_from_slice(&yuv_to_rgb(pair[2], u, v));
            }
        }
        PixelFormat::Nv12 => {
            let (luma, chroma) = data.split_at(width * height);
            for y in 0..height {
                let chroma_row = &chroma[(y / 2) * width..];
                for x in 0..width {
                    let uv = &chroma_row[(x / 2) * 2..];
                    out.extend_from_slice(&yuv_to_rgb(luma[y * width + x], uv[0], uv[1]));
                }
            }
        }
    }
    Ok(())
}

/// BT.601 limited range, the same formulas as the preprocessing contract (`preprocess` module doc).
fn yuv_to_rgb(y: u8, u: u8, v: u8) -> [u8; 3] {
    let c = 1.164 * (f32::from(y) - 16.0);
    let (d, e) = (f32::from(u) - 128.0, f32::from(v) - 128.0);
    let clamp = |value: f32| value.round().clamp(0.0, 255.0) as u8;
    [clamp(c + 1.596 * e), clamp(c - 0.392 * d - 0.813 * e), clamp(c + 2.017 * d)]
}

/// Distinct, saturated colours; a class keeps its colour across snapshots.
const PALETTE: [[u8; 3]; 8] = [
    [255, 56, 56],
    [56, 200, 255],
    [72, 255, 72],
    [255, 178, 29],
    [207, 56, 255],
    [255, 255, 56],
    [0, 148, 148],
    [255, 112, 200],
];

const GLYPH_SIZE: usize = 8;

struct Canvas<'a> {
    pixels: &'a mut [u8],
    width: usize,
    height: usize,
}

impl Canvas<'_> {
    fn fill(&mut self, x0: usize, y0: usize, x1: usize, y1: usize, colour: [u8; 3]) {
        let (x1, y1) = (x1.min(self.width), y1.min(self.height));
        for y in y0.min(y1)..y1 {
            for x in x0.min(x1)..x1 {
                let i = (y * self.width + x) * 3;
                self.pixels[i..i + 3].copy_from_slice(&colour);
            }
        }
    }

    /// The box's corners clamped to the frame, as pixel indices.
    fn clamp_box(&self, detection: &Detection) -> (usize, usize, usize, usize) {
        let clamp = |v: f32, max: usize| (v.max(0.0) as usize).min(max.saturating_sub(1));
        let b = &detection.bbox;
        (clamp(b.x1, self.width), clamp(b.y1, self.height), clamp(b.x2, self.width), clamp(b.y2, self.height))
    }

    fn draw_box(&mut self, detection: &Detection, thickness: usize, colour: [u8; 3]) {
        let (x1, y1, x2, y2) = self.clamp_box(detection);
        self.fill(x1, y1, x2 + 1, y1 + thickness, colour);
        self.fill(x1, (y2 + 1).saturating_sub(thickness), x2 + 1, y2 + 1, colour);
        self.fill(x1, y1, x1 + thickness, y2 + 1, colour);
        self.fill((x2 + 1).saturating_sub(thickness), y1, x2 + 1, y2 + 1, colour);
    }

    /// Caption on a filled band above the box (inside it when the box touches the top edge).
    fn draw_caption(&mut self, detection: &Detection, text: &str, scale: usize, colour: [u8; 3]) {
        let (x1, y1, _, _) = self.clamp_box(detection);
        self.draw_label(x1, y1, text, scale, colour);
    }

    /// A segment between two points in frame fractions, `thickness` pixels wide.
    fn draw_segment(&mut self, from: [f64; 2], to: [f64; 2], thickness: usize, colour: [u8; 3]) {
        let to_pixels = |p: [f64; 2]| (p[0] * self.width as f64, p[1] * self.height as f64);
        let ((x0, y0), (x1, y1)) = (to_pixels(from), to_pixels(to));
        let steps = (x1 - x0).abs().max((y1 - y0).abs()).ceil().max(1.0) as usize;
        let half = thickness / 2;
        for step in 0..=steps {
            let t = step as f64 / steps as f64;
            let (x, y) = ((x0 + (x1 - x0) * t) as usize, (y0 + (y1 - y0) * t) as usize);
            self.fill(
                x.saturating_sub(half),
                y.saturating_sub(half),
                x + thickness - half,
                y + thickness - half,
                colour,
            );
        }
    }

    /// `text` on a filled band whose bottom-left corner is at (`x1`, `y1`) (below it near the top edge).
    fn draw_label(&mut self, x1: usize, y1: usize, text: &str, scale: usize, colour: [u8; 3]) {
        let band_height = (GLYPH_SIZE + 2) * scale;
        let band_width = (text.chars().count() * GLYPH_SIZE + 2) * scale;
        let top = if y1 >= band_height { y1 - band_height } else { y1 };
        self.fill(x1, top, x1 + band_width, top + band_height, colour);
        let ink = if u32::from(colour[0]) * 299 + u32::from(colour[1]) * 587 + u32::from(colour[2]) * 114 > 128_000 {
            [0, 0, 0]
        } else {
            [255, 255, 255]
        };
        for (n, ch) in text.chars().enumerate() {
            let glyph = font8x8::legacy::BASIC_LEGACY.get(ch as usize).unwrap_or(&font8x8::legacy::BASIC_LEGACY[63]);
            let left = x1 + (1 + n * GLYPH_SIZE) * scale;
            for (row, bits) in glyph.iter().enumerate() {
                for column in 0..GLYPH_SIZE {
                    // font8x8 stores each row with its leftmost pixel in bit 0.
                    if bits & (1 << column) != 0 {
                        let (x, y) = (left + column * scale, top + (1 + row) * scale);
                        self.fill(x, y, x + scale, y + scale, ink);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::SystemTime;

    use super::*;
    use crate::detection::BoundingBox;
    use crate::frame::HeapMemory;

    fn labels() -> Labels {
        Labels::parse("person\ncar\n", Path::new("labels.txt")).expect("labels")
    }

    fn slot(width: u32, height: u32, format: PixelFormat) -> FrameSlot {
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        let bytes = slot.prepare(width, height, format).expect("prepare");
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = (i * 7 % 251) as u8;
        }
        *slot.meta_mut() = FrameMeta { width, height, format, sequence: 0, captured_at: SystemTime::UNIX_EPOCH };
        slot
    }

    fn person(x1: f32, y1: f32, x2: f32, y2: f32) -> Detection {
        Detection { class_id: 0, score: 0.91, bbox: BoundingBox { x1, y1, x2, y2 } }
    }

    #[test]
    fn every_format_renders_a_jpeg_of_the_source_size() {
        let config = SnapshotConfig { enabled: true, interval_s: 1.0, jpeg_quality: 80, events: false };
        for format in [PixelFormat::Rgb8, PixelFormat::Bgr8, PixelFormat::Rgba8, PixelFormat::Yuyv, PixelFormat::Nv12] {
            let mut snapshotter = Snapshotter::new(&config);
            // Boxes partly or wholly outside the frame must be clipped, not panic.
            let detections = [person(4.0, 30.0, 60.0, 90.0), person(-20.0, -5.0, 500.0, 9.0)];
            let jpeg = snapshotter
                .maybe_render(&slot(160, 120, format), &detections, &labels(), Instant::now())
                .expect("render")
                .expect("first call renders");
            let decoded = image::load_from_memory(&jpeg).expect("decodes");
            assert_eq!((decoded.width(), decoded.height()), (160, 120), "{format:?}");
        }
    }

    #[test]
    fn snapshots_are_rate_limited() {
        let config = SnapshotConfig { enabled: true, interval_s: 5.0, jpeg_quality: 50, events: false };
        let mut snapshotter = Snapshotter::new(&config);
        let frame = slot(32, 16, PixelFormat::Rgb8);
        let start = Instant::now();
        let mut render = |at| snapshotter.maybe_render(&frame, &[], &labels(), at).expect("render").is_some();
        assert!(render(start));
        assert!(!render(start + Duration::from_secs(4)));
        assert!(render(start + Duration::from_secs(5)));
        assert!(!render(start + Duration::from_secs(6)));
    }

    #[test]
    fn boxes_and_captions_are_drawn() {
        let frame = slot(64, 48, PixelFormat::Rgb8);
        let mut plain = Vec::new();
        to_rgb(frame.data(), frame.meta(), &mut plain).expect("rgb");
        let mut drawn = Vec::new();
        render_jpeg(frame.data(), frame.meta(), &[person(10.0, 20.0, 40.0, 40.0)], &labels(), 90, &mut drawn)
            .expect("render");
        let pixel = |buf: &[u8], x: usize, y: usize| buf[(y * 64 + x) * 3..(y * 64 + x) * 3 + 3].to_vec();
        assert_eq!(pixel(&drawn, 25, 20), PALETTE[0], "top edge of the box");
        assert_eq!(pixel(&drawn, 10, 11), PALETTE[0], "caption band above the box");
        assert_eq!(pixel(&drawn, 25, 30), pixel(&plain, 25, 30), "inside the box is untouched");
    }

    #[test]
    fn yuv_conversion_follows_bt601_limited_range() {
        assert_eq!(yuv_to_rgb(16, 128, 128), [0, 0, 0]);
        assert_eq!(yuv_to_rgb(235, 128, 128), [255, 255, 255]);
        let [r, g, b] = yuv_to_rgb(81, 90, 240);
        assert!(r > 240 && g < 10 && b < 10, "BT.601 red: {r} {g} {b}");
    }

    #[test]
    fn short_frames_are_an_error() {
        let frame = slot(8, 8, PixelFormat::Rgb8);
        let meta = FrameMeta { width: 16, ..frame.meta().clone() };
        let mut rgb = Vec::new();
        assert!(matches!(to_rgb(frame.data(), &meta, &mut rgb), Err(SnapshotError::FrameSize { .. })));
    }
}
