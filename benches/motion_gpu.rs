//! Motion on the GPU: what the luma kernel costs per 1920×1080 frame, beside the CPU downscale of
//! the same frame on this machine. Per format (YUYV, NV12, RGB): the kernel on a frame already in
//! device memory (`device`), and the whole call on a frame in a slot as cameras hand it over —
//! read in place from mapped page-locked memory (`mapped_slot`, a Jetson's way; over PCIe on a
//! discrete GPU) or copied from pinned memory first (`pinned_slot`) —, each including the copy of
//! the 160×90 cells back and the stream synchronisation; then the CPU's `LumaDownscaler` on one
//! thread. Every GPU image is checked against the CPU's. Prints JSON with median and min ms per
//! case. `cargo bench --features cuda --bench motion_gpu` on a machine with an NVIDIA GPU;
//! `MOTION_SAMPLES` sets the runs per case (default 200).

use std::collections::BTreeMap;
use std::time::{Instant, SystemTime};

use jetson_detectd::frame::{FrameMeta, FrameSlot, PixelFormat, SlotMemory};
use jetson_detectd::gpu::{self, GpuDevice, GpuLumaSampler, HostMemoryKind, HostSlotMemory};
use jetson_detectd::motion::{LumaDownscaler, LumaImage};

fn samples() -> usize {
    std::env::var("MOTION_SAMPLES").ok().and_then(|s| s.parse().ok()).unwrap_or(200).max(1)
}

fn time(mut run: impl FnMut()) -> serde_json::Value {
    run();
    let mut ms: Vec<f64> = (0..samples())
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    let round = |v: f64| (v * 1000.0).round() / 1000.0;
    serde_json::json!({ "median_ms": round(ms[ms.len() / 2]), "min_ms": round(ms[0]) })
}

fn main() {
    assert!(gpu::driver_present(), "no NVIDIA driver");
    let device = GpuDevice::open(0).expect("CUDA device 0");
    let mut sampler = GpuLumaSampler::new(&device, None).expect("luma sampler");
    let stream = device.new_stream().expect("stream");
    let mut report = BTreeMap::new();
    report.insert("device".to_string(), serde_json::json!(device.probe().name));
    for (name, format) in [("yuyv", PixelFormat::Yuyv), ("nv12", PixelFormat::Nv12), ("rgb", PixelFormat::Rgb8)] {
        let meta = FrameMeta { width: 1920, height: 1080, format, sequence: 0, captured_at: SystemTime::UNIX_EPOCH };
        let bytes = format.frame_bytes(1920, 1080).expect("size");
        let frame: Vec<u8> = (0..bytes).map(|i| ((i * 7919) >> 3) as u8).collect();
        let mut expected = LumaImage::default();
        let mut cpu = LumaDownscaler::new();
        cpu.run(&frame, &meta, &mut expected).expect("cpu luma");
        let mut luma = LumaImage::default();
        let mut case = BTreeMap::new();
        let on_device = stream.clone_htod(&frame).expect("copy the frame");
        case.insert("device", time(|| sampler.run_device(&on_device, &meta, &mut luma).expect("luma")));
        assert!(luma == expected, "{name}: device memory differs from the CPU");
        for (label, kind) in [("mapped_slot", HostMemoryKind::Mapped), ("pinned_slot", HostMemoryKind::Pinned)] {
            let memory: Box<dyn SlotMemory> = Box::new(HostSlotMemory::new(&device, bytes, kind).expect("slot memory"));
            let mut slot = FrameSlot::new(memory);
            slot.prepare(1920, 1080, format).expect("prepare").copy_from_slice(&frame);
            case.insert(label, time(|| sampler.run(&slot, &mut luma).expect("luma")));
            assert!(luma == expected, "{name}/{label} differs from the CPU");
        }
        case.insert("cpu_1_thread", time(|| cpu.run(&frame, &meta, &mut luma).expect("cpu luma")));
        report.insert(format!("{name}_1920x1080"), serde_json::json!(case));
    }
    report.insert("cpu_kernels".to_string(), serde_json::json!(LumaDownscaler::new().kernels()));
    println!("{}", serde_json::to_string_pretty(&report).expect("json"));
}
