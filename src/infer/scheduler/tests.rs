//! The scheduler as a whole, on fake backends that sleep instead of inferring: batching, fairness,
//! order, overlap, sessions and reports.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::feeds::{Feed, Feeds, Taken};
use super::lanes::ModelLane;
use super::plan::SchedulePlan;
use super::report::{BatchStats, ScheduleReport};
use super::shared::Shared;
use super::threads::Scheduler;
use super::worker::WorkerState;
use crate::backend::{Backend, BackendError, InferenceSession, MemoryReport, WorkerSeat};
use crate::backend::{BackendInfo, BackendTimings, SessionMemory};
use crate::config::Config;
use crate::config::{CameraConfig, ClassScores, DecoderKind, SourceConfig};
use crate::decode::DecodeParams;
use crate::detection::Detection;
use crate::frame::{Doorbell, FrameRing, FrameSlot};
use crate::infer::camera::{CameraPipeline, PipelineShared};
use crate::infer::per_track::PerTrackSessions;
use crate::infer::step::{FrameSink, PipelineError};
use crate::model::ModelOutputs;
use crate::model::OutputTensor;
use crate::preprocess::PreprocessSpec;
use crate::service::notify::Liveness;
use crate::source::kinds::synthetic::SyntheticConfig;
use crate::sys::lock::lock;

/// A backend that sleeps instead of inferring, yields SSD outputs without detections, and
/// records what it ran. Cameras are told apart by frame width (see [`camera`]).
struct FakeBackend {
    spec: PreprocessSpec,
    session_batch: usize,
    workers: usize,
    inference_time: Duration,
    /// `Some`: its workers overlap, each frame's preprocessing taking this long.
    prepare_time: Option<Duration>,
    record: Arc<Record>,
}

#[derive(Default)]
struct Record {
    sessions: AtomicUsize,
    /// The seat each worker's session was made for.
    seats: Mutex<Vec<WorkerSeat>>,
    runs: AtomicUsize,
    /// Frame widths of every run, in order.
    batches: Mutex<Vec<Vec<u32>>>,
    /// Frame widths in inference right now, to catch a camera in two workers at once.
    in_flight: Mutex<Vec<u32>>,
    overlaps: AtomicUsize,
    /// The most inferences that ran at once.
    most_at_once: AtomicUsize,
    /// Frames prepared while an inference ran, as the scheduler said they would be.
    prepared_beside_inference: AtomicUsize,
    /// Inferences each worker ran.
    inferences_by_worker: Mutex<BTreeMap<usize, usize>>,
}

struct FakeSession {
    batch: usize,
    inference_time: Duration,
    prepare_time: Duration,
    /// The width of the frame the last `prepare` took.
    prepared: Option<u32>,
    /// The worker whose session it is.
    worker: usize,
    record: Arc<Record>,
    outputs: ModelOutputs,
}

const SCRATCH_BYTES: u64 = 100 << 20;
const PERSISTENT_BYTES: u64 = 3 << 20;

impl Backend for FakeBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo { kind: "cpu", model: "fake".into(), detail: String::new() }
    }
    fn spec(&self) -> &PreprocessSpec {
        &self.spec
    }
    fn inference_workers(&self, _cameras: usize) -> usize {
        self.workers
    }
    fn session_memory(&self) -> SessionMemory {
        SessionMemory { scratch_bytes: SCRATCH_BYTES, persistent_bytes: PERSISTENT_BYTES }
    }
    fn new_session(&self) -> Result<Box<dyn InferenceSession>, BackendError> {
        Ok(Box::new(self.session_of(0)))
    }
    fn overlaps_preprocessing(&self, _seat: WorkerSeat) -> bool {
        self.prepare_time.is_some()
    }
    fn new_worker_session(&self, seat: WorkerSeat) -> Result<Box<dyn InferenceSession>, BackendError> {
        lock(&self.record.seats).push(seat);
        Ok(Box::new(self.session_of(seat.index)))
    }
}

impl FakeBackend {
    fn session_of(&self, worker: usize) -> FakeSession {
        self.record.sessions.fetch_add(1, Ordering::SeqCst);
        FakeSession {
            batch: self.session_batch,
            inference_time: self.inference_time,
            prepare_time: self.prepare_time.unwrap_or_default(),
            prepared: None,
            worker,
            record: Arc::clone(&self.record),
            outputs: ModelOutputs::default(),
        }
    }
}

