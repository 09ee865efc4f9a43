//! Inference scheduling: the workers that run the frames of every camera.
//!
//! Owns: the inference workers (one per GPU; `device.cpu_workers` on the CPU backend), each an OS
//! thread (two for an overlapping worker, below) with its own backend session, created on it and
//! never leaving it (on the GPU: the device's primary context bound once, one stream, one
//! execution context); the choice of ready frames across cameras, round robin; batching (`engine.max_batch`, `engine.batch_timeout_ms`);
//! decoding each frame and handing the result to the sink; the current decode parameters (SIGHUP);
//! the batch-size and memory statistics that telemetry and `bench` report; the workers' [`Liveness`]
//! parties (a worker beats after every batch and every idle wait). What belongs to a model is kept
//! apart from the worker that runs it: the model's backend and decode parameters ([`ModelLane`])
//! and, in each worker, its session and decoder (`ModelSession`).
//!
//! Models: every camera is served by one detector, its [`ModelLane`] (lane 0: `[model]`, unless no
//! camera runs it, which then has no lane; others: the `[models.<name>]` detectors cameras name; a
//! camera no lane lists runs on lane 0). Every worker holds a session of every lane, so
//! one worker per GPU serves every model on its one stream; a batch holds frames of one lane only
//! (the lane of the first camera the round finds ready). A lane's class ids are renamed into the
//! shared label list before the sink sees them, so every outlet names classes with one list.
//! Every worker also holds a session of every classifier (`super::classifier`), opened on its seat
//! after its detectors', which it lends the sink with each frame it delivers.
//!
//! Overlapping workers: where the backend says so ([`Backend::overlaps_preprocessing`]: the CPU
//! backend's workers of many threads), a worker is two threads with a session each that
//! take turns ([`super::turns`]): one preprocesses its next frame while the other's inference runs
//! on the worker's cores, one inference at a time, frames delivered in the order they were taken.
//!
//! Fairness and order: a worker takes at most one frame per camera into a batch, starting after the
//! camera it served last, and a camera with a frame in flight is skipped until that frame is done
//! (an overlapping worker may take a camera's next frame while it holds the previous one, when the
//! camera's ring keeps a slot for the camera to fill). So no camera starves another, and each
//! camera's frames reach the sink in capture order (its tracker depends on that) even with several
//! workers. A camera that is behind loses its *oldest* waiting frame in its own ring (counted
//! there), never another camera's.
//!
//! Must not: read sources, publish, or block on the network — the sink decides what to do with a
//! result and must return quickly.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::classifier::{ClassifierLane, Classifiers};
use super::step::{decode_frame, process, FrameError, FrameSink, PipelineError};
use super::turns::Turns;
use crate::backend::{Backend, BackendError, InferenceSession, MemoryReport, WorkerSeat};
use crate::config::Config;
use crate::decode::{DecodeParams, Decoder};
use crate::detection::Detection;
use crate::frame::{Doorbell, FrameRing, FrameSlot, Stage};
use crate::model::ModelOutputs;
use crate::service::notify::{Liveness, LivenessHandle};
use crate::sys::lock::lock;

/// How often an idle worker looks at the stop flag and beats.
const POLL: Duration = Duration::from_millis(100);

/// How the frames of all cameras are run: workers, batch size, batch wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulePlan {
    /// Inference workers, each with its own session (at least 1).
    pub workers: usize,
    /// Most frames one inference takes (at least 1); the session may allow fewer.
    pub max_batch: usize,
    /// Longest wait for more cameras' frames once one is ready.
    pub batch_timeout: Duration,
}

impl SchedulePlan {
    /// The plan the config asks for, on `backend` (which says how many workers it wants for
    /// `cameras` cameras).
    pub fn new(config: &Config, backend: &dyn Backend, cameras: usize) -> SchedulePlan {
        SchedulePlan {
            workers: backend.inference_workers(cameras).max(1),
            max_batch: config.engine.max_batch.get(),
            batch_timeout: config.engine.batch_timeout(),
        }
    }
}

/// What the scheduler reports (telemetry `engine.scheduler`, `bench`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ScheduleReport {
    pub workers: usize,
    pub cameras: usize,
    /// Frames one inference may take: `engine.max_batch`, or less where the model or backend
    /// allows less (1 for a model with a fixed batch of 1).
    pub max_batch: usize,
    /// Inferences run, and the frames in them.
    pub batches: u64,
    pub frames: u64,
    /// Inferences by batch size (only sizes that occurred).
    pub batch_sizes: BTreeMap<usize, u64>,
    pub memory: MemoryReport,
}

/// The inference workers and the cameras they serve.
pub struct Scheduler {
    shared: Arc<Shared>,
    workers: Mutex<Vec<WorkerThread>>,
}

/// A worker's thread (an overlapping worker has two) and its name in errors.
struct WorkerThread {
    name: String,
    handle: JoinHandle<()>,
}

