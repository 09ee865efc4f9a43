//! Serving a model on the CPU while its engine is acquired, and the live swap to the engine.
//!
//! Owns: [`HandoverBackend`], the backend the scheduler runs for a model whose engine is being
//! fetched or built: one inference worker (a GPU engine's count), whose session runs the CPU
//! backend's session until the engine is handed over ([`Handover::offer`]), and then, at the start
//! of its next frame (on the worker's own thread, between two frames: nothing in flight, the
//! sink sees the frames in order), creates the engine's session and drops the CPU one. The CPU
//! backend is let go at the offer, so its memory goes back once the last CPU session has swapped.
//! Meanwhile the sessions keep a few recent frames ([`RecentFrames`]) that the engine is checked
//! on before it is offered. Frame slots come from the engine's toolchain from the start
//! (page-locked on a GPU), so the cameras never change their slots.
//! Must not: build, check or decide anything about the engine (`crate::infer::engine_build` does),
//! or create an engine session off the worker's thread.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::engine::Toolchain;
use super::error::BackendError;
use super::traits::{Backend, BackendInfo, BackendTimings, InferenceSession, SessionMemory, WorkerSeat};
use crate::frame::{FrameCopy, FrameSlot, SlotMemory};
use crate::model::ModelOutputs;
use crate::motion::LumaSampler;
use crate::preprocess::{PreprocessSpec, Roi};
use crate::sys::lock::lock;

/// Recent frames kept for the engine's check: at most this many ...
const RECENT_FRAMES: usize = 6;
/// ... of at most this many bytes together (six 1080p YUYV frames take 24 MiB) ...
const RECENT_BYTES: usize = 32 << 20;
/// ... one at most this often, so that they show more than one moment.
const RECENT_EVERY: Duration = Duration::from_secs(1);

/// The last few frames the CPU served, copied (bounded in count and bytes).
#[derive(Default)]
pub struct RecentFrames {
    frames: Mutex<(VecDeque<FrameCopy>, Option<Instant>)>,
}

impl RecentFrames {
    /// Keeps a copy of the frame in `slot` when the last one kept is [`RECENT_EVERY`] old,
    /// dropping the oldest beyond the bounds.
    fn offer(&self, slot: &FrameSlot) {
        let mut frames = lock(&self.frames);
        if frames.1.is_some_and(|last| last.elapsed() < RECENT_EVERY) || slot.data().len() > RECENT_BYTES {
            return;
        }
        frames.1 = Some(Instant::now());
        frames.0.push_back(FrameCopy::of(slot));
        while frames.0.len() > RECENT_FRAMES || frames.0.iter().map(|f| f.data.len()).sum::<usize>() > RECENT_BYTES {
            frames.0.pop_front();
        }
    }

    /// The frames kept, oldest first.
    pub fn snapshot(&self) -> Vec<FrameCopy> {
        lock(&self.frames).0.iter().cloned().collect()
    }
}

/// What the sessions of one [`HandoverBackend`] share with whoever acquires the engine.
#[derive(Default)]
pub struct Handover {
    engine: Mutex<Option<Arc<dyn Backend>>>,
    offered: AtomicBool,
    /// Sessions alive, and those of them on the engine (start-up's checks open and drop some).
    sessions: AtomicUsize,
    swapped: AtomicUsize,
    /// Why a session could not open the engine's (it stays on the CPU).
    failure: Mutex<Option<String>>,
    recent: RecentFrames,
}

impl Handover {
    /// Hands `engine` to the sessions: each swaps to it at the start of its next frame.
    pub fn offer(&self, engine: Arc<dyn Backend>) {
        *lock(&self.engine) = Some(engine);
        self.offered.store(true, Ordering::Release);
    }

    /// The engine, once offered.
    pub fn engine(&self) -> Option<Arc<dyn Backend>> {
        lock(&self.engine).clone()
    }

    /// Whether every session alive runs on the engine (and at least one is alive).
    pub fn swapped(&self) -> bool {
        let sessions = self.sessions.load(Ordering::Acquire);
        sessions > 0 && self.swapped.load(Ordering::Acquire) >= sessions
    }

