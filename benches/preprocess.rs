//! Preprocessing benchmark on the first CUDA device: 1920×1080 YUYV → 640×640 NCHW f16 letterbox,
//! with each resize filter. Prints a JSON object of reports keyed by filter. `cargo bench --features cuda --bench preprocess`; the cache directory
//! for the compiled kernel is taken from `JETSON_DETECTD_CACHE_DIR` when set.

use std::process::ExitCode;

use jetson_detectd::config::ResizeFilter;
use jetson_detectd::gpu::{self, GpuDevice, PreprocessBenchRequest};

fn main() -> ExitCode {
    if !gpu::driver_present() {
        eprintln!("skipped: libcuda not found: no NVIDIA driver");
        return ExitCode::SUCCESS;
    }
    let mut request = PreprocessBenchRequest::yuyv_1080p_to_640_nchw_f16_letterbox();
    request.cache_dir = std::env::var_os("JETSON_DETECTD_CACHE_DIR").map(Into::into);
    let report = GpuDevice::open(0).and_then(|device| {
        [("antialias", ResizeFilter::Antialias), ("bilinear", ResizeFilter::Bilinear)]
            .into_iter()
            .map(|(name, filter)| {
                request.spec.filter = filter;
                gpu::bench_preprocess(&device, &request).map(|report| (name, report))
            })
            .collect::<Result<std::collections::BTreeMap<_, _>, _>>()
    });
    match report.map(|report| serde_json::to_string_pretty(&report)) {
        Ok(Ok(json)) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Ok(Err(error)) => {
            eprintln!("cannot serialise the report: {error}");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("benchmark failed: {error}");
            ExitCode::FAILURE
        }
    }
}