/// What the second thread of an overlapping worker adds to the worker's name.
const SECOND_THREAD: &str = " (second session)";

/// Starts one thread of worker `index`, named for the worker plus `suffix`, registered with
/// `liveness`, running `body`; if `body` fails the thread sets the stop flag, closes every ring
/// (nobody reads their frames any more) and tells the sink.
fn spawn_worker(
    shared: &Arc<Shared>,
    index: usize,
    suffix: &str,
    liveness: &Arc<Liveness>,
    body: impl FnOnce(&Shared, &str, &LivenessHandle) -> Result<(), PipelineError> + Send + 'static,
) -> Result<WorkerThread, PipelineError> {
    let name = format!("{}{suffix}", worker_name(index));
    let party = liveness.register(name.clone());
    let shared = Arc::clone(shared);
    let thread_name = if suffix.is_empty() { format!("infer-{index}") } else { format!("infer-{index}b") };
    let worker = name.clone();
    let handle = std::thread::Builder::new()
        .name(thread_name)
        .spawn(move || match body(&shared, &worker, &party) {
            Ok(()) => party.finish(),
            Err(error) => {
                shared.stop.store(true, Ordering::SeqCst);
                for feed in &lock(&shared.feeds).cameras {
                    feed.ring.close();
                }
                shared.sink.worker_failed(&worker, &error);
            }
        })
        .map_err(|source| PipelineError::Thread { camera: name.clone(), source })?;
    Ok(WorkerThread { name, handle })
}

/// What the workers share.
struct Shared {
    /// Lane 0 serves cameras no other lane lists.
    lanes: Vec<ModelLane>,
    /// Every worker holds a session of each; the sink runs them ([`FrameSink::frame`]).
    classifiers: Arc<[ClassifierLane]>,
    sink: Arc<dyn FrameSink>,
    stop: Arc<AtomicBool>,
    plan: SchedulePlan,
    feeds: Mutex<Feeds>,
    doorbell: Arc<Doorbell>,
    stats: BatchStats,
}

/// A model the workers run: its backend (loaded from its `crate::model::ModelSpec`), its decode
/// parameters, the cameras it serves and its class ids in the shared label list. Each worker
/// keeps a [`ModelSession`] for every lane.
pub struct ModelLane {
    pub backend: Arc<dyn Backend>,
    /// Decode parameters and their generation: a worker adopts them when the generation changes.
    params: Mutex<(u64, DecodeParams)>,
    /// The shared label list's id of each of this model's class ids (`None`: the ids are the
    /// shared list's, as for `[model]`). A detection whose id has no entry is dropped: its label
    /// file does not name it.
    class_ids: Option<Vec<usize>>,
    /// The cameras it serves (lane 0 also serves every camera no lane names).
    cameras: Vec<String>,
    /// The `[models.<name>]` it runs (`None`: `[model]`).
    name: Option<String>,
}

impl ModelLane {
    /// A lane whose class ids are the shared list's.
    pub fn new(backend: Arc<dyn Backend>, params: DecodeParams) -> ModelLane {
        ModelLane { backend, params: Mutex::new((0, params)), class_ids: None, cameras: Vec::new(), name: None }
    }

    /// The lane of `[models.<name>]` for `cameras`, whose class id `i` is the shared list's
    /// `class_ids[i]` ([`crate::detection::Labels::absorb`]).
    pub fn renamed(
        name: &str,
        backend: Arc<dyn Backend>,
        params: DecodeParams,
        class_ids: Vec<usize>,
        cameras: Vec<String>,
    ) -> ModelLane {
        let params = Mutex::new((0, params));
        ModelLane { backend, params, class_ids: Some(class_ids), cameras, name: Some(name.to_string()) }
    }