    /// Why a session stayed on the CPU after the offer, if one did.
    pub fn failure(&self) -> Option<String> {
        lock(&self.failure).clone()
    }

    /// The frames the CPU served lately, for the engine's check.
    pub fn recent_frames(&self) -> Vec<FrameCopy> {
        self.recent.snapshot()
    }
}

/// A model served on the CPU until its engine is handed over (see the module doc).
pub struct HandoverBackend {
    cpu: Mutex<Option<Arc<dyn Backend>>>,
    toolchain: Arc<dyn Toolchain>,
    spec: PreprocessSpec,
    handover: Arc<Handover>,
}

impl HandoverBackend {
    /// Serves on `cpu` until `handover` offers the engine `toolchain` makes.
    pub fn new(cpu: Arc<dyn Backend>, toolchain: Arc<dyn Toolchain>, handover: Arc<Handover>) -> HandoverBackend {
        let spec = cpu.spec().clone();
        HandoverBackend { cpu: Mutex::new(Some(cpu)), toolchain, spec, handover }
    }

    /// The backend that serves new sessions now: the engine once offered (the CPU is let go
    /// then), else the CPU.
    fn current(&self) -> Option<Arc<dyn Backend>> {
        if let Some(engine) = self.handover.engine() {
            lock(&self.cpu).take();
            return Some(engine);
        }
        lock(&self.cpu).clone()
    }

    fn session(&self, seat: WorkerSeat) -> Result<Box<dyn InferenceSession>, BackendError> {
        let current = self.current().ok_or_else(|| BackendError::Inference("no backend to serve".into()))?;
        let on_engine = self.handover.engine().is_some();
        let inner = current.new_worker_session(seat)?;
        self.handover.sessions.fetch_add(1, Ordering::AcqRel);
        if on_engine {
            self.handover.swapped.fetch_add(1, Ordering::AcqRel);
        }
        Ok(Box::new(HandoverSession { inner, on_engine, gave_up: false, handover: self.handover.clone(), seat }))
    }
}

impl Backend for HandoverBackend {
    fn info(&self) -> BackendInfo {
        match self.current() {
            Some(backend) if self.handover.engine().is_some() => backend.info(),
            Some(cpu) => {
                let mut info = cpu.info();
                info.detail.push_str(&format!(", serving while the {} engine is built", self.toolchain.target().kind));
                info
            }
            None => BackendInfo { kind: "cpu", model: String::new(), detail: String::new() },
        }
    }

    fn spec(&self) -> &PreprocessSpec {
        &self.spec
    }

    fn threads(&self) -> Option<usize> {
        self.current().and_then(|backend| backend.threads())
    }

    fn engine(&self) -> Option<String> {
        self.current().and_then(|backend| backend.engine())
    }

    /// One worker, as the engine will have: the CPU serves on it meanwhile.
    fn inference_workers(&self, _cameras: usize) -> usize {
        1
    }

    fn session_memory(&self) -> SessionMemory {
        self.current().map(|backend| backend.session_memory()).unwrap_or_default()
    }

    fn new_session(&self) -> Result<Box<dyn InferenceSession>, BackendError> {
        self.session(WorkerSeat { index: 0, workers: 1 })
    }

    fn new_worker_session(&self, seat: WorkerSeat) -> Result<Box<dyn InferenceSession>, BackendError> {
        self.session(seat)
    }

    fn slot_memory(&self) -> Result<Box<dyn SlotMemory>, BackendError> {
        self.toolchain.slot_memory()
    }

    /// The toolchain's, as its slots are the cameras' from the start.
    fn luma_sampler(&self) -> Result<Option<Box<dyn LumaSampler>>, BackendError> {
        self.toolchain.luma_sampler()
    }
}

/// A worker's session: the CPU's, then the engine's.
struct HandoverSession {
    inner: Box<dyn InferenceSession>,
    on_engine: bool,
    /// The engine's session could not be created: this one stays on the CPU.
    gave_up: bool,
    handover: Arc<Handover>,
    seat: WorkerSeat,
}