impl InferenceSession for FakeSession {
    fn run(&mut self, slot: &FrameSlot) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        self.run_batch(&[slot])
    }
    fn max_batch(&self) -> usize {
        self.batch
    }
    fn run_batch(&mut self, slots: &[&FrameSlot]) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        self.infer_widths(slots.iter().map(|slot| slot.meta().width).collect())
    }
    fn prepare(&mut self, slot: &FrameSlot, beside_inference: bool) -> Result<(), BackendError> {
        std::thread::sleep(self.prepare_time);
        // The other session's inference starts a moment after this preparing does (once its
        // thread wakes up to its turn): by the end of the preparing it runs.
        if beside_inference && !lock(&self.record.in_flight).is_empty() {
            self.record.prepared_beside_inference.fetch_add(1, Ordering::SeqCst);
        }
        self.prepared = Some(slot.meta().width);
        Ok(())
    }
    fn infer(&mut self) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        let width = self.prepared.take().expect("infer after prepare");
        self.infer_widths(vec![width])
    }
}

impl FakeSession {
    fn infer_widths(&mut self, widths: Vec<u32>) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        {
            let mut in_flight = lock(&self.record.in_flight);
            if widths.iter().any(|w| in_flight.contains(w)) {
                self.record.overlaps.fetch_add(1, Ordering::SeqCst);
            }
            in_flight.extend(&widths);
            self.record.most_at_once.fetch_max(in_flight.len(), Ordering::SeqCst);
        }
        *lock(&self.record.inferences_by_worker).entry(self.worker).or_default() += 1;
        std::thread::sleep(self.inference_time);
        lock(&self.record.in_flight).retain(|w| !widths.contains(w));
        let rows = widths.len();
        lock(&self.record.batches).push(widths);
        self.record.runs.fetch_add(1, Ordering::SeqCst);
        self.outputs.tensors = vec![
            OutputTensor { name: "boxes".into(), shape: vec![rows, 1, 4], data: vec![0.0; rows * 4] },
            OutputTensor { name: "scores".into(), shape: vec![rows, 1, 2], data: vec![0.0; rows * 2] },
        ];
        Ok((&self.outputs, BackendTimings::default()))
    }
}

/// Records every frame the sink gets, per camera.
#[derive(Default)]
struct RecordingSink {
    frames: Mutex<HashMap<String, Vec<u64>>>,
    timings: Mutex<Vec<crate::frame::FrameTimings>>,
    ended: Mutex<Vec<String>>,
    /// Frames a camera's motion gate held.
    held: AtomicUsize,
}

impl FrameSink for RecordingSink {
    fn frame(
        &self,
        camera: &str,
        slot: &FrameSlot,
        _: &[Detection],
        timings: &crate::frame::FrameTimings,
        _: &mut PerTrackSessions,
    ) {
        lock(&self.frames).entry(camera.to_string()).or_default().push(slot.meta().sequence);
        lock(&self.timings).push(*timings);
    }
    fn camera_ended(&self, camera: &str, _: &Result<(), PipelineError>) {
        lock(&self.ended).push(camera.to_string());
    }
    fn held(&self, _camera: &str, _slot: &FrameSlot) {
        self.held.fetch_add(1, Ordering::SeqCst);
    }
    fn worker_failed(&self, worker: &str, error: &PipelineError) {
        panic!("{worker} failed: {error}");
    }
}

impl RecordingSink {
    fn counts(&self) -> Vec<usize> {
        lock(&self.frames).values().map(Vec::len).collect()
    }
}

fn params() -> DecodeParams {
    DecodeParams {
        kind: DecoderKind::Ssd,
        score_threshold: 0.5,
        nms_iou: 0.5,
        max_detections: 10,
        allowed_classes: None,
        class_scores: ClassScores::Sigmoid,
        label_count: None,
    }
}

/// Camera `index`: an uncapped synthetic source whose frames are `64 + 2 × index` wide.
fn camera(index: usize) -> CameraConfig {
    CameraConfig {
        name: format!("cam{index}"),
        source: SourceConfig::Synthetic(SyntheticConfig { width: 64 + 2 * index as u32, height: 48 }),
        fps: 0.0,
        zones: Vec::new(),
        lines: Vec::new(),
        record: None,
        model: None,
    }
}

