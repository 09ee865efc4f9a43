//! The live picture (`latest.jpg`): each camera's frame rendered at most once, whoever asks.
//!
//! Owns: the rendered JPEG of each camera's latest kept frame (with and without zones: at most
//! two per camera, replaced when the next frame is kept), shared by every concurrent reader of
//! that frame, and the bound on rendering: at most [`RENDERS_AT_ONCE`] renders run, each on a
//! blocking thread holding its permit until it ends, whatever became of the request that started
//! it. A request that goes away before its render started renders nothing; a render that already
//! runs finishes, and its bytes serve the next readers of that frame. Must not: render on the
//! async threads, hold a lock across an await, or keep more than the latest frame's pictures.

use std::sync::{Arc, Mutex, OnceLock};

use axum::body::Bytes;
use tokio::sync::{OnceCell, Semaphore};

use crate::config::{LineConfig, ZoneConfig};
use crate::detection::Labels;
use crate::publish::live::CapturedFrame;
use crate::publish::snapshot::{render_live_jpeg, SceneOverlay};
use crate::sys::lock::lock;

/// Renders running at once, over all cameras: the live picture must never take the cores that
/// detection runs on (a 12 MP frame takes a JPEG encode of tens of milliseconds and 36 MB).
pub const RENDERS_AT_ONCE: usize = 2;
/// Quality of the live picture: legible boxes at a fraction of a raw frame's bytes.
const LIVE_JPEG_QUALITY: u8 = 75;

/// A render's outcome, shared by every reader of one frame.
pub type Rendered = Result<Bytes, String>;

/// The zones and lines drawn over a picture.
#[derive(Debug, Clone)]
pub struct Overlay {
    pub zones: Vec<ZoneConfig>,
    pub lines: Vec<LineConfig>,
}

/// One frame's picture, with or without zones: rendered once.
struct Picture {
    frame: Arc<CapturedFrame>,
    with_zones: bool,
    /// Filled by the first reader that gets a render permit; the others wait on it.
    cell: Arc<OnceCell<Rendered>>,
    /// Filled by the render itself, even when the reader that started it went away.
    done: Arc<OnceLock<Rendered>>,
}

/// The pictures of every camera, in config order.
pub struct Pictures {
    cameras: Vec<Mutex<Vec<Picture>>>,
    renders: Arc<Semaphore>,
}

impl std::fmt::Debug for Pictures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pictures").field("cameras", &self.cameras.len()).finish_non_exhaustive()
    }
}

impl Pictures {
    pub fn new(cameras: usize) -> Pictures {
        Pictures {
            cameras: (0..cameras).map(|_| Mutex::new(Vec::new())).collect(),
            renders: Arc::new(Semaphore::new(RENDERS_AT_ONCE)),
        }
    }

    /// The JPEG of camera `index`'s `frame` with boxes, track ids and, when given, the camera's
    /// zones and lines: rendered by the first reader of this frame, shared with the others.
    pub async fn jpeg(
        &self,
        index: usize,
        frame: Arc<CapturedFrame>,
        overlay: Option<Overlay>,
        labels: Arc<Labels>,
    ) -> Rendered {
        let with_zones = overlay.is_some();
        let Some(pictures) = self.cameras.get(index) else { return Err(format!("no camera {index}")) };
        let (cell, done) = {
            let mut pictures = lock(pictures);
            let current =
                pictures.iter().find(|picture| picture.with_zones == with_zones && Arc::ptr_eq(&picture.frame, &frame));
            match current {
                Some(picture) => (picture.cell.clone(), picture.done.clone()),
                None => {
                    // A newer frame: the older frame's picture goes (no reader shares it any more).
                    pictures.retain(|picture| picture.with_zones != with_zones);
                    let picture =
                        Picture { frame: frame.clone(), with_zones, cell: Arc::default(), done: Arc::default() };
                    let shared = (picture.cell.clone(), picture.done.clone());
                    pictures.push(picture);
                    shared
                }
            }
        };
        let renders = &self.renders;
        cell.get_or_init(|| async move {
            if let Some(rendered) = done.get() {
                return rendered.clone();
            }
            let Ok(permit) = renders.clone().acquire_owned().await else {
                return Err("the server is stopping".into());
            };
            if let Some(rendered) = done.get() {
                return rendered.clone();
            }
            let render = move || {
                let _permit = permit;
                let rendered = render(&frame, overlay.as_ref(), &labels);
                done.get_or_init(|| rendered).clone()
            };
            tokio::task::spawn_blocking(render).await.unwrap_or_else(|e| Err(format!("render task failed: {e}")))
        })
        .await
        .clone()
    }
}

