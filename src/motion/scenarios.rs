//! The sequences issue 48 judges gating on, made here frame by frame (a small camera at 5 frames
//! a second, its luma image and a detector that finds exactly the objects in the picture): an
//! empty scene with sensor noise, a slow light ramp, a tree in the wind under a mask, people
//! passing at intervals, and a person who walks in, stands for a minute and leaves. Each runs
//! twice through the same tracking (zones, a line): once with the detector on every frame, once
//! through the motion detector and the gate. The events (start, end, zone and line updates) must
//! be the same, starts at most one frame later; the frames of the idle parts (nothing changing in
//! front of the camera) go to the detector at most 20 % of the time; the standing person keeps one
//! track id. `cargo test --lib motion::scenarios -- --nocapture` prints what each sequence cost.

use std::io::Write as _;
use std::time::{Duration, SystemTime};

use super::detector::MotionDetector;
use super::gate::{Gate, GateInputs};
use super::luma::{CellGrid, LumaImage};
use super::params::MotionParams;
use crate::detection::{BoundingBox, Detection};
use crate::track::events::{Changes, EventKind, Line, Scene, WatchParams, Zone};
use crate::track::lines::Segment;
use crate::track::scene_tracker::{SceneTracker, TrackingParams};
use crate::track::tracker::{TrackId, TrackerParams};
use crate::track::zones::Polygon;

/// The camera: 320 × 180 pixels (2-pixel cells, 160 × 90 of them), 5 frames a second.
const WIDTH: u32 = 320;
const HEIGHT: u32 = 180;
const FPS: f64 = 5.0;
/// The floor rate of the built-in config.
const DETECT_INTERVAL_S: f64 = 5.0;

/// Something in front of the camera at one frame: a box in frame pixels, its luma, and whether
/// the detector finds it while it is in the picture (a person does, a tree does not).
#[derive(Debug, Clone, Copy)]
struct Thing {
    bbox: BoundingBox,
    luma: u8,
    detected: bool,
}

/// One frame of a sequence.
struct Frame {
    /// Luma of the empty scene (light), before noise.
    light: f32,
    things: Vec<Thing>,
    /// Nothing changes in front of the camera: its frames count for the idle share.
    idle: bool,
}

/// A sequence: its frames and the masks of its camera.
struct Sequence {
    name: &'static str,
    frames: Vec<Frame>,
    masks: Vec<Polygon>,
}

/// An event as the comparison sees it: its frame, kind, the track's id and what changed.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Seen {
    frame: usize,
    kind: EventKind,
    id: Option<TrackId>,
    zones: bool,
    crossed: bool,
}

/// What a run gave.
struct Run {
    events: Vec<Seen>,
    detected: Vec<bool>,
    /// Every id a track got.
    ids: Vec<TrackId>,
}

fn tracking_params() -> TrackingParams {
    TrackingParams {
        tracker: TrackerParams { max_lost_s: 1.0, min_hits: 3, high_score: 0.5, match_iou: 0.2, max_tracks: 16 },
        watch: WatchParams { stationary_px: 5.0, stationary_s: 10.0 },
    }
}

/// A zone over the right half and a line down the middle.
fn scene() -> Scene {
    let right = Polygon::new(&[[0.5, 0.0], [1.0, 0.0], [1.0, 1.0], [0.5, 1.0]]).expect("zone");
    let middle = Segment::new([[0.5, 0.0], [0.5, 1.0]]).expect("line");
    Scene {
        zones: vec![Zone { name: "right".into(), polygon: right, classes: vec![] }],
        lines: vec![Line { name: "middle".into(), segment: middle }],
    }
}

/// A little generator for sensor noise, the same on every run.
struct Noise(u32);

impl Noise {
    /// −4..=4 levels.
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        ((self.0 >> 24) % 9) as f32 - 4.0
    }
}