impl HandoverSession {
    /// At a frame boundary: swaps to the engine once it is offered; keeps recent frames until then.
    fn before_frame(&mut self, slot: &FrameSlot) {
        if self.on_engine || self.gave_up {
            return;
        }
        if !self.handover.offered.load(Ordering::Acquire) {
            self.handover.recent.offer(slot);
            return;
        }
        let Some(engine) = self.handover.engine() else { return };
        let started = Instant::now();
        match engine.new_worker_session(self.seat) {
            Ok(session) => {
                self.inner = session;
                self.on_engine = true;
                self.handover.swapped.fetch_add(1, Ordering::AcqRel);
                log::info!(
                    "inference worker {}: now on the {} engine ({} ms to open its session)",
                    self.seat.index,
                    engine.info().kind,
                    started.elapsed().as_millis()
                );
            }
            Err(error) => {
                self.gave_up = true;
                let why = format!("the engine's session could not be opened ({error}); the CPU keeps serving");
                log::error!("inference worker {}: {why}", self.seat.index);
                *lock(&self.handover.failure) = Some(why);
            }
        }
    }
}

impl Drop for HandoverSession {
    fn drop(&mut self) {
        self.handover.sessions.fetch_sub(1, Ordering::AcqRel);
        if self.on_engine {
            self.handover.swapped.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl InferenceSession for HandoverSession {
    fn run(&mut self, slot: &FrameSlot) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        self.before_frame(slot);
        self.inner.run(slot)
    }

    fn max_batch(&self) -> usize {
        self.inner.max_batch()
    }

    fn run_batch(&mut self, slots: &[&FrameSlot]) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        if let Some(first) = slots.first() {
            self.before_frame(first);
        }
        // A batch taken for the CPU's limit fits the engine's (at least 1).
        self.inner.run_batch(slots)
    }

    fn run_regions(&mut self, slot: &FrameSlot, rois: &[Roi]) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
        self.before_frame(slot);
        self.inner.run_regions(slot, rois)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::backend::engine::{
        BuildInput, BuildOutput, BuildTarget, EngineError, EngineFile, EngineOrigin, Progress,
    };
    use crate::config::Config;
    use crate::frame::{HeapMemory, PixelFormat};
    use crate::model::{ModelSpec, OutputTensor};

    /// A backend whose sessions answer with one tensor named after it, and that counts them.
    struct Named {
        name: &'static str,
        spec: PreprocessSpec,
        batch: usize,
        fails: bool,
    }

    struct NamedSession {
        outputs: ModelOutputs,
        batch: usize,
    }

    impl Backend for Named {
        fn info(&self) -> BackendInfo {
            BackendInfo { kind: self.name, model: String::new(), detail: String::new() }
        }
        fn spec(&self) -> &PreprocessSpec {
            &self.spec
        }
        fn new_session(&self) -> Result<Box<dyn InferenceSession>, BackendError> {
            if self.fails {
                return Err(BackendError::Inference("out of device memory".into()));
            }
            let tensor = OutputTensor { name: self.name.into(), shape: vec![1], data: vec![0.0] };
            Ok(Box::new(NamedSession { outputs: ModelOutputs { tensors: vec![tensor] }, batch: self.batch }))
        }
    }

    impl InferenceSession for NamedSession {
        fn run(&mut self, _slot: &FrameSlot) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
            Ok((&self.outputs, BackendTimings::default()))
        }
        fn max_batch(&self) -> usize {
            self.batch
        }
    }

    /// A toolchain that only hands out frame slots (the hand-over never builds).
    struct Slots(BuildTarget);

    impl Toolchain for Slots {
        fn target(&self) -> &BuildTarget {
            &self.0
        }
        fn build(
            &self,
            _input: &BuildInput<'_>,
            _progress: &mut dyn FnMut(Progress),
            _cancel: &AtomicBool,
        ) -> Result<BuildOutput, EngineError> {
            unreachable!("the hand-over never builds")
        }
        fn load(
            &self,
            _model: &ModelSpec,
            _engine: EngineFile<'_>,
            _origin: &EngineOrigin,
        ) -> Result<Arc<dyn Backend>, EngineError> {
            unreachable!("the hand-over never loads")
        }
    }