    /// The `[models.<name>]` it runs (`None`: `[model]`).
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

/// One worker's state for one model: its session (on the GPU its execution context, created on
/// the worker's thread), its decoder, and the most frames the session takes at once.
struct ModelSession {
    session: Box<dyn InferenceSession>,
    decode: LaneDecoder,
    limit: usize,
}

/// A worker's decoder for one model, with the generation of the decode parameters it has.
struct LaneDecoder {
    decoder: Decoder,
    params_seen: u64,
}

impl ModelSession {
    /// Opens a session of `model` on this thread for the worker in `seat`; batches hold at most
    /// `max_batch` frames and what the session takes.
    fn open(model: &ModelLane, max_batch: usize, seat: WorkerSeat) -> Result<ModelSession, PipelineError> {
        let session = model.backend.new_worker_session(seat).map_err(|source| PipelineError::Worker { source })?;
        let limit = max_batch.min(session.max_batch()).max(1);
        let (params_seen, params) = lock(&model.params).clone();
        Ok(ModelSession { session, decode: LaneDecoder { decoder: Decoder::new(params), params_seen }, limit })
    }
}

impl LaneDecoder {
    /// Adopts `model`'s decode parameters if they changed since, saying so in the log as `worker`.
    fn adopt_params(&mut self, model: &ModelLane, worker: &str) {
        let params = lock(&model.params);
        if params.0 == self.params_seen {
            return;
        }
        self.params_seen = params.0;
        self.decoder.set_params(params.1.clone());
        log::info!("{worker}: reloaded thresholds and class filter");
    }
}

#[derive(Default)]
struct Feeds {
    cameras: Vec<Feed>,
    /// Where the next round starts: after the camera served last.
    next: usize,
    /// Frames in each worker's hands.
    held: Vec<usize>,
}

impl Feeds {
    /// `slot`, the ready frame of camera `index`, taken by `worker`: counted in flight, and the
    /// round robin moves past the camera.
    fn take(&mut self, index: usize, worker: usize, slot: FrameSlot) -> Taken {
        let feed = &mut self.cameras[index];
        feed.in_flight += 1;
        feed.held_by = worker;
        let taken =
            Taken { feed: index, lane: feed.lane, name: Arc::clone(&feed.name), ring: Arc::clone(&feed.ring), slot };
        if let Some(held) = self.held.get_mut(worker) {
            *held += 1;
        }
        self.next = (index + 1) % self.cameras.len();
        taken
    }
}

/// One camera as the workers see it.
struct Feed {
    name: Arc<str>,
    ring: Arc<FrameRing>,
    /// Its detector's lane.
    lane: usize,
    /// Frames of this camera in a worker's hands: at most one, or two in the hands of one
    /// overlapping worker (which delivers them in the order it took them).
    in_flight: usize,
    /// The worker that took the frame in flight last.
    held_by: usize,
    /// Its ring closed and drained, and the sink was told.
    ended: bool,
}

struct BatchStats {
    /// Inferences by batch size − 1.
    by_size: Vec<AtomicU64>,
    /// The smallest batch limit a worker's session allows (starts at the plan's), or the limit
    /// of a session whose backend changed last (an engine that took over from the CPU).
    max_batch: AtomicUsize,
}

/// A frame a worker took, with where it goes back.
struct Taken {
    feed: usize,
    lane: usize,
    name: Arc<str>,
    ring: Arc<FrameRing>,
    slot: FrameSlot,
}

impl Scheduler {
    /// Starts `plan.workers` workers; each creates its session on its own thread. Cameras join
    /// with [`Scheduler::add_camera`]. A worker whose session cannot be created, or whose backend
    /// fails, sets `stop` and tells the sink ([`FrameSink::worker_failed`]).
    pub fn start(
        backend: Arc<dyn Backend>,
        params: DecodeParams,
        plan: SchedulePlan,
        sink: Arc<dyn FrameSink>,
        stop: Arc<AtomicBool>,
        liveness: &Arc<Liveness>,
    ) -> Result<Arc<Scheduler>, PipelineError> {
        Self::start_lanes(vec![ModelLane::new(backend, params)], Arc::from(Vec::new()), plan, sink, stop, liveness)
    }

    /// [`Scheduler::start`] with one lane per detector that a camera runs (at least one; `[model]`'s
    /// first when a camera runs it) and the classifiers every worker holds a session of, which the
    /// sink runs on the frames it gets.
    pub fn start_lanes(
        lanes: Vec<ModelLane>,
        classifiers: Arc<[ClassifierLane]>,
        plan: SchedulePlan,
        sink: Arc<dyn FrameSink>,
        stop: Arc<AtomicBool>,
        liveness: &Arc<Liveness>,
    ) -> Result<Arc<Scheduler>, PipelineError> {
        if lanes.is_empty() {
            return Err(PipelineError::Worker {
                source: BackendError::Unavailable("scheduler", "no model to run".to_string()),
            });
        }
        let plan = SchedulePlan { workers: plan.workers.max(1), max_batch: plan.max_batch.max(1), ..plan };
        let shared = Arc::new(Shared {
            lanes,
            classifiers,
            sink,
            stop,
            plan,
            feeds: Mutex::new(Feeds { held: vec![0; plan.workers], ..Feeds::default() }),
            doorbell: Doorbell::new(),
            stats: BatchStats {
                by_size: (0..plan.max_batch).map(|_| AtomicU64::new(0)).collect(),
                max_batch: AtomicUsize::new(plan.max_batch),
            },
        });
        let scheduler = Arc::new(Scheduler { shared: Arc::clone(&shared), workers: Mutex::new(Vec::new()) });
        for index in 0..plan.workers {
            let seat = WorkerSeat { index, workers: plan.workers };
            let spawned = if shared.overlaps(seat) {
                let turns = Arc::new(Turns::default());
                let second = Arc::clone(&turns);
                spawn_worker(&shared, index, "", liveness, move |shared, name, party| {
                    shared.run_overlapping(index, name, party, &turns)
                })
                .and_then(|first| {
                    lock(&scheduler.workers).push(first);
                    spawn_worker(&shared, index, SECOND_THREAD, liveness, move |shared, name, party| {
                        shared.run_overlapping(index, name, party, &second)
                    })
                })
            } else {
                spawn_worker(&shared, index, "", liveness, move |shared, name, party| {
                    shared.run_worker(index, name, party)
                })
            };
            match spawned {
                Ok(handle) => lock(&scheduler.workers).push(handle),
                Err(error) => {
                    shared.stop.store(true, Ordering::SeqCst);
                    scheduler.join().ok();
                    return Err(error);
                }
            }
        }
        Ok(scheduler)
    }

