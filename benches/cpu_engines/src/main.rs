//! One engine (the `tract` or `rten` feature), one ONNX model, one raw input tensor: prints the
//! model load time and per-inference times as one JSON line, and can write the outputs (f32 LE,
//! concatenated) for comparison. `--make-input IMAGE` writes the input tensor instead.

use std::time::Instant;

struct Args {
    model: String,
    input: String,
    shape: Vec<usize>,
    /// `u8` (raw pixels) or `f32` (pixels / 255).
    dtype: String,
    threads: usize,
    warmup: usize,
    iters: usize,
    out: Option<String>,
    make_input: Option<String>,
}

fn parse() -> Args {
    let mut args = Args {
        model: String::new(),
        input: String::new(),
        shape: vec![1, 300, 300, 3],
        dtype: "u8".into(),
        threads: 1,
        warmup: 3,
        iters: 20,
        out: None,
        make_input: None,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        match pair[0].as_str() {
            "--model" => args.model = value,
            "--input" => args.input = value,
            "--shape" => args.shape = value.split(',').map(|s| s.parse().expect("shape")).collect(),
            "--dtype" => args.dtype = value,
            "--threads" => args.threads = value.parse().expect("threads"),
            "--warmup" => args.warmup = value.parse().expect("warmup"),
            "--iters" => args.iters = value.parse().expect("iters"),
            "--out" => args.out = Some(value),
            "--make-input" => args.make_input = Some(value),
            other => panic!("unknown argument {other}"),
        }
    }
    args
}

/// The input tensor from an image: resized (triangle filter) to the shape's H x W, laid out as
/// NHWC for a `[1, H, W, 3]` shape and NCHW for `[1, 3, H, W]`.
fn make_input(image_path: &str, args: &Args) {
    let nchw = args.shape[1] == 3;
    let (h, w) = if nchw { (args.shape[2], args.shape[3]) } else { (args.shape[1], args.shape[2]) };
    let image = image::open(image_path).expect("image").to_rgb8();
    let image = image::imageops::resize(&image, w as u32, h as u32, image::imageops::FilterType::Triangle);
    let mut values = Vec::with_capacity(3 * h * w);
    for c in 0..3 {
        for y in 0..h {
            for x in 0..w {
                values.push(image.get_pixel(x as u32, y as u32).0[c]);
            }
        }
    }
    let pixels: Vec<u8> = if nchw { values } else { image.into_raw() };
    let bytes = if args.dtype == "u8" {
        pixels
    } else {
        pixels.iter().flat_map(|p| (*p as f32 / 255.0).to_le_bytes()).collect()
    };
    std::fs::write(args.out.as_ref().expect("--out"), bytes).expect("write input");
}

type Outputs = Vec<(Vec<usize>, Vec<f32>)>;

/// CPU time of this process (all threads) in ms, from /proc/self/stat (utime + stime, in clock
/// ticks of 10 ms): on a loaded machine it counts the work done, not the time spent waiting for a
/// core. Coarse, so it is only read around the whole timed loop.
fn process_cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks: f64 = fields.get(11..13).map_or(0.0, |f| f.iter().filter_map(|t| t.parse::<f64>().ok()).sum());
    ticks * 10.0
}

#[cfg(feature = "tract")]
fn run(args: &Args, input: &[u8]) -> (&'static str, f64, Vec<f64>, Outputs, f64) {
    use tract_onnx::prelude::*;
    let started = Instant::now();
    let dt = if args.dtype == "u8" { u8::datum_type() } else { f32::datum_type() };
    // As a loader that pins the input would: value_info and output shapes of exports with
    // dynamic axes carry symbols (`batch`) that contradict the pinned input, so they are ignored
    // and re-derived from the input.
    let model = tract_onnx::onnx()
        .with_ignore_output_shapes(true)
        .with_ignore_value_info(true)
        .model_for_path(&args.model)
        .and_then(|model| model.with_input_fact(0, InferenceFact::dt_shape(dt, &args.shape)))
        .and_then(|model| model.into_optimized())
        .unwrap_or_else(|e| {
            println!("{{\"engine\":\"tract\",\"error\":{:?}}}", format!("{e:#}"));
            std::process::exit(2)
        });
    let executor = if args.threads > 1 {
        multithread::Executor::multithread(args.threads)
    } else {
        multithread::Executor::SingleThread
    };
    let options = RunOptions { executor: Some(executor), ..Default::default() };
    let plan = model.into_runnable_with_options(&options).expect("plan");
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let elements: usize = args.shape.iter().product();
    let tensor = if args.dtype == "u8" {
        Tensor::from_shape(&args.shape, input).expect("input")
    } else {
        let floats: Vec<f32> = input.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        Tensor::from_shape(&args.shape, &floats).expect("input")
    };
    assert_eq!(tensor.len(), elements);
    let mut state = plan.spawn().expect("state");
    let mut times = Vec::new();
    let mut outputs = Vec::new();
    let mut cpu_started = 0.0;
    for i in 0..args.warmup + args.iters {
        if i == args.warmup {
            cpu_started = process_cpu_ms();
        }
        let started = Instant::now();
        let result = state.run(tvec![tensor.clone().into_tvalue()]).expect("run");
        if i >= args.warmup {
            times.push(started.elapsed().as_secs_f64() * 1e3);
        }
        if i == 0 {
            outputs = result
                .iter()
                .map(|r| {
                    let f = r.cast_to::<f32>().expect("f32");
                    (
                        r.shape().to_vec(),
                        f.try_as_plain_ram().and_then(|v| v.as_slice::<f32>().map(|s| s.to_vec())).expect("f32 values"),
                    )
                })
                .collect();
        }
    }
    let cpu_ms = (process_cpu_ms() - cpu_started) / args.iters as f64;
    ("tract", load_ms, times, outputs, cpu_ms)
}