    fn named(name: &'static str, batch: usize, fails: bool) -> Arc<dyn Backend> {
        let spec = Config::embedded_default().expect("the default config").model.input;
        Arc::new(Named { name, spec, batch, fails })
    }

    fn handover_backend() -> (HandoverBackend, Arc<Handover>) {
        let target = BuildTarget {
            kind: "fake",
            version: String::new(),
            builder: String::new(),
            device: crate::backend::engine::device_key::DeviceIdentity {
                name: String::new(),
                compute_capability: (0, 0),
                multiprocessors: 0,
                total_memory_bytes: 0,
                board: String::new(),
            },
            phases_reported: true,
        };
        let handover = Arc::new(Handover::default());
        (HandoverBackend::new(named("cpu", 1, false), Arc::new(Slots(target)), handover.clone()), handover)
    }

    fn frame(width: u32) -> FrameSlot {
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        slot.prepare(width, 2, PixelFormat::Rgb8).expect("a frame").fill(1);
        slot
    }

    fn ran_on(session: &mut Box<dyn InferenceSession>, slot: &FrameSlot) -> String {
        session.run(slot).expect("a run").0.tensors[0].name.clone()
    }

    #[test]
    fn sessions_run_the_cpu_until_the_engine_is_offered_then_swap_at_their_next_frame() {
        let (backend, handover) = handover_backend();
        assert_eq!(backend.inference_workers(8), 1, "one worker, as the engine will have");
        let mut session = backend.new_worker_session(WorkerSeat { index: 0, workers: 1 }).expect("a session");
        assert_eq!((ran_on(&mut session, &frame(4)), session.max_batch()), ("cpu".to_owned(), 1));
        assert!(!handover.swapped());
        handover.offer(named("engine", 4, false));
        assert_eq!(backend.info().kind, "engine", "new sessions and the info are the engine's at once");
        assert!(!handover.swapped(), "the worker's session swaps at its next frame, not before");
        assert_eq!(ran_on(&mut session, &frame(4)), "engine");
        assert_eq!(session.max_batch(), 4, "the engine's batches from then on");
        assert!(handover.swapped());
        assert!(lock(&backend.cpu).is_none(), "the CPU backend is let go");
    }

    #[test]
    fn an_engine_session_that_cannot_open_leaves_the_cpu_serving_and_says_why() {
        let (backend, handover) = handover_backend();
        let mut session = backend.new_session().expect("a session");
        handover.offer(named("engine", 1, true));
        assert_eq!(ran_on(&mut session, &frame(4)), "cpu");
        assert_eq!(ran_on(&mut session, &frame(4)), "cpu", "tried once, not at every frame");
        assert!(!handover.swapped());
        assert!(handover.failure().is_some_and(|why| why.contains("out of device memory")), "{:?}", handover.failure());
    }

    #[test]
    fn sessions_dropped_before_the_swap_do_not_hold_it_back() {
        let (backend, handover) = handover_backend();
        drop(backend.new_session().expect("start-up's check of the model"));
        let mut session = backend.new_session().expect("the worker's");
        handover.offer(named("engine", 1, false));
        ran_on(&mut session, &frame(4));
        assert!(handover.swapped(), "every session alive runs the engine");
    }

    #[test]
    fn recent_frames_are_copied_at_most_once_a_second_and_stop_at_the_swap() {
        let (backend, handover) = handover_backend();
        let mut session = backend.new_session().expect("a session");
        ran_on(&mut session, &frame(4));
        ran_on(&mut session, &frame(6));
        let kept = handover.recent_frames();
        assert_eq!(kept.iter().map(|frame| frame.width).collect::<Vec<_>>(), [4], "the second came too soon");
        let recent = RecentFrames::default();
        for width in 1..=(RECENT_FRAMES as u32 + 2) {
            // As if the last frame was kept long ago.
            lock(&recent.frames).1 = None;
            recent.offer(&frame(width * 2));
        }
        let widths: Vec<u32> = recent.snapshot().iter().map(|frame| frame.width).collect();
        assert_eq!(widths.len(), RECENT_FRAMES, "bounded: {widths:?}");
        assert_eq!(widths.last(), Some(&(RECENT_FRAMES as u32 * 2 + 4)), "the newest kept: {widths:?}");
    }
}
