//! Re-identification's appearance model on sequences the test makes: the bundled MobileNetV2's
//! `embedding` (through the CPU backend, each crop cut from its frame as the daemon cuts a
//! track's box) of objects taken from the sample photos and pasted into frames at other sizes,
//! places, brightness and facing; the same object must be more similar to itself than
//! `reid.min_similarity`, and another object of its label less.
//!
//! With `--nocapture` it prints the similarities it measured (the closing note of issue 51 and
//! the book's Re-identification page quote them).
//!
//! Then the daemon itself with only `[reid] enabled = true` (the bundled embedder, on every label,
//! and the default `min_similarity`) on two cameras replaying frames the test makes (as
//! `crate::tracking` does: every frame processed, stamped at the replay rate): the same person
//! after an occlusion on one camera and later on the other is linked each time, and another
//! person is not.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use image::{imageops, Rgb, RgbImage};
use jetson_detectd::backend::cpu::{CpuBackend, EngineChoice};
use jetson_detectd::backend::Backend;
use jetson_detectd::decode::embed::embed;
use jetson_detectd::frame::{FrameSlot, HeapMemory, PixelFormat};
use jetson_detectd::onnx::recognise::recognise_input;
use jetson_detectd::preprocess::Roi;
use jetson_detectd::reid::{Appearance, Embedding};

use crate::broker::{Broker, Subscriber};
use crate::daemon::{sample, toml_string, RunningDaemon, TestConfig};
use crate::tracking::{cutout, events, wait_exit_while_progressing, PERSON_IN_SAMPLE};

/// The default `reid.min_similarity`.
const MIN_SIMILARITY: f32 = 0.8;
const FRAME: (u32, u32) = (640, 480);

/// An object of a sample photo: its name, label, file and box (the bundled models' detections).
struct Object {
    name: &'static str,
    label: &'static str,
    file: &'static str,
    bbox: [u32; 4],
}

const OBJECTS: [Object; 4] = [
    Object { name: "astronaut", label: "person", file: "astronaut.png", bbox: [6, 9, 370, 505] },
    Object { name: "rider", label: "person", file: "person.jpg", bbox: [182, 104, 268, 378] },
    Object { name: "dog", label: "dog", file: "dog.jpg", bbox: [128, 226, 320, 544] },
    Object { name: "small dog", label: "dog", file: "person.jpg", bbox: [70, 266, 203, 346] },
];

/// One view of an object in a frame: how its box is cut from the photo (each edge moved by this
/// fraction of the box's size, outwards when positive: a detector's boxes differ from frame to
/// frame), its height in pixels, its box's left edge, brightness factor and whether it faces the
/// other way.
struct View {
    edges: [f32; 4],
    height: u32,
    left: u32,
    brightness: f32,
    mirrored: bool,
}

const VIEWS: [View; 6] = [
    View { edges: [0.0, 0.0, 0.0, 0.0], height: 300, left: 40, brightness: 1.0, mirrored: false },
    View { edges: [0.08, -0.05, 0.03, 0.06], height: 240, left: 300, brightness: 1.15, mirrored: false },
    View { edges: [-0.06, 0.04, -0.08, -0.04], height: 180, left: 420, brightness: 0.85, mirrored: true },
    View { edges: [0.05, 0.08, -0.04, 0.0], height: 260, left: 150, brightness: 0.9, mirrored: true },
    View { edges: [-0.03, -0.07, 0.07, 0.05], height: 200, left: 380, brightness: 1.1, mirrored: false },
    View { edges: [0.1, 0.0, 0.1, -0.06], height: 150, left: 20, brightness: 1.0, mirrored: false },
];

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// The box `bbox` of `photo` with each edge moved by `edges` (fractions of its size, outwards
/// when positive), kept inside the photo.
fn cut(photo: &RgbImage, bbox: [u32; 4], edges: [f32; 4]) -> RgbImage {
    let [x1, y1, x2, y2] = bbox.map(|v| v as f32);
    let (width, height) = (x2 - x1, y2 - y1);
    let left = (x1 - edges[0] * width).clamp(0.0, photo.width() as f32 - 1.0) as u32;
    let top = (y1 - edges[1] * height).clamp(0.0, photo.height() as f32 - 1.0) as u32;
    let right = (x2 + edges[2] * width).clamp(left as f32 + 1.0, photo.width() as f32) as u32;
    let bottom = (y2 + edges[3] * height).clamp(top as f32 + 1.0, photo.height() as f32) as u32;
    imageops::crop_imm(photo, left, top, right - left, bottom - top).to_image()
}