    /// The backend of lane 0 (slot memory comes from it: every lane's backend is of one kind).
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.shared.lanes[0].backend
    }

    /// The backends of every lane, lane 0 first.
    pub fn backends(&self) -> impl Iterator<Item = &Arc<dyn Backend>> {
        self.shared.lanes.iter().map(|lane| &lane.backend)
    }

    /// The bell every camera's ring must ring ([`FrameRing::with_doorbell`]).
    pub fn doorbell(&self) -> Arc<Doorbell> {
        Arc::clone(&self.shared.doorbell)
    }

    /// Starts serving a camera whose source publishes into `ring` (made with [`Scheduler::doorbell`]).
    /// When the ring is closed and drained, the sink hears [`FrameSink::camera_ended`] with `Ok`.
    /// Its lane is the one that lists it, else lane 0.
    pub fn add_camera(&self, name: &str, ring: Arc<FrameRing>) {
        let lanes = &self.shared.lanes;
        let lane = lanes.iter().position(|lane| lane.cameras.iter().any(|camera| camera == name)).unwrap_or(0);
        lock(&self.shared.feeds).cameras.push(Feed {
            name: name.into(),
            ring,
            lane,
            in_flight: 0,
            held_by: 0,
            ended: false,
        });
        self.shared.doorbell.ring();
    }

    /// New thresholds and class filter for `[model]`'s lane (none when no camera runs it), applied
    /// by every worker before its next batch.
    pub fn reload(&self, params: DecodeParams) {
        self.reload_model(None, params);
    }

    /// [`Scheduler::reload`] for the lane of `[models.<name>]` (`None`: `[model]`'s).
    pub fn reload_model(&self, name: Option<&str>, params: DecodeParams) {
        if let Some(lane) = self.shared.lanes.iter().find(|lane| lane.name() == name) {
            let mut current = lock(&lane.params);
            *current = (current.0 + 1, params);
        }
    }

    pub fn report(&self) -> ScheduleReport {
        let shared = &self.shared;
        let cameras = lock(&shared.feeds).cameras.len();
        let batch_sizes: BTreeMap<usize, u64> = shared
            .stats
            .by_size
            .iter()
            .enumerate()
            .map(|(index, count)| (index + 1, count.load(Ordering::Relaxed)))
            .filter(|(_, count)| *count > 0)
            .collect();
        let batches = batch_sizes.values().sum();
        let frames = batch_sizes.iter().map(|(size, count)| *size as u64 * count).sum();
        ScheduleReport {
            workers: shared.plan.workers,
            cameras,
            max_batch: shared.stats.max_batch.load(Ordering::Relaxed),
            batches,
            frames,
            batch_sizes,
            memory: MemoryReport::new(shared.sessions(), cameras, shared.lanes[0].backend.session_memory()),
        }
    }

    /// Waits for the workers (after the stop flag was set).
    pub fn join(&self) -> Result<(), PipelineError> {
        let threads = std::mem::take(&mut *lock(&self.workers));
        let mut outcome = Ok(());
        for WorkerThread { name, handle } in threads {
            if handle.join().is_err() {
                outcome = Err(PipelineError::Panicked { camera: name });
            }
        }
        outcome
    }
}

fn worker_name(index: usize) -> String {
    format!("inference worker {index}")
}

impl Shared {
    /// Whether worker `seat` runs two sessions that take turns: where every lane's backend
    /// overlaps preprocessing with inference.
    fn overlaps(&self, seat: WorkerSeat) -> bool {
        self.lanes.iter().all(|lane| lane.backend.overlaps_preprocessing(seat))
    }

    /// Sessions of each model the workers hold: one per worker, two per overlapping one.
    fn sessions(&self) -> usize {
        let workers = self.plan.workers;
        (0..workers).map(|index| if self.overlaps(WorkerSeat { index, workers }) { 2 } else { 1 }).sum()
    }