#[cfg(feature = "rten")]
fn run(args: &Args, input: &[u8]) -> (&'static str, f64, Vec<f64>, Outputs, f64) {
    use rten::{ModelOptions, RunOptions, ThreadPool, ValueView};
    use rten_tensor::prelude::*;
    use std::sync::Arc;
    let started = Instant::now();
    // BENCH_RTEN_PREPACK=0 measures without prepacked weights.
    let prepack = std::env::var("BENCH_RTEN_PREPACK").map_or(true, |v| v != "0");
    let model = ModelOptions::with_all_ops().prepack_weights(prepack).load_file(&args.model).unwrap_or_else(|e| {
        println!("{{\"engine\":\"rten\",\"error\":{:?}}}", e.to_string());
        std::process::exit(2)
    });
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let pool = Arc::new(ThreadPool::with_num_threads(args.threads));
    let floats: Vec<f32> = input.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    let view = if args.dtype == "u8" {
        ValueView::from_shape(&args.shape, input).expect("input")
    } else {
        ValueView::from_shape(&args.shape, &floats[..]).expect("input")
    };
    let input_id = model.input_ids()[0];
    let output_ids = model.output_ids().to_vec();
    let mut times = Vec::new();
    let mut outputs = Vec::new();
    let mut cpu_started = 0.0;
    for i in 0..args.warmup + args.iters {
        if i == args.warmup {
            cpu_started = process_cpu_ms();
        }
        let options = RunOptions::default().with_thread_pool(Some(pool.clone()));
        let started = Instant::now();
        let result = model.run(vec![(input_id, view.clone().into())], &output_ids, Some(options));
        let result = result.unwrap_or_else(|e| {
            println!("{{\"engine\":\"rten\",\"error\":{:?}}}", e.to_string());
            std::process::exit(2)
        });
        if i >= args.warmup {
            times.push(started.elapsed().as_secs_f64() * 1e3);
        }
        if i == 0 {
            outputs = result
                .into_iter()
                .map(|value| {
                    let tensor = value.into_tensor::<f32>().expect("f32 output");
                    (tensor.shape().to_vec(), tensor.to_vec())
                })
                .collect();
        }
    }
    let cpu_ms = (process_cpu_ms() - cpu_started) / args.iters as f64;
    ("rten", load_ms, times, outputs, cpu_ms)
}

fn main() {
    let args = parse();
    if let Some(image) = &args.make_input {
        make_input(image, &args);
        return;
    }
    let input = std::fs::read(&args.input).expect("input file");
    let (engine, load_ms, mut times, outputs, cpu_ms) = run(&args, &input);
    if let Some(path) = &args.out {
        let bytes: Vec<u8> = outputs.iter().flat_map(|(_, data)| data.iter().flat_map(|v| v.to_le_bytes())).collect();
        std::fs::write(path, bytes).expect("write outputs");
    }
    times.sort_by(f64::total_cmp);
    let shapes: Vec<String> = outputs.iter().map(|(shape, _)| format!("{shape:?}")).collect();
    println!(
        "{{\"engine\":\"{engine}\",\"threads\":{},\"load_ms\":{load_ms:.1},\"median_ms\":{:.2},\"min_ms\":{:.2},\"max_ms\":{:.2},\"cpu_ms\":{cpu_ms:.2},\"iters\":{},\"output_shapes\":{shapes:?}}}",
        args.threads,
        times[times.len() / 2],
        times[0],
        times[times.len() - 1],
        times.len(),
    );
}