/// A grey frame (a soft vertical gradient, like a wall or a road) with `object` pasted in as
/// `view` says, and the pasted box.
fn frame(object: &RgbImage, view: &View) -> (RgbImage, [u32; 4]) {
    let (width, height) = FRAME;
    let mut frame = RgbImage::from_fn(width, height, |_, y| {
        let grey = 150 - (y * 40 / height) as u8;
        Rgb([grey, grey, grey.saturating_sub(6)])
    });
    let scale = view.height as f32 / object.height() as f32;
    let object_width = ((object.width() as f32 * scale).round() as u32).clamp(1, width - view.left);
    let mut pasted = imageops::resize(object, object_width, view.height, imageops::FilterType::Triangle);
    if view.mirrored {
        imageops::flip_horizontal_in_place(&mut pasted);
    }
    for pixel in pasted.pixels_mut() {
        pixel.0 = pixel.0.map(|channel| (f32::from(channel) * view.brightness).round().clamp(0.0, 255.0) as u8);
    }
    let top = (height - view.height) * 2 / 3;
    imageops::replace(&mut frame, &pasted, i64::from(view.left), i64::from(top));
    (frame, [view.left, top, view.left + object_width, top + view.height])
}

/// The embedding of the crop `bbox` of `frame`, cut and preprocessed as the daemon cuts a box.
fn embedding(
    session: &mut dyn jetson_detectd::backend::InferenceSession,
    frame: &RgbImage,
    bbox: [u32; 4],
) -> Embedding {
    let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
    slot.prepare(frame.width(), frame.height(), PixelFormat::Rgb8).expect("prepare").copy_from_slice(frame.as_raw());
    let [x1, y1, x2, y2] = bbox;
    let roi = Roi { x: x1, y: y1, width: x2 - x1, height: y2 - y1 };
    let (outputs, _) = session.run_regions(&slot, &[roi]).expect("embed a crop");
    let mut rows = Vec::new();
    embed(outputs, 1, &mut rows).expect("an embedding output");
    rows.pop().flatten().expect("a crop gives a direction")
}

#[test]
fn the_same_object_in_other_frames_is_more_similar_than_the_threshold_and_another_of_its_label_less() {
    let onnx = repo("models/mobilenet_v2_imagenet.onnx");
    let interface = jetson_detectd::onnx::read_file(&onnx).expect("read the model");
    let spec = recognise_input(&interface, None).expect("its input").input;
    let backend = CpuBackend::open(&onnx, spec, None, 1, &EngineChoice::rten("the test")).expect("load");
    let mut session = backend.new_session().expect("a session");

    // Each object's embeddings, one per view.
    let views: Vec<Vec<Embedding>> = OBJECTS
        .iter()
        .map(|object| {
            let photo = image::open(sample(object.file)).expect("a sample").to_rgb8();
            VIEWS
                .iter()
                .map(|view| {
                    let (frame, bbox) = frame(&cut(&photo, object.bbox, view.edges), view);
                    embedding(session.as_mut(), &frame, bbox)
                })
                .collect()
        })
        .collect();
    // A track's appearance is the first three views on one camera, the last three on another.
    let appearance = |embeddings: &[Embedding]| {
        let mut appearance = Appearance::default();
        for embedding in embeddings {
            appearance.add(embedding, 0.9);
        }
        appearance
    };
    let tracks: Vec<(Appearance, Appearance)> =
        views.iter().map(|views| (appearance(&views[..3]), appearance(&views[3..]))).collect();

    let mut report = Vec::new();
    let mut failures = Vec::new();
    for (index, object) in OBJECTS.iter().enumerate() {
        let crops = &views[index];
        let pairs: Vec<f32> = (0..crops.len())
            .flat_map(|i| (i + 1..crops.len()).map(move |j| (i, j)))
            .map(|(i, j)| crops[i].similarity(&crops[j]))
            .collect();
        let lowest = pairs.iter().copied().fold(f32::INFINITY, f32::min);
        let same = tracks[index].0.similarity(&tracks[index].1).expect("both seen");
        report.push(format!("{}: crops ≥ {lowest:.3}, the two tracks {same:.3}", object.name));
        if same < MIN_SIMILARITY {
            failures.push(format!("{}: its two tracks are {same:.3} similar, under {MIN_SIMILARITY}", object.name));
        }
        for (other_index, other) in OBJECTS.iter().enumerate().filter(|(i, o)| *i != index && o.label == object.label) {
            let different = tracks[index].0.similarity(&tracks[other_index].1).expect("both seen");
            report.push(format!("{} vs {} ({}): {different:.3}", object.name, other.name, object.label));
            if different >= MIN_SIMILARITY {
                failures.push(format!("{} and {} are {different:.3} similar", object.name, other.name));
            }
        }
    }
    eprintln!("re-identification similarities (MobileNetV2 embedding, rten):\n  {}", report.join("\n  "));
    assert!(failures.is_empty(), "{}\n{}", failures.join("\n"), report.join("\n"));
}

