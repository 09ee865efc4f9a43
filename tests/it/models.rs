//! Models other than the bundled one, described by their files alone: the `detect` and
//! `check-config` commands on real exports (YOLO26, YOLO11, RT-DETR with random weights, a
//! classifier; `tests/models/NOTICE.md`) and on the bundled SSD named without its description,
//! two detectors in the daemon and in `bench --cameras --models`.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::arch::daemon_command as daemon;
use crate::daemon::{sample, toml_string, TestConfig};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A config that names `onnx` and its labels and nothing else of the model.
fn model_only(dir: &Path, onnx: &Path, labels: &Path) -> PathBuf {
    let text = format!(
        "[device]\nbackend = \"cpu\"\n[model]\nonnx = {}\nlabels = {}\n",
        toml_string(&onnx.display().to_string()),
        toml_string(&labels.display().to_string())
    );
    let path = dir.join(format!("{}.toml", onnx.file_stem().and_then(|stem| stem.to_str()).unwrap_or("model")));
    std::fs::write(&path, text).expect("write config");
    path
}

fn run(args: &[&str], config: &Path, files: &[PathBuf]) -> Output {
    let output = daemon().args(args).arg("--config").arg(config).args(files).output().expect("run jetson-detectd");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{args:?} panicked:\n{stderr}");
    output
}

fn samples() -> Vec<PathBuf> {
    ["astronaut.png", "chelsea.png", "coffee.png", "dog.jpg", "person.jpg"].map(sample).to_vec()
}

/// `detect`'s lines without their timings, which differ from run to run.
fn detections_of(output: &Output) -> Vec<serde_json::Value> {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            let mut value: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            value.as_object_mut().expect("an object").remove("latency_ms");
            value
        })
        .collect()
}

#[test]
fn the_bundled_ssd_named_with_only_its_labels_detects_exactly_as_the_described_default() {
    let dir = tempfile::tempdir().expect("temp dir");
    let described = TestConfig::new(1883, "models-test").write(&dir.path().join("described.toml"));
    let named = model_only(dir.path(), &TestConfig::bundled_model(), &TestConfig::bundled_labels());
    let expected = detections_of(&run(&["detect"], &described, &samples()));
    assert_eq!(expected.len(), 5);
    assert_eq!(detections_of(&run(&["detect"], &named, &samples())), expected);

    let check = run(&["check-config"], &named, &[]);
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    assert!(stdout.contains("recognised: model.decoder = \"ssd\""), "{stdout}");
    assert!(stdout.contains("recognised: model.input = 300x300 nhwc u8 rgb, stretch antialias"), "{stdout}");
}

#[test]
fn yolo26_yolo11_and_rt_detr_exports_run_from_their_files_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let coco80 = repo("models/coco80_labels.txt");
    for (file, decoder) in [
        ("tests/models/yolo26t_160_random.onnx", "nmsfree"),
        ("tests/models/yolo11t_160_random.onnx", "yolov8"),
        ("tests/models/rtdetr_tiny_160_random.onnx", "detr"),
    ] {
        let config = model_only(dir.path(), &repo(file), &coco80);
        let printed = run(&["check-config", "--print"], &config, &[]);
        let text = String::from_utf8_lossy(&printed.stdout);
        assert!(printed.status.success(), "{file}: {}", String::from_utf8_lossy(&printed.stderr));
        assert!(text.contains(&format!("# recognised: model.decoder = \"{decoder}\"")), "{file}: {text}");
        assert!(text.contains(&format!("decoder = \"{decoder}\"\n")), "the effective config says it: {text}");

        // Random weights: whatever they find, every box lies inside its picture.
        let output = run(&["detect", "--threshold", "0.0"], &config, &samples());
        for line in detections_of(&output) {
            let (width, height) = (line["width"].as_f64().expect("width"), line["height"].as_f64().expect("height"));
            let detections = line["detections"].as_array().expect("detections");
            assert!(detections.len() <= 100, "{file}: max_detections holds");
            for detection in detections {
                let b = &detection["box"];
                let [x1, y1, x2, y2] = ["x1", "y1", "x2", "y2"].map(|k| b[k].as_f64().expect("a coordinate"));
                assert!(
                    0.0 <= x1 && x1 < x2 && x2 <= width && 0.0 <= y1 && y1 < y2 && y2 <= height,
                    "{file}: {detection}"
                );
            }
        }
    }
}