fn picture(frame: &Frame, noise: &mut Noise, luma: &mut LumaImage) {
    let grid = CellGrid::new(WIDTH, HEIGHT);
    let values = luma.prepare(grid);
    for row in 0..grid.rows {
        for col in 0..grid.cols {
            let (x, y) = grid.cell_origin(col, row);
            let centre = ((x + grid.cell / 2) as f32, (y + grid.cell / 2) as f32);
            let inside = |b: &BoundingBox| (b.x1..b.x2).contains(&centre.0) && (b.y1..b.y2).contains(&centre.1);
            let base = frame.things.iter().rev().find(|t| inside(&t.bbox)).map_or(frame.light, |t| t.luma as f32);
            values[(row * grid.cols + col) as usize] = (base + noise.next()).clamp(0.0, 255.0) as u8;
        }
    }
}

fn run(sequence: &Sequence, gating: bool) -> Run {
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut tracking = SceneTracker::new(tracking_params(), scene());
    let mut motion = MotionDetector::new(MotionParams::default(), sequence.masks.clone());
    let mut gate = Gate::default();
    let (mut noise, mut luma) = (Noise(48), LumaImage::default());
    let mut result = Run { events: Vec::new(), detected: Vec::new(), ids: Vec::new() };
    for (index, frame) in sequence.frames.iter().enumerate() {
        let at = index as f64 / FPS;
        let captured_at = start + Duration::from_secs_f64(at);
        picture(frame, &mut noise, &mut luma);
        let state = motion.observe(&luma, at).state;
        let inputs =
            GateInputs { gating, tracking_settled: tracking.is_settled(), detect_interval_s: DETECT_INTERVAL_S };
        let detects = gate.judge(state, at, inputs).detects();
        result.detected.push(detects);
        if !detects {
            tracking.hold(captured_at);
            continue;
        }
        let detections: Vec<Detection> = frame
            .things
            .iter()
            .filter(|t| t.detected && t.bbox.x1 < WIDTH as f32 && t.bbox.x2 > 0.0)
            .map(|t| Detection { class_id: 0, score: 0.9, bbox: t.bbox })
            .collect();
        tracking.update(&detections, WIDTH, HEIGHT, captured_at);
        for event in tracking.events() {
            let id = tracking.tracker().track(event.slot).and_then(|t| t.id());
            let (zones, crossed) = (event.changes.contains(Changes::ZONES), event.changes.contains(Changes::CROSSED));
            if event.kind != EventKind::Update || zones || crossed {
                result.events.push(Seen { frame: index, kind: event.kind, id, zones, crossed });
            }
        }
        result.ids.extend(tracking.track_ids().iter().flatten());
    }
    result.ids.sort_unstable();
    result.ids.dedup();
    result
}

/// Runs `sequence` with and without gating, checks the promises and returns the counts:
/// (frames, detected with gating, idle frames, idle frames detected).
fn judge(sequence: &Sequence) -> (usize, usize, usize, usize) {
    let every = run(sequence, false);
    let gated = run(sequence, true);
    assert!(every.detected.iter().all(|d| *d), "{}: without gating every frame is detected", sequence.name);
    assert_eq!(gated.events.len(), every.events.len(), "{}: {:?}\n{:?}", sequence.name, gated.events, every.events);
    for (g, e) in gated.events.iter().zip(&every.events) {
        let same = Seen { frame: e.frame, ..*g } == *e;
        let late = g.frame.checked_sub(e.frame);
        let in_time = match e.kind {
            EventKind::Start => late.is_some_and(|late| late <= 1),
            _ => late == Some(0),
        };
        assert!(same && in_time, "{}: gated {g:?} against {e:?}", sequence.name);
    }
    assert_eq!(gated.ids, every.ids, "{}: the same tracks", sequence.name);
    let idle: Vec<bool> = sequence.frames.iter().map(|f| f.idle).collect();
    let idle_frames = idle.iter().filter(|i| **i).count();
    let idle_detected = idle.iter().zip(&gated.detected).filter(|(i, d)| **i && **d).count();
    assert!(
        idle_detected * 5 <= idle_frames,
        "{}: {idle_detected} of {idle_frames} idle frames went to the detector",
        sequence.name
    );
    let detected = gated.detected.iter().filter(|d| **d).count();
    let _ = writeln!(
        std::io::stderr(),
        "{}: {} frames, {detected} detected with gating ({} gated); idle: {idle_detected} of {idle_frames} detected",
        sequence.name,
        sequence.frames.len(),
        sequence.frames.len() - detected,
    );
    (sequence.frames.len(), detected, idle_frames, idle_detected)
}