const REPLAY_FPS: f32 = 5.0;

/// What a replayed frame shows: nothing, the rider of person.jpg or the astronaut.
#[derive(Clone, Copy, PartialEq)]
enum Shown {
    Nobody,
    Rider,
    Astronaut,
}

/// Writes `script` (runs of frames showing the same) as the frames of `dir/<camera>`; whoever is
/// shown walks a little to the right from frame to frame.
fn write_frames(dir: &Path, camera: &str, script: &[(usize, Shown)]) -> PathBuf {
    let frames = dir.join(camera);
    std::fs::create_dir(&frames).expect("mkdir frames");
    let rider = cutout("person.jpg", PERSON_IN_SAMPLE, 0.7);
    let astronaut = cutout("astronaut.png", [6, 9, 370, 505], 0.45);
    let mut n = 0;
    for &(count, shown) in script {
        for step in 0..count {
            let mut frame = RgbImage::from_pixel(FRAME.0, FRAME.1, Rgb([178, 182, 176]));
            let person = match shown {
                Shown::Nobody => None,
                Shown::Rider => Some(&rider),
                Shown::Astronaut => Some(&astronaut),
            };
            if let Some(person) = person {
                let left = 100 + 30 * step as i64;
                imageops::overlay(&mut frame, person, left, i64::from(FRAME.1 - 10 - person.height()));
            }
            frame.save(frames.join(format!("frame-{n:03}.png"))).expect("write frame");
            n += 1;
        }
    }
    frames
}

