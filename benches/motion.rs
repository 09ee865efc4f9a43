//! Motion benchmark: what judging one 1920×1080 frame for motion costs on the CPU, beside what
//! preprocessing it for the detector costs, for the formats cameras deliver (YUYV from V4L2, NV12
//! from RTSP decoders, RGB from image files and GStreamer pipelines).
//!
//! Per format: the luma downscale alone (`LumaDownscaler` with the SIMD kernels where the CPU has
//! them, `portable` without, and the literal `reference`), the whole motion step (downscale +
//! detector: background, masks, regions) on frames that alternate between a still scene and one
//! with a moving square, and, for scale, the fast preprocessing of the same frame into the bundled
//! SSD's 300×300 u8 input and into a 640×640 f16 letterbox, on one thread. Then the motion step
//! on 1, 2 and 4 threads at once, each thread a camera of its own (the way cameras run it, on
//! their source threads): the median per frame on each thread, and the frames per second they
//! judge together. Prints JSON with median and min ms per case. `cargo bench --bench motion`;
//! `MOTION_SAMPLES` sets the runs per case (default 50). Needs nothing but the binary at run time.

use std::collections::BTreeMap;
use std::time::{Instant, SystemTime};

use jetson_detectd::config::{ColorOrder, ResizeFilter, ResizeKind, TensorDtype, TensorLayout};
use jetson_detectd::frame::{FrameMeta, PixelFormat};
use jetson_detectd::motion::{downscale_reference, LumaDownscaler, LumaImage, MotionDetector, MotionParams};
use jetson_detectd::preprocess::{FastPreprocessor, PreprocessSpec};

const WIDTH: u32 = 1920;
const HEIGHT: u32 = 1080;

fn samples() -> usize {
    std::env::var("MOTION_SAMPLES").ok().and_then(|s| s.parse().ok()).unwrap_or(50).max(1)
}