fn render(frame: &CapturedFrame, overlay: Option<&Overlay>, labels: &Labels) -> Rendered {
    let overlay = overlay.map(|overlay| SceneOverlay { zones: &overlay.zones, lines: &overlay.lines });
    let mut rgb = Vec::new();
    render_live_jpeg(
        &frame.data,
        &frame.meta,
        &frame.detections,
        &frame.track_ids,
        &frame.attributes,
        labels,
        overlay,
        LIVE_JPEG_QUALITY,
        &mut rgb,
    )
    .map(Bytes::from)
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{FrameMeta, PixelFormat};

    fn frame(width: u32, height: u32) -> Arc<CapturedFrame> {
        let meta = FrameMeta {
            width,
            height,
            format: PixelFormat::Rgb8,
            sequence: 0,
            captured_at: std::time::SystemTime::now(),
        };
        Arc::new(CapturedFrame {
            data: vec![128; (width * height * 3) as usize],
            meta,
            detections: Vec::new(),
            track_ids: Vec::new(),
            attributes: Vec::new(),
        })
    }

    fn setup() -> (Option<Overlay>, Arc<Labels>) {
        let zone: ZoneConfig =
            toml::from_str("name = \"lane\"\npolygon = [[0.0, 0.5], [1.0, 0.5], [1.0, 1.0]]\n").expect("a zone");
        let labels = Arc::new(Labels::parse("person\n", std::path::Path::new("labels.txt")).unwrap());
        (Some(Overlay { zones: vec![zone], lines: Vec::new() }), labels)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_readers_of_one_frame_share_one_render() {
        let (scene, labels) = setup();
        let pictures = Arc::new(Pictures::new(1));
        let frame = frame(64, 48);
        let readers: Vec<_> = (0..16)
            .map(|_| {
                let (pictures, frame, scene, labels) = (pictures.clone(), frame.clone(), scene.clone(), labels.clone());
                tokio::spawn(async move { pictures.jpeg(0, frame, scene, labels).await })
            })
            .collect();
        let mut jpegs = Vec::new();
        for reader in readers {
            jpegs.push(reader.await.unwrap().unwrap());
        }
        assert!(jpegs.iter().all(|jpeg| jpeg.as_ptr() == jpegs[0].as_ptr()), "one render's bytes, shared");
        assert!(jpegs[0].starts_with(&[0xff, 0xd8]), "a JPEG");
        let without_zones = pictures.jpeg(0, frame.clone(), None, labels.clone()).await.unwrap();
        assert_ne!(without_zones.as_ptr(), jpegs[0].as_ptr(), "without zones is another picture");
        let next = pictures.jpeg(0, self::frame(64, 48), scene, labels).await.unwrap();
        assert_ne!(next.as_ptr(), jpegs[0].as_ptr(), "a new frame is rendered anew");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reader_that_leaves_before_its_render_starts_renders_nothing() {
        let (scene, labels) = setup();
        let pictures = Pictures::new(1);
        let held: Vec<_> =
            (0..RENDERS_AT_ONCE).map(|_| pictures.renders.clone().try_acquire_owned().unwrap()).collect();
        let waiting = pictures.jpeg(0, frame(64, 48), scene, labels);
        assert!(tokio::time::timeout(std::time::Duration::from_millis(50), waiting).await.is_err(), "no permit");
        drop(held);
        assert_eq!(pictures.renders.available_permits(), RENDERS_AT_ONCE, "the leaver took no permit");
        let done = lock(&pictures.cameras[0]).iter().all(|picture| picture.done.get().is_none());
        assert!(done, "nothing was rendered");
    }
}