    fn run_worker(&self, index: usize, name: &str, liveness: &LivenessHandle) -> Result<(), PipelineError> {
        let (mut models, mut work) = self.open_sessions(index, liveness)?;
        let mut limits: Vec<usize> = models.iter().map(|model| model.limit).collect();
        let mut batch: Vec<Taken> = Vec::with_capacity(self.plan.max_batch);
        while !self.stop.load(Ordering::SeqCst) {
            for (model, lane) in models.iter_mut().zip(&self.lanes) {
                model.decode.adopt_params(lane, name);
            }
            let rung = self.doorbell.rung();
            self.gather(index, &mut batch, &limits);
            if batch.is_empty() {
                // Idle because no frame came: alive, not hung.
                self.doorbell.wait(rung, POLL);
                liveness.beat();
                continue;
            }
            self.fill_within_timeout(index, &mut batch, &limits);
            liveness.enter(Stage::Infer);
            let lane = batch[0].lane;
            let outcome = work.run(&mut models[lane], &self.lanes[lane], &batch, self.sink.as_ref());
            self.stats.by_size[batch.len() - 1].fetch_add(1, Ordering::Relaxed);
            self.give_back(&mut batch);
            liveness.beat();
            outcome?;
            // A session that swapped backends between frames (the CPU serving a model until its
            // engine took over) may take other batches from its next frame on.
            let now = models[lane].session.max_batch().min(self.plan.max_batch).max(1);
            if now != limits[lane] {
                limits[lane] = now;
                models[lane].limit = now;
                self.stats.max_batch.store(now, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// One of the two threads of overlapping worker `index` ([`Backend::overlaps_preprocessing`]):
    /// takes one frame at a time, preprocesses it while the other thread's inference runs, then
    /// runs its inference and delivers it when `turns` says (in the order the two took frames).
    fn run_overlapping(
        &self,
        index: usize,
        name: &str,
        liveness: &LivenessHandle,
        turns: &Turns,
    ) -> Result<(), PipelineError> {
        let (mut models, mut work) = self.open_sessions(index, liveness)?;
        let mut batch: Vec<Taken> = Vec::with_capacity(1);
        while !self.stop.load(Ordering::SeqCst) {
            let rung = self.doorbell.rung();
            let Some(ticket) = self.take_one(index, &mut batch, turns) else {
                self.doorbell.wait(rung, POLL);
                liveness.beat();
                continue;
            };
            liveness.enter(Stage::Infer);
            let taken = &batch[0];
            let (model, lane) = (&mut models[taken.lane], &self.lanes[taken.lane]);
            let started = Instant::now();
            let prepared = model.session.prepare(&taken.slot, turns.inference_ahead(ticket));
            let turn_wait_started = Instant::now();
            if !turns.wait_to_infer(ticket, &self.stop) {
                self.give_back(&mut batch);
                break;
            }
            let turn_wait = turn_wait_started.elapsed();
            let inferred = prepared.and_then(|()| model.session.infer());
            turns.inferred(ticket);
            if !turns.wait_to_deliver(ticket, &self.stop) {
                self.give_back(&mut batch);
                break;
            }
            // Decode parameters are adopted in delivery order, as one worker would: every frame
            // delivered after either thread reloaded them was decoded with them.
            model.decode.adopt_params(lane, name);
            let spec = lane.backend.spec();
            let decoder = &mut model.decode.decoder;
            let outcome = inferred.map_err(FrameError::Backend).and_then(|(outputs, backend_timings)| {
                decode_frame(decoder, spec, &taken.slot, outputs, backend_timings, &mut work.detections)
            });
            let delivered = work.deliver(taken, started, turn_wait, outcome, lane, self.sink.as_ref());
            turns.delivered(ticket);
            self.stats.by_size[0].fetch_add(1, Ordering::Relaxed);
            self.give_back(&mut batch);
            liveness.beat();
            delivered?;
        }
        Ok(())
    }

    /// A session of every lane and of every classifier for worker `index`, opened on this thread.
    fn open_sessions(
        &self,
        index: usize,
        liveness: &LivenessHandle,
    ) -> Result<(Vec<ModelSession>, WorkerState), PipelineError> {
        // All created here on the worker's thread (on the GPU: on its one stream, their contexts
        // on its one arena), each on the worker's seat: its share of the cores applies to every
        // model's session.
        let seat = WorkerSeat { index, workers: self.plan.workers };
        let mut models = Vec::with_capacity(self.lanes.len());
        for lane in &self.lanes {
            let model = ModelSession::open(lane, self.plan.max_batch, seat)?;
            liveness.beat();
            self.stats.max_batch.fetch_min(model.limit, Ordering::Relaxed);
            models.push(model);
        }
        let classifiers = Classifiers::open(Arc::clone(&self.classifiers), seat)
            .map_err(|source| PipelineError::Worker { source })?;
        liveness.beat();
        Ok((models, WorkerState { detections: Vec::new(), row_outputs: ModelOutputs::default(), classifiers }))
    }

    /// Takes one ready frame for a thread of overlapping worker `worker`, round robin, with its
    /// ticket: the next frame of a camera whose previous one this worker holds, when the camera's
    /// ring has a slot left for the camera to fill; or a frame of a camera with none in flight,
    /// unless this worker holds a frame while another holds none (that one should take it: two
    /// cameras on one worker's cores while another worker's cores idle would halve the pair's
    /// rate). Tells the sink about cameras that ended.
    fn take_one(&self, worker: usize, batch: &mut Vec<Taken>, turns: &Turns) -> Option<u64> {
        let mut ended = Vec::new();
        let mut ticket = None;
        {
            let mut feeds = lock(&self.feeds);
            let count = feeds.cameras.len();
            let start = feeds.next;
            let mine = feeds.held.get(worker).copied().unwrap_or(0);
            let another_idle = feeds.held.iter().enumerate().any(|(other, held)| other != worker && *held == 0);
            let may_take_new = mine == 0 || !another_idle;
            for offset in 0..count {
                let index = (start + offset) % count;
                let feed = &mut feeds.cameras[index];
                let free = (feed.in_flight == 0 && may_take_new)
                    || (feed.in_flight == 1 && feed.held_by == worker && feed.ring.slot_count() > 2);
                if !free || feed.ended {
                    continue;
                }
                if let Some(slot) = feed.ring.try_take_ready() {
                    batch.push(feeds.take(index, worker, slot));
                    ticket = Some(turns.issue());
                    break;
                } else if feed.in_flight == 0 && feed.ring.is_finished() {
                    feed.ended = true;
                    ended.push(Arc::clone(&feed.name));
                }
            }
        }
        for name in ended {
            self.sink.camera_ended(&name, &Ok(()));
        }
        ticket
    }

    /// Takes up to its lane's limit of frames in all, at most one per camera and all of the lane of
    /// the first one taken, round robin from where the last round stopped. Tells the sink about
    /// cameras whose ring has closed and drained.
    fn gather(&self, worker: usize, batch: &mut Vec<Taken>, limits: &[usize]) {
        let mut ended = Vec::new();
        {
            let mut feeds = lock(&self.feeds);
            let count = feeds.cameras.len();
            let start = feeds.next;
            for offset in 0..count {
                if batch.first().is_some_and(|first| batch.len() >= limits[first.lane]) {
                    break;
                }
                let index = (start + offset) % count;
                let feed = &mut feeds.cameras[index];
                let other_lane = batch.first().is_some_and(|first| first.lane != feed.lane);
                if feed.in_flight > 0 || feed.ended || other_lane {
                    continue;
                }
                if let Some(slot) = feed.ring.try_take_ready() {
                    batch.push(feeds.take(index, worker, slot));
                } else if feed.ring.is_finished() {
                    feed.ended = true;
                    ended.push(Arc::clone(&feed.name));
                }
            }
        }
        for name in ended {
            self.sink.camera_ended(&name, &Ok(()));
        }
    }

    /// With `engine.batch_timeout_ms`, waits up to that long for other cameras' frames to fill a
    /// batch that has room left.
    fn fill_within_timeout(&self, worker: usize, batch: &mut Vec<Taken>, limits: &[usize]) {
        let limit = batch.first().map_or(1, |first| limits[first.lane]);
        if self.plan.batch_timeout.is_zero() || batch.len() >= limit {
            return;
        }
        let deadline = Instant::now() + self.plan.batch_timeout;
        loop {
            let rung = self.doorbell.rung();
            self.gather(worker, batch, limits);
            let now = Instant::now();
            if batch.len() >= limit || now >= deadline || self.stop.load(Ordering::SeqCst) {
                return;
            }
            self.doorbell.wait(rung, deadline - now);
        }
    }

    /// Returns the slots to their rings and lets the cameras be served again.
    fn give_back(&self, batch: &mut Vec<Taken>) {
        let mut feeds = lock(&self.feeds);
        for taken in batch.drain(..) {
            taken.ring.release(taken.slot);
            let Some(feed) = feeds.cameras.get_mut(taken.feed) else { continue };
            feed.in_flight = feed.in_flight.saturating_sub(1);
            let worker = feed.held_by;
            if let Some(held) = feeds.held.get_mut(worker) {
                *held = held.saturating_sub(1);
            }
        }
        drop(feeds);
        self.doorbell.ring();
    }
}

/// A worker's reusable buffers, whichever model it runs.
struct WorkerState {
    detections: Vec<Detection>,
    /// One frame's share of batched outputs.
    row_outputs: ModelOutputs,
    /// The worker's sessions of every classifier, lent to the sink with each frame.
    classifiers: Classifiers,
}

impl WorkerState {
    /// Runs the frames of `batch` (one inference when the session batches, else one after another),
    /// decodes each and hands it to the sink. A frame the preprocessor rejects is skipped with a
    /// warning; any other backend or decode failure ends the worker.
    fn run(
        &mut self,
        model: &mut ModelSession,
        lane: &ModelLane,
        batch: &[Taken],
        sink: &dyn FrameSink,
    ) -> Result<(), PipelineError> {
        let spec = lane.backend.spec();
        if batch.len() > 1 {
            let slots: Vec<&FrameSlot> = batch.iter().map(|taken| &taken.slot).collect();
            let started = Instant::now();
            match model.session.run_batch(&slots) {
                Ok((outputs, backend_timings)) => {
                    for (row, taken) in batch.iter().enumerate() {
                        let decoded = outputs
                            .row_into(row, batch.len(), &mut self.row_outputs)
                            .map_err(FrameError::Decode)
                            .and_then(|()| {
                                decode_frame(
                                    &mut model.decode.decoder,
                                    spec,
                                    &taken.slot,
                                    &self.row_outputs,
                                    backend_timings,
                                    &mut self.detections,
                                )
                            });
                        self.deliver(taken, started, Duration::ZERO, decoded, lane, sink)?;
                    }
                    return Ok(());
                }
                // One bad frame must not cost the others theirs: run them one by one below, so
                // that only it is skipped.
                Err(BackendError::Preprocess(_)) => {}
                Err(source) => return Err(PipelineError::Worker { source }),
            }
        }
        for taken in batch {
            let started = Instant::now();
            let outcome =
                process(&mut *model.session, &mut model.decode.decoder, spec, &taken.slot, &mut self.detections);
            self.deliver(taken, started, Duration::ZERO, outcome, lane, sink)?;
        }
        Ok(())
    }

    /// Hands a frame's outcome to the sink; `started` is when its preprocessing began, so the time
    /// it waited in its ring since the source published it, with `queued` (its wait for the
    /// inference turn, between preprocessing and inference), becomes the `wait` stage (and part of
    /// `total`, which runs from the hand-over to the message).
    fn deliver(
        &mut self,
        taken: &Taken,
        started: Instant,
        queued: Duration,
        outcome: Result<crate::frame::FrameTimings, FrameError>,
        lane: &ModelLane,
        sink: &dyn FrameSink,
    ) -> Result<(), PipelineError> {
        let camera = &*taken.name;
        match outcome {
            Ok(mut timings) => {
                if let Some(class_ids) = &lane.class_ids {
                    self.detections.retain_mut(|detection| match class_ids.get(detection.class_id) {
                        Some(&shared) => {
                            detection.class_id = shared;
                            true
                        }
                        None => false,
                    });
                }
                if let Some(ready) = taken.slot.ready_at() {
                    let wait = started.saturating_duration_since(ready) + queued;
                    timings.wait = Some(wait);
                    timings.total = timings.total.map(|total| total + wait);
                }
                log::debug!(
                    "camera {camera} frame {}: {timings:?} ({} detections)",
                    taken.slot.meta().sequence,
                    self.detections.len()
                );
                sink.frame(camera, &taken.slot, &self.detections, &timings, &mut self.classifiers);
                Ok(())
            }
            // A frame the preprocessor cannot take (odd size, truncated data) is one bad frame,
            // not a broken pipeline.
            Err(FrameError::Backend(BackendError::Preprocess(message))) => {
                log::warn!("camera {camera} frame {}: skipped: {message}", taken.slot.meta().sequence);
                Ok(())
            }
            Err(FrameError::Backend(source)) => Err(PipelineError::Worker { source }),
            Err(FrameError::Decode(message)) => Err(PipelineError::Decode { camera: camera.to_string(), message }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::backend::{BackendInfo, BackendTimings, SessionMemory};
    use crate::config::{CameraConfig, ClassScores, DecoderKind, SourceConfig};
    use crate::infer::camera::{CameraPipeline, PipelineShared};
    use crate::model::OutputTensor;
    use crate::preprocess::PreprocessSpec;

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
    }

    impl FrameSink for RecordingSink {
        fn frame(
            &self,
            camera: &str,
            slot: &FrameSlot,
            _: &[Detection],
            timings: &crate::frame::FrameTimings,
            _: &mut Classifiers,
        ) {
            lock(&self.frames).entry(camera.to_string()).or_default().push(slot.meta().sequence);
            lock(&self.timings).push(*timings);
        }
        fn camera_ended(&self, camera: &str, _: &Result<(), PipelineError>) {
            lock(&self.ended).push(camera.to_string());
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
            source: SourceConfig::Synthetic { width: 64 + 2 * index as u32, height: 48 },
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
        fn start_overlapping(
            cameras: usize,
            plan: SchedulePlan,
            inference_time: Duration,
            prepare_time: Duration,
        ) -> Rig {
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
        let scheduler =
            Scheduler::start_lanes(lanes, Arc::from(Vec::new()), plan, sink.clone(), stop.clone(), &liveness)
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
            assert!(
                batches.iter().any(|batch| batch.len() == 2),
                "a model's cameras are batched together: {batches:?}"
            );
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
        let mut state = WorkerState {
            detections: Vec::new(),
            row_outputs: ModelOutputs::default(),
            classifiers: Classifiers::none(),
        };
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
            .deliver(&taken, Instant::now(), Duration::ZERO, Ok(crate::frame::FrameTimings::default()), &lane, &sink)
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
        let rig =
            Rig::start_overlapping(2, plan(1, 1, Duration::ZERO), Duration::from_millis(4), Duration::from_millis(2));
        rig.wait_for_frames_of_every_camera(30);
        let Stopped { sink, record, report, .. } = rig.stop();
        assert_eq!(record.sessions.load(Ordering::SeqCst), 2, "two sessions take turns");
        assert_eq!(record.most_at_once.load(Ordering::SeqCst), 1, "one inference at a time on the worker's cores");
        assert_eq!(record.overlaps.load(Ordering::SeqCst), 0);
        assert!(
            record.prepared_beside_inference.load(Ordering::SeqCst) > 0,
            "no frame was prepared beside an inference"
        );
        for (camera, sequences) in lock(&sink.frames).iter() {
            assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{camera} out of order: {sequences:?}");
        }
        assert_eq!((report.workers, report.memory.contexts), (1, 2));
        assert_eq!(report.frames as usize, sink.counts().iter().sum::<usize>());
    }

    #[test]
    fn two_overlapping_workers_serve_two_cameras_one_each_rather_than_both_on_one() {
        let rig =
            Rig::start_overlapping(2, plan(2, 1, Duration::ZERO), Duration::from_millis(4), Duration::from_millis(2));
        rig.wait_for_frames_of_every_camera(30);
        let Stopped { record, .. } = rig.stop();
        assert_eq!(record.sessions.load(Ordering::SeqCst), 4, "two sessions per worker");
        assert!(record.most_at_once.load(Ordering::SeqCst) <= 2, "one inference at a time per worker");
        let by_worker = lock(&record.inferences_by_worker).clone();
        let total: usize = by_worker.values().sum();
        // A worker takes a second camera only while no other worker is idle, so neither worker
        // ends up with both cameras' frames.
        assert!(
            by_worker.len() == 2 && by_worker.values().all(|n| n * 4 >= total),
            "inferences by worker: {by_worker:?}"
        );
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
            classifiers: Arc::from(Vec::new()),
            lanes: vec![ModelLane::new(backend, params())],
            sink: Arc::new(RecordingSink::default()),
            stop: Arc::new(AtomicBool::new(false)),
            plan: plan(1, 1, Duration::ZERO),
            feeds: Mutex::new(Feeds { cameras: feeds, next: 0, held: vec![0] }),
            doorbell: Doorbell::new(),
            stats: BatchStats { by_size: vec![AtomicU64::new(0)], max_batch: AtomicUsize::new(1) },
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
        assert!(
            runs_after_stop <= 1,
            "{runs_after_stop} frames were run after the stop request (one may be in flight)"
        );
    }

    #[test]
    fn a_finite_camera_ends_once_its_last_frame_is_through() {
        let config = Config::embedded_default().expect("embedded default config");
        let record = Arc::new(Record::default());
        let backend = Arc::new(FakeBackend {
            spec: config.model.input.clone(),
            session_batch: 1,
            workers: 1,
            inference_time: Duration::from_millis(1),
            prepare_time: None,
            record,
        });
        let sink = Arc::new(RecordingSink::default());
        let stop = Arc::new(AtomicBool::new(false));
        let scheduler = Scheduler::start(
            backend,
            params(),
            plan(1, 1, Duration::ZERO),
            sink.clone(),
            stop.clone(),
            &Liveness::new(),
        )
        .expect("start");
        let ring = Arc::new(FrameRing::with_doorbell(
            (0..2).map(|_| FrameSlot::new(Box::new(crate::frame::HeapMemory::default()))).collect(),
            scheduler.doorbell(),
        ));
        scheduler.add_camera("once", Arc::clone(&ring));
        let mut slot = ring.acquire_for_write().expect("slot");
        slot.prepare(64, 48, crate::frame::PixelFormat::Rgb8).expect("prepare");
        ring.publish(slot);
        ring.close();
        let deadline = Instant::now() + Duration::from_secs(60);
        while lock(&sink.ended).is_empty() {
            assert!(Instant::now() < deadline, "the camera never ended");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(sink.counts(), [1], "its last frame was run before it ended");
        assert_eq!(*lock(&sink.ended), ["once"]);
        stop.store(true, Ordering::SeqCst);
        scheduler.join().expect("join");
    }
}
