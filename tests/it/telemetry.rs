//! Telemetry against a fake Jetson sysfs tree (Orin layout, JetPack 5 and 6 naming), the JSON
//! fields the book documents (docs/src/reference/telemetry.md), and a snapshot of a real sample image.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use jetson_detectd::config::SnapshotConfig;
use jetson_detectd::detection::{BoundingBox, Detection, Labels};
use jetson_detectd::frame::FrameTimings;
use jetson_detectd::frame::{FrameSlot, HeapMemory, PixelFormat};
use jetson_detectd::publish::snapshot::Snapshotter;
use jetson_detectd::service::telemetry::{telemetry_message, CameraStats, JetsonSysfs, SystemSampler, TelemetryReport};

fn write(root: &Path, relative: &str, content: &str) {
    let path = root.join(relative);
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, content).expect("write");
}

/// An Orin Nano as JetPack 5 lays it out, with the GPU clock left to the governor.
fn fake_orin(root: &Path) {
    write(root, "sys/devices/platform/gpu.0/load", "523\n");
    let devfreq = "sys/class/devfreq/17000000.ga10b";
    write(root, &format!("{devfreq}/cur_freq"), "306000000\n");
    write(root, &format!("{devfreq}/min_freq"), "306000000\n");
    write(root, &format!("{devfreq}/max_freq"), "624750000\n");
    write(root, &format!("{devfreq}/governor"), "nvhost_podgov\n");
    // Another devfreq device that is not the GPU.
    write(root, "sys/class/devfreq/15340000.vic/cur_freq", "115200000\n");
    write(root, "sys/class/thermal/thermal_zone0/type", "cpu-thermal\n");
    write(root, "sys/class/thermal/thermal_zone0/temp", "47500\n");
    // Orin's GPU zone reads -256 °C while the GPU is power-gated.
    write(root, "sys/class/thermal/thermal_zone1/type", "gpu-thermal\n");
    write(root, "sys/class/thermal/thermal_zone1/temp", "-256000\n");
    write(root, "sys/class/thermal/thermal_zone2/type", "tj-thermal\n");
    write(root, "sys/class/thermal/thermal_zone2/temp", "48312\n");
    // A zone without a readable temperature.
    write(root, "sys/class/thermal/thermal_zone3/type", "soc0-thermal\n");
    let hwmon = "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3";
    for (channel, label, mv, ma) in
        [(1, "VDD_IN", "5072", "1336"), (2, "VDD_CPU_GPU_CV", "5064", "432"), (3, "VDD_SOC", "5072", "512")]
    {
        write(root, &format!("{hwmon}/in{channel}_label"), &format!("{label}\n"));
        write(root, &format!("{hwmon}/in{channel}_input"), &format!("{mv}\n"));
        write(root, &format!("{hwmon}/curr{channel}_input"), &format!("{ma}\n"));
    }
    // The "sum of shunt voltages" channel has a label and a voltage but no current.
    write(root, &format!("{hwmon}/in7_label"), "sum of shunt voltages\n");
    write(root, &format!("{hwmon}/in7_input"), "12\n");
}

#[test]
fn orin_sysfs_tree_is_read() {
    let root = tempfile::tempdir().expect("temp dir");
    fake_orin(root.path());
    let jetson = JetsonSysfs::read(root.path());

    let gpu = jetson.gpu.as_ref().expect("GPU found");
    assert_eq!(gpu.devfreq.as_deref(), Some("17000000.ga10b"));
    assert_eq!(gpu.load_percent, Some(52.3));
    assert_eq!(
        (gpu.freq_hz, gpu.min_freq_hz, gpu.max_freq_hz),
        (Some(306_000_000), Some(306_000_000), Some(624_750_000))
    );
    assert_eq!(gpu.governor.as_deref(), Some("nvhost_podgov"));
    assert_eq!(gpu.at_max_clock, Some(false));
    let warning = jetson.clock_warning().expect("unpinned clock warns");
    assert!(warning.contains("jetson_clocks") && warning.contains("306 of 624 MHz"), "{warning}");

    assert_eq!(jetson.thermal.keys().collect::<Vec<_>>(), ["cpu-thermal", "tj-thermal"]);
    assert_eq!(jetson.thermal["tj-thermal"], 48.312);

    assert_eq!(jetson.power.keys().collect::<Vec<_>>(), ["VDD_CPU_GPU_CV", "VDD_IN", "VDD_SOC"]);
    let vdd_in = jetson.power["VDD_IN"];
    assert_eq!((vdd_in.mv, vdd_in.ma, vdd_in.mw), (5072, 1336, 6776));
}

#[test]
fn jetpack6_layout_with_pinned_clocks_does_not_warn() {
    let root = tempfile::tempdir().expect("temp dir");
    // JetPack 6 names the devfreq device 17000000.gpu and has the load under the device.
    let devfreq = "sys/class/devfreq/17000000.gpu";
    write(root.path(), &format!("{devfreq}/device/load"), "0\n");
    write(root.path(), &format!("{devfreq}/cur_freq"), "918000000\n");
    write(root.path(), &format!("{devfreq}/min_freq"), "918000000\n");
    write(root.path(), &format!("{devfreq}/max_freq"), "918000000\n");
    write(root.path(), &format!("{devfreq}/governor"), "nvhost_podgov\n");
    let jetson = JetsonSysfs::read(root.path());
    let gpu = jetson.gpu.as_ref().expect("GPU found");
    assert_eq!((gpu.load_percent, gpu.at_max_clock), (Some(0.0), Some(true)));
    assert_eq!(jetson.clock_warning(), None);
}