fn seconds(s: f64) -> usize {
    (s * FPS).round() as usize
}

fn still(light: f32, things: Vec<Thing>) -> Frame {
    Frame { light, things, idle: true }
}

/// A person 30 × 60 pixels whose top left corner is at `x`, `y`.
fn person(x: f32, y: f32) -> Thing {
    Thing { bbox: BoundingBox { x1: x, y1: y, x2: x + 30.0, y2: y + 60.0 }, luma: 200, detected: true }
}

#[test]
fn an_empty_scene_with_sensor_noise_is_detected_at_the_floor_rate_only() {
    let frames = (0..seconds(60.0)).map(|_| still(80.0, vec![])).collect();
    let (_, detected, ..) = judge(&Sequence { name: "noise", frames, masks: vec![] });
    // The first frame, then one every 5 s.
    assert_eq!(detected, 12);
}

#[test]
fn a_slow_light_ramp_is_not_motion() {
    // From 40 to 100 levels in 60 s: one level a second, as at dusk.
    let frames = (0..seconds(60.0)).map(|i| still(40.0 + i as f32 / FPS as f32, vec![])).collect();
    judge(&Sequence { name: "light ramp", frames, masks: vec![] });
}

#[test]
fn a_tree_in_the_wind_under_a_mask_is_not_motion() {
    let tree_mask = Polygon::new(&[[0.0, 0.0], [0.3, 0.0], [0.3, 0.6], [0.0, 0.6]]).expect("mask");
    let frames = (0..seconds(60.0))
        .map(|i| {
            // Its leaves sway: a bright crown that moves a few pixels and changes its shade.
            let sway = [0.0, 6.0, 12.0, 6.0][i % 4];
            let crown = BoundingBox { x1: 10.0 + sway, y1: 10.0, x2: 70.0 + sway, y2: 90.0 };
            still(80.0, vec![Thing { bbox: crown, luma: [60, 130, 30][i % 3], detected: false }])
        })
        .collect();
    judge(&Sequence { name: "tree under a mask", frames, masks: vec![tree_mask] });
}

#[test]
fn people_passing_at_intervals_give_the_same_events_with_gating() {
    // Every 30 s someone crosses the frame from left to right in 8 s (crossing the line and
    // entering the zone); the scene is idle from 3 s after they left until the next one comes.
    let period = seconds(30.0);
    let frames = (0..seconds(150.0))
        .map(|i| {
            let into = (i % period) as f64 / FPS;
            if i >= period && into < 8.0 {
                let x = -30.0 + (into / 8.0) as f32 * 380.0;
                Frame { light: 80.0, things: vec![person(x, 60.0)], idle: false }
            } else {
                Frame { light: 80.0, things: vec![], idle: i < period || into > 11.0 }
            }
        })
        .collect();
    judge(&Sequence { name: "people at intervals", frames, masks: vec![] });
}

#[test]
fn a_person_who_walks_in_and_stands_for_a_minute_keeps_one_track() {
    // 4 s walking in from the left, 60 s standing in the zone, 4 s walking out to the right, 20 s
    // empty. Standing, the person becomes background after ~20 s (background_s = 10): the last
    // 30 s of the stand are idle.
    let (walk, stand) = (seconds(4.0), seconds(60.0));
    let frames = (0..seconds(88.0))
        .map(|i| {
            let t = i as f64 / FPS;
            if i < walk {
                let x = -30.0 + (t / 4.0) as f32 * 230.0;
                Frame { light: 80.0, things: vec![person(x, 60.0)], idle: false }
            } else if i < walk + stand {
                Frame { light: 80.0, things: vec![person(200.0, 60.0)], idle: t > 34.0 }
            } else if i < 2 * walk + stand {
                let x = 200.0 + ((t - 64.0) / 4.0) as f32 * 150.0;
                Frame { light: 80.0, things: vec![person(x, 60.0)], idle: false }
            } else {
                Frame { light: 80.0, things: vec![], idle: false }
            }
        })
        .collect();
    let sequence = Sequence { name: "walks in and stands", frames, masks: vec![] };
    judge(&sequence);
    assert_eq!(run(&sequence, true).ids, [1], "one track id for the whole stand");
}