#[test]
fn a_model_that_fits_no_decoder_is_refused_at_check_config_with_exit_78() {
    let dir = tempfile::tempdir().expect("temp dir");
    let labels = repo("tests/models/colour_labels.txt");
    let config = model_only(dir.path(), &repo("tests/models/colour_classifier.onnx"), &labels);
    let output = run(&["check-config"], &config, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("`model.decoder`") && stderr.contains("`probabilities` float32 [1, 3]"), "{stderr}");
    assert!(stderr.contains("\"ssd\", \"yolov5\", \"yolov8\", \"end2end\", \"nmsfree\", \"detr\""), "{stderr}");
    assert!(stderr.contains("classifier"), "the hint says what it looks like: {stderr}");
}

/// `check-config` accepts a classifier on a label the detector has, and refuses one on a label no
/// detector has (exit 78, naming the key and the label), and one without tracking.
#[test]
fn check_config_accepts_a_classifier_on_known_labels_only_and_with_tracking() {
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, on: &str, tracking: bool| {
        let text = format!(
            "[device]\nbackend = \"cpu\"\n[tracking]\nenabled = {tracking}\n\
             [models.colour]\nkind = \"classifier\"\non = [\"{on}\"]\nonnx = {}\nlabels = {}\n",
            toml_string(&repo("tests/models/colour_classifier.onnx").display().to_string()),
            toml_string(&repo("tests/models/colour_labels.txt").display().to_string())
        );
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write config");
        path
    };
    let accepted = run(&["check-config"], &write("dog.toml", "dog", true), &[]);
    assert!(accepted.status.success(), "{}", String::from_utf8_lossy(&accepted.stderr));
    let unknown = run(&["check-config"], &write("unicorn.toml", "unicorn", true), &[]);
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert_eq!(unknown.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("models.colour.on") && stderr.contains("`unicorn`"), "{stderr}");
    let untracked = run(&["check-config"], &write("untracked.toml", "dog", false), &[]);
    let stderr = String::from_utf8_lossy(&untracked.stderr);
    assert_eq!(untracked.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("tracking.enabled"), "{stderr}");
}

