//! Classifier benchmark on the CPU backend: what classifying the detections of one 1920×1080 frame
//! costs with 1, 4 and 16 crops (each crop cut from the frame and preprocessed in place through a
//! region of interest, run, and its best class read), on each CPU engine this machine has. Prints
//! JSON: median and min ms per frame for each crop count.
//!
//! `cargo bench --bench classifier`; `CLASSIFIER_ONNX` names the classifier (default: the test
//! colour classifier, whose cost is almost all preprocessing; a real one, e.g. a MobileNet export,
//! shows the inference); its input is recognised from the file as the daemon does.
//! `CLASSIFIER_SAMPLES` sets the frames timed per case (default 20), `CLASSIFIER_THREADS` the
//! engine's threads (default 2).

use std::path::PathBuf;
use std::time::Instant;

use jetson_detectd::backend::cpu::{CpuBackend, EngineChoice};
use jetson_detectd::backend::Backend;
use jetson_detectd::config::{ClassScores, CpuEngine};
use jetson_detectd::decode::classify::classify;
use jetson_detectd::frame::{FrameSlot, HeapMemory, PixelFormat};
use jetson_detectd::onnx::recognise::recognise_input;
use jetson_detectd::onnx::Dim;
use jetson_detectd::preprocess::Roi;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

fn main() {
    let onnx = std::env::var_os("CLASSIFIER_ONNX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/models/colour_classifier.onnx"));
    let samples = env_or("CLASSIFIER_SAMPLES", 20usize).max(1);
    let threads = env_or("CLASSIFIER_THREADS", 2usize).max(1);
    let interface = jetson_detectd::onnx::read_file(&onnx).expect("read the classifier");
    let spec = recognise_input(&interface, None).expect("a recognisable input").input;
    // The first output's classes: [N, C] or [N, C, 1, 1], its batch symbolic or fixed.
    let classes = interface.outputs.first().and_then(|output| match output.dims.as_deref() {
        Some([_, Dim::Fixed(classes), ..]) => Some(*classes),
        _ => None,
    });
    let class_count = classes.and_then(|classes| usize::try_from(classes).ok()).unwrap_or(0);

    let (width, height) = (1920u32, 1080u32);
    let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
    let frame = slot.prepare(width, height, PixelFormat::Rgb8).expect("prepare the frame");
    for (index, byte) in frame.iter_mut().enumerate() {
        *byte = (index.wrapping_mul(2_654_435_761) >> 13) as u8;
    }
    // Detections of a car-sized box (200 × 160), spread over the frame.
    let crops = |count: u32| -> Vec<Roi> {
        (0..count).map(|i| Roi { x: 40 + (i % 8) * 230, y: 60 + (i / 8) * 500, width: 200, height: 160 }).collect()
    };

    let mut engines = vec![EngineChoice::rten("benchmark")];
    if let Ok(choice) = EngineChoice::choose(CpuEngine::Onnxruntime, None) {
        engines.push(choice);
    }
    let mut report = serde_json::Map::new();
    for engine in engines {
        let backend = CpuBackend::open(&onnx, spec.clone(), None, threads, &engine).expect("load the classifier");
        let mut session = backend.new_session().expect("a session");
        let mut cases = serde_json::Map::new();
        for count in [1u32, 4, 16] {
            let rois = crops(count);
            let mut frame_once = || {
                let mut results = Vec::with_capacity(rois.len());
                for roi in &rois {
                    let (outputs, _) = session.run_regions(&slot, std::slice::from_ref(roi)).expect("classify a crop");
                    classify(outputs, 1, class_count, ClassScores::Softmax, None, &mut Vec::new(), &mut results)
                        .expect("read the classes");
                }
                results.len()
            };
            frame_once();
            let mut ms: Vec<f64> = (0..samples)
                .map(|_| {
                    let started = Instant::now();
                    std::hint::black_box(frame_once());
                    started.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            ms.sort_by(f64::total_cmp);
            let round = |v: f64| (v * 1000.0).round() / 1000.0;
            cases.insert(
                format!("crops_{count}"),
                serde_json::json!({ "median_ms": round(ms[ms.len() / 2]), "min_ms": round(ms[0]) }),
            );
        }
        report.insert(engine.engine(), serde_json::Value::Object(cases));
    }
    let out = serde_json::json!({
        "classifier": onnx.display().to_string(),
        "input": format!("{}x{} {:?} {:?}", spec.width, spec.height, spec.layout, spec.dtype),
        "classes": classes,
        "threads": threads,
        "frame": format!("{width}x{height} rgb"),
        "per_frame": report,
    });
    println!("{}", serde_json::to_string_pretty(&out).expect("json"));
}