#[test]
fn a_machine_without_jetson_files_reads_as_empty() {
    let root = tempfile::tempdir().expect("temp dir");
    assert_eq!(JetsonSysfs::read(root.path()), JetsonSysfs::default());
    assert_eq!(JetsonSysfs::read(&root.path().join("does/not/exist")), JetsonSysfs::default());
}

#[test]
fn telemetry_message_has_every_documented_field() {
    let root = tempfile::tempdir().expect("temp dir");
    fake_orin(root.path());
    let jetson = JetsonSysfs::read(root.path());
    let stats = CameraStats::new("front");
    let start = Instant::now();
    stats.snapshot_at(start);
    let ms = Duration::from_millis;
    for _ in 0..20 {
        stats.record_frame(&FrameTimings {
            source: Some(ms(2)),
            wait: Some(ms(3)),
            pre: Some(ms(1)),
            infer: Some(ms(8)),
            post: Some(ms(1)),
            publish: Some(ms(1)),
            total: Some(ms(16)),
        });
    }
    stats.record_drop(4);
    let cameras = [stats.snapshot_at(start + Duration::from_secs(10))];
    let mut sampler = SystemSampler::new();
    let report = TelemetryReport {
        stamp: None,
        cameras: &cameras,
        load: Some(sampler.sample()),
        jetson: &jetson,
        engine: Some(serde_json::json!({"kind": "cpu", "model": "ssd.onnx"})),
        outlets: vec![(
            "mqtt".into(),
            serde_json::json!({"connected": true, "queued": 0, "dropped": 0, "published": 42, "reconnects": 1}),
        )],
        reid: None,
        ts: SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_341_600),
    };
    let json: serde_json::Value = serde_json::from_slice(&telemetry_message(&report)).expect("valid JSON");

    assert_eq!(json["schema"], 2);
    assert_eq!(json["ts"], "2026-11-22T10:00:00.000Z");
    let front = &json["cameras"]["front"];
    assert_eq!(
        (front["fps"].as_f64(), front["frames"].as_u64(), front["dropped"].as_u64()),
        (Some(2.0), Some(20), Some(4))
    );
    for stage in ["source", "wait", "pre", "infer", "post", "publish", "total"] {
        let latency = &front["latency_ms"][stage];
        assert!(latency["p50"].is_number() && latency["p99"].is_number(), "{stage}: {latency}");
    }
    assert_eq!(front["latency_ms"]["infer"]["p99"], 8.0);
    for field in ["cpu_percent", "rss_bytes"] {
        assert!(json["process"][field].is_number(), "process.{field}");
    }
    for field in ["cpu_percent", "mem_used_bytes", "mem_total_bytes"] {
        assert!(json["system"][field].is_number(), "system.{field}");
    }
    let gpu = &json["gpu"];
    assert_eq!((gpu["load_percent"].as_f64(), gpu["freq_hz"].as_u64()), (Some(52.3), Some(306_000_000)));
    for field in ["devfreq", "min_freq_hz", "max_freq_hz", "governor", "at_max_clock"] {
        assert!(!gpu[field].is_null(), "gpu.{field}");
    }
    assert_eq!(json["thermal"]["cpu-thermal"], 47.5);
    assert_eq!(json["power"]["VDD_IN"], serde_json::json!({"mv": 5072, "ma": 1336, "mw": 6776}));
    assert_eq!(json["outlets"]["mqtt"]["published"], 42);
    assert_eq!(json["engine"]["kind"], "cpu");
    assert!(json["warnings"][0].as_str().is_some_and(|w| w.contains("jetson_clocks")));
}

#[test]
fn telemetry_without_jetson_files_omits_their_sections() {
    let root = tempfile::tempdir().expect("temp dir");
    let jetson = JetsonSysfs::read(root.path());
    let report = TelemetryReport {
        stamp: None,
        cameras: &[],
        load: None,
        jetson: &jetson,
        engine: None,
        outlets: Vec::new(),
        reid: None,
        ts: SystemTime::now(),
    };
    let json: serde_json::Value = serde_json::from_slice(&telemetry_message(&report)).expect("valid JSON");
    let keys: Vec<&str> = json.as_object().expect("object").keys().map(String::as_str).collect();
    assert_eq!(keys, ["cameras", "schema", "ts", "warnings"]);
}

#[test]
fn snapshot_of_a_sample_image_decodes_with_the_source_size() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/samples/dog.jpg");
    let image = image::open(&sample).expect("sample image").to_rgb8();
    let (width, height) = image.dimensions();
    let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
    slot.prepare(width, height, PixelFormat::Rgb8).expect("prepare").copy_from_slice(image.as_raw());
    let labels = Labels::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("models/coco_labels.txt")).expect("labels");
    let dog = Detection {
        class_id: labels.id_of("dog").expect("dog label"),
        score: 0.87,
        bbox: BoundingBox { x1: 100.0, y1: 120.0, x2: 300.0, y2: 400.0 },
    };
    let mut snapshotter =
        Snapshotter::new(&SnapshotConfig { enabled: true, interval_s: 5.0, jpeg_quality: 80, events: false });
    let jpeg =
        snapshotter.maybe_render(&slot, &[dog], &labels, Instant::now()).expect("render").expect("first snapshot");
    let decoded = image::load_from_memory_with_format(&jpeg, image::ImageFormat::Jpeg).expect("JPEG decodes");
    assert_eq!((decoded.width(), decoded.height()), (width, height));
}
