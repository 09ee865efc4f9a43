//! CPU preprocessing benchmark: 1920×1080 YUYV → 640×640 NCHW f16 letterbox (the GPU benchmark's
//! case), each resize filter, on 1, 2 and all available threads; and the bundled SSD model's
//! 300×300 NHWC u8 input from a 768×576 RGB frame (what `bench` runs) and from 1080p NV12 (an RTSP
//! camera), on one thread. Each case times the exact reference (`CpuPreprocessor`, one thread)
//! against the CPU backend's fast path (`FastPreprocessor`: `fast` with the SIMD kernels where the
//! CPU has them, `fast_portable` without). Prints JSON: the SIMD kernel set `fast` runs
//! (`fast_kernels`: avx2, neon or portable), and median and min ms per case.
//! `cargo bench --bench cpu_preprocess`; `CPU_PREPROCESS_SAMPLES` sets the runs per case (default
//! 30; 1 or 2 for a profile under callgrind); `CPU_PREPROCESS_CASES` times only the cases whose
//! name (`antialias/fast_2_threads`, `ssd_nv12_1920x1080/fast_1_threads`, ...) contains one of its
//! comma-separated parts, for a profile of one case under perf. Needs nothing but the binary at run
//! time.

use std::collections::BTreeMap;
use std::time::{Instant, SystemTime};

use jetson_detectd::config::{ColorOrder, ResizeFilter, ResizeKind, TensorDtype, TensorLayout};
use jetson_detectd::frame::{FrameMeta, PixelFormat};
use jetson_detectd::preprocess::{CpuPreprocessor, FastPreprocessor, PreprocessSpec};

fn summary(mut ms: Vec<f64>) -> serde_json::Value {
    ms.sort_by(f64::total_cmp);
    let round = |v: f64| (v * 1000.0).round() / 1000.0;
    serde_json::json!({ "median_ms": round(ms[ms.len() / 2]), "min_ms": round(ms[0]) })
}

fn time(mut run: impl FnMut()) -> serde_json::Value {
    let samples = std::env::var("CPU_PREPROCESS_SAMPLES").ok().and_then(|s| s.parse().ok()).unwrap_or(30).max(1);
    run();
    summary(
        (0..samples)
            .map(|_| {
                let started = Instant::now();
                run();
                started.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    )
}

/// Whether `CPU_PREPROCESS_CASES` selects the case (every case when unset).
fn wanted(case: &str) -> bool {
    std::env::var("CPU_PREPROCESS_CASES").map_or(true, |parts| parts.split(',').any(|part| case.contains(part)))
}

/// Times the reference (one thread) and the fast path (SIMD kernels and portable, on each of
/// `thread_counts`) on one frame and spec, checking every fast tensor against the reference's.
fn case(
    name: &str,
    frame: &[u8],
    meta: &FrameMeta,
    spec: &PreprocessSpec,
    thread_counts: &[usize],
) -> serde_json::Value {
    let mut out = vec![0u8; spec.bytes()];
    let mut case = BTreeMap::new();
    let mut reference = CpuPreprocessor::new();
    if wanted(&format!("{name}/reference_1_thread")) {
        let reference_report = time(|| reference.run(frame, meta, spec, &mut out).expect("reference"));
        case.insert("reference_1_thread".to_string(), reference_report);
    } else {
        reference.run(frame, meta, spec, &mut out).expect("reference");
    }
    let expected = out.clone();
    for &threads in thread_counts {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
        for (kernels, mut fast) in [("fast", FastPreprocessor::new()), ("fast_portable", FastPreprocessor::portable())]
        {
            let case_name = format!("{kernels}_{threads}_threads");
            if !wanted(&format!("{name}/{case_name}")) {
                continue;
            }
            let fast_report = time(|| pool.install(|| fast.run(frame, meta, spec, &mut out, threads)).expect("fast"));
            assert!(out == expected, "{name}/{case_name} differs from the reference");
            case.insert(case_name, fast_report);
        }
    }
    serde_json::json!(case)
}

/// A gradient with noise: every tap sees different values, as in a camera frame.
fn camera_like(len: usize, row_bytes: usize) -> Vec<u8> {
    (0..len).map(|i| ((i % row_bytes) * 256 / row_bytes + ((i * 2_654_435_761usize) >> 27) % 16) as u8).collect()
}

fn main() {
    let available = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut thread_counts = vec![1, 2, available];
    thread_counts.dedup();
    let mut report = BTreeMap::new();
    report.insert("fast_kernels".to_string(), serde_json::json!(FastPreprocessor::new().kernels()));
    let (width, height) = (1920u32, 1080u32);
    let meta = FrameMeta { width, height, format: PixelFormat::Yuyv, sequence: 0, captured_at: SystemTime::now() };
    let frame = camera_like(width as usize * height as usize * 2, 3840);
    for (name, filter) in [("antialias", ResizeFilter::Antialias), ("bilinear", ResizeFilter::Bilinear)] {
        let spec = PreprocessSpec {
            name: None,
            width: 640,
            height: 640,
            layout: TensorLayout::Nchw,
            dtype: TensorDtype::F16,
            color: ColorOrder::Rgb,
            resize: ResizeKind::Letterbox,
            filter,
            pad: 114,
            mean: [0.0; 3],
            std: [255.0; 3],
        };
        report.insert(name.to_string(), case(name, &frame, &meta, &spec, &thread_counts));
    }
    // The bundled SSD model's input (300x300 NHWC u8, stretched, antialias) from the frame `bench`
    // runs (768x576 RGB, an image camera) and from a 1080p RTSP camera's NV12.
    let ssd = PreprocessSpec {
        name: None,
        width: 300,
        height: 300,
        layout: TensorLayout::Nhwc,
        dtype: TensorDtype::U8,
        color: ColorOrder::Rgb,
        resize: ResizeKind::Stretch,
        filter: ResizeFilter::Antialias,
        pad: 0,
        mean: [0.0; 3],
        std: [1.0; 3],
    };
    for (name, width, height, format) in
        [("ssd_rgb_768x576", 768u32, 576u32, PixelFormat::Rgb8), ("ssd_nv12_1920x1080", 1920, 1080, PixelFormat::Nv12)]
    {
        let meta = FrameMeta { width, height, format, sequence: 0, captured_at: SystemTime::now() };
        let len = format.frame_bytes(width, height).expect("a valid size");
        let frame = camera_like(len, width as usize * if format == PixelFormat::Rgb8 { 3 } else { 1 });
        report.insert(name.to_string(), case(name, &frame, &meta, &ssd, &thread_counts[..1]));
    }
    println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
}