/// What the cameras of a test share: 3 slots each, `sink`, `stop` and `liveness`.
fn pipeline_shared(
    config: &Config,
    scheduler: &Arc<Scheduler>,
    sink: &Arc<RecordingSink>,
    stop: &Arc<AtomicBool>,
    liveness: Arc<Liveness>,
) -> PipelineShared {
    PipelineShared {
        slots: 3,
        limits: config.limits,
        scheduler: Arc::clone(scheduler),
        sink: sink.clone(),
        stop: Arc::clone(stop),
        liveness,
        controls: Arc::new(crate::controls::Controls::new(config)),
        motion: None,
    }
}

struct Rig {
    scheduler: Arc<Scheduler>,
    pipelines: Vec<CameraPipeline>,
    sink: Arc<RecordingSink>,
    record: Arc<Record>,
    stop: Arc<AtomicBool>,
}

impl Rig {
    fn start(cameras: usize, plan: SchedulePlan, session_batch: usize, inference_time: Duration) -> Rig {
        Rig::start_on(cameras, plan, session_batch, inference_time, None)
    }

    /// A rig whose workers overlap: each frame's preprocessing takes `prepare_time`.
    fn start_overlapping(cameras: usize, plan: SchedulePlan, inference_time: Duration, prepare_time: Duration) -> Rig {
        Rig::start_on(cameras, plan, 1, inference_time, Some(prepare_time))
    }

    fn start_on(
        cameras: usize,
        plan: SchedulePlan,
        session_batch: usize,
        inference_time: Duration,
        prepare_time: Option<Duration>,
    ) -> Rig {
        let config = Config::embedded_default().expect("embedded default config");
        let record = Arc::new(Record::default());
        let backend = Arc::new(FakeBackend {
            spec: config.model.input.clone(),
            session_batch,
            workers: plan.workers,
            inference_time,
            prepare_time,
            record: Arc::clone(&record),
        });
        let sink = Arc::new(RecordingSink::default());
        let stop = Arc::new(AtomicBool::new(false));
        let liveness = Liveness::new();
        let scheduler = Scheduler::start(backend, params(), plan, sink.clone(), stop.clone(), &liveness)
            .expect("start the scheduler");
        let shared = pipeline_shared(&config, &scheduler, &sink, &stop, liveness);
        let pipelines =
            (0..cameras).map(|i| CameraPipeline::start(&camera(i), &shared).expect("start a camera")).collect();
        Rig { scheduler, pipelines, sink, record, stop }
    }

    fn wait_for_frames_of_every_camera(&self, frames: usize) {
        self.wait_for(&format!("{frames} frames of every camera"), |rig| {
            let counts = rig.sink.counts();
            counts.len() == rig.pipelines.len() && counts.iter().all(|n| *n >= frames)
        });
    }

