//! The workers' threads: the [`Scheduler`] starts them (two for an overlapping worker), feeds them
//! cameras, passes them reloaded decode parameters, reports on them and joins them; a worker whose
//! body fails stops every camera and tells the sink.
//!
//! Owns: [`Scheduler`] and the workers' threads. Must not: choose frames or run inference (the
//! worker's loop does: `super::worker`, `super::overlap`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::feeds::{Feed, Feeds};
use super::lanes::ModelLane;
use super::plan::SchedulePlan;
use super::report::{BatchStats, ScheduleReport};
use super::shared::Shared;
use super::turns::Turns;
use crate::backend::{Backend, BackendError, MemoryReport, WorkerSeat};
use crate::decode::DecodeParams;
use crate::frame::{Doorbell, FrameRing};
use crate::infer::per_track::PerTrackLane;
use crate::infer::step::{FrameSink, PipelineError};
use crate::service::notify::{Liveness, LivenessHandle};
use crate::sys::lock::lock;

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
    /// first when a camera runs it) and the per-track models every worker holds a session of, which
    /// it lends the sink with the frames it gets.
    pub fn start_lanes(
        lanes: Vec<ModelLane>,
        per_track: Arc<[PerTrackLane]>,
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
            per_track,
            sink,
            stop,
            plan,
            feeds: Mutex::new(Feeds { held: vec![0; plan.workers], ..Feeds::default() }),
            doorbell: Doorbell::new(),
            stats: BatchStats::new(plan.max_batch),
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
        let lane = lanes.iter().position(|lane| lane.serves(name)).unwrap_or(0);
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
            lane.reload(params);
        }
    }

    pub fn report(&self) -> ScheduleReport {
        let shared = &self.shared;
        let cameras = lock(&shared.feeds).cameras.len();
        let batch_sizes = shared.stats.sizes();
        let batches = batch_sizes.values().sum();
        let frames = batch_sizes.iter().map(|(size, count)| *size as u64 * count).sum();
        ScheduleReport {
            workers: shared.plan.workers,
            cameras,
            max_batch: shared.stats.max_batch(),
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