/// The driveway camera sees the rider, loses them for 1.6 s (longer than `max_lost_s`) and sees
/// them again; later the porch camera sees the rider, then the astronaut. The rider's second
/// driveway track names the first (`same_as`), the porch's rider track names the driveway's latest
/// and all three share one `object_id`; the astronaut, another person, is linked to nobody.
#[test]
fn the_same_person_after_an_occlusion_and_on_another_camera_is_linked_and_another_person_is_not() {
    let prefix = "e2e-reid";
    let broker = Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let drive = write_frames(
        dir.path(),
        "drive",
        &[(6, Shown::Rider), (8, Shown::Nobody), (6, Shown::Rider), (6, Shown::Nobody)],
    );
    let porch = write_frames(
        dir.path(),
        "porch",
        &[(30, Shown::Nobody), (6, Shown::Rider), (8, Shown::Nobody), (6, Shown::Astronaut), (6, Shown::Nobody)],
    );
    let source = |frames: &Path| {
        format!(
            "{{ kind = \"images\", path = {}, mode = \"once\", replay_fps = {REPLAY_FPS:?} }}",
            toml_string(&frames.display().to_string())
        )
    };
    let config = TestConfig::new(broker.port(), prefix)
        .set("reid", "enabled", "true")
        .set("telemetry", "interval_s", "1")
        .camera("drive", 0.0, &source(&drive))
        .camera("porch", 0.0, &source(&porch))
        .write(&dir.path().join("config.toml"));
    let subscriber = Subscriber::connect(&broker, "e2e-reid-sub", &[&format!("{prefix}/#")]);
    let mut daemon = RunningDaemon::start(&config, &[]);
    wait_exit_while_progressing(&mut daemon, &subscriber, &format!("{prefix}/porch/detections"));
    let exit = daemon.wait_exit();
    assert_eq!(exit.code(), Some(0), "the cameras ended, so did the daemon; log:\n{}", daemon.log());
    subscriber.wait_for_payload(&format!("{prefix}/status"), b"offline");

    // Each camera's person tracks in the order they started, with their last event.
    let tracks = |camera: &str| {
        let events = events(&subscriber, &format!("{prefix}/{camera}/events"));
        let mut last = BTreeMap::new();
        let mut order = Vec::new();
        for event in events.into_iter().filter(|event| event.label == "person") {
            if !last.contains_key(&event.track_id) {
                order.push(event.track_id);
            }
            last.insert(event.track_id, event);
        }
        order.into_iter().map(|id| last.remove(&id).expect("kept")).collect::<Vec<_>>()
    };
    let (drive, porch) = (tracks("drive"), tracks("porch"));
    let story = format!("drive: {drive:#?}\nporch: {porch:#?}\nlog:\n{}", daemon.log());
    assert_eq!((drive.len(), porch.len()), (2, 2), "two person tracks on each camera: {story}");
    assert!(drive.iter().chain(&porch).all(|event| event.kind == "end"), "{story}");
    let link = |event: &jetson_detectd::publish::event_message::EventMessage| {
        event.same_as.as_ref().map(|same_as| (same_as.camera.clone(), same_as.track_id))
    };
    assert_eq!(link(&drive[0]), None, "nothing earlier: {story}");
    assert_eq!(link(&drive[1]), Some(("drive".to_string(), drive[0].track_id)), "after the occlusion: {story}");
    assert_eq!(link(&porch[0]), Some(("drive".to_string(), drive[1].track_id)), "on the porch: {story}");
    assert_eq!(link(&porch[1]), None, "the astronaut is nobody seen before: {story}");
    let objects: Vec<Option<u64>> = drive.iter().chain(&porch).map(|event| event.object_id).collect();
    assert!(objects.iter().all(Option::is_some), "{story}");
    assert!(objects[..3].iter().all(|id| *id == objects[0]), "the rider is one object: {story}");
    assert_ne!(objects[3], objects[0], "{story}");
    let same_as = porch[0].same_as.as_ref().expect("linked");
    assert!(same_as.similarity >= f64::from(MIN_SIMILARITY) && same_as.similarity <= 1.0, "{story}");
    assert!(same_as.seen_at <= porch[0].first_ts, "seen before the porch's track began: {story}");
    // Telemetry counted the embedder's crops and the gallery's links and memory.
    let telemetry: Vec<serde_json::Value> = subscriber
        .messages(&format!("{prefix}/telemetry"))
        .iter()
        .filter_map(|message| serde_json::from_slice::<serde_json::Value>(&message.payload).ok())
        .filter(|message| message["reid"].is_object())
        .collect();
    let most = |key: &str| telemetry.iter().filter_map(|message| message["reid"][key].as_u64()).max();
    assert_eq!(most("links"), Some(2), "{telemetry:#?}");
    assert!(most("embeddings").is_some_and(|crops| crops >= 4) && most("bytes") > Some(0), "{telemetry:#?}");
    eprintln!(
        "re-identification telemetry: {}",
        telemetry.last().map(|message| message["reid"].clone()).unwrap_or_default()
    );
    eprintln!(
        "re-identification links: drive → drive {:.3}, drive → porch {:.3}",
        drive[1].same_as.as_ref().map_or(0.0, |same_as| same_as.similarity),
        same_as.similarity
    );
}

/// `check-config` on a config whose only re-identification key is `[reid] enabled = true` accepts
/// it and says which embedder stands in: the bundled one, on every label's tracks.
#[test]
fn check_config_says_reid_enabled_alone_compares_the_bundled_embedder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[device]\nbackend = \"cpu\"\n[tracking]\nenabled = true\n[reid]\nenabled = true\n")
        .expect("write config");
    let output = crate::arch::daemon_command().arg("check-config").arg("--config").arg(&config).output().expect("run");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{stdout}{stderr}");
    let said = stdout.lines().find(|line| line.starts_with("recognised: reid.model = \"reid\": the bundled embedder"));
    assert!(
        said.is_some_and(
            |line| line.contains("mobilenet_v2_imagenet.onnx") && line.ends_with("on every label's tracks")
        ),
        "{stdout}"
    );
}