    /// Waits (bounded generously: this is about progress, not speed) until `done` holds.
    fn wait_for(&self, what: &str, done: impl Fn(&Rig) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done(self) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn stop(self) -> Stopped {
        self.stop.store(true, Ordering::SeqCst);
        let rings = self
            .pipelines
            .iter()
            .map(|p| {
                let stats = p.ring().stats();
                (stats.produced.load(Ordering::SeqCst), stats.dropped.load(Ordering::SeqCst))
            })
            .collect();
        for pipeline in self.pipelines {
            pipeline.join().expect("source thread");
        }
        self.scheduler.join().expect("workers");
        let report = self.scheduler.report();
        Stopped { sink: self.sink, record: self.record, rings, report }
    }
}

/// What a stopped rig leaves: the sink's and backend's records, each ring's (produced, dropped)
/// and the scheduler's report.
struct Stopped {
    sink: Arc<RecordingSink>,
    record: Arc<Record>,
    rings: Vec<(u64, u64)>,
    report: ScheduleReport,
}

fn plan(workers: usize, max_batch: usize, batch_timeout: Duration) -> SchedulePlan {
    SchedulePlan { workers, max_batch, batch_timeout }
}

#[test]
fn one_worker_serves_two_detectors_batching_each_ones_cameras_and_renaming_their_classes() {
    let config = Config::embedded_default().expect("embedded default config");
    let records = [Arc::new(Record::default()), Arc::new(Record::default())];
    let backend = |record: &Arc<Record>| {
        Arc::new(FakeBackend {
            spec: config.model.input.clone(),
            session_batch: 4,
            workers: 1,
            inference_time: Duration::from_millis(2),
            prepare_time: None,
            record: Arc::clone(record),
        })
    };
    let lanes = vec![
        ModelLane::new(backend(&records[0]), params()),
        ModelLane::renamed("yard", backend(&records[1]), params(), vec![7, 3], vec!["cam1".into(), "cam3".into()]),
    ];
    let sink = Arc::new(RecordingSink::default());
    let stop = Arc::new(AtomicBool::new(false));
    let liveness = Liveness::new();
    let plan = plan(1, 4, Duration::from_millis(5));
    let scheduler = Scheduler::start_lanes(lanes, Arc::from(Vec::new()), plan, sink.clone(), stop.clone(), &liveness)
        .expect("start the scheduler");
    let shared = pipeline_shared(&config, &scheduler, &sink, &stop, liveness);
    let pipelines: Vec<CameraPipeline> =
        (0..4).map(|i| CameraPipeline::start(&camera(i), &shared).expect("start a camera")).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while sink.counts().len() < 4 || sink.counts().iter().any(|n| *n < 20) {
        assert!(Instant::now() < deadline, "timed out waiting for frames of every camera");
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::SeqCst);
    for pipeline in pipelines {
        pipeline.join().expect("source thread");
    }
    scheduler.join().expect("workers");
    // Cameras 0 and 2 (64 and 68 wide) are lane 0's, 1 and 3 (66 and 70) lane 1's.
    for (record, widths) in records.iter().zip([[64, 68], [66, 70]]) {
        assert_eq!(record.sessions.load(Ordering::SeqCst), 1, "one worker holds one session of each model");
        let batches = lock(&record.batches).clone();
        assert!(batches.iter().flatten().all(|width| widths.contains(width)), "a batch mixes models: {batches:?}");
        assert!(batches.iter().any(|batch| batch.len() == 2), "a model's cameras are batched together: {batches:?}");
    }
    assert_eq!(scheduler.backends().count(), 2);
}

#[test]
fn a_renamed_lane_gives_the_shared_ids_and_drops_ids_its_labels_lack() {
    let lane = ModelLane::renamed(
        "yard",
        Arc::new(FakeBackend {
            spec: Config::embedded_default().expect("config").model.input,
            session_batch: 1,
            workers: 1,
            inference_time: Duration::ZERO,
            prepare_time: None,
            record: Arc::default(),
        }),
        params(),
        vec![7, 3],
        Vec::new(),
    );
    let mut state = WorkerState::default();
    let detection = |class_id| Detection {
        class_id,
        score: 0.9,
        bbox: crate::detection::BoundingBox { x1: 0.0, y1: 0.0, x2: 1.0, y2: 1.0 },
    };
    state.detections = vec![detection(1), detection(0), detection(2)];
    let sink = RecordingSink::default();
    let heap = || FrameSlot::new(Box::new(crate::frame::HeapMemory::default()));
    let ring = Arc::new(FrameRing::new(vec![heap(), heap()]));
    let mut slot = heap();
    slot.prepare(2, 2, crate::frame::PixelFormat::Rgb8).expect("prepare");
    let taken = Taken { feed: 0, lane: 1, name: "cam".into(), ring, slot };
    state
        .deliver(
            &taken,
            Instant::now(),
            Duration::ZERO,
            Ok(crate::frame::FrameTimings::default()),
            &lane,
            &sink,
            &mut PerTrackSessions::none(),
        )
        .expect("deliver");
    assert_eq!(state.detections.iter().map(|d| d.class_id).collect::<Vec<_>>(), [3, 7]);
}

#[test]
fn one_worker_serves_every_camera_in_capture_order_and_counts_what_it_drops() {
    // Which camera a round picks is proved deterministically below
    // (`a_ready_camera_waits_for_each_other_camera_at_most_once`): here the source threads run
    // as the machine schedules them, so only what holds under any schedule is checked.
    let rig = Rig::start(3, plan(1, 1, Duration::ZERO), 1, Duration::from_millis(2));
    rig.wait_for_frames_of_every_camera(30);
    let Stopped { sink, record, rings, report } = rig.stop();
    assert_eq!(record.sessions.load(Ordering::SeqCst), 1, "one session for three cameras");
    let batches = lock(&record.batches).clone();
    let counts = sink.counts();
    assert_eq!(batches.len(), counts.iter().sum::<usize>());
    let frames = lock(&sink.frames);
    for (camera, sequences) in frames.iter() {
        assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{camera} out of order: {sequences:?}");
    }
    // Uncapped sources outrun inference: their oldest frames are dropped, and counted.
    for (index, (produced, dropped)) in rings.iter().enumerate() {
        let processed = frames[&format!("cam{index}")].len() as u64;
        assert!(*dropped > 0, "cam{index} never dropped a frame");
        assert!(processed + dropped <= *produced, "cam{index}: {processed} + {dropped} > {produced}");
        assert!(produced - processed - dropped <= 3 + 1, "cam{index}: frames unaccounted for");
    }
    assert_eq!((report.workers, report.cameras, report.max_batch), (1, 3, 1));
    assert_eq!(report.batch_sizes.keys().copied().collect::<Vec<_>>(), [1]);
}

#[test]
fn an_overlapping_worker_prepares_frames_during_the_other_sessions_inference_and_keeps_capture_order() {
    let rig = Rig::start_overlapping(2, plan(1, 1, Duration::ZERO), Duration::from_millis(4), Duration::from_millis(2));
    rig.wait_for_frames_of_every_camera(30);
    let Stopped { sink, record, report, .. } = rig.stop();
    assert_eq!(record.sessions.load(Ordering::SeqCst), 2, "two sessions take turns");
    assert_eq!(record.most_at_once.load(Ordering::SeqCst), 1, "one inference at a time on the worker's cores");
    assert_eq!(record.overlaps.load(Ordering::SeqCst), 0);
    assert!(record.prepared_beside_inference.load(Ordering::SeqCst) > 0, "no frame was prepared beside an inference");
    for (camera, sequences) in lock(&sink.frames).iter() {
        assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{camera} out of order: {sequences:?}");
    }
    assert_eq!((report.workers, report.memory.contexts), (1, 2));
    assert_eq!(report.frames as usize, sink.counts().iter().sum::<usize>());
}

#[test]
fn two_overlapping_workers_serve_two_cameras_one_each_rather_than_both_on_one() {
    let rig = Rig::start_overlapping(2, plan(2, 1, Duration::ZERO), Duration::from_millis(4), Duration::from_millis(2));
    rig.wait_for_frames_of_every_camera(30);
    let Stopped { record, .. } = rig.stop();
    assert_eq!(record.sessions.load(Ordering::SeqCst), 4, "two sessions per worker");
    assert!(record.most_at_once.load(Ordering::SeqCst) <= 2, "one inference at a time per worker");
    let by_worker = lock(&record.inferences_by_worker).clone();
    let total: usize = by_worker.values().sum();
    // A worker takes a second camera only while no other worker is idle, so neither worker
    // ends up with both cameras' frames.
    assert!(by_worker.len() == 2 && by_worker.values().all(|n| n * 4 >= total), "inferences by worker: {by_worker:?}");
}

#[test]
fn an_overlapping_worker_counts_its_wait_for_the_inference_turn_in_the_frames_wait() {
    let rig = Rig::start_overlapping(1, plan(1, 1, Duration::ZERO), Duration::from_millis(20), Duration::ZERO);
    rig.wait_for_frames_of_every_camera(10);
    let Stopped { sink, .. } = rig.stop();
    // With preparing free, each frame waits most of the other session's inference for its turn.
    let waits: Vec<Duration> = lock(&sink.timings).iter().skip(2).filter_map(|t| t.wait).collect();
    assert!(waits.iter().any(|wait| *wait >= Duration::from_millis(5)), "waits {waits:?}");
}

/// Workers' shared state with `cameras` rings of two heap slots that the test fills by hand,
/// and no worker thread: rounds are picked by calling `gather` directly.
fn hand_fed(cameras: usize) -> (Shared, Vec<Arc<FrameRing>>) {
    let config = Config::embedded_default().expect("embedded default config");
    let backend = Arc::new(FakeBackend {
        spec: config.model.input.clone(),
        session_batch: 1,
        workers: 1,
        inference_time: Duration::ZERO,
        prepare_time: None,
        record: Arc::default(),
    });
    let heap = || FrameSlot::new(Box::new(crate::frame::HeapMemory::default()));
    let rings: Vec<Arc<FrameRing>> = (0..cameras).map(|_| Arc::new(FrameRing::new(vec![heap(), heap()]))).collect();
    let feeds = rings
        .iter()
        .enumerate()
        .map(|(index, ring)| Feed {
            name: format!("cam{index}").into(),
            ring: Arc::clone(ring),
            lane: 0,
            in_flight: 0,
            held_by: 0,
            ended: false,
        })
        .collect();
    let shared = Shared {
        per_track: Arc::from(Vec::new()),
        lanes: vec![ModelLane::new(backend, params())],
        sink: Arc::new(RecordingSink::default()),
        stop: Arc::new(AtomicBool::new(false)),
        plan: plan(1, 1, Duration::ZERO),
        feeds: Mutex::new(Feeds { cameras: feeds, next: 0, held: vec![0] }),
        doorbell: Doorbell::new(),
        stats: BatchStats::new(1),
    };
    (shared, rings)
}

#[test]
fn a_ready_camera_waits_for_each_other_camera_at_most_once() {
    const CAMERAS: usize = 4;
    let (shared, rings) = hand_fed(CAMERAS);
    let publish = |camera: usize| {
        let mut slot = rings[camera].acquire_for_write().expect("a slot to write");
        slot.prepare(2, 2, crate::frame::PixelFormat::Rgb8).expect("prepare");
        rings[camera].publish(slot);
    };
    // Sources that publish at different rates, some in bursts, some rarely: at each round a
    // camera publishes when the step and its index say so (deterministic, irregular).
    let mut passed_over = [0usize; CAMERAS];
    let mut served = [0usize; CAMERAS];
    // Frames waiting in each ring: a ring of two keeps the newest two (the oldest is dropped).
    let mut waiting = [0usize; CAMERAS];
    let mut batch = Vec::new();
    for step in 0..2_000usize {
        for (camera, frames) in waiting.iter_mut().enumerate() {
            if (step * (camera + 3) + step / 7) % (camera + 2) == 0 {
                publish(camera);
                *frames = (*frames + 1).min(2);
            }
        }
        let ready: Vec<bool> = waiting.iter().map(|n| *n > 0).collect();
        shared.gather(0, &mut batch, &[1]);
        match batch.first() {
            None => assert!(ready.iter().all(|r| !r), "step {step}: a ready camera was not served: {ready:?}"),
            Some(taken) => {
                let picked = taken.feed;
                assert!(ready[picked], "step {step}: served cam{picked}, which had no frame");
                waiting[picked] -= 1;
                served[picked] += 1;
                passed_over[picked] = 0;
                for camera in (0..CAMERAS).filter(|&camera| camera != picked && ready[camera]) {
                    passed_over[camera] += 1;
                    assert!(
                        passed_over[camera] < CAMERAS,
                        "step {step}: cam{camera} was ready and passed over {} times in a row",
                        passed_over[camera]
                    );
                }
            }
        }
        shared.give_back(&mut batch);
    }
    assert!(served.iter().all(|n| *n > 100), "every camera was served: {served:?}");
}

#[test]
fn frames_of_several_cameras_share_one_batch_but_never_two_of_one_camera() {
    let rig = Rig::start(4, plan(1, 4, Duration::from_millis(500)), 4, Duration::from_millis(2));
    rig.wait_for("20 batches", |rig| rig.record.runs.load(Ordering::SeqCst) >= 20);
    let Stopped { sink, record, report, .. } = rig.stop();
    let batches = lock(&record.batches).clone();
    assert!(batches.iter().all(|b| (1..=4).contains(&b.len())), "{batches:?}");
    for batch in &batches {
        let mut widths = batch.clone();
        widths.sort_unstable();
        widths.dedup();
        assert_eq!(widths.len(), batch.len(), "two frames of one camera in one batch: {batch:?}");
    }
    assert!(batches.iter().any(|b| b.len() == 4), "with a wait, batches fill: {batches:?}");
    assert_eq!(sink.counts().len(), 4, "every camera was served");
    assert_eq!(report.max_batch, 4);
    assert_eq!(report.frames, batches.iter().map(|b| b.len() as u64).sum::<u64>());
    assert!(report.batch_sizes.get(&4).is_some_and(|n| *n > 0), "{report:?}");
}

#[test]
fn a_model_with_a_fixed_batch_runs_the_frames_of_a_round_one_by_one() {
    let rig = Rig::start(2, plan(1, 4, Duration::ZERO), 1, Duration::from_millis(1));
    rig.wait_for("10 runs", |rig| rig.record.runs.load(Ordering::SeqCst) >= 10);
    let Stopped { record, report, .. } = rig.stop();
    assert!(lock(&record.batches).iter().all(|b| b.len() == 1));
    assert_eq!(report.max_batch, 1, "the session allows single frames only");
    assert_eq!(report.batch_sizes.keys().copied().collect::<Vec<_>>(), [1]);
}

#[test]
fn every_camera_leases_the_one_context_of_its_worker_and_the_saving_is_reported() {
    let rig = Rig::start(4, plan(1, 1, Duration::ZERO), 1, Duration::from_millis(1));
    rig.wait_for("a frame of every camera", |rig| rig.sink.counts().len() == 4);
    let Stopped { record, report, .. } = rig.stop();
    assert_eq!(record.sessions.load(Ordering::SeqCst), 1);
    assert_eq!(
        report.memory,
        MemoryReport {
            contexts: 1,
            scratch_bytes_per_context: SCRATCH_BYTES,
            persistent_bytes_per_context: PERSISTENT_BYTES,
            scratch_bytes: SCRATCH_BYTES,
            persistent_bytes: PERSISTENT_BYTES,
            saved_bytes: 3 * (SCRATCH_BYTES + PERSISTENT_BYTES)
        }
    );
}

#[test]
fn the_wait_in_the_ring_is_measured_and_part_of_the_total() {
    let rig = Rig::start(3, plan(1, 1, Duration::ZERO), 1, Duration::from_millis(5));
    rig.wait_for_frames_of_every_camera(5);
    let Stopped { sink, .. } = rig.stop();
    for frame in lock(&sink.timings).iter() {
        let (wait, infer, total) =
            (frame.wait.expect("wait"), frame.infer.expect("infer"), frame.total.expect("total"));
        assert!(total >= wait + infer, "{frame:?}");
    }
}

#[test]
fn several_workers_never_run_two_frames_of_one_camera_at_once() {
    let rig = Rig::start(3, plan(2, 1, Duration::ZERO), 1, Duration::from_millis(3));
    rig.wait_for_frames_of_every_camera(20);
    let Stopped { sink, record, report, .. } = rig.stop();
    assert_eq!(record.sessions.load(Ordering::SeqCst), 2, "one session per worker");
    assert_eq!(record.overlaps.load(Ordering::SeqCst), 0, "a camera was in two workers at once");
    for (camera, sequences) in lock(&sink.frames).iter() {
        assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{camera} out of order: {sequences:?}");
    }
    assert_eq!(report.memory.contexts, 2);
    assert_eq!(report.memory.saved_bytes, SCRATCH_BYTES + PERSISTENT_BYTES, "3 cameras on 2 contexts save one");
}

#[test]
fn each_worker_makes_its_session_for_its_own_seat() {
    let rig = Rig::start(3, plan(3, 1, Duration::ZERO), 1, Duration::from_millis(1));
    rig.wait_for("a frame of every camera", |rig| rig.sink.counts().len() == 3);
    let Stopped { record, .. } = rig.stop();
    let mut seats = lock(&record.seats).clone();
    seats.sort_by_key(|seat| seat.index);
    let expected: Vec<WorkerSeat> = (0..3).map(|index| WorkerSeat { index, workers: 3 }).collect();
    assert_eq!(seats, expected, "the CPU backend gives each seat its share of the cores");
}

#[test]
fn stop_does_not_wait_for_the_frames_still_in_the_rings() {
    let rig = Rig::start(2, plan(1, 1, Duration::ZERO), 1, Duration::from_millis(150));
    rig.wait_for("the rings to fill during the first inference", |rig| {
        rig.record.runs.load(Ordering::SeqCst) >= 1
            && rig.pipelines.iter().all(|p| p.ring().stats().produced.load(Ordering::SeqCst) >= 3)
    });
    let runs_at_stop = rig.record.runs.load(Ordering::SeqCst);
    let Stopped { record, .. } = rig.stop();
    let runs_after_stop = record.runs.load(Ordering::SeqCst) - runs_at_stop;
    assert!(runs_after_stop <= 1, "{runs_after_stop} frames were run after the stop request (one may be in flight)");
}

/// A scheduler of one worker on a fake backend that runs a frame in 1 ms, feeding a recording
/// sink; and its stop flag.
fn one_quick_worker(
    config: &Config,
    liveness: &Arc<Liveness>,
) -> (Arc<Scheduler>, Arc<RecordingSink>, Arc<AtomicBool>) {
    let backend = Arc::new(FakeBackend {
        spec: config.model.input.clone(),
        session_batch: 1,
        workers: 1,
        inference_time: Duration::from_millis(1),
        prepare_time: None,
        record: Arc::new(Record::default()),
    });
    let sink = Arc::new(RecordingSink::default());
    let stop = Arc::new(AtomicBool::new(false));
    let scheduler =
        Scheduler::start(backend, params(), plan(1, 1, Duration::ZERO), sink.clone(), stop.clone(), liveness)
            .expect("start");
    (scheduler, sink, stop)
}

/// Waits (a minute at most) until `sink` has seen a camera end.
fn wait_for_an_end(sink: &RecordingSink) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while lock(&sink.ended).is_empty() {
        assert!(Instant::now() < deadline, "the camera never ended");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_finite_camera_ends_once_its_last_frame_is_through() {
    let (scheduler, sink, stop) = one_quick_worker(&Config::embedded_default().expect("config"), &Liveness::new());
    let ring = Arc::new(FrameRing::with_doorbell(
        (0..2).map(|_| FrameSlot::new(Box::new(crate::frame::HeapMemory::default()))).collect(),
        scheduler.doorbell(),
    ));
    scheduler.add_camera("once", Arc::clone(&ring));
    let mut slot = ring.acquire_for_write().expect("slot");
    slot.prepare(64, 48, crate::frame::PixelFormat::Rgb8).expect("prepare");
    ring.publish(slot);
    ring.close();
    wait_for_an_end(&sink);
    assert_eq!(sink.counts(), [1], "its last frame was run before it ended");
    assert_eq!(*lock(&sink.ended), ["once"]);
    stop.store(true, Ordering::SeqCst);
    scheduler.join().expect("join");
}

/// A finite camera that shows the same grey picture `frames` times, 5 frames a second of capture
/// time, and never waits for inference to drop one.
struct StillSource {
    frames: u64,
    shown: u64,
}

impl crate::source::FrameSource for StillSource {
    fn describe(&self) -> String {
        "still".into()
    }
    fn next_frame(&mut self, slot: &mut FrameSlot) -> Result<crate::source::Capture, crate::source::SourceError> {
        if self.shown == self.frames {
            return Ok(crate::source::Capture::End);
        }
        slot.prepare(64, 48, crate::frame::PixelFormat::Rgb8).expect("prepare").fill(90);
        let at = Duration::from_secs(1_800_000_000) + Duration::from_millis(200 * self.shown);
        slot.meta_mut().captured_at = std::time::SystemTime::UNIX_EPOCH + at;
        self.shown += 1;
        Ok(crate::source::Capture::Frame)
    }
    fn capture_mode(&self) -> crate::frame::CaptureMode {
        crate::frame::CaptureMode::Generate
    }
    fn keeps_every_frame(&self) -> bool {
        true
    }
}

#[test]
fn with_motion_gating_a_still_camera_sends_only_the_floor_rates_frames_to_inference() {
    let config = Config::embedded_default().expect("embedded default config");
    let liveness = Liveness::new();
    let (scheduler, sink, stop) = one_quick_worker(&config, &liveness);
    let motion = crate::infer::gating::MotionConfig {
        enabled: true,
        ..crate::config::section::built_in().expect("the built-in [motion]")
    };
    let gates = crate::infer::gating::MotionGates::new(motion, [camera(0).name]);
    let shared = PipelineShared {
        motion: Some(Arc::new(gates)),
        ..pipeline_shared(&config, &scheduler, &sink, &stop, liveness)
    };
    let source = Box::new(StillSource { frames: 60, shown: 0 });
    let pipeline = CameraPipeline::start_with_source(&camera(0), source, &shared).expect("start");
    pipeline.join().expect("source thread");
    wait_for_an_end(&sink);
    // 12 s of a still picture: the first frame (the background starts from it), then one every
    // detect_interval_s = 5 s; the rest were held.
    assert_eq!(sink.counts(), [3]);
    assert_eq!(sink.held.load(Ordering::SeqCst), 57);
    stop.store(true, Ordering::SeqCst);
    scheduler.join().expect("join");
}