fn round(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn summary(mut ms: Vec<f64>) -> serde_json::Value {
    ms.sort_by(f64::total_cmp);
    serde_json::json!({ "median_ms": round(ms[ms.len() / 2]), "min_ms": round(ms[0]) })
}

/// Times `run(i)` for i in 0..samples, after one warm-up run.
fn time(mut run: impl FnMut(usize)) -> Vec<f64> {
    run(0);
    (1..=samples())
        .map(|i| {
            let started = Instant::now();
            run(i);
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect()
}

/// A textured scene (so that nothing compresses to one value) as `format`, with a bright square at
/// `square_x` when given.
fn frame(format: PixelFormat, square_x: Option<u32>) -> Vec<u8> {
    let (w, h) = (WIDTH as usize, HEIGHT as usize);
    let luma = |x: usize, y: usize| -> u8 {
        if square_x.is_some_and(|sx| (sx as usize..sx as usize + 120).contains(&x) && (400..640).contains(&y)) {
            240
        } else {
            (60 + (x * 7 + y * 13) % 90) as u8
        }
    };
    let mut out = Vec::with_capacity(format.frame_bytes(WIDTH, HEIGHT).expect("size"));
    match format {
        PixelFormat::Yuyv => {
            for y in 0..h {
                for x in 0..w {
                    out.extend([luma(x, y), 128]);
                }
            }
        }
        PixelFormat::Nv12 => {
            for y in 0..h {
                out.extend((0..w).map(|x| luma(x, y)));
            }
            out.resize(w * h * 3 / 2, 128);
        }
        _ => {
            for y in 0..h {
                for x in 0..w {
                    let v = luma(x, y);
                    out.extend([v, v / 2, 255 - v]);
                }
            }
        }
    }
    out
}

fn meta(format: PixelFormat) -> FrameMeta {
    FrameMeta { width: WIDTH, height: HEIGHT, format, sequence: 0, captured_at: SystemTime::UNIX_EPOCH }
}

fn spec(width: u32, height: u32, layout: TensorLayout, dtype: TensorDtype, resize: ResizeKind) -> PreprocessSpec {
    PreprocessSpec {
        width,
        height,
        layout,
        dtype,
        color: ColorOrder::Rgb,
        resize,
        filter: ResizeFilter::Antialias,
        pad: 114,
        mean: [0.0; 3],
        std: [255.0; 3],
        name: None,
    }
}

/// The motion step of one camera: downscale, then judge, on frames alternating between a still
/// scene and a moving square, 5 frames a second.
fn motion_step(frames: &[Vec<u8>], meta: &FrameMeta) -> impl FnMut(usize) {
    let mut downscaler = LumaDownscaler::new();
    let mut luma = LumaImage::default();
    let mut detector = MotionDetector::new(MotionParams::default(), Vec::new());
    let meta = meta.clone();
    let frames = frames.to_vec();
    move |i| {
        downscaler.run(&frames[i % frames.len()], &meta, &mut luma).expect("luma");
        detector.observe(&luma, i as f64 * 0.2);
    }
}

fn main() {
    let mut report = BTreeMap::new();
    report.insert("kernels".to_string(), serde_json::json!(LumaDownscaler::new().kernels()));
    for (name, format) in [("yuyv", PixelFormat::Yuyv), ("nv12", PixelFormat::Nv12), ("rgb", PixelFormat::Rgb8)] {
        let m = meta(format);
        let frames = vec![frame(format, None), frame(format, Some(600)), frame(format, None), frame(format, Some(640))];
        let mut case = BTreeMap::new();
        let mut luma = LumaImage::default();
        let mut expected = LumaImage::default();
        downscale_reference(&frames[1], &m, &mut expected).expect("reference");
        for (kernels, mut downscaler) in
            [("luma_fast", LumaDownscaler::new()), ("luma_portable", LumaDownscaler::portable())]
        {
            case.insert(kernels, summary(time(|_| downscaler.run(&frames[1], &m, &mut luma).expect("luma"))));
            assert!(luma == expected, "{name}/{kernels} differs from the reference");
        }
        case.insert("luma_reference", summary(time(|_| downscale_reference(&frames[1], &m, &mut luma).expect("luma"))));
        case.insert("motion_step", summary(time(motion_step(&frames, &m))));
        for (label, spec) in [
            ("preprocess_ssd_300_u8", spec(300, 300, TensorLayout::Nhwc, TensorDtype::U8, ResizeKind::Stretch)),
            ("preprocess_640_f16", spec(640, 640, TensorLayout::Nchw, TensorDtype::F16, ResizeKind::Letterbox)),
        ] {
            let mut fast = FastPreprocessor::new();
            let mut out = vec![0u8; spec.bytes()];
            case.insert(label, summary(time(|_| fast.run(&frames[1], &m, &spec, &mut out, 1).expect("preprocess"))));
        }
        if format == PixelFormat::Yuyv {
            for threads in [1usize, 2, 4] {
                let per_thread: Vec<Vec<f64>> = std::thread::scope(|scope| {
                    let handles: Vec<_> =
                        (0..threads).map(|_| scope.spawn(|| time(motion_step(&frames, &m)))).collect();
                    handles.into_iter().map(|h| h.join().expect("thread")).collect()
                });
                let medians: Vec<f64> = per_thread
                    .iter()
                    .map(|ms| {
                        let mut ms = ms.clone();
                        ms.sort_by(f64::total_cmp);
                        ms[ms.len() / 2]
                    })
                    .collect();
                let worst = medians.iter().copied().fold(0.0, f64::max);
                case.insert(
                    match threads {
                        1 => "motion_step_1_camera_thread",
                        2 => "motion_step_2_camera_threads",
                        _ => "motion_step_4_camera_threads",
                    },
                    serde_json::json!({
                        "median_ms_per_thread": medians.iter().map(|v| round(*v)).collect::<Vec<_>>(),
                        "frames_per_s_together": round(threads as f64 * 1e3 / worst),
                    }),
                );
            }
        }
        report.insert(name.to_string(), serde_json::json!(case));
    }
    println!("{}", serde_json::to_string_pretty(&report).expect("json"));
}