/// Two cameras, two detectors, one inference worker: the front camera runs the bundled SSD and
/// finds the dog; the yard camera runs a YOLO26 export named in `[models.yard]` (random weights:
/// whatever it reports is named from its own label file). Both publish detections.
#[test]
fn two_cameras_with_two_detectors_run_on_one_worker() {
    let prefix = "e2e-two-detectors";
    let broker = crate::broker::Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let labels = dir.path().join("yard-labels.txt");
    // Class ids 0..79 of the YOLO export, with names the SSD's list lacks after the first two.
    let names = (0..80).map(|id| match id {
        0 => "person".to_string(),
        1 => "dog".to_string(),
        id => format!("yard-thing-{id}"),
    });
    std::fs::write(&labels, names.collect::<Vec<_>>().join("\n")).expect("labels");
    let test_config = TestConfig::new(broker.port(), prefix)
        .set("device", "cpu_workers", "1")
        .camera("front", 4.0, &crate::daemon::sample_source("dog.jpg", "loop"))
        .camera("yard", 4.0, &crate::daemon::sample_source("person.jpg", "loop"))
        .append("model = \"yard\"")
        .append(&format!(
            "[models.yard]\nonnx = {}\nlabels = {}\nscore_threshold = 0.0\n",
            toml_string(&repo("tests/models/yolo26t_160_random.onnx").display().to_string()),
            toml_string(&labels.display().to_string())
        ));
    let config = test_config.write(&dir.path().join("config.toml"));
    let subscriber = crate::broker::Subscriber::connect(&broker, "e2e-two-detectors-sub", &[&format!("{prefix}/#")]);
    let mut daemon = crate::daemon::RunningDaemon::start(&config, &[("RUST_LOG", std::ffi::OsStr::new("info"))]);
    let front = format!("{prefix}/front/detections");
    let yard = format!("{prefix}/yard/detections");
    let has_label = |messages: &[crate::broker::Received], wanted: &dyn Fn(&str) -> bool| {
        messages.iter().any(|message| {
            let value: serde_json::Value = serde_json::from_slice(&message.payload).unwrap_or_default();
            value["detections"].as_array().is_some_and(|d| d.iter().any(|d| d["label"].as_str().is_some_and(wanted)))
        })
    };
    daemon.wait_for_messages(&subscriber, &front, "the SSD's dog", |messages| has_label(messages, &|l| l == "dog"));
    let yard_messages =
        daemon.wait_for_messages(&subscriber, &yard, "the YOLO26's detections", |messages| !messages.is_empty());
    let yard_labels: std::collections::BTreeSet<String> = yard_messages
        .iter()
        .flat_map(|message| {
            let value: serde_json::Value = serde_json::from_slice(&message.payload).unwrap_or_default();
            value["detections"].as_array().cloned().unwrap_or_default()
        })
        .filter_map(|detection| detection["label"].as_str().map(str::to_string))
        .collect();
    assert!(
        yard_labels.iter().all(|label| label == "person" || label == "dog" || label.starts_with("yard-thing-")),
        "the yard's detections are named from its own label file: {yard_labels:?}"
    );
    // `[model]`'s class filter names `[model]`'s labels on a reload as at start: a name only the
    // yard's label file has is refused, not turned into a filter that never matches.
    test_config.set("model", "classes", "[\"yard-thing-5\"]").write(&config);
    daemon.signal(libc::SIGHUP);
    let log = daemon.log_handle();
    daemon.wait_until("the reload naming another model's class to be refused", || {
        log.text().contains("SIGHUP: keeping the running settings")
    });
    daemon.signal(libc::SIGTERM);
    daemon.wait_exit();
    let log = daemon.log();
    assert!(log.contains("backend of models.yard (cameras yard)"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}

/// Issue 50, item 4: when every camera names a `[models.<name>]` detector, `[model]` is not
/// loaded (no engine, no context in the worker); telemetry's memory lists the one model that runs,
/// and the page's status names it as the camera's model.
#[test]
fn model_is_not_loaded_when_every_camera_names_another_detector() {
    let prefix = "e2e-model-unused";
    let broker = crate::broker::Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = TestConfig::new(broker.port(), prefix)
        .set("device", "cpu_workers", "1")
        .set("telemetry", "interval_s", "1")
        .set("http", "listen", "\"127.0.0.1:0\"")
        .camera("yard", 4.0, &crate::daemon::sample_source("dog.jpg", "loop"))
        .append("model = \"yard\"")
        .append(&format!(
            "[models.yard]\nonnx = {}\nlabels = {}\n",
            toml_string(&TestConfig::bundled_model().display().to_string()),
            toml_string(&TestConfig::bundled_labels().display().to_string())
        ))
        .write(&dir.path().join("config.toml"));
    let telemetry = format!("{prefix}/telemetry");
    let subscriber = crate::broker::Subscriber::connect(&broker, "e2e-model-unused-sub", &[&telemetry]);
    let mut daemon = crate::daemon::RunningDaemon::start(&config, &[]);
    let address = crate::http::http_address(&mut daemon);
    let reports = daemon.wait_for_messages(&subscriber, &telemetry, "a report with the models' memory", |m| {
        m.iter().any(|message| {
            let report: serde_json::Value = serde_json::from_slice(&message.payload).unwrap_or_default();
            report["engine"]["model_memory"]["models"].is_array()
        })
    });
    let report: serde_json::Value =
        reports.iter().rev().find_map(|m| serde_json::from_slice(&m.payload).ok()).expect("a report");
    let names: Vec<&str> = report["engine"]["model_memory"]["models"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|model| model["name"].as_str())
        .collect();
    assert_eq!(names, ["models.yard"], "only the detector that runs holds a context: {report:#}");
    let status = crate::http::request(address, "GET", "/api/status", &[], &[]).json();
    assert_eq!(status["camera_models"], serde_json::json!({"yard": "models.yard"}), "{status:#}");
    daemon.signal(libc::SIGTERM);
    assert!(daemon.wait_exit().success(), "log:\n{}", daemon.log());
    let log = daemon.log();
    assert!(log.contains("model: not loaded, every camera runs a [models.<name>] detector"), "{log}");
    assert!(log.contains("backend of models.yard (cameras yard)"), "{log}");
}

/// A classifier on a detector's tracks: the front camera loops a photo of a dog; `[models.colour]`
/// (the test colour classifier, `tests/models/NOTICE.md`) runs on the dog's track, and every event
/// of that track carries its answer under the classifier's name, while tracks of other labels carry
/// none; its detections carry the same answer. `[models.looks]`, the bundled MobileNetV2 as an
/// embedder on the same track, adds nothing to the messages (an appearance is not published).
/// Telemetry lists every model, the per-track ones by name in `engine.models` and each with its
/// role and memory in `engine.model_memory`.
#[test]
fn a_classifier_labels_each_confirmed_track_of_its_labels_in_the_event_messages() {
    let prefix = "e2e-classifier";
    let broker = crate::broker::Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = TestConfig::new(broker.port(), prefix)
        .set("device", "cpu_workers", "1")
        .set("telemetry", "interval_s", "1")
        .camera("front", 4.0, &crate::daemon::sample_source("dog.jpg", "loop"))
        .append(&format!(
            "[models.colour]\nkind = \"classifier\"\non = [\"dog\"]\nonnx = {}\nlabels = {}\n",
            toml_string(&repo("tests/models/colour_classifier.onnx").display().to_string()),
            toml_string(&repo("tests/models/colour_labels.txt").display().to_string())
        ))
        .append(&format!(
            "[models.looks]\nkind = \"embedder\"\non = [\"dog\"]\nonnx = {}\n",
            toml_string(&repo("models/mobilenet_v2_imagenet.onnx").display().to_string()),
        ))
        .write(&dir.path().join("config.toml"));
    let subscriber = crate::broker::Subscriber::connect(&broker, "e2e-classifier-sub", &[&format!("{prefix}/#")]);
    let mut daemon = crate::daemon::RunningDaemon::start(&config, &[("RUST_LOG", std::ffi::OsStr::new("info"))]);
    let events_topic = format!("{prefix}/front/events");
    let parse = |message: &crate::broker::Received| -> serde_json::Value {
        serde_json::from_slice(&message.payload).unwrap_or_default()
    };
    let events = daemon.wait_for_messages(&subscriber, &events_topic, "the dog's start event", |messages| {
        messages.iter().map(parse).any(|event| event["type"] == "start" && event["label"] == "dog")
    });
    let detections_topic = format!("{prefix}/front/detections");
    let classified = |message: &crate::broker::Received| {
        let value = parse(message);
        let detections = value["detections"].as_array().cloned().unwrap_or_default();
        detections.into_iter().find(|detection| detection["attributes"]["colour"].is_object())
    };
    let detections = daemon.wait_for_messages(&subscriber, &detections_topic, "a classified detection", |messages| {
        messages.iter().any(|message| classified(message).is_some())
    });
    let detection = detections.iter().find_map(classified).expect("waited for");
    assert_eq!(detection["label"], "dog", "{detection}");
    let with_memory = |message: &crate::broker::Received| parse(message)["engine"]["model_memory"].is_object();
    let telemetry = daemon.wait_for_messages(&subscriber, &format!("{prefix}/telemetry"), "a telemetry report", |m| {
        m.iter().any(with_memory)
    });
    let engine =
        telemetry.iter().find(|message| with_memory(message)).map(parse).expect("waited for")["engine"].clone();
    assert_eq!(engine["models"]["colour"]["kind"], "cpu", "{engine:#}");
    assert_eq!(engine["models"]["looks"]["kind"], "cpu", "{engine:#}");
    let memory = &engine["model_memory"];
    let roles: Vec<(&str, &str)> = memory["models"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|model| (model["name"].as_str().unwrap_or_default(), model["role"].as_str().unwrap_or_default()))
        .collect();
    let expected = [("model", "detector"), ("models.colour", "classifier"), ("models.looks", "embedder")];
    assert_eq!(roles, expected, "{engine:#}");
    assert_eq!((&memory["workers"], &memory["contexts_per_worker"]), (&1.into(), &3.into()), "{engine:#}");
    assert!(memory["arena"].as_str().is_some_and(|arena| arena.starts_with("none: ")), "{engine:#}");
    assert!(detection["track_id"].is_u64(), "a tracked detection: {detection}");
    daemon.signal(libc::SIGTERM);
    daemon.wait_exit();
    let events: Vec<serde_json::Value> = events.iter().map(parse).collect();
    let dog = events.iter().find(|event| event["label"] == "dog").expect("waited for");
    assert_eq!(detection["attributes"], dog["attributes"], "the detection carries its track's answer");
    for event in &events {
        let attributes = &event["attributes"];
        if event["label"] == "dog" {
            let colour = &attributes["colour"];
            let label = colour["label"].as_str().unwrap_or_default();
            assert!(["red", "green", "blue"].contains(&label), "the classifier's label: {event}");
            assert!(colour["score"].as_f64().is_some_and(|score| (0.0..=1.0).contains(&score)), "{event}");
            assert_eq!(attributes.as_object().map(|a| a.len()), Some(1), "one classifier, no vector: {event}");
        } else {
            assert!(attributes.is_null(), "no classifier runs on {}: {event}", event["label"]);
        }
    }
    let log = daemon.log();
    assert!(log.contains("backend of models.colour (classifier)"), "{log}");
    assert!(log.contains("backend of models.looks (embedder)"), "{log}");
    assert!(!log.contains("models.colour failed") && !log.contains("models.looks failed"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}

/// The bundled MobileNetV2 as a classifier from its table alone, its ImageNet classes gathered
/// into coarse groups: the SSD's cat in chelsea.png is classified `cat` (its breeds' summed
/// probability), not one of ImageNet's thousand names. A group entry that names no label is
/// refused by `check-config` (exit status 78) naming the group and the entry.
#[test]
fn the_bundled_imagenet_classifier_answers_the_groups_its_table_names() {
    let prefix = "e2e-imagenet-groups";
    let broker = crate::broker::Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let table = |groups: &str| {
        format!(
            "[models.pet]\nkind = \"classifier\"\non = [\"cat\", \"dog\"]\nonnx = {}\nlabels = {}\ngroups = {groups}\n",
            toml_string(&repo("models/mobilenet_v2_imagenet.onnx").display().to_string()),
            toml_string(&repo("models/imagenet_labels.txt").display().to_string())
        )
    };
    let test_config = TestConfig::new(broker.port(), prefix).set("device", "cpu_workers", "1").camera(
        "front",
        4.0,
        &crate::daemon::sample_source("chelsea.png", "loop"),
    );
    let misspelt =
        test_config.clone().append(&table("{ cat = [\"Egyptian kat\"] }")).write(&dir.path().join("bad.toml"));
    let refused = run(&["check-config"], &misspelt, &[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("models.pet.groups") && stderr.contains("`Egyptian kat` is no label"), "{stderr}");

    let config = test_config
        .append(&table("{ cat = [\"281-285\"], dog = [\"151-268\"] }"))
        .write(&dir.path().join("config.toml"));
    let subscriber = crate::broker::Subscriber::connect(&broker, "e2e-imagenet-groups-sub", &[&format!("{prefix}/#")]);
    let mut daemon = crate::daemon::RunningDaemon::start(&config, &[("RUST_LOG", std::ffi::OsStr::new("info"))]);
    let classified = |message: &crate::broker::Received| {
        let value: serde_json::Value = serde_json::from_slice(&message.payload).unwrap_or_default();
        let detections = value["detections"].as_array().cloned().unwrap_or_default();
        detections.into_iter().find(|detection| detection["attributes"]["pet"].is_object())
    };
    let detections = daemon.wait_for_messages(
        &subscriber,
        &format!("{prefix}/front/detections"),
        "a classified detection",
        |messages| messages.iter().any(|message| classified(message).is_some()),
    );
    daemon.signal(libc::SIGTERM);
    daemon.wait_exit();
    let detection = detections.iter().find_map(classified).expect("waited for");
    assert_eq!(detection["label"], "cat", "{detection}");
    let pet = &detection["attributes"]["pet"];
    assert_eq!(pet["label"], "cat", "{detection}");
    assert!(pet["score"].as_f64().is_some_and(|score| score > 0.5), "{detection}");
    let log = daemon.log();
    assert!(!log.contains("panicked"), "{log}");
}

/// `bench --cameras 2 --models default,yard`: camera 0 runs the bundled SSD (`[model]`), camera 1
/// a YOLO26 export (`[models.yard]`), each on its own lane of the one scheduler; the JSON counts
/// both models' frames and lists both models with their backend, and says that the CPU backend
/// has no device arena. A name that is no detector is an error, not a panic.
#[test]
fn bench_runs_cameras_round_robin_on_two_detectors_and_reports_each_models_frames() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = format!(
        "[device]\nbackend = \"cpu\"\n[models.yard]\nonnx = {}\nlabels = {}\n",
        toml_string(&repo("tests/models/yolo26t_160_random.onnx").display().to_string()),
        toml_string(&repo("models/coco80_labels.txt").display().to_string())
    );
    let config = dir.path().join("bench.toml");
    std::fs::write(&config, text).expect("write config");
    let image = sample("dog.jpg").display().to_string();
    let bench = |models: &str| {
        let args =
            ["bench", "--warmup", "1", "--iterations", "3", "--cameras", "2", "--models", models, "--image", &image];
        run(&args, &config, &[])
    };
    let output = bench("default,yard");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("bench prints JSON");
    let cameras = &report["pipeline"]["cameras"];
    assert_eq!(cameras["camera_models"], serde_json::json!(["model", "models.yard"]), "{report:#}");
    for model in ["model", "models.yard"] {
        assert!(cameras["frames_per_model"][model].as_u64().is_some_and(|frames| frames > 0), "{model}: {report:#}");
        assert!(cameras["fps_per_model"][model].as_f64().is_some_and(|fps| fps > 0.0), "{model}: {report:#}");
    }
    let models = report["models"]["models"].as_array().expect("a models section");
    let names: Vec<&str> = models.iter().filter_map(|model| model["name"].as_str()).collect();
    assert_eq!(names, ["model", "models.yard"], "{report:#}");
    assert!(models.iter().all(|model| model["backend"] == "cpu" && model["role"] == "detector"), "{report:#}");
    assert!(report["models"]["arena"].as_str().is_some_and(|arena| arena.starts_with("none")), "{report:#}");

    let unknown = bench("default,porch");
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(!unknown.status.success(), "{stderr}");
    assert!(stderr.contains("no detector named `porch`") && stderr.contains("`yard`"), "{stderr}");
}

/// `bench --cameras 2 --fps 5 --motion idle`: the cameras run live through their motion gates; the
/// report gives the capacity search, N cameras first, and frames of the idle scene that the gates
/// kept from inference; without `--motion` no frame is gated. No rate is asserted: whether the
/// cameras kept it depends on the machine's load. A scene that does not exist is an error.
#[test]
fn bench_with_motion_reports_the_capacity_search_and_gates_the_idle_scene() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("bench.toml");
    std::fs::write(&config, "[device]\nbackend = \"cpu\"\n").expect("write config");
    let image = sample("dog.jpg").display().to_string();
    let bench = |extra: &[&str]| {
        let mut args = vec!["bench", "--warmup", "2", "--iterations", "10", "--cameras", "2", "--fps", "5"];
        args.extend(["--image", image.as_str()]);
        args.extend(extra);
        run(&args, &config, &[])
    };
    let gated = |report: &serde_json::Value| -> u64 {
        let runs = report["capacity"]["runs"].as_array().expect("the runs of the search");
        runs.iter().map(|run| run["frames_gated"].as_u64().expect("frames_gated")).sum()
    };

    let output = bench(&["--motion", "idle"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("bench prints JSON");
    let capacity = &report["capacity"];
    assert_eq!((&capacity["motion"], &capacity["fps"]), (&serde_json::json!("idle"), &serde_json::json!(5.0)));
    assert_eq!(capacity["runs"][0]["cameras"], 2, "N cameras first: {report:#}");
    assert!(gated(&report) > 0, "the idle scene is gated: {report:#}");

    let output = bench(&[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("bench prints JSON");
    assert!(report["capacity"]["motion"].is_null(), "{report:#}");
    assert_eq!(gated(&report), 0, "no gating without --motion: {report:#}");

    let loud = bench(&["--motion", "loud"]);
    let stderr = String::from_utf8_lossy(&loud.stderr);
    assert!(!loud.status.success() && stderr.contains("idle or busy"), "{stderr}");
}
